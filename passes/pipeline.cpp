// The default graph pipeline of aicfc, listed once, in order (docs/contributing.md: one readable
// list). Each line says why it sits where it does.
#include "passes/pass.h"

#include "support/diagnostics.h"

namespace aicf {

namespace {

void addPass(PassManager &pm, const char *name) {
  std::unique_ptr<Pass> p = createPass(name);
  AICF_CHECK(p != nullptr, "default pipeline names unknown pass '", name, "'");
  pm.add(std::move(p));
}

} // namespace

void buildDefaultPipeline(PassManager &pm) {
  // 1. Canonicalise, so patterns see one spelling of each computation: constants folded
  //    (exporters compute scales and masks at run time), no-ops and reshape/transpose chains
  //    gone, duplicated subexpressions merged (a shared x is one value, not two).
  addPass(pm, "fold-constants");
  addPass(pm, "simplify");
  addPass(pm, "cse");
  // 2. Detect semantic operators. Norms first: their matches contain divides and muls that the
  //    activation patterns must not see half-consumed. Attention last: its scale/mask peeling
  //    relies on the constants folded above.
  addPass(pm, "detect-layer-norm");
  addPass(pm, "detect-rms-norm");
  addPass(pm, "detect-softmax");
  addPass(pm, "detect-gelu");
  addPass(pm, "detect-silu");
  addPass(pm, "detect-hard-swish");
  addPass(pm, "detect-attention");
  // Attention introduces k = transpose(k^T) that composes with the exporter's transpose.
  addPass(pm, "simplify");
  // 3. Fuse into contractions: batch norm into conv weights first (so the conv's epilogue can
  //    then take the activation), then bias / residual / activation epilogues, whose views
  //    leave reshape pairs to compose.
  addPass(pm, "fold-batch-norm");
  addPass(pm, "fuse-epilogue");
  addPass(pm, "simplify");
  // 4. Rewrites leave unused nodes and weights behind; removing them before lowering keeps
  //    dead values out of the kernels, the memory plan and weights.bin.
  addPass(pm, "dce");
  // 5. Last, on the final graph: check the four memory properties and attach certificates,
  //    which the lowering reads and --explain prints.
  addPass(pm, "annotate-properties");
}

} // namespace aicf
