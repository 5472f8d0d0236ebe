// fold-batch-norm: folds an inference batch_norm that directly follows a conv into the conv's
// weights and bias:
//   s = scale / sqrt(var + eps);  w'[o] = w[o] * s[o];  b'[o] = (b[o] - mean[o]) * s[o] + bias[o]
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
        continue;
      changed |= fold(g, ctx, conv, bn);
    }
    return changed;
  }

private:
  static bool fold(Graph &g, PassContext &ctx, Node *conv, Node *bn) {
    Certificate cert;
    cert.property = MemProperty::RematerializableIntermediate;
    cert.rewrite = "conv + batch_norm -> conv with folded weights and bias";
    cert.exactness = Exactness::Reassociated;
    bool hasBias = conv->numOperands() == 3;
    bool constOk = conv->operand(1)->isWeight() && (!hasBias || conv->operand(2)->isWeight());
    for (size_t k = 1; k < 5; ++k)
      constOk = constOk && bn->operand(k)->isWeight();
    cert.conditions.push_back({"conv weights/bias and batch-norm parameters are constants",
                               constOk ? "all constant" : "a parameter is computed at run time",
                               constOk});
    bool noEpi = conv->strs("epilogue").empty() && conv->numOperands() <= 3;
    cert.conditions.push_back({"conv has no epilogue", noEpi ? "none" : "already fused", noEpi});
    bool f32 = conv->result()->type().dtype == DType::F32;
    cert.conditions.push_back({"f32 parameters", conv->result()->type().str(), f32});
    return applyIfLegal(
        g, ctx, "fold-batch-norm", "conv + batch_norm", {conv, bn}, bn->result(), std::move(cert),
        [&](Node *before, const Location &loc) {
          const Tensor &w = *conv->operand(1)->data();
          const Tensor &scale = *bn->operand(1)->data(), &bias = *bn->operand(2)->data(),
                       &mean = *bn->operand(3)->data(), &var = *bn->operand(4)->data();
          double eps = bn->f("epsilon");
          int64_t oc = w.shape()[0], per = w.numel() / oc;
          auto nw = std::make_shared<Tensor>(w.type());
          auto nb = std::make_shared<Tensor>(TensorType(w.dtype(), {oc}));
          for (int64_t o = 0; o < oc; ++o) {
            double s = scale.getDouble(o) / std::sqrt(var.getDouble(o) + eps);
            for (int64_t i = 0; i < per; ++i)
              nw->setDouble(o * per + i, w.getDouble(o * per + i) * s);
            double b0 = hasBias ? conv->operand(2)->data()->getDouble(o) : 0.0;
            nb->setDouble(o, (b0 - mean.getDouble(o)) * s + bias.getDouble(o));
          }
          std::string base = conv->operand(1)->name();
          Value *wv = g.addWeight(base + ".bnfold", nw);
          Value *bv = g.addWeight(base + ".bnfold_bias", nb);
          wv->loc = bv->loc = loc;
          return g.createNode(Op::Conv, {conv->operand(0), wv, bv}, conv->attrs, loc, before)
              ->result();
        });
  }
};

} // namespace

std::unique_ptr<Pass> createFoldBatchNormPass() {
  return std::make_unique<FoldBatchNorm>();
}

} // namespace aicf
