// The non_zero and set_dim recipes: two of the ops that set a data dim (ir/ops.def "lengths
// known only at run time"), by the interpreter's kernels (interp/kernels_data.cpp
// kernel_NonZero, kernel_SetDim).
//
// The runtime contract: the data result is reserved at the dim's bound and written packed at
// the actual length (row-major of [rank, count]: row stride count), the count goes to the last
// result, and the runtime reads it after the step, checks it against the bound and sets the
// dim. Inside this kernel the dim's value in the dims is therefore stale: nothing here reads it.
// The indices are written through a flat view of their buffer (d * count + c, from the count
// this kernel computed), never through the symbolic strides. Nothing depends on the dim's
// planning value either, so the kernel prints the same at 0 and at the bound (the compile
// driver's shape-generic certificate).
//
// non_zero is one serial walk (flatloop::buildSerial): pass 1 counts the non-zero elements,
// pass 2 writes each one's coordinates at column c of the packed result. Two passes and no
// scratch memory: the row stride is the count, known only after the first. A count above the
// bound (a --max bound below the element count) writes no index, only the count, which fails
// the run; no store leaves the reserved buffer. The input may carry a fused prologue
// (GroupExpr::at: `x > 0.5` is never stored). set_dim copies its one element to the count.
#include "lower/flat_loop.h"
#include "lower/recipes.h"

#include "support/diagnostics.h"

#include <algorithm>

namespace aicf {

namespace {

using kir::E;

// Whether the group stores value v.
bool stores(const KernelGroup &g, const Value *v) {
  return std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end();
}

// The count result of a SETS_DIM anchor, which every group of one stores (lower/fusion.cpp).
const Value *countOf(const KernelGroup &g) {
  const Value *count = g.anchor->results().back();
  AICF_CHECK(stores(g, count) && g.storeThrough.empty(), g.anchor->where(), ": the ",
             g.anchor->name(), " group must store its count, not through a layout op");
  return count;
}

// v != 0 as the interpreter tests it (a float NaN is non-zero; bool is itself).
E nonZero(E v) {
  v = flatloop::computeValue(v);
  if (v->type == DType::Bool)
    return v;
  if (isFloat(v->type))
    return flatloop::ne(v, kir::fconst(0.0, v->type));
  return flatloop::ne(v->type == DType::I64 ? v : kir::cast(v, DType::I64), E(int64_t(0)));
}

class NonZero {
public:
  NonZero(const KernelGroup &g, const std::string &name, const Knobs &knobs)
      : g_(g), a_(*g.anchor), knobs_(knobs) {
    k_ = startKernel(g, name, "non_zero", byValue_);
    ge_ = std::make_unique<GroupExpr>(g, byValue_);
  }

