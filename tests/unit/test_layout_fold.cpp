// Layout folding in the partition (lower/fusion.h, rule 0; issue 17): which layout ops fold into
// their readers, the groups that hold them, the maps recorded with each decision, the cases that
// must materialise, and the cost model's fold-or-materialise price (plan/cost_model.h).
#include "compile_checks.h"
#include "graph_checks.h"
#include "ir/parser.h"
#include "lower/fusion.h"
#include "lower/lower.h"
#include "lower/recipes.h"
#include "passes/pass.h"
#include "plan/cost_model.h"
#include "target/target.h"

#include <map>

#include <doctest/doctest.h>

#include <algorithm>

using namespace aicf;
using aicf::graph_checks::names;

namespace {

const LayoutDecision &decisionFor(const Partition &p, const std::string &result) {
  for (const LayoutDecision &d : p.layout)
    if (d.node->result(0)->name() == result)
      return d;
  FAIL("no layout decision for %" << result);
  throw 0;
}

const char *kHeads = R"(graph @h(%qkv: f32[16,48], %x: f32[2,8,16]) -> (%y: f32[2,8,16]) {
  %a = reshape(%qkv) {shape = [2, 8, 48]} : f32[2,8,48]
  %q0, %k0, %v0 = split(%a) {axis = 2, sizes = [16, 16, 16]} : f32[2,8,16], f32[2,8,16], f32[2,8,16]
  %q1 = reshape(%q0) {shape = [2, 8, 2, 8]} : f32[2,8,2,8]
  %k1 = reshape(%k0) {shape = [2, 8, 2, 8]} : f32[2,8,2,8]
  %v1 = reshape(%v0) {shape = [2, 8, 2, 8]} : f32[2,8,2,8]
  %q = transpose(%q1) {perm = [0, 2, 1, 3]} : f32[2,2,8,8]
  %k = transpose(%k1) {perm = [0, 2, 1, 3]} : f32[2,2,8,8]
  %v = transpose(%v1) {perm = [0, 2, 1, 3]} : f32[2,2,8,8]
  %o = attention(%q, %k, %v) {causal = 1, scale = 0.35} : f32[2,2,8,8]
  %ot = transpose(%o) {perm = [0, 2, 1, 3]} : f32[2,8,2,8]
  %or = reshape(%ot) {shape = [2, 8, 16]} : f32[2,8,16]
  %y = add(%or, %x) : f32[2,8,16]
  return %y
}
)";

} // namespace

TEST_CASE("layout folding: attention reads q, k and v where the projection left them") {
  std::unique_ptr<Graph> g = parseGraph(kHeads, "heads.mcir");
  Partition p = partitionGraph(*g);
  REQUIRE(p.groups.size() == 2);
  // The attention group holds the split, the head reshapes and the transposes; it reads the
  // qkv buffer (through the reshape view %a) and nothing else.
  CHECK(p.groups[0].kind == "attention");
  CHECK(names(p.groups[0].nodes) == "q0,q1,k1,v1,q,k,v,o");
  CHECK(names(p.groups[0].inputs) == "a");
  CHECK(names(p.groups[0].outputs) == "o");
  // Attention stores its result in the output transpose's order (the producer side); the add
  // reads it plainly through the reshape view.
  REQUIRE(p.groups[0].storeThrough.size() == 1);
  CHECK(p.groups[0].storeThrough[0].value->name() == "o");
  CHECK(p.groups[0].storeThrough[0].into->name() == "ot");
  CHECK(p.groups[0].storeThrough[0].map.str() == "(d0, d1, d2, d3) -> (d0, d2, d1, d3)");
  CHECK(p.groups[1].kind == "fused_elementwise");
  CHECK(names(p.groups[1].nodes) == "y");
  CHECK(names(p.groups[1].inputs) == "or,x");
  CHECK(p.views.size() == 2); // %a (the graph input) and %or (the stored transpose)
  // Every decision is recorded with its composed maps.
  const LayoutDecision &split = decisionFor(p, "q0");
  CHECK(split.folded);
  CHECK(split.reason == "folded (no cost model)");
  CHECK(split.reads ==
        std::vector<std::string>{
            "attention operand 0 %q: (d0, d1, d2, d3) -> (d0, d2, d1 * 8 + d3)",
            "attention operand 1 %k: (d0, d1, d2, d3) -> (d0, d2, d1 * 8 + d3 + 16)",
            "attention operand 2 %v: (d0, d1, d2, d3) -> (d0, d2, d1 * 8 + d3 + 32)"});
  const LayoutDecision &ot = decisionFor(p, "ot");
  CHECK(ot.stored);
  CHECK_FALSE(ot.folded);
  CHECK(ot.reason ==
        "its producer stores in the transposed order, contiguous along the innermost dim");
  CHECK(ot.stores ==
        std::vector<std::string>{"attention %o: (d0, d1, d2, d3) -> (d0, d2, d1, d3)"});
  CHECK(ot.reads.empty());
  CHECK(recipeFor(p.groups[0]) == "streaming_attention");
}

