// io-precision (aicfc --io-precision fp32 | fp16 | bf16): the model's floating-point inputs and
// outputs exchanged in another type, the model computing as before. Each such input takes the
// new type and its readers see it through a cast back to the model's type; each such output is
// a cast of the model's value to the new type, under the output's name (the model's value is
// renamed NAME.model). The casts are elementwise, so the partition fuses them into the first
// and last kernels: a bf16 deployment moves half the bytes in and out without a conversion pass
// of its own. Only the compile driver runs it (stage io-precision), for every target, after
// legalize-f64. An output that is itself a graph input or a weight keeps the model's type.
#include "passes/passes.h"

#include "ir/graph.h"
#include "ir/precision.h"

#include <map>

namespace aicf {

namespace {

bool floatIo(DType d) {
  return d == DType::F32 || d == DType::F16 || d == DType::BF16;
}

class IoPrecision : public NamedPass<PassId::IoPrecision> {
public:
  bool run(Graph &g, PassContext &ctx) override {
    if (!ctx.ioPrecision)
      return false;
    const DType io = precisionStorage(*ctx.ioPrecision);
    bool changed = false;
    Node *first = g.nodes().empty() ? nullptr : g.nodes().front();
    for (Value *in : g.inputs()) {
      const DType model = in->type().dtype;
      if (!floatIo(model) || model == io)
        continue;
      TensorType t = in->type();
      t.dtype = io;
      in->setType(t);
      Node *c =
          g.createNode(Op::Cast, {in}, {{"to", std::string(dtypeName(model))}}, in->loc, first);
      g.replaceAllUsesWith(in, c->result());
      c->setOperand(0, in);
      changed = true;
    }
    std::map<Value *, Value *> cast;
    for (size_t i = 0; i < g.outputs().size(); ++i) {
      Value *out = g.outputs()[i];
      if (!floatIo(out->type().dtype) || out->type().dtype == io ||
          out->kind() != ValueKind::Result)
        continue;
      auto it = cast.find(out);
      if (it == cast.end()) {
        Node *c =
            g.createNode(Op::Cast, {out}, {{"to", std::string(dtypeName(io))}}, out->def()->loc);
        std::string name = out->name();
        out->setName(name + ".model");
        c->result()->setName(name);
        it = cast.emplace(out, c->result()).first;
      }
      g.setOutput(i, it->second);
      changed = true;
    }
    return changed;
  }
};

} // namespace

std::unique_ptr<Pass> createIoPrecisionPass() {
  return std::make_unique<IoPrecision>();
}

} // namespace aicf
