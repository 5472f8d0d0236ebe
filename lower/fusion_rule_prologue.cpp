// Fusion rule 4 (lower/fusion.cpp's list): a pure elementwise group read by one other group
// only is merged into it and recomputed where that group reads it, never stored.
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

void Partitioner::foldPrologues(Partition &) {
  bool changed = true;
  while (changed) {
    changed = false;
    // Consumers first: visit elementwise groups by descending last node.
    std::vector<int> order;
    for (size_t gi = 0; gi < groups_.size(); ++gi)
      if (groups_[gi].alive && !groups_[gi].anchor)
        order.push_back(static_cast<int>(gi));
    auto lastNode = [&](int gi) {
      int m = -1;
      for (const Node *n : groups_[gi].nodes)
        m = std::max(m, idx(n));
      return m;
    };
    std::sort(order.begin(), order.end(), [&](int a, int b) { return lastNode(a) > lastNode(b); });
    for (int gi : order) {
      if (holdsBranchCondition(gi))
        continue;
      int consumer = soleConsumer(gi);
      if (consumer < 0 || !capsFor(groups_[consumer].anchor).prologue ||
          full(consumer, groups_[gi].nodes.size()))
        continue;
      for (Node *n : groups_[gi].nodes)
        add(consumer, n, /*epilogue=*/false);
      groups_[gi].nodes.clear();
      groups_[gi].alive = false;
      changed = true;
    }
  }
}

// The one group reading every output of group gi, or -1 (several readers, a view reader,
// a graph output, or no reader).
int Partitioner::soleConsumer(int gi) const {
  int consumer = -1;
  for (const Node *m : groups_[gi].nodes)
    for (const Value *r : m->results()) {
      if (g_.isOutput(r))
        return -1;
      std::vector<const Node *> rs;
      readers(r, rs);
      for (const Node *u : rs) {
        int ug = groupOf_[idx(u)];
        if (ug == gi)
          continue;
        if (ug < 0 || (consumer >= 0 && ug != consumer))
          return -1; // a view (no group) or a second consumer group
        consumer = ug;
      }
    }
  return consumer;
}

} // namespace aicf::fusion
