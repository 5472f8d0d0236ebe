// The choose recipe: an If chosen at run time whose branches give values of different lengths
// (ir/ops.def `choose`: cond ? x : y, the two differing in dim 0 only), by the interpreter's
// kernel (interp/kernels_data.cpp kernel_Choose). Its result's dim 0 is a data dim: the chosen
// side's length, which the count result carries and the runtime sets after the step.
//
// The result is reserved at the bound and written packed at the chosen length; since only dim 0
// differs, that packed layout is the chosen side's own row-major order, so the kernel is a flat
// copy: element e of the chosen side to element e of the result (a flat view of it), for e below
// the side's element count, and element 0's thread also writes the count (the loop has one
// element more than the reserve, so there is an element 0 even when the reserve is empty). The
// sides' lengths come from their types (dims that earlier steps set, or constants); the result's
// own dim, stale inside this kernel, is never read, and the loop runs over the reserve (the bound
// times the other dims), so nothing is written past it even when the count is above the bound
// (which fails the run). A side with no element (the empty branch, a constant i64[0]) is never
// read. The condition may carry a fused prologue (GroupExpr::at); fusion gives the anchor no
// epilogue (lower/fusion.cpp rule 11).
#include "lower/flat_loop.h"
#include "lower/recipes.h"

#include "support/diagnostics.h"

#include <algorithm>

namespace aicf {

namespace {

using kir::E;

kir::Kernel buildChoose(const KernelGroup &g, const std::string &name, const Knobs &knobs) {
  std::map<const Value *, kir::BufferP> byValue;
  kir::Kernel k = startKernel(g, name, "choose", byValue);
  const Node &a = *g.anchor;
  const Value *cond = a.operand(0), *result = a.result(0), *count = a.result(1);
  auto stored = [&](const Value *v) {
    return std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end();
  };
  AICF_CHECK(stored(result) && stored(count) && g.storeThrough.empty(), a.where(),
             ": the choose group must store both results, not through a layout op");
  // The sides: their shapes as expressions, and whether they hold any element.
  SymShape side[2] = {symShapeOf(a.operand(1)->type()), symShapeOf(a.operand(2)->type())};
  bool empty[2];
  for (int s = 0; s < 2; ++s) {
    // (By its dims, not its planning shape: a data dim is 0 at one end of its range.)
    SymExpr elements = symNumel(side[s]);
    empty[s] = elements.isConstant() && elements.constant() == 0;
    // A side with no element is never read: a one-element view keeps its param valid.
    if (empty[s] && byValue.count(a.operand(static_cast<size_t>(s) + 1)))
      byValue.at(a.operand(static_cast<size_t>(s) + 1))->shape = {1};
  }
  // The result as a flat view of its reserve: the bound times the other dims.
  kir::BufferP out = byValue.at(result);
  SymShape rs = symShapeOf(result->type());
  SymShape rest(rs.begin() + 1, rs.end());
  std::optional<SymExpr> reserve = SymExpr::mul(SymExpr(a.i("bound")), symNumel(rest));
  AICF_CHECK(reserve, a.where(), ": choose reserve overflows");
  out->sym = {symNumel(rs)};
  // The loop: every element of the reserve, plus one so that element 0 (which writes the count)
  // exists even when the reserve is empty. Its planning count is the reserve at the other dims'
  // planning values (never the data dim's, which the shape-generic certificate varies).
  int64_t n = a.i("bound");
  for (size_t d = 1; d < result->type().shape.size(); ++d)
    n *= result->type().shape[d];
  out->shape = {std::max<int64_t>(n, 1)};
  std::optional<SymExpr> elements = SymExpr::add(*reserve, SymExpr(1));
  AICF_CHECK(elements, a.where(), ": choose reserve overflows");
  GroupExpr ge(g, byValue);

  flatloop::Schedule s = flatloop::schedule(knobs, n + 1, 1, *elements);
  flatloop::build(k, n + 1, s, [&](E i) {
    std::vector<kir::StmtP> body;
    body.push_back(kir::decl("ch_c", DType::Bool,
                             ge.at(cond, std::vector<E>(cond->type().rank(), E(int64_t(0))))));
    E c = kir::var("ch_c", DType::Bool);
    std::vector<kir::StmtP> copy[2];
    for (int t = 0; t < 2; ++t)
      if (!empty[t]) {
        const Value *v = a.operand(static_cast<size_t>(t) + 1);
        copy[t] = {kir::ifThen((i < kir::symE(*reserve)) && (i < kir::symE(symNumel(side[t]))),
                               {kir::store(out, {i}, ge.at(v, unflatIndex(side[t], i)))})};
      }
    body.push_back(kir::ifThen(c, copy[0], copy[1]));
    E len = kir::select(c, kir::symE(side[0][0]), kir::symE(side[1][0]));
    body.push_back(kir::ifThen(i == E(int64_t(0)), {kir::store(ge.param(count), {}, len)}));
    return body;
  });
  return k;
}

// Requires: a choose anchor. Knobs: FlatLoopKnobs (vec is always 1: a branch per element).
class ChooseRecipe final : public Recipe {
public:
  const char *name() const override { return "choose"; }
  bool lowers(const Node *a) const override { return a && a->op() == Op::Choose; }
  bool symbolicDims(const KernelGroup &) const override { return true; }
  kir::Kernel build(const KernelGroup &g, const std::string &n, const Knobs &k) const override {
    AICF_CHECK(g.anchor, "choose recipe needs an anchor (group ", g.id, ")");
    return buildChoose(g, n, k);
  }
  KnobSet canonicalKnobs(const KnobSet &k) const override {
    return knobsToMap(knobsFromMap<FlatLoopKnobs>(k));
  }
  std::vector<KnobSet> candidates(const kir::Kernel &d, const Hardware &hw) const override {
    return flatloop::candidates(d, hw, 1);
  }
  // A copy with a branch and a multi-index per element (~3 scalar cycles on the host).
  CostShape costShape(const KernelGroup &, const kir::Kernel &k, const Hardware &hw,
                      int64_t flops) const override {
    return flatloop::costShape(k, hw, flops, 3.0);
  }
  int64_t registers(const kir::Kernel &) const override { return 24; }
};

} // namespace

const Recipe &chooseRecipe() {
  static const ChooseRecipe recipe;
  return recipe;
}

} // namespace aicf
