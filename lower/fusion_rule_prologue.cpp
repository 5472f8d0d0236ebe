// Fusion rule 4 (lower/fusion.cpp's list): a pure elementwise group read by one other group
// only is merged into it and recomputed where that group reads it, never stored. Where that
// group's anchor reads each element more than once (a conv's or pool's window, whose recipes
// inline the operand at every tap), or reads it differently with a prologue (Caps::
// pricedPrologue: a pointwise blocked conv's band), the fold is priced (tryMerge): the
// prologue is kept when recomputing it at every read costs no more than storing it once. A QDQ
// model's quantized SiLU before a 5 x 5 depthwise conv, recomputed at its 25 taps, ran 25x its
// prediction.
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

namespace {

// Whether `anchor` reads each element of its operand more than once: a window of several taps.
bool windowed(const Node *anchor) {
  if (!anchor)
    return false;
  Op op = anchor->op();
  if (op != Op::BlockedConv && op != Op::Conv && op != Op::MaxPool && op != Op::AvgPool)
    return false;
  int64_t taps = 1;
  if (anchor->hasAttr("kernel_shape")) {
    for (int64_t k : anchor->ints("kernel_shape"))
      taps *= k;
  } else { // conv: the weight's spatial dims
    const std::vector<int64_t> &w = anchor->operand(1)->type().shape;
    for (size_t d = 2; d < w.size(); ++d)
      taps *= w[d];
  }
  int64_t stride = 1;
  for (int64_t s : anchor->ints("strides"))
    stride *= s;
  return taps > stride;
}

} // namespace

// Whether the results of group gi that leave it are read only as the input (operand 0) of
// `anchor`. A priced prologue (Caps::pricedPrologue) is the input's: the pointwise blocked
// conv's band applies it to A. A weight computed at run time (RegNetY's squeeze-excitation scale
// folded into the projection's weights) would turn B's packed panels into a staged copy per
// tile: 0.19 ms in place of 0.15 for the scaling kernel and the conv.
bool Partitioner::readAsInput(int gi, const Node *anchor) const {
  for (const Node *m : groups_[gi].nodes)
    for (const Value *r : m->results()) {
      std::vector<const Node *> rs;
      readers(r, rs);
      for (const Node *u : rs) {
        if (contains(gi, u))
          continue;
        if (u != anchor || anchor->operand(0) != r)
          return false;
        for (size_t i = 1; i < anchor->numOperands(); ++i)
          if (anchor->operand(i) == r)
            return false;
      }
    }
  return true;
}

void Partitioner::foldPrologues(Partition &p) {
  std::set<int> priced;
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
      if (consumer < 0)
        continue;
      Caps caps = capsFor(groups_[consumer].anchor);
      if (!caps.prologue ||
          (caps.pricedPrologue &&
           (!opts_.kernelCost || !readAsInput(gi, groups_[consumer].anchor))) ||
          full(consumer, groups_[gi].nodes.size()))
        continue;
      if (opts_.kernelCost && (caps.pricedPrologue || windowed(groups_[consumer].anchor))) {
        if (!priced.insert(gi).second)
          continue; // priced and kept apart on an earlier sweep
        RematDecision dec;
        for (const Node *m : groups_[gi].nodes)
          for (const Value *r : m->results()) {
            std::vector<const Node *> rs;
            readers(r, rs);
            if (std::any_of(rs.begin(), rs.end(), [&](const Node *u) { return !contains(gi, u); }))
              dec.values.push_back(r->name().empty() ? cat("%", r->id()) : r->name());
          }
        dec.consumers = 1;
        changed = tryMerge(
                      consumer, {gi}, false, dec, [] {}, [] {}) ||
                  changed;
        p.remat.push_back(dec);
        continue;
      }
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