TEST_CASE("layout folding: a transposed graph output") {
  // %y transposes a graph input: no kernel computes %x, so none can store it transposed, and
  // the transpose is a kernel. %u transposes an exp: the exp writes the caller's buffer
  // transposed, a strided store that costs less than a kernel.
  std::unique_ptr<Graph> g = parseGraph(
      R"(graph @o(%x: f32[4,6], %w: f32[4,6]) -> (%y: f32[6,4], %z: f32[6,4], %u: f32[6,4]) {
  %y = transpose(%x) {perm = [1, 0]} : f32[6,4]
  %z = relu(%y) : f32[6,4]
  %e = exp(%w) : f32[4,6]
  %u = transpose(%e) {perm = [1, 0]} : f32[6,4]
  return %y, %z, %u
}
)",
      "out.mcir");
  Partition p = partitionGraph(*g);
  const LayoutDecision &d = decisionFor(p, "y");
  CHECK_FALSE(d.folded);
  CHECK_FALSE(d.stored);
  CHECK(d.reason == "its result is a graph output");
  REQUIRE(p.groups.size() == 2);
  CHECK(p.groups[0].kind == "transpose");
  CHECK(names(p.groups[0].nodes) == "y,z"); // the relu is its epilogue
  const LayoutDecision &s = decisionFor(p, "u");
  CHECK(s.stored);
  CHECK(s.reason == "its producer stores in the transposed order (its result is a graph output)");
  const KernelGroup &exp = p.groups[1];
  CHECK(names(exp.nodes) == "e");
  CHECK(names(exp.outputs) == "e");
  REQUIRE(exp.storeThrough.size() == 1);
  CHECK(exp.storeThrough[0].into->name() == "u");
  CHECK(exp.storeThrough[0].map.str() == "(d0, d1) -> (d1, d0)");
}

TEST_CASE("layout folding: a producer stores past a slice and a transpose, the kept window only") {
  std::unique_ptr<Graph> g = parseGraph(
      R"(graph @w(%x: f32[4,16]) -> (%y: f32[5,4]) {
  %e = exp(%x) : f32[4,16]
  %s = slice(%e) {starts = [2], ends = [7], axes = [1], steps = [1]} : f32[4,5]
  %y = transpose(%s) {perm = [1, 0]} : f32[5,4]
  return %y
}
)",
      "window.mcir");
  Partition p = partitionGraph(*g);
  REQUIRE(p.groups.size() == 1);
  REQUIRE(p.groups[0].storeThrough.size() == 1);
  const KernelGroup::StoreThrough &st = p.groups[0].storeThrough[0];
  CHECK(st.value->name() == "e");
  CHECK(st.into->name() == "y");
  CHECK(st.map.str() == "(d0, d1) -> (d1 - 2, d0)");
  REQUIRE(st.keep.size() == 1);
  CHECK(str(st.keep[0].e) == "d1");
  CHECK(st.keep[0].lo == 2);
  CHECK(st.keep[0].hi == 7);
  const LayoutDecision &s = decisionFor(p, "s");
  CHECK(s.stored);
  CHECK(s.reason == "its producer stores past it, into %y");
  const LayoutDecision &y = decisionFor(p, "y");
  CHECK(y.stored);
  CHECK(y.stores == std::vector<std::string>{"exp %e: (d0, d1) -> (d1 - 2, d0) where 2 <= d1 < 7"});
  // Compiled for the host, only the window lands.
  std::vector<Tensor> in = randomInputs(*g, 3);
  compile_checks::compileRunCheck(*g, CompileOptions{}, in, "aicf_layout_window_");
}

