// detect-layer-norm: finds LayerNorm written out as primitive ops (PyTorch's opset < 17 export,
// many TF/Paddle converters) and replaces it by one `layer_norm`:
//
//   mean = reduce_mean(x, A)          d = sub(x, mean)
//   var  = reduce_mean(d^2, A)        (d^2 as pow(d, 2) or mul(d, d))
//   n    = d / sqrt(var + eps)        (or d * reciprocal(sqrt(var + eps)))
//   y    = n * gamma + beta           (gamma and beta optional)
//
// Why: as primitive ops the norm reads x three times and materialises d, d^2 and n; as
// `layer_norm` it carries the online_reducible_norm property (Welford state, Chan merge) and
// lowers to a one-pass streaming kernel. Legality: intermediates used only inside the match,
// both reductions over the same trailing contiguous axes with keepdims, gamma/beta constants of
// the normalised shape, epsilon in (0, 0.1].
#include "passes/match.h"
#include "passes/passes.h"
#include "support/diagnostics.h"

namespace aicf {

namespace {

bool isSquareOf(const Value *sq, const Value *d) {
  if (Node *p = producer(sq, Op::Pow))
    return p->operand(0) == d && isSplatNear(p->operand(1), 2.0, 0.0);
  if (Node *m = producer(sq, Op::Mul))
    return m->operand(0) == d && m->operand(1) == d;
  return false;
}

// Structural match anchored at the normalising div (or mul by a reciprocal).
struct LnMatch {
  std::vector<Node *> nodes;
  Value *x = nullptr, *gamma = nullptr, *beta = nullptr, *root = nullptr;
  Node *mean = nullptr, *var = nullptr;
  double eps = 0;
  bool epsConst = false;
};

bool matchCore(const Graph &g, Node *anchor, LnMatch &m) {
  Value *d = nullptr, *s = nullptr;
  if (anchor->op() == Op::Div) {
    d = anchor->operand(0);
    s = anchor->operand(1);
  } else if (anchor->op() == Op::Mul) {
    for (int k = 0; k < 2 && !s; ++k)
      if (Node *r = producer(anchor->operand(k), Op::Reciprocal)) {
        s = r->operand(0);
        d = anchor->operand(1 - k);
        m.nodes.push_back(r);
      }
  }
  if (!s)
    return false;
  Node *sub = producer(d, Op::Sub), *sqrt = producer(s, Op::Sqrt);
  if (!sub || !sqrt)
    return false;
  Node *addEps = producer(sqrt->operand(0), Op::Add);
  if (!addEps)
    return false;
  Node *var = nullptr;
  Value *epsV = nullptr;
  for (int k = 0; k < 2; ++k)
    if (Node *r = producer(addEps->operand(k), Op::ReduceMean)) {
      var = r;
      epsV = addEps->operand(1 - k);
    }
  if (!var || !isSquareOf(var->operand(0), d))
    return false;
  Node *mean = producer(sub->operand(1), Op::ReduceMean);
  if (!mean || mean->operand(0) != sub->operand(0))
    return false;
  m.x = sub->operand(0);
  m.mean = mean;
  m.var = var;
  auto e = splatValue(epsV);
  m.epsConst = e.has_value() && epsV->type().numel() == 1;
  m.eps = e.value_or(0.0);
  m.nodes.insert(m.nodes.end(), {mean, sub, var->operand(0)->def(), var, addEps, sqrt, anchor});
  m.root = anchor->result();
  // Optional affine tail: * gamma, + beta (each only if it is the sole consumer).
  auto soleUser = [&](Value *v, Op op) -> Node * {
    std::vector<Node *> us = g.users(v);
    return us.size() == 1 && !g.isOutput(v) && us[0]->op() == op ? us[0] : nullptr;
  };
  if (Node *mul = soleUser(m.root, Op::Mul)) {
    m.gamma = otherOperand(mul, m.root);
    m.nodes.push_back(mul);
    m.root = mul->result();
  }
  if (Node *add = soleUser(m.root, Op::Add)) {
    Value *b = otherOperand(add, m.root);
    if (b && b->isWeight()) {
      m.beta = b;
      m.nodes.push_back(add);
      m.root = add->result();
    }
  }
  return true;
}

class DetectLayerNorm : public NamedPass<PassId::DetectLayerNorm> {
public:
  bool run(Graph &g, PassContext &ctx) override {
    bool changed = false;
    for (Node *n : g.nodes()) {
      if (!g.hasNode(n) || (n->op() != Op::Div && n->op() != Op::Mul))
        continue;
      LnMatch m;
      if (!matchCore(g, n, m))
        continue;
      changed |= rewrite(g, ctx, m);
    }
    return changed;
  }

private:
  static bool rewrite(Graph &g, PassContext &ctx, const LnMatch &m) {
    const TensorType &xt = m.x->type();
    std::vector<int64_t> axes = reducedAxes(m.mean);
    std::vector<int64_t> normShape;
    std::vector<SymExpr> normSym;
    if (!axes.empty()) {
      normShape.assign(xt.shape.begin() + axes.front(), xt.shape.end());
      for (int64_t d = axes.front(); d < xt.rank(); ++d)
        normSym.push_back(xt.symDim(static_cast<size_t>(d)));
    }
    TensorType normType(xt.dtype, normShape);
    // A gamma of ones (beta without gamma) broadcasts along a symbolic normalised dim as 1: a
    // weight cannot have the dim's planning size.
    TensorType onesType = normType;
    for (size_t d = 0; d < normSym.size(); ++d)
      if (!normSym[d].isConstant())
        onesType.shape[d] = 1;

    Certificate cert;
    cert.property = MemProperty::OnlineReducibleNorm;
    cert.rewrite = "decomposed layer norm -> layer_norm (one-pass Welford when lowered)";
    cert.exactness = Exactness::Reassociated;
    auto add = [&](std::string name, bool held, std::string evidence) {
      cert.conditions.push_back({std::move(name), std::move(evidence), held});
    };
    add("floating-point input", isFloat(xt.dtype), xt.str());
    add("reduce axes trailing and contiguous", trailingContiguous(axes, xt.rank()),
        cat("axes ", shapeStr(axes), " of ", xt.str()));
    add("mean and variance reduce the same axes, keepdims",
        reducedAxes(m.var) == axes && m.mean->i("keepdims") == 1 && m.var->i("keepdims") == 1,
        cat("mean axes ", shapeStr(axes), ", variance axes ", shapeStr(reducedAxes(m.var))));
    add("epsilon a constant in (0, 0.1]", m.epsConst && m.eps > 0 && m.eps <= 0.1,
        m.epsConst ? cat("epsilon = ", m.eps) : "epsilon is not a scalar constant");
    // (Dims compared as expressions: a weight's dim matches a symbolic one only as 1.)
    auto paramOk = [&](const Value *p) {
      if (!p)
        return true;
      const TensorType &pt = p->type();
      if (!p->isWeight() || pt.dtype != xt.dtype ||
          pt.rank() > static_cast<int64_t>(normSym.size()))
        return false;
      size_t off = normSym.size() - static_cast<size_t>(pt.rank());
      for (size_t d = 0; d < static_cast<size_t>(pt.rank()); ++d)
        if (pt.symDim(d) != normSym[off + d] && pt.symDim(d) != SymExpr(1))
          return false;
      return true;
    };
    add("gamma/beta constants of the normalised shape " + normType.str(),
        paramOk(m.gamma) && paramOk(m.beta),
        cat("gamma ", m.gamma ? describe(m.gamma) + " " + m.gamma->type().str() : "absent",
            ", beta ", m.beta ? describe(m.beta) + " " + m.beta->type().str() : "absent"));

    std::string pattern =
        cat("layer_norm (decomposed", m.gamma ? "" : ", no gamma", m.beta ? "" : ", no beta", ")");
    return applyIfLegal(g, ctx, "detect-layer-norm", pattern, m.nodes, m.root, std::move(cert),
                        [&](Node *before, const Location &loc) {
                          std::vector<Value *> ops = {m.x};
                          if (m.gamma || m.beta)
                            ops.push_back(m.gamma ? m.gamma : onesLike(g, onesType));
                          if (m.beta)
                            ops.push_back(m.beta);
                          AttrMap attrs = {{"axis", axes.front() - xt.rank()}, {"epsilon", m.eps}};
                          return g.createNode(Op::LayerNorm, ops, attrs, loc, before)->result();
                        });
  }

  static Value *onesLike(Graph &g, const TensorType &t) {
    auto ones = std::make_shared<Tensor>(t);
    for (int64_t i = 0; i < ones->numel(); ++i)
      ones->setDouble(i, 1.0);
    return g.addWeight("ones", ones);
  }
};

} // namespace

std::unique_ptr<Pass> createDetectLayerNormPass() {
  return std::make_unique<DetectLayerNorm>();
}

} // namespace aicf
