// conv-transpose-as-conv: a 2-D conv_transpose (dilation 1, kernel at least the stride) is s_h x
// s_w phase convolutions, a pixel shuffle of their outputs and a crop. Along one axis (kernel K,
// stride s, pads p0 / p1, output padding a), the uncropped output u = q s + r (r < s the phase)
// receives the taps k = r + m s, m < M_r = ceil((K - r) / s), from the input rows q - m:
//   y[n, o, u - p0] = b[o] + sum_c sum_m x[n, c, q - m] * W[c, o, r + m s]
// which is a conv of x with the phase's sub-kernel flipped, W_r[t] = W[r + (M_r - 1 - t) s], over
// M_r - 1 rows of zero padding before and enough after for Hq = len + M_0 - 1 outputs (more
// where the output padding reaches past the last tap: those rows get the bias alone). When the
// kernel is a multiple of the stride every phase has M = K / s taps and the phases are one conv,
// its rows phase-major (r, r', o):
//   z = conv(x, W', b', pads M - 1)     W'[(r*s_w + r')*Cout + o, c, t, t'] =
//                                           W[c, o, r + (M_h-1-t) s_h, r' + (M_w-1-t') s_w]
//                                       b'[(r*s_w + r')*Cout + o] = b[o]
//   y = slice(reshape(transpose(reshape(z, [N, s_h, s_w, Cout, Hq, Wq]), [0, 3, 4, 1, 5, 2]),
//             [N, Cout, Hq*s_h, Wq*s_w]), the rows [p0, p0 + H_out) and columns likewise)
// a pixel shuffle in DCR order, whose 16-channel blocks move whole on the host's blocked layout;
// a grouped one (the conv keeps the groups, so its output rows stay group-major like
// conv_transpose's output channels, o = g*Cout/G + o') has rows (o, r, r') and shuffles from
// [N, Cout, s_h, s_w, Hq, Wq] with perm [0, 1, 4, 2, 5, 3]. Otherwise (3 x 3 / stride 2: 2 and 1
// taps per axis) each phase is a conv with exactly its taps, concatenated phase-major and shuffled
// in DCR order as above: no tap is padded with a zero weight, which would multiply the input by 0
// (an infinite input would give NaN where the direct form gives a number). Those convs are
// aligned to the crop where the pads allow (see Aligned): conv f computes output phase f, the
// outputs y = j s + f the crop keeps, from input phase (f + p0) mod s shifted by (f + p0) div s
// rows, so a 3 x 3 / stride 2 / pads 1 / output padding 1 decoder computes no cropped row and
// needs no crop (the uncropped phases of 8 x 8 inputs are 9 x 9). A kernel that is a multiple
// of the stride runs as such aligned convs too, one per phase, when its output channels fill
// whole 16-channel blocks and the one conv would compute more than the crop keeps (DCGAN's 4 x 4
// / stride 2 / pads 1: (len + 1)^2 outputs a phase for len^2 kept). Kernel = stride (UNet's and
// FPN's 2 x 2 / stride 2 upsamplers) is M = 1: a 1 x 1 conv, no padding, and no crop without
// pads.
// Why: conv_transpose has one kernel form, a gather per output pixel over every tap, with no
// blocked or GEMM form (UNet and FPN decoders spent 40-80% of their time in it, 4-6x their ONNX
// Runtime time; a 4 x 4 / stride 2 decoder ran 50-70x ORT). A conv is the contraction every
// target has a fast form for (the host's channel-blocked conv, the GPU's tiled contraction), and
// the concat, pixel shuffle and crop are layout: a concat its producers write in place, reshapes,
// a transpose and a slice that fold into their readers' index maps.
// Exactness: reassociated (exact when kernel = stride: one product per input channel). Each output
// sums the same products over (c, m) in another order, and products of the conv's zero padding
// (0 * w, finite weights: checked) that add nothing.
#include "passes/match.h"
#include "passes/passes.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

