// split-k (see split_k.h). Every contraction is priced before any is rewritten, so the cost
// callback sees the graph it was given; the chosen ones are then rewritten later-first.
#include "passes/split_k.h"

#include "ir/epilogue.h"
#include "ir/precision.h"
#include "passes/explain.h"
#include "passes/passes.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <cstring>

namespace aicf {

namespace {

constexpr int64_t kMinSliceK = 64;       // K per slice: shallower slices only add partial sums
constexpr int64_t kMinGroupChannels = 8; // a conv slice must stay a dense grouped conv
constexpr double kMargin = 0.9;          // a split must beat the unsplit form by 10%

bool f32(const Value *v) {
  return v->type().dtype == DType::F32 && v->type().isStatic();
}

// The weight operand: f32, or the storage type assign-precision gave the weight of a node it
// put on the tensor cores (the regrouping copies bytes, so any element type will do).
bool splittableWeight(const Node &n) {
  const Value *w = n.operand(1);
  return w->type().isStatic() &&
         (w->type().dtype == DType::F32 ||
          (tensorCores(nodePrecision(n)) && w->type().dtype == precisionStorage(nodePrecision(n))));
}

// The operand index where the epilogue's extra operands start, and whether the optional third
// operand (conv bias, gemm C) is present.
size_t firstExtra(const Node &n, bool *hasThird) {
  size_t extras = static_cast<size_t>(epilogueOperandCount(n.strs("epilogue")));
  *hasThird = n.op() != Op::MatMul && n.numOperands() == 3 + extras;
  return *hasThird ? 3 : 2;
}

// K of the forms the pass splits, or 0.
int64_t splitDim(const Node &n) {
  if (n.op() != Op::Conv && n.op() != Op::Gemm && n.op() != Op::MatMul)
    return 0;
  if (!f32(n.operand(0)) || !splittableWeight(n) || !f32(n.result()))
    return 0;
  const auto &a = n.operand(0)->type().shape, &b = n.operand(1)->type().shape;
  switch (n.op()) {
  case Op::Conv: return n.i("group") == 1 && a.size() >= 3 && b[0] >= kMinGroupChannels ? a[1] : 0;
  case Op::Gemm:
    if (n.i("transA") != 0 || n.f("alpha") != 1.0 || n.f("beta") != 1.0)
      return 0;
    return a[1];
  case Op::MatMul: {
    if (a.size() < 2 || b.size() != 2)
      return 0;
    for (size_t d = 0; d + 2 < a.size(); ++d)
      if (a[d] != 1)
        return 0;
    return a.back();
  }
  default: return 0;
  }
}

// Weight W [M, C, k...] as the grouped conv's [S M, C/S, k...]: W'[s M + m, c', t] =
// W[m, s C/S + c', t].
TensorPtr groupedWeight(const Tensor &w, int64_t S) {
  const auto &shape = w.type().shape;
  int64_t M = shape[0], C = shape[1], taps = 1;
  for (size_t d = 2; d < shape.size(); ++d)
    taps *= shape[d];
  int64_t Cs = C / S, run = Cs * taps;
  std::vector<int64_t> out = shape;
  out[0] = S * M;
  out[1] = Cs;
  // Byte copies: a weight assign-precision stored as f16 / bf16 keeps its type.
  const size_t es = dtypeSize(w.type().dtype);
  auto t = std::make_shared<Tensor>(TensorType(w.type().dtype, out));
  const uint8_t *src = w.raw();
  uint8_t *dst = t->raw();
  for (int64_t s = 0; s < S; ++s)
    for (int64_t m = 0; m < M; ++m)
      std::memcpy(dst + static_cast<size_t>((s * M + m) * run) * es,
                  src + static_cast<size_t>((m * C + s * Cs) * taps) * es,
                  static_cast<size_t>(run) * es);
  return t;
}

// Gemm's B ([K, N], or [N, K] with transB) as [S, K/S, N].
TensorPtr slicedB(const Tensor &b, int64_t S, bool transB) {
  const auto &shape = b.type().shape;
  int64_t K = transB ? shape[1] : shape[0], N = transB ? shape[0] : shape[1];
  const size_t es = dtypeSize(b.type().dtype);
  auto t = std::make_shared<Tensor>(TensorType(b.type().dtype, {S, K / S, N}));
  const uint8_t *src = b.raw();
  uint8_t *dst = t->raw();
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n)
      std::memcpy(dst + static_cast<size_t>(k * N + n) * es,
                  src + static_cast<size_t>(transB ? n * K + k : k * N + n) * es, es);
  return t;
}

Value *reshape(Graph &g, Value *v, std::vector<int64_t> shape, const Location &loc, Node *before) {
  return g.createNode(Op::Reshape, {v}, reshapeAttrs(g, *v, shape), loc, before)->result();
}

} // namespace

std::vector<int> splitKCounts(const Node &n) {
  // C: the split dimension (a conv's input channels, a gemm's or matmul's K).
  int64_t C = splitDim(n);
  // The weight (conv W, gemm / matmul B) is regrouped at compile time: it must be constant.
  if (C == 0 || !n.operand(1)->isWeight() || !n.operand(1)->hasData())
    return {};
  int64_t taps = 1;
  if (n.op() == Op::Conv) {
    const auto &w = n.operand(1)->type().shape;
    for (size_t d = 2; d < w.size(); ++d)
      taps *= w[d];
  }
  std::vector<int> out;
  for (int s : {2, 4, 8, 16, 32}) {
    if (C % s != 0 || (C / s) * taps < kMinSliceK)
      continue;
    if (n.op() == Op::Conv && C / s < kMinGroupChannels)
      continue;
    out.push_back(s);
  }
  return out;
}

