// fuse-epilogue: attaches the elementwise chain that consumes a contraction (matmul, gemm, conv)
// to the contraction itself, as its `epilogue`:
//   y = act(matmul(a, b) + bias) + residual  ->  matmul(a, b, bias, residual){epilogue = [add, act,
//   add]}
// Reshapes between the contraction and its consumers are views; the chain is fused through them
// (the epilogue runs in the contraction's shape, a reshape of the fused result restores the
// consumer's view, and a same-shape add operand is viewed into the contraction's shape).
// Why: each unfused step writes and re-reads the whole output; fused, the accumulator tile is
// finished in registers and stored once. The intermediates are rematerializable (pure,
// deterministic), and the steps run in the original order on the same values: exact.
#include "ir/epilogue.h"
#include "passes/match.h"
#include "passes/passes.h"
#include "support/diagnostics.h"

namespace aicf {

namespace {

std::string join(const std::vector<std::string> &xs) {
  std::string s;
  for (const std::string &x : xs)
    s += (s.empty() ? "" : ", ") + x;
  return s;
}

// The activations fuse-epilogue attaches. Every unary elementwise op is a valid step
// (ir/epilogue.h); the pass fuses these, the activations exporters place after a contraction.
std::optional<EpilogueStep> activationStep(const Node *n) {
  switch (n->op()) {
  case Op::Relu:
  case Op::Sigmoid:
  case Op::Tanh:
  case Op::Silu:
  case Op::Gelu: return epilogueStepOf(*n);
  default: return std::nullopt;
  }
}

class FuseEpilogue : public NamedPass<PassId::FuseEpilogue> {
public:
  bool run(Graph &g, PassContext &ctx) override {
    bool changed = false;
    for (Node *n : g.nodes()) {
      if (!g.hasNode(n) || !n->info().has(CONTRACT) || n->op() == Op::ConvTranspose)
        continue;
      changed |= fuseFrom(g, ctx, n);
    }
    if (changed) {
      g.sortTopologically();
      g.removeDeadCode();
    }
    return changed;
  }

private:
  // The only node using v (once). Graph-output uses are not counted here: a fused chain may end
  // at an output, and an accumulator that is itself an output is rejected, with the reason, by
  // the "consumed only inside the match" condition.
  static Node *soleUser(const Graph &g, const Value *v) {
    std::vector<Node *> us = g.users(v);
    if (us.size() != 1)
      return nullptr;
    int uses = 0;
    for (Value *o : us[0]->operands())
      uses += o == v ? 1 : 0;
    return uses == 1 ? us[0] : nullptr;
  }

  static bool fuseFrom(Graph &g, PassContext &ctx, Node *c) {
    const TensorType &accType = c->result()->type();
    std::vector<EpilogueStep> steps = epilogueSteps(*c);
    std::vector<Value *> extras; // new epilogue operands, in the contraction's shape
    std::vector<Node *> chain = {c};
    Value *cur = c->result();    // the chain's current value (maybe a reshaped view)
    Value *root = nullptr;       // last fused value
    Node *lastReshape = nullptr; // a pending view between the contraction and the chain
    while (Node *u = soleUser(g, cur)) {
      if (root && g.isOutput(cur))
        break; // an output ends the chain: it is the fused result
      if (u->op() == Op::Reshape && !lastReshape && cur == c->result()) {
        lastReshape = u;
        chain.push_back(u);
        cur = u->result();
        continue;
      }
      if (std::optional<EpilogueStep> act = activationStep(u)) {
        steps.push_back(*act);
      } else if (u->op() == Op::Add) {
        Value *other = otherOperand(u, cur);
        if (!other || other->type().dtype != accType.dtype || u->result()->type() != cur->type())
          break;
        if (lastReshape) {
          if (other->type() != cur->type())
            break; // a broadcast operand cannot be viewed into the contraction's shape
        } else {
          auto b = broadcastShapes(accType.shape, other->type().shape);
          if (!b || *b != accType.shape)
            break;
        }
        extras.push_back(other);
        steps.push_back(EpilogueStep{Op::Add, {}});
      } else {
        break;
      }
      chain.push_back(u);
      cur = u->result();
      root = cur;
    }
    if (!root)
      return false;

    Certificate cert;
    cert.property = MemProperty::RematerializableIntermediate;
    std::string stepList;
    for (size_t i = c->strs("epilogue").size(); i < steps.size(); ++i)
      stepList += (stepList.empty() ? "" : ", ") + steps[i].str();
    cert.rewrite = cat(c->name(), " + [", stepList, "] -> ", c->name(), " with epilogue");
    cert.exactness = Exactness::Exact;
    cert.conditions.push_back({"epilogue steps are pure elementwise ops", stepList, true});
    if (lastReshape)
      cert.conditions.push_back(
          {"views between contraction and epilogue are reshapes",
           cat(accType.str(), " viewed as ", lastReshape->result()->type().str()), true});
    return applyIfLegal(
        g, ctx, "fuse-epilogue", cat(c->name(), " epilogue [", stepList, "]"), chain, root,
        std::move(cert),
        [&](Node *before, const Location &loc) {
          std::vector<Value *> ops = c->operands();
          for (Value *e : extras) {
            if (lastReshape)
              e = g.createNode(Op::Reshape, {e}, reshapeAttrs(g, symShapeOf(accType)), loc, before)
                      ->result();
            ops.push_back(e);
          }
          AttrMap attrs = c->attrs;
          attrs["epilogue"] = epilogueAttr(steps);
          Value *fused = g.createNode(c->op(), ops, attrs, loc, before)->result();
          if (!lastReshape)
            return fused;
          return g
              .createNode(Op::Reshape, {fused}, reshapeAttrs(g, symShapeOf(root->type())), loc,
                          before)
              ->result();
        },
        cat(c->name(), " with epilogue [", join(epilogueAttr(steps)), "]"));
  }
};

} // namespace

std::unique_ptr<Pass> createFuseEpiloguePass() {
  return std::make_unique<FuseEpilogue>();
}

} // namespace aicf
