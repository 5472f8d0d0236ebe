// aicf-opt: the IR driver for tests and debugging (like mlir-opt). Parses a .mcir file, runs
// the named passes (none by default) and prints the resulting IR; or parses a .kir file (Kernel
// IR, kir/kir_parser.h), runs the named Kernel IR passes and prints the resulting kernels.
//
//   aicf-opt FILE.mcir [--passes=a,b] [--pipeline] [--print-ir-before=P|all]
//            [--print-ir-after=P|all] [--pass-timing] [--split-input-file]
//            [--verify-diagnostics] [-o OUT]
//            [--target cpu|cuda:sm_XX] [--hardware NAME|FILE.yaml]
//            [--lower [--schedule cost|default]]
//   aicf-opt FILE.kir [--kir-passes=a,b] [--split-input-file] [--verify-diagnostics] [-o OUT]
//
// --lower prints, instead of the graph, the Kernel IR of its kernels as `aicfc --emit kernels`
// does (driver/compile.h buildModel: partition, lower each group by its recipe with the planned
// knobs, or the recipes' defaults with --schedule default), one kernel per group kind.
// Kernel IR input: a file ending in .kir, or --kir (for stdin); it may hold several kernels.
// A file may hold several graphs (or groups of kernels) separated by lines "// -----"; each is
// processed and the results are printed separated the same way. With --split-input-file an
// error in one part is reported and the next part still runs (the worst part's exit code at the
// end). --verify-diagnostics checks the errors against `// expected-error@+N {{text}}` comments
// instead of failing on them (exit 2 when they disagree).
// Errors: "error: ..." on stderr; exit codes as for every tool (docs/safety.md, "Exit codes"): 1
// for the command line (unknown flag or pass, unreadable input, unwritable -o), 2 for bad IR, 3
// only for internal errors.
#include "driver/compile.h"
#include "driver/pipeline.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "kir/kir_parser.h"
#include "kir/kir_pass.h"
#include "passes/explain.h"
#include "passes/pass.h"
#include "passes/verify_passes.h"
#include "support/cli_parse.h"
#include "support/cli_util.h"
#include "support/diagnostics.h"
#include "target/target.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

using namespace aicf;

namespace {

struct Flags {
  std::string input;
  std::string output;
  std::vector<std::string> passes, printIrBefore, printIrAfter;
  bool passTiming = false;
  bool split = false;
  bool verifyDiagnostics = false;
  bool defaultPipeline = false;
  bool explain = false;
  bool verifyPasses = false;
  std::string target = "cpu";
  bool kir = false; // Kernel IR input (also: a file ending in .kir)
  std::vector<std::string> kirPasses;
  bool lower = false;
  Schedule schedule = Schedule::Cost;
  std::string hardware;
};

std::string readInput(const std::string &path) {
  std::ostringstream ss;
  if (path == "-") {
    ss << std::cin.rdbuf();
    return ss.str();
  }
  std::ifstream f(path, std::ios::binary);
  if (!f || std::filesystem::is_directory(path))
    throw UserError(
        cat("cannot open ", path, std::filesystem::is_directory(path) ? ": is a directory" : ""),
        1);
  ss << f.rdbuf();
  return ss.str();
}

// ---- --verify-diagnostics -------------------------------------------------------------------

struct ExpectedError {
  int line;      // the line the error is expected on
  int directive; // the line of the comment
  std::string text;
  bool matched = false;
};

struct ProducedError {
  int line; // 0: no position
  std::string message;
};

// `// expected-error {{text}}` (same line), `// expected-error@+N {{text}}`, `@-N`.
std::vector<ExpectedError> readExpectations(const std::string &text, const std::string &file) {
  std::vector<ExpectedError> out;
  std::istringstream in(text);
  std::string line;
  for (int lineNo = 1; std::getline(in, line); ++lineNo) {
    size_t at = line.find("expected-error");
    if (at == std::string::npos)
      continue;
    size_t i = at + std::string("expected-error").size();
    int target = lineNo;
    if (i < line.size() && line[i] == '@') {
      size_t j = i + 1;
      int sign = j < line.size() && line[j] == '-' ? -1 : 1;
      if (j < line.size() && (line[j] == '+' || line[j] == '-'))
        ++j;
      size_t digits = j;
      int n = 0;
      while (j < line.size() && std::isdigit(static_cast<unsigned char>(line[j])) && n < 100000)
        n = n * 10 + (line[j++] - '0');
      if (j == digits)
        throw UserError(cat(file, ":", lineNo, ": bad expected-error offset (use @+N or @-N)"));
      target = lineNo + sign * n;
      i = j;
    }
    size_t open = line.find("{{", i), close = line.rfind("}}");
    if (open == std::string::npos || close == std::string::npos || close < open + 2)
      throw UserError(cat(file, ":", lineNo, ": expected-error needs {{text}}"));
    out.push_back({target, lineNo, line.substr(open + 2, close - open - 2)});
  }
  return out;
}

// Returns whether produced and expected errors agree, reporting every mismatch on stderr.
bool matchDiagnostics(const std::string &file, std::vector<ExpectedError> &expected,
                      const std::vector<ProducedError> &produced) {
  bool ok = true;
  for (const ProducedError &p : produced) {
    bool found = false;
    for (ExpectedError &e : expected)
      if (!e.matched && e.line == p.line && p.message.find(e.text) != std::string::npos) {
        e.matched = found = true;
        break;
      }
    if (!found) {
      ok = false;
      std::cerr << file << (p.line ? cat(":", p.line) : "") << ": unexpected error: " << p.message
                << "\n";
    }
  }
  for (const ExpectedError &e : expected)
    if (!e.matched) {
      ok = false;
      std::cerr << file << ":" << e.directive << ": expected error on line " << e.line
                << " was not produced: " << e.text << "\n";
      for (const ProducedError &p : produced)
        if (p.line == e.line)
          std::cerr << "  (line " << e.line << " produced: " << p.message << ")\n";
    }
  return ok;
}

// ---- driver ---------------------------------------------------------------------------------

class Driver {
public:
  explicit Driver(const Flags &flags) : flags_(flags) {}

