// conv-transpose-as-conv: a 2-D conv_transpose whose kernel is a multiple of its stride (per axis,
// dilation 1) is s_h x s_w phase convolutions, stacked as one conv's output rows, followed by a
// pixel shuffle and a crop. Along one axis (kernel K = M s, pads p0 / p1, output padding a), the
// uncropped output u = q s + r (r < s the phase) receives the taps k = r + m s, m < M, from the
// input rows q - m:
//   y[n, o, u - p0] = b[o] + sum_c sum_m x[n, c, q - m] * W[c, o, r + m s]
// which is a conv of x with the phase's sub-kernel flipped, W_r[t] = W[r + (M - 1 - t) s], over
// M - 1 rows of zero padding on each side (more at the end where the output padding reaches
// past the last tap: those rows get the bias alone). So
//   z = conv(x, W', b', pads M - 1)     W'[(o*s_h + r)*s_w + r', c', t, t'] =
//                                           W[g*Cin/G + c', o', r + (M_h-1-t) s_h, r' + (M_w-1-t')
//                                           s_w]
//                                       b'[(o*s_h + r)*s_w + r'] = b[o]
//   y = slice(reshape(transpose(reshape(z, [N, Cout, s_h, s_w, Hq, Wq]), [0, 1, 4, 2, 5, 3]),
//             [N, Cout, Hq*s_h, Wq*s_w]), the rows [p0, p0 + H_out) and columns likewise)
// with o = g*Cout/G + o' for group g (the conv keeps the groups: its output rows are group-major
// like conv_transpose's output channels). Kernel = stride (UNet's and FPN's 2 x 2 / stride 2
// upsamplers) is M = 1: a 1 x 1 conv, no padding, and no crop without pads.
// Why: conv_transpose has one kernel form, a gather per output pixel over every tap, with no
// blocked or GEMM form (UNet and FPN decoders spent 40-80% of their time in it, 4-6x their ONNX
// Runtime time; a 4 x 4 / stride 2 decoder ran 50-70x ORT). A conv is the contraction every
// target has a fast form for (the host's channel-blocked conv, the GPU's tiled contraction), and
// the pixel shuffle and crop are layout: reshapes, a transpose and a slice that fold into their
// readers' index maps.
// A kernel that is no multiple of its stride (3 x 3 / stride 2) keeps the direct form: some
// phase would have fewer taps, and the zero taps padding it out would multiply the input by 0
// (an infinite input then gives NaN where the direct form gives a number).
// Exactness: reassociated (exact when kernel = stride: one product per input channel). Each output
// sums the same products over (c, m) in another order, and products of the padding (0 * w, finite
// weights: checked) that add nothing.
#include "passes/match.h"
#include "passes/passes.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <cmath>

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
    bool multiple = strides.size() == 2 && strides[0] > 0 && strides[1] > 0 &&
                    kernel[0] % strides[0] == 0 && kernel[1] % strides[1] == 0 &&
                    all(ct->ints("dilations"), 1) && pads.size() == 4 && outPad.size() == 2;
    cert.conditions.push_back(
        {"the kernel is a multiple of the stride along each axis (every phase has the same taps; "
         "dilation 1)",
         cat("kernel ", wt.shape[2], "x", wt.shape[3], ", strides ", strides[0], "x", strides[1]),
         multiple});
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

  // One axis of the phase form: M taps per phase, the conv's pads, its output length Hq.
  struct Axis {
    int64_t s, M, padEnd, len;
  };
  static Axis axis(int64_t len, int64_t k, int64_t s, int64_t p0, int64_t p1, int64_t a) {
    Axis ax{s, k / s, k / s - 1, 0};
    // The uncropped output s * (len + M - 1) must reach p0 + the output's length; the output
    // padding may reach further (rows of bias alone): more zero rows at the end.
    int64_t need = p0 + outLen(len, k, s, p0, p1, a) - s * (len + ax.M - 1);
    if (need > 0)
      ax.padEnd += (need + s - 1) / s;
    ax.len = len + ax.padEnd; // the conv's output: len + (M - 1) + padEnd - (M - 1)
    return ax;
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
    int64_t phases = ah.s * aw.s;
    auto nw = std::make_shared<Tensor>(TensorType(w.dtype(), {cout * phases, ipg, ah.M, aw.M}));
    auto nb = std::make_shared<Tensor>(TensorType(w.dtype(), {cout * phases}));
    for (int64_t o = 0; o < cout; ++o) {
      int64_t grp = o / opg, ol = o % opg;
      double b = ct->numOperands() == 3 ? ct->operand(2)->data()->getDouble(o) : 0.0;
      for (int64_t r = 0; r < ah.s; ++r)
        for (int64_t rr = 0; rr < aw.s; ++rr) {
          int64_t row = (o * ah.s + r) * aw.s + rr;
          nb->setDouble(row, b);
          for (int64_t c = 0; c < ipg; ++c)
            for (int64_t t = 0; t < ah.M; ++t)
              for (int64_t tt = 0; tt < aw.M; ++tt) {
                int64_t ky = r + (ah.M - 1 - t) * ah.s, kx = rr + (aw.M - 1 - tt) * aw.s;
                nw->setDouble(((row * ipg + c) * ah.M + t) * aw.M + tt,
                              w.getDouble((((grp * ipg + c) * opg + ol) * kh + ky) * kw + kx));
              }
        }
    }
    std::string base = ct->operand(1)->name();
    Value *wv = g.addWeight(base + ".as_conv", nw);
    Value *bv = g.addWeight(base + ".as_conv_bias", nb);
    wv->loc = bv->loc = loc;
    int64_t n = xs[0];
    AttrMap attrs = {{"strides", std::vector<int64_t>{1, 1}},
                     {"pads", std::vector<int64_t>{ah.M - 1, aw.M - 1, ah.padEnd, aw.padEnd}},
                     {"dilations", std::vector<int64_t>{1, 1}},
                     {"group", groups}};
    Value *z = g.createNode(Op::Conv, {ct->operand(0), wv, bv}, attrs, loc, before)->result();
    z = g.createNode(Op::Reshape, {z},
                     {{"shape", std::vector<int64_t>{n, cout, ah.s, aw.s, ah.len, aw.len}}}, loc,
                     before)
            ->result();
    z = g.createNode(Op::Transpose, {z}, {{"perm", std::vector<int64_t>{0, 1, 4, 2, 5, 3}}}, loc,
                     before)
            ->result();
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
