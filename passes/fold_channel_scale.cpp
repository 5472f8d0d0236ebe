// fold-channel-scale: a per-channel scale in front of a pointwise conv moves onto the conv's
// weight rows. Squeeze-and-excitation (EfficientNet, MobileNet-V3) ends in
//   y = blocked_conv(mul(x, s), W)   with s [1, CB, 1, 1, 16], one factor per input channel,
// and since each input channel k meets only row k of W,
//   conv(x * s, W) = conv(x, W'),   W'[k, n] = W[k, n] * s[k].
// Why: the mul is a full read and write of the activation (P pixels x K channels), which the
// projection then reads again; W' is K x N floats, written once and read by the conv in place of
// the weight. It pays when the activation is the larger: the rewrite requires P >= 2 N (every
// SE block of EfficientNet-B0 down to its 14 x 14 maps; at 7 x 7 with 192 or 320 output channels
// the weight is the larger and the mul stays).
//
// Legality (recorded as a certificate): a dense pointwise blocked_conv on a blocked input (a
// 1 x 1 kernel without padding, so every output reads channel k of one pixel through row k of
// W); the mul's other operand is a blocked per-channel factor of batch 1 with the input's channel
// blocks (a batch of several images would need one W' per image); the scaled activation has no
// other reader. Exactness: reassociated (x * (s * w) instead of (x * s) * w). The padded lanes of
// s meet W's zero rows, so W' keeps them zero.
//
// A host plan's layout pass, like block-channels (which makes the blocked_convs) and before
// pack-weights (W' is computed at run time, so it is read as rows, not packed): the compile
// driver runs it (driver/compile.cpp, stage fold-channel-scale).
#include "passes/match.h"
#include "passes/passes.h"
#include "support/diagnostics.h"

namespace aicf {

namespace {

class FoldChannelScale : public NamedPass<PassId::FoldChannelScale> {
public:
  bool run(Graph &g, PassContext &ctx) override {
    bool changed = false;
    for (Node *conv : g.nodes()) {
      if (!g.hasNode(conv) || conv->op() != Op::BlockedConv)
        continue;
      Node *mul = producer(conv->operand(0), Op::Mul);
      if (mul && mul->numOperands() == 2)
        changed |= fold(g, ctx, mul, conv);
    }
    return changed;
  }

private:
  // The factor s of mul(x, s) / mul(s, x): the operand of shape [1, CB, 1, 1, 16] when the
  // other is [1, CB, H, W, 16]; null when neither is.
  static Value *factorOf(const Node *mul, Value **x) {
    for (int i = 0; i < 2; ++i) {
      Value *s = mul->operand(i), *o = mul->operand(1 - i);
      const std::vector<int64_t> &ss = s->type().shape, &os = o->type().shape;
      if (ss.size() == 5 && os.size() == 5 && ss[0] == 1 && os[0] == 1 && ss[1] == os[1] &&
          ss[2] == 1 && ss[3] == 1 && ss[4] == 16 && os[4] == 16 && os[2] * os[3] > 1) {
        *x = o;
        return s;
      }
    }
    return nullptr;
  }

  static bool fold(Graph &g, PassContext &ctx, Node *mul, Node *conv) {
    Value *x = nullptr;
    Value *s = factorOf(mul, &x);
    if (!s)
      return false; // not a per-channel scale of a blocked activation: no candidate
    Certificate cert;
    cert.property = MemProperty::RematerializableIntermediate;
    cert.rewrite = "mul(x, per-channel s) -> pointwise blocked_conv: s folded into the weight rows";
    cert.exactness = Exactness::Reassociated;
    bool pointwise = conv->i("depthwise") == 0 && conv->i("blocked_input") != 0 &&
                     conv->i("group") == 1 &&
                     conv->ints("kernel_shape") == std::vector<int64_t>{1, 1} &&
                     conv->ints("pads") == std::vector<int64_t>{0, 0, 0, 0};
    cert.conditions.push_back({"a dense 1 x 1 blocked_conv without padding reads the scaled value",
                               pointwise ? "yes" : "another conv form", pointwise});
    const TensorType &wt = conv->operand(1)->type();
    int64_t K = s->type().shape[1] * 16;
    bool rows = wt.dtype == DType::F32 && s->type().dtype == DType::F32 && wt.rank() == 2 &&
                wt.shape[0] == K;
    cert.conditions.push_back({"the weight has one f32 row per scaled channel",
                               cat(wt.str(), " for ", K, " channels"), rows});
    int64_t pixels = x->type().shape[2] * x->type().shape[3], N = rows ? wt.shape[1] : 0;
    bool pays = rows && pixels >= 2 * N;
    cert.conditions.push_back(
        {"the activation pass costs more than scaling the weight (pixels >= 2 x output channels)",
         rows ? cat(pixels, " pixels x ", K, " channels against a ", K, " x ", N, " weight")
              : std::string("no weight rows to scale"),
         pays});
    return applyIfLegal(
        g, ctx, "fold-channel-scale", "mul(x, s) + pointwise blocked_conv", {mul, conv},
        conv->result(), std::move(cert), [&](Node *before, const Location &loc) {
          Value *col =
              g.createNode(Op::Reshape, {s}, {{"shape", std::vector<int64_t>{K, 1}}}, loc, before)
                  ->result();
          Value *w = g.createNode(Op::Mul, {conv->operand(1), col}, {}, loc, before)->result();
          std::vector<Value *> ops = conv->operands();
          ops[0] = x;
          ops[1] = w;
          return g.createNode(Op::BlockedConv, ops, conv->attrs, loc, before)->result();
        });
  }
};

} // namespace

std::unique_ptr<Pass> createFoldChannelScalePass() {
  return std::make_unique<FoldChannelScale>();
}

} // namespace aicf
