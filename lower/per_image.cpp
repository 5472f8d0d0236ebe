// Per-image lowering: see per_image.h.
#include "lower/per_image.h"

#include "ir/graph.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <functional>
#include <set>

namespace aicf {

namespace {

using kir::BufferP;
using kir::E;
using kir::Expr;
using kir::Stmt;
using kir::StmtP;

const char *const kImageAxis = "img";

// The batch expression of `t` when it is [B, static dims...] with B symbolic; nullopt for a
// static type; an empty expression (SymExpr(0)) when symbolic elsewhere.
std::optional<SymExpr> batchOf(const TensorType &t) {
  if (!t.isSymbolic())
    return std::nullopt;
  for (size_t d = 1; d < t.shape.size(); ++d)
    if (!t.symDim(d).isConstant())
      return SymExpr(0);
  if (t.shape.empty() || t.symDim(0).isConstant())
    return SymExpr(0);
  return t.symDim(0);
}

size_t axisAt(int64_t axis, size_t rank) {
  return static_cast<size_t>(axis < 0 ? axis + static_cast<int64_t>(rank) : axis);
}

// Whether node `n` computes each image of its results' dim 0 from the same image of its
// operands alone (every operand either per-image or a weight read whole). The per-image ops of
// ir/infer_sym.cpp already refused a pad, resize or norm across dim 0 at inference.
bool perImageNode(const Node &n) {
  auto symbolic = [](const Value *v) { return v->type().isSymbolic(); };
  if (std::none_of(n.operands().begin(), n.operands().end(), symbolic) &&
      std::none_of(n.results().begin(), n.results().end(), symbolic))
    return true; // a weight's transform (a packing transpose): the same for every image
  const TensorType &x = n.operand(0)->type();
  size_t rank = x.shape.size();
  auto notAxis0 = [&](int64_t axis) { return axisAt(axis, rank) != 0; };
  switch (n.op()) {
  case Op::Conv:
  case Op::BlockedConv:
  case Op::ConvTranspose:
  case Op::MaxPool:
  case Op::AvgPool:
  case Op::GlobalAvgPool:
  case Op::GlobalMaxPool:
  case Op::BatchNorm:
  case Op::InstanceNorm:
  case Op::MeanVarianceNorm:
  case Op::Pad:
  case Op::Resize: return true;
  case Op::Reshape:
  case Op::Expand: return n.result()->type().symDim(0) == x.symDim(0);
  case Op::Transpose: return n.ints("perm").at(0) == 0;
  case Op::Tile: return n.ints("repeats").at(0) == 1;
  case Op::Slice: {
    const auto &axes = n.ints("axes");
    return std::none_of(axes.begin(), axes.end(), [&](int64_t a) { return !notAxis0(a); });
  }
  case Op::Concat:
  case Op::Split:
  case Op::Softmax:
  case Op::LogSoftmax:
  case Op::LayerNorm:
  case Op::RmsNorm:
  case Op::ArgMax:
  case Op::ArgMin: return notAxis0(n.i("axis"));
  case Op::Gather: return notAxis0(n.i("axis")) && !n.operand(1)->type().isSymbolic();
  default: break;
  }
  if (n.info().has(REDUCE)) {
    const auto &axes = n.ints("axes");
    return !axes.empty() &&
           std::none_of(axes.begin(), axes.end(), [&](int64_t a) { return !notAxis0(a); });
  }
  return n.info().has(EW); // broadcasting was checked for every batch at inference
}

// A store-through map of the batch-B shapes as the one-image map: range dim 0 is domain dim 0,
// which no other range dim reads (else nullopt).
std::optional<IndexMap> oneImageMap(IndexMap m) {
  if (m.domain.empty() || m.range.empty() || !m.exprs.at(0) ||
      m.exprs[0]->kind != IndexExprNode::Kind::Dim || m.exprs[0]->value != 0)
    return std::nullopt;
  for (size_t r = 1; r < m.exprs.size(); ++r)
    if (readsDim(m.exprs[r], 0))
      return std::nullopt;
  m.domain[0] = 1;
  m.range[0] = 1;
  return m;
}

// Every value `g` touches: its inputs, outputs, node results and store-through targets.
std::vector<const Value *> groupValues(const KernelGroup &g) {
  std::vector<const Value *> vs(g.inputs.begin(), g.inputs.end());
  vs.insert(vs.end(), g.outputs.begin(), g.outputs.end());
  for (const Node *n : g.nodes)
    vs.insert(vs.end(), n->results().begin(), n->results().end());
  for (const KernelGroup::StoreThrough &s : g.storeThrough)
    vs.push_back(s.into);
  return vs;
}

// The group's batch values set to one image while a recipe builds; restored on scope exit.
class OneImageTypes {
public:
  explicit OneImageTypes(const KernelGroup &g) {
    std::set<const Value *> seen;
    for (const Value *v : groupValues(g)) {
      if (!v->type().isSymbolic() || !seen.insert(v).second)
        continue;
      Value *w = const_cast<Value *>(v); // restored below: the graph is unchanged after
      saved_.emplace_back(w, w->type());
      TensorType t = w->type();
      t.shape[0] = 1;
      t.sym.clear();
      w->setType(t);
    }
  }
  ~OneImageTypes() {
    for (auto &[v, t] : saved_)
      v->setType(t);
  }
  OneImageTypes(const OneImageTypes &) = delete;
  OneImageTypes &operator=(const OneImageTypes &) = delete;

private:
  std::vector<std::pair<Value *, TensorType>> saved_;
};

// Rewrites the one-image kernel's reads and writes of the per-image params to image `img`.
class OffsetImages {
public:
  explicit OffsetImages(std::set<const kir::Buffer *> perImage) : perImage_(std::move(perImage)) {}