  int run() {
    checkPassNames(flags_.passes, "--passes", false);
    checkPipelineNames(flags_.printIrBefore, "--print-ir-before");
    checkPipelineNames(flags_.printIrAfter, "--print-ir-after");
    // The target, parsed once; its description is loaded now when --hardware names one, else by
    // the first pass that reads a limit (the arch's default, or the detected host).
    target_ = Target::parseSpec(flags_.target);
    if (!flags_.hardware.empty())
      target_.loadHardware(flags_.hardware);
    checkKernelIrFlags();
    std::string text = readInput(flags_.input);
    std::vector<SourceChunk> chunks = splitInputChunks(text);
    if (chunks.empty())
      chunks.push_back({text, 1}); // no graph at all: let the parser say so
    std::vector<ExpectedError> expected;
    if (flags_.verifyDiagnostics)
      expected = readExpectations(text, flags_.input);

    int failed = 0; // the worst exit code of the parts (--split-input-file)
    std::vector<ProducedError> produced;
    for (const SourceChunk &chunk : chunks) {
      // The separator goes first, so IR printed by passes stays with its part.
      if (emitted_)
        write("// -----\n");
      if (flags_.verifyDiagnostics) {
        processChunkCollecting(chunk, produced);
      } else if (flags_.split) {
        try {
          processChunk(chunk);
        } catch (const UserError &e) {
          std::cerr << "error: " << e.what() << "\n";
          failed = std::max(failed, e.exitCode());
        }
      } else {
        processChunk(chunk);
      }
    }
    if (flags_.verifyDiagnostics && !matchDiagnostics(flags_.input, expected, produced))
      failed = 2;
    writeOutput();
    return failed;
  }

private:
  bool kirInput() const {
    const std::string &in = flags_.input;
    return flags_.kir || (in.size() > 4 && in.compare(in.size() - 4, 4, ".kir") == 0);
  }

  // Graph flags with Kernel IR input (and the reverse) are command-line errors, as are unknown
  // Kernel IR passes.
  void checkKernelIrFlags() const {
    if (kirInput()) {
      const char *graphOnly = !flags_.passes.empty()   ? "--passes"
                              : flags_.defaultPipeline ? "--pipeline"
                              : flags_.lower           ? "--lower"
                              : flags_.explain         ? "--explain"
                              : flags_.verifyPasses    ? "--verify-passes"
                                                       : nullptr;
      if (graphOnly)
        throw UserError(cat(graphOnly, " takes Graph IR input (.mcir); ", flags_.input,
                            " is Kernel IR (run Kernel IR passes with --kir-passes)"),
                        1);
    } else if (!flags_.kirPasses.empty()) {
      throw UserError("--kir-passes takes Kernel IR input (a .kir file, or --kir for stdin)", 1);
    }
    std::vector<std::string> known = kir::allKernelPassNames();
    for (const std::string &n : flags_.kirPasses)
      if (std::find(known.begin(), known.end(), n) == known.end()) {
        std::string list;
        for (const std::string &k : known)
          list += (list.empty() ? "" : ", ") + k;
        throw UserError(cat("unknown Kernel IR pass '", n, "' in --kir-passes (known: ", list, ")"),
                        1);
      }
  }

