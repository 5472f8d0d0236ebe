// detect-rms-norm: finds RMSNorm written out as primitive ops (LLaMA/T5-style exports) and
// replaces it by one `rms_norm`:
//   ms = reduce_mean(x^2, A)               (x^2 as pow(x, 2) or mul(x, x))
//   n  = x * reciprocal(sqrt(ms + eps))     or x / sqrt(ms + eps)
//   y  = n * w                              (optional; either operand order)
// Why: the state is a plain sum of squares (associative), so `rms_norm` carries
// online_reducible_norm and lowers to a one-pass kernel instead of materialising x^2 and n.
// Legality: intermediates used only inside the match, trailing contiguous axes with keepdims,
// epsilon a constant in (0, 0.1], w a constant of the normalised shape.
#include "passes/match.h"
#include "passes/passes.h"
#include "support/diagnostics.h"

namespace aicf {

namespace {

bool isSquareOf(const Value *sq, const Value *x) {
  if (Node *p = producer(sq, Op::Pow))
    return p->operand(0) == x && isSplatNear(p->operand(1), 2.0, 0.0);
  if (Node *m = producer(sq, Op::Mul))
    return m->operand(0) == x && m->operand(1) == x;
  return false;
}

class DetectRmsNorm : public NamedPass<PassId::DetectRmsNorm> {
public:
  bool run(Graph &g, PassContext &ctx) override {
    bool changed = false;
    for (Node *n : g.nodes())
      if (g.hasNode(n) && (n->op() == Op::Div || n->op() == Op::Mul))
        changed |= tryMatch(g, ctx, n);
    return changed;
  }

private:
  static bool tryMatch(Graph &g, PassContext &ctx, Node *anchor) {
    std::vector<Node *> nodes;
    Value *x = nullptr, *s = nullptr;
    if (anchor->op() == Op::Div) {
      x = anchor->operand(0);
      s = anchor->operand(1);
    } else {
      for (int k = 0; k < 2 && !s; ++k)
        if (Node *r = producer(anchor->operand(k), Op::Reciprocal)) {
          s = r->operand(0);
          x = anchor->operand(1 - k);
          nodes.push_back(r);
        } else if (Node *d = producer(anchor->operand(k), Op::Div);
                   d && isSplatNear(d->operand(0), 1.0, 0)) {
          s = d->operand(1);
          x = anchor->operand(1 - k);
          nodes.push_back(d);
        }
    }
    Node *sqrt = producer(s, Op::Sqrt);
    Node *add = sqrt ? producer(sqrt->operand(0), Op::Add) : nullptr;
    if (!add)
      return false;
    Node *mean = nullptr;
    Value *epsV = nullptr;
    for (int k = 0; k < 2; ++k)
      if (Node *r = producer(add->operand(k), Op::ReduceMean)) {
        mean = r;
        epsV = add->operand(1 - k);
      }
    if (!mean || !isSquareOf(mean->operand(0), x))
      return false;
    nodes.insert(nodes.end(), {mean->operand(0)->def(), mean, add, sqrt, anchor});
    Value *root = anchor->result();
    Value *w = nullptr;
    std::vector<Node *> us = g.users(root);
    if (us.size() == 1 && !g.isOutput(root) && us[0]->op() == Op::Mul) {
      Value *cand = otherOperand(us[0], root);
      if (cand && cand->isWeight()) {
        w = cand;
        nodes.push_back(us[0]);
        root = us[0]->result();
      }
    }
    const TensorType &xt = x->type();
    std::vector<int64_t> axes = reducedAxes(mean);
    std::vector<int64_t> normShape;
    if (!axes.empty())
      normShape.assign(xt.shape.begin() + axes.front(), xt.shape.end());
    auto eps = splatValue(epsV);
    Certificate cert;
    cert.property = MemProperty::OnlineReducibleNorm;
    cert.rewrite = "decomposed RMS norm -> rms_norm (one-pass sum of squares when lowered)";
    cert.exactness = Exactness::Reassociated;
    cert.conditions.push_back({"floating-point input", xt.str(), isFloat(xt.dtype)});
    cert.conditions.push_back({"reduce axes trailing and contiguous",
                               cat("axes ", shapeStr(axes), " of ", xt.str()),
                               trailingContiguous(axes, xt.rank()) && mean->i("keepdims") == 1});
    cert.conditions.push_back({"epsilon a constant in (0, 0.1]",
                               eps ? cat("epsilon = ", *eps) : "not a scalar constant",
                               eps && epsV->type().numel() == 1 && *eps > 0 && *eps <= 0.1});
    bool wOk =
        !w || (broadcastShapes(normShape, w->type().shape).value_or(std::vector<int64_t>{1, -1}) ==
                   normShape &&
               w->type().rank() <= static_cast<int64_t>(normShape.size()));
    // Along a symbolic normalised dim the weight broadcasts for every value only as 1.
    for (int64_t d = 0; wOk && w && d < w->type().rank(); ++d) {
      int64_t xd = xt.rank() - w->type().rank() + d;
      wOk = w->type().shape[d] == 1 || xt.symDim(static_cast<size_t>(xd)).isConstant();
    }
    cert.conditions.push_back({"weight a constant of the normalised shape",
                               w ? describe(w) + " " + w->type().str() : "absent", wOk});
    double epsVal = eps.value_or(0.0);
    return applyIfLegal(g, ctx, "detect-rms-norm",
                        w ? "rms_norm (decomposed)" : "rms_norm (decomposed, no weight)", nodes,
                        root, std::move(cert), [&](Node *before, const Location &loc) {
                          std::vector<Value *> ops = {x};
                          if (w)
                            ops.push_back(w);
                          AttrMap attrs = {{"axis", axes.front() - xt.rank()}, {"epsilon", epsVal}};
                          return g.createNode(Op::RmsNorm, ops, attrs, loc, before)->result();
                        });
  }
};

} // namespace

std::unique_ptr<Pass> createDetectRmsNormPass() {
  return std::make_unique<DetectRmsNorm>();
}

} // namespace aicf
