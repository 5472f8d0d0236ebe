// plan.yaml writer (see plan.h). yaml-cpp's emitter keeps key order as written, so the file is
// byte-deterministic.
#include "plan/plan.h"

#include "support/diagnostics.h"

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

void emitIo(YAML::Emitter &y, const Plan &p, BufferKind kind) {
  y << YAML::BeginSeq;
  for (const PlanBuffer &b : p.buffers) {
    if (b.kind != kind)
      continue;
    y << YAML::Flow << YAML::BeginMap;
    y << YAML::Key << "name" << YAML::Value << b.value;
    y << YAML::Key << "dtype" << YAML::Value << dtypeName(b.dtype);
    y << YAML::Key << "shape" << YAML::Value;
    emitShape(y, b);
    y << YAML::Key << "buffer" << YAML::Value << b.id;
    y << YAML::EndMap;
  }
  y << YAML::EndSeq;
}

} // namespace

void Plan::writeYaml(std::ostream &os) const {
  YAML::Emitter y;
  y.SetDoublePrecision(4); // predicted times: 4 significant digits
  y << YAML::BeginMap;
  y << YAML::Key << "schema" << YAML::Value << "aicf-plan/1";
  y << YAML::Key << "target" << YAML::Value << YAML::Flow << YAML::BeginMap;
  y << YAML::Key << "kind" << YAML::Value << (target.gpu() ? "cuda" : "cpu");
  y << YAML::Key << "name" << YAML::Value << target.name();
  y << YAML::Key << "plan_for" << YAML::Value << planFor.name();
  y << YAML::Key << "cpu_arch" << YAML::Value << cpuArch;
  // The instruction-set extensions libmodel.so's host code may use (from -march=cpu_arch); the
  // runtime refuses the folder on a CPU without one of them. Cuda plans' host code is built
  // without -march and needs none.
  if (!target.gpu())
    y << YAML::Key << "isa" << YAML::Value << YAML::Flow << isa;
  y << YAML::Key << "hardware" << YAML::Value << hardware;
  y << YAML::Key << "schedule" << YAML::Value << enumName(schedule);
  y << YAML::Key << "precision" << YAML::Value << precisionName(precision);
  y << YAML::EndMap;
  y << YAML::Key << "hardware" << YAML::Value << hardwareSummary;
  if (!dims.empty()) {
    // Symbolic dims: the runtime derives them from the inputs' shapes, in this order; a data
    // dim (set_by) it reads from that buffer once the step writing it has run.
    y << YAML::Key << "dims" << YAML::Value << YAML::BeginSeq;
    for (const DimRange &d : dims) {
      y << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value << d.name << YAML::Key
        << "min" << YAML::Value << d.min << YAML::Key << "max" << YAML::Value << d.max << YAML::Key
        << "opt" << YAML::Value << d.opt;
      if (auto it = dimSetBy.find(d.name); it != dimSetBy.end())
        y << YAML::Key << "set_by" << YAML::Value << it->second;
      y << YAML::EndMap;
    }
    y << YAML::EndSeq;
  }
  y << YAML::Key << "inputs" << YAML::Value;
  emitIo(y, *this, BufferKind::Input);
  y << YAML::Key << "outputs" << YAML::Value;
  emitIo(y, *this, BufferKind::Output);
  if (!boundInputs.empty()) {
    y << YAML::Key << "bound_inputs" << YAML::Value << YAML::BeginSeq;
    for (const BoundInput &b : boundInputs) {
      y << YAML::Flow << YAML::BeginMap;
      y << YAML::Key << "name" << YAML::Value << b.name;
      y << YAML::Key << "dtype" << YAML::Value << dtypeName(b.type.dtype);
      y << YAML::Key << "shape" << YAML::Value << YAML::Flow << b.type.shape;
      y << YAML::Key << "from" << YAML::Value << b.source;
      y << YAML::EndMap;
    }
    y << YAML::EndSeq;
  }
  y << YAML::Key << "weights" << YAML::Value << YAML::BeginMap;
  y << YAML::Key << "file" << YAML::Value << "weights.bin";
  y << YAML::Key << "bytes" << YAML::Value << weightsBytes;
  y << YAML::EndMap;
  y << YAML::Key << "arena" << YAML::Value << YAML::Flow << YAML::BeginMap;
  y << YAML::Key << "bytes" << YAML::Value << arenaBytes;
  y << YAML::Key << "naive_bytes" << YAML::Value << naiveArenaBytes;
  y << YAML::EndMap;
  y << YAML::Key << "lower_bound_bytes" << YAML::Value << lowerBoundBytes;
  y << YAML::Key << "predicted_time_us" << YAML::Value << predictedTimeUs;
  // The roofline of the hardware planned for (report.html draws the steps against it): peak
  // arithmetic of the plan's precision (tensor cores for tf32 / fp16 / bf16) and DRAM bandwidth.
  {
    const Hardware &hw = planFor.hw;
    double peak = precision == Precision::F32    ? hw.peakFlops()
                  : precision == Precision::TF32 ? hw.tensorTf32FlopsPerSec
                                                 : hw.tensorF16FlopsPerSec;
    if (peak <= 0)
      peak = hw.peakFlops();
    y << YAML::Key << "roofline" << YAML::Value << YAML::Flow << YAML::BeginMap;
    y << YAML::Key << "flops_per_s" << YAML::Value << peak;
    y << YAML::Key << "bytes_per_s" << YAML::Value << hw.dramBytesPerSec;
    // Host plans: the last-level cache's bandwidth too (all cores), the roof of steps whose
    // data stays on chip between kernels.
    double llcPerCycle = hw.l3BytesPerCycle > 0 ? hw.l3BytesPerCycle : hw.l2BytesPerCycle;
    if (!hw.gpu && llcPerCycle > 0 && hw.ghz > 0 && hw.cores > 0)
      y << YAML::Key << "cache_bytes_per_s" << YAML::Value
        << llcPerCycle * hw.ghz * 1e9 * double(hw.cores);
    y << YAML::EndMap;
  }
  if (!attention.empty()) {
    y << YAML::Key << "attention_lowering" << YAML::Value << YAML::BeginSeq;
    for (const AttentionDecision &d : attention) {
      y << YAML::Flow << YAML::BeginMap;
      y << YAML::Key << "node" << YAML::Value << d.node;
      y << YAML::Key << "choice" << YAML::Value << (d.materialized ? "materialized" : "streaming");
      if (d.streamingUs >= 0)
        y << YAML::Key << "streaming_us" << YAML::Value << d.streamingUs;
      else
        y << YAML::Key << "streaming" << YAML::Value << d.streamingWhy;
      if (d.materializedUs >= 0)
        y << YAML::Key << "materialized_us" << YAML::Value << d.materializedUs;
      else
        y << YAML::Key << "materialized" << YAML::Value << d.materializedWhy;
      y << YAML::EndMap;
    }
    y << YAML::EndSeq;
  }
  // Structural choices priced in slices (split-k, split-chains): the choice and every price.
  auto slices = [&y](const char *key, const auto &decisions) {
    if (decisions.empty())
      return;
    y << YAML::Key << key << YAML::Value << YAML::BeginSeq;
    for (const auto &d : decisions) {
      y << YAML::Flow << YAML::BeginMap;
      y << YAML::Key << "node" << YAML::Value << d.node;
      y << YAML::Key << "slices" << YAML::Value << d.chosen;
      y << YAML::Key << "unsplit_us" << YAML::Value << d.unsplit.us;
      y << YAML::Key << "unsplit_bytes" << YAML::Value << d.unsplit.bytes;
      y << YAML::Key << "split_us" << YAML::Value << YAML::Flow << YAML::BeginMap;
      for (const SliceDecision::Priced &s : d.splits)
        y << YAML::Key << s.slices << YAML::Value << s.price.us;
      y << YAML::EndMap;
      y << YAML::Key << "split_bytes" << YAML::Value << YAML::Flow << YAML::BeginMap;
      for (const SliceDecision::Priced &s : d.splits)
        y << YAML::Key << s.slices << YAML::Value << s.price.bytes;
      y << YAML::EndMap;
      y << YAML::EndMap;
    }
    y << YAML::EndSeq;
  };
  slices("split_k", splitK);
  slices("split_chains", splitChains);
  // Sibling contractions priced as they are and merged (merge-siblings).
  if (!mergeSiblings.empty()) {
    y << YAML::Key << "merge_siblings" << YAML::Value << YAML::BeginSeq;
    for (const SiblingMergeDecision &d : mergeSiblings) {
      y << YAML::Flow << YAML::BeginMap;
      y << YAML::Key << "nodes" << YAML::Value << YAML::Flow << d.nodes;
      y << YAML::Key << "merged" << YAML::Value << d.chosen;
      y << YAML::Key << "type" << YAML::Value << d.merged;
      y << YAML::Key << "merged_us" << YAML::Value << d.together.us;
      y << YAML::Key << "merged_bytes" << YAML::Value << d.together.bytes;
      y << YAML::Key << "separate_us" << YAML::Value << d.separate.us;
      y << YAML::Key << "separate_bytes" << YAML::Value << d.separate.bytes;
      y << YAML::EndMap;
    }
    y << YAML::EndSeq;
  }
  if (!remat.empty()) {
    y << YAML::Key << "rematerialization" << YAML::Value << YAML::BeginSeq;
    for (const RematDecision &d : remat) {
      y << YAML::Flow << YAML::BeginMap;
      if (!d.what.empty())
        y << YAML::Key
          << (d.kind == RematDecision::Kind::Chain          ? "chain"
              : d.kind == RematDecision::Kind::NormEpilogue ? "norm_epilogue"
              : d.kind == RematDecision::Kind::ConvChain    ? "conv_chain"
                                                            : "norm")
          << YAML::Value << d.what;
      y << YAML::Key << "values" << YAML::Value << YAML::Flow << d.values;
      y << YAML::Key << "consumers" << YAML::Value << d.consumers;
      y << YAML::Key << "recompute_us" << YAML::Value << d.recomputeUs;
      y << YAML::Key << "store_us" << YAML::Value << d.storeUs;
      y << YAML::Key << "decision" << YAML::Value << (d.recomputed ? "recompute" : "store");
      y << YAML::EndMap;
    }
    y << YAML::EndSeq;
  }
  if (!layoutFolds.empty()) {
    y << YAML::Key << "layout_folds" << YAML::Value << YAML::BeginSeq;
    for (const LayoutFoldRecord &d : layoutFolds) {
      y << YAML::BeginMap;
      y << YAML::Key << "op" << YAML::Value << d.op;
      y << YAML::Key << "node" << YAML::Value << d.node;
      y << YAML::Key << "decision" << YAML::Value << d.decision();
      y << YAML::Key << "reason" << YAML::Value << d.reason;
      if (d.foldUs > 0 || d.materializeUs > 0) {
        y << YAML::Key << "fold_us" << YAML::Value << d.foldUs;
        y << YAML::Key << "materialize_us" << YAML::Value << d.materializeUs;
      }
      if (!d.stores.empty())
        y << YAML::Key << "stores" << YAML::Value << d.stores;
      if (!d.stored)
        y << YAML::Key << "reads" << YAML::Value << d.reads;
      y << YAML::EndMap;
    }
    y << YAML::EndSeq;
  }
  y << YAML::Key << "layout" << YAML::Value << layout;
  y << YAML::Key << "buffers" << YAML::Value << YAML::BeginSeq;
  for (const PlanBuffer &b : buffers) {
    y << YAML::Flow << YAML::BeginMap;
    y << YAML::Key << "id" << YAML::Value << b.id;
    y << YAML::Key << "value" << YAML::Value << b.value;
    y << YAML::Key << "kind" << YAML::Value << enumName(b.kind);
    y << YAML::Key << "dtype" << YAML::Value << dtypeName(b.dtype);
    y << YAML::Key << "shape" << YAML::Value;
    emitShape(y, b);
    y << YAML::Key << "bytes" << YAML::Value << b.bytes;
    if (b.kind == BufferKind::Arena || b.kind == BufferKind::Weight)
      y << YAML::Key << "offset" << YAML::Value << b.offset;
    if (b.ioIndex >= 0)
      y << YAML::Key << "index" << YAML::Value << b.ioIndex;
    if (!b.aliasOf.empty())
      y << YAML::Key << "alias_of" << YAML::Value << b.aliasOf;
    y << YAML::EndMap;
  }
  y << YAML::EndSeq;
  y << YAML::Key << "steps" << YAML::Value << YAML::BeginSeq;
  for (const PlanStep &s : steps) {
    y << YAML::BeginMap;
    y << YAML::Key << "kind" << YAML::Value << s.kind;
    y << YAML::Key << "kind_id" << YAML::Value << s.kindId;
    y << YAML::Key << "inputs" << YAML::Value << YAML::Flow << s.inputs;
    y << YAML::Key << "outputs" << YAML::Value << YAML::Flow << s.outputs;
    y << YAML::Key << "attrs" << YAML::Value << YAML::Flow << YAML::BeginMap;
    for (const auto &[k, v] : s.attrs)
      y << YAML::Key << k << YAML::Value << v;
    y << YAML::EndMap;
    y << YAML::Key << "launch" << YAML::Value << YAML::Flow << YAML::BeginMap;
    y << YAML::Key << "grid" << YAML::Value;
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
    y << YAML::Key << "block" << YAML::Value << YAML::Flow << YAML::BeginSeq << s.threads
      << YAML::EndSeq;
    y << YAML::Key << "shared_bytes" << YAML::Value << s.sharedBytes;
    if (s.dims)
      y << YAML::Key << "dims" << YAML::Value << true;
    if (s.dynamicSharedBytes)
      y << YAML::Key << "dynamic_shared_bytes" << YAML::Value << s.dynamicSharedBytes;
    if (s.chunks > 0)
      y << YAML::Key << "chunks" << YAML::Value << s.chunks;
    if (s.group >= 0)
      y << YAML::Key << "group" << YAML::Value << s.group;
    y << YAML::EndMap;
    if (!s.guard.empty()) {
      y << YAML::Key << "guard" << YAML::Value << YAML::Flow << YAML::BeginMap;
      y << YAML::Key << "buffer" << YAML::Value << s.guard;
      y << YAML::Key << "when" << YAML::Value << s.guardWhen;
      y << YAML::EndMap;
    }
    if (s.fail) {
      y << YAML::Key << "fail" << YAML::Value << YAML::Flow << YAML::BeginMap;
      y << YAML::Key << "message" << YAML::Value << *s.fail;
      y << YAML::EndMap;
    }
    if (s.loop) {
      y << YAML::Key << "loop" << YAML::Value << YAML::Flow << YAML::BeginMap;
      y << YAML::Key << "body_steps" << YAML::Value << s.loop->bodySteps;
      y << YAML::Key << "state" << YAML::Value << YAML::Flow << s.loop->state;
      y << YAML::Key << "next" << YAML::Value << YAML::Flow << s.loop->next;
      y << YAML::EndMap;
    }
    y << YAML::Key << "constraints" << YAML::Value << YAML::Flow << YAML::BeginMap;
    y << YAML::Key << "in_place" << YAML::Value << s.inPlace;
    y << YAML::EndMap;
    y << YAML::Key << "hints" << YAML::Value << YAML::BeginMap;
    y << YAML::Key << "recipe" << YAML::Value << s.recipe;
    // Only a fallback says why: the failed certificate condition that chose the generic recipe
    // (the property-selected recipes are evident from `properties`).
    if (s.recipeFallback)
      y << YAML::Key << "recipe_reason" << YAML::Value << YAML::DoubleQuoted << s.recipeReason;
    y << YAML::Key << "properties" << YAML::Value << YAML::Flow << s.properties;
    if (!s.kindId.empty()) // the products' arithmetic (ir/precision.h)
      y << YAML::Key << "precision" << YAML::Value << precisionName(s.precision);
    y << YAML::Key << "knobs" << YAML::Value << YAML::Flow << YAML::BeginMap;
    for (const auto &[k, v] : s.knobs)
      y << YAML::Key << k << YAML::Value << v;
    y << YAML::EndMap;
    y << YAML::Key << "predicted" << YAML::Value << YAML::Flow << YAML::BeginMap;
    y << YAML::Key << "bytes" << YAML::Value << s.bytes;
    y << YAML::Key << "lower_bound_bytes" << YAML::Value << s.lowerBoundBytes;
    y << YAML::Key << "flops" << YAML::Value << s.flops;
    if (!s.kindId.empty())
      y << YAML::Key << "time_us" << YAML::Value << s.timeUs;
    if (s.fp32Us > 0)
      y << YAML::Key << "fp32_time_us" << YAML::Value << s.fp32Us;
    if (s.occupancy >= 0) {
      y << YAML::Key << "occupancy" << YAML::Value << s.occupancy;
      y << YAML::Key << "registers" << YAML::Value << s.registers;
    }
    y << YAML::EndMap;
    if (!s.kindId.empty()) {
      y << YAML::Key << "search" << YAML::Value << YAML::Flow << YAML::BeginMap;
      y << YAML::Key << "candidates" << YAML::Value << s.search.candidates;
      y << YAML::Key << "feasible" << YAML::Value << s.search.feasible;
      y << YAML::Key << "chose_defaults" << YAML::Value << s.search.isDefault;
      y << YAML::Key << "defaults_us" << YAML::Value << s.search.defaultUs;
      y << YAML::Key << "reason" << YAML::Value << s.search.reason;
      y << YAML::EndMap;
      y << YAML::Key << "alternatives" << YAML::Value << YAML::BeginSeq;
      for (const PlanStep::Alternative &a : s.alternatives) {
        y << YAML::Flow << YAML::BeginMap;
        y << YAML::Key << "knobs" << YAML::Value << YAML::Flow << YAML::BeginMap;
        for (const auto &[k, v] : a.knobs)
          y << YAML::Key << k << YAML::Value << v;
        y << YAML::EndMap;
        y << YAML::Key << "cost_us" << YAML::Value << a.costUs;
        y << YAML::Key << "rejected" << YAML::Value
          << (a.rejected.empty() ? std::string("higher cost") : a.rejected);
        y << YAML::EndMap;
      }
      y << YAML::EndSeq;
    }
    if (s.ptxas.present) {
      y << YAML::Key << "ptxas" << YAML::Value << YAML::Flow << YAML::BeginMap;
      y << YAML::Key << "registers" << YAML::Value << s.ptxas.registers;
      y << YAML::Key << "spill_bytes" << YAML::Value << s.ptxas.spillBytes;
      y << YAML::Key << "static_shared" << YAML::Value << s.ptxas.staticShared;
      y << YAML::Key << "barriers" << YAML::Value << s.ptxas.barriers;
      y << YAML::Key << "stack_frame" << YAML::Value << s.ptxas.stackFrame;
      y << YAML::EndMap;
    }
    y << YAML::Key << "origins" << YAML::Value << YAML::Flow << s.origins;
    y << YAML::EndMap;
    y << YAML::EndMap;
  }
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
