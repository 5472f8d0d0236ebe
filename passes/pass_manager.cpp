// The pass manager: runs passes in order and keeps the IR honest between them
// (docs/contributing.md, after MLIR's and XLA's pass managers and XLS's "unchanged really
// unchanged" check).
//   - A pass that changed the graph is followed by the verifier; a failure names the pass.
//   - --print-ir-before/after print only around passes that changed the graph (Halide), the
//     "before" IR being a snapshot taken before the pass ran.
//   - An exception escaping a pass is re-thrown as "pass 'NAME' failed: ..." of the same kind.
//   - With AICF_EXPENSIVE_CHECKS the printed IR is compared before/after a pass that reports
//     "unchanged"; a difference is a bug in that pass (InternalError).
#include "passes/pass.h"

#include "ir/printer.h"
#include "ir/verifier.h"
#include "support/diagnostics.h"
#include "support/stderr_stream.h"

#include <chrono>
#include <cstdio>
#include <iomanip>

namespace aicf {

namespace {

#ifdef AICF_EXPENSIVE_CHECKS
constexpr bool kCheckUnchanged = true;
#else
constexpr bool kCheckUnchanged = false;
#endif

bool selected(const std::set<std::string> &names, const std::string &pass) {
  return names.count("all") || names.count(pass);
}

std::string header(const char *when, const std::string &pass) {
  return cat("// -----// IR ", when, " ", pass, " //----- //\n");
}

} // namespace

void printPassTiming(std::ostream *out, const std::vector<PassTime> &times) {
  std::ostream &os = out ? *out : stderrStream();
  double total = 0;
  os << "// ----- pass timing ----- //\n";
  os << "//   wall (ms)  changed  pass\n";
  for (const PassTime &t : times) {
    os << "// " << std::setw(11) << std::fixed << std::setprecision(3) << t.ms << "  "
       << (t.changed ? "yes    " : "no     ") << "  " << t.name << "\n";
    total += t.ms;
  }
  os << "// " << std::setw(11) << std::fixed << std::setprecision(3) << total << "           "
     << "total\n";
  os.flush();
}

bool PassManager::run(Graph &g, PassContext &ctx) {
  std::ostream &irOut = opts_.irOut ? *opts_.irOut : stderrStream();
  std::vector<PassTime> own;
  std::vector<PassTime> &times = opts_.timings ? *opts_.timings : own;
  bool anyChanged = false;
  // Loop bodies first: each is a graph of its own, optimised by the same pipeline.
  for (Node *n : g.nodes())
    if (n->body)
      anyChanged = run(*n->body, ctx) || anyChanged;
  for (const std::unique_ptr<Pass> &pass : passes_) {
    const std::string name = pass->name();
    const bool printBefore = selected(opts_.printIrBefore, name);
    const bool printAfter = selected(opts_.printIrAfter, name);
    std::string before;
    if (printBefore || kCheckUnchanged)
      before = printGraph(g);
    if (opts_.beforePass)
      opts_.beforePass(*pass, g);

    auto start = std::chrono::steady_clock::now();
    bool changed = false;
    try {
      changed = pass->run(g, ctx);
    } catch (const UserError &e) {
      throw UserError(cat("pass '", name, "' failed: ", e.what()), e.exitCode());
    } catch (const std::exception &e) {
      throw InternalError(cat("pass '", name, "' failed: ", e.what()));
    }
    std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - start;
    times.push_back({name, ms.count(), changed});

    if (!changed) {
      if (kCheckUnchanged && printGraph(g) != before)
        throw InternalError(cat("pass '", name, "' reported no change but changed the IR"));
      continue;
    }
    anyChanged = true;
    if (printBefore)
      irOut << header("before", name) << before;
    if (printAfter)
      irOut << header("after", name) << printGraph(g);
    if (printBefore || printAfter)
      irOut.flush();
    if (opts_.verifyEachPass) {
      std::vector<std::string> problems = verifyGraphDiagnostics(g);
      if (!problems.empty())
        throw InternalError(cat("pass '", name, "' produced invalid IR: ", problems.front(),
                                problems.size() > 1 ? cat(" (and ", problems.size() - 1, " more)")
                                                    : std::string()));
    }
    if (opts_.afterChangedPass)
      opts_.afterChangedPass(*pass, g);
  }
  if (opts_.timing && !opts_.timings)
    printPassTiming(opts_.timingOut, times);
  return anyChanged;
}

} // namespace aicf
