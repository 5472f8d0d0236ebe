// Fusion rule 3 (lower/fusion.cpp's list): elementwise nodes join the group that produced an
// operand ("stays with its producer") where its recipe can apply them before the store, the
// group keeps its outputs' shape and count, and the group graph stays acyclic.
#include "lower/fusion_partitioner.h"

#include "ir/norm_readers.h"
#include "ir/precision.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace aicf::fusion {

// Rule 3: elementwise nodes join a producer or start a group.
void Partitioner::joinEpilogues(Partition &) {
  for (Node *n : nodes_) {
    if (!n->info().has(EW))
      continue;
    int target = -1;
    for (Value *o : n->operands()) {
      int gi = directGroup(o);
      // A branch select reads its condition from the condition's own store (isBranchSelect).
      if (isBranchSelect(*n) && gi >= 0 && gi == directGroup(n->operand(0)))
        continue;
      if (gi >= 0 && !full(gi, 1) && canJoinAsEpilogue(n, gi)) {
        target = gi;
        break;
      }
    }
    if (target >= 0)
      add(target, n, /*epilogue=*/true);
    else
      newGroup(nullptr, n);
  }
}

bool Partitioner::canJoinAsEpilogue(Node *n, int gi) const {
  const Group &grp = groups_[gi];
  Caps caps = capsFor(grp.anchor);
  if (!caps.epilogue)
    return false;
  const TensorType &type = n->result(0)->type();
  std::vector<SymExpr> shape = symShapeOf(type);
  if (grp.anchor) {
    if (!sameDims(type, grp.anchor->result(0)->type()))
      return false;
    for (Value *o : n->operands()) {
      const Node *d = o->def();
      if (!inGroup(d, gi))
        continue;
      // Only the anchor's result and epilogue values are per-output-element values.
      bool epi = d == grp.anchor || isEpilogue_[idx(d)];
      if (!epi)
        return false;
      if (!caps.multiOutput && neededOutside(o, gi, n))
        return false;
    }
  } else {
    for (const auto &[s, results] : grp.resultsByShape)
      if (s != shape)
        for (const Value *r : results)
          if (neededOutside(r, gi, n))
            return false;
  }
  for (Value *o : n->operands()) {
    std::vector<int> srcs;
    sourceGroups(o, srcs);
    for (int p : srcs) {
      // A folded layout op reads the group's values at other indices than the one being
      // computed: it cannot read them from inside the group.
      if (p == gi && floating(o->def()))
        return false;
      if (p != gi && dependsOn(p, gi))
        return false;
    }
  }
  return true;
}

} // namespace aicf::fusion