  void processChunk(const SourceChunk &chunk) {
    if (kirInput()) {
      emitKernels(runKernelPasses(kir::parseKernels(chunk.text, flags_.input, chunk.firstLine)));
      return;
    }
    std::unique_ptr<Graph> g = parseGraphChunk(chunk, flags_.input);
    runPasses(*g);
    emit(*g);
  }

  // --verify-diagnostics: parse and verification errors are collected with their lines.
  void processChunkCollecting(const SourceChunk &chunk, std::vector<ProducedError> &produced) {
    if (kirInput()) {
      try {
        emitKernels(runKernelPasses(kir::parseKernels(chunk.text, flags_.input, chunk.firstLine)));
      } catch (const ParseError &e) {
        produced.push_back({e.pos().line, e.what()});
      } catch (const UserError &e) {
        produced.push_back({0, e.what()});
      }
      return;
    }
    std::unique_ptr<Graph> g;
    try {
      g = parseGraphChunk(chunk, flags_.input, /*verify=*/false);
    } catch (const ParseError &e) {
      produced.push_back({e.pos().line, e.what()});
      return;
    } catch (const UserError &e) {
      produced.push_back({0, e.what()});
      return;
    }
    std::vector<VerifierDiagnostic> diags = verifyGraphDetailed(*g);
    for (const VerifierDiagnostic &d : diags)
      produced.push_back({d.pos.line, d.str()});
    if (!diags.empty())
      return;
    try {
      runPasses(*g);
    } catch (const UserError &e) {
      produced.push_back({0, e.what()});
      return;
    }
    emit(*g);
  }

  void runPasses(Graph &g) {
    if (flags_.passes.empty() && !flags_.passTiming && !flags_.defaultPipeline)
      return;
    PassManagerOptions opts = passOptions();
    std::shared_ptr<PassVerifier> verifier;
    if (flags_.verifyPasses)
      verifier = installPassVerifier(g, opts);
    PassManager pm(opts);
    if (flags_.defaultPipeline)
      buildDefaultPipeline(pm);
    for (const std::string &name : flags_.passes)
      pm.add(createPass(name));
    PassContext ctx;
    ctx.target = target_;
    ExplainLog log;
    ctx.explain = &log;
    std::cout.flush(); // keep stdout and the IR printed on stderr in order
    pm.run(g, ctx);
    if (flags_.explain) {
      std::ostringstream os;
      log.printText(os);
      printCoverage(os, computeCoverage(g));
      write(os.str());
    }
  }

  // The user's --print-ir-before/after and --pass-timing, for the passes and for --lower's stages.
  PassManagerOptions passOptions() const {
    PassManagerOptions opts;
    opts.printIrBefore.insert(flags_.printIrBefore.begin(), flags_.printIrBefore.end());
    opts.printIrAfter.insert(flags_.printIrAfter.begin(), flags_.printIrAfter.end());
    opts.timing = flags_.passTiming;
    return opts;
  }

  // Each kernel goes through the --kir-passes in order, verified after each pass that changed
  // it (kir::KernelPassManager); the passes' own notes are in the kernels as comments.
  std::vector<kir::Kernel> runKernelPasses(std::vector<kir::Kernel> ks) const {
    kir::KernelPassManager pm;
    for (const std::string &name : flags_.kirPasses)
      pm.add(kir::createKernelPass(name));
    for (kir::Kernel &k : ks)
      pm.run(k);
    return ks;
  }

  void emitKernels(const std::vector<kir::Kernel> &ks) {
    ++emitted_;
    std::string text;
    for (size_t i = 0; i < ks.size(); ++i)
      text += (i ? "\n" : "") + kir::printKernel(ks[i]);
    write(text);
  }

