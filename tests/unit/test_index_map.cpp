// Index maps (ir/index_map.h): the simplifier on the expressions reshape chains produce, and every
// layout op's pieces and scatter maps against the interpreter: on an input holding its own flat
// index, the result at each index i must be the input at the piece's map(i) (and the scatter map
// must send each input element to where the interpreter put it).
#include "interp/interpreter.h"
#include "ir/index_map.h"
#include "ir/parser.h"

#include <doctest/doctest.h>

#include <numeric>

using namespace aicf;

namespace {

std::vector<int64_t> unflatIdx(int64_t flat, const std::vector<int64_t> &shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}

int64_t flatIdx(const std::vector<int64_t> &idx, const std::vector<int64_t> &shape) {
  int64_t f = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    f = f * shape[d] + idx[d];
  return f;
}

// Interprets the one-op graph on inputs holding (operand number) * 1e6 + flat index and checks
// the layout node's maps against it.
void checkLayout(const std::string &text) {
  std::unique_ptr<Graph> g = parseGraph(text, "layout.mcir");
  const Node *n = nullptr;
  for (const Node *m : g->nodes())
    if (isLayoutOp(*m))
      n = m;
  REQUIRE(n);
  std::vector<Tensor> inputs;
  for (size_t k = 0; k < g->inputs().size(); ++k) {
    Tensor t(g->inputs()[k]->type());
    for (int64_t i = 0; i < t.numel(); ++i)
      t.setDouble(i, double(k) * 1e6 + double(i));
    inputs.push_back(std::move(t));
  }
  std::vector<Tensor> outs = interpret(*g, inputs);
  for (size_t r = 0; r < n->results().size(); ++r) {
    const std::vector<int64_t> &shape = n->result(r)->type().shape;
    std::vector<LayoutPiece> pieces = layoutPieces(*n, static_cast<int>(r));
    for (int64_t i = 0; i < outs[r].numel(); ++i) {
      std::vector<int64_t> idx = unflatIdx(i, shape);
      const LayoutPiece *p = nullptr;
      for (const LayoutPiece &c : pieces)
        if (c.guardAxis < 0 || (idx[c.guardAxis] >= c.lo && idx[c.guardAxis] < c.hi))
          p = &c;
      REQUIRE(p);
      std::vector<int64_t> src = p->map.apply(idx);
      double want = double(p->operand) * 1e6 + double(flatIdx(src, p->map.range));
      REQUIRE_MESSAGE(outs[r].getDouble(i) == want, n->name(), " result ", r, " at flat ", i,
                      " through ", p->map.str());
    }
  }
  for (size_t k = 0; k < n->numOperands(); ++k) {
    std::optional<IndexMap> s = scatterMap(*n, static_cast<int>(k));
    if (!s)
      continue;
    for (int64_t j = 0; j < inputs[k].numel(); ++j) {
      int64_t to = flatIdx(s->apply(unflatIdx(j, s->domain)), s->range);
      REQUIRE(outs[0].getDouble(to) == double(k) * 1e6 + double(j));
    }
  }
}

} // namespace

TEST_CASE("index map: simplification cancels reshape arithmetic") {
  std::vector<int64_t> dom = {2, 64, 4, 64};
  // [b, s, h, d] -> flat of [2, 64, 256] -> [128, 256] row: (b * 64 + s), col: h * 64 + d.
  IndexExpr flat = ixAdd(ixAdd(ixMul(ixDim(0), 16384), ixMul(ixDim(1), 256)),
                         ixAdd(ixMul(ixDim(2), 64), ixDim(3)));
  CHECK(str(simplify(ixFloorDiv(flat, 256), dom)) == "d0 * 64 + d1");
  CHECK(str(simplify(ixMod(flat, 256), dom)) == "d2 * 64 + d3");
  CHECK(str(simplify(ixMod(ixFloorDiv(flat, 64), 4), dom)) == "d2");
  CHECK(str(simplify(ixFloorDiv(ixFloorDiv(flat, 64), 4), dom)) == "d0 * 64 + d1");
  // What the ranges cannot cancel stays.
  std::vector<int64_t> dom2 = {6, 10};
  CHECK(str(simplify(ixFloorDiv(ixAdd(ixMul(ixDim(0), 10), ixDim(1)), 4), dom2)) ==
        "((d0 * 10 + d1) floordiv 4)");
  CHECK(str(simplify(ixMod(ixAdd(ixMul(ixDim(0), 12), ixMul(ixDim(1), 2)), 8), dom2)) ==
        "((d0 * 6 + d1) mod 4) * 2");
  CHECK(rangeOf(ixAdd(ixMul(ixDim(0), -3), ixConst(20)), dom2) ==
        std::make_pair<int64_t, int64_t>(5, 20));
  // Every simplification keeps the value, over the whole domain.
  std::vector<IndexExpr> cases = {
      ixMod(ixAdd(ixMul(ixDim(0), 12), ixMul(ixDim(1), 2)), 8),
      ixFloorDiv(ixAdd(ixMul(ixDim(0), 10), ixDim(1)), 4),
      ixMod(ixMod(ixAdd(ixMul(ixDim(0), 7), ixDim(1)), 12), 4),
      ixFloorDiv(ixFloorDiv(ixAdd(ixDim(0), ixMul(ixDim(1), 6)), 3), 2)};
  for (const IndexExpr &e : cases) {
    IndexExpr s = simplify(e, dom2);
    for (int64_t a = 0; a < 6; ++a)
      for (int64_t b = 0; b < 10; ++b)
        REQUIRE_MESSAGE(evaluate(e, {a, b}) == evaluate(s, {a, b}), str(e), " vs ", str(s));
  }
}