TEST_CASE("layout folding: a concat's producers write their slices of one buffer") {
  // Four writers: an exp, a matmul (through a reshape), and two values of one elementwise
  // group; the layer norm reads the concat after all of them.
  std::unique_ptr<Graph> g = parseGraph(
      R"(graph @c(%a: f32[4,6], %b: f32[4,8], %w: f32[8,10], %c: f32[4,5], %g: f32[26], %be: f32[26]) -> (%y: f32[4,26]) {
  %ea = exp(%a) : f32[4,6]
  %mb = matmul(%b, %w) : f32[4,10]
  %mr = reshape(%mb) {shape = [4, 10]} : f32[4,10]
  %tc = tanh(%c) : f32[4,5]
  %nc = neg(%tc) : f32[4,5]
  %sc = sigmoid(%tc) : f32[4,5]
  %cat = concat(%ea, %mr, %nc, %sc) {axis = 1} : f32[4,26]
  %y = layer_norm(%cat, %g, %be) {axis = -1, epsilon = 1e-05} : f32[4,26]
  return %y
}
)",
      "cat.mcir");
  Partition p = partitionGraph(*g);
  const LayoutDecision &d = decisionFor(p, "cat");
  CHECK(d.stored);
  CHECK(d.reason == "its producers write their slices of one buffer");
  CHECK(d.stores == std::vector<std::string>{"exp %ea: (d0, d1) -> (d0, d1)",
                                             "matmul %mb: (d0, d1) -> (d0, d1 + 6)",
                                             "neg %nc: (d0, d1) -> (d0, d1 + 16)",
                                             "sigmoid %sc: (d0, d1) -> (d0, d1 + 21)"});
  REQUIRE(p.groups.size() == 4);
  CHECK(names(p.groups[2].nodes) == "tc,nc,sc");
  CHECK(names(p.groups[2].outputs) == "nc,sc");
  REQUIRE(p.groups[2].storeThrough.size() == 2);
  CHECK(p.groups[2].storeThrough[1].map.str() == "(d0, d1) -> (d0, d1 + 21)");
  CHECK(p.groups[3].kind == "layer_norm");
  CHECK(names(p.groups[3].inputs) == "cat,g,be");
  // The two params of the elementwise kernel are the concat's buffer.
  std::map<const Value *, kir::BufferP> byValue;
  std::vector<kir::BufferP> params = groupParams(p.groups[2], byValue);
  REQUIRE(params.size() == 3);
  CHECK(params[1]->shape == std::vector<int64_t>{4, 26});
  CHECK(params[2]->shape == std::vector<int64_t>{4, 26});
}

TEST_CASE("layout folding: a concat with an operand no kernel computes folds into its readers") {
  // %a is a graph input and %e is read twice: neither can be stored into the concat.
  std::unique_ptr<Graph> g =
      parseGraph(R"(graph @c(%a: f32[4,6], %b: f32[4,6]) -> (%y: f32[4,12], %z: f32[4,6]) {
  %e = exp(%b) : f32[4,6]
  %cat = concat(%a, %e) {axis = 1} : f32[4,12]
  %y = relu(%cat) : f32[4,12]
  %z = neg(%e) : f32[4,6]
  return %y, %z
}
)",
                 "cat.mcir");
  Partition p = partitionGraph(*g);
  const LayoutDecision &d = decisionFor(p, "cat");
  CHECK_FALSE(d.stored);
  CHECK(d.folded);
  for (const KernelGroup &k : p.groups)
    CHECK(k.storeThrough.empty());
}

