// The NormSpec an online_reducible_norm certificate carries (ir/properties.h): the state algebra,
// reduced axes, epsilon and its placement, and the scale / bias operands the lowering generates a
// norm kernel from, for every norm op the checker knows, including mean_variance_norm, for which
// no recipe was ever written. The lowering reads these fields instead of the op, so they must be
// exactly what the op computes.
#include "ir/parser.h"
#include "passes/property_checks.h"
#include "target/target.h"

#include <doctest/doctest.h>

using namespace aicf;

namespace {

// Parses `body` as the graph's nodes and checks online_reducible_norm on its first node.
std::optional<Certificate> normCert(const std::string &params, const std::string &results,
                                    const std::string &body) {
  std::string text = "graph @t(" + params + ") -> (" + results + ") {\n" + body + "}\n";
  std::unique_ptr<Graph> g = parseGraph(text, "test.mcir");
  REQUIRE(!g->nodes().empty());
  return checkOnlineReducibleNorm(*g, *g->nodes().front(), Target::parse("cpu"));
}

} // namespace

TEST_CASE("norm spec: softmax and log_softmax reduce one axis, no epsilon or parameters") {
  auto c =
      normCert("%x: f32[4,8]", "%y: f32[4,8]", "  %y = softmax(%x) {axis = -1}\n  return %y\n");
  REQUIRE(c);
  CHECK(c->holds());
  REQUIRE(c->norm);
  CHECK(c->norm->algebra == NormAlgebra::Softmax);
  CHECK(c->norm->firstAxis == 1);
  CHECK(c->norm->lastAxis == 1);
  CHECK(c->norm->epsilon == 0);
  CHECK(c->norm->scaleOperand == -1);
  CHECK(c->norm->biasOperand == -1);

  c = normCert("%x: f32[2,3,8]", "%y: f32[2,3,8]",
               "  %y = log_softmax(%x) {axis = 2}\n  return %y\n");
  REQUIRE(c);
  REQUIRE(c->norm);
  CHECK(c->norm->algebra == NormAlgebra::LogSoftmax);
  CHECK(c->norm->firstAxis == 2);
  CHECK(c->norm->lastAxis == 2);

  // Over a leading axis the certificate fails, but the algebra and its axis are still stated.
  c = normCert("%x: f32[8,16]", "%y: f32[8,16]", "  %y = softmax(%x) {axis = 0}\n  return %y\n");
  REQUIRE(c);
  CHECK_FALSE(c->holds());
  CHECK(c->firstFailed()->name == "reduce axes trailing and contiguous");
  REQUIRE(c->norm);
  CHECK(c->norm->algebra == NormAlgebra::Softmax);
  CHECK(c->norm->firstAxis == 0);
  CHECK(c->norm->lastAxis == 0);
}

TEST_CASE("norm spec: layer_norm is welford over [axis, rank) with gamma and beta operands") {
  auto c = normCert("%x: f32[2,3,4]", "%y: f32[2,3,4]",
                    "  %g = weight f32[3,4]\n  %b = weight f32[3,4]\n"
                    "  %y = layer_norm(%x, %g, %b) {axis = -2, epsilon = 0.001}\n  return %y\n");
  REQUIRE(c);
  CHECK(c->holds());
  REQUIRE(c->norm);
  CHECK(c->norm->algebra == NormAlgebra::Welford);
  CHECK(c->norm->firstAxis == 1);
  CHECK(c->norm->lastAxis == 2);
  CHECK(c->norm->epsilon == doctest::Approx(0.001).epsilon(1e-12));
  CHECK(c->norm->epsilonAt == EpsilonPlacement::Variance);
  CHECK(c->norm->scaleOperand == 1);
  CHECK(c->norm->biasOperand == 2);

  c = normCert("%x: f32[4,256]", "%y: f32[4,256]", "  %y = layer_norm(%x)\n  return %y\n");
  REQUIRE(c);
  REQUIRE(c->norm);
  CHECK(c->norm->firstAxis == 1);
  CHECK(c->norm->lastAxis == 1);
  CHECK(c->norm->epsilon == doctest::Approx(1e-5).epsilon(1e-12));
  CHECK(c->norm->scaleOperand == -1);
  CHECK(c->norm->biasOperand == -1);
}

