// See sibling_merge_choice.h.
#include "plan/sibling_merge_choice.h"

#include "passes/passes.h"
#include "support/diagnostics.h"

namespace aicf {

SiblingMergeCostFn siblingMergeCostFn(const Hardware &hw, const PlannerOptions &opts) {
  return
      [&hw, opts](const Graph &g, const std::vector<const Node *> &siblings, bool merged) -> Price {
        // A scratch graph: the operands as inputs (weights as weights: the merged form concatenates
        // them), the siblings, and, when merged, the merged contraction in their place.
        Graph scratch("sibling_merge_alternative");
        scratch.setDims(g.dims());
        ScratchOperands operand(scratch);
        std::vector<const Node *> copies;
        for (const Node *n : siblings) {
          std::vector<Value *> ops;
          for (const Value *o : n->operands())
            ops.push_back(operand(o));
          copies.push_back(scratch.addNode(n->op(), ops, {n->result()->type()}, n->attrs, n->loc));
        }
        if (merged) {
          scratch.addOutput(emitMergedContraction(scratch, copies, nullptr));
          for (const Node *c : copies)
            scratch.eraseNode(const_cast<Node *>(c));
          scratch.removeDeadCode();
        } else {
          for (const Node *c : copies)
            scratch.addOutput(c->result());
        }
        if (!hw.gpu) { // the weights as the host plan lays them out
          PassManager pm;
          pm.add(createPass("pack-weights"));
          PassContext ctx;
          pm.run(scratch, ctx);
        }
        std::string why;
        return plannedGraphCost(scratch, hw, opts, &why);
      };
}

} // namespace aicf