namespace aicf {

namespace {

class ConvTransposeAsConv : public NamedPass<PassId::ConvTransposeAsConv> {
public:
  bool run(Graph &g, PassContext &ctx) override {
    bool changed = false;
    for (Node *n : g.nodes())
      if (g.hasNode(n) && n->op() == Op::ConvTranspose)
        changed |= rewrite(g, ctx, n);
    return changed;
  }

private:
  static bool all(const std::vector<int64_t> &v, int64_t x) {
    return std::all_of(v.begin(), v.end(), [&](int64_t e) { return e == x; });
  }

  // The output length along one axis of a conv_transpose over `len` inputs.
  static int64_t outLen(int64_t len, int64_t k, int64_t s, int64_t p0, int64_t p1, int64_t a) {
    return s * (len - 1) + k - p0 - p1 + a;
  }

  static bool rewrite(Graph &g, PassContext &ctx, Node *ct) {
    const TensorType &xt = ct->operand(0)->type(), &wt = ct->operand(1)->type();
    if (xt.shape.size() != 4 || wt.shape.size() != 4)
      return false; // 2-D only (not a candidate: nothing to record)
    Certificate cert;
    cert.property = MemProperty::TileCompatibleCompute;
    cert.rewrite = "conv_transpose -> phase convs + pixel shuffle";
    cert.exactness = Exactness::Reassociated;
    std::vector<int64_t> strides = ct->ints("strides"), kernel = {wt.shape[2], wt.shape[3]};
    if (strides == kernel) // one product per input channel, summed in the same order
      cert.exactness = Exactness::Exact;
    std::vector<int64_t> pads = ct->ints("pads");
    std::vector<int64_t> outPad =
        ct->hasAttr("output_padding") ? ct->ints("output_padding") : std::vector<int64_t>{0, 0};
    bool phased = strides.size() == 2 && strides[0] > 0 && strides[1] > 0 &&
                  kernel[0] >= strides[0] && kernel[1] >= strides[1] &&
                  all(ct->ints("dilations"), 1) && pads.size() == 4 && outPad.size() == 2;
    cert.conditions.push_back(
        {"every phase has a tap (kernel >= stride along each axis, dilation 1)",
         cat("kernel ", wt.shape[2], "x", wt.shape[3], ", strides ", strides[0], "x", strides[1],
             ", dilations ", shapeStr(ct->ints("dilations"))),
         phased});
    bool consts =
        ct->operand(1)->isWeight() && (ct->numOperands() < 3 || ct->operand(2)->isWeight());
    cert.conditions.push_back(
        {"weights and bias are constants", consts ? "constant" : "computed at run time", consts});
    bool finite = consts && ct->operand(1)->data();
    for (int64_t i = 0; finite && i < ct->operand(1)->data()->numel(); ++i)
      finite = std::isfinite(ct->operand(1)->data()->getDouble(i));
    cert.conditions.push_back({"the weights are finite (the padding's products add 0)",
                               finite ? "finite" : "not all finite", finite});
    bool fixed = xt.isStatic() && !xt.isSymbolic() && xt.dtype == DType::F32;
    cert.conditions.push_back({"f32 input of fixed shape", xt.str(), fixed});
    const TensorType &yt = ct->result()->type();
    bool shaped =
        strides.size() == 2 && pads.size() == 4 && outPad.size() == 2 && fixed && yt.isStatic() &&
        yt.shape.size() == 4 &&
        yt.shape[2] == outLen(xt.shape[2], kernel[0], strides[0], pads[0], pads[2], outPad[0]) &&
        yt.shape[3] == outLen(xt.shape[3], kernel[1], strides[1], pads[1], pads[3], outPad[1]);
    cert.conditions.push_back(
        {"the output is as long as the pads and output padding say", yt.str(), shaped});
    // Every candidate is recorded (--explain): a rejected one says why it keeps the direct form.
    return applyIfLegal(
        g, ctx, "conv-transpose-as-conv", "conv_transpose", {ct}, ct->result(), std::move(cert),
        [&](Node *before, const Location &loc) { return build(g, ct, before, loc); },
        "phase convs + pixel shuffle");
  }

