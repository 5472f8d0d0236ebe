// Fusion rule 8 (lower/fusion.cpp's list): a contraction read only as another's A (through
// elementwise nodes of its shape) is merged into the reader's group, the chained recipe
// computing the hidden rows tile by tile, when the planner prices that lower.
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

// Rules 8 and 9: whether n is a contraction the chained recipe (and a norm epilogue) can take:
// matmul over rows of A (B of rank 2, or batched like A: split-chains' slices), gemm without
// transA; f32, in fp32 (the chained recipe has no tensor-core form).
bool Partitioner::chainable(const Node &n) {
  if ((n.op() != Op::Gemm && n.op() != Op::MatMul) || n.numResults() != 1 || n.numOperands() < 2 ||
      nodePrecision(n) != Precision::F32)
    return false;
  if (n.result()->type().dtype != DType::F32 || n.operand(0)->type().dtype != DType::F32 ||
      n.operand(1)->type().dtype != DType::F32)
    return false;
  if (n.op() == Op::Gemm)
    return n.i("transA") == 0;
  return n.op() == Op::MatMul && n.operand(0)->type().shape.size() >= 2 &&
         n.operand(1)->type().shape.size() >= 2;
}

// Rule 8: both contractions run over the same batch (the chained kernel's grid).
bool Partitioner::sameBatch(const Node &c1, const Node &c2) {
  const auto &a = c1.result()->type().shape, &b = c2.result()->type().shape;
  std::vector<SymExpr> sa = symShapeOf(c1.result()->type()), sb = symShapeOf(c2.result()->type());
  return a.size() == b.size() && std::equal(a.begin(), a.end() - 2, b.begin()) &&
         std::equal(sa.begin(), sa.end() - 2, sb.begin());
}

// Rules 8 and 9: the group computing `v`, which node `n` (of group `own`) reads once, when v
// has no other reader, is no graph output and that group is alive and another; else -1.
int Partitioner::soleProducerGroup(const Node &n, const Value *v, int own) const {
  const Node *d = v->def();
  if (!d || outputs_.count(v) || usersOf(v).size() != 1 ||
      std::count(n.operands().begin(), n.operands().end(), v) != 1)
    return -1;
  const int g = groupOf_[idx(d)];
  return g < 0 || g == own || !groups_[g].alive ? -1 : g;
}

// Rule 8: whether group gi holds contraction c alone (with what rule 7 or rule 0 copied into
// it), alive and unchained.
bool Partitioner::aloneIn(int gi, const Node *c) const {
  const Group &grp = groups_[gi];
  return grp.alive && grp.anchor == c && !chained_.count(gi) &&
         std::all_of(grp.nodes.begin(), grp.nodes.end(), [&](Node *m) {
           return m == c || copies_.count({gi, idx(m)}) > 0;
         });
}

// Rule 8: contractions read only as another contraction's A (directly, or combined by
// elementwise nodes: SwiGLU's gate and up projections over the same X) merged into its
// group, where the planner prices that lower.
void Partitioner::chainContractions(Partition &p) {
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const int g2 = static_cast<int>(gi);
    Node *c2 = groups_[g2].anchor;
    if (!groups_[g2].alive || !c2 || chained_.count(g2) || !chainable(*c2))
      continue;
    Value *a = c2->operand(0);
    const int gA = soleProducerGroup(*c2, a, g2);
    if (gA < 0 || chained_.count(gA))
      continue;
    Node *c1 = groups_[gA].anchor;
    if (!c1 || !chainable(*c1) || !sameBatch(*c1, *c2))
      continue;
    // The first group: c1 and elementwise nodes of its result's shape (and copies); A its one
    // output.
    const TensorType &hshape = c1->result()->type();
    bool ok = std::all_of(groups_[gA].nodes.begin(), groups_[gA].nodes.end(), [&](Node *m) {
      return m == c1 || copies_.count({gA, idx(m)}) > 0 ||
             (m->info().has(EW) && m->numResults() == 1 && sameDims(m->result()->type(), hshape));
    });
    KernelGroup kA = kernelGroup(gA);
    if (!ok || kA.outputs.size() != 1 || kA.outputs[0] != a)
      continue;
    // Siblings: contractions over the same X, alone in their groups, read only inside the
    // first group (a gate beside an up projection).
    std::vector<int> firsts = {gA};
    std::vector<const Node *> chain = {c1};
    for (const Value *in : kA.inputs) {
      const Node *s = in->def();
      int gs = s ? groupOf_[idx(s)] : -1;
      if (gs < 0 || gs == gA || gs == g2 || !chainable(*s) ||
          std::find(firsts.begin(), firsts.end(), gs) != firsts.end())
        continue;
      if (s->operand(0) != c1->operand(0) || !sameDims(s->result()->type(), hshape) ||
          !aloneIn(gs, s) || outputs_.count(in))
        continue;
      std::vector<const Node *> rs;
      readers(in, rs);
      if (!std::all_of(rs.begin(), rs.end(), [&](const Node *u) { return contains(gA, u); }))
        continue;
      firsts.push_back(gs);
      chain.push_back(s);
    }
    int merged = 0;
    for (int f : firsts)
      merged += static_cast<int>(groups_[f].nodes.size());
    if (full(g2, static_cast<size_t>(merged)) || !mergeStaysAcyclic(g2, firsts))
      continue;
    RematDecision dec;
    dec.kind = RematDecision::Kind::Chain;
    for (const Node *c : chain)
      dec.what += cat(dec.what.empty() ? "" : " and ", c->name(), " ", c->where());
    dec.what += cat(" -> ", c2->name(), " ", c2->where());
    dec.values.push_back(a->name().empty() ? cat("%", a->id()) : a->name());
    dec.consumers = 1;
    bool fuse = opts_.chains == FusePolicy::Fuse;
    tryMerge(
        g2, firsts, fuse, dec, [&] { chained_[g2] = chain; }, [&] { chained_.erase(g2); });
    p.remat.push_back(dec);
  }
}

} // namespace aicf::fusion
