// separable-resize (passes/separable_resize.cpp): plain resizes over H and W split into a resize
// over W, then over H, in every separable mode and coordinate transform (nearest with its
// rounding modes, linear with half_pixel, align_corners, asymmetric and pytorch_half_pixel;
// integer and fractional scales), the rewritten graph interpreting to the original's outputs
// (nearest exactly, linear within checkClose's tolerance) and compiled for the host matching the
// interpreter; what it leaves whole: cubic, tf_crop_and_resize, an H downsampling, a resize of
// one axis or of the batch and channel axes.
#include "driver/compile.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "passes/pass.h"
#include "tests/unit/compile_checks.h"
#include "tests/unit/graph_checks.h"

#include <doctest/doctest.h>

using namespace aicf;

namespace {

bool separableResize(Graph &g) {
  PassManager pm;
  pm.add(createPass("separable-resize"));
  PassContext ctx;
  return pm.run(g, ctx);
}

int resizes(const Graph &g) {
  int n = 0;
  for (const Node *x : g.nodes())
    n += x->op() == Op::Resize;
  return n;
}

std::string graphWith(const std::string &attrs, const std::string &out) {
  return cat("graph @r(%x: f32[1,3,7,9]) -> (%y: f32", out, ") {\n  %y = resize(%x) {", attrs,
             "}\n  return %y\n}\n");
}

} // namespace

TEST_CASE("separable-resize: every separable mode splits and computes the same values") {
  const char *cases[][2] = {
      {"sizes = [1, 3, 14, 18], scales = [1.0, 1.0, 2.0, 2.0], mode = \"nearest\", "
       "coordinate_transformation_mode = \"asymmetric\", nearest_mode = \"floor\"",
       "[1,3,14,18]"},
      {"sizes = [1, 3, 21, 13], scales = [1.0, 1.0, 3.0, 1.5], mode = \"nearest\", "
       "coordinate_transformation_mode = \"half_pixel\", nearest_mode = \"round_prefer_ceil\"",
       "[1,3,21,13]"},
      {"sizes = [1, 3, 56, 72], scales = [1.0, 1.0, 8.0, 8.0], mode = \"linear\", "
       "coordinate_transformation_mode = \"half_pixel\"",
       "[1,3,56,72]"},
      {"sizes = [1, 3, 14, 13], scales = [1.0, 1.0, 2.0, 1.5], mode = \"linear\", "
       "coordinate_transformation_mode = \"align_corners\"",
       "[1,3,14,13]"},
      {"sizes = [1, 3, 7, 27], scales = [1.0, 1.0, 1.0, 3.0], mode = \"linear\", "
       "coordinate_transformation_mode = \"asymmetric\"",
       "[1,3,7,27]"},
      {"sizes = [1, 3, 10, 4], scales = [1.0, 1.0, 1.5, 0.5], mode = \"linear\", "
       "coordinate_transformation_mode = \"pytorch_half_pixel\"",
       "[1,3,10,4]"},
  };
  for (const auto &c : cases) {
    std::string text = graphWith(c[0], c[1]);
    CAPTURE(text);
    std::unique_ptr<Graph> g = parseGraph(text, "r.mcir");
    std::vector<Tensor> in = randomInputs(*g, 5);
    Tensor want = interpret(*g, in).at(0);
    std::unique_ptr<Graph> s = g->clone();
    bool onlyW = std::string(c[0]).find("scales = [1.0, 1.0, 1.0,") != std::string::npos;
    // A resize of W alone has nothing to split.
    CHECK(separableResize(*s) == !onlyW);
    CHECK(resizes(*s) == (onlyW ? 1 : 2));
    graph_checks::checkClose(interpret(*s, in).at(0), want);
    compile_checks::compileRunCheck(*g, CompileOptions{}, in, "aicf_separable_resize_");
  }
}

TEST_CASE("separable-resize: cubic, crop-and-resize, an H downsampling and other axes stay whole") {
  const char *cases[][2] = {
      {"sizes = [1, 3, 14, 18], scales = [1.0, 1.0, 2.0, 2.0], mode = \"cubic\", "
       "coordinate_transformation_mode = \"half_pixel\", cubic_coeff_a = -0.75",
       "[1,3,14,18]"},
      {"sizes = [1, 3, 14, 18], scales = [1.0, 1.0, 2.0, 2.0], mode = \"linear\", "
       "coordinate_transformation_mode = \"tf_crop_and_resize\", roi = [0.0, 0.0, 0.0, 0.0, 1.0, "
       "1.0, 1.0, 1.0], extrapolation_value = 0.0",
       "[1,3,14,18]"},
      {"sizes = [1, 3, 3, 18], scales = [1.0, 1.0, 0.5, 2.0], mode = \"linear\", "
       "coordinate_transformation_mode = \"half_pixel\"",
       "[1,3,3,18]"},
      {"sizes = [2, 3, 14, 9], scales = [2.0, 1.0, 2.0, 1.0], mode = \"nearest\", "
       "coordinate_transformation_mode = \"asymmetric\", nearest_mode = \"floor\"",
       "[2,3,14,9]"},
  };
  for (const auto &c : cases) {
    std::string text = graphWith(c[0], c[1]);
    CAPTURE(text);
    std::unique_ptr<Graph> g = parseGraph(text, "r.mcir");
    CHECK_FALSE(separableResize(*g));
    CHECK(resizes(*g) == 1);
  }
}

TEST_CASE("separable-resize: the two resizes are placed before the resize's readers") {
  // The resize's result read by a later node (an FPN's upsampled branch concatenated with its
  // skip): the replacement must be defined before that reader, not appended to the graph.
  std::unique_ptr<Graph> g =
      parseGraph(R"(graph @r(%x: f32[1,3,7,9], %s: f32[1,3,14,18]) -> (%y: f32[1,6,14,18]) {
  %u = resize(%x) {sizes = [1, 3, 14, 18], scales = [1.0, 1.0, 2.0, 2.0], mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"}
  %r = relu(%u)
  %y = concat(%r, %s) {axis = 1}
  return %y
}
)",
                 "r.mcir");
  std::vector<Tensor> in = randomInputs(*g, 6);
  Tensor want = interpret(*g, in).at(0);
  std::unique_ptr<Graph> s = g->clone();
  CHECK(separableResize(*s));
  CHECK(resizes(*s) == 2);
  CHECK(verifyGraphDiagnostics(*s).empty());
  graph_checks::checkClose(interpret(*s, in).at(0), want);
}
