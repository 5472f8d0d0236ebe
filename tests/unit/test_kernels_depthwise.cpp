// The host direct_conv recipe's depthwise blocked form (lower/recipe_direct_conv.cpp), lowered,
// printed, compiled and run against the interpreter (tests/unit/kernel_checks.h; tolerances
// interpTol).
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "kernel_checks.h"
#include "kir/kir.h"

#include <doctest/doctest.h>

using namespace aicf;
using namespace aicf::kernel_checks;

// A depthwise blocked_conv runs 8 pixels of a row per step where its column range is that wide
// (lower/recipe_direct_conv.cpp), the rest one by one: rows of 21 pixels (3 x 3, bias, relu and
// a residual add: two steps of 8 and 3 leftover in the interior range, the border columns
// alone), 7 x 7 at stride 2 (19 output columns) and 5 x 5 at dilation 2, against the
// interpreter, with 1 and 3 rows per block.
TEST_CASE("kernels: a depthwise blocked conv's 8-pixel steps match the interpreter") {
  const char *text =
      R"(graph @dw8(%x: f32[1,2,6,21,16], %r: f32[1,2,6,21,16]) -> (%y1: f32[1,2,6,21,16], %y2: f32[1,2,3,11,16], %y3: f32[1,2,6,21,16]) {
  %w3 = weight f32[2,3,3,16]
  %w7 = weight f32[2,7,7,16]
  %w5 = weight f32[2,5,5,16]
  %b = weight f32[32]
  %y1 = blocked_conv(%x, %w3, %b, %r) {kernel_shape = [3, 3], strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], depthwise = 1, blocked_input = 1, epilogue = ["relu", "add"]}
  %y2 = blocked_conv(%x, %w7) {kernel_shape = [7, 7], strides = [2, 2], pads = [3, 3, 3, 3], dilations = [1, 1], depthwise = 1, blocked_input = 1, epilogue = []}
  %y3 = blocked_conv(%x, %w5, %b) {kernel_shape = [5, 5], strides = [1, 1], pads = [4, 4, 4, 4], dilations = [2, 2], depthwise = 1, blocked_input = 1, epilogue = ["relu"]}
  return %y1, %y2, %y3
}
)";
  ScratchDir scratch;
  std::unique_ptr<Graph> g = parseGraph(text, "dw8.mcir");
  randomWeights(*g, 31);
  Partition part = partitionGraph(*g);
  std::map<const Value *, Tensor> vals = interpretAll(*g, randomInputs(*g, 32));
  const std::vector<std::map<std::string, int64_t>> forms = {{{"rows", 1}}, {{"rows", 3}}};
  for (size_t f = 0; f < forms.size(); ++f) {
    CAPTURE(f);
    Lowered low = checkHostKnobs(part, vals, forms[f], scratch.path, cat("dw8_", f));
    CHECK(kernelsPrinting(low, "8 pixels a step") == 3);
  }
}