  // One axis of the phase form: the stride, the most taps of a phase (phase 0's), the conv's end
  // padding for them, the phase outputs' length Hq, and phase r's taps, ceil((K - r) / s).
  struct Axis {
    int64_t s, M, padEnd, len;
    int64_t taps(int64_t k, int64_t r) const { return (k - r + s - 1) / s; }
  };
  static Axis axis(int64_t len, int64_t k, int64_t s, int64_t p0, int64_t p1, int64_t a) {
    Axis ax{s, (k + s - 1) / s, (k + s - 1) / s - 1, 0};
    // The uncropped output s * (len + M - 1) must reach p0 + the output's length; the output
    // padding may reach further (rows of bias alone): more zero rows at the end.
    int64_t need = p0 + outLen(len, k, s, p0, p1, a) - s * (len + ax.M - 1);
    if (need > 0)
      ax.padEnd += (need + s - 1) / s;
    ax.len = len + ax.padEnd; // the conv's output: len + (M - 1) + padEnd - (M - 1)
    return ax;
  }

  // One output phase f of an axis (outputs y = j s + f, j < ceil(L / s)), aligned to the crop:
  // the uncropped output u = y + p0 is input phase r = (f + p0) mod s, shifted by
  // d = (f + p0) div s input rows, so its conv (phase r's M_r taps) has M_r - 1 - d rows of zero
  // padding before and ceil(L / s) - len + d after. None where either would be negative (pads
  // larger than the kernel): the uncropped form then.
  struct Aligned {
    int64_t r, before, after;
  };
  static std::optional<std::vector<Aligned>> aligned(int64_t len, int64_t k, int64_t s, int64_t p0,
                                                     int64_t outLen) {
    std::vector<Aligned> out;
    const int64_t lq = (outLen + s - 1) / s;
    for (int64_t f = 0; f < s; ++f) {
      int64_t r = (f + p0) % s, d = (f + p0) / s, m = (k - r + s - 1) / s;
      Aligned a{r, m - 1 - d, lq - len + d};
      if (a.before < 0 || a.after < 0)
        return std::nullopt;
      out.push_back(a);
    }
    return out;
  }

