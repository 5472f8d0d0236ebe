// The pointwise recipe: a group of elementwise nodes (plus, optionally, an inference batch_norm
// anchor, a per-channel affine map) computed in one pass over the output elements.
//
// All outputs of a pointwise group share one shape S (fusion.cpp guarantees it); the kernel
// runs a flat grid x threads x vector loop over S's elements, evaluates every node inline and
// stores each output once. Values of shape S are computed once per element into scalars;
// smaller (broadcast) values are recomputed where they are read, which is cheap and keeps the
// kernel a single pass.
//
// Index arithmetic is kept small by collapsing S: adjacent dims merge when every load reads
// them alike (all full, or all broadcast), as the interpreter's row iteration does, so a chain
// over same-shape tensors indexes with the flat element number alone and a bias add needs one
// division. Params are therefore addressed as flat 1-D buffers (same bytes, row-major).
#include "lower/flat_loop.h"
#include "lower/recipes.h"

#include "support/diagnostics.h"

#include <algorithm>

namespace aicf {

namespace {

using kir::E;

// A read of a param: value v whose dim k is S's dim dimMap[k].
struct Load {
  const Value *v;
  std::vector<int> dimMap;
};

class Pointwise {
public:
  Pointwise(const KernelGroup &g, const Knobs &knobs) : g_(g), knobs_(knobs) {}

