// ONNX MeanVarianceNormalization (ir/ops.def mean_variance_norm), the norm nobody wrote a recipe
// for: the importer and the interpreter against references from ONNX's own definition
// (testdata/norm_variants, written by scripts/gen_mvn_models.py), what the importer and the
// default pipeline make of trailing versus other axes, and the kernel on hand-computed values.
// Tolerance (fp32): |got - want| <= 1e-5 + 1e-4*|want| per element, as for the testdata models.
#include "driver/pipeline.h"
#include "frontend/onnx_importer.h"
#include "interp/interpreter.h"
#include "ir/npy.h"
#include "ir/parser.h"
#include "passes/pass.h"
#include "target/target.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

namespace fs = std::filesystem;
using namespace aicf;

namespace {

fs::path variantDir(const std::string &name) {
  return fs::path(AICF_TESTDATA) / "norm_variants" / name;
}

std::unique_ptr<Graph> pipelineGraph(const fs::path &dir) {
  std::unique_ptr<Graph> g = importOnnx((dir / "model.onnx").string());
  PassManager pm;
  buildDefaultPipeline(pm);
  PassContext ctx;
  ctx.target = Target::parse("cpu");
  pm.run(*g, ctx);
  return g;
}

int countOp(const Graph &g, Op op) {
  int n = 0;
  for (const Node *node : g.nodes())
    n += node->op() == op;
  return n;
}

// Elements of `got` outside the tolerance of `want`.
int64_t mismatches(const Tensor &got, const Tensor &want, double &maxAbs) {
  REQUIRE(got.shape() == want.shape());
  int64_t bad = 0;
  maxAbs = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double a = got.getDouble(i), b = want.getDouble(i), err = std::fabs(a - b);
    maxAbs = std::max(maxAbs, err);
    bad += !(err <= 1e-5 + 1e-4 * std::fabs(b));
  }
  return bad;
}

} // namespace

TEST_CASE("mvn: every norm_variants model imports and interprets to ONNX's reference") {
  std::vector<fs::path> dirs;
  for (const auto &e : fs::directory_iterator(fs::path(AICF_TESTDATA) / "norm_variants"))
    dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  REQUIRE(dirs.size() == 5);
  for (const fs::path &dir : dirs) {
    CAPTURE(dir.filename().string());
    for (bool pipeline : {false, true}) {
      std::unique_ptr<Graph> g =
          pipeline ? pipelineGraph(dir) : importOnnx((dir / "model.onnx").string());
      Tensor x = readNpy((dir / "inputs" / "X.npy").string());
      std::vector<Tensor> out = interpret(*g, {x});
      REQUIRE(out.size() == 1);
      double maxAbs = 0;
      int64_t bad = mismatches(out[0], readNpy((dir / "outputs" / "Y.npy").string()), maxAbs);
      MESSAGE(dir.filename().string(), std::string(pipeline ? " (pipeline)" : ""), ": max abs err ",
              maxAbs);
      CHECK(bad == 0);
    }
  }
}

TEST_CASE(
    "mvn: trailing axes give one certified mean_variance_norm, other axes the function body") {
  for (const char *name : {"mvn_trailing_op13", "mvn_negative_axes_op13", "mvn_last_axis_op9"}) {
    CAPTURE(name);
    std::unique_ptr<Graph> g = pipelineGraph(variantDir(name));
    REQUIRE(g->nodes().size() == 1);
    const Node &n = *g->nodes().front();
    CHECK(n.op() == Op::MeanVarianceNorm);
    CHECK(n.props.has(MemProperty::OnlineReducibleNorm));
  }
  std::unique_ptr<Graph> g = pipelineGraph(variantDir("mvn_negative_axes_op13"));
  CHECK(g->nodes().front()->ints("axes") == std::vector<int64_t>{1, 2});

  // [0, 2, 3] (ONNX's default, test_mvn) and [1, 2]: the primitive ops the importer has always
  // emitted, which the existing reduction and pointwise kernels lower.
  for (const char *name : {"mvn_default_axes_op13", "mvn_middle_axes_op13"}) {
    CAPTURE(name);
    std::unique_ptr<Graph> gp = pipelineGraph(variantDir(name));
    CHECK(countOp(*gp, Op::MeanVarianceNorm) == 0);
    CHECK(countOp(*gp, Op::ReduceMean) == 2);
    CHECK(countOp(*gp, Op::Sqrt) == 1);
  }
}