  E expr(const E &e) const {
    if (!e || e->args.empty())
      return e;
    Expr copy = *e.get();
    bool changed = false;
    for (kir::ExprP &a : copy.args) {
      E r = expr(E(a));
      changed |= r.get() != a;
      a = r.get();
    }
    if (copy.kind == Expr::Kind::Load && perImage_.count(copy.buf.get())) {
      copy.args[0] = (E(copy.args[0]) + kir::var(kImageAxis)).get();
      changed = true;
    }
    return changed ? E(std::make_shared<const Expr>(std::move(copy))) : e;
  }

  void stmts(std::vector<StmtP> &list) const {
    for (StmtP &s : list)
      stmt(*s);
  }

private:
  // Elements of one image of a per-image param (its dims after the first).
  static int64_t imageElems(const kir::Buffer &b) {
    int64_t n = 1;
    for (size_t d = 1; d < b.shape.size(); ++d)
      n *= b.shape[d];
    return n;
  }

  void stmt(Stmt &s) const {
    for (E *e : {&s.begin, &s.extent, &s.value, &s.cond, &s.first, &s.last})
      *e = expr(*e);
    for (E &e : s.indices)
      e = expr(e);
    if (s.kind == Stmt::Kind::Store && perImage_.count(s.buf.get()))
      s.indices.at(0) = s.indices[0] + kir::var(kImageAxis);
    if (s.kind == Stmt::Kind::MmaTile && s.views) {
      // A view reads its operand at a flat offset: indices[0] into a, indices[1] into b.
      if (perImage_.count(s.a.get()))
        s.indices.at(0) = s.indices[0] + kir::var(kImageAxis) * E(imageElems(*s.a));
      if (perImage_.count(s.b.get()))
        s.indices.at(1) = s.indices[1] + kir::var(kImageAxis) * E(imageElems(*s.b));
    }
    for (auto *list : {&s.body, &s.elseBody, &s.init, &s.update})
      stmts(*list);
  }

  std::set<const kir::Buffer *> perImage_;
};

} // namespace

std::optional<SymExpr> perImageBatch(const KernelGroup &g) {
  std::optional<SymExpr> batch;
  for (const Value *v : groupValues(g)) {
    std::optional<SymExpr> b = batchOf(v->type());
    if (!b)
      continue;
    if (b->isConstant() || (batch && !(*batch == *b)))
      return std::nullopt;
    batch = b;
  }
  if (!batch)
    return std::nullopt;
  for (const Node *n : g.nodes)
    if (!perImageNode(*n))
      return std::nullopt;
  for (const KernelGroup::StoreThrough &s : g.storeThrough)
    if (s.value->type().isSymbolic() && !oneImageMap(s.map))
      return std::nullopt;
  return batch;
}

kir::Kernel buildPerImage(const Recipe &r, const KernelGroup &g, const std::string &name,
                          const Knobs &knobs, const SymExpr &batch) {
  KernelGroup one = g;
  for (KernelGroup::StoreThrough &s : one.storeThrough)
    if (s.value->type().isSymbolic())
      s.map = *oneImageMap(s.map);
  // The per-image values (every symbolic one: [B, static...]) and the planning-point batch,
  // their dim 0 before the types change.
  int64_t planned = 1;
  std::set<const Value *> perImageValues;
  for (const Value *v : groupValues(g))
    if (v->type().isSymbolic()) {
      planned = v->type().shape[0];
      perImageValues.insert(v);
    }

  kir::Kernel k;
  {
    OneImageTypes at1(g);
    k = r.build(one, name, knobs);
  }
  // The params are the group's inputs then outputs (lower.h); an output stored through a layout
  // op is that op's result's buffer.
  std::vector<const Value *> paramValues(g.inputs.begin(), g.inputs.end());
  for (const Value *v : g.outputs) {
    const KernelGroup::StoreThrough *st = g.storedThrough(v);
    paramValues.push_back(st ? st->into : v);
  }
  AICF_CHECK(paramValues.size() == k.params.size(), "kernel ", name, ": ", k.params.size(),
             " params for ", paramValues.size(), " group values");
  std::set<const kir::Buffer *> perImage;
  for (size_t i = 0; i < k.params.size(); ++i) {
    if (!perImageValues.count(paramValues[i]))
      continue;
    kir::Buffer &b = *k.params[i];
    b.shape[0] = planned;
    b.sym.clear();
    b.sym.push_back(batch);
    for (size_t d = 1; d < b.shape.size(); ++d)
      b.sym.emplace_back(b.shape[d]);
    perImage.insert(&b);
  }
  OffsetImages(perImage).stmts(k.body);
  k.body.insert(k.body.begin(), kir::comment(cat("one image of the batch ", batch.str(),
                                                 " per step of grid axis ", kImageAxis)));
  if (k.symGrid.empty())
    for (const auto &[axis, extent] : k.grid)
      k.symGrid.push_back(SymExtent{SymExpr(extent), 1});
  k.grid.insert(k.grid.begin(), {kImageAxis, planned});
  k.symGrid.insert(k.symGrid.begin(), SymExtent{batch, 1});
  return k;
}

} // namespace aicf