  kir::Kernel build(const std::string &name) {
    AICF_CHECK(!g_.outputs.empty(), "pointwise group ", g_.id, " has no outputs");
    const TensorType &st = g_.outputs.front()->type();
    S_ = st.shape;
    SS_ = symShapeOf(st);
    for (const Value *o : g_.outputs)
      AICF_CHECK(sameShape(o->type(), st), "pointwise group ", g_.id, ": output %", o->name(), " ",
                 o->type().str(), " differs from the iteration shape ", st.str());
    int64_t n = 1;
    for (int64_t d : S_)
      n *= d;
    nSym_ = symNumel(SS_);
    if (!g_.storeThrough.empty() ||
        std::any_of(g_.nodes.begin(), g_.nodes.end(), [](const Node *m) { return isLayoutOp(*m); }))
      return buildMapped(name, n);

    kir::Kernel k;
    k.name = name;
    k.recipe = "pointwise";
    // Params: flat views of the group's inputs and outputs.
    std::map<const Value *, kir::BufferP> byValue;
    k.params = groupParams(g_, byValue);
    for (const kir::BufferP &b : k.params) {
      // A symbolic param's flat view is as long as its symbolic element count.
      if (!b->sym.empty())
        b->sym = {symNumel(b->sym)};
      b->shape = {std::max<int64_t>(b->numel(), 1)};
    }
    params_ = byValue;

    // Which loads happen, to decide how S collapses.
    collecting_ = true;
    for (const Value *o : g_.outputs)
      eval(o, identity(S_.size()));
    collecting_ = false;
    collapse();

    flatloop::Schedule s = flatloop::schedule(knobs_, n, 16, nSym_);
    flatloop::build(k, n, s, [&](E i) { return element(i, k, s); });
    return k;
  }

private:
  // A group holding folded layout ops (lower/fusion.h, rule 0) reads values at other indices
  // than the element it computes, and one storing through a layout op writes at other indices,
  // which the collapsed dims cannot express: every value is read through GroupExpr at its full
  // multi-index (params keep their shapes), layout ops through their composed maps, and stored
  // at storeIndex.
  kir::Kernel buildMapped(const std::string &name, int64_t n) {
    kir::Kernel k;
    k.name = name;
    k.recipe = "pointwise";
    std::map<const Value *, kir::BufferP> byValue;
    k.params = groupParams(g_, byValue);
    GroupExpr gx(g_, byValue);
    if (g_.anchor && g_.anchor->op() == Op::BatchNorm) {
      const Node *bn = g_.anchor;
      gx.substitute(bn->result(0), [&gx, bn](const std::vector<E> &idx) {
        std::vector<E> c = {idx.at(1)};
        E x = gx.at(bn->operand(0), idx);
        E a = gx.at(bn->operand(1), c) /
              kir::unary(kir::UnOp::Sqrt, gx.at(bn->operand(4), c) + kir::fconst(bn->f("epsilon")));
        E y = (x - gx.at(bn->operand(3), c)) * a + gx.at(bn->operand(2), c);
        DType t = bn->result(0)->type().dtype;
        return (t == DType::F16 || t == DType::BF16) ? kir::cast(y, t) : y;
      });
    }
    std::function<std::vector<kir::StmtP>(const std::vector<E> &)> element =
        [&](const std::vector<E> &idx) {
          std::vector<kir::StmtP> out;
          for (const Value *o : g_.outputs) {
            E v = gx.at(o, idx);
            const kir::BufferP &b = byValue.at(o);
            if (v->type != b->dtype)
              v = kir::cast(v, isFloat(b->dtype) ? DType::F32 : b->dtype);
            out.push_back(storeOutput(g_, b, o, idx, v));
          }
          return out;
        };
    // A host read of a transposed innermost dim of 4, 8 or 16 (a channel block's lanes, an NHWC
    // tensor's channels): the loop runs over the shape without that axis, each element's body
    // an unrolled loop over it (flatloop::laneBlockAxis).
    if (!isGpuPlan(knobs_) && nSym_.isConstant() && !SS_.empty())
      if (std::optional<size_t> a = flatloop::laneBlockAxis(S_, element)) {
        int64_t L = S_[*a];
        element = flatloop::laneBlock(*a, L, element);
        S_[*a] = 1;
        SS_[*a] = SymExpr(int64_t(1));
        n /= L;
        nSym_ = SymExpr(n);
      }
    flatloop::Schedule s = flatloop::schedule(knobs_, n, 16, nSym_);
    // Host: when the vector width divides the innermost dim, a vector's elements differ in that
    // dim alone, so the index is unflattened from the vector's first element and the lane added
    // to the innermost index. Every read through a map is then affine in the lane (contiguous
    // loads, compares against constants) instead of a division per lane, which the compiler
    // can only vectorise as a gather (the LLaMA K rotary: a rotate-half select and a cos/sin
    // table broadcast over heads).
    // When the width divides no innermost dim but the product of the innermost few (a 28 x 28
    // map read from channel blocks), the vector's elements differ in those dims alone: the
    // outer dims come from the vector's first element, the inner ones from their own flat
    // index plus the lane, as [p / W, p % W], which the printers join back into p wherever the
    // read's strides are W s and s (blocked -> NCHW conversions divided per lane before).
    bool host = !isGpuPlan(knobs_) && s.vec > 1 && !SS_.empty();
    bool laneInner = host && SS_.back().divisibleBy(s.vec);
    // A static map whose rows the vector does not divide: planes padded to the vector
    // (flatloop::planes: a 14 x 14 map read from channel blocks).
    if (!isGpuPlan(knobs_) && nSym_.isConstant() && !SS_.empty())
      if (std::optional<flatloop::Planes> p = flatloop::planes(S_, knobs_.get("vec", 16))) {
        s.vec = knobs_.get("vec", 16);
        flatloop::buildPlanes(k, S_, *p, s, element);
        return k;
      }
    size_t split = SS_.size();
    for (size_t d = SS_.size() - 1; host && !laneInner && d-- > 0;)
      if (symNumel(SymShape(SS_.begin() + static_cast<std::ptrdiff_t>(d), SS_.end()))
              .divisibleBy(s.vec)) {
        split = d;
        break;
      }
    flatloop::build(k, n, s, [&](E i) {
      std::vector<E> idx;
      if (laneInner) {
        idx = unflatIndex(SS_, flatloop::vectorStart(k, s));
        idx.back() = idx.back() + flatloop::lane();
      } else if (split < SS_.size()) {
        auto at = SS_.begin() + static_cast<std::ptrdiff_t>(split);
        SymShape outer(SS_.begin(), at), inner(at, SS_.end());
        E start = flatloop::vectorStart(k, s), plane = kir::symE(symNumel(inner));
        idx = unflatIndex(outer, start / plane);
        for (const E &e : unflatIndex(inner, start % plane + flatloop::lane()))
          idx.push_back(e);
      } else {
        idx = unflatIndex(SS_, i);
      }
      return element(idx);
    });
    return k;
  }

