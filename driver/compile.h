// From the rewritten graph to the output folder (docs/architecture.md), as the named stages of the
// pipeline (driver/pipeline.cpp lists them with the rest of the compiler, in order):
//   target passes -> partition into kernel groups -> choose streaming or materialised attention
//   (a graph pass) -> plan each group (the planner lowers every candidate to Kernel IR and keeps
//   the cheapest) -> verify the Kernel IR -> Kernel IR passes -> plan steps -> memory plan ->
//   print host C++ or CUDA; then writeArtifacts builds libmodel.so and writes weights.bin and
//   plan.yaml.
// The folder is written atomically: everything goes to a temporary sibling folder that is
// renamed into place only when complete, so a failed compile leaves nothing that looks valid.
// An existing OUT is replaced only when aicf wrote it (support/output_folder.h).
#pragma once

#include "ir/graph.h"
#include "ir/precision.h"
#include "kir/kir.h"
#include "lower/fusion.h"
#include "passes/choose_attention.h"
#include "passes/pass.h"
#include "plan/memory_plan.h"
#include "plan/plan.h"
#include "plan/planner.h"
#include "target/target.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace aicf {

struct CompileOptions {
  // The inputs aicfc --const bound at compile time (recorded in plan.yaml `bound_inputs`).
  std::vector<BoundInput> boundInputs;
  // What libmodel.so is built for: the cpu (host C++) or a CUDA target (kernels.cu by nvcc),
  // whose hardware description gives the printer's and ptxas' limits.
  Target target;
  // Whose plan the kernels follow, with the hardware description planned for (--hardware): the
  // target itself, or a GPU target whose plan a cpu build emulates (aicfc --plan-for).
  // Targets without a description get their default one (Target::loaded): the detected host.
  Target planFor;
  std::string cpuArch = "native";
  Schedule schedule = Schedule::Cost; // --schedule (plan/planner.h)
  int rank = 0;                       // --candidate-rank: take the rank-th cheapest candidate
  // --attention (passes/choose_attention.h): streaming or materialised, whichever the cost model
  // prices lower (Cost), streaming, or materialised where that form is exact (streaming
  // elsewhere).
  AttentionPolicy attention = AttentionPolicy::Cost;
  // --row-norms: a layer_norm / rms_norm read only as contractions' A (lower/fusion.h rule 7):
  // recomputed in the readers' A reads when the planner prices that lower (Cost), always where
  // legal (Fold), or never (Store: a kernel of its own).
  RowNormPolicy rowNorms = RowNormPolicy::Cost;
  // --chain-contractions: a contraction read only as another's A (lower/fusion.h rule 8): one
  // chained kernel when the planner prices it lower (Cost), always where legal (Fuse), or never
  // (Store: two kernels, the intermediate stored).
  FusePolicy chains = FusePolicy::Cost;
  // --norm-epilogues: a layer_norm / rms_norm of a contraction's output rows (lower/fusion.h
  // rule 9): Cost, Fuse (always, where legal) or Store (a kernel of its own).
  FusePolicy normEpilogues = FusePolicy::Cost;
  // --conv-chains: an inverted residual's 1 x 1 expand, depthwise and 1 x 1 project convs on
  // the channel-blocked layout (lower/fusion.h rule 10): Cost, Fuse (always, where legal) or
  // Store (a kernel each).
  FusePolicy convChains = FusePolicy::Cost;
  // Host plans: constant GEMM weights packed into the micro-kernel's column panels
  // (passes/pack_weights.cpp); aicfc --no-pack-weights turns it off (for comparisons).
  bool packWeights = true;
  // Host plans run conv chains on the channel-blocked layout (passes/block_channels.cpp);
  // aicfc --no-block-channels keeps NCHW (for comparisons).
  bool blockChannels = true;
  // --explain: the target passes record their decisions here too (the layout chosen for each
  // value, block-channels), after the graph passes' records; null: not recorded.
  ExplainLog *explain = nullptr;
  // GPU plans: deep contractions with few output tiles computed in K slices where the cost
  // model prices it lower (passes/split_k.h); aicfc --no-split-k turns it off (comparisons).
  bool splitK = true;
  // A chain of two contractions (an MLP) computed in slices of its hidden dimension where the
  // cost model prices it lower (passes/split_chains.h); aicfc --no-split-chains turns it off.
  bool splitChains = true;
  // --chain-slices: 0 lets the cost model choose; N > 1 splits every legal chain N ways.
  int chainSlices = 0;
  // Sibling contractions of one A (q, k and v projections) computed as one over their
  // concatenated weights where the cost model prices it lower (passes/merge_siblings.h); aicfc
  // --no-merge-siblings turns it off (comparisons).
  bool mergeSiblings = true;
  // --precision: the arithmetic of GPU plans' products (ir/precision.h): fp32 (SIMT), or tf32 /
  // fp16 / bf16 on tensor cores with f32 accumulation (stage assign-precision).
  Precision precision = Precision::F32;
  // --io-precision: the type the model's float inputs and outputs are exchanged in (fp32, fp16,
  // bf16; stage io-precision); none: the model's own.
  std::optional<Precision> ioPrecision;
  // --bundle: writeArtifacts writes only what a deployment loads (plan.yaml, weights.bin,
  // libmodel.so, and the .aicf-output marker that lets aicfc replace the folder later); no
  // kernels.cpp / .cu and no reports.
  bool bundle = false;
  // The user's pass-manager options (aicfc --print-ir-before/after, --pass-timing,
  // --verify-passes): every graph pass the stages run is run under them, and every other stage
  // prints what it made when named in printIrBefore/After (driver/pipeline.h). Default: each
  // pass verified, nothing printed.
  PassManagerOptions passes;
  // Progress (aicfc -v): called after each stage of buildModel and of writeArtifacts ("build",
  // "write") with the stage's name and its wall time in seconds.
  std::function<void(const char *stage, double seconds)> onStage;
};

