// prune-padding-taps (passes/prune_padding_taps.cpp): convs whose end taps read only padding,
// compiled and run before and after the pass: DeepLabV3's ASPP branches on a 14x14 map (channel
// counts multiples of 16, so host plans run them channel-blocked; dilation 24 and 36 become 1x1,
// dilation 12 keeps its 3x3; a depthwise one too), a grouped stride-2 conv with TF's SAME_UPPER
// pads on a 2-row map (its last row of taps goes), and the ASPP through the default pipeline with
// its batch norms and ReLUs. Each compiled folder (host, and GPU-planned for the ASPP) matches the
// interpreter on the original graph, and the folders before and after the pass match each other.
#include "driver/compile.h"
#include "driver/pipeline.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "passes/pass.h"
#include "target/target.h"
#include "tests/unit/compile_checks.h"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>

using namespace aicf;

namespace {

const char *kAspp = R"(graph @aspp(%x: f32[1,32,14,14]) -> (%y: f32[1,128,14,14]) {
  %w12 = weight f32[32,32,3,3]
  %w24 = weight f32[32,32,3,3]
  %b24 = weight f32[32]
  %w36 = weight f32[32,32,3,3]
  %wdw = weight f32[32,1,3,3]
  %a = conv(%x, %w12) {strides = [1, 1], pads = [12, 12, 12, 12], dilations = [12, 12], group = 1}
  %b = conv(%x, %w24, %b24) {strides = [1, 1], pads = [24, 24, 24, 24], dilations = [24, 24], group = 1}
  %c = conv(%x, %w36) {strides = [1, 1], pads = [36, 36, 36, 36], dilations = [36, 36], group = 1}
  %d = conv(%x, %wdw) {strides = [1, 1], pads = [36, 36, 36, 36], dilations = [36, 36], group = 32}
  %y = concat(%a, %b, %c, %d) {axis = 1}
  return %y
}
)";

// TF's SAME_UPPER for a 3x3 / stride 2 conv: pads 0 before, 1 after on the 2 rows (the one
// output row reads rows 0, 1 and the padding), 1 / 1 on the 5 columns; two groups of 16.
const char *kStride2 = R"(graph @stride2(%x: f32[1,32,2,5]) -> (%y: f32[1,32,1,3]) {
  %w = weight f32[32,16,3,3]
  %b = weight f32[32]
  %y = conv(%x, %w, %b) {strides = [2, 2], pads = [0, 1, 1, 1], dilations = [1, 1], group = 2}
  return %y
}
)";

// The ASPP branches as exported: conv -> batch_norm -> relu each, then a 1x1 projection.
const char *kAsppBn = R"(graph @aspp_bn(%x: f32[1,16,14,14]) -> (%y: f32[1,32,14,14]) {
  %w12 = weight f32[16,16,3,3]
  %w36 = weight f32[16,16,3,3]
  %s = weight f32[16]
  %t = weight f32[16]
  %m = weight f32[16]
  %v = weight f32[16]
  %wp = weight f32[32,32,1,1]
  %a = conv(%x, %w12) {strides = [1, 1], pads = [12, 12, 12, 12], dilations = [12, 12], group = 1}
  %an = batch_norm(%a, %s, %t, %m, %v) {epsilon = 1e-05}
  %ar = relu(%an)
  %c = conv(%x, %w36) {strides = [1, 1], pads = [36, 36, 36, 36], dilations = [36, 36], group = 1}
  %cn = batch_norm(%c, %s, %t, %m, %v) {epsilon = 1e-05}
  %cr = relu(%cn)
  %k = concat(%ar, %cr) {axis = 1}
  %y = conv(%k, %wp) {strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1], group = 1}
  return %y
}
)";

std::unique_ptr<Graph> load(const char *text, unsigned seed) {
  std::unique_ptr<Graph> g = parseGraph(text, "prune_padding_taps.mcir");
  graph_checks::fillWeights(*g, seed);
  for (Value *w : g->weights())
    if (w->name() == "v") { // running variances must be positive
      auto t = std::make_shared<Tensor>(w->type());
      for (int64_t i = 0; i < t->numel(); ++i)
        t->setDouble(i, 0.5 + 0.03 * static_cast<double>(i));
      w->setData(t);
    }
  return g;
}

bool runPrune(Graph &g) {
  PassManager pm;
  pm.add(createPass("prune-padding-taps"));
  PassContext ctx;
  return pm.run(g, ctx);
}

