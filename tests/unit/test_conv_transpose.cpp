// conv_transpose through the default pipeline (passes/conv_transpose_as_conv.cpp,
// passes/fold_batch_norm.cpp): a decoder whose transposed convs tile their output (2x2 / stride
// 2, one of them grouped, one followed by a batch_norm) compiles to 1x1 convs and pixel shuffles,
// and one whose kernel is no multiple of its stride (3x3 / stride 2) to a conv per phase; a
// second decoder's overlapping ones (4x4 / stride 2 / pads 1, a grouped 6x4 / stride 3x2 with
// uneven pads and output padding past the last tap, and a 3x3 / stride 2 / pads 1 / output
// padding 1) become phase convs, a pixel shuffle and a crop; a dilated one keeps its direct form.
// The compiled host and GPU-planned folders match the interpreter on the original graphs.
#include "driver/compile.h"
#include "driver/pipeline.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "passes/pass.h"
#include "target/target.h"
#include "tests/unit/compile_checks.h"

#include <doctest/doctest.h>

#include <memory>
#include <string>

using namespace aicf;

namespace {

const char *kDecoder = R"(graph @decoder(%x: f32[1,8,6,6]) -> (%y: f32[1,4,49,49]) {
  %w1 = weight f32[8,16,2,2]
  %b1 = weight f32[16]
  %s = weight f32[16]
  %t = weight f32[16]
  %m = weight f32[16]
  %v = weight f32[16]
  %w2 = weight f32[16,1,2,2]
  %w3 = weight f32[12,4,3,3]
  %b3 = weight f32[4]
  %u = conv_transpose(%x, %w1, %b1) {strides = [2, 2], pads = [0, 0, 0, 0], dilations = [1, 1], group = 1}
  %n = batch_norm(%u, %s, %t, %m, %v) {epsilon = 1e-05}
  %r = relu(%n)
  %g = conv_transpose(%r, %w2) {strides = [2, 2], pads = [0, 0, 0, 0], dilations = [1, 1], group = 4}
  %c = concat(%g, %g, %g) {axis = 1}
  %y = conv_transpose(%c, %w3, %b3) {strides = [2, 2], pads = [0, 0, 0, 0], dilations = [1, 1], group = 1}
  return %y
}
)";

const char *kOverlapping = R"(graph @overlapping(%x: f32[1,4,5,6]) -> (%z: f32[1,3,66,48]) {
  %w1 = weight f32[4,6,4,4]
  %b1 = weight f32[6]
  %w2 = weight f32[6,2,6,4]
  %w3 = weight f32[4,3,3,3]
  %b3 = weight f32[3]
  %a = conv_transpose(%x, %w1, %b1) {strides = [2, 2], pads = [1, 1, 1, 1], dilations = [1, 1], group = 1}
  %r = relu(%a)
  %y = conv_transpose(%r, %w2) {strides = [3, 2], pads = [2, 1, 0, 2], output_padding = [2, 1], dilations = [1, 1], group = 2}
  %z = conv_transpose(%y, %w3, %b3) {strides = [2, 2], pads = [1, 1, 1, 1], output_padding = [1, 1], dilations = [1, 1], group = 1}
  return %z
}
)";

std::unique_ptr<Graph> decoder(const char *text = kDecoder) {
  std::unique_ptr<Graph> g = parseGraph(text, "decoder.mcir");
  graph_checks::fillWeights(*g, 7);
  // Running variances must be positive.
  for (Value *w : g->weights())
    if (w->name() == "v") {
      auto t = std::make_shared<Tensor>(w->type());
      for (int64_t i = 0; i < t->numel(); ++i)
        t->setDouble(i, 0.5 + 0.03 * static_cast<double>(i));
      w->setData(t);
    }
  return g;
}

int count(const Graph &g, Op op) {
  int n = 0;
  for (const Node *node : g.nodes())
    n += node->op() == op;
  return n;
}

// Runs the default graph passes on a copy of `original`, checks the conv_transposes left and the
// convs made, and the rewritten graph and its compiled host and GPU-planned folders against the
// interpreter on the original.
void checkRewrite(const Graph &original, int convTransposes, int convs) {
  std::vector<Tensor> in = randomInputs(original, 3);
  std::vector<Tensor> want = interpret(original, in);
  std::unique_ptr<Graph> rewrittenGraph = original.clone();
  Graph &g = *rewrittenGraph;
  PassContext ctx;
  runGraphPasses(g, ctx, PassManagerOptions{});
  CHECK(count(g, Op::ConvTranspose) == convTransposes);
  CHECK(count(g, Op::BatchNorm) == 0);
  CHECK(count(g, Op::Conv) == convs);
  std::vector<Tensor> rewritten = interpret(g, in);
  graph_checks::checkClose(rewritten.at(0), want.at(0));
  for (std::string plan : {"cpu", "cuda:sm_90"}) {
    CAPTURE(plan);
    CompileOptions opts;
    if (plan != "cpu")
      opts.planFor = Target::parseSpec(plan);
    std::vector<Tensor> got = compile_checks::compileRun(g, opts, in, "aicf_conv_transpose_");
    graph_checks::checkClose(got.at(0), want.at(0));
  }
}

} // namespace

