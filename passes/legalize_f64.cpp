// legalize-f64: the ops whose recipes accumulate in f32 (contractions, convolutions, norms,
// softmax, attention, resize) compute an f64 node in f32 between casts:
//   y: f64 = op(a: f64, w: f64)  ->  y = cast<f64>(op(cast<f32>(a), w_f32))
// Why: those recipes keep f32 tiles, accumulators and statistics; an f64 operand would need a
// second copy of each, for a type that ML deployments rarely carry (TensorRT's ONNX parser casts
// float64 to float32 the same way). Elementwise ops, reductions, pooling, casts and data
// movement compute f64 in double and are left alone. Constant f64 operands become f32 weights;
// the others get a cast node. Exactness: the op's inputs are rounded to f32 (about 7 digits).
// Only the compile driver runs it, first (driver/compile.cpp, stage legalize-f64), so every
// kernel recipe sees f32; the interpreter then computes the same casts.
#include "passes/passes.h"

#include "ir/graph.h"

namespace aicf {

namespace {

bool f32Recipe(const Node &n) {
  if (n.info().has(CONTRACT))
    return true;
  switch (n.op()) {
  case Op::Softmax:
  case Op::LogSoftmax:
  case Op::LayerNorm:
  case Op::RmsNorm:
  case Op::BatchNorm:
  case Op::InstanceNorm:
  case Op::MeanVarianceNorm:
  case Op::Attention:
  case Op::Resize: return true;
  default: return false;
  }
}

bool touchesF64(const Node &n) {
  for (const Value *v : n.operands())
    if (v->type().dtype == DType::F64)
      return true;
  for (const Value *v : n.results())
    if (v->type().dtype == DType::F64)
      return true;
  return false;
}

TensorType withDType(TensorType t, DType d) {
  t.dtype = d;
  return t;
}

class LegalizeF64 : public NamedPass<PassId::LegalizeF64> {
public:
  bool run(Graph &g, PassContext &) override {
    bool changed = false;
    for (Node *n : g.nodes()) {
      if (!f32Recipe(*n) || !touchesF64(*n))
        continue;
      std::vector<Value *> ops;
      for (Value *v : n->operands()) {
        if (v->type().dtype != DType::F64) {
          ops.push_back(v);
        } else if (v->isWeight() && v->hasData()) {
          const Tensor &d = *v->data();
          auto t = std::make_shared<Tensor>(withDType(d.type(), DType::F32));
          for (int64_t i = 0; i < d.numel(); ++i)
            t->setDouble(i, d.getDouble(i));
          Value *w = g.addWeight(v->name() + ".f32", t);
          w->loc = v->loc;
          ops.push_back(w);
        } else {
          ops.push_back(
              g.createNode(Op::Cast, {v}, {{"to", std::string("f32")}}, n->loc, n)->result());
        }
      }
      std::vector<TensorType> types;
      for (const Value *r : n->results())
        types.push_back(r->type().dtype == DType::F64 ? withDType(r->type(), DType::F32)
                                                      : r->type());
      Node *f = g.addNode(n->op(), ops, types, n->attrs, n->loc, n);
      f->props = n->props;
      f->certificates = n->certificates;
      for (size_t k = 0; k < n->numResults(); ++k) {
        Value *r = f->result(k);
        if (n->result(k)->type().dtype == DType::F64)
          r = g.createNode(Op::Cast, {r}, {{"to", std::string("f64")}}, n->loc, n)->result();
        g.replaceAllUsesWith(n->result(k), r);
      }
      g.eraseNode(n);
      changed = true;
    }
    if (changed)
      g.removeDeadCode();
    return changed;
  }
};

} // namespace

std::unique_ptr<Pass> createLegalizeF64Pass() {
  return std::make_unique<LegalizeF64>();
}

} // namespace aicf