TEST_CASE("layout folding: a reader reading its own group's values through a map stays apart") {
  // add(%m, %u) reads %m directly and, through two transposes, at other indices: it cannot be
  // the reduction's epilogue; it is a pointwise group reading %m through the folded maps.
  std::unique_ptr<Graph> g = parseGraph(R"(graph @t(%x: f32[4,8]) -> (%y: f32[4,1]) {
  %m = reduce_max(%x) {axes = [1], keepdims = 1} : f32[4,1]
  %t = transpose(%m) {perm = [1, 0]} : f32[1,4]
  %u = transpose(%t) {perm = [1, 0]} : f32[4,1]
  %y = add(%m, %u) : f32[4,1]
  return %y
}
)",
                                        "cyc.mcir");
  Partition p = partitionGraph(*g);
  REQUIRE(p.groups.size() == 2);
  CHECK(names(p.groups[0].nodes) == "m");
  CHECK(names(p.groups[1].nodes) == "t,u,y");
  CHECK(names(p.groups[1].inputs) == "m");
}

TEST_CASE("layout folding: the cost function can keep a layout op a kernel") {
  std::unique_ptr<Graph> g = parseGraph(kHeads, "heads.mcir");
  FusionOptions opts;
  int calls = 0;
  opts.layoutCost = [&](const LayoutRead &r) {
    ++calls;
    LayoutCost c;
    c.foldUs = r.layout->op() == Op::Split ? 10 : 0;
    c.materializeUs = 5;
    return c;
  };
  Partition p = partitionGraph(*g, opts);
  CHECK(calls == 7); // the split's three reads, one per transpose
  const LayoutDecision &split = decisionFor(p, "q0");
  CHECK_FALSE(split.folded);
  CHECK(split.foldUs == 30);
  CHECK(split.materializeUs == 5);
  CHECK(split.reason == "reading through the map costs more than a kernel");
  // The split is a kernel; the transposes still fold into attention, reading its results
  // through the head reshapes, which are plain views again.
  REQUIRE(p.groups.size() == 3);
  CHECK(p.groups[0].kind == "split");
  CHECK(p.groups[1].kind == "attention");
  CHECK(names(p.groups[1].inputs) == "q1,k1,v1");
}

TEST_CASE("layout folding: a packed weight's panel view folds whatever the cost function says") {
  // pack-weights leaves B as a transpose and reshape of the panels; materialised, they would be
  // unpacked on every run and the product would lose its micro-kernel.
  std::unique_ptr<Graph> g = parseGraph(R"(graph @p(%a: f32[8,64]) -> (%y: f32[8,64]) {
  %w = weight f32[64,64]
  %y = matmul(%a, %w) : f32[8,64]
  return %y
}
)",
                                        "p.mcir");
  graph_checks::fillWeights(*g, 3);
  PassManager pm;
  pm.add(createPass("pack-weights"));
  PassContext ctx;
  REQUIRE(pm.run(*g, ctx));
  FusionOptions opts;
  opts.layoutCost = [](const LayoutRead &) {
    LayoutCost c;
    c.foldUs = 100; // a cost function that would rather have a kernel
    c.materializeUs = 1;
    return c;
  };
  Partition p = partitionGraph(*g, opts);
  REQUIRE(p.layout.size() == 1);
  CHECK(p.layout[0].folded);
  CHECK(p.layout[0].reason ==
        "a packed weight's panel view, read in place by its products' micro-kernel");
  REQUIRE(p.groups.size() == 1);
  CHECK(p.groups[0].kind == "matmul");
}

