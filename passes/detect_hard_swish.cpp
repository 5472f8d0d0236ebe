// detect-hard-swish: the MobileNetV3 activations as exporters write them:
//   clip(x + 3, 0, 6) / 6   (or * 1/6)            -> hard_sigmoid(x; alpha = 1/6, beta = 0.5)
//   x * hard_sigmoid(x; 1/6, 0.5)  (either order)  -> hard_swish(x)
//   (x * clip(x + 3, 0, 6)) / 6  (or * 1/6)        -> hard_swish(x)   (Paddle's and Keras'
//   order: the product first; reassociated, x * (c / 6) rounds once more or less)
// Why: one rematerializable elementwise op each, fusable into a contraction epilogue instead of
// three to four stored intermediates. Constants matched with relative tolerance 1e-3; exact up
// to the rounding of 1/6.
#include "passes/match.h"
#include "passes/passes.h"

#include <cmath>

namespace aicf {

namespace {

class DetectHardSwish : public NamedPass<PassId::DetectHardSwish> {
public:
  bool run(Graph &g, PassContext &ctx) override {
    bool changed = false;
    for (Node *n : g.nodes())
      if (g.hasNode(n) && (n->op() == Op::Div || n->op() == Op::Mul))
        changed |= tryScaledProduct(g, ctx, n) || tryHardSigmoid(g, ctx, n);
    for (Node *n : g.nodes())
      if (g.hasNode(n) && n->op() == Op::Mul)
        changed |= tryHardSwish(g, ctx, n);
    return changed;
  }

private:
  static Certificate cert(const char *rewrite) {
    Certificate c;
    c.property = MemProperty::RematerializableIntermediate;
    c.rewrite = rewrite;
    c.exactness = Exactness::Exact;
    return c;
  }

  // The operand n divides by 6 (or multiplies by 1/6), or null.
  static Value *sixthOf(Node *n) {
    if (n->op() == Op::Div && isSplatNear(n->operand(1), 6.0))
      return n->operand(0);
    for (int k = 0; k < 2 && n->op() == Op::Mul; ++k)
      if (isSplatNear(n->operand(1 - k), 1.0 / 6.0))
        return n->operand(k);
    return nullptr;
  }
  // clip(x + 3, 0, 6) as v: its clip and add and x, or false.
  static bool relu6Shifted(Value *v, Node *&clip, Node *&add, Value *&x) {
    clip = producer(v, Op::Clip);
    if (!clip || clip->f("min") != 0.0 || std::fabs(clip->f("max") - 6.0) > 1e-6)
      return false;
    add = producer(clip->operand(0), Op::Add);
    if (!add)
      return false;
    x = nullptr;
    for (int k = 0; k < 2 && !x; ++k)
      if (isSplatNear(add->operand(1 - k), 3.0))
        x = add->operand(k);
    return x != nullptr;
  }

  static bool tryScaledProduct(Graph &g, PassContext &ctx, Node *n) {
    Node *mul = producer(sixthOf(n), Op::Mul);
    if (!mul)
      return false;
    for (int k = 0; k < 2; ++k) {
      Node *clip = nullptr, *add = nullptr;
      Value *x = nullptr;
      if (!relu6Shifted(mul->operand(k), clip, add, x) || x != mul->operand(1 - k) ||
          x->type() != n->result()->type())
        continue;
      Certificate c = cert("(x * clip(x+3,0,6)) / 6 -> hard_swish");
      c.exactness = Exactness::Reassociated;
      return applyIfLegal(g, ctx, "detect-hard-swish", "hard_swish ((x * clip(x+3,0,6)) / 6)",
                          {add, clip, mul, n}, n->result(), std::move(c),
                          [&](Node *before, const Location &loc) {
                            return g.createNode(Op::HardSwish, {x}, {}, loc, before)->result();
                          });
    }
    return false;
  }

  static bool tryHardSigmoid(Graph &g, PassContext &ctx, Node *n) {
    Node *clip = nullptr, *add = nullptr;
    Value *x = nullptr;
    Value *clipped = sixthOf(n);
    if (!clipped || !relu6Shifted(clipped, clip, add, x) || x->type() != n->result()->type())
      return false;
    return applyIfLegal(g, ctx, "detect-hard-swish", "hard_sigmoid (clip(x+3,0,6)/6)",
                        {add, clip, n}, n->result(), cert("clip(x+3,0,6)/6 -> hard_sigmoid"),
                        [&](Node *before, const Location &loc) {
                          AttrMap a = {{"alpha", 1.0 / 6.0}, {"beta", 0.5}};
                          return g.createNode(Op::HardSigmoid, {x}, a, loc, before)->result();
                        });
  }

  static bool tryHardSwish(Graph &g, PassContext &ctx, Node *mul) {
    for (int k = 0; k < 2; ++k) {
      Node *hs = producer(mul->operand(k), Op::HardSigmoid);
      Value *x = mul->operand(1 - k);
      if (!hs || hs->operand(0) != x || std::fabs(hs->f("alpha") - 1.0 / 6.0) > 1e-6 ||
          std::fabs(hs->f("beta") - 0.5) > 1e-9 || x->type() != mul->result()->type())
        continue;
      return applyIfLegal(g, ctx, "detect-hard-swish", "hard_swish (x * hard_sigmoid(x))",
                          {hs, mul}, mul->result(), cert("x * hard_sigmoid(x) -> hard_swish"),
                          [&](Node *before, const Location &loc) {
                            return g.createNode(Op::HardSwish, {x}, {}, loc, before)->result();
                          });
    }
    return false;
  }
};

} // namespace

std::unique_ptr<Pass> createDetectHardSwishPass() {
  return std::make_unique<DetectHardSwish>();
}

} // namespace aicf
