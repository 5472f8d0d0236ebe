// simplify: removes operations that do nothing and merges chains that compose, so exporter
// noise does not hide patterns or cost a kernel launch:
//   identity(x) -> x; cast to the same dtype -> x; reshape/expand to the same type -> x;
//   reshape(reshape(x)) -> reshape(x); transpose(transpose(x)) -> one transpose, or x when the
//   permutations cancel; slice covering its whole input, pad/tile by nothing, concat of one
//   operand -> x; x*1, x/1, x+0, x-0 (with a constant of ones/zeros that does not broadcast x
//   to a bigger shape) -> x.
// Every rule is exact. A rule that would rename a graph output keeps the node.
#include "passes/passes.h"

#include <algorithm>

namespace aicf {

namespace {

bool allEqual(const Value *v, double x) {
  if (!v->hasData()) // a computed value, or a weight whose data was elided: unknown
    return false;
  const Tensor &t = *v->data();
  for (int64_t i = 0; i < t.numel(); ++i)
    if (t.getDouble(i) != x)
      return false;
  return true;
}

bool isIdentityPerm(const std::vector<int64_t> &perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i))
      return false;
  return true;
}

// The value `n` can be replaced by, or null when it is not a no-op.
Value *noopSource(Graph &g, Node *n) {
  Value *x = n->numOperands() ? n->operand(0) : nullptr;
  const TensorType &out = n->result()->type();
  switch (n->op()) {
  case Op::Identity: return x;
  case Op::Cast:
  case Op::Reshape:
  case Op::Expand:
  case Op::Slice:
  case Op::Pad:
  case Op::Tile: return x->type() == out ? x : nullptr;
  case Op::Concat: return n->numOperands() == 1 ? x : nullptr;
  case Op::Transpose: return isIdentityPerm(n->ints("perm")) ? x : nullptr;
  case Op::Mul:
  case Op::Div:
  case Op::Add:
  case Op::Sub: {
    bool mulLike = n->op() == Op::Mul || n->op() == Op::Div;
    double neutral = mulLike ? 1.0 : 0.0;
    Value *a = n->operand(0), *b = n->operand(1);
    if (allEqual(b, neutral) && a->type() == out)
      return a;
    bool commutes = n->op() == Op::Mul || n->op() == Op::Add;
    if (commutes && allEqual(a, neutral) && b->type() == out)
      return b;
    return nullptr;
  }
  default: return nullptr;
  }
}

// Composes reshape(reshape(x)) and transpose(transpose(x)) into one node; returns true if done.
bool composeChain(Graph &g, Node *n) {
  if (n->op() != Op::Reshape && n->op() != Op::Transpose)
    return false;
  Node *inner = n->operand(0)->def();
  if (!inner || inner->op() != n->op())
    return false;
  if (n->op() == Op::Reshape) {
    n->setOperand(0, inner->operand(0));
  } else {
    // y[i] = t1[p2[i]] = x[p1[p2[i]]]
    const auto &p1 = inner->ints("perm"), &p2 = n->ints("perm");
    std::vector<int64_t> q(p2.size());
    for (size_t i = 0; i < p2.size(); ++i)
      q[i] = p1[p2[i]];
    n->attrs["perm"] = q;
    n->setOperand(0, inner->operand(0));
  }
  n->loc = Location::fuse({&inner->loc, &n->loc});
  if (!g.hasUses(inner->result()))
    g.eraseNode(inner);
  return true;
}

class Simplify : public NamedPass<PassId::Simplify> {
public:
  bool run(Graph &g, PassContext &) override {
    bool changed = false, again = true;
    while (again) {
      again = false;
      for (Node *n : g.nodes()) {
        if (!g.hasNode(n))
          continue; // erased by a chain composition earlier in this sweep
        if (composeChain(g, n)) {
          again = changed = true;
          continue;
        }
        if (n->numResults() != 1)
          continue;
        Value *src = noopSource(g, n);
        if (!src || !g.canReplaceKeepingNames(n->result(), src))
          continue;
        g.replaceAllUsesWith(n->result(), src);
        g.eraseNode(n);
        again = changed = true;
      }
    }
    return changed;
  }
};

} // namespace

std::unique_ptr<Pass> createSimplifyPass() {
  return std::make_unique<Simplify>();
}

} // namespace aicf