TEST_CASE("layout folding: the cost model prices strides and re-reads") {
  Hardware hw = Target::parseSpec("cpu").loaded().hw;
  // K as attention reads it, [2, 64, 64] = x[s, d, h] transposed: d walks with stride 2, s
  // with stride 128; 8 query tiles re-read it.
  std::unique_ptr<Graph> g =
      parseGraph(R"(graph @k(%q: f32[2,512,64], %x: f32[64,64,2]) -> (%y: f32[2,512,64]) {
  %k = transpose(%x) {perm = [2, 0, 1]} : f32[2,64,64]
  %y = attention(%q, %k, %k) {causal = 0, scale = 0.125} : f32[2,512,64]
  return %y
}
)",
                 "k.mcir");
  const Node *t = g->nodes()[0], *att = g->nodes()[1];
  LayoutRead r{t, att, 1, layoutPieces(*t).front().map, 2 * 64 * 64 * 4};
  LayoutCost strided = layoutFoldCost(hw, r);
  CHECK(strided.foldUs > strided.materializeUs);
  // The same transpose read once by a flat reader costs less through the map.
  std::unique_ptr<Graph> g2 = parseGraph(R"(graph @k(%x: f32[64,64,2]) -> (%y: f32[2,64,64]) {
  %k = transpose(%x) {perm = [2, 0, 1]} : f32[2,64,64]
  %y = relu(%k) : f32[2,64,64]
  return %y
}
)",
                                         "k2.mcir");
  LayoutRead r2{g2->nodes()[0], g2->nodes()[1], 0, layoutPieces(*g2->nodes()[0]).front().map,
                2 * 64 * 64 * 4};
  LayoutCost once = layoutFoldCost(hw, r2);
  CHECK(once.foldUs < once.materializeUs);
  // A plain NCHW input read as blocks by a 7 x 7 depthwise blocked conv: each 16-lane vector is a
  // gather at the plane's stride, and the direct form loads it again at every one of the 49 taps,
  // so a reorder kernel costs less (a ConvNeXt block's input: 6.0 -> 0.07 + 0.63 ms). The same
  // conv reading a channels-last input's blocks reads 16 contiguous lanes: it folds.
  const char *kDepthwise =
      R"(graph @dw(%x: f32[1,32,14,14], %z: f32[1,14,14,32]) -> (%y: f32[1,2,14,14,16], %u: f32[1,2,14,14,16]) {
  %w = weight f32[2,7,7,16]
  %r = reshape(%x) {shape = [1, 2, 16, 14, 14]} : f32[1,2,16,14,14]
  %xb = transpose(%r) {perm = [0, 1, 3, 4, 2]} : f32[1,2,14,14,16]
  %y = blocked_conv(%xb, %w) {kernel_shape = [7, 7], strides = [1, 1], pads = [3, 3, 3, 3], dilations = [1, 1], depthwise = 1, blocked_input = 1, epilogue = []} : f32[1,2,14,14,16]
  %rz = reshape(%z) {shape = [1, 14, 14, 2, 16]} : f32[1,14,14,2,16]
  %zb = transpose(%rz) {perm = [0, 3, 1, 2, 4]} : f32[1,2,14,14,16]
  %u = blocked_conv(%zb, %w) {kernel_shape = [7, 7], strides = [1, 1], pads = [3, 3, 3, 3], dilations = [1, 1], depthwise = 1, blocked_input = 1, epilogue = []} : f32[1,2,14,14,16]
  return %y, %u
}
)";
  std::unique_ptr<Graph> g4 = parseGraph(kDepthwise, "dw.mcir");
  auto dwRead = [&](size_t transpose) {
    const Node *t = g4->nodes()[transpose];
    return layoutFoldCost(hw, LayoutRead{t, g4->nodes()[transpose + 1], 0,
                                         layoutPieces(*t).front().map, 32 * 14 * 14 * 4});
  };
  LayoutCost gathered = dwRead(1), contiguous = dwRead(4);
  CHECK(gathered.foldUs > gathered.materializeUs);
  CHECK(contiguous.foldUs < contiguous.materializeUs);
  // A head split read by attention is contiguous along the head dim; with 8-float heads each
  // run is half a cache line, which the reads waste, still far below a kernel.
  std::unique_ptr<Graph> g3 = parseGraph(kHeads, "heads.mcir");
  FusionOptions opts;
  opts.layoutCost = layoutCostFor(hw);
  Partition priced = partitionGraph(*g3, opts);
  CHECK(priced.layout.size() == 5);
  for (const LayoutDecision &d : priced.layout) {
    // The output transpose is attention's store order; the others fold into attention.
    bool out = d.node->result(0)->name() == "ot";
    CHECK(d.folded == !out);
    CHECK(d.stored == out);
    CHECK(d.foldUs > 0);
    CHECK(d.foldUs < d.materializeUs);
  }
}
