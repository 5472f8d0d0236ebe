// detect-softmax: finds softmax and log-softmax written out as primitive ops (TF/Keras
// converters, hand-written numerics) and replaces them by `softmax` / `log_softmax`:
//   e = exp(x - reduce_max(x, A))   (or exp(x): the unstabilised form)
//   softmax:      e / reduce_sum(e, A)
//   log_softmax:  (x - m) - log(reduce_sum(exp(x - m), A))
// Why: the primitive forms read x three times and store e; softmax has the (max, sum) state
// algebra with rescaling, so the semantic op carries online_reducible_norm and lowers to a
// one-pass kernel. Legality: one reduction axis, the last; keepdims; intermediates used only
// inside the match. Exactness: reassociated (the unstabilised form also gains stability).
#include "passes/match.h"
#include "passes/passes.h"
#include "support/diagnostics.h"

namespace aicf {

namespace {

// e = exp(x - max(x)) or exp(x): returns x and the (optional) max node; pushes nodes.
Value *expArgument(Node *exp, std::vector<Node *> &nodes, Node *&max) {
  nodes.push_back(exp);
  Value *t = exp->operand(0);
  if (Node *sub = producer(t, Op::Sub)) {
    if (Node *mx = producer(sub->operand(1), Op::ReduceMax);
        mx && mx->operand(0) == sub->operand(0)) {
      max = mx;
      nodes.push_back(sub);
      nodes.push_back(mx);
      return sub->operand(0);
    }
  }
  return t;
}

class DetectSoftmax : public NamedPass<PassId::DetectSoftmax> {
public:
  bool run(Graph &g, PassContext &ctx) override {
    bool changed = false;
    for (Node *n : g.nodes()) {
      if (!g.hasNode(n))
        continue;
      if (n->op() == Op::Div)
        changed |= trySoftmax(g, ctx, n);
      else if (n->op() == Op::Sub)
        changed |= tryLogSoftmax(g, ctx, n);
    }
    return changed;
  }

private:
  static Certificate certFor(const Value *x, const Node *sum, const Node *max, const char *what) {
    Certificate cert;
    cert.property = MemProperty::OnlineReducibleNorm;
    cert.rewrite = cat("decomposed ", what, " -> ", what, " (one-pass (max, sum) state)");
    cert.exactness = Exactness::Reassociated;
    const TensorType &xt = x->type();
    std::vector<int64_t> axes = reducedAxes(sum);
    cert.conditions.push_back({"floating-point input", xt.str(), isFloat(xt.dtype)});
    cert.conditions.push_back(
        {"one reduction axis, the last, keepdims", cat("axes ", shapeStr(axes), " of ", xt.str()),
         axes.size() == 1 && axes[0] == xt.rank() - 1 && sum->i("keepdims") == 1});
    if (max)
      cert.conditions.push_back({"max and sum reduce the same axes", shapeStr(reducedAxes(max)),
                                 reducedAxes(max) == axes && max->i("keepdims") == 1});
    return cert;
  }

  static bool trySoftmax(Graph &g, PassContext &ctx, Node *div) {
    Node *exp = producer(div->operand(0), Op::Exp);
    Node *sum = producer(div->operand(1), Op::ReduceSum);
    if (!exp || !sum || sum->operand(0) != exp->result())
      return false;
    std::vector<Node *> nodes = {sum, div};
    Node *max = nullptr;
    Value *x = expArgument(exp, nodes, max);
    if (x->type() != div->result()->type())
      return false;
    Certificate cert = certFor(x, sum, max, "softmax");
    return applyIfLegal(
        g, ctx, "detect-softmax", max ? "softmax (stabilised)" : "softmax (unstabilised)", nodes,
        div->result(), std::move(cert), [&](Node *before, const Location &loc) {
          return g.createNode(Op::Softmax, {x}, {{"axis", int64_t(-1)}}, loc, before)->result();
        });
  }

  static bool tryLogSoftmax(Graph &g, PassContext &ctx, Node *outer) {
    // outer = t - log(sum(exp(t))) where t = x - max(x) (or x itself).
    Node *log = producer(outer->operand(1), Op::Log);
    Node *sum = log ? producer(log->operand(0), Op::ReduceSum) : nullptr;
    Node *exp = sum ? producer(sum->operand(0), Op::Exp) : nullptr;
    if (!exp || exp->operand(0) != outer->operand(0))
      return false;
    std::vector<Node *> nodes = {sum, log, outer};
    Node *max = nullptr;
    Value *x = expArgument(exp, nodes, max);
    if (x->type() != outer->result()->type())
      return false;
    Certificate cert = certFor(x, sum, max, "log_softmax");
    return applyIfLegal(
        g, ctx, "detect-softmax", "log_softmax (decomposed)", nodes, outer->result(),
        std::move(cert), [&](Node *before, const Location &loc) {
          return g.createNode(Op::LogSoftmax, {x}, {{"axis", int64_t(-1)}}, loc, before)->result();
        });
  }
};

} // namespace

std::unique_ptr<Pass> createDetectSoftmaxPass() {
  return std::make_unique<DetectSoftmax>();
}

} // namespace aicf
