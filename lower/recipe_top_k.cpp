// The top_k recipe (ONNX TopK): along the axis, the k best elements in order and their indices,
// by the interpreter's order (interp/kernels_reduce.cpp kernel_TopK): `largest` puts greater
// values first with NaN above every number, else smaller first with NaN last; equal values go
// by index. That order is total, so "the j-th best" is well defined whatever the data.
//
// One line (every position along the axis, for one coordinate of the other dims) per thread of
// a flat loop (lower/flat_loop.h, no vector loop). The thread selects the k best by k passes
// over its line: pass j keeps the best element that comes after the one pass j - 1 chose, and
// stores it at position j. That is k x n comparisons a line and needs no scratch memory: top-k
// as exporters emit it keeps k small against the line (a classifier's top 5 of 1000, a
// detector's pre-selection), and the cost shape charges exactly that. Reads stay in bounds; a
// group stores the results it outputs (values, indices or both). The input may carry a fused
// prologue (GroupExpr::at); fusion gives no epilogue to an anchor with two results.
//
// A run-time k (sym_k, ir/ops.def): the pass count is the data dim an earlier set_dim step set,
// read from the dims, and the outputs are stored through their symbolic strides (the axis's
// length is that dim); `k` is its bound, the reserve. Likewise a line whose length is known only
// at run time (the axis a symbolic dim: top_k of what a non_zero selected) walks that length.
// Only these read the dims (the number of lines, the other dims, stays static), so the kernel
// is the same at every value of them.
#include "lower/flat_loop.h"
#include "lower/recipes.h"

#include "support/diagnostics.h"

#include <algorithm>

namespace aicf {

namespace {

using kir::E;

class TopK {
public:
  TopK(const KernelGroup &g, const std::string &name, const Knobs &knobs)
      : g_(g), a_(*g.anchor), knobs_(knobs) {
    k_.name = name;
    k_.recipe = "top_k";
    k_.params = groupParams(g, byValue_);
    ge_ = std::make_unique<GroupExpr>(g, byValue_);
  }

  kir::Kernel build() {
    const Value *x = a_.operand(0);
    const std::vector<int64_t> &xs = x->type().shape;
    int64_t ax = a_.i("axis");
    size_t axis = static_cast<size_t>(ax < 0 ? ax + static_cast<int64_t>(xs.size()) : ax);
    const int64_t k = a_.i("k"), n = xs[axis];
    const bool largest = a_.i("largest") != 0, fp = isFloat(x->type().dtype);
    DType ct = computeType(x->type().dtype);
    // A run-time k (sym_k: a data dim an earlier set_dim step set) is read from the dims; `k`
    // is then its bound, which the outputs are reserved at and the cost shape charges.
    E passes = E(k);
    if (const std::vector<std::string> &symK = a_.strs("sym_k"); !symK.empty()) {
      std::optional<SymExpr> e = SymExpr::parse(symK.at(0));
      AICF_CHECK(e, a_.where(), ": top_k sym_k '", symK[0], "' is no expression");
      passes = kir::symE(*e);
    }
    // A line's length: read from the dims when the axis is a length known only at run time
    // (a data dim an earlier step set: top_k of what a non_zero selected).
    const SymExpr symN = symShapeOf(x->type())[axis];
    const E lineLen = symN.isConstant() ? E(n) : kir::symE(symN);
    std::vector<int64_t> lineShape = xs;
    lineShape[axis] = 1;
    int64_t lines = 1;
    for (int64_t d : lineShape)
      lines *= d;

    // a before b (values va, vb at indices ia, ib): the order above.
    auto before = [&](E va, E ia, E vb, E ib) {
      E byIndex = ia < ib;
      if (!fp) {
        E better = largest ? va > vb : va < vb;
        return flatloop::orE(better, (va == vb) && byIndex);
      }
      E na = flatloop::isNaN(va), nb = flatloop::isNaN(vb);
      E better = largest ? va > vb : va < vb;
      // A NaN against a number: first when largest, last otherwise. Two NaNs: by index.
      E nanOrder =
          largest ? (na && kir::unary(kir::UnOp::Not, nb)) : (nb && kir::unary(kir::UnOp::Not, na));
      E bothNaN = na && nb;
      return flatloop::orE(flatloop::orE(nanOrder, bothNaN && byIndex),
                           kir::unary(kir::UnOp::Not, flatloop::orE(na, nb)) &&
                               flatloop::orE(better, (va == vb) && byIndex));
    };

    flatloop::buildLines(k_, knobs_, lines, k * n, [&](E i) {
      std::vector<E> line = unflatIndex(lineShape, i);
      auto at = [&](E j) {
        std::vector<E> idx = line;
        idx[axis] = j;
        return idx;
      };
      std::vector<kir::StmtP> out;
      // The previous pass's choice (pi < 0: none yet).
      out.push_back(kir::decl("tk_pv", ct, zeroOf(ct)));
      out.push_back(kir::decl("tk_pi", DType::I64, E(int64_t(-1))));
      std::vector<kir::StmtP> pass;
      pass.push_back(kir::decl("tk_bv", ct, zeroOf(ct)));
      pass.push_back(kir::decl("tk_bi", DType::I64, E(int64_t(-1))));
      E pv = kir::var("tk_pv", ct), pi = kir::var("tk_pi"), bv = kir::var("tk_bv", ct),
        bi = kir::var("tk_bi"), t = kir::var("tk_t"), v = kir::var("tk_v", ct);
      std::vector<kir::StmtP> scan;
      scan.push_back(kir::decl("tk_v", ct, valueOf(ge_->at(x, at(t)), ct)));
      E after = flatloop::orE(pi < E(int64_t(0)), before(pv, pi, v, t));
      E take = after && flatloop::orE(bi < E(int64_t(0)), before(v, t, bv, bi));
      scan.push_back(kir::ifThen(take, {kir::assign("tk_bv", v), kir::assign("tk_bi", t)}));
      pass.push_back(kir::forLoop("tk_t", E(int64_t(0)), lineLen, scan));
      E j = kir::var("tk_j");
      if (const Value *values = output(0))
        pass.push_back(
            storeOutput(g_, ge_->param(values), values, at(j), stored(bv, values->type().dtype)));
      if (const Value *indices = output(1))
        pass.push_back(storeOutput(g_, ge_->param(indices), indices, at(j), bi));
      pass.push_back(kir::assign("tk_pv", bv));
      pass.push_back(kir::assign("tk_pi", bi));
      out.push_back(kir::forLoop("tk_j", E(int64_t(0)), passes, pass));
      return out;
    });
    return std::move(k_);
  }

private:
  const KernelGroup &g_;
  const Node &a_;
  const Knobs &knobs_;
  kir::Kernel k_;
  std::map<const Value *, kir::BufferP> byValue_;
  std::unique_ptr<GroupExpr> ge_;

