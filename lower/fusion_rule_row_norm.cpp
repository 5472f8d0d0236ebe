// Fusion rule 7 (lower/fusion.cpp's list): a row norm read only as contractions' A is copied
// into every reader's group when the planner prices the folded kernels lower.
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

// Rule 7: row norms recomputed in the contractions reading them, where that is cheaper.
void Partitioner::foldRowNorms(Partition &p) {
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    Group &grp = groups_[gi];
    Node *n = grp.anchor;
    if (!grp.alive || !n || grp.nodes.size() != 1 ||
        !n->props.has(MemProperty::RematerializableIntermediate) || !isRowNorm(*n))
      continue;
    std::optional<RowNormReaders> rd = rowNormReaders(g_, *n, nullptr);
    if (!rd)
      continue;
    // Each reader's group takes the norm and the reshapes on its own path.
    std::vector<int> cons;
    std::map<int, std::vector<Node *>> moved;
    bool ok = true;
    for (size_t i = 0; i < rd->contractions.size(); ++i) {
      int cg = groupOf_[idx(rd->contractions[i])];
      ok = ok && cg >= 0 && groups_[cg].alive && groups_[cg].anchor == rd->contractions[i];
      if (!ok)
        break;
      if (std::find(cons.begin(), cons.end(), cg) == cons.end()) {
        cons.push_back(cg);
        moved[cg].push_back(n);
      }
      for (const Node *v : rd->views[i])
        if (std::find(moved[cg].begin(), moved[cg].end(), v) == moved[cg].end())
          moved[cg].push_back(const_cast<Node *>(v));
    }
    for (int c : cons)
      ok = ok && !full(c, moved[c].size());
    // The readers take the norm's reads: none may come from them (see rule 5).
    ok = ok && staysAcyclic(externalSources({static_cast<int>(gi)}), cons);
    if (!ok || cons.empty())
      continue;
    int64_t bytes = 0; // planned bytes of the kernels priced so far
    auto price = [&](int g) {
      KernelPrice k = priceGroup(g);
      bytes += k.bytes;
      return k.us;
    };
    RematDecision d;
    d.kind = RematDecision::Kind::RowNorm;
    d.what = cat(n->name(), " ", n->where());
    d.values.push_back(n->result()->name().empty() ? cat("%", n->result()->id())
                                                   : n->result()->name());
    d.consumers = static_cast<int>(cons.size());
    d.storeUs = price(static_cast<int>(gi));
    // Tentatively copy the norm and its reshapes into every reader's group.
    // (The state to restore is taken after pricing: pricing attaches the folded layout ops
    // each group reads, as copies, to its nodes.)
    std::vector<std::vector<Node *>> before;
    for (int c : cons) {
      d.storeUs += price(c);
      before.push_back(groups_[c].nodes);
    }
    std::set<std::pair<int, int>> copiesBefore = copies_;
    const int64_t storeBytes = bytes;
    bytes = 0;
    std::set<Node *> all;
    for (int c : cons)
      for (Node *m : moved[c]) {
        groups_[c].nodes.push_back(m);
        copies_.insert({c, idx(m)});
        all.insert(m);
      }
    recomputed_.insert(all.begin(), all.end());
    d.recomputeUs = 0;
    for (int c : cons)
      d.recomputeUs += price(c);
    d.recomputed = opts_.rowNorms == RowNormPolicy::Fold ||
                   takeForm({d.recomputeUs, bytes}, {d.storeUs, storeBytes}, 1.0);
    p.remat.push_back(d);
    if (!d.recomputed) { // put everything back
      for (size_t i = 0; i < cons.size(); ++i)
        groups_[cons[i]].nodes = before[i];
      copies_ = copiesBefore;
      for (Node *m : all)
        recomputed_.erase(m);
      continue;
    }
    grp.nodes.clear();
    grp.alive = false;
  }
}

} // namespace aicf::fusion
