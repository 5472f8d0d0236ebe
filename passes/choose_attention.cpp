// choose-attention (see choose_attention.h). Every attention node is decided before any is
// rewritten, so the cost callback sees the graph it was given; the chosen ones are then
// rewritten later-first, which keeps the order (and the names) of the weights the
// decompositions add the same as when the driver rewrote them itself.
#include "passes/choose_attention.h"

#include "ir/instantiate.h"
#include "ir/precision.h"
#include "passes/explain.h"
#include "passes/passes.h"
#include "support/diagnostics.h"

#include <cmath>
#include <limits>

namespace aicf {

std::string materializationBlocker(const Node &a) {
  const TensorType &q = a.operand(0)->type(), &k = a.operand(1)->type();
  int64_t sq = q.shape[q.rank() - 2], sk = k.shape[k.rank() - 2];
  // With symbolic lengths the causal mask is a cut of a constant band (emitMaterializedAttention),
  // which needs the key offset Sk - Sq to be one number for every value of the dims.
  auto offset = SymExpr::sub(k.symDim(k.rank() - 2), q.symDim(q.rank() - 2));
  if (a.i("causal") && (!offset || !offset->isConstant()))
    return cat("the causal key offset ", offset ? offset->str() : "Sk - Sq",
               " depends on the symbolic dims");
  if (a.i("causal") && sk < sq)
    return "a causal mask with Sk < Sq hides whole rows (attention gives zeros, softmax NaN)";
  if (a.numOperands() < 4)
    return "";
  const Value *m = a.operand(3);
  if (m->type().dtype == DType::Bool)
    return "a bool mask may hide whole rows (attention gives zeros, softmax NaN)";
  if (!m->hasData())
    return "a non-constant additive mask may hold -inf rows";
  const Tensor &t = *m->data();
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isfinite(t.getDouble(i)))
      return "the additive mask holds non-finite values";
  return "";
}

namespace {

TensorPtr scalar(double v, DType t0) {
  auto t = std::make_shared<Tensor>(TensorType(t0, {}));
  t->setDouble(0, v);
  return t;
}

} // namespace

Value *emitMaterializedAttention(Graph &g, const Node &a, Node *before) {
  Value *q = a.operand(0), *k = a.operand(1), *v = a.operand(2);
  Location loc = a.loc;
  int64_t r = k->type().rank();
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < r; ++d)
    perm.push_back(d);
  std::swap(perm[r - 1], perm[r - 2]);
  Value *kt = g.createNode(Op::Transpose, {k}, {{"perm", perm}}, loc, before)->result();
  Value *s = g.createNode(Op::MatMul, {q, kt}, precisionAttrs(a), loc, before)->result();
  DType dt = s->type().dtype; // the scores' (and the constants') dtype: f32, f16, bf16
  Value *scale = g.addWeight("attention_scale", scalar(a.f("scale"), dt));
  s = g.createNode(Op::Mul, {s, scale}, {}, loc, before)->result();
  auto negInf = [&] {
    return g.addWeight("attention_neg_inf", scalar(-std::numeric_limits<double>::infinity(), dt));
  };
  if (a.numOperands() == 4) { // additive if float, keep-where-true if bool
    Value *m = a.operand(3);
    s = m->type().dtype == DType::Bool
            ? g.createNode(Op::Where, {m, s, negInf()}, {}, loc, before)->result()
            : g.createNode(Op::Add, {s, m}, {}, loc, before)->result();
  }
  if (a.i("causal")) {
    // Key j is visible to query i when j <= i + (Sk - Sq). With symbolic lengths (and the
    // constant offset materializationBlocker requires) the mask is the top-left corner of the
    // one for the lengths' maxima, cut by a slice: mask[i, j] depends on i and j only.
    const TensorType &st = s->type();
    int64_t sq = st.shape[st.rank() - 2], sk = st.shape[st.rank() - 1];
    SymExpr symSq = st.symDim(st.rank() - 2), symSk = st.symDim(st.rank() - 1);
    int64_t offset = sk - sq, rows = sq, cols = sk;
    bool symbolic = !symSq.isConstant() || !symSk.isConstant();
    if (symbolic) {
      auto bq = symBounds(symSq, g.dims()), bk = symBounds(symSk, g.dims());
      AICF_CHECK(bq && bk, "attention lengths ", symSq.str(), ", ", symSk.str(), " have no bounds");
      rows = bq->hi;
      cols = bk->hi;
    }
    auto mask = std::make_shared<Tensor>(TensorType(DType::Bool, {rows, cols}));
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        mask->setInt(i * cols + j, j <= i + offset ? 1 : 0);
    Value *mv = g.addWeight("attention_causal_mask", mask);
    if (symbolic)
      mv = g.createNode(Op::Slice, {mv},
                        {{"starts", std::vector<int64_t>{0, 0}},
                         {"ends", std::vector<int64_t>{sq, sk}},
                         {"axes", std::vector<int64_t>{0, 1}},
                         {"steps", std::vector<int64_t>{1, 1}},
                         {"sym_starts", std::vector<std::string>{"0", "0"}},
                         {"sym_ends", std::vector<std::string>{symSq.str(), symSk.str()}}},
                        loc, before)
               ->result();
    s = g.createNode(Op::Where, {mv, s, negInf()}, {}, loc, before)->result();
  }
  Value *p = g.createNode(Op::Softmax, {s}, {{"axis", int64_t(-1)}}, loc, before)->result();
  return g.createNode(Op::MatMul, {p, v}, precisionAttrs(a), loc, before)->result();
}

