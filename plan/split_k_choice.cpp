// See split_k_choice.h.
#include "plan/split_k_choice.h"

#include "support/diagnostics.h"

namespace aicf {

SplitKCostFn splitKCostFn(const Hardware &hw, const PlannerOptions &opts) {
  return [&hw, opts](const Graph &g, const Node &n, int splits) {
    // A scratch graph: the operands as inputs (weights as weights: the split forms regroup
    // them), the contraction, and, for splits > 1, its split form in its place.
    Graph scratch("split_k_alternative");
    scratch.setDims(g.dims());
    ScratchOperands operand(scratch);
    std::vector<Value *> ops;
    for (const Value *o : n.operands())
      ops.push_back(operand(o));
    Node *copy = scratch.addNode(n.op(), ops, {n.result()->type()}, n.attrs, n.loc);
    if (splits == 1) {
      scratch.addOutput(copy->result());
    } else {
      scratch.addOutput(emitSplitK(scratch, *copy, splits, copy));
      scratch.eraseNode(copy);
    }
    std::string why;
    return plannedGraphCost(scratch, hw, opts, &why);
  };
}

} // namespace aicf
