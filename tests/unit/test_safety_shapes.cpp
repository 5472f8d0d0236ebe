// Size safety (issue 15 items 5 and 7): the checked arithmetic of support/checked_math.h, the
// per-tensor limit as TensorType reports it, --dim / --shape value parsing, and shape inference
// that would overflow or exceed the limit failing at its node instead of wrapping.
#include "ir/graph.h"
#include "support/checked_math.h"
#include "support/cli_util.h"
#include "support/diagnostics.h"

#include <doctest/doctest.h>

#include <climits>

using namespace aicf;

namespace {

// The exit code and message of a UserError thrown by `f` (0 and "" when none is thrown).
template <typename F>
std::pair<int, std::string> userError(F &&f) {
  try {
    f();
  } catch (const UserError &e) {
    return {e.exitCode(), e.what()};
  }
  return {0, ""};
}

} // namespace

TEST_CASE("safety shapes: checked arithmetic reports overflow instead of wrapping") {
  CHECK(checkedAdd(INT64_MAX - 1, 1) == INT64_MAX);
  CHECK_FALSE(checkedAdd(INT64_MAX, 1));
  CHECK_FALSE(checkedAdd(INT64_MIN, -1));
  CHECK(checkedSub(0, INT64_MAX) == -INT64_MAX);
  CHECK_FALSE(checkedSub(INT64_MIN, 1));
  CHECK(checkedMul(int64_t(1) << 31, int64_t(1) << 31) == int64_t(1) << 62);
  CHECK_FALSE(checkedMul(int64_t(1) << 32, int64_t(1) << 31));
  CHECK_FALSE(checkedMul(-1, INT64_MIN));
  std::vector<int64_t> wraps = {int64_t(1) << 32, int64_t(1) << 32, 4}; // wrapped to 0 before
  CHECK_FALSE(checkedProduct(wraps));
  std::vector<int64_t> fine = {2, 3, 7};
  CHECK(checkedProduct(fine) == 42);
  CHECK(checkedProduct(std::vector<int64_t>{}) == 1);
  std::vector<int64_t> empty = {0, INT64_MAX, INT64_MAX};
  CHECK(checkedProduct(empty) == 0);
}

TEST_CASE("safety shapes: the per-tensor limit and empty dims") {
  CHECK(kMaxTensorElements == 2147483647);
  CHECK(tensorSizeProblem(TensorType(DType::F32, {32768, 65535})) == "");
  CHECK(tensorSizeProblem(TensorType(DType::F32, {2147483647})) == "");
  CHECK(tensorSizeProblem(TensorType(DType::F32, {65536, 32768})) ==
        "f32[65536,32768] has 2147483648 elements, above the limit of 2147483647 per tensor");
  CHECK(tensorSizeProblem(TensorType(DType::F32, {int64_t(1) << 32, int64_t(1) << 32, 4})) ==
        "f32[4294967296,4294967296,4] has more than 2^63 elements, above the limit of "
        "2147483647 per tensor");
  // A dynamic dim counts as 1: the static dims alone may already be too many.
  TensorType dyn(DType::F16, {kDynamicDim, int64_t(1) << 31});
  CHECK(tensorSizeProblem(dyn) != "");
  CHECK(emptyDimProblem(TensorType(DType::F32, {3, 0, 5})) == "dim 1 is 0");
  CHECK(emptyDimProblem(TensorType(DType::F32, {})) == "");
  // numel() of a type nobody checked is a compiler bug, not a wrapped size.
  CHECK_THROWS_AS(TensorType(DType::F32, {int64_t(1) << 32, int64_t(1) << 32, 4}).numel(),
                  InternalError);
  CHECK(TensorType(DType::I64, {65536, 32767}).bytes() == int64_t(65536) * 32767 * 8);
}

TEST_CASE("safety shapes: --dim and --shape values are positive integers within the limit") {
  CHECK(parseDimFlag("batch=2147483647").second == 2147483647);
  CHECK(parseShapeFlag("x=2x64").second == std::vector<int64_t>{2, 64});
  CHECK(parseShapeFlag("x=").second.empty());
  CHECK(userError([] { parseDimFlag("batch=9223372036854775807"); }) ==
        std::pair<int, std::string>{1, "bad --dim 'batch=9223372036854775807': the value is above "
                                       "the limit of 2147483647 elements per tensor"});
  CHECK(userError([] { parseDimFlag("batch=2147483648"); }).first == 1);
  CHECK(
      userError([] { parseDimFlag("batch=0"); }) ==
      std::pair<int, std::string>{
          1, "bad --dim 'batch=0': the value is 0: dims bound on the command line are 1 or more"});
  for (const char *bad : {"batch=-1", "batch=+1", "batch= 1", "batch=1e3", "batch=0x10", "batch="})
    CHECK(userError([&] { parseDimFlag(bad); }) ==
          std::pair<int, std::string>{
              1, cat("bad --dim '", bad, "': the value is not a positive decimal integer")});
  CHECK(userError([] { parseDimFlag("=2"); }).first == 1);
  CHECK(
      userError([] { parseShapeFlag("x=0x64"); }) ==
      std::pair<int, std::string>{
          1, "bad --shape 'x=0x64': dim 0 '0' is 0: dims bound on the command line are 1 or more"});
  CHECK(userError([] { parseShapeFlag("x=8x99999999999"); }) ==
        std::pair<int, std::string>{1, "bad --shape 'x=8x99999999999': dim 1 '99999999999' is "
                                       "above the limit of 2147483647 elements per tensor"});
  CHECK(userError([] { parseShapeFlag("x=8xx8"); }).first == 1);
}

TEST_CASE("safety shapes: inference that overflows or exceeds the limit fails at its node") {
  Graph g;
  Value *x = g.addInput("x", TensorType(DType::F32, {4, 4}));
  auto fails = [&](Op op, AttrMap attrs) {
    return userError([&] { g.createNode(op, {x}, std::move(attrs), Location("n")); });
  };
  CHECK(fails(Op::Tile, {{"repeats", std::vector<int64_t>{int64_t(1) << 62, 8}}}) ==
        std::pair<int, std::string>{2, "n: tile result size overflows (4 * 4611686018427387904)"});
  CHECK(fails(Op::Tile, {{"repeats", std::vector<int64_t>{65536, 65536}}}) ==
        std::pair<int, std::string>{2, "n: result f32[262144,262144] has 68719476736 elements, "
                                       "above the limit of 2147483647 per tensor"});
  CHECK(fails(Op::Pad, {{"pads", std::vector<int64_t>{INT64_MAX, 0, 1, 0}}}).second ==
        "n: pad result size overflows (9223372036854775807 + 1)");
  CHECK(fails(Op::Reshape, {{"shape", std::vector<int64_t>{int64_t(1) << 40, int64_t(1) << 40}}})
            .second == "n: reshape result size overflows (1099511627776 * 1099511627776)");
  CHECK(fails(Op::Tile, {{"repeats", std::vector<int64_t>{2, 2}}}).first == 0);
}