namespace {

class ChooseAttentionPass : public NamedPass<PassId::ChooseAttention> {
public:
  explicit ChooseAttentionPass(ChooseAttentionOptions opts) : opts_(std::move(opts)) {}

  bool run(Graph &g, PassContext &ctx) override {
    std::vector<Node *> chosen;
    for (Node *a : g.nodes()) {
      if (a->op() != Op::Attention)
        continue;
      AttentionDecision d = decide(g, *a);
      if (ctx.explain)
        ctx.explain->add(record(*a, d));
      if (d.materialized)
        chosen.push_back(a);
      if (opts_.decisions)
        opts_.decisions->push_back(std::move(d));
    }
    for (auto it = chosen.rbegin(); it != chosen.rend(); ++it) { // later nodes first
      Node *a = *it;
      Value *out = emitMaterializedAttention(g, *a, a);
      g.replaceAllUsesWith(a->result(), out);
      g.eraseNode(a);
    }
    return !chosen.empty();
  }

private:
  // The cost model's choice (the cheaper form that fits), then --attention's override where the
  // requested form fits. Without a callback both forms count as fitting and nothing is priced.
  AttentionDecision decide(const Graph &g, const Node &a) const {
    AttentionDecision d;
    d.node = a.where();
    d.nodeIndex = g.nodeIndex(&a);
    d.materializedWhy = materializationBlocker(a);
    bool offered = d.materializedWhy.empty();
    bool streamingFits = true, materializedFits = offered;
    if (opts_.cost) {
      AttentionCost c = opts_.cost(g, a, offered);
      d.streamingUs = c.streamingUs;
      d.streamingWhy = c.streamingWhy;
      if (offered) {
        d.materializedUs = c.materializedUs;
        d.materializedWhy = c.materializedWhy;
      }
      streamingFits = d.streamingUs >= 0;
      materializedFits = d.materializedUs >= 0;
      d.materialized = materializedFits && (!streamingFits || d.materializedUs < d.streamingUs);
    } else {
      d.materialized = materializedFits;
    }
    if (opts_.policy == AttentionPolicy::Streaming && streamingFits)
      d.materialized = false;
    else if (opts_.policy == AttentionPolicy::Materialized && materializedFits)
      d.materialized = true;
    return d;
  }

  RewriteRecord record(const Node &a, const AttentionDecision &d) const {
    RewriteRecord rec;
    rec.pass = name();
    rec.pattern = cat("attention ", a.result()->type().str());
    rec.origins = a.loc.origins;
    rec.applied = d.materialized;
    if (d.materialized)
      rec.result = "materialised: transpose -> matmul -> mul (-> add | where) -> softmax -> matmul";
    else
      rec.note = d.materializedWhy.empty() ? "streaming is cheaper or requested"
                                           : "materialised not offered: " + d.materializedWhy;
    return rec;
  }

  ChooseAttentionOptions opts_;
};

} // namespace

std::unique_ptr<Pass> createChooseAttentionPass(ChooseAttentionOptions opts) {
  return std::make_unique<ChooseAttentionPass>(std::move(opts));
}

std::unique_ptr<Pass> createChooseAttentionPass() {
  return createChooseAttentionPass(ChooseAttentionOptions{});
}

} // namespace aicf
