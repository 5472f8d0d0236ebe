// prune-padding-taps: a conv whose kernel taps at the ends of some spatial axis read only the
// zero padding, for every output position, is the conv over the remaining taps. Per spatial axis
// (input size `in`, kernel K, stride s, dilation d, pads pb / pe, output size O), tap k is live
// when some output position reads the input through it:
//   live(k)  <=>  exists o in [0, O):  0 <= o*s - pb + k*d < in
// and [klo, khi] spans the live taps. The conv keeps taps [klo, khi] of that axis (the weight
// sliced to them) with
//   pb' = pb - klo*d,   pe' = pe - (K-1-khi)*d,   d' = d (1 when one tap is left)
// Output o's tap k' = k - klo then reads o*s - pb' + k'*d = o*s - pb + k*d, the input element it
// read before, and the window's span in + pb' + pe' - (K'-1)*d' - 1 equals in + pb + pe -
// (K-1)*d - 1, so the output size O is unchanged. Dropping every dead tap can leave pb' or pe'
// < 0 (1-D, in 5, K 3, d 4, s 2, pads 5/0: the one output reads -5, -1 and 3, only tap 2 is live,
// pb' would be -3); the range then widens to klo <= floor(pb/d), khi >= K-1-floor(pe/d), so both
// pads stay >= 0. That is still correct: the range still holds every live tap, and the dead taps
// it keeps read the padding and add w * 0 as before. An axis with no live tap (every output
// reads only padding) is left alone.
// Why: DeepLabV3's ASPP has 3x3 convs with dilation 12, 24 and 36 (pads equal to the dilation) on
// a 14x14 feature map; at dilation 24 and 36 every off-centre tap reads padding, so the conv is a
// 1x1 conv with the centre tap's weights, 9x fewer products (those two convs, computing zeros,
// were half the model's time at one thread).
// Legality: the input's spatial dims are static (liveness depends on them); the weight is a
// constant; the dropped weights are finite (each dropped product is w * 0, which is 0 for finite
// w and NaN for w = NaN or +-Inf). Any rank, grouped and depthwise convs alike (the weight is
// [Cout, Cin/group, k...]; only its spatial axes are sliced).
// Exactness: exact. The dropped products are zeros (+-0), and adding a zero leaves a sum
// unchanged (up to the sign of a zero result); the kept products are the same (the kernel planned
// for the smaller conv may add them in another order, as any change of schedule may).
#include "passes/match.h"
#include "passes/passes.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

namespace aicf {

namespace {

// The taps kept on one spatial axis, [lo, hi] of the kernel's [0, k).
struct AxisTaps {
  int64_t k = 1, lo = 0, hi = 0;
  bool narrowed() const { return lo > 0 || hi < k - 1; }
};

class PrunePaddingTaps : public NamedPass<PassId::PrunePaddingTaps> {
public:
  bool run(Graph &g, PassContext &ctx) override {
    bool changed = false;
    for (Node *n : g.nodes())
      if (g.hasNode(n) && n->op() == Op::Conv)
        changed |= rewrite(g, ctx, n);
    return changed;
  }

private:
  // The live taps of one axis, widened so that both new pads are >= 0; nullopt when no tap is
  // live (the output reads only padding) or the output is empty.
  static std::optional<AxisTaps> liveTaps(int64_t in, int64_t k, int64_t out, int64_t s, int64_t d,
                                          int64_t pb, int64_t pe) {
    AxisTaps t;
    t.k = k;
    t.lo = k;
    t.hi = -1;
    for (int64_t tap = 0; tap < k; ++tap)
      for (int64_t o = 0; o < out; ++o) {
        int64_t at = o * s - pb + tap * d;
        if (at >= 0 && at < in) {
          t.lo = std::min(t.lo, tap);
          t.hi = std::max(t.hi, tap);
          break;
        }
      }
    if (t.hi < 0)
      return std::nullopt;
    t.lo = std::min(t.lo, pb / d);
    t.hi = std::max(t.hi, k - 1 - pe / d);
    return t;
  }

