// The compiler's pipeline, listed once, top to bottom (driver/pipeline.cpp), the way XLA's
// HloPassPipeline or tinygrad's full_rewrite_to_sink read:
//
//   import -> graph passes -> target passes -> kernel groups -> Kernel IR -> planning ->
//   backend -> artifacts
//
// Each entry is a named graph pass (passes/passes.def), Kernel IR pass (kir/kernel_passes.def) or
// stage, with the one-line reason it sits where it does. Every consumer reads this one list:
// aicfc runs it (import, runGraphPasses, buildModel, writeArtifacts) and prints it
// (--list-passes); aicf-opt --pipeline runs its graph passes; buildModel's stages
// (compileStages) and the Kernel IR pipeline are the entries of their phases.
//
// Every graph pass runs under the user's pass-manager options (CompileOptions::passes:
// --print-ir-before/after, --verify-passes, --pass-timing), the driver's own (pack-weights,
// choose-attention, ...) included; a graph pass prints only when it changed the graph
// (passes/pass.h). The other stages print what they made under --print-ir-before/after NAME:
// the graph, the kernel groups, the Kernel IR of every kernel, the plan, the source, or the
// files written.
#pragma once

#include "driver/compile.h"
#include "frontend/onnx_importer.h"
#include "kir/kir_pass.h"
#include "passes/pass.h"

#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace aicf {

enum class Phase {
  Import,       // ONNX -> Graph IR
  GraphPasses,  // target-independent rewrites, in one pass manager (graph.mcir is their result)
  TargetPasses, // the target's layout and precision, and rewrites priced by the cost model
  KernelGroups, // which nodes become one kernel
  KernelIr,     // each group lowered to Kernel IR by its recipe, and the Kernel IR passes
  Planning,     // plan steps, memory plan, dispatch
  Backend,      // host C++ or CUDA source
  Artifacts,    // libmodel.so, weights.bin, plan.yaml
};
const char *phaseName(Phase p);

// What --print-ir-before/after NAME prints around an entry.
enum class IrView {
  Graph,     // the Graph IR (graph passes: printed by the pass manager, only when changed)
  Groups,    // the kernel groups of the partition
  KernelIr,  // every kernel's Kernel IR
  Plan,      // the plan as plan.yaml has it so far
  Source,    // kernels.cpp / kernels.cu
  Artifacts, // the files written, with their sizes
};

enum class EntryKind {
  Stage,      // a step of the driver
  GraphPass,  // a pass of passes/passes.def, run by a pass manager
  KernelPass, // a pass of kir/kernel_passes.def, run on every kernel
};

struct PipelineEntry {
  const char *name; // the pass's name, or the stage's
  Phase phase;
  EntryKind kind;
  IrView view;
  const char *reason; // one line: why it sits here
  // buildModel's stages (target passes to backend); null for the entries run elsewhere (import,
  // the graph passes, artifacts).
  void (*run)(CompileState &) = nullptr;
};

// The pipeline, in order; a pass may appear more than once (simplify).
const std::vector<PipelineEntry> &pipeline();
// What an entry does, in one line: its pass's summary, or the stage's reason.
std::string entrySummary(const PipelineEntry &e);
// The names of the pipeline's entries, each once, in order of first appearance.
std::vector<std::string> pipelineNames();
// aicfc --list-passes: the pipeline in order, by phase, one entry per line (name and summary).
void printPipeline(std::ostream &os);
// A UserError (exit 1) for the first of `names` that is no entry of the pipeline (nor "all"):
// the graph passes are listed as passes/pass.h checkPassNames lists them, then the stages.
void checkPipelineNames(const std::vector<std::string> &names, const char *flag);

// The graph-pass phase, in order, added to `pm` (aicf-opt --pipeline; tests).
void buildDefaultPipeline(PassManager &pm);

// Stage import: the ONNX model as Graph IR, with the inputs --const bound as plan.yaml records
// them; printed under --print-ir-after=import.
struct ImportedModel {
  std::unique_ptr<Graph> graph;
  std::vector<BoundInput> boundInputs;
};
ImportedModel importModel(const std::string &path, const ImportOptions &opts,
                          const PassManagerOptions &passes = {});

// The graph-pass phase on `g`, under the user's pass-manager options.
void runGraphPasses(Graph &g, PassContext &ctx, const PassManagerOptions &passes);

// The stage view printed around a stage (no-op unless the stage is selected in `opts.passes`).
void printStageIr(const CompileState &s, const PipelineEntry &e, bool after);
// The artifacts stages' view: the files in `dir`, with their sizes.
void printFolderIr(const PassManagerOptions &o, const char *stage, bool after,
                   const std::string &dir);

namespace kir {
// The Kernel IR phase's passes, in order, added to `pm` (the driver's, and certifyShapeGeneric's
// re-lowering).
void buildDefaultKernelPipeline(KernelPassManager &pm);
// Runs them on `k`: for tools and tests that lower kernels outside the driver and want the
// kernel the driver would print.
bool runDefaultKernelPipeline(Kernel &k, std::vector<std::string> *notes = nullptr);
} // namespace kir

} // namespace aicf