TEST_CASE("index map: composing a head split and a transpose") {
  // The GPT-2 query path: [b, h, s, d] -> transpose -> [b, s, h, d] -> reshape [b, s, 256]
  // -> split piece 0 of [b, s, 768] -> reshape [128, 768].
  std::unique_ptr<Graph> g = parseGraph(R"(graph @q(%qkv: f32[128,768]) -> (%q: f32[2,4,64,64]) {
  %a = reshape(%qkv) {shape = [2, 64, 768]} : f32[2,64,768]
  %q0, %k0, %v0 = split(%a) {axis = 2, sizes = [256, 256, 256]} : f32[2,64,256], f32[2,64,256], f32[2,64,256]
  %b = reshape(%k0) {shape = [2, 64, 4, 64]} : f32[2,64,4,64]
  %q = transpose(%b) {perm = [0, 2, 1, 3]} : f32[2,4,64,64]
  return %q
}
)",
                                        "q.mcir");
  const auto &nodes = g->nodes();
  IndexMap m = layoutPieces(*nodes[3]).front().map;
  m = compose(m, layoutPieces(*nodes[2]).front().map);
  m = compose(m, layoutPieces(*nodes[1], 1).front().map);
  m = compose(m, layoutPieces(*nodes[0]).front().map);
  CHECK(m.str() == "(d0, d1, d2, d3) -> (d0 * 64 + d2, d1 * 64 + d3 + 256)");
  CHECK(m.strideOf(3)->step == 1);
  CHECK(m.strideOf(3)->run == 64);
  CHECK(m.strideOf(2)->step == 768);
  CHECK(m.strideOf(1)->step == 64);
  // The inverse direction (attention's output read as [128, 256] by the projection): runs of
  // 64 contiguous elements along d1.
  IndexMap back;
  back.domain = {128, 256};
  back.range = {2, 4, 64, 64};
  back.exprs = {ixFloorDiv(ixAdd(ixMul(ixDim(0), 256), ixDim(1)), 16384), ixFloorDiv(ixDim(1), 64),
                ixMod(ixDim(0), 64), ixMod(ixDim(1), 64)};
  back = compose(IndexMap::identity({128, 256}), back);
  CHECK(back.str() == "(d0, d1) -> ((d0 floordiv 64), (d1 floordiv 64), (d0 mod 64), (d1 mod 64))");
  CHECK(back.strideOf(1)->step == 1);
  CHECK(back.strideOf(1)->run == 64);
  CHECK(back.strideOf(0)->step == 64);
}

TEST_CASE("index map: every layout op's maps agree with the interpreter") {
  checkLayout(R"(graph @t(%x: f32[2,3,4]) -> (%y: f32[4,2,3]) {
  %y = transpose(%x) {perm = [2, 0, 1]} : f32[4,2,3]
  return %y
})");
  checkLayout(R"(graph @r(%x: f32[2,3,4]) -> (%y: f32[4,6]) {
  %y = reshape(%x) {shape = [4, 6]} : f32[4,6]
  return %y
})");
  checkLayout(R"(graph @s(%x: f32[2,7,3]) -> (%a: f32[2,2,3], %b: f32[2,5,3]) {
  %a, %b = split(%x) {axis = 1, sizes = [2, 5]} : f32[2,2,3], f32[2,5,3]
  return %a, %b
})");
  checkLayout(R"(graph @sl(%x: f32[5,9]) -> (%y: f32[2,3]) {
  %y = slice(%x) {axes = [0, 1], ends = [5, 0], starts = [1, 8], steps = [2, -3]} : f32[2,3]
  return %y
})");
  checkLayout(R"(graph @e(%x: f32[3,1]) -> (%y: f32[2,3,4]) {
  %y = expand(%x) {shape = [2, 3, 4]} : f32[2,3,4]
  return %y
})");
  checkLayout(R"(graph @c(%a: f32[2,3], %b: f32[2,1], %c: f32[2,4]) -> (%y: f32[2,8]) {
  %y = concat(%a, %b, %c) {axis = -1} : f32[2,8]
  return %y
})");
}