Value *emitSplitK(Graph &g, const Node &n, int splits, Node *before) {
  const int64_t S = splits;
  const Location &loc = n.loc;
  bool hasThird = false;
  size_t extra = firstExtra(n, &hasThird);
  const std::vector<int64_t> &outShape = n.result()->type().shape;
  Value *acc = nullptr;
  if (n.op() == Op::Conv) {
    Value *x = n.operand(0), *w = n.operand(1);
    Value *w2 = g.addWeight(w->name() + "_split" + std::to_string(S), groupedWeight(*w->data(), S));
    w2->loc = w->loc;
    AttrMap attrs = n.attrs;
    attrs.erase("epilogue");
    attrs["group"] = S;
    Value *partial = g.createNode(Op::Conv, {x, w2}, attrs, loc, before)->result();
    // [N, S M, o...] -> [N, S, M, o...] -> sum over S.
    std::vector<int64_t> viewed = outShape;
    viewed.insert(viewed.begin() + 1, S);
    Value *v = reshape(g, partial, viewed, loc, before);
    acc = g.createNode(Op::ReduceSum, {v},
                       {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t(0)}}, loc, before)
              ->result();
    if (hasThird) { // bias [M] as [M, 1...] against [N, M, o...]
      std::vector<int64_t> bshape(outShape.size() - 1, 1);
      bshape[0] = outShape[1];
      Value *b = reshape(g, n.operand(2), bshape, loc, before);
      acc = g.createNode(Op::Add, {acc, b}, {}, loc, before)->result();
    }
  } else {
    Value *a = n.operand(0), *b = n.operand(1);
    const auto &as = a->type().shape;
    int64_t K = as.back();
    SymExpr M = a->type().symDim(as.size() - 2);
    bool transB = n.op() == Op::Gemm && n.i("transB") != 0;
    Value *b2 =
        g.addWeight(b->name() + "_split" + std::to_string(S), slicedB(*b->data(), S, transB));
    b2->loc = b->loc;
    // A [.., M, K] -> [M, S, K/S] -> [S, M, K/S] (index maps over A).
    Value *a3 =
        g.createNode(Op::Reshape, {a}, reshapeAttrs(g, {M, S, K / S}), loc, before)->result();
    Value *as3 =
        g.createNode(Op::Transpose, {a3}, {{"perm", std::vector<int64_t>{1, 0, 2}}}, loc, before)
            ->result();
    Value *partial = g.createNode(Op::MatMul, {as3, b2}, precisionAttrs(n), loc, before)->result();
    acc = g.createNode(Op::ReduceSum, {partial},
                       {{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t(0)}}, loc, before)
              ->result();
    if (acc->type().shape != outShape)
      acc = g.createNode(Op::Reshape, {acc}, reshapeAttrs(g, symShapeOf(n.result()->type())), loc,
                         before)
                ->result();
    if (hasThird)
      acc = g.createNode(Op::Add, {acc, n.operand(2)}, {}, loc, before)->result();
  }
  // The epilogue, step by step, on the summed accumulator.
  for (const EpilogueStep &step : epilogueSteps(n)) {
    std::vector<Value *> ops = {acc};
    if (step.takesOperand())
      ops.push_back(n.operand(extra++));
    acc = g.createNode(step.op, ops, step.attrs, loc, before)->result();
  }
  return acc;
}

namespace {

class SplitKPass : public NamedPass<PassId::SplitK> {
public:
  explicit SplitKPass(SplitKOptions opts) : opts_(std::move(opts)) {}

  bool run(Graph &g, PassContext &ctx) override {
    std::vector<std::pair<Node *, int>> chosen;
    for (Node *n : g.nodes()) {
      std::vector<int> counts = splitKCounts(*n);
      if (counts.empty())
        continue;
      SplitKDecision d = decide(g, *n, counts);
      if (ctx.explain)
        ctx.explain->add(record(*n, d));
      if (d.chosen > 1)
        chosen.emplace_back(n, d.chosen);
      if (opts_.decisions && opts_.cost)
        opts_.decisions->push_back(std::move(d));
    }
    for (auto it = chosen.rbegin(); it != chosen.rend(); ++it) { // later nodes first
      Node *n = it->first;
      Value *out = emitSplitK(g, *n, it->second, n);
      g.replaceAllUsesWith(n->result(), out);
      g.eraseNode(n);
    }
    if (!chosen.empty())
      g.removeDeadCode(); // the unsplit weights
    return !chosen.empty();
  }

private:
  SplitKDecision decide(const Graph &g, const Node &n, const std::vector<int> &counts) const {
    SplitKDecision d;
    d.node = n.where();
    d.nodeIndex = g.nodeIndex(&n);
    if (!opts_.cost) {
      for (int s : counts)
        if (s <= 4)
          d.chosen = s;
      return d;
    }
    chooseSlices(
        d, counts, [&](int s) { return opts_.cost(g, n, s); }, kMargin);
    return d;
  }

  RewriteRecord record(const Node &n, const SplitKDecision &d) const {
    return sliceRecord(name(), cat(n.name(), " ", n.result()->type().str()), n.loc.origins, d,
                       "partial contractions");
  }

  SplitKOptions opts_;
};

} // namespace

std::unique_ptr<Pass> createSplitKPass(SplitKOptions opts) {
  return std::make_unique<SplitKPass>(std::move(opts));
}

std::unique_ptr<Pass> createSplitKPass() {
  return createSplitKPass(SplitKOptions{});
}

} // namespace aicf