TEST_CASE("mvn: the kernel on hand-computed values, any axes, constant rows and f16") {
  // Rows [1, 2, 3, 4] and [5, 5, 5, 5]: mean 2.5, population variance 1.25; a constant row is 0
  // (0 / (0 + 1e-9)), not NaN.
  std::unique_ptr<Graph> g = parseGraph("graph @m(%x: f32[2,4]) -> (%y: f32[2,4]) {\n"
                                        "  %y = mean_variance_norm(%x) {axes = [1]}\n"
                                        "  return %y\n}\n",
                                        "m.mcir");
  Tensor y = interpret(*g, {Tensor::fromF32({1, 2, 3, 4, 5, 5, 5, 5}, {2, 4})})[0];
  double sd = std::sqrt(1.25) + 1e-9;
  for (int64_t j = 0; j < 4; ++j) {
    CHECK(y.getDouble(j) == doctest::Approx((j + 1 - 2.5) / sd).epsilon(1e-6));
    CHECK(y.getDouble(4 + j) == 0.0);
  }

  // Over the leading axis (columns): [[1, 10], [3, 30]] -> each column is [-1, 1].
  g = parseGraph("graph @m(%x: f32[2,2]) -> (%y: f32[2,2]) {\n"
                 "  %y = mean_variance_norm(%x) {axes = [0]}\n"
                 "  return %y\n}\n",
                 "m.mcir");
  y = interpret(*g, {Tensor::fromF32({1, 10, 3, 30}, {2, 2})})[0];
  CHECK(y.getDouble(0) == doctest::Approx(-1.0).epsilon(1e-6));
  CHECK(y.getDouble(1) == doctest::Approx(-1.0).epsilon(1e-6));
  CHECK(y.getDouble(2) == doctest::Approx(1.0).epsilon(1e-6));
  CHECK(y.getDouble(3) == doctest::Approx(1.0).epsilon(1e-6));

  // f16 in, f16 out; a non-float operand is a verifier error.
  g = parseGraph("graph @m(%x: f16[4]) -> (%y: f16[4]) {\n"
                 "  %y = mean_variance_norm(%x) {axes = [0]}\n"
                 "  return %y\n}\n",
                 "m.mcir");
  Tensor xh(TensorType(DType::F16, {4}));
  for (int64_t i = 0; i < 4; ++i)
    xh.setDouble(i, double(i + 1));
  y = interpret(*g, {xh})[0];
  CHECK(y.type().dtype == DType::F16);
  CHECK(y.getDouble(3) == doctest::Approx(1.5 / std::sqrt(1.25)).epsilon(1e-3));
  CHECK_THROWS_WITH(parseGraph("graph @m(%x: i64[4]) -> (%y: i64[4]) {\n"
                               "  %y = mean_variance_norm(%x) {axes = [0]}\n"
                               "  return %y\n}\n",
                               "m.mcir"),
                    doctest::Contains("mean_variance_norm needs a floating-point operand"));
  CHECK_THROWS_WITH(parseGraph("graph @m(%x: f32[4]) -> (%y: f32[4]) {\n"
                               "  %y = mean_variance_norm(%x) {axes = [1]}\n"
                               "  return %y\n}\n",
                               "m.mcir"),
                    doctest::Contains("mean_variance_norm axis 1 is out of range for f32[4]"));
}
