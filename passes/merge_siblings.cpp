// See merge_siblings.h.
#include "passes/merge_siblings.h"

#include "ir/graph.h"
#include "ir/op_registry.h"
#include "passes/contraction_parts.h"
#include "passes/explain.h"
#include "passes/passes.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <cstring>
#include <map>

namespace aicf {

namespace {

// Whether `v` reaches a contraction's A through elementwise nodes of its shape (fusion rule 8's
// chain; the walk is bounded like the rule's).
bool feedsContractionA(const Graph &g, const Value *v, int depth = 0) {
  if (depth > 8)
    return true; // (too deep to tell: keep the sibling apart)
  for (const Node *u : g.users(v)) {
    if ((u->op() == Op::MatMul || u->op() == Op::Gemm) && u->operand(0) == v)
      return true;
    if (u->info().has(EW) && u->numResults() == 1 && u->result()->type() == v->type() &&
        feedsContractionA(g, u->result(), depth + 1))
      return true;
  }
  return false;
}

// An extra operand along N (a constant weight of last dim N, every other dim 1) is concatenated;
// one broadcast along N (last dim 1, or a scalar) must be the same value in every sibling.
bool alongN(const Value *v, int64_t N) {
  const auto &shape = v->type().shape;
  if (!constantF32Weight(v) || shape.empty() || shape.back() != N || N == 1)
    return false;
  return std::all_of(shape.begin(), shape.end() - 1, [](int64_t d) { return d == 1; });
}
bool broadcastAlongN(const Value *v) {
  const auto &shape = v->type().shape;
  return shape.empty() || shape.back() == 1;
}

// The signature that siblings must share to merge (K, the steps, the shared operands), or ""
// when `n` cannot be a sibling at all.
std::string signature(const Graph &g, const Node &n) {
  if (!plainContraction(n) || !constantF32Weight(n.operand(1)) || g.isOutput(n.result()) ||
      feedsContractionA(g, n.result()))
    return "";
  int64_t N = contractionN(n);
  std::string sig = cat("K", contractionK(n));
  for (const ContractionStep &s : contractionSteps(n)) {
    sig += " " + s.step.str();
    if (!s.operand)
      continue;
    if (alongN(s.operand, N))
      sig += "(N)";
    else if (broadcastAlongN(s.operand))
      sig += cat("(%", s.operand->id(), ")");
    else
      return "";
  }
  return sig;
}

// The extra operands of the siblings' step `i`, concatenated along N ([N1 + N2 + ...]).
TensorPtr concatAlongN(const std::vector<const Node *> &siblings, size_t i) {
  int64_t total = 0;
  for (const Node *n : siblings)
    total += contractionN(*n);
  auto t = std::make_shared<Tensor>(TensorType(DType::F32, {total}));
  float *dst = t->data<float>();
  for (const Node *n : siblings) {
    const Tensor &src = *contractionSteps(*n)[i].operand->data();
    int64_t N = contractionN(*n);
    std::memcpy(dst, src.data<float>(), static_cast<size_t>(N) * sizeof(float));
    dst += N;
  }
  return t;
}

} // namespace

std::vector<std::vector<const Node *>> siblingSets(const Graph &g) {
  // Candidates by (A, signature), in the order of their first node.
  std::map<std::pair<const Value *, std::string>, size_t> index;
  std::vector<std::vector<const Node *>> sets;
  for (const Node *n : g.nodes()) {
    std::string sig = signature(g, *n);
    if (sig.empty())
      continue;
    auto [it, fresh] = index.try_emplace({n->operand(0), sig}, sets.size());
    if (fresh)
      sets.emplace_back();
    sets[it->second].push_back(n);
  }
  std::erase_if(sets, [](const auto &s) { return s.size() < 2; });
  return sets;
}

Value *emitMergedContraction(Graph &g, const std::vector<const Node *> &siblings, Node *before) {
  const Node &first = *siblings.front();
  int64_t K = contractionK(first), total = 0;
  for (const Node *n : siblings)
    total += contractionN(*n);
  // B: [K, N1 + N2 + ...], each sibling's columns side by side.
  auto b = std::make_shared<Tensor>(TensorType(DType::F32, {K, total}));
  float *dst = b->data<float>();
  int64_t col0 = 0;
  std::vector<const Location *> locs;
  for (const Node *n : siblings) {
    const float *src = n->operand(1)->data()->data<float>();
    int64_t N = contractionN(*n);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t c = 0; c < N; ++c)
        dst[k * total + col0 + c] = contractionB(*n, src, k, c);
    col0 += N;
    locs.push_back(&n->loc);
  }
  Location loc = Location::fuse(locs);
  std::string tag = cat("_merged", siblings.size());
  Value *w = g.addWeight(first.operand(1)->name() + tag, b);
  w->loc = first.operand(1)->loc;
  std::vector<Value *> ops = {first.operand(0), w};
  std::vector<std::string> epilogue;
  std::vector<ContractionStep> steps = contractionSteps(first);
  for (size_t i = 0; i < steps.size(); ++i) {
    epilogue.push_back(steps[i].step.str());
    if (!steps[i].operand)
      continue;
    if (broadcastAlongN(steps[i].operand)) {
      ops.push_back(steps[i].operand);
      continue;
    }
    Value *v = g.addWeight(steps[i].operand->name() + tag, concatAlongN(siblings, i));
    v->loc = steps[i].operand->loc;
    ops.push_back(v);
  }
  AttrMap attrs;
  if (!epilogue.empty())
    attrs["epilogue"] = epilogue;
  return g.createNode(Op::MatMul, ops, attrs, loc, before)->result();
}

