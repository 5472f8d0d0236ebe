// fold-batch-norm: folds an inference batch_norm that directly follows a conv or a
// conv_transpose into its weights and bias:
//   s = scale / sqrt(var + eps);  w'[o] = w[o] * s[o];  b'[o] = (b[o] - mean[o]) * s[o] + bias[o]
// where w[o] is every weight that contributes to output channel o: the rows [o, ...] of a conv's
// [Cout, Cin/g, kh, kw] weights, the columns [ci, o % (Cout/g), ...] of a conv_transpose's
// [Cin, Cout/g, kh, kw] weights for the input channels ci of o's group.
// Why: the normalisation is an affine map per output channel, so it costs nothing once folded;
// left alone it is a full read and write of the activation. Legality: the conv's weights, bias
// and all batch-norm parameters are constants, the conv result feeds only the batch_norm, the
// conv has no epilogue yet. Exactness: reassociated (the scale is applied to the weights instead
// of the output, which changes the rounding of each product).
#include "passes/match.h"
#include "passes/passes.h"
#include "support/diagnostics.h"

#include <cmath>

namespace aicf {

namespace {

class FoldBatchNorm : public NamedPass<PassId::FoldBatchNorm> {
public:
  bool run(Graph &g, PassContext &ctx) override {
    bool changed = false;
    for (Node *bn : g.nodes()) {
      if (!g.hasNode(bn) || bn->op() != Op::BatchNorm)
        continue;
      Node *conv = producer(bn->operand(0), Op::Conv);
      if (!conv)
        conv = producer(bn->operand(0), Op::ConvTranspose);
      if (!conv)
        continue;
      changed |= fold(g, ctx, conv, bn);
    }
    return changed;
  }

private:
  static bool fold(Graph &g, PassContext &ctx, Node *conv, Node *bn) {
    Certificate cert;
    cert.property = MemProperty::RematerializableIntermediate;
    bool transpose = conv->op() == Op::ConvTranspose;
    std::string what = transpose ? "conv_transpose" : "conv";
    cert.rewrite = what + " + batch_norm -> " + what + " with folded weights and bias";
    cert.exactness = Exactness::Reassociated;
    bool hasBias = conv->numOperands() == 3;
    bool constOk = conv->operand(1)->isWeight() && (!hasBias || conv->operand(2)->isWeight());
    for (size_t k = 1; k < 5; ++k)
      constOk = constOk && bn->operand(k)->isWeight();
    cert.conditions.push_back({"conv weights/bias and batch-norm parameters are constants",
                               constOk ? "all constant" : "a parameter is computed at run time",
                               constOk});
    bool noEpi = (transpose || conv->strs("epilogue").empty()) && conv->numOperands() <= 3;
    cert.conditions.push_back({"conv has no epilogue", noEpi ? "none" : "already fused", noEpi});
    bool f32 = conv->result()->type().dtype == DType::F32;
    cert.conditions.push_back({"f32 parameters", conv->result()->type().str(), f32});
    return applyIfLegal(
        g, ctx, "fold-batch-norm", what + " + batch_norm", {conv, bn}, bn->result(),
        std::move(cert), [&](Node *before, const Location &loc) {
          const Tensor &w = *conv->operand(1)->data();
          const Tensor &scale = *bn->operand(1)->data(), &bias = *bn->operand(2)->data(),
                       &mean = *bn->operand(3)->data(), &var = *bn->operand(4)->data();
          double eps = bn->f("epsilon");
          int64_t oc = scale.numel(), taps = w.numel() / (w.shape()[0] * w.shape()[1]);
          std::vector<double> s(static_cast<size_t>(oc));
          for (int64_t o = 0; o < oc; ++o)
            s[o] = scale.getDouble(o) / std::sqrt(var.getDouble(o) + eps);
          // The output channel of weight row r = (w.shape[0] index, w.shape[1] index).
          int64_t groups = conv->hasAttr("group") ? conv->i("group") : 1;
          int64_t inPerGroup = w.shape()[0] / groups, outPerGroup = w.shape()[1];
          auto channelOf = [&](int64_t d0, int64_t d1) {
            return transpose ? (d0 / inPerGroup) * outPerGroup + d1 : d0;
          };
          auto nw = std::make_shared<Tensor>(w.type());
          for (int64_t d0 = 0; d0 < w.shape()[0]; ++d0)
            for (int64_t d1 = 0; d1 < w.shape()[1]; ++d1) {
              int64_t base = (d0 * w.shape()[1] + d1) * taps;
              for (int64_t t = 0; t < taps; ++t)
                nw->setDouble(base + t, w.getDouble(base + t) * s[channelOf(d0, d1)]);
            }
          auto nb = std::make_shared<Tensor>(TensorType(w.dtype(), {oc}));
          for (int64_t o = 0; o < oc; ++o) {
            double b0 = hasBias ? conv->operand(2)->data()->getDouble(o) : 0.0;
            nb->setDouble(o, (b0 - mean.getDouble(o)) * s[o] + bias.getDouble(o));
          }
          std::string base = conv->operand(1)->name();
          Value *wv = g.addWeight(base + ".bnfold", nw);
          Value *bv = g.addWeight(base + ".bnfold_bias", nb);
          wv->loc = bv->loc = loc;
          return g.createNode(conv->op(), {conv->operand(0), wv, bv}, conv->attrs, loc, before)
              ->result();
        });
  }
};

} // namespace

std::unique_ptr<Pass> createFoldBatchNormPass() {
  return std::make_unique<FoldBatchNorm>();
}

} // namespace aicf
