// aicfc: the compiler's command line. The pipeline it runs is driver/pipeline.cpp's list
// (aicfc --list-passes prints it): import -> graph passes -> (--emit graph stops here) ->
// buildModel's stages -> artifacts; this file turns flags into options and picks the outputs.
#include "aicf/build_config.h"
#include "driver/compile.h"
#include "driver/pipeline.h"
#include "frontend/onnx_importer.h"
#include "ir/printer.h"
#include "passes/explain.h"
#include "passes/pass.h"
#include "passes/verify_passes.h"
#include "plan/plan_report.h"
#include "plan/report_html.h"
#include "support/cli_parse.h"
#include "support/cli_util.h"
#include "support/diagnostics.h"
#include "support/output_folder.h"
#include "target/target.h"

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

namespace fs = std::filesystem;
using namespace aicf;

namespace {

// --emit: the one stage printed on stdout (None: none).
enum class Emit { None, Graph, Kernels, Plan, Source };
constexpr EnumNames<Emit, 4> enumNames(Emit) {
  return {{{Emit::Graph, "graph"},
           {Emit::Kernels, "kernels"},
           {Emit::Plan, "plan"},
           {Emit::Source, "source"}}};
}

// --io-precision: the type of the model's float inputs and outputs (CompileOptions::ioPrecision:
// Model is none, the model's own).
enum class IoPrecision { Model, F32, F16, BF16 };
constexpr EnumNames<IoPrecision, 4> enumNames(IoPrecision) {
  return {{{IoPrecision::Model, "model"},
           {IoPrecision::F32, "fp32"},
           {IoPrecision::F16, "fp16"},
           {IoPrecision::BF16, "bf16"}}};
}

std::optional<Precision> ioPrecisionOf(IoPrecision p) {
  switch (p) {
  case IoPrecision::Model: return std::nullopt;
  case IoPrecision::F32: return Precision::F32;
  case IoPrecision::F16: return Precision::F16;
  case IoPrecision::BF16: return Precision::BF16;
  }
  return std::nullopt;
}

struct Flags {
  std::string model;
  std::string outDir;
  std::string target = "cpu";
  std::string planFor;
  std::string cpuArch = "native";
  std::vector<std::string> shapes, dims, consts, seqs, absent, maxes;
  Emit emit = Emit::None;
  bool explain = false;
  std::vector<std::string> printIrBefore, printIrAfter;
  bool passTiming = false;
  bool verifyPasses = false;
  std::string hardware;
  Schedule schedule = Schedule::Cost;
  int candidateRank = 0;
  AttentionPolicy attention = AttentionPolicy::Cost;
  Precision precision = Precision::F32;
  IoPrecision ioPrecision = IoPrecision::Model;
  RowNormPolicy rowNorms = RowNormPolicy::Cost;
  FusePolicy chains = FusePolicy::Cost;
  FusePolicy normEpilogues = FusePolicy::Cost;
  FusePolicy convChains = FusePolicy::Cost;
  bool noPackWeights = false;
  bool noBlockChannels = false;
  bool noSplitK = false;
  bool noSplitChains = false;
  bool noMergeSiblings = false;
  int chainSlices = 0;
  bool bundle = false;
  bool verbose = false;
  bool quiet = false;
};

// -v: one line per stage on stderr, with its wall time and the time since the start.
class Progress {
public:
  explicit Progress(bool on) : on_(on), start_(std::chrono::steady_clock::now()) {}
  void operator()(const std::string &stage, double seconds, const std::string &detail = "") const {
    if (!on_)
      return;
    double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::fprintf(stderr, "aicfc: %-22s %8.3f s  (at %7.2f s)%s%s\n", stage.c_str(), seconds, total,
                 detail.empty() ? "" : "  ", detail.c_str());
  }
  // Times fn() and reports it as `stage`.
  template <typename F>
  auto time(const std::string &stage, F &&fn) const {
    auto t0 = std::chrono::steady_clock::now();
    auto result = fn();
    (*this)(stage, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return result;
  }

private:
  bool on_;
  std::chrono::steady_clock::time_point start_;
};

// Unknown targets are an error naming the known ones. A CUDA target prints its kernels
// (--emit) without nvcc; building OUT/libmodel.so without it is an error (exit 2) saying so.
// The hardware descriptions are loaded later (Target::loadHardware), after the model is read.
Target checkTarget(const std::string &spec, bool build) {
  Target target = Target::parseSpec(spec);
  if (build && target.gpu() && std::string(AICF_NVCC_PATH).empty())
    throw UserError(cat("target ", spec, ": CUDA target disabled: nvcc not found"), 2);
  return target;
}

// --emit graph -o OUT: a folder with only the graph stage's files, written and swapped in like a
// compiled folder (support/output_folder.h). An old compiled folder there is replaced whole, so
// no stale plan.yaml or libmodel.so of another model remains: aicf-run refuses the folder.
void writeGraphFolder(const std::string &outDir, const std::string &model,
                      const std::map<std::string, std::string> &files) {
  try {
    StagedOutputFolder staged(outDir, {model});
    for (const auto &[name, text] : files) {
      fs::path p = staged.dir() / name;
      std::ofstream f(p, std::ios::binary);
      if (!f || !f.write(text.data(), static_cast<std::streamsize>(text.size())) || !f.flush())
        throw UserError(cat("cannot write ", p.string()), 1);
    }
    staged.commit();
  } catch (const fs::filesystem_error &e) {
    throw UserError(
        cat("output folder ", outDir, ": ", e.path1().string(), ": ", e.code().message()), 1);
  }
}

// --explain: the rewrites and certificates (with the coverage) into the text report; returns
// explain.yaml.
std::string writeExplain(const ExplainLog &explain, const Graph &g, std::ostream &report) {
  explain.printText(report);
  printCoverage(report, computeCoverage(g));
  std::ostringstream yaml;
  explain.writeYaml(yaml, g);
  return yaml.str();
}

int compile(const Flags &flags) {
  // The target, parsed once: libmodel.so's, and the plan's (the same unless --plan-for).
  Target target = checkTarget(flags.target, !flags.outDir.empty() && flags.emit != Emit::Graph);
  Target planFor = target;
  if (!flags.planFor.empty()) {
    if (target.gpu())
      throw UserError("--plan-for needs --target cpu (it runs a GPU plan on the host)", 1);
    planFor = Target::parsePlanFor(flags.planFor);
  }

  // 1. Import.
  {
    std::ifstream probe(flags.model, std::ios::binary);
    if (!probe || fs::is_directory(flags.model))
      throw UserError(cat("cannot open ", flags.model), 1);
  }
  // An OUT that is not ours to replace is refused now, before the compile, and left untouched.
  if (!flags.outDir.empty())
    checkOutputFolder(flags.outDir, {flags.model});
  ImportOptions opts;
  opts.inputShapes = parseShapeFlags(flags.shapes);
  parseDimRangeFlags(flags.dims, opts.dimParams, opts.dimRanges);
  opts.sequenceLengths = parseDimFlags(flags.seqs, "--seq");
  opts.absentInputs.insert(flags.absent.begin(), flags.absent.end());
  opts.constInputs = parseConstFlags(flags.consts);
  opts.dataDimMax = parseDimFlags(flags.maxes, "--max");
  // The pass-manager options every graph pass of the pipeline runs under, and every stage prints
  // by (driver/pipeline.h); one --pass-timing table at the end.
  PassManagerOptions pmOpts;
  pmOpts.printIrBefore.insert(flags.printIrBefore.begin(), flags.printIrBefore.end());
  pmOpts.printIrAfter.insert(flags.printIrAfter.begin(), flags.printIrAfter.end());
  pmOpts.timing = flags.passTiming;
  std::vector<PassTime> timings;
  pmOpts.timings = &timings;
  Progress progress(flags.verbose);
  ImportedModel imported =
      progress.time("import", [&] { return importModel(flags.model, opts, pmOpts); });
  std::unique_ptr<Graph> g = std::move(imported.graph);
  // The hardware descriptions: --hardware describes the plan's target; a cpu build emulating a
  // GPU plan is itself the detected host. The graph passes' legality reads the build target's.
  planFor.loadHardware(flags.hardware);
  if (flags.planFor.empty())
    target = planFor;
  else
    target.loadHardware();

  // 2. Graph passes (driver/pipeline.cpp), under --verify-passes: the imported graph is the
  // reference every graph pass, the target passes' included, is checked against.
  std::shared_ptr<PassVerifier> verifier;
  if (flags.verifyPasses)
    verifier = installPassVerifier(*g, pmOpts);
  PassContext ctx;
  ctx.target = target;
  ExplainLog explain;
  ctx.explain = &explain;
  progress.time("graph passes", [&] {
    runGraphPasses(*g, ctx, pmOpts);
    return 0;
  });
  auto printTiming = [&] {
    if (flags.passTiming)
      printPassTiming(nullptr, timings);
  };

  // 3. The graph stage's outputs: the IR and the explain report (after the target passes, whose
  // records it holds too, unless only the graph is asked for).
  std::string graphText = printGraph(*g);
  std::ostringstream report;
  std::map<std::string, std::string> extra = {{"graph.mcir", graphText}};
  auto explainReport = [&] {
    if (flags.explain)
      extra["explain.yaml"] = writeExplain(explain, *g, report);
  };
  if (flags.emit == Emit::Graph) {
    explainReport();
    printTiming();
    std::cout << report.str() << graphText;
    if (!flags.outDir.empty()) {
      if (flags.explain)
        extra["report.txt"] = report.str();
      writeGraphFolder(flags.outDir, flags.model, extra);
    }
    return 0;
  }
  // 4. Target passes, kernel groups, Kernel IR, planning and the source (buildModel's stages,
  // driver/pipeline.cpp); a CUDA target's kernels follow its own plan.
  CompileOptions copts;
  copts.target = target;
  copts.planFor = planFor;
  copts.cpuArch = flags.cpuArch;
  copts.boundInputs = imported.boundInputs;
  copts.schedule = flags.schedule;
  copts.rank = flags.candidateRank;
  copts.attention = flags.attention;
  copts.precision = flags.precision;
  copts.ioPrecision = ioPrecisionOf(flags.ioPrecision);
  copts.rowNorms = flags.rowNorms;
  copts.chains = flags.chains;
  copts.normEpilogues = flags.normEpilogues;
  copts.convChains = flags.convChains;
  copts.packWeights = !flags.noPackWeights;
  copts.blockChannels = !flags.noBlockChannels;
  copts.splitK = !flags.noSplitK;
  copts.splitChains = !flags.noSplitChains;
  copts.mergeSiblings = !flags.noMergeSiblings;
  copts.chainSlices = flags.chainSlices;
  copts.bundle = flags.bundle;
  copts.onStage = [&](const char *stage, double seconds) { progress(stage, seconds); };
  copts.passes = pmOpts;
  copts.explain = flags.explain ? &explain : nullptr;
  CompiledModel cm = buildModel(*g, copts);
  explainReport();
  printTiming();
  // With an output folder the plan report waits for the final plan (CUDA: ptxas' registers
  // beside the estimates).
  bool reportLater = flags.explain && !flags.outDir.empty();
  if (flags.explain && !reportLater)
    printPlanReport(report, cm.plan);
  if (!reportLater)
    std::cout << report.str();
  if (flags.emit == Emit::Kernels)
    for (const kir::Kernel &k : cm.kernels)
      std::cout << kir::printKernel(k) << "\n";
  else if (flags.emit == Emit::Source)
    std::cout << cm.source;
  else if (flags.emit == Emit::Plan)
    cm.plan.writeYaml(std::cout);
  else if (flags.outDir.empty() && !flags.explain)
    throw UserError("nothing to do: give -o OUT (compile) or --emit graph|kernels|plan|source", 1);

  // 5. The output folder, written atomically.
  if (!flags.outDir.empty()) {
    writeArtifacts(*g, cm, copts, flags.outDir, extra,
                   [&](const Plan &final, std::map<std::string, std::string> &files) {
                     if (!flags.explain)
                       return;
                     printPlanReport(report, final);
                     files["report.txt"] = report.str();
                     std::ostringstream planYaml;
                     final.writeYaml(planYaml);
                     files["report.html"] = renderReportHtml(
                         {planYaml.str(), files["explain.yaml"], files["graph.mcir"],
                          fs::path(flags.model).filename().string()},
                         {});
                   });
    if (reportLater)
      std::cout << report.str();
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"aicfc: memory-centric ahead-of-time AI compiler (ONNX -> kernels + plan)"};
  app.set_version_flag("--version", std::string("aicfc ") + AICF_VERSION);
  Flags flags;
  app.add_option("model", flags.model, "ONNX model to compile")->required();
  app.add_option("-o,--output", flags.outDir, "output folder (kernels, libmodel.so, plan.yaml...)");
  std::string targets;
  for (const std::string &name : Target::knownNames())
    targets += (targets.empty() ? "" : " | ") + name;
  app.add_option("--target", flags.target, targets)->capture_default_str();
  app.add_option("--plan-for", flags.planFor,
                 "with --target cpu: build the plan chosen for this GPU target (cuda:sm_XX)");
  app.add_option("--cpu-arch", flags.cpuArch, "-march for the host target")->capture_default_str();
  app.add_option("--hardware", flags.hardware,
                 "hardware description to plan for: a100 | h100 | h200 | rtx3090 | rtx4090 | "
                 "FILE.yaml (default: the target arch's; the detected host CPU for cpu)");
  addEnumOption(app, "--schedule", flags.schedule,
                "cost: knobs chosen by the cost model; default: the recipes' defaults");
  app.add_flag(
      "--no-pack-weights", flags.noPackWeights,
      "host plans: keep constant GEMM weights as they are instead of packing them into the "
      "micro-kernel's column panels (for comparisons)");
  app.add_flag("--no-block-channels", flags.noBlockChannels,
               "host plans: keep conv chains in NCHW instead of the channel-blocked layout "
               "[N, C/16, H, W, 16] (for comparisons)");
  app.add_flag("--no-split-k", flags.noSplitK,
               "GPU plans: never compute a contraction as partial contractions over K slices "
               "(for comparisons)");
  app.add_flag("--no-split-chains", flags.noSplitChains,
               "never compute an MLP's two projections in slices of the hidden dimension "
               "(for comparisons)");
  app.add_flag("--no-merge-siblings", flags.noMergeSiblings,
               "never compute sibling contractions of one input (q, k and v projections) as one "
               "contraction over their concatenated weights (for comparisons)");
  app.add_option("--chain-slices", flags.chainSlices,
                 "split every chain (an MLP's two projections) this many ways along its hidden "
                 "dimension where legal (2, 4, 8, 16, 32; 0: the cost model decides)")
      ->check(CLI::IsMember({0, 2, 4, 8, 16, 32}))
      ->capture_default_str();
  addEnumOption(app, "--precision", flags.precision,
                "the arithmetic of products: fp32; GPU plans: tf32, fp16 or bf16 on tensor "
                "cores (matmul, gemm, conv, attention); host plans: bf16 on AVX512-BF16 "
                "(matmul, gemm, dense convs with packed weights); operands rounded, f32 "
                "accumulation, weights stored in fp16 / bf16; norms, softmax and reductions "
                "stay fp32");
  addEnumOption(app, "--io-precision", flags.ioPrecision,
                "the type of the model's float inputs and outputs: model (as the model has "
                "them), fp32, fp16 or bf16 (casts fused into the first and last kernels)");
  addEnumOption(app, "--attention", flags.attention,
                "cost: streaming or materialised attention by the cost model; streaming; "
                "materialized (where exact)");
  addEnumOption(app, "--row-norms", flags.rowNorms,
                "a layer_norm / rms_norm read only as GEMMs' left operand: cost: recomputed "
                "in their A reads when the cost model prices that lower; fold; store");
  addEnumOption(app, "--chain-contractions", flags.chains,
                "a matmul / gemm read only as another's left operand (an MLP's two "
                "projections): cost: one chained kernel, the intermediate never stored, when "
                "the cost model prices it lower; fuse; store");
  addEnumOption(app, "--norm-epilogues", flags.normEpilogues,
                "a layer_norm / rms_norm of a matmul / gemm's output rows (a post-norm): cost: "
                "applied in the contraction's tiles (whole rows, host plans) when the cost "
                "model prices it lower; fuse; store");
  addEnumOption(app, "--conv-chains", flags.convChains,
                "an inverted residual (1x1 expand -> depthwise -> 1x1 project on the "
                "channel-blocked layout, host plans): cost: one kernel, the expanded rows never "
                "stored, when the cost model prices it lower; fuse; store");
  app.add_option("--candidate-rank", flags.candidateRank,
                 "take each kernel's N-th cheapest feasible schedule (cost-model benchmarks)")
      ->check(intInRange(0, 1 << 20));
  app.add_option("--shape", flags.shapes, "bind an input's shape: NAME=2x64x256 (repeatable)");
  app.add_option(
      "--dim", flags.dims,
      "bind a named dynamic dim: PARAM=VALUE, or compile it for a range: PARAM=MIN..MAX[@OPT] "
      "(the folder then runs any value in the range, planned for OPT, default MAX) "
      "(repeatable)");
  app.add_option(
      "--max", flags.maxes,
      "the most a length known only at run time may be (NonZero, Compress, "
      "NonMaxSuppression, Unique, TopK with a run-time k): NAME=N, NAME the dim aicfc "
      "names (plan.yaml dims with set_by; --explain) or the ONNX output it sizes; below the "
      "model's own bound it shrinks the memory reserved, and a run above it fails "
      "(repeatable)");
  app.add_option("--absent", flags.absent,
                 "an optional input compiled as holding no element: NAME (repeatable)");
  app.add_option("--seq", flags.seqs,
                 "a sequence input of COUNT tensors, given as inputs NAME.0 ... NAME.<COUNT-1>: "
                 "NAME=COUNT (repeatable)");
  app.add_option("--const", flags.consts,
                 "bind an input to a value at compile time: NAME=FILE.npy, or NAME=VALUE for an "
                 "input of one element; it is folded like a weight and is no longer an input "
                 "(repeatable)");
  addEnumOption(app, "--emit", flags.emit, "print one stage: graph | kernels | plan | source");
  app.add_flag("--explain", flags.explain, "report rewrites, certificates and plan choices");
  app.add_option("--print-ir-before", flags.printIrBefore,
                 "print IR before PASS or stage (or all; see --list-passes)")
      ->delimiter(',');
  app.add_option("--print-ir-after", flags.printIrAfter,
                 "print IR after PASS or stage (or all; see --list-passes)")
      ->delimiter(',');
  app.add_flag_callback(
      "--list-passes",
      [] {
        printPipeline(std::cout);
        throw CLI::Success();
      },
      "print the pipeline in order: every pass and stage, with its summary");
  app.add_flag("--pass-timing", flags.passTiming, "print time spent in each pass");
  app.add_flag("--verify-passes", flags.verifyPasses,
               "interpret the graph before/after each changed pass and compare");
  app.add_flag("--bundle", flags.bundle,
               "with -o: write only what a deployment loads (plan.yaml, weights.bin, "
               "libmodel.so); no kernel source, no reports");
  auto *verbose =
      app.add_flag("-v,--verbose", flags.verbose, "print each stage with its wall time on stderr");
  app.add_flag("-q,--quiet", flags.quiet, "print no warnings (errors only)")->excludes(verbose);
  if (std::optional<int> rc = parseCommandLine(app, argc, argv))
    return *rc;
  setWarningsSilenced(flags.quiet);
  return runTool([&] {
    checkPipelineNames(flags.printIrBefore, "--print-ir-before");
    checkPipelineNames(flags.printIrAfter, "--print-ir-after");
    return compile(flags);
  });
}
