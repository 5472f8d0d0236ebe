// See compile.h. buildModel runs the stages of driver/pipeline.cpp's list (compileStages()),
// each a short function below (namespace stages, driver/stages.h) with the reason it sits where
// it does; writeArtifacts then builds and writes.
#include "driver/compile.h"

#include "backend/cuda/cuda_build.h"
#include "backend/cuda/cuda_printer.h"
#include "backend/host/host_build.h"
#include "backend/host/host_printer.h"
#include "driver/pipeline.h"
#include "driver/stages.h"
#include "kir/kir_pass.h"
#include "lower/fusion.h"
#include "lower/lower.h"
#include "passes/choose_attention.h"
#include "passes/pass.h"
#include "plan/attention_choice.h"
#include "plan/branch_guards.h"
#include "plan/chain_split_choice.h"
#include "plan/cost_model.h"
#include "plan/dispatch_groups.h"
#include "plan/loop_bodies.h"
#include "plan/memory_plan.h"
#include "plan/planner.h"
#include "plan/sibling_merge_choice.h"
#include "plan/split_k_choice.h"
#include "support/diagnostics.h"
#include "support/output_folder.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace fs = std::filesystem;

namespace aicf {

namespace {

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string symbolFor(int index, const std::string &kind) {
  std::string s = cat("k", index, "_");
  for (char c : kind)
    s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return s;
}

// What the planner's search depends on, for a group: its kind, each node's op, attributes,
// properties and result types, how the nodes read each other and the group's inputs (by
// position, with their types, kinds and the value of scalar weights, which recipes inline), and
// which results are outputs. Value and node names are left out: the layers of a model give
// equal keys. Two groups with one key get one search (the kernel itself is still lowered from
// each group, so a key that missed a difference could only cost a schedule, never a result).
std::string planKey(const KernelGroup &grp) {
  std::unordered_map<const Value *, std::string> local;
  std::string k = grp.kind;
  for (size_t i = 0; i < grp.inputs.size(); ++i) {
    const Value *v = grp.inputs[i];
    local[v] = cat("i", i);
    k += cat("|i", i, ":", v->type().str(), ":", static_cast<int>(v->kind()));
    if (v->isWeight() && v->data() && v->data()->numel() == 1)
      k += cat("=", formatFloat(v->data()->getDouble(0)));
  }
  for (size_t j = 0; j < grp.nodes.size(); ++j) {
    const Node *n = grp.nodes[j];
    k += cat("|", n->name(), n == grp.anchor ? "*" : "", "(");
    for (const Value *o : n->operands()) {
      auto it = local.find(o);
      k += (it == local.end() ? cat("?", o->id()) : it->second) + ",";
    }
    k += ")";
    for (const auto &[key, val] : n->attrs)
      k += cat(key, "=", formatAttr(val), ";");
    for (MemProperty pr : n->props.list())
      k += cat(propertyName(pr), ";");
    for (size_t r = 0; r < n->results().size(); ++r) {
      const Value *v = n->result(r);
      local.emplace(v, cat("n", j, ".", r));
      k += cat("->", v->type().str());
    }
  }
  for (const Value *v : grp.outputs) {
    auto it = local.find(v);
    k += "|o:" + (it == local.end() ? cat("?", v->id()) : it->second);
  }
  return k;
}

// A loop node's group: no kernel, a runtime loop step (loopStep, stage loop-bodies).
bool isLoop(const KernelGroup &grp) {
  return grp.anchor && grp.anchor->op() == Op::Loop;
}

// A fail node's group (a branch that cannot run at the bound shapes): no kernel, a runtime fail
// step (failStep).
bool isFail(const KernelGroup &grp) {
  return grp.anchor && grp.anchor->op() == Op::Fail;
}

// A group the runtime carries out itself: no kernel is planned, lowered or printed for it.
bool isBuiltin(const KernelGroup &grp) {
  return isLoop(grp) || isFail(grp);
}

bool hasAttention(const Graph &g) {
  for (const Node *n : g.nodes())
    if (n->op() == Op::Attention)
      return true;
  return false;
}

// plan.yaml and --explain list the attention decisions in kernel order (the order of the groups
// of `part`, the partition of `g`); the pass makes them in graph order.
void inKernelOrder(std::vector<AttentionDecision> &decisions, const Partition &part,
                   const Graph &g) {
  std::map<int, size_t> rank; // attention node index -> its group's position
  for (size_t i = 0; i < part.groups.size(); ++i)
    if (const Node *a = part.groups[i].anchor; a && a->op() == Op::Attention)
      rank[g.nodeIndex(a)] = i;
  std::stable_sort(decisions.begin(), decisions.end(),
                   [&](const AttentionDecision &x, const AttentionDecision &y) {
                     return rank.at(x.nodeIndex) < rank.at(y.nodeIndex);
                   });
}

} // namespace

// ---- The stages, in the order driver/pipeline.cpp runs them -------------------------------------

namespace stages {

// A rewritten copy becomes the graph the later stages build from.
void useGraph(CompileState &s, std::unique_ptr<Graph> copy) {
  s.model.graph = std::move(copy);
  s.graph = s.model.graph.get();
}

// A host plan's layout pass, on a copy of the graph under a pass manager (verified); the copy
// replaces the graph when the pass changed it.
void runPassOnCopy(CompileState &s, const char *pass, const Target *target = nullptr);

void runHostLayoutPass(CompileState &s, const char *pass, bool enabled) {
  if (s.hw.gpu || !enabled)
    return;
  runPassOnCopy(s, pass);
}

// Runs `pass` on a copy of the graph, which replaces it when the pass changed it; the pass sees
// the target compiled for, or `target` (the plan's, for a pass that decides by whose plan the
// kernels follow).
void runPassOnCopy(CompileState &s, const char *pass, const Target *target) {
  std::unique_ptr<Graph> copy = s.graph->clone();
  PassManager pm(s.opts.passes);
  pm.add(createPass(pass));
  PassContext ctx;
  ctx.target = target ? *target : s.target;
  ctx.precision = s.opts.precision;
  ctx.ioPrecision = s.opts.ioPrecision;
  ctx.explain = s.opts.explain;
  ctx.layouts = &s.layouts;
  if (!s.hw.gpu) {
    const std::vector<std::string> &isa = hostIsaFeatures(s.opts.cpuArch);
    ctx.hostBf16 = std::find(isa.begin(), isa.end(), "avx512bf16") != isa.end();
    ctx.hostVnni = std::find(isa.begin(), isa.end(), "avx512vnni") != isa.end();
  }
  if (pm.run(*copy, ctx))
    useGraph(s, std::move(copy));
}

// Every target: f64 nodes of the f32-accumulating recipes computed in f32 between casts
// (passes/legalize_f64.cpp), first, so that every later stage sees only f32 in those ops.
void legalizeF64(CompileState &s) {
  runPassOnCopy(s, "legalize-f64");
}

// Every target, --io-precision: the model's float inputs and outputs exchanged in another type
// through casts the partition fuses into the first and last kernels (passes/io_precision.cpp);
// after legalize-f64, so an f64 model's interface can be given as f32 too.
void ioPrecision(CompileState &s) {
  if (s.opts.ioPrecision)
    runPassOnCopy(s, "io-precision");
}

// GPU plans under --precision tf32 / fp16 / bf16: matmul, gemm, dense conv and attention marked
// to run on tensor cores, their weights stored in the precision (passes/assign_precision.cpp);
// after merge-siblings and split-chains, whose rewrites build new contractions and weights, and
// before the partition. Host plans under bf16: the packed-weight products on the bf16
// micro-kernel, which needs AVX512-BF16 in the folder's -march (--cpu-arch); tf32 and fp16 have
// no host instruction, and a CPU without the extension would emulate each product: refused.
// Host plans under fp32: the integer-domain products only, on int8 where the -march has
// AVX512-VNNI, else on bf16 where it has AVX512-BF16. int8 is never a flag: a quantized model
// says which products are integers.
void assignPrecision(CompileState &s) {
  if (s.opts.precision == Precision::I8)
    throw UserError("--precision int8: int8 comes from a quantized model, not a flag (quantize "
                    "the float model first, e.g. with ONNX Runtime's quantize_static in the QDQ "
                    "format: its convs then run on the int8 micro-kernel where the CPU has "
                    "AVX512-VNNI)",
                    1);
  // fp32 host plans: only the integer-domain products (a quantized model's convs), where the
  // -march has an extension for them (the pass checks it: ctx.hostVnni, ctx.hostBf16).
  if (!tensorCores(s.opts.precision)) {
    if (!s.hw.gpu)
      runPassOnCopy(s, "assign-precision");
    return;
  }
  if (!s.hw.gpu && s.opts.precision != Precision::BF16)
    throw UserError(cat("--precision ", precisionName(s.opts.precision),
                        " needs a GPU plan (--target cuda:ARCH, or --target cpu --plan-for "
                        "cuda:ARCH to run that plan here); host plans compute in fp32 or bf16"),
                    1);
  if (!s.hw.gpu) {
    const std::vector<std::string> &isa = hostIsaFeatures(s.opts.cpuArch);
    if (std::find(isa.begin(), isa.end(), "avx512bf16") == isa.end())
      throw UserError(cat("--precision bf16 on a host plan needs the avx512bf16 extension, which "
                          "--cpu-arch ",
                          s.opts.cpuArch,
                          " does not have (give a -march that has it, e.g. --cpu-arch "
                          "sapphirerapids or znver4, to compile for such a CPU)"),
                      1);
  }
  runPassOnCopy(s, "assign-precision", &s.planFor); // (an emulated GPU plan marks as the GPU)
}

// Host plans: conv chains on the channel-blocked layout (passes/block_channels.cpp), before
// pack-weights so that the blocked convs' weights are packed like any GEMM's. GPU plans keep
// NCHW.
void blockChannels(CompileState &s) {
  runHostLayoutPass(s, "block-channels", s.opts.blockChannels);
}

// Host plans: a per-channel scale (squeeze-and-excitation) before a pointwise blocked_conv folded
// into its weight rows (passes/fold_channel_scale.cpp), on the blocked_convs block-channels made
// and before pack-weights (the scaled weight is computed at run time, so it is not packed).
void foldChannelScale(CompileState &s) {
  runHostLayoutPass(s, "fold-channel-scale", s.opts.blockChannels);
}

// Host plans: a plain resize over H and W as two 1-D resizes (passes/separable_resize.cpp), after
// block-channels, so that only the resizes left on the plain layout split.
void separableResize(CompileState &s) {
  runHostLayoutPass(s, "separable-resize", true);
}

// Host plans: constant GEMM weights in the micro-kernel's column panels (passes/pack_weights.cpp),
// before the partition so that the panel views fold into the contractions like any layout op.
// GPU plans keep the weights as they are.
void packWeights(CompileState &s) {
  runHostLayoutPass(s, "pack-weights", s.opts.packWeights);
}

// GPU plans run every step, both branches of an If chosen at run time (branch guards are
// host-only), so a branch that cannot run at the bound shapes (a fail node) would fail every
// run: refused, with the node's message.
void refuseGpuFails(const CompileState &s) {
  if (!s.target.gpu() && !s.planFor.gpu())
    return;
  for (const Node *n : s.graph->nodes())
    if (n->info().has(SETS_DIM)) // the host runtime reads the count between steps
      throw UserError(cat(n->where(), ": ", n->name(), "'s result length (data dim ", n->s("dim"),
                          ") is known only at run time: supported on host plans (--target cpu) ",
                          "only, not yet on GPU plans"));
  for (const Node *n : s.graph->nodes())
    if (n->op() == Op::Fail)
      throw UserError(cat(n->s("message"),
                          "\n  a GPU plan runs both branches of an If chosen at run time (branch "
                          "guards are host-only): compile for --target cpu, or bind the "
                          "condition's inputs with --const to remove the branch"));
}

// Kernel groups: which nodes become one kernel (lower/fusion.h), with the cost model deciding
// whether a shared elementwise group is recomputed in its consumers. A GPU plan with a branch
// that cannot run is refused first.
void partition(CompileState &s) {
  refuseGpuFails(s);
  s.part = partitionGraph(*s.graph, s.fusion);
}

// The planner's options for a structural choice (attention's form, split-k): each alternative
// priced on its best schedules, whatever --candidate-rank asks of the kernels.
PlannerOptions structuralChoice(const CompileState &s) {
  PlannerOptions best = s.planner;
  best.rank = 0;
  return best;
}

// Runs `pass` (a graph pass priced by the planner) on a copy of the graph under a pass manager,
// which verifies it, then annotate-properties, which gives the new nodes their properties. The
// caller's graph never changes; adoptGraph makes the copy the one the kernels are built from.
std::unique_ptr<Graph> runPricedPass(const CompileState &s, std::unique_ptr<Pass> pass) {
  std::unique_ptr<Graph> copy = s.graph->clone();
  PassManager pm(s.opts.passes);
  pm.add(std::move(pass));
  pm.add(createPass("annotate-properties"));
  PassContext ctx;
  ctx.target = s.target; // the properties as the default pipeline annotated them
  pm.run(*copy, ctx);
  return copy;
}

// The rewritten copy becomes the graph, partitioned again.
void adoptGraph(CompileState &s, std::unique_ptr<Graph> copy) {
  useGraph(s, std::move(copy));
  partition(s);
}

// Streaming or materialised attention: the choose-attention graph pass (passes/
// choose_attention.h) priced by the planner (plan/attention_choice.h). The copy is kept only
// when an attention was materialised.
void chooseAttention(CompileState &s) {
  if (!hasAttention(*s.graph))
    return;
  std::vector<AttentionDecision> decisions;
  ChooseAttentionOptions co;
  co.policy = s.opts.attention;
  co.cost = attentionCostFn(s.hw, structuralChoice(s));
  co.decisions = &decisions;
  std::unique_ptr<Graph> copy = runPricedPass(s, createChooseAttentionPass(std::move(co)));
  inKernelOrder(decisions, s.part, *s.graph);
  bool materialized = false;
  for (AttentionDecision &d : decisions) {
    materialized = materialized || d.materialized;
    s.model.plan.attention.push_back(std::move(d));
  }
  if (materialized)
    adoptGraph(s, std::move(copy));
}

// GPU plans: a contraction whose output fills few blocks and whose K is deep is computed in K
// slices where the cost model prices that lower (passes/split_k.h, plan/split_k_choice.h);
// decided on the partition above like attention. After choose-attention, so the materialised
// attention's matmuls are priced too. The copy is kept only when a contraction was split.
void splitK(CompileState &s) {
  if (!s.hw.gpu || !s.opts.splitK)
    return;
  std::vector<SplitKDecision> decisions;
  SplitKOptions so;
  so.cost = splitKCostFn(s.hw, structuralChoice(s));
  so.decisions = &decisions;
  std::unique_ptr<Graph> copy = runPricedPass(s, createSplitKPass(std::move(so)));
  bool split = false;
  for (const SplitKDecision &d : decisions)
    split = split || d.chosen > 1;
  s.model.plan.splitK = std::move(decisions);
  if (split)
    adoptGraph(s, std::move(copy));
}

// Sibling contractions of one A (q, k and v projections) computed as one contraction over their
// concatenated weights where the cost model prices that lower (passes/merge_siblings.h,
// plan/sibling_merge_choice.h); both plans. First of the priced rewrites: the merged
// contraction is what split-chains, pack-weights and the partition then see (a row norm before
// it has one reader left, which fusion rule 7 may fold). The copy is kept only when a set merged.
void mergeSiblings(CompileState &s) {
  if (!s.opts.mergeSiblings)
    return;
  std::vector<SiblingMergeDecision> decisions;
  MergeSiblingsOptions mo;
  mo.cost = siblingMergeCostFn(s.hw, structuralChoice(s));
  mo.decisions = &decisions;
  std::unique_ptr<Graph> copy = runPricedPass(s, createMergeSiblingsPass(std::move(mo)));
  bool merged = false;
  for (const SiblingMergeDecision &d : decisions)
    merged = merged || d.chosen;
  s.model.plan.mergeSiblings = std::move(decisions);
  if (merged)
    useGraph(s, std::move(copy));
}

// A chain of two contractions (an MLP's projections) computed in slices of its hidden dimension
// where the cost model prices that lower (passes/split_chains.h, plan/chain_split_choice.h), so
// that rule 8's chained kernel has blocks for every core or SM without re-reading the weights.
// Before pack-weights: the sliced weights ([S, K, N]) are read in place, not packed. The copy is
// kept only when a chain was split.
// Host plans only for now: on the GPU plans the model (never run on a GPU) takes 32 slices for
// ViT's and BERT's MLPs, 25% less predicted time for twice the bytes (the partial outputs); a
// session with a GPU should measure that first (--chain-slices N forces a count on either).
void splitChains(CompileState &s) {
  if (!s.opts.splitChains || s.opts.chains == FusePolicy::Store ||
      (s.hw.gpu && s.opts.chainSlices == 0))
    return;
  std::vector<ChainSplitDecision> decisions;
  SplitChainsOptions so;
  so.cost = chainSplitCostFn(s.hw, structuralChoice(s), s.opts.splitK);
  so.decisions = &decisions;
  so.force = s.opts.chainSlices;
  std::unique_ptr<Graph> copy = runPricedPass(s, createSplitChainsPass(std::move(so)));
  bool split = false;
  for (const ChainSplitDecision &d : decisions)
    split = split || d.chosen > 1;
  s.model.plan.splitChains = std::move(decisions);
  if (split)
    useGraph(s, std::move(copy));
}

// plan.yaml's header: what the plan was made for, and the partition's store-or-recompute
// decisions.
void describePlan(CompileState &s) {
  Plan &p = s.model.plan;
  const CompileOptions &opts = s.opts;
  p.target = s.target;
  p.planFor = s.planFor;
  p.cpuArch = opts.cpuArch;
  p.boundInputs = opts.boundInputs;
  if (!s.target.gpu())
    p.isa = hostIsaFeatures(opts.cpuArch);
  p.hardware = s.hw.name;
  p.hardwareSummary = s.hw.summary();
  p.schedule = opts.schedule;
  p.precision = opts.precision;
  // A data dim no node sets any more (its node removed as dead) sizes nothing: dropped. (Dims of
  // the inputs have min >= 1; data dims min 0.)
  p.dims.clear();
  for (const DimRange &d : s.graph->dims())
    if (d.min > 0 || s.graph->dataDimSetter(d.name))
      p.dims.push_back(d);
  p.remat = s.part.remat;
  p.layouts = s.layouts;
  p.layoutFolds.clear();
  for (const LayoutDecision &d : s.part.layout)
    p.layoutFolds.push_back(LayoutFoldRecord{d.node->name(), d.node->where(), d.reads, d.stores,
                                             d.foldUs, d.materializeUs, d.folded, d.stored,
                                             d.reason});
}

// The buffers of the graph's values, before the steps name them (plan/memory_plan.h): a fixed
// creation order keeps buffer ids and weight offsets deterministic.
void valueBuffers(CompileState &s) {
  s.buffers = createValueBuffers(s.model.plan, *s.graph, s.part.groups);
}

// The schedule of each group (plan/planner.h): the planner lowers every candidate of the recipe
// to Kernel IR, prices it, and keeps the chosen kernel, so this stage is also the lowering.
// Groups with equal plan keys share one search (the layers of a transformer).
void plan(CompileState &s) {
  std::unordered_map<std::string, PlanDecision> searched; // planKey -> decision
  for (size_t i = 0; i < s.part.groups.size(); ++i) {
    const KernelGroup &grp = s.part.groups[i];
    if (isBuiltin(grp)) { // no kernel: the runtime runs the body's steps, or fails the run
      s.groupKernels.emplace_back();
      s.decisions.emplace_back();
      continue;
    }
    std::string name = symbolFor(static_cast<int>(i), grp.kind);
    PlanDecision dec;
    kir::Kernel k;
    std::string key = planKey(grp);
    auto hit = searched.find(key);
    if (hit != searched.end()) {
      Knobs kn;
      kn.planFor = s.planner.planFor;
      kn.values = hit->second.chosen.knobs;
      k = lowerGroup(grp, name, kn);
      if (k.knobs == hit->second.chosen.knobs)
        dec = hit->second;
      else // the recipe filled the knobs in differently: search this group on its own
        k = planKernel(grp, name, s.hw, s.planner, &dec);
    } else {
      k = planKernel(grp, name, s.hw, s.planner, &dec);
      searched.emplace(std::move(key), dec);
    }
    s.groupKernels.push_back(std::move(k));
    s.decisions.push_back(std::move(dec));
  }
}

// Every lowered kernel is checked (structure, the SIMT rule) before any pass or printer sees
// it, so an invalid kernel is blamed on its recipe.
void verifyKernelIr(CompileState &s) {
  for (size_t i = 0; i < s.groupKernels.size(); ++i) {
    const kir::Kernel &k = s.groupKernels[i];
    if (i < s.part.groups.size() && isBuiltin(s.part.groups[i]))
      continue;
    if (std::string all = kir::verifyKernelText(k); !all.empty())
      throw InternalError(cat("recipe ", k.recipe, " built an invalid kernel ", k.name, ":", all));
  }
}

// A Kernel IR pass (kir/kir_pass.h) on every kernel, verified after it changed one. The cost
// model does not read what these passes change, so the planner's prices stand.
void runKernelPass(CompileState &s, kir::KernelPassId id) {
  kir::KernelPassManager pm;
  pm.add(kir::createKernelPass(id));
  for (size_t i = 0; i < s.groupKernels.size(); ++i)
    if (i >= s.part.groups.size() || !isBuiltin(s.part.groups[i]))
      pm.run(s.groupKernels[i]);
}

// Symbolic dims (issue 21): every symbolic kernel is certified shape-generic. It is lowered
// again, with the knobs chosen at the planning point and through the same Kernel IR passes, with
// every dim at its minimum and at its maximum; its Kernel IR must print exactly as at the
// planning point (the dims are variables there, so the text does not depend on their values).
// A kernel that differs depends on a size it read at one point (a planning-point extent baked
// into a bound, a guard dropped because the planning size divided a tile), and is refused,
// naming the first line that differs, rather than run wrong at other shapes.
void certifyShapeGeneric(CompileState &s) {
  const std::vector<DimRange> &dims = s.graph->dims();
  if (dims.empty())
    return;
  std::vector<std::map<std::string, int64_t>> points(2);
  for (const DimRange &d : dims) {
    points[0][d.name] = d.min;
    points[1][d.name] = d.max;
  }
  // Every value the groups touch, with its planning-point type to restore.
  std::vector<std::pair<Value *, TensorType>> values;
  std::set<Value *> seen;
  for (const KernelGroup &grp : s.part.groups)
    for (Node *n : grp.nodes)
      for (const auto *list : {&n->operands(), &n->results()})
        for (Value *v : *list)
          if (v->type().isSymbolic() && seen.insert(v).second)
            values.emplace_back(v, v->type());
  kir::KernelPassManager pm;
  kir::buildDefaultKernelPipeline(pm);
  auto restore = [&] {
    for (auto &[v, t] : values)
      v->setType(t);
  };
  for (const auto &point : points) {
    for (auto &[v, t] : values) {
      TensorType at = t;
      for (size_t i = 0; i < at.sym.size(); ++i)
        at.shape[i] = *at.sym[i].eval(point);
      v->setType(at);
    }
    std::string where;
    for (const auto &[name, value] : point)
      where += (where.empty() ? "" : ", ") + name + "=" + std::to_string(value);
    for (size_t i = 0; i < s.groupKernels.size(); ++i) {
      const kir::Kernel &k = s.groupKernels[i];
      if (k.dims.empty())
        continue;
      std::string want = kir::printKernel(k), got, why;
      try {
        Knobs kn;
        kn.planFor = s.planner.planFor;
        kn.values = k.knobs;
        kir::Kernel again = lowerGroup(s.part.groups[i], k.name, kn);
        pm.run(again);
        got = kir::printKernel(again);
      } catch (const std::exception &e) {
        why = e.what();
      }
      if (why.empty() && got == want)
        continue;
      if (why.empty()) {
        std::istringstream a(want), b(got);
        std::string la, lb;
        while (std::getline(a, la) && std::getline(b, lb) && la == lb) {
        }
        why = cat("its Kernel IR differs there:\n    planning point: ", la, "\n    ", where, ": ",
                  lb);
      }
      restore();
      throw UserError(cat("kernel ", k.name, " (", k.recipe,
                          ") is not shape-generic: lowered again at ", where, ", ", why,
                          "\n  bind the dims with --dim NAME=N to compile this model"));
    }
  }
  restore();
}

// A loop group's step: a runtime built-in over its inputs and outputs; stage loop-bodies adds
// the body's steps after it.
PlanStep loopStep(CompileState &s, const KernelGroup &grp) {
  Plan &p = s.model.plan;
  if (s.target.gpu())
    throw UserError(cat(grp.anchor->where(), ": a loop kept at run time runs on cpu targets only ",
                        "(bind its trip count and condition with --const to unroll it)"));
  PlanStep st;
  st.kind = "loop";
  st.recipe = "runtime";
  for (const Value *v : grp.inputs)
    st.inputs.push_back(p.buffers[bufferFor(p, s.buffers, v)].id);
  for (const Value *v : grp.outputs)
    st.outputs.push_back(p.buffers[bufferFor(p, s.buffers, v)].id);
  st.loop.emplace();
  st.origins = grp.anchor->loc.origins;
  return st;
}

// A fail group's step (issue 51: a branch of an If chosen at run time that cannot run at the
// bound shapes): a runtime built-in that fails the run with the node's message. It must run only
// when its side is taken, which the branch guards (a later stage) see to on host plans; GPU plans
// were refused at the partition (refuseGpuFails).
PlanStep failStep(CompileState &s, const KernelGroup &grp) {
  Plan &p = s.model.plan;
  PlanStep st;
  st.kind = "fail";
  st.recipe = "runtime";
  for (const Value *v : grp.outputs)
    st.outputs.push_back(p.buffers[bufferFor(p, s.buffers, v)].id);
  st.fail = grp.anchor->s("message");
  st.origins = grp.anchor->loc.origins;
  return st;
}

// A plan step from group `grp`, its kernel and the planner's decision.
PlanStep makeStep(CompileState &s, const KernelGroup &grp, const kir::Kernel &k,
                  const PlanDecision &dec) {
  Plan &p = s.model.plan;
  PlanStep st;
  st.kind = grp.kind;
  st.kindId = k.name;
  st.recipe = k.recipe;
  st.recipeReason = dec.recipeReason;
  st.recipeFallback = dec.recipeFallback;
  st.writesInPlace = dec.writesInPlace;
  for (const Value *v : grp.inputs)
    st.inputs.push_back(p.buffers[bufferFor(p, s.buffers, v)].id);
  for (const Value *v : grp.outputs)
    st.outputs.push_back(p.buffers[bufferFor(p, s.buffers, v)].id);
  if (grp.anchor) {
    for (const auto &[key, val] : grp.anchor->attrs)
      st.attrs[key] = formatAttr(val);
    for (MemProperty pr : grp.anchor->props.list())
      st.properties.push_back(propertyName(pr));
  }
  for (const auto &[axis, extent] : k.grid)
    st.grid.push_back(extent);
  st.symGrid = k.symGrid;
  st.dims = !k.dims.empty();
  // Data dims set here: their count results are the group's outputs (fusion keeps them).
  for (const Node *n : grp.nodes) {
    if (!n->info().has(SETS_DIM))
      continue;
    const Value *count = n->results().back();
    AICF_CHECK(std::find(grp.outputs.begin(), grp.outputs.end(), count) != grp.outputs.end(),
               n->where(), ": the count of data dim ", n->s("dim"), " is not stored");
    p.dimSetBy[n->s("dim")] = p.buffers[bufferFor(p, s.buffers, count)].id;
    st.setsDims.push_back(n->s("dim"));
  }
  st.threads = k.threads;
  for (const kir::BufferP &b : k.allocs)
    if (b->scope == kir::Scope::Shared)
      st.sharedBytes += b->numel() * static_cast<int64_t>(dtypeSize(b->dtype));
  if (s.target.gpu())
    st.dynamicSharedBytes = cudaDynamicSharedBytes(k, s.target.hw);
  st.knobs = k.knobs;
  const KernelCost &cost = dec.chosen.cost;
  st.lowerBoundBytes = cost.lowerBoundBytes;
  st.bytes = cost.bytes;
  st.flops = cost.flops;
  st.timeUs = cost.timeUs;
  st.oneCoreUs = cost.oneCoreUs;
  st.precision = kir::kernelPrecision(k);
  st.fp32Us = cost.fp32TimeUs;
  if (!s.target.gpu()) {
    int64_t blocks = 1;
    for (int64_t e : st.grid)
      blocks *= e;
    // A GPU plan run here (--plan-for) has no host cost: its blocks in up to 64 chunks.
    st.chunks = s.hw.gpu      ? std::min<int64_t>(blocks, 64)
                : cost.serial ? 1
                              : hostChunks(s.hw, blocks, cost.timeUs);
  }
  if (s.hw.gpu) {
    st.occupancy = cost.occupancy.fraction;
    st.registers = cost.registers;
  }
  st.search.candidates = dec.considered;
  st.search.feasible = dec.feasible;
  st.search.isDefault = dec.isDefault;
  st.search.defaultUs = dec.defaults.cost.timeUs;
  st.search.reason = dec.reason;
  for (const auto *list : {&dec.runnersUp, &dec.rejected})
    for (const Candidate &c : *list)
      st.alternatives.push_back({c.knobs, c.cost.timeUs, c.rejected});
  std::unordered_set<std::string> seenOrigins;
  for (const Node *n : grp.nodes)
    for (const std::string &o : n->loc.origins)
      if (seenOrigins.insert(o).second)
        st.origins.push_back(o);
  return st;
}

// One plan step per group, in partition order (a valid execution order). Identical kernels are
// emitted once: a step whose Kernel IR (its name aside) matches an earlier step's calls that
// step's symbol (the layers of a transformer share their kernels).
void planSteps(CompileState &s) {
  Plan &p = s.model.plan;
  std::unordered_map<std::string, std::string> emitted; // kernel text -> symbol
  for (size_t i = 0; i < s.part.groups.size(); ++i) {
    if (isLoop(s.part.groups[i])) {
      p.steps.push_back(loopStep(s, s.part.groups[i]));
      s.loopNodes.push_back(s.part.groups[i].anchor);
      continue;
    }
    if (isFail(s.part.groups[i])) {
      p.steps.push_back(failStep(s, s.part.groups[i]));
      continue;
    }
    kir::Kernel &k = s.groupKernels[i];
    std::string name = symbolFor(static_cast<int>(i), s.part.groups[i].kind);
    k.name.clear();
    std::string text = kir::printKernel(k);
    auto [same, fresh] = emitted.emplace(std::move(text), name);
    k.name = same->second;
    p.steps.push_back(makeStep(s, s.part.groups[i], k, s.decisions[i]));
    p.predictedTimeUs += s.decisions[i].chosen.cost.timeUs;
    if (fresh)
      s.model.kernels.push_back(std::move(k));
  }
  s.groupKernels.clear();
}

// --candidate-rank past every kernel's feasible schedules would silently plan the same as a
// smaller rank: refuse it (a kernel with fewer candidates than the rank takes its last one).
void checkCandidateRank(CompileState &s) {
  const Plan &p = s.model.plan;
  int rank = s.opts.rank;
  if (s.opts.schedule == Schedule::Default || rank <= 0 || p.steps.empty())
    return;
  int most = 0;
  for (const PlanStep &st : p.steps)
    most = std::max(most, st.search.feasible);
  if (rank >= most)
    throw UserError(cat("--candidate-rank ", rank, ": no kernel has that many feasible ",
                        "schedules (the most is ", most, ": ranks 0..", most - 1, ")"),
                    1);
}

// Host plans: a branch's steps run only when its side is taken (plan/branch_guards.h). On the
// kernel steps (one per group), before the memory plan appends its copies.
void branchGuards(CompileState &s) {
  guardBranchSteps(s.model.plan, *s.graph, s.part.groups, s.buffers);
  // A fail step left unguarded would fail every run: refused (failStep refused GPU plans).
  for (const PlanStep &st : s.model.plan.steps)
    if (st.fail && st.guard.empty())
      throw UserError(cat(*st.fail, "\n  the plan cannot skip that branch when the other is taken "
                                    "(its condition is not a buffer written before the branch): "
                                    "bind the condition's inputs with --const to remove it"));
}

// Output copies, liveness, in-place reuse and the arena (plan/memory_plan.h), on the steps.
void memoryPlan(CompileState &s) {
  planMemory(s.model.plan, s.buffers);
}

// Host plans: consecutive independent steps become one dispatch of the thread pool
// (plan/dispatch_groups.h). After the memory plan, since independence is decided on the arena.
void dispatchGroups(CompileState &s) {
  groupDispatches(s.model.plan, s.hw);
}

// Loop bodies (plan/loop_bodies.h): each compiled as a model of its own, through every stage,
// then spliced after its loop step, its kernels renamed and its weights placed after the
// graph's. After the enclosing plan is complete (its arena and weights are what the body's go
// after) and before the source is printed (the body's kernels join it).
void loopBodies(CompileState &s) {
  Plan &p = s.model.plan;
  size_t k = 0;
  for (size_t i = 0; i < p.steps.size(); ++i) {
    if (!p.steps[i].loop)
      continue;
    AICF_CHECK(k < s.loopNodes.size(), "more loop steps than loop nodes");
    const Node &node = *s.loopNodes[k];
    std::string prefix = cat("l", k++, "_");
    CompiledModel body;
    // The body is a graph of its own: printed and timed like the enclosing one, but the
    // --verify-passes hooks compare against the enclosing graph's outputs, so they stay out.
    CompileOptions bodyOpts = s.opts;
    bodyOpts.passes.afterChangedPass = nullptr;
    bodyOpts.passes.beforePass = nullptr;
    try {
      body = buildModel(*node.body, bodyOpts);
    } catch (const UserError &e) {
      throw UserError(cat(node.where(), ": loop body @", node.body->name(), ": ", e.what()),
                      e.exitCode());
    }
    int64_t base = spliceLoopBody(p, i, body.plan, prefix);
    for (kir::Kernel &kern : body.kernels) {
      kern.name = prefix + kern.name;
      s.model.kernels.push_back(std::move(kern));
    }
    s.model.bodyWeights.emplace_back(base,
                                     packWeights(body.graph ? *body.graph : *node.body, body.plan));
    for (auto &[offset, bytes] : body.bodyWeights)
      s.model.bodyWeights.emplace_back(base + offset, std::move(bytes));
    p.predictedTimeUs += body.plan.predictedTimeUs; // one iteration's
    i += static_cast<size_t>(p.steps[i].loop->bodySteps);
  }
}

// The source: the kernels through the target's printer, then the runtime ABI's entry points.
void printSource(CompileState &s) {
  CompiledModel &m = s.model;
  const std::string &layout = m.plan.layout;
  if (s.target.gpu()) {
    m.source = printCudaSource(m.kernels, s.target);
    m.source += "\n// ---- model entry points (aicf runtime ABI) ----\n";
    m.source += "extern \"C\" const char *aicf_layout(void) { return \"" + layout + "\"; }\n";
    return;
  }
  m.source = printHostSource(
      m.kernels, s.hw.vectorBits > 0 ? HostVectorUnit{s.hw.vectorBits, s.hw.vectorRegisters()}
                                     : HostVectorUnit{});
  m.source += "\n// ---- model entry points (aicf runtime ABI) ----\n";
  m.source += "#if AICF_IN_PART(0)\n"; // (in the first part of a parallel build)
  m.source += "extern \"C\" const char *aicf_layout(void) { return \"" + layout + "\"; }\n";
  // Kernel ABI 2: NAME(args, lo, hi) runs blocks [lo, hi) (ABI 1 kernels ran the whole grid
  // in an OpenMP region); the runtime refuses a folder without this marker.
  m.source += "extern \"C\" int aicf_host_abi(void) { return 2; }\n";
  m.source += "#endif\n";
}

} // namespace stages

// The stages of buildModel: the entries of driver/pipeline.cpp's list that it runs, in order.
const std::vector<CompileStage> &compileStages() {
  static const std::vector<CompileStage> stages = [] {
    std::vector<CompileStage> out;
    for (const PipelineEntry &e : pipeline())
      if (e.run)
        out.push_back({e.name, e.run, &e});
    return out;
  }();
  return stages;
}

CompileState::CompileState(const Graph &in, const CompileOptions &o)
    : input(in), opts(o), target(o.target.loaded()), planFor(o.planFor.loaded()), hw(planFor.hw),
      graph(&in) {
  // AMX tiles only where the folder's -march has them (its kernels are compiled for it, not
  // for the CPU planned for).
  if (!hw.gpu) {
    const std::vector<std::string> &isa = hostIsaFeatures(o.cpuArch);
    auto has = [&](const char *f) { return std::find(isa.begin(), isa.end(), f) != isa.end(); };
    if (!has("amx-bf16"))
      hw.amxBf16Products = planFor.hw.amxBf16Products = target.hw.amxBf16Products = 0;
    if (!has("amx-int8"))
      hw.amxInt8Products = planFor.hw.amxInt8Products = target.hw.amxInt8Products = 0;
  }
  fusion.rematCost = rematCostFor(hw);
  fusion.layoutCost = layoutCostFor(hw);
  planner.planFor = planFor;
  planner.schedule = o.schedule;
  planner.rank = o.rank;
  fusion.kernelCost = kernelCostFor(hw, planner);
  fusion.rowNorms = o.rowNorms;
  fusion.chains = o.chains;
  fusion.normEpilogues = o.normEpilogues;
  fusion.convChains = o.convChains;
}

CompiledModel buildModel(const Graph &input, const CompileOptions &opts) {
  CompileState s(input, opts);
  for (const CompileStage &stage : compileStages()) {
    printStageIr(s, *stage.entry, /*after=*/false);
    auto t0 = std::chrono::steady_clock::now();
    stage.run(s);
    printStageIr(s, *stage.entry, /*after=*/true);
    if (opts.onStage)
      opts.onStage(stage.name, secondsSince(t0));
  }
  return std::move(s.model);
}

Plan compileCudaModel(const CompiledModel &m, const std::string &dir, std::string *ptxasReport) {
  AICF_CHECK(m.plan.target.gpu(), "compileCudaModel: target ", m.plan.target.name());
  CudaBuildOptions cb;
  cb.arch = m.plan.target.arch;
  // No symbol table: it holds nvcc's temporary file name (tmpxft_<pid>_..._kernels.cudafe1.cpp),
  // which made two builds of one model differ. The runtime finds its symbols in .dynsym.
  cb.extraFlags = "-Xlinker -s";
  fs::path d(dir);
  std::string report =
      compileCudaSource(m.source, (d / "kernels.cu").string(), (d / "libmodel.so").string(), cb);
  Plan plan = m.plan;
  recordPtxas(plan, parsePtxasReport(report), plan.target);
  if (ptxasReport)
    *ptxasReport = report;
  return plan;
}

std::vector<uint8_t> packWeights(const Graph &g, const Plan &plan) {
  std::vector<uint8_t> out(static_cast<size_t>(plan.weightsBytes), 0);
  std::unordered_map<std::string, const PlanBuffer *> byValue; // the last one, as before
  for (const PlanBuffer &pb : plan.buffers)
    if (pb.kind == BufferKind::Weight)
      byValue[pb.value] = &pb;
  for (const Value *w : g.weights()) {
    auto it = byValue.find(w->name());
    const PlanBuffer *b = it == byValue.end() ? nullptr : it->second;
    AICF_CHECK(b != nullptr, "weight ", w->name(), " is not in the plan");
    const Tensor &t = *w->data();
    std::copy(t.bytes().begin(), t.bytes().end(), out.begin() + b->offset);
  }
  return out;
}

namespace {
void writeFile(const fs::path &p, const std::string &data) {
  std::ofstream f(p, std::ios::binary);
  if (!f || !f.write(data.data(), static_cast<std::streamsize>(data.size())) || !f.flush())
    throw UserError(cat("cannot write ", p.string()), 1);
}
} // namespace

void writeArtifacts(
    const Graph &g, const CompiledModel &m, const CompileOptions &opts, const std::string &outDir,
    const std::map<std::string, std::string> &extraFiles,
    const std::function<void(const Plan &, std::map<std::string, std::string> &)> &finalize) {
  // A std::filesystem failure here is about a path the user named (-o): exit 1, naming it.
  try {
    StagedOutputFolder staged(outDir); // refuses an OUT that is not ours to replace
    const fs::path &tmp = staged.dir();
    auto t0 = std::chrono::steady_clock::now();
    printFolderIr(opts.passes, "build", /*after=*/false, tmp.string());
    Plan plan = m.plan;
    if (m.plan.target.gpu()) {
      plan = compileCudaModel(m, tmp.string()); // kernels.cu, libmodel.so, ptxas figures
    } else {
      HostBuildOptions hb;
      hb.cpuArch = opts.cpuArch;
      hb.extraFlags = "-s"; // no symbol table: the .so's bytes do not depend on the folder name
      compileHostSource(m.source, (tmp / "kernels.cpp").string(), (tmp / "libmodel.so").string(),
                        hb);
    }
    printFolderIr(opts.passes, "build", /*after=*/true, tmp.string());
    if (opts.onStage)
      opts.onStage(m.plan.target.gpu() ? "build (nvcc)" : "build (c++)", secondsSince(t0));
    printFolderIr(opts.passes, "write", /*after=*/false, tmp.string());
    t0 = std::chrono::steady_clock::now();
    std::map<std::string, std::string> files = extraFiles;
    if (finalize)
      finalize(plan, files);
    // The Kernel IR of every kernel, for people and aicf-diff (kernels.cpp is its printing).
    std::string kir;
    for (const kir::Kernel &k : m.kernels)
      kir += kir::printKernel(k) + "\n";
    files["kernels.kir"] = kir;
    if (opts.bundle) { // what the runtime reads, nothing else
      files.clear();
      fs::remove(tmp / "kernels.cpp");
      fs::remove(tmp / "kernels.cu");
    }
    std::vector<uint8_t> weights = packWeights(m.graph ? *m.graph : g, plan);
    for (const auto &[offset, bytes] : m.bodyWeights) // loop bodies' weights (stage loop-bodies)
      std::copy(bytes.begin(), bytes.end(), weights.begin() + offset);
    writeFile(tmp / "weights.bin", std::string(weights.begin(), weights.end()));
    std::ostringstream yaml;
    plan.writeYaml(yaml);
    writeFile(tmp / "plan.yaml", yaml.str());
    for (const auto &[name, text] : files)
      writeFile(tmp / name, text);
    staged.commit();
    printFolderIr(opts.passes, "write", /*after=*/true, outDir);
    if (opts.onStage)
      opts.onStage("write", secondsSince(t0));
  } catch (const fs::filesystem_error &e) {
    throw UserError(
        cat("output folder ", outDir, ": ", e.path1().string(), ": ", e.code().message()), 1);
  }
}

} // namespace aicf
