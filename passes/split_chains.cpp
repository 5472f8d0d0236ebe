// See split_chains.h.
#include "passes/split_chains.h"

#include "ir/graph.h"
#include "passes/contraction_parts.h"
#include "passes/explain.h"
#include "passes/passes.h"
#include "support/diagnostics.h"

#include <algorithm>

namespace aicf {

namespace {

// The split must beat the chain as it is by this much (a margin for the model's error).
constexpr double kMargin = 0.95;
// Hidden columns per slice, at least (one 32-float panel of the host micro-kernel).
constexpr int64_t kMinSlice = 32;

// [S, 1 x pad, rows, cols] sliced out of `b` (the node's B as [K, N]) along `alongRows` (W2:
// the hidden is its K) or along its columns (W1: the hidden is its N).
TensorPtr sliceB(const Node &n, int64_t S, int64_t pad, bool alongRows) {
  const Tensor &b = *n.operand(1)->data();
  int64_t K = contractionK(n), N = contractionN(n);
  int64_t rows = alongRows ? K / S : K, cols = alongRows ? N : N / S;
  std::vector<int64_t> out = {S};
  out.insert(out.end(), static_cast<size_t>(pad), 1);
  out.push_back(rows);
  out.push_back(cols);
  auto t = std::make_shared<Tensor>(TensorType(DType::F32, out));
  const float *src = b.data<float>();
  float *dst = t->data<float>();
  for (int64_t s = 0; s < S; ++s)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        dst[(s * rows + r) * cols + c] = alongRows ? contractionB(n, src, s * rows + r, c)
                                                   : contractionB(n, src, r, s * cols + c);
  return t;
}

// A constant operand along the hidden (last dim H) as [S, 1.., ..., HS] of rank `rank`: slice s
// holds its columns s HS .. (s + 1) HS.
TensorPtr sliceOperand(const Tensor &v, int64_t S, size_t rank) {
  std::vector<int64_t> shape = v.type().shape;
  int64_t H = shape.back(), HS = H / S, lead = v.numel() / H;
  shape.back() = HS;
  while (shape.size() + 1 < rank)
    shape.insert(shape.begin(), 1);
  shape.insert(shape.begin(), S);
  auto t = std::make_shared<Tensor>(TensorType(DType::F32, shape));
  const float *src = v.data<float>();
  float *dst = t->data<float>();
  for (int64_t s = 0; s < S; ++s)
    for (int64_t l = 0; l < lead; ++l)
      for (int64_t j = 0; j < HS; ++j)
        dst[(s * lead + l) * HS + j] = src[l * H + s * HS + j];
  return t;
}

int64_t hiddenOf(const Node &c1) {
  return c1.result()->type().shape.back();
}

} // namespace

const Node *splittableChain(const Graph &g, const Node &c2) {
  if (!plainContraction(c2) || !constantF32Weight(c2.operand(1)))
    return nullptr;
  const Value *h = c2.operand(0);
  const Node *c1 = h->def();
  if (!c1 || !plainContraction(*c1) || !constantF32Weight(c1->operand(1)) ||
      g.users(h).size() != 1 || std::count(c2.operands().begin(), c2.operands().end(), h) != 1 ||
      g.isOutput(h))
    return nullptr;
  int64_t H = hiddenOf(*c1);
  for (const ContractionStep &s : contractionSteps(*c1)) {
    if (!s.operand)
      continue;
    const auto &shape = s.operand->type().shape;
    bool broadcast = shape.empty() || shape.back() == 1;
    if (!broadcast && !(constantF32Weight(s.operand) && shape.back() == H))
      return nullptr;
  }
  return c1;
}

std::vector<int> chainSplitCounts(const Graph &g, const Node &c2) {
  const Node *c1 = splittableChain(g, c2);
  if (!c1)
    return {};
  int64_t H = hiddenOf(*c1);
  std::vector<int> out;
  for (int s : {2, 4, 8, 16, 32})
    if (H % s == 0 && H / s >= kMinSlice)
      out.push_back(s);
  return out;
}

Value *emitChainSplit(Graph &g, const Node &c1, const Node &c2, int splits, Node *before) {
  const int64_t S = splits;
  const Location &loc = c2.loc;
  Value *x = c1.operand(0);
  std::vector<int64_t> xs = x->type().shape;
  size_t rank = xs.size() + 1; // [S, batch.., M, .]
  int64_t pad = static_cast<int64_t>(xs.size()) - 2;
  // X broadcast over the slices.
  std::vector<SymExpr> x1 = symShapeOf(x->type());
  x1.insert(x1.begin(), SymExpr(1));
  Value *xb = g.createNode(Op::Reshape, {x}, reshapeAttrs(g, x1), loc, before)->result();
  std::string tag = cat("_chain", S);
  Value *w1 = g.addWeight(c1.operand(1)->name() + tag, sliceB(c1, S, pad, false));
  w1->loc = c1.operand(1)->loc;
  // The first contraction of every slice, with its C and epilogue sliced along the hidden.
  std::vector<Value *> ops1 = {xb, w1};
  std::vector<std::string> epi1;
  for (const ContractionStep &s : contractionSteps(c1)) {
    epi1.push_back(s.step.str());
    if (!s.operand)
      continue;
    const auto &shape = s.operand->type().shape;
    if (shape.empty() || shape.back() == 1) {
      ops1.push_back(s.operand);
      continue;
    }
    Value *v = g.addWeight(s.operand->name() + tag, sliceOperand(*s.operand->data(), S, rank));
    v->loc = s.operand->loc;
    ops1.push_back(v);
  }
  AttrMap a1;
  if (!epi1.empty())
    a1["epilogue"] = epi1;
  Value *h = g.createNode(Op::MatMul, ops1, a1, c1.loc, before)->result();
  // The second contraction of every slice: the partial outputs [S, batch.., M, N2].
  Value *w2 = g.addWeight(c2.operand(1)->name() + tag, sliceB(c2, S, pad, true));
  w2->loc = c2.operand(1)->loc;
  Value *partial = g.createNode(Op::MatMul, {h, w2}, {}, loc, before)->result();
  Value *acc =
      g.createNode(Op::ReduceSum, {partial},
                   {{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t(0)}}, loc, before)
          ->result();
  // c2's C and epilogue, step by step, on the sum.
  for (const ContractionStep &s : contractionSteps(c2)) {
    std::vector<Value *> ops = {acc};
    if (s.operand)
      ops.push_back(s.operand);
    acc = g.createNode(s.step.op, ops, s.step.attrs, loc, before)->result();
  }
  return acc;
}

namespace {

class SplitChainsPass : public NamedPass<PassId::SplitChains> {
public:
  explicit SplitChainsPass(SplitChainsOptions opts) : opts_(std::move(opts)) {}