// The spatial kernel shape of each conv, in graph order ("3x3", "1x1", ...).
std::vector<std::string> kernels(const Graph &g) {
  std::vector<std::string> k;
  for (const Node *n : g.nodes())
    if (n->op() == Op::Conv) {
      const std::vector<int64_t> &s = n->operand(1)->type().shape;
      k.push_back(cat(s[2], "x", s[3]));
    }
  return k;
}

// Compiles and runs the graph before and after the pass (for each plan), each against the
// interpreter on the original graph, and the two against each other.
void checkBeforeAfter(const Graph &original, const Graph &pruned,
                      const std::vector<std::string> &plans) {
  std::vector<Tensor> in = randomInputs(original, 3);
  std::vector<Tensor> want = interpret(original, in);
  graph_checks::checkClose(interpret(pruned, in).at(0), want.at(0));
  for (const std::string &plan : plans) {
    CAPTURE(plan);
    CompileOptions opts;
    if (plan != "cpu")
      opts.planFor = Target::parseSpec(plan);
    std::vector<Tensor> before = compile_checks::compileRun(original, opts, in, "aicf_taps_");
    std::vector<Tensor> after = compile_checks::compileRun(pruned, opts, in, "aicf_taps_");
    graph_checks::checkClose(before.at(0), want.at(0));
    graph_checks::checkClose(after.at(0), want.at(0));
    graph_checks::checkClose(after.at(0), before.at(0));
  }
}

} // namespace

TEST_CASE("prune-padding-taps: ASPP's dilation 24 and 36 become 1x1, dilation 12 stays; all "
          "match") {
  std::unique_ptr<Graph> original = load(kAspp, 11);
  std::unique_ptr<Graph> pruned = original->clone();
  CHECK(runPrune(*pruned));
  CHECK(kernels(*pruned) == std::vector<std::string>{"3x3", "1x1", "1x1", "1x1"});
  for (const Node *n : pruned->nodes())
    if (n->op() == Op::Conv && n->operand(1)->type().shape[2] == 1) {
      CHECK(n->ints("pads") == std::vector<int64_t>{0, 0, 0, 0});
      CHECK(n->ints("dilations") == std::vector<int64_t>{1, 1});
    }
  checkBeforeAfter(*original, *pruned, {"cpu", "cuda:sm_90"});
}

TEST_CASE("prune-padding-taps: a grouped stride-2 conv loses its last row of taps; matches") {
  std::unique_ptr<Graph> original = load(kStride2, 12);
  std::unique_ptr<Graph> pruned = original->clone();
  CHECK(runPrune(*pruned));
  CHECK(kernels(*pruned) == std::vector<std::string>{"2x3"});
  const Node *conv = pruned->nodes().at(0);
  CHECK(conv->ints("pads") == std::vector<int64_t>{0, 1, 0, 1});
  CHECK(conv->i("group") == 2);
  checkBeforeAfter(*original, *pruned, {"cpu"});
}

TEST_CASE("prune-padding-taps: a non-finite weight among the dropped taps keeps the conv") {
  std::unique_ptr<Graph> g = load(kAspp, 13);
  for (Value *w : g->weights())
    if (w->name() == "w36") {
      auto t = std::make_shared<Tensor>(*w->data());
      t->setDouble(0, std::numeric_limits<double>::quiet_NaN()); // tap (0, 0) of row 0: dropped
      w->setData(t);
    }
  CHECK(runPrune(*g));
  CHECK(kernels(*g) == std::vector<std::string>{"3x3", "1x1", "3x3", "1x1"});
}

TEST_CASE("prune-padding-taps: the default pipeline prunes before folding the batch norms") {
  std::unique_ptr<Graph> original = load(kAsppBn, 14);
  std::vector<Tensor> in = randomInputs(*original, 5);
  std::vector<Tensor> want = interpret(*original, in);
  std::unique_ptr<Graph> g = original->clone();
  PassContext ctx;
  runGraphPasses(*g, ctx, PassManagerOptions{});
  CHECK(kernels(*g) == std::vector<std::string>{"3x3", "1x1", "1x1"});
  CompileOptions opts;
  std::vector<Tensor> got = compile_checks::compileRun(*g, opts, in, "aicf_taps_");
  graph_checks::checkClose(got.at(0), want.at(0));
}