TEST_CASE("norm spec: rms_norm is sum_squares with its weight as the scale") {
  auto c = normCert("%x: f32[4,64]", "%y: f32[4,64]",
                    "  %w = weight f32[64]\n"
                    "  %y = rms_norm(%x, %w) {axis = 1, epsilon = 1e-06}\n  return %y\n");
  REQUIRE(c);
  CHECK(c->holds());
  REQUIRE(c->norm);
  CHECK(c->norm->algebra == NormAlgebra::SumSquares);
  CHECK(c->norm->firstAxis == 1);
  CHECK(c->norm->lastAxis == 1);
  CHECK(c->norm->epsilon == doctest::Approx(1e-6).epsilon(1e-12));
  CHECK(c->norm->scaleOperand == 1);
  CHECK(c->norm->biasOperand == -1);
}

TEST_CASE("norm spec: mean_variance_norm over trailing axes is welford, epsilon on the std dev") {
  auto c = normCert("%x: f32[2,3,4,5]", "%y: f32[2,3,4,5]",
                    "  %y = mean_variance_norm(%x) {axes = [2, 3]}\n  return %y\n");
  REQUIRE(c);
  CHECK(c->holds());
  CHECK(c->exactness == Exactness::Reassociated);
  REQUIRE(c->norm);
  CHECK(c->norm->algebra == NormAlgebra::Welford);
  CHECK(c->norm->firstAxis == 2);
  CHECK(c->norm->lastAxis == 3);
  CHECK(c->norm->epsilon == 1e-9); // ONNX's constant, the attribute's default
  CHECK(c->norm->epsilonAt == EpsilonPlacement::StdDev);
  CHECK(c->norm->scaleOperand == -1);
  CHECK(c->norm->biasOperand == -1);

  // Empty axes: all of them, one row per tensor.
  c = normCert("%x: f32[3,5]", "%y: f32[3,5]",
               "  %y = mean_variance_norm(%x) {axes = []}\n  return %y\n");
  REQUIRE(c);
  CHECK(c->holds());
  REQUIRE(c->norm);
  CHECK(c->norm->firstAxis == 0);
  CHECK(c->norm->lastAxis == 1);
}

TEST_CASE("norm spec: mean_variance_norm over other axes fails naming the condition") {
  // ONNX's default, per channel: not one range, so no algebra the lowering could use.
  auto c = normCert("%x: f32[2,3,4,5]", "%y: f32[2,3,4,5]",
                    "  %y = mean_variance_norm(%x) {axes = [0, 2, 3]}\n  return %y\n");
  REQUIRE(c);
  CHECK_FALSE(c->holds());
  REQUIRE(c->firstFailed());
  CHECK(c->firstFailed()->name == "reduce axes trailing and contiguous");
  CHECK(c->firstFailed()->evidence == "axes [0,2,3] of f32[2,3,4,5] (not one contiguous range)");
  CHECK_FALSE(c->norm);

  // One range, but not the innermost one: the algebra is stated, the certificate fails.
  c = normCert("%x: f32[2,3,4,5]", "%y: f32[2,3,4,5]",
               "  %y = mean_variance_norm(%x) {axes = [1, 2]}\n  return %y\n");
  REQUIRE(c);
  CHECK_FALSE(c->holds());
  CHECK(c->firstFailed()->evidence == "axes [1,2] of f32[2,3,4,5] (not the innermost axes)");
  REQUIRE(c->norm);
  CHECK(c->norm->firstAxis == 1);
  CHECK(c->norm->lastAxis == 2);
}

TEST_CASE("norm spec: ops that are not norms get no certificate") {
  auto c = normCert("%x: f32[4,8]", "%y: f32[4,8]", "  %y = relu(%x)\n  return %y\n");
  CHECK_FALSE(c);
  c = normCert("%x: f32[2,3,4,5]", "%y: f32[1,3,1,1]",
               "  %y = reduce_mean(%x) {axes = [0, 2, 3]}\n  return %y\n");
  CHECK_FALSE(c);
}
