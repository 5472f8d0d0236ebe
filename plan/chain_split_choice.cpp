// See chain_split_choice.h.
#include "plan/chain_split_choice.h"

#include "passes/passes.h"
#include "plan/split_k_choice.h"
#include "support/diagnostics.h"

namespace aicf {

ChainSplitCostFn chainSplitCostFn(const Hardware &hw, const PlannerOptions &opts, bool splitK) {
  return [&hw, opts, splitK](const Graph &g, const Node &c1, const Node &c2, int splits) -> Price {
    // A scratch graph: the operands as inputs (weights as weights: the split forms slice them),
    // the two contractions, and, for splits > 1, the split form in their place.
    Graph scratch("chain_split_alternative");
    scratch.setDims(g.dims());
    ScratchOperands operand(scratch);
    std::vector<Value *> ops1, ops2;
    for (const Value *o : c1.operands())
      ops1.push_back(operand(o));
    Node *n1 = scratch.addNode(c1.op(), ops1, {c1.result()->type()}, c1.attrs, c1.loc);
    operand.computed(c1.result(), n1->result());
    for (const Value *o : c2.operands())
      ops2.push_back(operand(o));
    Node *n2 = scratch.addNode(c2.op(), ops2, {c2.result()->type()}, c2.attrs, c2.loc);
    if (splits == 1) {
      scratch.addOutput(n2->result());
    } else {
      scratch.addOutput(emitChainSplit(scratch, *n1, *n2, splits, n2));
      scratch.eraseNode(n2);
      scratch.eraseNode(n1);
      scratch.removeDeadCode();
    }
    if (!hw.gpu || (splits == 1 && splitK)) {
      // Host: the weights as the host plan lays them out (the split ones are not packed). GPU:
      // the chain as it is with its contractions split over K where split-k would split them.
      PassManager pm;
      if (hw.gpu) {
        SplitKOptions so;
        so.cost = splitKCostFn(hw, opts);
        pm.add(createSplitKPass(std::move(so)));
      } else {
        pm.add(createPass("pack-weights"));
      }
      PassContext ctx;
      pm.run(scratch, ctx);
    }
    // The split forms exist for rule 8: priced with each slice's pair chained (where a chained
    // schedule fits). The chain as it is: rule 8's own choice between one kernel and two.
    std::string why;
    return plannedGraphCost(scratch, hw, opts, &why,
                            splits == 1 ? FusePolicy::Cost : FusePolicy::Fuse);
  };
}

} // namespace aicf
