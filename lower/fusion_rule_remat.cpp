// Fusion rule 5 (lower/fusion.cpp's list): a rematerializable elementwise group read by several
// inlining groups is copied into each when the cost model prices recomputing it below storing
// it once and reloading it.
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

// The groups reading group gi's outputs, in group order; empty when one of them is a graph
// output or read through a view (those must be stored).
std::vector<int> Partitioner::consumersOf(int gi) const {
  std::vector<int> out;
  for (const Node *m : groups_[gi].nodes)
    for (const Value *r : m->results()) {
      if (g_.isOutput(r))
        return {};
      std::vector<const Node *> rs;
      readers(r, rs);
      for (const Node *u : rs) {
        if (contains(gi, u))
          continue;
        int ug = groupOf_[idx(u)];
        if (ug < 0)
          return {};
        if (std::find(out.begin(), out.end(), ug) == out.end())
          out.push_back(ug);
      }
    }
  std::sort(out.begin(), out.end());
  return out;
}

void Partitioner::rematerialize(Partition &p) {
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    Group &grp = groups_[gi];
    if (!grp.alive || grp.anchor)
      continue;
    std::vector<int> cons = consumersOf(static_cast<int>(gi));
    if (cons.size() < 2 || holdsBranchCondition(static_cast<int>(gi)))
      continue;
    // Recomputing is allowed only where rematerializable_intermediate is certified (pure,
    // deterministic, elementwise); a node annotate-properties did not check is judged by the
    // group's shape alone (an elementwise group), as the recipes' selection does.
    bool certified = std::all_of(grp.nodes.begin(), grp.nodes.end(), [](const Node *m) {
      if (m->props.has(MemProperty::RematerializableIntermediate))
        return true;
      return std::none_of(m->certificates.begin(), m->certificates.end(), [](const Certificate &c) {
        return c.property == MemProperty::RematerializableIntermediate;
      });
    });
    if (!certified)
      continue;
    bool inlinable = std::all_of(cons.begin(), cons.end(), [&](int c) {
      Caps caps = capsFor(groups_[c].anchor);
      return groups_[c].alive && caps.prologue && !caps.pricedPrologue &&
             !full(c, grp.nodes.size());
    });
    if (!inlinable)
      continue;
    // Copied into a consumer, the group's nodes read there what the group reads: refused
    // when a consumer computes, itself or through other groups, something the group reads,
    // since the group graph would then be cyclic. A consumer that really reads the group
    // cannot (the graph would already be cyclic), but consumersOf also lists, for a copy an
    // earlier rematerialisation left in this group, every group reading the copied node, and
    // those hold their own copy and may need nothing from here. An unrolled LSTM: step t's
    // cell-state group holds copies of step t-1's and reads step t's gate matmul, whose group
    // reads step t-1's state and so is listed; copied there, that group would read its own
    // result, and with step t+1's state copied in too, the matmul groups of steps t and t+1
    // would each read the other's.
    if (!staysAcyclic(externalSources({static_cast<int>(gi)}), cons))
      continue;
    int64_t inBytes = 0, outBytes = 0;
    std::unordered_set<const Value *> seen;
    RematDecision d;
    for (const Node *m : grp.nodes) {
      for (const Value *o : m->operands())
        if (!contains(static_cast<int>(gi), o->def()) && seen.insert(o).second)
          inBytes += o->type().bytes();
      for (const Value *r : m->results())
        if (!usersOf(r).empty() &&
            std::any_of(usersOf(r).begin(), usersOf(r).end(),
                        [&](const Node *u) { return !contains(static_cast<int>(gi), u); })) {
          outBytes += r->type().bytes();
          d.values.push_back(r->name().empty() ? cat("%", r->id()) : r->name());
        }
    }
    KernelGroup probe;
    probe.nodes = grp.nodes;
    RematCost c = opts_.rematCost(probe, inBytes, outBytes, static_cast<int>(cons.size()));
    d.consumers = static_cast<int>(cons.size());
    d.storeUs = c.storeUs;
    d.recomputeUs = c.recomputeUs;
    d.recomputed = c.recomputeUs < c.storeUs;
    p.remat.push_back(d);
    if (!d.recomputed)
      continue;
    for (int c2 : cons)
      for (Node *n : grp.nodes) {
        groups_[c2].nodes.push_back(n); // groupOf_ keeps the first owner; copies_ the rest
        copies_.insert({c2, idx(n)});
      }
    recomputed_.insert(grp.nodes.begin(), grp.nodes.end());
    grp.nodes.clear();
    grp.alive = false;
  }
}

} // namespace aicf::fusion
