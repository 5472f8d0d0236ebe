// detect-gelu: finds GELU written out as primitive ops and replaces it by one `gelu`:
//   erf form   0.5 * x * (1 + erf(x / sqrt(2)))                        (x/√2 as div or mul)
//   tanh form  0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))  (x^3 as pow or x*x*x)
// in any grouping of the products (exporters write 0.5*x first, or x*(...) then *0.5).
// Why: as primitives the activation materialises five to nine intermediates; as `gelu` it is
// one rematerializable elementwise op that fuses into the producing contraction's epilogue.
// Constants are matched with a relative tolerance of 1e-3 (exporters round √2, √(2/π)).
#include "passes/match.h"
#include "passes/passes.h"
#include "support/diagnostics.h"

#include <cmath>

namespace aicf {

namespace {

constexpr double kSqrt2 = 1.4142135623730951;
constexpr double kSqrt2OverPi = 0.7978845608028654;

// y = x * c (c a scalar constant) or x / (1/c): returns x, and pushes the node.
Value *scaledBy(const Graph &g, Value *v, double c, std::vector<Node *> &nodes) {
  if (Node *d = producer(v, Op::Div); d && isSplatNear(d->operand(1), 1.0 / c)) {
    nodes.push_back(d);
    return d->operand(0);
  }
  if (Node *m = producer(v, Op::Mul))
    for (int k = 0; k < 2; ++k)
      if (m->operand(k)->type().numel() == 1 && isSplatNear(m->operand(k), c)) {
        nodes.push_back(m);
        return m->operand(1 - k);
      }
  return nullptr;
}

// True when v = x^3 as pow(x, 3), x*x*x or x*x^2; pushes the nodes.
bool isCubeOf(const Graph &g, Value *v, Value *x, std::vector<Node *> &nodes) {
  if (Node *p = producer(v, Op::Pow);
      p && p->operand(0) == x && isSplatNear(p->operand(1), 3.0, 0)) {
    nodes.push_back(p);
    return true;
  }
  std::vector<Node *> muls;
  std::vector<Value *> f = mulFactors(g, v, muls);
  int xs = 0;
  for (Value *q : f) {
    if (q == x)
      ++xs;
    else if (Node *p = producer(q, Op::Pow);
             p && p->operand(0) == x && isSplatNear(p->operand(1), 2.0, 0)) {
      xs += 2;
      muls.push_back(p);
    } else
      return false;
  }
  if (xs != 3)
    return false;
  nodes.insert(nodes.end(), muls.begin(), muls.end());
  return true;
}

class DetectGelu : public NamedPass<PassId::DetectGelu> {
public:
  bool run(Graph &g, PassContext &ctx) override {
    bool changed = false;
    for (Node *n : g.nodes()) {
      if (!g.hasNode(n) || (n->op() != Op::Erf && n->op() != Op::Tanh))
        continue;
      changed |= tryMatch(g, ctx, n);
    }
    return changed;
  }

private:
  // Anchored at the erf/tanh node; walks out to the 1 + f(...) add and the enclosing product.
  static bool tryMatch(Graph &g, PassContext &ctx, Node *fn) {
    bool isErf = fn->op() == Op::Erf;
    std::vector<Node *> nodes = {fn};
    // Inside: the argument of erf / tanh.
    Value *x = nullptr;
    if (isErf) {
      x = scaledBy(g, fn->operand(0), 1.0 / kSqrt2, nodes);
    } else {
      Value *inner = scaledBy(g, fn->operand(0), kSqrt2OverPi, nodes);
      Node *add = producer(inner, Op::Add);
      if (!add)
        return false;
      for (int k = 0; k < 2 && !x; ++k) {
        Value *cand = add->operand(k);
        std::vector<Node *> sub;
        Value *cube = scaledBy(g, add->operand(1 - k), 0.044715, sub);
        if (cube && isCubeOf(g, cube, cand, sub)) {
          x = cand;
          nodes.push_back(add);
          nodes.insert(nodes.end(), sub.begin(), sub.end());
        }
      }
    }
    if (!x)
      return false;
    // Outside: 1 + fn(...), then a product whose factors are {x, 0.5, that sum}.
    std::vector<Node *> users = g.users(fn->result());
    if (users.size() != 1 || users[0]->op() != Op::Add)
      return false;
    Node *plusOne = users[0];
    if (!isSplatNear(otherOperand(plusOne, fn->result()), 1.0, 0))
      return false;
    nodes.push_back(plusOne);
    Value *sum = plusOne->result();
    // Climb through at most two muls to the root of the product.
    Value *root = nullptr;
    std::vector<Node *> rootMuls;
    Value *cur = sum;
    for (int depth = 0; depth < 2; ++depth) {
      std::vector<Node *> us = g.users(cur);
      if (us.size() != 1 || us[0]->op() != Op::Mul)
        break;
      cur = us[0]->result();
      std::vector<Node *> muls;
      std::vector<Value *> f = mulFactors(g, cur, muls);
      double scale;
      std::vector<Value *> rest = splitConstFactors(f, scale);
      bool hasX = false, hasSum = false;
      for (Value *r : rest) {
        hasX = hasX || r == x;
        hasSum = hasSum || r == sum;
      }
      if (rest.size() == 2 && hasX && hasSum && std::fabs(scale - 0.5) < 1e-6) {
        root = cur;
        rootMuls = muls;
        break;
      }
    }
    if (!root)
      return false;
    nodes.insert(nodes.end(), rootMuls.begin(), rootMuls.end());

    Certificate cert;
    cert.property = MemProperty::RematerializableIntermediate;
    cert.rewrite = cat(isErf ? "erf" : "tanh", " GELU formula (", nodes.size(), " nodes) -> gelu");
    cert.exactness = Exactness::Exact;
    cert.conditions.push_back({"floating-point input", x->type().str(), isFloat(x->type().dtype)});
    cert.conditions.push_back(
        {"result has the input's type", root->type().str(), root->type() == x->type()});
    std::string approx = isErf ? "none" : "tanh";
    return applyIfLegal(
        g, ctx, "detect-gelu", cat("gelu (", isErf ? "erf" : "tanh", " form)"), nodes, root,
        std::move(cert), [&](Node *before, const Location &loc) {
          return g.createNode(Op::Gelu, {x}, {{"approximate", approx}}, loc, before)->result();
        });
  }
};

} // namespace

std::unique_ptr<Pass> createDetectGeluPass() {
  return std::make_unique<DetectGelu>();
}

} // namespace aicf
