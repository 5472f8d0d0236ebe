// conv-transpose-as-conv: a 2-D conv_transpose whose kernel equals its stride (no padding, no
// dilation, no output padding) is a 1 x 1 conv followed by a pixel shuffle:
//   y[n, o, h*s + p, w*t + q] = b[o] + sum_c x[n, c, h, w] * W[c, o, p, q]
// because each output pixel receives exactly one tap (the strides tile the output with the
// kernel, without overlap). So
//   z = conv(x, W', b')             W'[(o*kh + p)*kw + q, c', 0, 0] = W[g*Cin/G + c', o', p, q]
//                                   b'[(o*kh + p)*kw + q] = b[o]
//   y = reshape(transpose(reshape(z, [N, Cout, kh, kw, H, W]), [0, 1, 4, 2, 5, 3]),
//               [N, Cout, H*kh, W*kw])
// with o = g*Cout/G + o' for group g (the conv keeps the groups: its output rows are group-major
// like conv_transpose's output channels).
// Why: conv_transpose has one kernel form, a gather per output pixel over every tap, with no
// blocked or GEMM form (UNet and FPN decoders, 2 x 2 / stride 2, spent 40-80% of their time in it,
// 4-6x their ONNX Runtime time). A 1 x 1 conv is a GEMM over pixels, the contraction every target
// has a fast form for (the host's channel-blocked conv, the GPU's tiled contraction), and the pixel
// shuffle is layout: reshapes and a transpose that fold into their readers' index maps.
// Overlapping kernels (kernel > stride, e.g. 4 x 4 / stride 2) keep the direct form.
// Exactness: exact (the same products summed in the same order over c; the bias added once).
#include "passes/match.h"
#include "passes/passes.h"
#include "support/diagnostics.h"

#include <algorithm>

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

  static bool rewrite(Graph &g, PassContext &ctx, Node *ct) {
    const TensorType &xt = ct->operand(0)->type(), &wt = ct->operand(1)->type();
    if (xt.shape.size() != 4 || wt.shape.size() != 4)
      return false; // 2-D only (not a candidate: nothing to record)
    Certificate cert;
    cert.property = MemProperty::TileCompatibleCompute;
    cert.rewrite = "conv_transpose (kernel = stride) -> 1x1 conv + pixel shuffle";
    cert.exactness = Exactness::Exact;
    std::vector<int64_t> strides = ct->ints("strides"), kernel = {wt.shape[2], wt.shape[3]};
    bool tiles = strides == kernel && all(ct->ints("pads"), 0) && all(ct->ints("dilations"), 1) &&
                 (!ct->hasAttr("output_padding") || all(ct->ints("output_padding"), 0));
    cert.conditions.push_back(
        {"the kernel tiles the output (kernel = stride, no pads, dilation or output padding)",
         cat("kernel ", wt.shape[2], "x", wt.shape[3], ", strides ", strides[0], "x", strides[1]),
         tiles});
    bool consts =
        ct->operand(1)->isWeight() && (ct->numOperands() < 3 || ct->operand(2)->isWeight());
    cert.conditions.push_back(
        {"weights and bias are constants", consts ? "constant" : "computed at run time", consts});
    bool fixed = xt.isStatic() && !xt.isSymbolic() && xt.dtype == DType::F32;
    cert.conditions.push_back({"f32 input of fixed shape", xt.str(), fixed});
    // Every candidate is recorded (--explain): a rejected one says why it keeps the direct form.
    return applyIfLegal(
        g, ctx, "conv-transpose-as-conv", "conv_transpose", {ct}, ct->result(), std::move(cert),
        [&](Node *before, const Location &loc) { return build(g, ct, before, loc); },
        "1x1 conv + pixel shuffle");
  }

  static Value *build(Graph &g, Node *ct, Node *before, const Location &loc) {
    const Tensor &w = *ct->operand(1)->data();
    const std::vector<int64_t> &xs = ct->operand(0)->type().shape;
    int64_t cin = w.shape()[0], opg = w.shape()[1], kh = w.shape()[2], kw = w.shape()[3];
    int64_t groups = ct->i("group"), ipg = cin / groups, cout = opg * groups, taps = kh * kw;
    auto nw = std::make_shared<Tensor>(TensorType(w.dtype(), {cout * taps, ipg, 1, 1}));
    auto nb = std::make_shared<Tensor>(TensorType(w.dtype(), {cout * taps}));
    for (int64_t o = 0; o < cout; ++o) {
      int64_t grp = o / opg, ol = o % opg;
      double b = ct->numOperands() == 3 ? ct->operand(2)->data()->getDouble(o) : 0.0;
      for (int64_t t = 0; t < taps; ++t) {
        int64_t row = o * taps + t;
        nb->setDouble(row, b);
        for (int64_t c = 0; c < ipg; ++c)
          nw->setDouble(row * ipg + c, w.getDouble(((grp * ipg + c) * opg + ol) * taps + t));
      }
    }
    std::string base = ct->operand(1)->name();
    Value *wv = g.addWeight(base + ".as_conv", nw);
    Value *bv = g.addWeight(base + ".as_conv_bias", nb);
    wv->loc = bv->loc = loc;
    int64_t n = xs[0], h = xs[2], wd = xs[3];
    AttrMap attrs = {{"strides", std::vector<int64_t>{1, 1}},
                     {"pads", std::vector<int64_t>{0, 0, 0, 0}},
                     {"dilations", std::vector<int64_t>{1, 1}},
                     {"group", groups}};
    Value *z = g.createNode(Op::Conv, {ct->operand(0), wv, bv}, attrs, loc, before)->result();
    z = g.createNode(Op::Reshape, {z}, {{"shape", std::vector<int64_t>{n, cout, kh, kw, h, wd}}},
                     loc, before)
            ->result();
    z = g.createNode(Op::Transpose, {z}, {{"perm", std::vector<int64_t>{0, 1, 4, 2, 5, 3}}}, loc,
                     before)
            ->result();
    return g
        .createNode(Op::Reshape, {z}, {{"shape", std::vector<int64_t>{n, cout, h * kh, wd * kw}}},
                    loc, before)
        ->result();
  }
};

} // namespace

std::unique_ptr<Pass> createConvTransposeAsConvPass() {
  return std::make_unique<ConvTransposeAsConv>();
}

} // namespace aicf
