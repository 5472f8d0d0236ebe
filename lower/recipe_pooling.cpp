// The pooling recipe: max_pool / avg_pool over N-d windows (NC... layout) with pads, strides,
// dilations, ceil_mode (already reflected in the output shape) and count_include_pad.
//
// A flat grid x threads x vector loop over the output elements; each element walks its window
// with one serial loop per spatial dim, reading only positions inside the input. Exactly the
// interpreter's rule (interp/kernels_reduce.cpp): max propagates NaN; avg divides by the
// in-input positions, or with count_include_pad by the positions inside the padded input
// (never those beyond the end padding that ceil_mode adds); an empty window gives NaN. The
// operand's fused prologue is inlined at each read, the epilogue applied before the store.
#include "lower/flat_loop.h"
#include "lower/recipes.h"

#include "support/diagnostics.h"

#include <cmath>

namespace aicf {

kir::Kernel recipePooling(const KernelGroup &g, const std::string &name, const Knobs &knobs) {
  using kir::E;
  AICF_CHECK(g.anchor && (g.anchor->op() == Op::MaxPool || g.anchor->op() == Op::AvgPool),
             "pooling recipe on group ", g.id, " (", g.kind, ")");
  const Node &a = *g.anchor;
  bool isMax = a.op() == Op::MaxPool;
  bool includePad = !isMax && a.i("count_include_pad") != 0;
  const Value *x = a.operand(0);
  const Value *res = a.result(0);
  const std::vector<int64_t> &xs = x->type().shape, &os = res->type().shape;
  const auto &ks = a.ints("kernel_shape"), &st = a.ints("strides"), &pd = a.ints("pads"),
             &dl = a.ints("dilations");
  size_t S = xs.size() - 2;
  AICF_CHECK(ks.size() == S && st.size() == S && dl.size() == S && pd.size() == 2 * S, a.where(),
             ": pooling attributes do not match rank ", xs.size());

  kir::Kernel k;
  k.name = name;
  k.recipe = "pooling";
  std::map<const Value *, kir::BufferP> byValue;
  k.params = groupParams(g, byValue);
  GroupExpr ge(g, byValue);
  int64_t n = 1;
  for (int64_t d : os)
    n *= d;

  auto body = [&](E i) {
    std::vector<E> oidx = unflatIndex(os, i);
    E zero = E(int64_t(0)), one = E(int64_t(1));
    std::vector<kir::StmtP> out = {
        kir::decl("acc", DType::F32, kir::fconst(isMax ? -INFINITY : 0.0)),
        kir::decl("cnt", DType::I64, zero)};
    if (includePad)
      out.push_back(kir::decl("pcnt", DType::I64, zero));
    // Innermost: the window position's input coordinates, then the accumulation.
    std::vector<E> xidx = {oidx[0], oidx[1]};
    std::vector<kir::StmtP> inner;
    E inside, insidePadded;
    for (size_t d = 0; d < S; ++d) {
      std::string pi = cat("pi", d);
      E kd = kir::var(cat("k", d));
      inner.push_back(kir::decl(pi, DType::I64, oidx[2 + d] * E(st[d]) - E(pd[d]) + kd * E(dl[d])));
      E c = kir::var(pi);
      E in = (c >= zero) && (c < E(xs[2 + d]));
      E inP = c < E(xs[2 + d] + pd[S + d]);
      inside = inside ? (inside && in) : in;
      insidePadded = insidePadded ? (insidePadded && inP) : inP;
      xidx.push_back(c);
    }
    E v = ge.at(x, xidx);
    if (v->type != DType::F32)
      v = kir::cast(v, DType::F32);
    E acc = kir::var("acc", DType::F32);
    E upd = isMax ? flatloop::nanMaxUpdate(acc, v) : acc + v;
    std::vector<kir::StmtP> take = {kir::assign("acc", upd),
                                    kir::assign("cnt", kir::var("cnt") + one)};
    inner.push_back(inside ? kir::ifThen(inside, take) : kir::seq(take));
    if (includePad && static_cast<bool>(insidePadded))
      inner.push_back(kir::ifThen(insidePadded, {kir::assign("pcnt", kir::var("pcnt") + one)}));
    std::vector<kir::StmtP> loops = inner;
    for (size_t d = S; d-- > 0;)
      loops = {kir::forLoop(cat("k", d), zero, E(ks[d]), loops)};
    out.insert(out.end(), loops.begin(), loops.end());
    E value = acc;
    if (!isMax) {
      E div = includePad ? kir::var("pcnt") : kir::var("cnt");
      value = kir::select(div == zero, kir::fconst(NAN), acc / kir::cast(div, DType::F32));
    }
    DType outT = res->type().dtype;
    if (outT == DType::F16 || outT == DType::BF16)
      value = kir::cast(value, outT);
    std::vector<kir::StmtP> stores = storeGroupOutputs(g, ge, res, value, oidx, "o");
    out.insert(out.end(), stores.begin(), stores.end());
    return out;
  };
  flatloop::build(k, n, flatloop::schedule(knobs, n, 4), body);
  int64_t taps = 1;
  for (int64_t kd : ks)
    taps *= kd;
  auto problem = std::make_shared<FlatLoopProblem>(problemOf<FlatLoopProblem>(k));
  problem->taps = taps;
  k.problem = problem;
  return k;
}

namespace {

// Requires: a max_pool / avg_pool anchor. Knobs: FlatLoopKnobs (vec at most 4).
class PoolingRecipe final : public Recipe {
public:
  const char *name() const override { return "pooling"; }
  bool lowers(const Node *a) const override {
    return a && (a->op() == Op::MaxPool || a->op() == Op::AvgPool);
  }
  kir::Kernel build(const KernelGroup &g, const std::string &n, const Knobs &k) const override {
    return labelled(recipePooling(g, n, k), name());
  }
  KnobSet canonicalKnobs(const KnobSet &k) const override {
    return knobsToMap(knobsFromMap<FlatLoopKnobs>(k));
  }
  std::vector<KnobSet> candidates(const kir::Kernel &d, const Hardware &hw) const override {
    return flatloop::candidates(d, hw, 4);
  }
  // A host gather: ~7 cycles per element for the multi-index and ~4 more per window tap.
  CostShape costShape(const KernelGroup &, const kir::Kernel &k, const Hardware &hw,
                      int64_t flops) const override {
    return flatloop::costShape(k, hw, flops,
                               7.0 + 4.0 * double(problemOf<FlatLoopProblem>(k).taps));
  }
  int64_t registers(const kir::Kernel &k) const override { return 10 + 5 * knobOf(k, "vec", 1); }
};

} // namespace

const Recipe &poolingRecipe() {
  static const PoolingRecipe recipe;
  return recipe;
}

} // namespace aicf
