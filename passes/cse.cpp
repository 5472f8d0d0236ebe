// cse: common-subexpression elimination. Two pure nodes with the same op, operands and
// attributes compute the same values; the later one is replaced by the earlier. Exporters
// duplicate shape computations and constants per use; merging them shrinks the graph and lets
// pattern matchers see one value where the model means one value. Weights with identical
// type and bytes are merged too.
#include "passes/passes.h"

#include <map>
#include <string>

namespace aicf {

namespace {

class Cse : public NamedPass<PassId::Cse> {
public:
  bool run(Graph &g, PassContext &) override {
    bool changed = mergeWeights(g);
    std::map<std::string, Node *> seen;
    for (Node *n : g.nodes()) {
      if (!n->info().has(PURE) || n->body) // a loop: its body is no attribute CSE compares
        continue;
      std::string key = keyOf(*n);
      auto [it, inserted] = seen.emplace(key, n);
      if (inserted)
        continue;
      Node *first = it->second;
      bool ok = true;
      for (size_t k = 0; k < n->numResults(); ++k)
        ok = ok && g.canReplaceKeepingNames(n->result(k), first->result(k));
      if (!ok)
        continue;
      for (size_t k = 0; k < n->numResults(); ++k)
        g.replaceAllUsesWith(n->result(k), first->result(k));
      first->loc = Location::fuse({&first->loc, &n->loc});
      g.eraseNode(n);
      changed = true;
    }
    return changed;
  }

private:
  static std::string keyOf(const Node &n) {
    std::string key = n.name();
    key += '(';
    for (Value *v : n.operands())
      key += std::to_string(v->id()) + ',';
    key += "){";
    for (const auto &[name, value] : n.attrs)
      key += name + '=' + formatAttr(value) + ';';
    key += "}:";
    for (Value *r : n.results())
      key += r->type().str() + ',';
    return key;
  }

  static bool mergeWeights(Graph &g) {
    bool changed = false;
    std::map<std::pair<std::string, std::vector<uint8_t>>, Value *> seen;
    for (Value *w : std::vector<Value *>(g.weights())) {
      if (!w->hasData()) // elided data: two such weights may differ
        continue;
      auto key = std::make_pair(w->type().str(), w->data()->bytes());
      auto [it, inserted] = seen.emplace(std::move(key), w);
      if (inserted || g.isOutput(w))
        continue;
      g.replaceAllUsesWith(w, it->second);
      g.eraseWeight(w);
      changed = true;
    }
    return changed;
  }
};

} // namespace

std::unique_ptr<Pass> createCsePass() {
  return std::make_unique<Cse>();
}

} // namespace aicf
