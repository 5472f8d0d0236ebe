// plan.yaml writer (see plan.h). yaml-cpp's emitter keeps key order as written, so the file is
// byte-deterministic.
#include "plan/plan.h"

#include "support/diagnostics.h"
#include "support/plan_schema.h"

#include <yaml-cpp/yaml.h>

#include <unordered_map>

namespace aicf {

const PlanBuffer *Plan::buffer(const std::string &id) const {
  for (const PlanBuffer &b : buffers)
    if (b.id == id)
      return &b;
  return nullptr;
}

std::string layoutString(const Plan &p) {
  std::unordered_map<std::string, const PlanBuffer *> byId;
  for (const PlanBuffer &b : p.buffers)
    byId.emplace(b.id, &b);
  std::string s;
  for (const PlanStep &st : p.steps) {
    if (st.kindId.empty())
      continue;
    s += st.kindId + ":";
    bool first = true;
    for (const auto *ids : {&st.inputs, &st.outputs})
      for (const std::string &id : *ids) {
        auto it = byId.find(id);
        const PlanBuffer *b = it == byId.end() ? nullptr : it->second;
        AICF_CHECK(b != nullptr, "step ", st.kindId, " names unknown buffer ", id);
        s += (first ? "" : ",") + std::to_string(b->bytes);
        first = false;
      }
    if (st.dims) // the dims' values follow the buffers (host ABI 2, symbolic kernels)
      s += ",dims";
    s += ";";
  }
  return s;
}

namespace {

namespace pk = plan_key;

// The key (a plan_key constant: every field is named in support/plan_schema.def) and the value
// marker; the caller writes the value.
YAML::Emitter &key(YAML::Emitter &y, const char *k) {
  return y << YAML::Key << k << YAML::Value;
}

void emitShape(YAML::Emitter &y, const std::vector<int64_t> &shape) {
  y << YAML::Flow << YAML::BeginSeq;
  for (int64_t d : shape)
    y << d;
  y << YAML::EndSeq;
}

// A buffer's shape: the dims' expressions when symbolic ("batch", "3*seq"), else the values.
void emitShape(YAML::Emitter &y, const PlanBuffer &b) {
  if (b.sym.empty())
    return emitShape(y, b.shape);
  y << YAML::Flow << YAML::BeginSeq;
  for (const SymExpr &d : b.sym)
    if (d.isConstant())
      y << d.constant();
    else
      y << d.str();
  y << YAML::EndSeq;
}

void emitKnobs(YAML::Emitter &y, const std::map<std::string, int64_t> &knobs) {
  y << YAML::Flow << YAML::BeginMap;
  for (const auto &[k, v] : knobs)
    y << YAML::Key << k << YAML::Value << v;
  y << YAML::EndMap;
}

void emitTarget(YAML::Emitter &y, const Plan &p) {
  key(y, pk::plan::target) << YAML::Flow << YAML::BeginMap;
  key(y, pk::target::kind) << (p.target.gpu() ? "cuda" : "cpu");
  key(y, pk::target::name) << p.target.name();
  key(y, pk::target::plan_for) << p.planFor.name();
  key(y, pk::target::cpu_arch) << p.cpuArch;
  // The instruction-set extensions libmodel.so's host code may use (from -march=cpu_arch); the
  // runtime refuses the folder on a CPU without one of them. Cuda plans' host code is built
  // without -march and needs none.
  if (!p.target.gpu())
    key(y, pk::target::isa) << YAML::Flow << p.isa;
  key(y, pk::target::hardware) << p.hardware;
  key(y, pk::target::schedule) << enumName(p.schedule);
  key(y, pk::target::precision) << precisionName(p.precision);
  y << YAML::EndMap;
}

// Symbolic dims: the runtime derives them from the inputs' shapes, in this order; a data dim
// (set_by) it reads from that buffer once the step writing it has run.
void emitDims(YAML::Emitter &y, const Plan &p) {
  if (p.dims.empty())
    return;
  key(y, pk::plan::dims) << YAML::BeginSeq;
  for (const DimRange &d : p.dims) {
    y << YAML::Flow << YAML::BeginMap;
    key(y, pk::dim::name) << d.name;
    key(y, pk::dim::min) << d.min;
    key(y, pk::dim::max) << d.max;
    key(y, pk::dim::opt) << d.opt;
    if (auto it = p.dimSetBy.find(d.name); it != p.dimSetBy.end())
      key(y, pk::dim::set_by) << it->second;
    y << YAML::EndMap;
  }
  y << YAML::EndSeq;
}

void emitIo(YAML::Emitter &y, const Plan &p, const char *section, BufferKind kind) {
  key(y, section) << YAML::BeginSeq;
  for (const PlanBuffer &b : p.buffers) {
    if (b.kind != kind)
      continue;
    y << YAML::Flow << YAML::BeginMap;
    key(y, pk::io::name) << b.value;
    key(y, pk::io::dtype) << dtypeName(b.dtype);
    key(y, pk::io::shape);
    emitShape(y, b);
    key(y, pk::io::buffer) << b.id;
    y << YAML::EndMap;
  }
  y << YAML::EndSeq;
}

void emitBoundInputs(YAML::Emitter &y, const Plan &p) {
  if (p.boundInputs.empty())
    return;
  key(y, pk::plan::bound_inputs) << YAML::BeginSeq;
  for (const BoundInput &b : p.boundInputs) {
    y << YAML::Flow << YAML::BeginMap;
    key(y, pk::bound_input::name) << b.name;
    key(y, pk::bound_input::dtype) << dtypeName(b.type.dtype);
    key(y, pk::bound_input::shape) << YAML::Flow << b.type.shape;
    key(y, pk::bound_input::from) << b.source;
    y << YAML::EndMap;
  }
  y << YAML::EndSeq;
}

// The weights, the arena and the plan's predicted totals.
void emitTotals(YAML::Emitter &y, const Plan &p) {
  key(y, pk::plan::weights) << YAML::BeginMap;
  key(y, pk::weights::file) << "weights.bin";
  key(y, pk::weights::bytes) << p.weightsBytes;
  y << YAML::EndMap;
  key(y, pk::plan::arena) << YAML::Flow << YAML::BeginMap;
  key(y, pk::arena::bytes) << p.arenaBytes;
  key(y, pk::arena::naive_bytes) << p.naiveArenaBytes;
  y << YAML::EndMap;
  key(y, pk::plan::lower_bound_bytes) << p.lowerBoundBytes;
  key(y, pk::plan::predicted_time_us) << p.predictedTimeUs;
}

// The roofline of the hardware planned for (report.html draws the steps against it): peak
// arithmetic of the plan's precision (tensor cores for tf32 / fp16 / bf16) and DRAM bandwidth.
void emitRoofline(YAML::Emitter &y, const Plan &p) {
  const Hardware &hw = p.planFor.hw;
  double peak = p.precision == Precision::F32    ? hw.peakFlops()
                : p.precision == Precision::TF32 ? hw.tensorTf32FlopsPerSec
                                                 : hw.tensorF16FlopsPerSec;
  if (peak <= 0)
    peak = hw.peakFlops();
  key(y, pk::plan::roofline) << YAML::Flow << YAML::BeginMap;
  key(y, pk::roofline::flops_per_s) << peak;
  key(y, pk::roofline::bytes_per_s) << hw.dramBytesPerSec;
  // Host plans: the last-level cache's bandwidth too (all cores), the roof of steps whose
  // data stays on chip between kernels.
  double llcPerCycle = hw.l3BytesPerCycle > 0 ? hw.l3BytesPerCycle : hw.l2BytesPerCycle;
  if (!hw.gpu && llcPerCycle > 0 && hw.ghz > 0 && hw.cores > 0)
    key(y, pk::roofline::cache_bytes_per_s) << llcPerCycle * hw.ghz * 1e9 * double(hw.cores);
  y << YAML::EndMap;
}

void emitAttention(YAML::Emitter &y, const Plan &p) {
  if (p.attention.empty())
    return;
  key(y, pk::plan::attention_lowering) << YAML::BeginSeq;
  for (const AttentionDecision &d : p.attention) {
    y << YAML::Flow << YAML::BeginMap;
    key(y, pk::attention::node) << d.node;
    key(y, pk::attention::choice) << (d.materialized ? "materialized" : "streaming");
    if (d.streamingUs >= 0)
      key(y, pk::attention::streaming_us) << d.streamingUs;
    else
      key(y, pk::attention::streaming) << d.streamingWhy;
    if (d.materializedUs >= 0)
      key(y, pk::attention::materialized_us) << d.materializedUs;
    else
      key(y, pk::attention::materialized) << d.materializedWhy;
    y << YAML::EndMap;
  }
  y << YAML::EndSeq;
}

// Structural choices priced in slices (split-k, split-chains): the choice and every price.
template <typename Decision>
void emitSlices(YAML::Emitter &y, const char *section, const std::vector<Decision> &decisions) {
  if (decisions.empty())
    return;
  key(y, section) << YAML::BeginSeq;
  for (const auto &d : decisions) {
    y << YAML::Flow << YAML::BeginMap;
    key(y, pk::slices::node) << d.node;
    key(y, pk::slices::slices) << d.chosen;
    key(y, pk::slices::unsplit_us) << d.unsplit.us;
    key(y, pk::slices::unsplit_bytes) << d.unsplit.bytes;
    key(y, pk::slices::split_us) << YAML::Flow << YAML::BeginMap;
    for (const SliceDecision::Priced &s : d.splits)
      y << YAML::Key << s.slices << YAML::Value << s.price.us;
    y << YAML::EndMap;
    key(y, pk::slices::split_bytes) << YAML::Flow << YAML::BeginMap;
    for (const SliceDecision::Priced &s : d.splits)
      y << YAML::Key << s.slices << YAML::Value << s.price.bytes;
    y << YAML::EndMap;
    y << YAML::EndMap;
  }
  y << YAML::EndSeq;
}

// Sibling contractions priced as they are and merged (merge-siblings).
void emitMergeSiblings(YAML::Emitter &y, const Plan &p) {
  if (p.mergeSiblings.empty())
    return;
  key(y, pk::plan::merge_siblings) << YAML::BeginSeq;
  for (const SiblingMergeDecision &d : p.mergeSiblings) {
    y << YAML::Flow << YAML::BeginMap;
    key(y, pk::sibling_merge::nodes) << YAML::Flow << d.nodes;
    key(y, pk::sibling_merge::merged) << d.chosen;
    key(y, pk::sibling_merge::type) << d.merged;
    key(y, pk::sibling_merge::merged_us) << d.together.us;
    key(y, pk::sibling_merge::merged_bytes) << d.together.bytes;
    key(y, pk::sibling_merge::separate_us) << d.separate.us;
    key(y, pk::sibling_merge::separate_bytes) << d.separate.bytes;
    y << YAML::EndMap;
  }
  y << YAML::EndSeq;
}

const char *rematWhatKey(RematDecision::Kind kind) {
  switch (kind) {
  case RematDecision::Kind::Chain: return pk::remat::chain;
  case RematDecision::Kind::NormEpilogue: return pk::remat::norm_epilogue;
  case RematDecision::Kind::ConvChain: return pk::remat::conv_chain;
  default: return pk::remat::norm;
  }
}

void emitRemat(YAML::Emitter &y, const Plan &p) {
  if (p.remat.empty())
    return;
  key(y, pk::plan::rematerialization) << YAML::BeginSeq;
  for (const RematDecision &d : p.remat) {
    y << YAML::Flow << YAML::BeginMap;
    if (!d.what.empty())
      key(y, rematWhatKey(d.kind)) << d.what;
    key(y, pk::remat::values) << YAML::Flow << d.values;
    key(y, pk::remat::consumers) << d.consumers;
    key(y, pk::remat::recompute_us) << d.recomputeUs;
    key(y, pk::remat::store_us) << d.storeUs;
    key(y, pk::remat::decision) << (d.recomputed ? "recompute" : "store");
    y << YAML::EndMap;
  }
  y << YAML::EndSeq;
}

void emitLayouts(YAML::Emitter &y, const Plan &p) {
  if (p.layouts.empty())
    return;
  key(y, pk::plan::layouts) << YAML::BeginSeq;
  for (const LayoutChoice &c : p.layouts) {
    y << YAML::Flow << YAML::BeginMap;
    key(y, pk::layout_choice::node) << c.node;
    key(y, pk::layout_choice::op) << c.op;
    key(y, pk::layout_choice::layout) << c.layout;
    key(y, pk::layout_choice::type) << c.type;
    key(y, pk::layout_choice::reason) << c.reason;
    if (c.bytes > 0)
      key(y, pk::layout_choice::bytes) << c.bytes;
    y << YAML::EndMap;
  }
  y << YAML::EndSeq;
}

void emitLayoutFolds(YAML::Emitter &y, const Plan &p) {
  if (p.layoutFolds.empty())
    return;
  key(y, pk::plan::layout_folds) << YAML::BeginSeq;
  for (const LayoutFoldRecord &d : p.layoutFolds) {
    y << YAML::BeginMap;
    key(y, pk::layout_fold::op) << d.op;
    key(y, pk::layout_fold::node) << d.node;
    key(y, pk::layout_fold::decision) << d.decision();
    key(y, pk::layout_fold::reason) << d.reason;
    if (d.foldUs > 0 || d.materializeUs > 0) {
      key(y, pk::layout_fold::fold_us) << d.foldUs;
      key(y, pk::layout_fold::materialize_us) << d.materializeUs;
    }
    if (!d.stores.empty())
      key(y, pk::layout_fold::stores) << d.stores;
    if (!d.stored)
      key(y, pk::layout_fold::reads) << d.reads;
    y << YAML::EndMap;
  }
  y << YAML::EndSeq;
}

void emitBuffers(YAML::Emitter &y, const Plan &p) {
  key(y, pk::plan::buffers) << YAML::BeginSeq;
  for (const PlanBuffer &b : p.buffers) {
    y << YAML::Flow << YAML::BeginMap;
    key(y, pk::buffer::id) << b.id;
    key(y, pk::buffer::value) << b.value;
    key(y, pk::buffer::kind) << enumName(b.kind);
    key(y, pk::buffer::dtype) << dtypeName(b.dtype);
    key(y, pk::buffer::shape);
    emitShape(y, b);
    key(y, pk::buffer::bytes) << b.bytes;
    if (b.kind == BufferKind::Arena || b.kind == BufferKind::Weight)
      key(y, pk::buffer::offset) << b.offset;
    if (b.ioIndex >= 0)
      key(y, pk::buffer::index) << b.ioIndex;
    if (!b.aliasOf.empty())
      key(y, pk::buffer::alias_of) << b.aliasOf;
    y << YAML::EndMap;
  }
  y << YAML::EndSeq;
}

void emitLaunch(YAML::Emitter &y, const PlanStep &s) {
  key(y, pk::step::launch) << YAML::Flow << YAML::BeginMap;
  key(y, pk::launch::grid);
  if (s.symGrid.empty()) {
    emitShape(y, s.grid);
  } else { // symbolic extents as text; constant ones as numbers
    y << YAML::Flow << YAML::BeginSeq;
    for (const SymExtent &e : s.symGrid)
      if (e.num.isConstant() && e.div == 1)
        y << e.num.constant();
      else
        y << e.str();
    y << YAML::EndSeq;
  }
  key(y, pk::launch::block) << YAML::Flow << YAML::BeginSeq << s.threads << YAML::EndSeq;
  key(y, pk::launch::shared_bytes) << s.sharedBytes;
  if (s.dims)
    key(y, pk::launch::dims) << true;
  if (s.dynamicSharedBytes)
    key(y, pk::launch::dynamic_shared_bytes) << s.dynamicSharedBytes;
  if (s.chunks > 0)
    key(y, pk::launch::chunks) << s.chunks;
  if (s.group >= 0)
    key(y, pk::launch::group) << s.group;
  y << YAML::EndMap;
}

// The runtime built-ins' fields (guard, fail, loop) and the constraints.
void emitControl(YAML::Emitter &y, const PlanStep &s) {
  if (!s.guard.empty()) {
    key(y, pk::step::guard) << YAML::Flow << YAML::BeginMap;
    key(y, pk::guard::buffer) << s.guard;
    key(y, pk::guard::when) << s.guardWhen;
    y << YAML::EndMap;
  }
  if (s.fail) {
    key(y, pk::step::fail) << YAML::Flow << YAML::BeginMap;
    key(y, pk::fail::message) << *s.fail;
    y << YAML::EndMap;
  }
  if (s.loop) {
    key(y, pk::step::loop) << YAML::Flow << YAML::BeginMap;
    key(y, pk::loop::body_steps) << s.loop->bodySteps;
    key(y, pk::loop::state) << YAML::Flow << s.loop->state;
    key(y, pk::loop::next) << YAML::Flow << s.loop->next;
    y << YAML::EndMap;
  }
  key(y, pk::step::constraints) << YAML::Flow << YAML::BeginMap;
  key(y, pk::constraints::in_place) << s.inPlace;
  y << YAML::EndMap;
}

void emitPredicted(YAML::Emitter &y, const PlanStep &s) {
  key(y, pk::hints::predicted) << YAML::Flow << YAML::BeginMap;
  key(y, pk::predicted::bytes) << s.bytes;
  key(y, pk::predicted::lower_bound_bytes) << s.lowerBoundBytes;
  key(y, pk::predicted::flops) << s.flops;
  if (!s.kindId.empty())
    key(y, pk::predicted::time_us) << s.timeUs;
  if (!s.kindId.empty() && s.oneCoreUs > 0)
    key(y, pk::predicted::one_core_us) << s.oneCoreUs;
  if (s.fp32Us > 0)
    key(y, pk::predicted::fp32_time_us) << s.fp32Us;
  if (s.occupancy >= 0) {
    key(y, pk::predicted::occupancy) << s.occupancy;
    key(y, pk::predicted::registers) << s.registers;
  }
  y << YAML::EndMap;
}

// A kernel step's schedule search and the alternatives it weighed.
void emitSearch(YAML::Emitter &y, const PlanStep &s) {
  key(y, pk::hints::search) << YAML::Flow << YAML::BeginMap;
  key(y, pk::search::candidates) << s.search.candidates;
  key(y, pk::search::feasible) << s.search.feasible;
  key(y, pk::search::chose_defaults) << s.search.isDefault;
  key(y, pk::search::defaults_us) << s.search.defaultUs;
  key(y, pk::search::reason) << s.search.reason;
  y << YAML::EndMap;
  key(y, pk::hints::alternatives) << YAML::BeginSeq;
  for (const PlanStep::Alternative &a : s.alternatives) {
    y << YAML::Flow << YAML::BeginMap;
    key(y, pk::alternative::knobs);
    emitKnobs(y, a.knobs);
    key(y, pk::alternative::cost_us) << a.costUs;
    key(y, pk::alternative::rejected)
        << (a.rejected.empty() ? std::string("higher cost") : a.rejected);
    y << YAML::EndMap;
  }
  y << YAML::EndSeq;
}

void emitPtxas(YAML::Emitter &y, const PtxasFigures &f) {
  key(y, pk::hints::ptxas) << YAML::Flow << YAML::BeginMap;
  key(y, pk::ptxas::registers) << f.registers;
  key(y, pk::ptxas::spill_bytes) << f.spillBytes;
  key(y, pk::ptxas::static_shared) << f.staticShared;
  key(y, pk::ptxas::barriers) << f.barriers;
  key(y, pk::ptxas::stack_frame) << f.stackFrame;
  y << YAML::EndMap;
}

void emitHints(YAML::Emitter &y, const PlanStep &s) {
  key(y, pk::step::hints) << YAML::BeginMap;
  key(y, pk::hints::recipe) << s.recipe;
  // Only a fallback says why: the failed certificate condition that chose the generic recipe
  // (the property-selected recipes are evident from `properties`).
  if (s.recipeFallback)
    key(y, pk::hints::recipe_reason) << YAML::DoubleQuoted << s.recipeReason;
  key(y, pk::hints::properties) << YAML::Flow << s.properties;
  if (!s.kindId.empty()) // the products' arithmetic (ir/precision.h)
    key(y, pk::hints::precision) << precisionName(s.precision);
  key(y, pk::hints::knobs);
  emitKnobs(y, s.knobs);
  emitPredicted(y, s);
  if (!s.kindId.empty())
    emitSearch(y, s);
  if (s.ptxas.present)
    emitPtxas(y, s.ptxas);
  key(y, pk::hints::origins) << YAML::Flow << s.origins;
  y << YAML::EndMap;
}

void emitStep(YAML::Emitter &y, const PlanStep &s) {
  y << YAML::BeginMap;
  key(y, pk::step::kind) << s.kind;
  key(y, pk::step::kind_id) << s.kindId;
  key(y, pk::step::inputs) << YAML::Flow << s.inputs;
  key(y, pk::step::outputs) << YAML::Flow << s.outputs;
  key(y, pk::step::attrs) << YAML::Flow << YAML::BeginMap;
  for (const auto &[k, v] : s.attrs)
    y << YAML::Key << k << YAML::Value << v;
  y << YAML::EndMap;
  emitLaunch(y, s);
  emitControl(y, s);
  emitHints(y, s);
  y << YAML::EndMap;
}

} // namespace

// The fields in support/plan_schema.def's order; tests/unit/test_plan_schema.cpp checks that the
// schema alone re-emits these bytes.
void Plan::writeYaml(std::ostream &os) const {
  YAML::Emitter y;
  y.SetDoublePrecision(4); // predicted times: 4 significant digits
  y << YAML::BeginMap;
  key(y, pk::plan::schema) << kPlanSchema;
  emitTarget(y, *this);
  key(y, pk::plan::hardware) << hardwareSummary;
  emitDims(y, *this);
  emitIo(y, *this, pk::plan::inputs, BufferKind::Input);
  emitIo(y, *this, pk::plan::outputs, BufferKind::Output);
  emitBoundInputs(y, *this);
  emitTotals(y, *this);
  emitRoofline(y, *this);
  emitAttention(y, *this);
  emitSlices(y, pk::plan::split_k, splitK);
  emitSlices(y, pk::plan::split_chains, splitChains);
  emitMergeSiblings(y, *this);
  emitRemat(y, *this);
  emitLayouts(y, *this);
  emitLayoutFolds(y, *this);
  key(y, pk::plan::layout) << layout;
  emitBuffers(y, *this);
  key(y, pk::plan::steps) << YAML::BeginSeq;
  for (const PlanStep &s : steps)
    emitStep(y, s);
  y << YAML::EndSeq;
  y << YAML::EndMap;
  os << y.c_str() << "\n";
}

int64_t maxBytes(const TensorType &t, const std::vector<DimRange> &dims) {
  if (t.sym.empty())
    return t.bytes();
  std::map<std::string, int64_t> top;
  for (const DimRange &d : dims)
    top[d.name] = d.max;
  int64_t n = static_cast<int64_t>(dtypeSize(t.dtype));
  for (const SymExpr &e : t.sym) {
    auto v = e.eval(top);
    if (!e.monotone() || !v)
      throw UserError(cat("the size of ", t.str(), " has no bound at the dims' maxima (", e.str(),
                          " is not monotone in them)"));
    auto p = checkedMul(n, *v);
    if (!p || *p > kMaxTotalBytes)
      throw UserError(
          cat(t.str(), " at the dims' maxima needs more than ", kMaxTotalBytes, " bytes"));
    n = *p;
  }
  return n;
}

} // namespace aicf