  kir::Kernel build() {
    const Value *x = a_.operand(0), *indices = a_.result(0), *count = countOf(g_);
    SymShape xs = symShapeOf(x->type());
    const size_t rank = xs.size();
    const int64_t bound = a_.i("bound");
    // The indices as the kernel writes them: a flat view of their rank x bound reserve.
    kir::BufferP out;
    if (stores(g_, indices)) {
      out = ge_->param(indices);
      AICF_CHECK(!out->sym.empty(), a_.where(), ": non_zero indices ", indices->type().str(),
                 " without their data dim");
      out->sym = {symNumel(out->sym)};
      out->shape = {std::max<int64_t>(static_cast<int64_t>(rank) * bound, 1)};
    }
    // Nested loops over x's dims (extents from the dims where symbolic), `body` at each index.
    auto walk = [&](const std::string &prefix,
                    const std::function<std::vector<kir::StmtP>(const std::vector<E> &)> &body) {
      std::vector<E> idx;
      for (size_t d = 0; d < rank; ++d)
        idx.push_back(kir::var(cat(prefix, d)));
      std::vector<kir::StmtP> s = body(idx);
      for (size_t d = rank; d-- > 0;)
        s = {kir::forLoop(cat(prefix, d), E(int64_t(0)), kir::symE(xs[d]), s)};
      return s;
    };
    flatloop::buildSerial(k_, knobs_, 2 * x->type().numel(), [&] {
      std::vector<kir::StmtP> out1;
      E n = kir::var("nz_n");
      out1.push_back(kir::decl("nz_n", DType::I64, E(int64_t(0))));
      // Pass 1: the count.
      for (kir::StmtP &s : walk("nz_a", [&](const std::vector<E> &idx) {
             return std::vector<kir::StmtP>{
                 kir::ifThen(nonZero(ge_->at(x, idx)), {kir::assign("nz_n", n + E(int64_t(1)))})};
           }))
        out1.push_back(s);
      // Pass 2: hit c's coordinates at out[d * n + c], when they fit the reserve.
      if (out && rank > 0) {
        E c = kir::var("nz_c");
        std::vector<kir::StmtP> pass2 = {kir::decl("nz_c", DType::I64, E(int64_t(0)))};
        for (kir::StmtP &s : walk("nz_b", [&](const std::vector<E> &idx) {
               std::vector<kir::StmtP> hit;
               for (size_t d = 0; d < rank; ++d)
                 hit.push_back(kir::store(out, {E(static_cast<int64_t>(d)) * n + c}, idx[d]));
               hit.push_back(kir::assign("nz_c", c + E(int64_t(1))));
               return std::vector<kir::StmtP>{kir::ifThen(nonZero(ge_->at(x, idx)), hit)};
             }))
          pass2.push_back(s);
        out1.push_back(kir::ifThen(n <= E(bound), pass2));
      }
      out1.push_back(kir::store(ge_->param(count), {}, n));
      return out1;
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
};

kir::Kernel buildSetDim(const KernelGroup &g, const std::string &name, const Knobs &knobs) {
  std::map<const Value *, kir::BufferP> byValue;
  kir::Kernel k = startKernel(g, name, "set_dim", byValue);
  GroupExpr ge(g, byValue);
  const Node &a = *g.anchor;
  const Value *v = a.operand(0), *count = countOf(g);
  std::vector<E> first(v->type().rank(), E(int64_t(0)));
  flatloop::buildSerial(k, knobs, 1, [&] {
    E x = ge.at(v, first);
    return std::vector<kir::StmtP>{
        kir::store(ge.param(count), {}, x->type == DType::I64 ? x : kir::cast(x, DType::I64))};
  });
  return k;
}

// The two plan as one serial walk (flatloop::FlatLoopRecipe), ~3 scalar cycles a step (a load,
// a compare, a branch; two stores a hit).
class SerialRecipe : public flatloop::FlatLoopRecipe<> {
public:
  SerialRecipe()
      : FlatLoopRecipe({.walk = flatloop::Loop::Walk::Serial, .hostCycles = 3.0, .registers = 24}) {
  }
};

// Requires: a non_zero anchor. Knobs: FlatLoopKnobs (one thread).
class NonZeroRecipe final : public SerialRecipe {
public:
  const char *name() const override { return "non_zero"; }
  bool lowers(const Node *a) const override { return a && a->op() == Op::NonZero; }
  kir::Kernel build(const KernelGroup &g, const std::string &n, const Knobs &k) const override {
    AICF_CHECK(g.anchor, "non_zero recipe needs an anchor (group ", g.id, ")");
    return NonZero(g, n, k).build();
  }
};

// Requires: a set_dim anchor. Knobs: FlatLoopKnobs (one thread).
class SetDimRecipe final : public SerialRecipe {
public:
  const char *name() const override { return "set_dim"; }
  bool lowers(const Node *a) const override { return a && a->op() == Op::SetDim; }
  kir::Kernel build(const KernelGroup &g, const std::string &n, const Knobs &k) const override {
    AICF_CHECK(g.anchor, "set_dim recipe needs an anchor (group ", g.id, ")");
    return buildSetDim(g, n, k);
  }
};

} // namespace

const Recipe &nonZeroRecipe() {
  static const NonZeroRecipe recipe;
  return recipe;
}

const Recipe &setDimRecipe() {
  static const SetDimRecipe recipe;
  return recipe;
}

} // namespace aicf