  static Value *build(Graph &g, Node *ct, Node *before, const Location &loc) {
    const Tensor &w = *ct->operand(1)->data();
    const std::vector<int64_t> &xs = ct->operand(0)->type().shape;
    const std::vector<int64_t> &ys = ct->result()->type().shape;
    std::vector<int64_t> strides = ct->ints("strides"), pads = ct->ints("pads");
    std::vector<int64_t> outPad =
        ct->hasAttr("output_padding") ? ct->ints("output_padding") : std::vector<int64_t>{0, 0};
    int64_t cin = w.shape()[0], opg = w.shape()[1], kh = w.shape()[2], kw = w.shape()[3];
    int64_t groups = ct->i("group"), ipg = cin / groups, cout = opg * groups;
    Axis ah = axis(xs[2], kh, strides[0], pads[0], pads[2], outPad[0]);
    Axis aw = axis(xs[3], kw, strides[1], pads[1], pads[3], outPad[1]);
    int64_t n = xs[0], phases = ah.s * aw.s;
    std::string base = ct->operand(1)->name();
    // Phase (r, rr)'s taps W_r[t] = W[r + (M_r - 1 - t) s] along each axis, output channel o at
    // row o * step + at of a conv weight [rows, Cin / G, mh, mw] (its bias b[o] likewise).
    auto fill = [&](Tensor &nw, Tensor &nb, int64_t r, int64_t rr, int64_t step, int64_t at,
                    int64_t mh, int64_t mw) {
      for (int64_t o = 0; o < cout; ++o) {
        int64_t grp = o / opg, ol = o % opg, row = o * step + at;
        nb.setDouble(row, ct->numOperands() == 3 ? ct->operand(2)->data()->getDouble(o) : 0.0);
        for (int64_t c = 0; c < ipg; ++c)
          for (int64_t t = 0; t < mh; ++t)
            for (int64_t tt = 0; tt < mw; ++tt) {
              int64_t ky = r + (mh - 1 - t) * ah.s, kx = rr + (mw - 1 - tt) * aw.s;
              nw.setDouble(((row * ipg + c) * mh + t) * mw + tt,
                           w.getDouble((((grp * ipg + c) * opg + ol) * kh + ky) * kw + kx));
            }
      }
    };
    // A conv of the input with mh x mw taps and zero padding `pads` (rows, columns before, then
    // after).
    auto conv = [&](const std::string &suffix, int64_t rows, int64_t mh, int64_t mw,
                    std::vector<int64_t> pads,
                    const std::function<void(Tensor &, Tensor &)> &weights) {
      auto nw = std::make_shared<Tensor>(TensorType(w.dtype(), {rows, ipg, mh, mw}));
      auto nb = std::make_shared<Tensor>(TensorType(w.dtype(), {rows}));
      weights(*nw, *nb);
      Value *wv = g.addWeight(base + ".as_conv" + suffix, nw);
      Value *bv = g.addWeight(base + ".as_conv_bias" + suffix, nb);
      wv->loc = bv->loc = loc;
      AttrMap attrs = {{"strides", std::vector<int64_t>{1, 1}},
                       {"pads", std::move(pads)},
                       {"dilations", std::vector<int64_t>{1, 1}},
                       {"group", groups}};
      return g.createNode(Op::Conv, {ct->operand(0), wv, bv}, attrs, loc, before)->result();
    };
    // The phase outputs' channels are phase-major, (r, rr, o), shuffled from
    // [N, s_h, s_w, Cout, Hq, Wq] (DCR order: on the host's blocked layout that shuffle moves
    // whole channel blocks, passes/block_channels.cpp). A grouped conv of all phases keeps its
    // rows group-major, (o, r, rr), shuffled from [N, Cout, s_h, s_w, Hq, Wq].
    const bool uniform = kh % ah.s == 0 && kw % aw.s == 0, phaseMajor = !uniform || groups == 1;
    std::optional<std::vector<Aligned>> alH = aligned(xs[2], kh, ah.s, pads[0], ys[2]),
                                        alW = aligned(xs[3], kw, aw.s, pads[1], ys[3]);
    // Aligned per-phase convs for a uniform kernel too (4 x 4 / stride 2 / pads 1) where the
    // uncropped phases compute more outputs than the crop keeps and each phase's channels fill
    // whole 16-channel blocks (with fewer, four convs of Cout channels pad four times as many
    // lanes as one conv of all phases).
    const int64_t lqh = (ys[2] + ah.s - 1) / ah.s, lqw = (ys[3] + aw.s - 1) / aw.s;
    const bool alignUniform =
        uniform && groups == 1 && cout % 16 == 0 && ah.len * aw.len > lqh * lqw;
    if ((!uniform || alignUniform) && alH && alW) {
      // A conv per output phase (y = j s + f along each axis) with exactly its taps, its
      // outputs exactly the ones the crop keeps: concatenated phase-major, shuffled in DCR
      // order, and cropped only at the end where the output's length is no multiple of the
      // stride.
      std::vector<Value *> parts;
      for (const Aligned &fh : *alH)
        for (const Aligned &fw : *alW) {
          int64_t mh = ah.taps(kh, fh.r), mw = aw.taps(kw, fw.r);
          parts.push_back(
              conv(cat(".phase", fh.r, "_", fw.r), cout, mh, mw,
                   {fh.before, fw.before, fh.after, fw.after},
                   [&](Tensor &nw, Tensor &nb) { fill(nw, nb, fh.r, fw.r, 1, 0, mh, mw); }));
        }
      Value *z =
          parts.size() == 1
              ? parts[0]
              : g.createNode(Op::Concat, parts, {{"axis", int64_t(1)}}, loc, before)->result();
      z = g.createNode(Op::Reshape, {z},
                       {{"shape", std::vector<int64_t>{n, ah.s, aw.s, cout, lqh, lqw}}}, loc,
                       before)
              ->result();
      z = g.createNode(Op::Transpose, {z}, {{"perm", std::vector<int64_t>{0, 3, 4, 1, 5, 2}}}, loc,
                       before)
              ->result();
      z = g.createNode(Op::Reshape, {z},
                       {{"shape", std::vector<int64_t>{n, cout, lqh * ah.s, lqw * aw.s}}}, loc,
                       before)
              ->result();
      if (lqh * ah.s == ys[2] && lqw * aw.s == ys[3])
        return z;
      AttrMap crop = {{"starts", std::vector<int64_t>{0, 0}},
                      {"ends", std::vector<int64_t>{ys[2], ys[3]}},
                      {"axes", std::vector<int64_t>{2, 3}},
                      {"steps", std::vector<int64_t>{1, 1}}};
      return g.createNode(Op::Slice, {z}, crop, loc, before)->result();
    }
    // Otherwise the phases of the uncropped output, cropped after the shuffle.
    const std::vector<int64_t> uncropped = {ah.M - 1, aw.M - 1, ah.len - xs[2], aw.len - xs[3]};
    Value *z = nullptr;
    if (uniform) {
      // Every phase has M_h x M_w taps: one conv.
      z = conv("", cout * phases, ah.M, aw.M, uncropped, [&](Tensor &nw, Tensor &nb) {
        for (int64_t r = 0; r < ah.s; ++r)
          for (int64_t rr = 0; rr < aw.s; ++rr)
            fill(nw, nb, r, rr, phaseMajor ? 1 : phases, (r * aw.s + rr) * (phaseMajor ? cout : 1),
                 ah.M, aw.M);
      });
    } else {
      // Phases with different taps (3 x 3 / stride 2: 2 and 1 per axis): a conv per phase, each
      // with exactly its taps, concatenated.
      std::vector<Value *> parts;
      for (int64_t r = 0; r < ah.s; ++r)
        for (int64_t rr = 0; rr < aw.s; ++rr) {
          int64_t mh = ah.taps(kh, r), mw = aw.taps(kw, rr);
          parts.push_back(conv(cat(".phase", r, "_", rr), cout, mh, mw,
                               {mh - 1, mw - 1, ah.len - xs[2], aw.len - xs[3]},
                               [&](Tensor &nw, Tensor &nb) { fill(nw, nb, r, rr, 1, 0, mh, mw); }));
        }
      z = g.createNode(Op::Concat, parts, {{"axis", int64_t(1)}}, loc, before)->result();
    }
    std::vector<int64_t> split = phaseMajor
                                     ? std::vector<int64_t>{n, ah.s, aw.s, cout, ah.len, aw.len}
                                     : std::vector<int64_t>{n, cout, ah.s, aw.s, ah.len, aw.len};
    std::vector<int64_t> perm = phaseMajor ? std::vector<int64_t>{0, 3, 4, 1, 5, 2}
                                           : std::vector<int64_t>{0, 1, 4, 2, 5, 3};
    z = g.createNode(Op::Reshape, {z}, {{"shape", split}}, loc, before)->result();
    z = g.createNode(Op::Transpose, {z}, {{"perm", perm}}, loc, before)->result();
    int64_t fullH = ah.len * ah.s, fullW = aw.len * aw.s;
    z = g.createNode(Op::Reshape, {z}, {{"shape", std::vector<int64_t>{n, cout, fullH, fullW}}},
                     loc, before)
            ->result();
    if (fullH == ys[2] && fullW == ys[3])
      return z;
    AttrMap crop = {{"starts", std::vector<int64_t>{pads[0], pads[1]}},
                    {"ends", std::vector<int64_t>{pads[0] + ys[2], pads[1] + ys[3]}},
                    {"axes", std::vector<int64_t>{2, 3}},
                    {"steps", std::vector<int64_t>{1, 1}}};
    return g.createNode(Op::Slice, {z}, crop, loc, before)->result();
  }
};

} // namespace

std::unique_ptr<Pass> createConvTransposeAsConvPass() {
  return std::make_unique<ConvTransposeAsConv>();
}

} // namespace aicf
