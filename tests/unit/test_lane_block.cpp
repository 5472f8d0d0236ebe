// The lane block of host flat loops (lower/flat_loop.h, laneBlockAxis): a read of a transposed
// innermost dim of 4, 8 or 16 elements (a channel block's lanes, an NHWC tensor's channels) is
// lowered as a loop over the output without that axis, each element an unrolled loop over its
// positions. Checked on the data-movement recipe (a transpose that is a graph output) and the
// pointwise recipe's mapped form (a transpose folded into its reader), on shapes whose planes
// the vector divides and does not (7 x 7: padded planes), at vector widths 4, 8 and 16: the
// kernels take the lane block and match the interpreter (f32 1e-5 + 1e-4 rel; a copy is exact).
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "kernel_checks.h"

#include <doctest/doctest.h>

#include <string>

using namespace aicf;
using namespace aicf::kernel_checks;

namespace {

// Lowers `text` for the host at `vec`, runs every group against the interpreter and returns how
// many kernels unroll a lane block.
int laneBlockKernels(const std::string &text, int64_t vec, const std::string &lib) {
  ScratchDir scratch;
  std::unique_ptr<Graph> g = parseGraph(text, lib + ".mcir");
  Partition part = partitionGraph(*g);
  std::map<const Value *, Tensor> vals = interpretAll(*g, randomInputs(*g, 5));
  Lowered low = checkHostKnobs(part, vals, {{"vec", vec}}, scratch.path, lib);
  int blocks = 0;
  for (const kir::Kernel &k : low.kernels)
    blocks += kir::printKernel(k).find("for c_l in 0 .. ") != std::string::npos ? 1 : 0;
  return blocks;
}

} // namespace

TEST_CASE("lane block: a transposed innermost dim of 4, 8 or 16 runs as an unrolled lane block") {
  // NHWC -> NCHW with 8 channels on a 7 x 7 map: %y a graph output (a transpose kernel), %z a
  // relu reading the transpose through its map (a pointwise kernel).
  const std::string nhwc =
      R"(graph @nhwc(%x: f32[2,7,7,8]) -> (%y: f32[2,8,7,7], %z: f32[2,8,7,7]) {
  %y = transpose(%x) {perm = [0, 3, 1, 2]} : f32[2,8,7,7]
  %t = transpose(%x) {perm = [0, 3, 1, 2]} : f32[2,8,7,7]
  %z = relu(%t) : f32[2,8,7,7]
  return %y, %z
}
)";
  // A blocked value [N, C/16, H, W, 16] back to channel planes, scaled by a per-pixel weight.
  const std::string blocked =
      R"(graph @blocked(%x: f32[1,2,5,6,16], %w: f32[1,1,1,5,6]) -> (%y: f32[1,2,16,5,6]) {
  %t = transpose(%x) {perm = [0, 1, 4, 2, 3]} : f32[1,2,16,5,6]
  %y = mul(%t, %w) : f32[1,2,16,5,6]
  return %y
}
)";
  // 4 lanes on rows of 32 (the vector divides the row).
  const std::string four = R"(graph @four(%x: f32[3,32,4]) -> (%y: f32[3,4,32]) {
  %y = transpose(%x) {perm = [0, 2, 1]} : f32[3,4,32]
  return %y
}
)";
  for (int64_t vec : {4, 8, 16}) {
    CAPTURE(vec);
    CHECK(laneBlockKernels(nhwc, vec, cat("nhwc", vec)) == 2);
    CHECK(laneBlockKernels(blocked, vec, cat("blocked", vec)) == 1);
    CHECK(laneBlockKernels(four, vec, cat("four", vec)) == 1);
  }
}

TEST_CASE("lane block: a transpose whose innermost dim is not 4, 8 or 16 keeps the flat loop") {
  // 3 channels (an RGB image) and 32 (wider than one block of lanes): no lane block, still exact.
  for (const char *c : {"3", "32"}) {
    CAPTURE(c);
    std::string text = cat("graph @odd(%x: f32[1,6,10,", c, "]) -> (%y: f32[1,", c,
                           ",6,10]) {\n  %y = transpose(%x) {perm = [0, 3, 1, 2]} : f32[1,", c,
                           ",6,10]\n  return %y\n}\n");
    CHECK(laneBlockKernels(text, 16, cat("odd", c)) == 0);
  }
}
