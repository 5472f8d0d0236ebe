// --verify-passes: proves each rewrite keeps results. The graph is interpreted on seeded random
// inputs before the pipeline and again after every pass that changed it; the first pass that
// moves an output beyond tolerance stops compilation with the pass, the output and the error.
#pragma once

#include "passes/pass.h"

#include <cstdint>
#include <memory>

namespace aicf {

struct PassVerifierOptions {
  uint64_t seed = 0;
  // |after - before| <= atol + rtol * |before|, elementwise; reassociating rewrites (one-pass
  // norms, streaming softmax) move fp32 results by a few ulps, far inside these bounds.
  double rtol = 1e-4;
  double atol = 1e-5;
};

// Interprets `g` now (the reference) and installs a hook in `opts` that re-interprets after each
// changed pass and throws UserError naming the pass on a mismatch. The returned object holds the
// state and must outlive the pass manager run.
class PassVerifier;
std::shared_ptr<PassVerifier> installPassVerifier(const Graph &g, PassManagerOptions &opts,
                                                  PassVerifierOptions vopts = {});

} // namespace aicf
