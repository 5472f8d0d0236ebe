// fold-pad: a constant pad over the spatial axes read by a conv or a pool is that window's own
// padding, so the reader takes the pad's input and the pads are added to its own:
//   conv(pad(x, p, 0), pads q)                      -> conv(x, pads p + q)
//   avg_pool(pad(x, p, 0), pads q, count_include_pad) -> avg_pool(x, pads p + q, count_include_pad
//   1) max_pool(pad(x, p, -inf), pads q)               -> max_pool(x, pads p + q)
// Why: exporters spell a padded window as an explicit Pad: torch's avg_pool2d with
// count_include_pad (Inception's pool branches), TF-style SAME padding written as Pad -> Conv
// (tf2onnx, Keras converters). As its own op the pad is a kernel that copies the whole tensor into
// a larger one, and a layout op channel-blocked chains do not keep: Inception v3 spent 5% of its
// time in nine such pads and converted its concats back to NCHW for them.
// Legality: mode constant; the pad is by >= 0 on the spatial axes (2..) only, not on N or C; its
// value is what the window's padding reads (0 for conv and avg_pool, -inf for max_pool); the
// window's input is the pad (a conv's weight is not); ceil_mode 0 for pools (every window then
// lies inside the padded extent, which is what makes the two forms agree). An avg_pool's own
// padding must be counted (count_include_pad 1) or absent: the pad's zeros are counted in the
// divisor, so after the fold every padded position must be. A pad read by several windows folds
// into each; it goes when no reader is left.
// Exactness: exact. Each window reads the same elements (input or the pad value) in the same
// order, and an avg_pool divides by the same count.
#include "passes/match.h"
#include "passes/passes.h"
#include "support/diagnostics.h"

#include <cmath>
#include <limits>

namespace aicf {

namespace {

class FoldPad : public NamedPass<PassId::FoldPad> {
public:
  bool run(Graph &g, PassContext &ctx) override {
    bool changed = false;
    for (Node *n : g.nodes())
      if (g.hasNode(n) &&
          (n->op() == Op::Conv || n->op() == Op::AvgPool || n->op() == Op::MaxPool) &&
          n->numOperands() >= 1)
        if (Node *pad = producer(n->operand(0), Op::Pad))
          changed |= rewrite(g, ctx, pad, n);
    return changed;
  }

private:
  // The value the window's padding reads.
  static double windowPadValue(const Node *w) {
    return w->op() == Op::MaxPool ? -std::numeric_limits<double>::infinity() : 0.0;
  }

  static bool rewrite(Graph &g, PassContext &ctx, Node *pad, Node *w) {
    const std::vector<int64_t> &pp = pad->ints("pads");
    const std::vector<int64_t> &wp = w->ints("pads");
    size_t rank = pad->operand(0)->type().shape.size();
    size_t spatial = rank >= 2 ? rank - 2 : 0;
    Certificate cert;
    cert.property = MemProperty::RematerializableIntermediate;
    cert.rewrite = cat("pad -> ", w->name(), " padding");
    cert.exactness = Exactness::Exact;
    cert.conditions.push_back(
        {"the pad's mode is constant", pad->s("mode"), pad->s("mode") == "constant"});
    bool shapeOk = spatial >= 1 && pp.size() == 2 * rank && wp.size() == 2 * spatial;
    cert.conditions.push_back({"the pad and the window agree on the spatial axes",
                               cat("pad rank ", rank, ", window pads ", wp.size()), shapeOk});
    if (shapeOk) {
      bool channelsOk = pp[0] == 0 && pp[1] == 0 && pp[rank] == 0 && pp[rank + 1] == 0;
      bool grows = true;
      for (int64_t p : pp)
        grows = grows && p >= 0;
      cert.conditions.push_back({"the pad is by >= 0 on the spatial axes only",
                                 cat("pads ", fmtInts(pp)), channelsOk && grows});
    }
    double want = windowPadValue(w), have = pad->f("value");
    cert.conditions.push_back({"the pad's value is what the window's padding reads",
                               cat(have, " (", w->name(), " pads with ", want, ")"), have == want});
    cert.conditions.push_back({"the window reads the pad as its input", "operand 0 only",
                               countUses(w, pad->result()) == 1});
    if (w->op() != Op::Conv) {
      cert.conditions.push_back({"ceil_mode is 0", cat(w->i("ceil_mode")), w->i("ceil_mode") == 0});
    }
    if (w->op() == Op::AvgPool) {
      bool ownPads = false;
      for (int64_t p : wp)
        ownPads = ownPads || p != 0;
      bool counted = w->i("count_include_pad") != 0;
      cert.conditions.push_back({"the avg_pool counts its own padding, or has none",
                                 cat("pads ", fmtInts(wp), ", count_include_pad ", counted ? 1 : 0),
                                 counted || !ownPads});
    }
    std::vector<int64_t> pads = wp;
    if (shapeOk)
      for (size_t a = 0; a < spatial; ++a) {
        pads[a] += pp[2 + a];
        pads[spatial + a] += pp[rank + 2 + a];
      }
    // Only the window is matched: the pad goes when its last reader has folded it (dce).
    return applyIfLegal(
        g, ctx, "fold-pad", cat("pad -> ", w->name()), {w}, w->result(), std::move(cert),
        [&](Node *before, const Location &loc) { return build(g, pad, w, pads, before, loc); },
        cat(w->name(), ", pads ", fmtInts(pads)));
  }

  static int countUses(const Node *n, const Value *v) {
    int uses = 0;
    for (size_t i = 0; i < n->numOperands(); ++i)
      uses += n->operand(i) == v;
    return uses;
  }

  static std::string fmtInts(const std::vector<int64_t> &v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i)
      s += cat(i ? ", " : "", v[i]);
    return s + "]";
  }

  static Value *build(Graph &g, Node *pad, Node *w, const std::vector<int64_t> &pads, Node *before,
                      const Location &loc) {
    AttrMap attrs = w->attrs;
    attrs["pads"] = pads;
    if (w->op() == Op::AvgPool)
      attrs["count_include_pad"] = int64_t{1};
    std::vector<Value *> operands = w->operands();
    operands[0] = pad->operand(0);
    Node *n = g.createNode(w->op(), operands, attrs, Location::fuse({&pad->loc, &loc}), before);
    AICF_CHECK(n->result()->type() == w->result()->type(), "fold-pad changed a ", w->name(),
               "'s result type: ", w->result()->type().str(), " -> ", n->result()->type().str());
    return n->result();
  }
};

} // namespace

std::unique_ptr<Pass> createFoldPadPass() {
  return std::make_unique<FoldPad>();
}

} // namespace aicf