  static bool rewrite(Graph &g, PassContext &ctx, Node *conv) {
    const TensorType &xt = conv->operand(0)->type(), &wt = conv->operand(1)->type(),
                     &yt = conv->result()->type();
    size_t rank = xt.shape.size();
    if (rank < 3 || wt.shape.size() != rank || yt.shape.size() != rank)
      return false;
    size_t spatial = rank - 2;
    for (size_t a = 2; a < rank; ++a)
      if (xt.shape[a] < 0 || yt.shape[a] < 0 || wt.shape[a] < 1 ||
          (xt.isSymbolic() && !xt.sym[a].isConstant()) ||
          (yt.isSymbolic() && !yt.sym[a].isConstant()))
        return false; // which taps are live depends on the input's size: not a candidate
    const std::vector<int64_t> &strides = conv->ints("strides"), &dil = conv->ints("dilations"),
                               &pads = conv->ints("pads");
    std::vector<AxisTaps> taps;
    std::string dead;
    for (size_t a = 0; a < spatial; ++a) {
      std::optional<AxisTaps> t = liveTaps(xt.shape[2 + a], wt.shape[2 + a], yt.shape[2 + a],
                                           strides[a], dil[a], pads[a], pads[spatial + a]);
      if (!t)
        return false; // the output reads only padding on this axis (it is the bias): left alone
      if (t->narrowed())
        dead += cat(dead.empty() ? "" : "; ", "axis ", a, ": taps ", t->lo, "..", t->hi, " of ",
                    t->k, " kept (input ", xt.shape[2 + a], ", stride ", strides[a], ", dilation ",
                    dil[a], ", pads ", pads[a], "/", pads[spatial + a], ")");
      taps.push_back(*t);
    }
    if (dead.empty())
      return false; // every tap reads the input for some output: nothing to drop, nothing recorded
    Certificate cert;
    cert.property = MemProperty::TileCompatibleCompute;
    cert.rewrite = "conv -> conv over the taps that read the input";
    cert.exactness = Exactness::Exact;
    cert.conditions.push_back({"kernel taps read only padding", dead, true});
    const Value *w = conv->operand(1);
    bool consts = w->isWeight() && w->hasData();
    cert.conditions.push_back({"the weight is a constant with its data",
                               consts          ? "constant"
                               : w->isWeight() ? "its data is elided"
                                               : describe(w),
                               consts});
    if (consts) {
      int64_t bad = nonFiniteDropped(*w->data(), taps);
      cert.conditions.push_back({"the dropped weights are finite (w * 0 = 0)",
                                 bad == 0 ? "all finite" : cat(bad, " NaN or infinite"), bad == 0});
    }
    std::string kept; // "conv 1x1": the kernel left
    for (const AxisTaps &t : taps)
      kept += cat(kept.empty() ? "conv " : "x", t.hi - t.lo + 1);
    return applyIfLegal(
        g, ctx, "prune-padding-taps", "conv", {conv}, conv->result(), std::move(cert),
        [&](Node *before, const Location &loc) { return build(g, conv, taps, before, loc); }, kept);
  }

  // Calls f(old flat index, kept) for each element of weight w: kept when every spatial index
  // lies in its axis' [lo, hi].
  template <typename F>
  static void forEachElement(const std::vector<int64_t> &shape, const std::vector<AxisTaps> &taps,
                             F f) {
    std::vector<int64_t> idx(shape.size(), 0);
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    for (int64_t i = 0; i < n; ++i) {
      bool kept = true;
      for (size_t a = 0; a < taps.size(); ++a)
        kept = kept && idx[2 + a] >= taps[a].lo && idx[2 + a] <= taps[a].hi;
      f(i, kept);
      for (size_t a = shape.size(); a-- > 0;) {
        if (++idx[a] < shape[a])
          break;
        idx[a] = 0;
      }
    }
  }

  static int64_t nonFiniteDropped(const Tensor &w, const std::vector<AxisTaps> &taps) {
    int64_t bad = 0;
    forEachElement(w.shape(), taps,
                   [&](int64_t i, bool kept) { bad += !kept && !std::isfinite(w.getDouble(i)); });
    return bad;
  }

  static Value *build(Graph &g, Node *conv, const std::vector<AxisTaps> &taps, Node *before,
                      const Location &loc) {
    const Tensor &w = *conv->operand(1)->data();
    std::vector<int64_t> shape = w.shape();
    for (size_t a = 0; a < taps.size(); ++a)
      shape[2 + a] = taps[a].hi - taps[a].lo + 1;
    auto nw = std::make_shared<Tensor>(TensorType(w.dtype(), shape));
    size_t elem = w.byteSize() / static_cast<size_t>(w.numel());
    int64_t next = 0;
    forEachElement(w.shape(), taps, [&](int64_t i, bool kept) {
      if (kept)
        std::memcpy(nw->raw() + static_cast<size_t>(next++) * elem,
                    w.raw() + static_cast<size_t>(i) * elem, elem);
    });
    Value *wv = g.addWeight(conv->operand(1)->name() + ".live_taps", nw);
    wv->loc = loc;
    std::vector<int64_t> pads = conv->ints("pads"), dil = conv->ints("dilations");
    size_t spatial = taps.size();
    for (size_t a = 0; a < spatial; ++a) {
      pads[a] -= taps[a].lo * dil[a];
      pads[spatial + a] -= (taps[a].k - 1 - taps[a].hi) * dil[a];
      if (taps[a].lo == taps[a].hi)
        dil[a] = 1; // one tap: the dilation spaces nothing
    }
    AttrMap attrs = conv->attrs;
    attrs["pads"] = pads;
    attrs["dilations"] = dil;
    std::vector<Value *> operands = conv->operands();
    operands[1] = wv;
    Node *n = g.createNode(Op::Conv, operands, attrs, loc, before);
    AICF_CHECK(n->result()->type() == conv->result()->type(),
               "prune-padding-taps changed a conv's result type: ", conv->result()->type().str(),
               " -> ", n->result()->type().str());
    return n->result();
  }
};

} // namespace

std::unique_ptr<Pass> createPrunePaddingTapsPass() {
  return std::make_unique<PrunePaddingTaps>();
}

} // namespace aicf
