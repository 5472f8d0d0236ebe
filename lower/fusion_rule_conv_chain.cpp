// Fusion rule 10 (lower/fusion.cpp's list): inverted residuals (1 x 1 expansion, depthwise,
// 1 x 1 projection of blocked convs) merged into one kernel when the planner prices that lower.
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

// Rule 10: a 1 x 1, stride 1, unpadded dense blocked_conv (group 1) over a blocked input (an
// expansion or a projection), f32.
bool Partitioner::pointwiseBlocked(const Node &n) {
  if (n.op() != Op::BlockedConv || n.i("depthwise") != 0 || n.i("blocked_input") == 0 ||
      n.i("group") != 1 || n.result()->type().dtype != DType::F32)
    return false;
  const auto &ks = n.ints("kernel_shape"), &st = n.ints("strides"), &pd = n.ints("pads");
  return ks == std::vector<int64_t>{1, 1} && st == std::vector<int64_t>{1, 1} &&
         std::all_of(pd.begin(), pd.end(), [](int64_t v) { return v == 0; });
}

// Rule 10: a depthwise blocked_conv the ring form takes: equal strides at most the window's
// height, top padding less than it.
bool Partitioner::ringDepthwise(const Node &n) {
  if (n.op() != Op::BlockedConv || n.i("depthwise") == 0 || n.result()->type().dtype != DType::F32)
    return false;
  const auto &ks = n.ints("kernel_shape"), &st = n.ints("strides"), &pd = n.ints("pads"),
             &dl = n.ints("dilations");
  int64_t span = (ks[0] - 1) * dl[0] + 1;
  return st[0] == st[1] && st[0] <= span && pd[0] < span;
}

// Rule 10: whether group gi is its anchor conv and elementwise nodes of its result's shape
// (its activation), alive and unchained, with `v` its one output.
bool Partitioner::convLink(int gi, const Value *v) {
  const Group &grp = groups_[gi];
  const Node *c = grp.anchor;
  if (!grp.alive || !c || chained_.count(gi) || normEpilogue_.count(gi))
    return false;
  const TensorType &shape = c->result()->type();
  bool ok = std::all_of(grp.nodes.begin(), grp.nodes.end(), [&](Node *m) {
    return m == c || (!copies_.count({gi, idx(m)}) && m->info().has(EW) && m->numResults() == 1 &&
                      sameDims(m->result()->type(), shape));
  });
  if (!ok)
    return false;
  KernelGroup kg = kernelGroup(gi);
  return kg.outputs.size() == 1 && kg.outputs[0] == v && kg.storeThrough.empty();
}

// Rule 10: inverted residuals (expand -> depthwise -> project) merged into the projection's
// group, where the planner prices that lower.
void Partitioner::chainConvs(Partition &p) {
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const int gP = static_cast<int>(gi);
    Node *pj = groups_[gP].anchor;
    if (!groups_[gP].alive || !pj || chained_.count(gP) || !pointwiseBlocked(*pj) ||
        normEpilogue_.count(gP))
      continue;
    const int gD = soleProducerGroup(*pj, pj->operand(0), gP);
    if (gD < 0 || !groups_[gD].anchor || !ringDepthwise(*groups_[gD].anchor) ||
        !convLink(gD, pj->operand(0)))
      continue;
    Node *dw = groups_[gD].anchor;
    std::vector<int> from = {gD};
    std::vector<const Node *> chain = {dw};
    const int gE = soleProducerGroup(*dw, dw->operand(0), gD);
    // (The expansion reads its input in place: not through a folded layout op.)
    if (gE >= 0 && groups_[gE].anchor && pointwiseBlocked(*groups_[gE].anchor) &&
        !floating(groups_[gE].anchor->operand(0)->def()) && convLink(gE, dw->operand(0))) {
      from.insert(from.begin(), gE);
      chain.insert(chain.begin(), groups_[gE].anchor);
    }
    if (full(gP, chain.size()) || !mergeStaysAcyclic(gP, from))
      continue;
    RematDecision dec;
    dec.kind = RematDecision::Kind::ConvChain;
    for (const Node *c : chain) {
      dec.what += cat(c->name(), " ", c->where(), " -> ");
      const Value *v = c->result();
      dec.values.push_back(v->name().empty() ? cat("%", v->id()) : v->name());
    }
    dec.what += cat(pj->name(), " ", pj->where());
    dec.consumers = 1;
    bool fuse = opts_.convChains == FusePolicy::Fuse;
    tryMerge(
        gP, from, fuse, dec, [&] { chained_[gP] = chain; }, [&] { chained_.erase(gP); });
    p.remat.push_back(dec);
  }
}

} // namespace aicf::fusion