  // Result r when the group stores it, else null.
  const Value *output(size_t r) const {
    const Value *v = a_.result(r);
    return std::find(g_.outputs.begin(), g_.outputs.end(), v) != g_.outputs.end() ? v : nullptr;
  }

  // Values compare in their compute type: f32 for f16 / bf16, the type itself otherwise.
  static DType computeType(DType t) { return t == DType::F16 || t == DType::BF16 ? DType::F32 : t; }
  static E zeroOf(DType t) {
    return isFloat(t) ? kir::fconst(0.0, t) : kir::cast(E(int64_t(0)), t);
  }
  static E valueOf(E v, DType t) { return v->type == t ? v : kir::cast(v, t); }
  static E stored(E v, DType t) { return v->type == t ? v : kir::cast(v, t); }
};

// Requires: a top_k anchor. Knobs: FlatLoopKnobs (vec is always 1: a line is a serial loop).
// Independent lines, each k passes of n compare-and-select steps (~3 scalar cycles a step on
// the host: a load, the comparisons, two selects; nothing vectorises).
class TopKRecipe final : public flatloop::FlatLoopRecipe<> {
public:
  TopKRecipe()
      : FlatLoopRecipe({.walk = flatloop::Loop::Walk::Lines,
                        .maxVec = 1,
                        .hostCycles = 3.0,
                        .registers = 24}) {}
  const char *name() const override { return "top_k"; }
  bool lowers(const Node *a) const override { return a && a->op() == Op::TopK; }
  // Symbolic along the axis only (a run-time k, a line of run-time length): the lines stay a
  // static count, the pass count, the line's length and the outputs' strides read the dims.
  bool symbolicDims(const KernelGroup &g) const override {
    if (!g.anchor)
      return false;
    const TensorType &x = g.anchor->operand(0)->type();
    int64_t ax = g.anchor->i("axis");
    size_t axis = static_cast<size_t>(ax < 0 ? ax + static_cast<int64_t>(x.rank()) : ax);
    std::vector<SymExpr> xs = symShapeOf(x);
    for (size_t d = 0; d < xs.size(); ++d)
      if (d != axis && !xs[d].isConstant())
        return false;
    return true;
  }
  kir::Kernel build(const KernelGroup &g, const std::string &n, const Knobs &k) const override {
    AICF_CHECK(g.anchor, "top_k recipe needs an anchor (group ", g.id, ")");
    return labelled(TopK(g, n, k).build(), name());
  }
};

} // namespace

const Recipe &topKRecipe() {
  static const TopKRecipe recipe;
  return recipe;
}

} // namespace aicf
