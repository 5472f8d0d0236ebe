// batch-norm-as-affine: an inference batch_norm that no conv absorbed (fold-batch-norm runs
// first) is a per-channel affine map, so it is written as one:
//   s = scale / sqrt(var + eps),  t = bias - mean * s,  y = x * s + t
// with s and t constants of shape [1, C, 1, ...] (broadcast over the batch and spatial axes).
// Why: as its own op, batch_norm is a kernel of its own with one layout, NCHW: a pre-activation
// network (DenseNet's concat -> BN -> ReLU -> conv, x58) spent a third of its time in the BN
// kernels and in the layout conversions around them. As a mul and an add with per-channel
// constants it is an elementwise chain like any other: it fuses with the activation after it and
// with its producer or reader, and it runs on whatever layout its input has (block-channels keeps
// elementwise ops with per-channel constants on the channel-blocked layout).
// Legality: scale, bias, mean and var are constants (inference); f32; rank >= 2 (axis 1 is C).
// Exactness: reassociated (x * s + t rounds differently from (x - mean) / sqrt(var + eps) *
// scale + bias).
#include "passes/match.h"
#include "passes/passes.h"
#include "support/diagnostics.h"

#include <cmath>

namespace aicf {

namespace {

class BatchNormAsAffine : public NamedPass<PassId::BatchNormAsAffine> {
public:
  bool run(Graph &g, PassContext &ctx) override {
    bool changed = false;
    for (Node *bn : g.nodes())
      if (g.hasNode(bn) && bn->op() == Op::BatchNorm && bn->numResults() == 1)
        changed |= rewrite(g, ctx, bn);
    return changed;
  }

private:
  static bool rewrite(Graph &g, PassContext &ctx, Node *bn) {
    const TensorType &xt = bn->operand(0)->type();
    Certificate cert;
    cert.property = MemProperty::RematerializableIntermediate;
    cert.rewrite = "batch_norm -> x * s + t (per-channel constants)";
    cert.exactness = Exactness::Reassociated;
    bool consts = true;
    for (size_t k = 1; k < 5; ++k)
      consts = consts && bn->operand(k)->isWeight();
    cert.conditions.push_back({"scale, bias, mean and var are constants",
                               consts ? "all constant" : "a parameter is computed at run time",
                               consts});
    bool shaped = xt.dtype == DType::F32 && xt.shape.size() >= 2;
    cert.conditions.push_back({"f32 input with a channel axis", xt.str(), shaped});
    return applyIfLegal(
        g, ctx, "batch-norm-as-affine", "batch_norm", {bn}, bn->result(), std::move(cert),
        [&](Node *before, const Location &loc) { return build(g, bn, before, loc); }, "mul + add");
  }

  static Value *build(Graph &g, Node *bn, Node *before, const Location &loc) {
    const Tensor &scale = *bn->operand(1)->data(), &bias = *bn->operand(2)->data(),
                 &mean = *bn->operand(3)->data(), &var = *bn->operand(4)->data();
    double eps = bn->f("epsilon");
    int64_t c = scale.numel();
    std::vector<int64_t> shape(bn->operand(0)->type().shape.size(), 1);
    shape[1] = c;
    auto s = std::make_shared<Tensor>(TensorType(DType::F32, shape));
    auto t = std::make_shared<Tensor>(TensorType(DType::F32, shape));
    for (int64_t o = 0; o < c; ++o) {
      double so = scale.getDouble(o) / std::sqrt(var.getDouble(o) + eps);
      s->setDouble(o, so);
      t->setDouble(o, bias.getDouble(o) - mean.getDouble(o) * so);
    }
    std::string base = bn->operand(1)->name();
    Value *sv = g.addWeight(base + ".affine_scale", s);
    Value *tv = g.addWeight(base + ".affine_shift", t);
    sv->loc = tv->loc = loc;
    Value *y = g.createNode(Op::Mul, {bn->operand(0), sv}, {}, loc, before)->result();
    return g.createNode(Op::Add, {y, tv}, {}, loc, before)->result();
  }
};

} // namespace

std::unique_ptr<Pass> createBatchNormAsAffinePass() {
  return std::make_unique<BatchNormAsAffine>();
}

} // namespace aicf