TEST_CASE("conv_transpose: overlapping ones whose kernel is a multiple of the stride become "
          "phase convs; all match") {
  std::unique_ptr<Graph> g = decoder(kOverlapping);
  checkRewrite(*g, 0, 6); // one conv each for the first two, four phase convs for the 3x3 one
}

// 3 x 3 / stride 2 phase convs aligned to the crop (pads 1: each output phase is the other input
// phase, one of them shifted by a row), an odd output length (cropped at the end only), and
// pads 2, where an aligned phase would need negative padding (the uncropped phases, cropped).
TEST_CASE("conv_transpose: per-phase convs aligned to the crop, or cropped after; all match") {
  std::unique_ptr<Graph> g = decoder(R"(graph @aligned(%x: f32[1,16,5,6]) -> (%z: f32[1,8,16,21]) {
  %w1 = weight f32[16,16,3,3]
  %b1 = weight f32[16]
  %w2 = weight f32[16,8,3,3]
  %a = conv_transpose(%x, %w1, %b1) {strides = [2, 2], pads = [1, 1, 1, 1], output_padding = [0, 1], dilations = [1, 1], group = 1}
  %r = relu(%a)
  %z = conv_transpose(%r, %w2) {strides = [2, 2], pads = [2, 2, 2, 2], output_padding = [1, 0], dilations = [1, 1], group = 1}
  return %z
}
)");
  checkRewrite(*g, 0, 8);
  std::unique_ptr<Graph> r = g->clone();
  PassContext ctx;
  runGraphPasses(*r, ctx, PassManagerOptions{});
  int crops = 0, uncroppedStarts = 0;
  for (const Node *n : r->nodes())
    if (n->op() == Op::Slice) {
      ++crops;
      uncroppedStarts += n->ints("starts") == std::vector<int64_t>{2, 2};
    }
  CHECK(crops == 2);           // the first: its odd rows' end; the second: the uncropped form's
  CHECK(uncroppedStarts == 1); // only the second crops at its pads
}

// 4 x 4 / stride 2 / pads 1 with 16 output channels (whole blocks): four aligned phase convs of
// 2 x 2 taps and no crop, where one conv of all phases computes (len + 1)^2 outputs a phase; with
// 6 output channels (kOverlapping above) it stays one conv.
TEST_CASE("conv_transpose: a uniform one of whole channel blocks runs as aligned phase convs") {
  std::unique_ptr<Graph> g = decoder(R"(graph @dcgan(%x: f32[1,32,4,5]) -> (%y: f32[1,16,8,10]) {
  %w = weight f32[32,16,4,4]
  %b = weight f32[16]
  %y = conv_transpose(%x, %w, %b) {strides = [2, 2], pads = [1, 1, 1, 1], dilations = [1, 1], group = 1}
  return %y
}
)");
  checkRewrite(*g, 0, 4);
  std::unique_ptr<Graph> r = g->clone();
  PassContext ctx;
  runGraphPasses(*r, ctx, PassManagerOptions{});
  CHECK(count(*r, Op::Slice) == 0);
}

TEST_CASE("conv_transpose: a dilated one keeps its direct form and matches") {
  std::unique_ptr<Graph> g = decoder(R"(graph @dilated(%x: f32[1,3,4,5]) -> (%y: f32[1,2,11,13]) {
  %w = weight f32[3,2,3,3]
  %y = conv_transpose(%x, %w) {strides = [2, 2], pads = [0, 0, 0, 0], dilations = [2, 2], group = 1}
  return %y
}
)");
  checkRewrite(*g, 1, 0);
}

TEST_CASE("conv_transpose: tiling ones become 1x1 convs, a 3x3 / stride 2 one phase convs; all "
          "match") {
  // The batch_norm folds into the first one; the 3x3 / stride 2 one is four phase convs.
  std::unique_ptr<Graph> g = decoder();
  checkRewrite(*g, 0, 6);
}