struct CompiledModel {
  // The graph the kernels were built from when the driver rewrote a copy (an attention
  // materialised by the choose-attention pass, passes/choose_attention.h); null when it is the
  // caller's graph.
  std::shared_ptr<Graph> graph;
  Plan plan;
  // The distinct kernels, in the order of the first step calling each (steps whose kernels are
  // identical share one symbol, PlanStep::kindId; built-in copy steps have none).
  std::vector<kir::Kernel> kernels;
  std::string source; // kernels.cpp (host) or kernels.cu (CUDA targets)
  // The weights of loop bodies (compiled as graphs of their own, stage loop-bodies): where each
  // body's packed weights go in weights.bin, after the graph's own.
  std::vector<std::pair<int64_t, std::vector<uint8_t>>> bodyWeights;
};

// Partitions, lowers and plans memory (runs compileStages() in order); no files are touched.
CompiledModel buildModel(const Graph &g, const CompileOptions &opts);

// What the stages of buildModel hand each other.
struct CompileState {
  CompileState(const Graph &input, const CompileOptions &opts);
  CompileState(const CompileState &) = delete; // `fusion` holds a reference to `hw`
  CompileState &operator=(const CompileState &) = delete;

  const Graph &input;
  const CompileOptions &opts;
  Target target;  // opts.target with its hardware description loaded
  Target planFor; // opts.planFor likewise: whose plan the kernels follow
  Hardware hw;    // planFor.hw: the description planned for
  FusionOptions fusion;
  PlannerOptions planner;
  const Graph *graph = nullptr;      // the graph compiled: `input`, or model.graph once rewritten
  Partition part;                    // of *graph
  ValueBuffers buffers;              // value -> plan buffer (plan/memory_plan.h)
  std::vector<LayoutChoice> layouts; // the host layout passes' choices (plan.yaml's `layouts`)
  // Per kernel group, in partition order: the planned kernel and the planner's decision.
  std::vector<kir::Kernel> groupKernels;
  std::vector<PlanDecision> decisions;
  std::vector<const Node *> loopNodes; // the loop steps' nodes, in step order (loop-bodies)
  CompiledModel model;
};

struct PipelineEntry;

struct CompileStage {
  const char *name; // "partition", "choose-attention", ...
  void (*run)(CompileState &);
  const PipelineEntry *entry; // its entry in driver/pipeline.cpp's list
};

// The stages of buildModel, in order: the entries of driver/pipeline.cpp's list that it runs.
const std::vector<CompileStage> &compileStages();

// Writes OUT/{kernels.cpp | kernels.cu, libmodel.so, weights.bin, plan.yaml} and `extraFiles` (name
// -> contents: graph.mcir, explain.yaml, report.txt) atomically, with the .aicf-output marker.
// UserError (exit 1) when OUT is not ours to replace (support/output_folder.h) or cannot be
// written.
// `finalize`, when given, is called with the final plan (CUDA: ptxas' figures recorded) before
// anything is written and may add files (aicfc's report.txt shows ptxas beside the estimates).
void writeArtifacts(
    const Graph &g, const CompiledModel &m, const CompileOptions &opts, const std::string &outDir,
    const std::map<std::string, std::string> &extraFiles = {},
    const std::function<void(const Plan &, std::map<std::string, std::string> &)> &finalize = {});

// CUDA targets: writes DIR/kernels.cu, builds DIR/libmodel.so with nvcc and returns the plan
// with each kernel's ptxas figures recorded (hints.ptxas), checked against the target's limits
// (UserError naming the kernel and the limit). `ptxasReport`, if given, receives nvcc's output.
Plan compileCudaModel(const CompiledModel &m, const std::string &dir,
                      std::string *ptxasReport = nullptr);

// The weights of `g` packed as in the plan (64-byte aligned, plan buffer offsets).
std::vector<uint8_t> packWeights(const Graph &g, const Plan &plan);

} // namespace aicf
