// Fusion rule 9 (lower/fusion.cpp's list): a row norm of a contraction group's only output is
// applied as that group's epilogue (tiles of whole rows) when the planner prices that lower.
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

// Rule 9: row norms of a contraction group's output applied as that group's epilogue.
void Partitioner::foldNormEpilogues(Partition &p) {
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const int gn = static_cast<int>(gi);
    Node *n = groups_[gn].anchor;
    if (!n || !isRowNorm(*n) || !aloneIn(gn, n) || n->result()->type().dtype != DType::F32)
      continue;
    Value *v = n->operand(0);
    const int gc = soleProducerGroup(*n, v, gn);
    if (gc < 0 || normEpilogue_.count(gc))
      continue;
    Node *c = groups_[gc].anchor;
    if (!c || !chainable(*c) || !sameDims(c->result()->type(), v->type()))
      continue;
    KernelGroup kc = kernelGroup(gc);
    if (kc.outputs.size() != 1 || kc.outputs[0] != v || !kc.storeThrough.empty() ||
        full(gc, groups_[gn].nodes.size()) || !mergeStaysAcyclic(gc, {gn}))
      continue;
    RematDecision dec;
    dec.kind = RematDecision::Kind::NormEpilogue;
    dec.what = cat(n->name(), " ", n->where(), " after ", c->name(), " ", c->where());
    dec.values.push_back(v->name().empty() ? cat("%", v->id()) : v->name());
    dec.consumers = 1;
    bool fuse = opts_.normEpilogues == FusePolicy::Fuse;
    tryMerge(
        gc, {gn}, fuse, dec, [&] { normEpilogue_[gc] = n; }, [&] { normEpilogue_.erase(gc); });
    p.remat.push_back(dec);
  }
}

} // namespace aicf::fusion
