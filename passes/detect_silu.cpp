// detect-silu: x * sigmoid(x) (either operand order) -> silu(x).
// Why: one rematerializable elementwise op instead of two with a stored intermediate; it fuses
// into the producing contraction's epilogue. Exact (same formula).
#include "passes/match.h"
#include "passes/passes.h"

namespace aicf {

namespace {

class DetectSilu : public NamedPass<PassId::DetectSilu> {
public:
  bool run(Graph &g, PassContext &ctx) override {
    bool changed = false;
    for (Node *mul : g.nodes()) {
      if (!g.hasNode(mul) || mul->op() != Op::Mul)
        continue;
      for (int k = 0; k < 2; ++k) {
        Node *sig = producer(mul->operand(k), Op::Sigmoid);
        Value *x = mul->operand(1 - k);
        if (!sig || sig->operand(0) != x || x->type() != mul->result()->type())
          continue;
        Certificate cert;
        cert.property = MemProperty::RematerializableIntermediate;
        cert.rewrite = "x * sigmoid(x) -> silu";
        cert.exactness = Exactness::Exact;
        changed |=
            applyIfLegal(g, ctx, "detect-silu", "silu (x * sigmoid(x))", {sig, mul}, mul->result(),
                         std::move(cert), [&](Node *before, const Location &loc) {
                           return g.createNode(Op::Silu, {x}, {}, loc, before)->result();
                         });
        break;
      }
    }
    return changed;
  }
};

} // namespace

std::unique_ptr<Pass> createDetectSiluPass() {
  return std::make_unique<DetectSilu>();
}

} // namespace aicf
