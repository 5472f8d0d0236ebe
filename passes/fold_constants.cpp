// fold-constants: evaluates nodes whose operands are all weights and replaces their results by
// new weights. Exporters leave many such nodes (shape arithmetic, mask construction, scaled
// constants); folding them lets pattern detection see plain constants. Results larger than
// kMaxFoldElements are left alone so folding never multiplies the weight size (e.g. an Expand
// of a scalar to a large tensor stays an expand), and so are results with symbolic dims.
#include "interp/interpreter.h"
#include "passes/passes.h"

#include <cctype>

namespace aicf {

namespace {

constexpr int64_t kMaxFoldElements = 1 << 16;

class FoldConstants : public NamedPass<PassId::FoldConstants> {
public:
  bool run(Graph &g, PassContext &) override {
    bool changed = false;
    for (Node *n : g.nodes()) {
      if (!n->info().has(PURE) || n->numOperands() == 0 || n->body) // loops stay at run time
        continue;
      bool allConst = true;
      int64_t inElems = 0, outElems = 0;
      for (Value *v : n->operands()) {
        allConst = allConst && v->isWeight();
        if (v->isWeight())
          inElems += v->type().numel();
      }
      // A result with symbolic dims (a slice of a constant to a symbolic end) has no one size:
      // a weight would fix it at the planning point.
      bool symbolic = false;
      for (Value *r : n->results()) {
        outElems += r->type().numel();
        symbolic = symbolic || r->type().isSymbolic();
      }
      if (!allConst || symbolic || (outElems > kMaxFoldElements && outElems > inElems))
        continue;
      std::vector<const Tensor *> args;
      for (Value *v : n->operands())
        args.push_back(v->data().get());
      std::vector<Tensor> results = evalNode(*n, args);
      for (size_t k = 0; k < results.size(); ++k) {
        std::string name = n->loc.empty() ? "const" : n->loc.origins.front();
        // A graph output keeps its name (aicf-run writes it as <name>.npy; plan.yaml lists it
        // so): the result gives its name up to the constant.
        Value *r = n->result(k);
        std::string outName = g.isOutput(r) ? r->name() : "";
        if (!outName.empty())
          g.renameValue(r, "");
        Value *w = g.addWeight(outName.empty() ? sanitizeWeightName(name) : outName,
                               std::make_shared<Tensor>(std::move(results[k])));
        w->loc = n->loc;
        g.replaceAllUsesWith(n->result(k), w);
      }
      g.eraseNode(n);
      changed = true;
    }
    if (changed)
      g.removeDeadCode();
    return changed;
  }

private:
  // Weight names from node locations: keep only identifier characters, so the IR stays tidy.
  static std::string sanitizeWeightName(const std::string &origin) {
    std::string s;
    for (char c : origin)
      s += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.') ? c : '_';
    while (!s.empty() && s.front() == '_')
      s.erase(s.begin());
    if (s.empty() || std::isdigit(static_cast<unsigned char>(s.front())))
      s = "c" + s;
    return s + ".folded";
  }
};

} // namespace

std::unique_ptr<Pass> createFoldConstantsPass() {
  return std::make_unique<FoldConstants>();
}

} // namespace aicf