  const KernelGroup &g_;
  const Knobs &knobs_;
  std::vector<int64_t> S_; // the iteration shape at the planning point
  SymShape SS_;            // and as expressions (symbolic dims, issue 21)
  SymExpr nSym_;           // its element count
  std::map<const Value *, kir::BufferP> params_;
  bool collecting_ = false;
  std::vector<Load> loads_;
  std::vector<std::vector<int>> groups_; // collapsed dims: S dims merged into each
  std::vector<E> cidx_;                  // coordinates in the collapsed shape
  std::map<const Value *, E> cache_;     // full-shape values already in scalars

  static std::vector<int> identity(size_t r) {
    std::vector<int> m(r);
    for (size_t d = 0; d < r; ++d)
      m[d] = static_cast<int>(d);
    return m;
  }

  bool member(const Node *n) const {
    return n && std::find(g_.nodes.begin(), g_.nodes.end(), n) != g_.nodes.end();
  }

  bool isFullShape(const Value *v) const {
    return v->type().shape == S_ && symShapeOf(v->type()) == SS_;
  }

  bool isFullIdentity(const Value *v, const std::vector<int> &map) const {
    return isFullShape(v) && map == identity(S_.size());
  }

  // Whether a load reads S dim d with a stride (the value spans it) or broadcasts it.
  static bool spans(const Load &l, int d) {
    for (size_t k = 0; k < l.dimMap.size(); ++k)
      if (l.dimMap[k] == d && !isUnitDim(l.v->type().symDim(k)))
        return true;
    return false;
  }

  void collapse() {
    for (size_t d = 0; d < S_.size(); ++d) {
      if (isUnitDim(SS_[d]))
        continue;
      int dd = static_cast<int>(d);
      bool merge = !groups_.empty();
      for (const Load &l : loads_)
        merge = merge && spans(l, groups_.back().back()) == spans(l, dd);
      if (merge)
        groups_.back().push_back(dd);
      else
        groups_.push_back({dd});
    }
  }

  std::vector<kir::StmtP> element(E i, const kir::Kernel &k, const flatloop::Schedule &s) {
    SymShape cshape;
    for (const auto &grp : groups_) {
      SymShape dims;
      for (int d : grp)
        dims.push_back(SS_[d]);
      cshape.push_back(symNumel(dims));
    }
    cidx_ = cshape.size() <= 1 ? std::vector<E>(cshape.size(), i) : unflatIndex(cshape, i);
    // Host, the vector width dividing the innermost collapsed dim: a vector's elements differ
    // in that dim alone, so the index is unflattened once from the vector's first element and
    // the lane added (a broadcast operand's index then has no division per lane: the
    // squeeze-excitation scale [N, CB, 1, 1, 16] over a blocked [N, CB, H, W, 16]).
    if (cshape.size() > 1 && !isGpuPlan(knobs_) && s.vec > 1 && cshape.back().divisibleBy(s.vec)) {
      cidx_ = unflatIndex(cshape, flatloop::vectorStart(k, s));
      cidx_.back() = cidx_.back() + flatloop::lane();
    }
    cache_.clear();
    std::vector<kir::StmtP> out;
    // Every full-shape node result once, in graph order.
    int next = 0;
    for (const Node *n : g_.nodes)
      for (const Value *r : n->results()) {
        if (!isFullShape(r))
          continue;
        E e = eval(r, identity(S_.size()));
        std::string name = cat("e", next++);
        out.push_back(kir::decl(name, e->type, e));
        cache_[r] = kir::var(name, e->type);
      }
    for (const Value *o : g_.outputs) {
      E v = eval(o, identity(S_.size()));
      const kir::BufferP &b = params_.at(o);
      if (v->type != b->dtype) // f32 for float buffers (stores narrow), else the dtype
        v = kir::cast(v, isFloat(b->dtype) ? DType::F32 : b->dtype);
      out.push_back(kir::store(b, {i}, v));
    }
    return out;
  }

