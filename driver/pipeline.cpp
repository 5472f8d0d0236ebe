// See pipeline.h. The compiler, listed once, top to bottom: each entry a graph pass
// (passes/passes.def), Kernel IR pass (kir/kernel_passes.def) or stage (driver/stages.h), with the
// reason it sits where it does. Moving a line moves the pass; `aicfc --list-passes` prints this.
#include "driver/pipeline.h"

#include "driver/stages.h"
#include "ir/printer.h"
#include "support/diagnostics.h"
#include "support/stderr_stream.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

namespace fs = std::filesystem;

namespace aicf {

namespace {

using P = Phase;
using K = EntryKind;
using V = IrView;

template <kir::KernelPassId Id>
void kernelPass(CompileState &s) {
  stages::runKernelPass(s, Id);
}

} // namespace

// Long: the whole pipeline in one table, top to bottom, is the point (one entry per stage).
const std::vector<PipelineEntry> &pipeline() {
  static const std::vector<PipelineEntry> entries = {
      // ---- Import -------------------------------------------------------------------------------
      {"import", P::Import, K::Stage, V::Graph,
       "the ONNX model as Graph IR: ops converted, shapes inferred, --const inputs bound"},

      // ---- Graph passes: target-independent, in one pass manager; graph.mcir is their result ----
      // Canonicalise, so patterns see one spelling of each computation.
      {"fold-constants", P::GraphPasses, K::GraphPass, V::Graph,
       "exporters compute scales and masks at run time: fold them before matching"},
      {"simplify", P::GraphPasses, K::GraphPass, V::Graph,
       "before matching: patterns see one spelling of each computation"},
      {"cse", P::GraphPasses, K::GraphPass, V::Graph,
       "a shared x is one value, not two, for the patterns below"},
      // Detect semantic operators.
      {"detect-layer-norm", P::GraphPasses, K::GraphPass, V::Graph,
       "norms first: activation patterns must not see their divides and muls half-consumed"},
      {"detect-rms-norm", P::GraphPasses, K::GraphPass, V::Graph, "the other norm, likewise"},
      {"detect-softmax", P::GraphPasses, K::GraphPass, V::Graph,
       "before attention, which matches softmax nodes"},
      {"detect-gelu", P::GraphPasses, K::GraphPass, V::Graph, "activations after the norms"},
      {"detect-silu", P::GraphPasses, K::GraphPass, V::Graph, "activations after the norms"},
      {"detect-hard-swish", P::GraphPasses, K::GraphPass, V::Graph, "activations after the norms"},
      {"detect-attention", P::GraphPasses, K::GraphPass, V::Graph,
       "last: its scale/mask peeling relies on the constants folded above"},
      {"simplify", P::GraphPasses, K::GraphPass, V::Graph,
       "attention's k = transpose(k^T) composes with the exporter's transpose"},
      // Fuse into contractions.
      {"fold-pad", P::GraphPasses, K::GraphPass, V::Graph,
       "an exporter's explicit pad is the window's own padding: before prune-padding-taps, "
       "which sees the whole padding"},
      {"prune-padding-taps", P::GraphPasses, K::GraphPass, V::Graph,
       "before the folds and fusions: they and the planner see only the taps that read the "
       "input (ASPP's dilated convs on a small map: 1x1 convs)"},
      {"fold-batch-norm", P::GraphPasses, K::GraphPass, V::Graph,
       "batch norm into conv weights first, so the conv's epilogue can take the activation"},
      {"conv-transpose-as-conv", P::GraphPasses, K::GraphPass, V::Graph,
       "after fold-batch-norm (the norm folds into the conv_transpose's weights first), before "
       "fuse-epilogue: the phase convs are contractions like any other"},
      {"batch-norm-as-affine", P::GraphPasses, K::GraphPass, V::Graph,
       "after the folds into convs: what is left is an elementwise chain that fuses and keeps "
       "its input's layout"},
      {"fuse-epilogue", P::GraphPasses, K::GraphPass, V::Graph,
       "after fold-batch-norm: the conv's epilogue takes the activation"},
      {"simplify", P::GraphPasses, K::GraphPass, V::Graph,
       "the epilogues' views leave reshape pairs to compose"},
      {"dce", P::GraphPasses, K::GraphPass, V::Graph,
       "rewrites leave dead nodes and weights: out of the kernels, memory plan and weights.bin"},
      {"annotate-properties", P::GraphPasses, K::GraphPass, V::Graph,
       "last, on the final graph: the certificates the lowering reads and --explain prints"},

      // ---- Target passes: on a copy of the graph, for the target planned for -------------------
      {"legalize-f64", P::TargetPasses, K::GraphPass, V::Graph,
       "every target, first: later stages see only f32 in the f32-accumulating ops",
       stages::legalizeF64},
      {"io-precision", P::TargetPasses, K::GraphPass, V::Graph,
       "--io-precision: after legalize-f64, so an f64 model's interface can be f32 too",
       stages::ioPrecision},
      {"block-channels", P::TargetPasses, K::GraphPass, V::Graph,
       "host plans: conv chains channel-blocked before pack-weights packs their weights",
       stages::blockChannels},
      {"fold-channel-scale", P::TargetPasses, K::GraphPass, V::Graph,
       "host plans: on the blocked convs block-channels made, before pack-weights",
       stages::foldChannelScale},
      {"separable-resize", P::TargetPasses, K::GraphPass, V::Graph,
       "host plans: after block-channels, on the resizes it left on the plain layout",
       stages::separableResize},
      {"merge-siblings", P::TargetPasses, K::GraphPass, V::Graph,
       "priced: first, the merged contraction is what split-chains and the partition see",
       stages::mergeSiblings},
      {"split-chains", P::TargetPasses, K::GraphPass, V::Graph,
       "priced, host plans: before pack-weights, the sliced weights are read in place",
       stages::splitChains},
      {"assign-precision", P::TargetPasses, K::GraphPass, V::Graph,
       "--precision (GPU plans; bf16 on the host): after the rewrites that build "
       "contractions and weights, before pack-weights packs them",
       stages::assignPrecision},
      {"pack-weights", P::TargetPasses, K::GraphPass, V::Graph,
       "host plans, last: the panel views fold into the contractions like any layout op",
       stages::packWeights},

      // ---- Kernel groups, and the rewrites priced on them ---------------------------------------
      {"partition", P::KernelGroups, K::Stage, V::Groups,
       "which nodes become one kernel (lower/fusion.h), store-or-recompute by the cost model",
       stages::partition},
      {"choose-attention", P::KernelGroups, K::GraphPass, V::Graph,
       "priced on the partition: streaming or materialised attention, partitioned again",
       stages::chooseAttention},
      {"split-k", P::KernelGroups, K::GraphPass, V::Graph,
       "GPU plans, priced: after choose-attention, so materialised attention's matmuls count",
       stages::splitK},

      // ---- Kernel IR ----------------------------------------------------------------------------
      {"describe-plan", P::KernelIr, K::Stage, V::Plan,
       "plan.yaml's header: what the plan is for, the partition's decisions", stages::describePlan},
      {"value-buffers", P::KernelIr, K::Stage, V::Plan,
       "the values' buffers in a fixed order: deterministic buffer ids and weight offsets",
       stages::valueBuffers},
      {"plan", P::KernelIr, K::Stage, V::KernelIr,
       "each group's schedule: every candidate lowered to Kernel IR and priced, the cheapest kept",
       stages::plan},
      {"verify-kernel-ir", P::KernelIr, K::Stage, V::KernelIr,
       "before any pass or printer: an invalid kernel is blamed on its recipe",
       stages::verifyKernelIr},
      {"fuse-reduction-epilogue", P::KernelIr, K::KernelPass, V::KernelIr,
       "recipes leave bias / residual as a self-update after the reduction: one pass less",
       kernelPass<kir::KernelPassId::FuseReductionEpilogue>},
      {"fuse-mma-tile-epilogue", P::KernelIr, K::KernelPass, V::KernelIr,
       "after fuse-reduction-epilogue, whose init (the bias) it takes into the mma_tile",
       kernelPass<kir::KernelPassId::FuseMmaTileEpilogue>},
      {"unswitch-invariant-selects", P::KernelIr, K::KernelPass, V::KernelIr,
       "after the fusions (their copies keep them), before the versioning passes version each "
       "copy",
       kernelPass<kir::KernelPassId::UnswitchInvariantSelects>},
      {"version-full-tiles", P::KernelIr, K::KernelPass, V::KernelIr,
       "after the fusions, so both versions keep what the passes above did",
       kernelPass<kir::KernelPassId::VersionFullTiles>},
      {"version-lane-guards", P::KernelIr, K::KernelPass, V::KernelIr,
       "after version-full-tiles, whose full tiles may leave a vector loop's guard provable",
       kernelPass<kir::KernelPassId::VersionLaneGuards>},
      {"split-guarded-loops", P::KernelIr, K::KernelPass, V::KernelIr,
       "after the versioning passes, which keep fixed trip counts where a guard holds throughout",
       kernelPass<kir::KernelPassId::SplitGuardedLoops>},
      {"name-shared-exprs", P::KernelIr, K::KernelPass, V::KernelIr,
       "last: names what the final expressions share (a QDQ chain printed as a tree explodes)",
       kernelPass<kir::KernelPassId::NameSharedExprs>},
      {"shape-generic", P::KernelIr, K::Stage, V::KernelIr,
       "symbolic dims: each kernel lowered again at the ranges' ends must print the same",
       stages::certifyShapeGeneric},

      // ---- Planning -----------------------------------------------------------------------------
      {"plan-steps", P::Planning, K::Stage, V::Plan,
       "one step per group in partition order; identical kernels emitted once", stages::planSteps},
      {"check-candidate-rank", P::Planning, K::Stage, V::Plan,
       "--candidate-rank past every kernel's schedules would silently plan a smaller rank",
       stages::checkCandidateRank},
      {"branch-guards", P::Planning, K::Stage, V::Plan,
       "host plans: a branch's steps run only when taken; before the memory plan's copies",
       stages::branchGuards},
      {"memory-plan", P::Planning, K::Stage, V::Plan,
       "output copies, liveness, in-place reuse and the arena, on the steps", stages::memoryPlan},
      {"dispatch-groups", P::Planning, K::Stage, V::Plan,
       "host plans: independent steps as one dispatch, decided on the arena",
       stages::dispatchGroups},
      {"loop-bodies", P::Planning, K::Stage, V::Plan,
       "each body compiled through every stage, spliced after its loop step, the plan complete",
       stages::loopBodies},

      // ---- Backend ------------------------------------------------------------------------------
      {"print", P::Backend, K::Stage, V::Source,
       "the kernels through the target's printer, then the runtime ABI's entry points",
       stages::printSource},

      // ---- Artifacts (writeArtifacts, with -o) --------------------------------------------------
      {"build", P::Artifacts, K::Stage, V::Artifacts,
       "libmodel.so by the host compiler or nvcc (ptxas' figures recorded in the plan)"},
      {"write", P::Artifacts, K::Stage, V::Artifacts,
       "weights.bin, plan.yaml and the reports, the folder renamed into place when complete"},
  };
  return entries;
}

const char *phaseName(Phase p) {
  switch (p) {
  case Phase::Import: return "import";
  case Phase::GraphPasses: return "graph passes";
  case Phase::TargetPasses: return "target passes";
  case Phase::KernelGroups: return "kernel groups";
  case Phase::KernelIr: return "Kernel IR";
  case Phase::Planning: return "planning";
  case Phase::Backend: return "backend";
  case Phase::Artifacts: return "artifacts";
  }
  return "?";
}

std::string entrySummary(const PipelineEntry &e) {
  if (e.kind == EntryKind::GraphPass)
    if (std::unique_ptr<Pass> p = createPass(e.name))
      return p->summary();
  if (e.kind == EntryKind::KernelPass)
    if (std::unique_ptr<kir::KernelPass> p = kir::createKernelPass(e.name))
      return p->summary();
  return e.reason;
}

std::vector<std::string> pipelineNames() {
  std::vector<std::string> names;
  for (const PipelineEntry &e : pipeline())
    if (std::find(names.begin(), names.end(), e.name) == names.end())
      names.emplace_back(e.name);
  return names;
}

void printPipeline(std::ostream &os) {
  os << "The aicfc pipeline, in order (--print-ir-before/after NAME; graph passes print only when "
        "they change the graph):\n";
  const PipelineEntry *prev = nullptr;
  for (const PipelineEntry &e : pipeline()) {
    if (!prev || prev->phase != e.phase)
      os << (prev ? "\n" : "") << phaseName(e.phase) << ":\n";
    prev = &e;
    std::string name = e.name;
    os << "  " << name << std::string(name.size() < 24 ? 24 - name.size() : 1, ' ')
       << entrySummary(e) << "\n";
    // Passes: why here as well (stages' summary is their reason).
    if (e.kind != EntryKind::Stage)
      os << std::string(26, ' ') << "(" << e.reason << ")\n";
  }
}

void checkPipelineNames(const std::vector<std::string> &names, const char *flag) {
  std::vector<std::string> passes = allPassNames(), all = pipelineNames();
  for (const std::string &n : names) {
    if (n == "all" || std::find(all.begin(), all.end(), n) != all.end() ||
        std::find(passes.begin(), passes.end(), n) != passes.end())
      continue;
    std::string passList, stageList;
    for (const std::string &k : passes)
      passList += (passList.empty() ? "" : ", ") + k;
    for (const std::string &k : all)
      if (std::find(passes.begin(), passes.end(), k) == passes.end())
        stageList += (stageList.empty() ? "" : ", ") + k;
    throw UserError(cat("unknown pass '", n, "' in ", flag, " (known: ", passList,
                        ", or all) or stage (", stageList, "; aicfc --list-passes)"),
                    1);
  }
}

void buildDefaultPipeline(PassManager &pm) {
  for (const PipelineEntry &e : pipeline())
    if (e.phase == Phase::GraphPasses) {
      std::unique_ptr<Pass> p = createPass(e.name);
      AICF_CHECK(p != nullptr, "the pipeline names unknown pass '", e.name, "'");
      pm.add(std::move(p));
    }
}

namespace kir {

void buildDefaultKernelPipeline(KernelPassManager &pm) {
  for (const PipelineEntry &e : pipeline())
    if (e.kind == EntryKind::KernelPass) {
      std::unique_ptr<KernelPass> p = createKernelPass(e.name);
      AICF_CHECK(p != nullptr, "the pipeline names unknown Kernel IR pass '", e.name, "'");
      pm.add(std::move(p));
    }
}

bool runDefaultKernelPipeline(Kernel &k, std::vector<std::string> *notes) {
  KernelPassManager pm;
  buildDefaultKernelPipeline(pm);
  return pm.run(k, notes);
}

} // namespace kir

// ---- Printing a stage's product ----------------------------------------------------------------

namespace {

std::ostream &irStream(const PassManagerOptions &o) {
  return o.irOut ? *o.irOut : stderrStream();
}

bool selected(const std::set<std::string> &names, const char *name) {
  return names.count("all") || names.count(name);
}

std::string header(bool after, const char *name) {
  return cat("// -----// IR ", after ? "after " : "before ", name, " //----- //\n");
}

void printGroups(std::ostream &os, const Partition &part) {
  for (size_t i = 0; i < part.groups.size(); ++i) {
    const KernelGroup &grp = part.groups[i];
    os << "group " << i << ": " << grp.kind << " (";
    for (size_t j = 0; j < grp.nodes.size(); ++j)
      os << (j ? ", " : "") << grp.nodes[j]->name()
         << (grp.nodes[j]->results().empty() ? "" : " %" + grp.nodes[j]->result(0)->name());
    os << ")\n  in:";
    for (const Value *v : grp.inputs)
      os << " %" << v->name();
    os << "\n  out:";
    for (const Value *v : grp.outputs)
      os << " %" << v->name();
    os << "\n";
  }
}

} // namespace

void printStageIr(const CompileState &s, const PipelineEntry &e, bool when) {
  const PassManagerOptions &o = s.opts.passes;
  if (!selected(when ? o.printIrAfter : o.printIrBefore, e.name))
    return;
  std::ostream &os = irStream(o);
  switch (e.view) {
  case IrView::Graph: // graph passes: their pass manager prints, when they changed the graph
  case IrView::Artifacts: return;
  case IrView::Groups:
    os << header(when, e.name);
    printGroups(os, s.part);
    break;
  case IrView::KernelIr:
    os << header(when, e.name);
    for (size_t i = 0; i < s.groupKernels.size(); ++i)
      if (!s.groupKernels[i].name.empty()) // a runtime step's group has no kernel
        os << kir::printKernel(s.groupKernels[i]) << "\n";
    break;
  case IrView::Plan:
    os << header(when, e.name);
    s.model.plan.writeYaml(os);
    break;
  case IrView::Source: os << header(when, e.name) << s.model.source; break;
  }
  os.flush();
}

void printFolderIr(const PassManagerOptions &o, const char *stage, bool when,
                   const std::string &dir) {
  if (!selected(when ? o.printIrAfter : o.printIrBefore, stage))
    return;
  std::ostream &os = irStream(o);
  os << header(when, stage);
  std::set<std::string> names; // sorted: the listing does not depend on the file system's order
  for (const fs::directory_entry &f : fs::directory_iterator(dir))
    names.insert(f.path().filename().string());
  for (const std::string &n : names)
    os << n << " " << fs::file_size(fs::path(dir) / n) << " bytes\n";
  os.flush();
}

ImportedModel importModel(const std::string &path, const ImportOptions &opts,
                          const PassManagerOptions &passes) {
  std::map<std::string, TensorType> constTypes;
  ImportedModel m;
  m.graph = importOnnx(path, opts, &constTypes);
  // The inputs bound at compile time, as plan.yaml records them (their values are constants).
  for (const auto &[name, f] : opts.constInputs)
    m.boundInputs.push_back({name, constTypes.at(name), f.isValue ? cat(f.value) : f.file});
  if (selected(passes.printIrAfter, "import")) {
    std::ostream &os = irStream(passes);
    os << header(true, "import") << printGraph(*m.graph);
    os.flush();
  }
  return m;
}

void runGraphPasses(Graph &g, PassContext &ctx, const PassManagerOptions &passes) {
  PassManager pm(passes);
  buildDefaultPipeline(pm);
  pm.run(g, ctx);
}

} // namespace aicf
