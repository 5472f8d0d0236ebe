// The pass interface and pass manager (docs/contributing.md: MLIR/XLA style).
//
// A pass has a name, a one-line summary and run(), which returns whether it changed the graph.
// The manager verifies the graph after every pass that changed it, can print the IR before/after
// passes (only when changed), time passes, and — in builds with AICF_EXPENSIVE_CHECKS — catches
// a pass that claims "unchanged" while it changed the printed IR.
#pragma once

#include "ir/graph.h"
#include "ir/precision.h"
#include "target/target.h"

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

namespace aicf {

struct PassContext;
class ExplainLog;

class Pass {
public:
  virtual ~Pass() = default;
  virtual const char *name() const = 0;    // "dce"; used by --passes and --print-ir-after
  virtual const char *summary() const = 0; // one line, for --help and aicfc --list-passes
  virtual bool run(Graph &g, PassContext &ctx) = 0;
};

// Every pass of passes/passes.def, by its C++ name.
enum class PassId {
#define AICF_PASS(id, name, create, summary) id,
#include "passes/passes.def"
#undef AICF_PASS
};

struct PassInfo {
  const char *name;
  const char *summary;
};

// passes/passes.def's names and summaries, indexed by PassId.
inline constexpr PassInfo kPassInfo[] = {
#define AICF_PASS(id, name, create, summary) {name, summary},
#include "passes/passes.def"
#undef AICF_PASS
};

constexpr const PassInfo &passInfo(PassId id) {
  return kPassInfo[static_cast<int>(id)];
}

// The base of every pass of passes/passes.def: its name and summary are the table's.
template <PassId Id>
class NamedPass : public Pass {
public:
  const char *name() const final { return passInfo(Id).name; }
  const char *summary() const final { return passInfo(Id).summary; }
};

// Shared state and options visible to every pass.
// The layout a host layout pass chose for one value (block-channels), or a blocked value read
// back on the plain layout: plan.yaml's `layouts`, --explain's layout records.
struct LayoutChoice {
  std::string node;   // the node's location ("/features/0/Conv") or "node #N (op)"
  std::string op;     // its op
  std::string layout; // "blocked" ([N, C/16, H, W, 16]), "nchw", or "nchw (converted)"
  std::string type;   // the value's type in that layout
  std::string reason; // why; a conversion: the readers it serves
  int64_t bytes = 0;  // a conversion: the bytes it moves (read and written)
};

struct PassContext {
  // The target compiled for, with the hardware description whose limits the legality checks
  // read (tile_compatible_compute: on-chip memory). Default: the cpu, its description (the
  // detected host) loaded by the pass that needs it.
  Target target;
  // The arithmetic precision of products (aicfc --precision; ir/precision.h): assign-precision
  // marks the contractions and attention of GPU plans with it.
  Precision precision = Precision::F32;
  // aicfc --io-precision: the type the model's float inputs and outputs are exchanged in
  // (io-precision); none: the model's own.
  std::optional<Precision> ioPrecision;
  // Host plans: the folder's -march has AVX512-BF16, so assign-precision may put a product whose
  // operands are integers bf16 holds exactly (integer_operands) on the bf16 micro-kernel under
  // any precision: its results are an fp32 plan's.
  bool hostBf16 = false;
  // Host plans: the folder's -march has AVX512-VNNI, so such a product whose operands are 8-bit
  // integers (x_offset known, the weight in [-128, 127]) runs on the int8 micro-kernel
  // (vpdpbusd, i32 sums: exact).
  bool hostVnni = false;
  std::ostream *log = nullptr;   // diagnostics and explanations go here when set
  ExplainLog *explain = nullptr; // rewrites and certificates are recorded here when set
  // The layouts a host layout pass chose are appended here when set (always, by the compile
  // driver: plan.yaml records them).
  std::vector<LayoutChoice> *layouts = nullptr;
};

// One pass's run, for --pass-timing.
struct PassTime {
  std::string name;
  double ms;
  bool changed;
};

// The --pass-timing table: one line per pass run, then the total (to stderr when `os` is null).
void printPassTiming(std::ostream *os, const std::vector<PassTime> &times);

struct PassManagerOptions {
  std::set<std::string> printIrBefore; // pass names, or "all"
  std::set<std::string> printIrAfter;  // pass names, or "all"
  std::ostream *irOut = nullptr;       // where printed IR goes (default stderr)
  bool timing = false;                 // print a per-pass timing table at the end
  std::ostream *timingOut = nullptr;   // default stderr
  // With `timing`: when set, each pass's time is appended here and run() prints no table; the
  // owner prints one table for several managers (the compile driver's pipeline runs its graph
  // passes in several, driver/pipeline.h).
  std::vector<PassTime> *timings = nullptr;
  bool verifyEachPass = true; // run the verifier after each changed pass
  // Called after every pass that changed the graph, with the graph as it was before and after
  // (as text-format snapshots are expensive, `before` is only provided when requested).
  std::function<void(const Pass &, const Graph &after)> afterChangedPass;
  std::function<void(const Pass &, const Graph &before)> beforePass;
};

class PassManager {
public:
  explicit PassManager(PassManagerOptions opts = {}) : opts_(std::move(opts)) {}
  void add(std::unique_ptr<Pass> p) { passes_.push_back(std::move(p)); }
  const std::vector<std::unique_ptr<Pass>> &passes() const { return passes_; }
  // Runs all passes in order. A failing pass (exception, verifier error) is reported as
  // "pass 'NAME' failed: ..." in a UserError/InternalError. Returns whether anything changed.
  bool run(Graph &g, PassContext &ctx);

private:
  PassManagerOptions opts_;
  std::vector<std::unique_ptr<Pass>> passes_;
};

// All known passes by name (passes/passes.def); null if unknown.
std::unique_ptr<Pass> createPass(const std::string &name);
std::vector<std::string> allPassNames();
// A UserError (exit 1) for the first name in `names` that is not a known pass (nor "all" when
// `allowAll`), listing the known ones: "unknown pass 'x' in --print-ir-after (known: ...)".
void checkPassNames(const std::vector<std::string> &names, const char *flag, bool allowAll);

} // namespace aicf