namespace {

class MergeSiblingsPass : public NamedPass<PassId::MergeSiblings> {
public:
  explicit MergeSiblingsPass(MergeSiblingsOptions opts) : opts_(std::move(opts)) {}

  bool run(Graph &g, PassContext &ctx) override {
    std::vector<std::vector<const Node *>> chosen;
    for (std::vector<const Node *> &set : siblingSets(g)) {
      SiblingMergeDecision d;
      int64_t total = 0;
      for (const Node *n : set) {
        d.nodes.push_back(n->where());
        total += contractionN(*n);
      }
      std::vector<int64_t> shape = set.front()->result()->type().shape;
      shape.back() = total;
      d.merged = TensorType(DType::F32, shape).str();
      if (opts_.cost) {
        d.separate = opts_.cost(g, set, false);
        d.together = opts_.cost(g, set, true);
        d.chosen = takeForm(d.together, d.separate, 1.0);
      } else {
        d.chosen = true;
      }
      if (ctx.explain)
        ctx.explain->add(record(set, d));
      if (d.chosen)
        chosen.push_back(set);
      if (opts_.decisions)
        opts_.decisions->push_back(std::move(d));
    }
    for (const std::vector<const Node *> &set : chosen) {
      Node *first = const_cast<Node *>(set.front());
      Value *merged = emitMergedContraction(g, set, first);
      std::vector<int64_t> sizes;
      for (const Node *n : set)
        sizes.push_back(contractionN(*n));
      int64_t axis = static_cast<int64_t>(merged->type().shape.size()) - 1;
      Node *split = g.createNode(Op::Split, {merged}, {{"axis", axis}, {"sizes", sizes}},
                                 merged->def()->loc, first, static_cast<int>(set.size()));
      for (size_t i = 0; i < set.size(); ++i) {
        Node *n = const_cast<Node *>(set[i]);
        g.replaceAllUsesWith(n->result(), split->result(i));
        g.eraseNode(n);
      }
    }
    if (!chosen.empty())
      g.removeDeadCode(); // the siblings' own weights
    return !chosen.empty();
  }

private:
  static std::string priceText(const Price &p) {
    return p.us < 0 ? std::string("no fit") : cat(p.us, " us ", double(p.bytes) / 1e6, " MB");
  }

  RewriteRecord record(const std::vector<const Node *> &set, const SiblingMergeDecision &d) const {
    RewriteRecord rec;
    rec.pass = name();
    std::string names;
    for (const Node *n : set) {
      const std::string &r = n->result()->name();
      names += std::string(names.empty() ? "" : ", ") + (r.empty() ? n->where() : "%" + r);
      rec.origins.insert(rec.origins.end(), n->loc.origins.begin(), n->loc.origins.end());
    }
    rec.pattern = cat(set.size(), " sibling contractions of ",
                      set.front()->operand(0)->type().str(), " (", names, ")");
    rec.applied = d.chosen;
    std::string priced = opts_.cost ? cat(" (merged ", priceText(d.together), "; separate ",
                                          priceText(d.separate), ")")
                                    : std::string();
    if (rec.applied)
      rec.result = cat("one matmul ", d.merged, " + split", priced);
    else
      rec.note = cat("separate is cheaper", priced);
    return rec;
  }

  MergeSiblingsOptions opts_;
};

} // namespace

std::unique_ptr<Pass> createMergeSiblingsPass(MergeSiblingsOptions opts) {
  return std::make_unique<MergeSiblingsPass>(std::move(opts));
}

std::unique_ptr<Pass> createMergeSiblingsPass() {
  return createMergeSiblingsPass(MergeSiblingsOptions{});
}

} // namespace aicf