  void emit(const Graph &g) {
    if (flags_.lower) {
      // The pipeline's stages after the graph passes (driver/pipeline.cpp), under the user's
      // print and timing options: --print-ir-after=pack-weights prints here too.
      CompileOptions opts;
      opts.target = opts.planFor = target_;
      opts.schedule = flags_.schedule;
      opts.passes = passOptions();
      std::vector<PassTime> timings;
      opts.passes.timings = &timings;
      std::cout.flush(); // keep stdout and the IR printed on stderr in order
      std::vector<kir::Kernel> kernels = buildModel(g, opts).kernels;
      if (flags_.passTiming)
        printPassTiming(nullptr, timings);
      emitKernels(kernels);
      return;
    }
    ++emitted_;
    write(printGraph(g));
  }

  void write(const std::string &text) {
    if (!flags_.output.empty()) {
      out_ << text;
      return;
    }
    std::cout << text;
    std::cout.flush();
  }

  void writeOutput() {
    if (flags_.output.empty())
      return;
    std::ofstream f(flags_.output, std::ios::binary);
    if (!f || !(f << out_.str()) || !f.flush())
      throw UserError(cat("cannot write ", flags_.output), 1);
  }

  const Flags &flags_;
  Target target_;
  std::ostringstream out_;
  int emitted_ = 0;
};

} // namespace

int main(int argc, char **argv) {
  CLI::App app{
      "aicf-opt: parse Graph IR text, run passes, print the result (Kernel IR: a .kir file "
      "and --kir-passes)"};
  Flags flags;
  std::string passList;
  for (const std::string &n : allPassNames())
    passList += (passList.empty() ? "" : ", ") + n;
  app.add_option("input", flags.input, "input .mcir or .kir file ('-' for stdin)")->required();
  app.add_option("-o,--output", flags.output, "write the IR here instead of stdout");
  app.add_option("--passes", flags.passes, "passes to run, in order (known: " + passList + ")")
      ->delimiter(',');
  app.add_option("--print-ir-before", flags.printIrBefore,
                 "print the IR before PASS (or all) when it changes the graph")
      ->delimiter(',');
  app.add_option("--print-ir-after", flags.printIrAfter,
                 "print the IR after PASS (or all) when it changed the graph")
      ->delimiter(',');
  app.add_flag("--pass-timing", flags.passTiming, "print the time spent in each pass");
  app.add_flag("--pipeline", flags.defaultPipeline,
               "run the graph passes of aicfc's pipeline (before any --passes; aicfc "
               "--list-passes)");
  app.add_flag("--explain", flags.explain,
               "after the passes, print every rewrite and property check with its certificate");
  app.add_flag("--verify-passes", flags.verifyPasses,
               "interpret the graph on seeded random inputs after each changed pass and stop at "
               "the first pass that changes an output beyond tolerance");
  app.add_option("--target", flags.target,
                 "target for target-dependent checks (cpu, cuda:sm_90...)")
      ->capture_default_str();
  app.add_option("--hardware", flags.hardware,
                 "the target's hardware description, whose limits the checks read: a100 | h100 | "
                 "h200 | rtx3090 | rtx4090 | FILE.yaml (default: the target arch's; the detected "
                 "host CPU for cpu)");
  std::string kirPassList;
  for (const std::string &n : kir::allKernelPassNames())
    kirPassList += (kirPassList.empty() ? "" : ", ") + n;
  app.add_flag("--kir", flags.kir, "the input is Kernel IR (implied by a .kir file name)");
  app.add_option("--kir-passes", flags.kirPasses,
                 "Kernel IR passes to run on each kernel, in order (known: " + kirPassList + ")")
      ->delimiter(',');
  app.add_flag(
      "--lower", flags.lower,
      "print the graph's kernels (Kernel IR, as aicfc --emit kernels) instead of the graph");
  addEnumOption(app, "--schedule", flags.schedule,
                "with --lower: the planner's knobs (cost) or the recipes' defaults (default)");
  app.add_flag("--split-input-file", flags.split,
               "process each '// -----' part separately, continuing after errors");
  app.add_flag("--verify-diagnostics", flags.verifyDiagnostics,
               "check errors against '// expected-error@+N {{text}}' comments");
  if (std::optional<int> rc = parseCommandLine(app, argc, argv))
    return *rc;
  return runTool([&] { return Driver(flags).run(); });
}