  bool run(Graph &g, PassContext &ctx) override {
    std::vector<std::pair<Node *, int>> chosen;
    for (Node *n : g.nodes()) {
      std::vector<int> counts = chainSplitCounts(g, *n);
      if (counts.empty())
        continue;
      const Node *c1 = splittableChain(g, *n);
      ChainSplitDecision d = decide(g, *c1, *n, counts);
      if (ctx.explain)
        ctx.explain->add(record(*n, d));
      if (d.chosen > 1)
        chosen.emplace_back(n, d.chosen);
      if (opts_.decisions && opts_.cost)
        opts_.decisions->push_back(std::move(d));
    }
    for (auto it = chosen.rbegin(); it != chosen.rend(); ++it) { // later nodes first
      Node *c2 = it->first;
      Node *c1 = c2->operand(0)->def();
      Value *out = emitChainSplit(g, *c1, *c2, it->second, c2);
      g.replaceAllUsesWith(c2->result(), out);
      g.eraseNode(c2);
      g.eraseNode(c1);
    }
    if (!chosen.empty())
      g.removeDeadCode(); // the unsplit weights
    return !chosen.empty();
  }

private:
  ChainSplitDecision decide(const Graph &g, const Node &c1, const Node &c2,
                            const std::vector<int> &counts) const {
    ChainSplitDecision d;
    d.node = c2.where();
    d.nodeIndex = g.nodeIndex(&c2);
    bool forced = std::count(counts.begin(), counts.end(), opts_.force) > 0;
    if (!opts_.cost) {
      d.chosen = forced ? opts_.force : counts.front();
      return d;
    }
    chooseSlices(
        d, counts, [&](int s) { return opts_.cost(g, c1, c2, s); }, kMargin);
    if (forced)
      d.chosen = opts_.force;
    return d;
  }

  RewriteRecord record(const Node &c2, const ChainSplitDecision &d) const {
    return sliceRecord(
        name(),
        cat(c2.operand(0)->def()->name(), " -> ", c2.name(), " ", c2.result()->type().str()),
        c2.loc.origins, d, "hidden slices");
  }

  SplitChainsOptions opts_;
};

} // namespace

std::unique_ptr<Pass> createSplitChainsPass(SplitChainsOptions opts) {
  return std::make_unique<SplitChainsPass>(std::move(opts));
}

std::unique_ptr<Pass> createSplitChainsPass() {
  return createSplitChainsPass(SplitChainsOptions{});
}

} // namespace aicf