  // The flat offset of a load in its (row-major) param.
  E offset(const Value *v, const std::vector<int> &map) const {
    // Row-major strides, as expressions over symbolic dims.
    SymShape shape = symShapeOf(v->type());
    SymShape st(shape.size(), SymExpr(1));
    for (size_t k = shape.size(); k-- > 1;)
      st[k - 1] = symNumel({st[k], shape[k]});
    E off = E(int64_t(0));
    for (size_t j = 0; j < groups_.size(); ++j) {
      // The innermost S dim of the group that the value spans gives the stride.
      int inner = groups_[j].back();
      for (size_t k = 0; k < map.size(); ++k)
        if (map[k] == inner && !isUnitDim(shape[k]))
          off = off + cidx_[j] * kir::symE(st[k]);
    }
    return off;
  }

  E eval(const Value *v, const std::vector<int> &map) {
    if (!collecting_ && isFullIdentity(v, map))
      if (auto it = cache_.find(v); it != cache_.end())
        return it->second;
    const Node *def = v->def();
    if (member(def) && def->info().has(EW)) {
      std::vector<E> ops;
      size_t rv = v->type().shape.size();
      for (const Value *o : def->operands()) {
        size_t ro = o->type().shape.size();
        std::vector<int> omap(map.begin() + static_cast<long>(rv - ro), map.end());
        ops.push_back(eval(o, omap));
      }
      return collecting_ ? E(int64_t(0)) : elementwiseExpr(*def, ops);
    }
    if (member(def) && def->op() == Op::BatchNorm)
      return batchNorm(*def, map);
    AICF_CHECK(params_.count(v), "pointwise group ", g_.id, ": %", v->name(),
               " is neither computed here nor a param");
    if (collecting_) {
      loads_.push_back({v, map});
      return E(int64_t(0));
    }
    return kir::load(params_.at(v), {offset(v, map)});
  }

  // y = (x - mean) * (scale / sqrt(var + eps)) + bias, per channel (dim 1).
  E batchNorm(const Node &bn, const std::vector<int> &map) {
    AICF_CHECK(map.size() >= 2, "batch_norm of rank ", map.size());
    E x = eval(bn.operand(0), map);
    std::vector<int> cmap = {map[1]};
    E scale = eval(bn.operand(1), cmap), bias = eval(bn.operand(2), cmap);
    E mean = eval(bn.operand(3), cmap), var = eval(bn.operand(4), cmap);
    if (collecting_)
      return E(int64_t(0));
    E a = scale / kir::unary(kir::UnOp::Sqrt, var + kir::fconst(bn.f("epsilon")));
    E y = (x - mean) * a + bias;
    DType t = bn.result(0)->type().dtype;
    return (t == DType::F16 || t == DType::BF16) ? kir::cast(y, t) : y;
  }
};

} // namespace

kir::Kernel recipePointwise(const KernelGroup &g, const std::string &name, const Knobs &k) {
  return Pointwise(g, k).build(name);
}

namespace {

// Requires: no anchor (elementwise nodes only) or an inference batch_norm anchor (a per-channel
// affine map). Knobs: FlatLoopKnobs.
class PointwiseRecipe final : public flatloop::FlatLoopRecipe<> {
public:
  PointwiseRecipe() : FlatLoopRecipe({.maxVec = 16, .registers = 12, .registersPerVec = 2}) {}
  const char *name() const override { return "pointwise"; }
  bool writesInPlace() const override { return true; }
  bool lowers(const Node *a) const override { return !a || a->op() == Op::BatchNorm; }
  // Symbolic dims: the flat loop's count, grid and guard, the collapsed dims' extents and the
  // loads' strides are expressions in the dims (broadcast dims only where constant 1).
  bool symbolicDims(const KernelGroup &) const override { return true; }
  kir::Kernel build(const KernelGroup &g, const std::string &n, const Knobs &k) const override {
    return labelled(recipePointwise(g, n, k), name());
  }
};

} // namespace

const Recipe &pointwiseRecipe() {
  static const PointwiseRecipe recipe;
  return recipe;
}

} // namespace aicf
