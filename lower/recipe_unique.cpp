// The unique recipe (ONNX Unique along axis 0, ir/ops.def), by the interpreter's kernel
// (interp/kernels_data.cpp kernel_Unique): the distinct slices x[i, ...], ascending (sorted)
// or in order of first occurrence, each one's first index, every input slice's position among
// them (the inverse map) and the occurrences of each. Slices compare element by element in
// row-major order; NaN equals NaN and sorts after every number, as the interpreter orders them.
//
// Result t's position depends on every result before it, so the op is one serial walk
// (flatloop::buildSerial), and it needs no scratch memory:
// - sorted: pass t selects the least slice above pass t - 1's choice (its first occurrence: a
//   later equal slice is not less), then one scan from that index counts its equals and writes
//   their inverse entries. Passes stop once none is above; n passes of n candidates at most.
// - first occurrence: one scan over the slices; each is compared with the distinct ones found
//   so far, read back through their first indices (the indices result, which a group of an op
//   setting a data dim always stores: lower/fusion.cpp rule 11), and either counted or appended.
// Either way the work is n x (number of distinct slices) slice comparisons: unique as exporters
// use it runs over labels or classes, few distinct values. The cost shape charges the bound.
//
// The results' rows are laid out by the slice's static size (row t of the slices at t x slice
// size, of the others at t), so no stride reads the data dim, which is stale inside this kernel.
// Past the bound (a --max below the actual count) no row is written: the count alone goes on
// and fails the run. The walk never reads the dim's planning value, so the kernel prints the
// same at 0 and at the bound.
#include "lower/flat_loop.h"
#include "lower/recipes.h"

#include "support/diagnostics.h"

#include <algorithm>

namespace aicf {

namespace {

using kir::E;

class Unique {
public:
  Unique(const KernelGroup &g, const std::string &name, const Knobs &knobs)
      : g_(g), a_(*g.anchor), knobs_(knobs) {
    k_ = startKernel(g, name, "unique", byValue_);
    ge_ = std::make_unique<GroupExpr>(g, byValue_);
  }

  kir::Kernel build() {
    x_ = a_.operand(0);
    for (const Value *r : a_.results())
      AICF_CHECK(std::find(g_.outputs.begin(), g_.outputs.end(), r) != g_.outputs.end() &&
                     g_.storeThrough.empty(),
                 a_.where(), ": the unique group must store every result, not through a layout op");
    xs_ = symShapeOf(x_->type());
    y_ = ge_->param(a_.result(0));
    indices_ = ge_->param(a_.result(1));
    inverse_ = ge_->param(a_.result(2));
    counts_ = ge_->param(a_.result(3));
    bound_ = E(a_.i("bound"));
    const int64_t n = x_->type().shape[0], slice = n > 0 ? x_->type().numel() / n : 0;
    const int64_t work = n * std::max<int64_t>(a_.i("bound"), 1) * std::max<int64_t>(slice, 1);
    flatloop::buildSerial(k_, knobs_, work, [&] {
      std::vector<kir::StmtP> s = a_.i("sorted") ? sorted() : firstOccurrence();
      s.push_back(kir::store(ge_->param(a_.results().back()), {}, kir::var("u_m")));
      return s;
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
  const Value *x_ = nullptr;
  SymShape xs_;
  kir::BufferP y_, indices_, inverse_, counts_;
  E bound_;
  int names_ = 0;

  E n() const { return kir::symE(xs_[0]); }
  std::string fresh(const std::string &base) { return cat("u_", base, names_++); }

  // Nested loops over the slice's dims (x's dims after the first), `body` at each index.
  std::vector<kir::StmtP>
  overSlice(const std::function<std::vector<kir::StmtP>(std::vector<E>)> &body) {
    std::vector<E> rest;
    std::vector<std::string> vars;
    for (size_t d = 1; d < xs_.size(); ++d) {
      vars.push_back(fresh("e"));
      rest.push_back(kir::var(vars.back()));
    }
    std::vector<kir::StmtP> s = body(rest);
    for (size_t d = xs_.size(); d-- > 1;)
      s = {kir::forLoop(vars[d - 1], E(int64_t(0)), kir::symE(xs_[d]), s)};
    return s;
  }

  // x's element at slice i, position `rest`, in a type that compares as the interpreter does.
  E element(E i, const std::vector<E> &rest) {
    std::vector<E> idx = {std::move(i)};
    idx.insert(idx.end(), rest.begin(), rest.end());
    E v = flatloop::computeValue(ge_->at(x_, idx));
    if (isFloat(v->type) || v->type == DType::I64)
      return v;
    return kir::cast(v, DType::I64);
  }
  // a before b in the order: a < b, or a a number and b NaN.
  static E less(E a, E b) {
    if (!isFloat(a->type))
      return a < b;
    return flatloop::orE(a < b,
                         kir::unary(kir::UnOp::Not, flatloop::isNaN(a)) && flatloop::isNaN(b));
  }
  // Statements declaring `name` (i64): -1, 0 or 1 as slice a is before, equal to or after b.
  std::vector<kir::StmtP> compare(const std::string &name, E a, E b) {
    E c = kir::var(name);
    std::vector<kir::StmtP> s = {kir::decl(name, DType::I64, E(int64_t(0)))};
    for (kir::StmtP &l : overSlice([&](const std::vector<E> &rest) {
           std::string va = fresh("a"), vb = fresh("b");
           E ea = element(a, rest), eb = element(b, rest);
           E x = kir::var(va, ea->type), y = kir::var(vb, eb->type);
           return std::vector<kir::StmtP>{kir::ifThen(
               c == E(int64_t(0)),
               {kir::decl(va, ea->type, ea), kir::decl(vb, eb->type, eb),
                kir::ifThen(less(x, y), {kir::assign(name, E(int64_t(-1)))},
                            {kir::ifThen(less(y, x), {kir::assign(name, E(int64_t(1)))})})})};
         }))
      s.push_back(l);
    return s;
  }
  // Result row t: slice i, its first index i (count and inverse apart).
  std::vector<kir::StmtP> appendRow(E t, E i) {
    std::vector<kir::StmtP> s = overSlice([&](const std::vector<E> &rest) {
      std::vector<E> idx = {t};
      idx.insert(idx.end(), rest.begin(), rest.end());
      std::vector<E> from = {i};
      from.insert(from.end(), rest.begin(), rest.end());
      E v = ge_->at(x_, from);
      if (v->type != y_->dtype)
        v = kir::cast(v, y_->dtype);
      return std::vector<kir::StmtP>{kir::store(y_, idx, v)};
    });
    s.push_back(kir::store(indices_, {t}, i));
    return s;
  }

  std::vector<kir::StmtP> sorted() {
    E m = kir::var("u_m"), prev = kir::var("u_prev"), done = kir::var("u_done");
    E t = kir::var("u_t"), i = kir::var("u_i"), j = kir::var("u_j"), best = kir::var("u_best");
    E after = kir::var("u_after"), count = kir::var("u_n");
    E zero = E(int64_t(0)), one = E(int64_t(1)), none = E(int64_t(-1));
    // Candidate i: above the previous choice and below the best so far.
    std::vector<kir::StmtP> candidate = {kir::decl("u_after", DType::I64, one)};
    std::vector<kir::StmtP> abovePrev = compare("u_cp", prev, i);
    abovePrev.push_back(kir::ifThen(kir::var("u_cp") >= zero, {kir::assign("u_after", zero)}));
    candidate.push_back(kir::ifThen(prev >= zero, abovePrev));
    std::vector<kir::StmtP> belowBest = compare("u_cb", i, best);
    belowBest.push_back(kir::ifThen(kir::var("u_cb") < zero, {kir::assign("u_best", i)}));
    candidate.push_back(
        kir::ifThen(flatloop::ne(after, zero),
                    {kir::ifThen(best < zero, {kir::assign("u_best", i)}, belowBest)}));
    // The chosen slice's equals: counted, their inverse entries written.
    std::vector<kir::StmtP> equal = compare("u_ce", j, best);
    equal.push_back(kir::ifThen(kir::var("u_ce") == zero,
                                {kir::assign("u_n", count + one), kir::store(inverse_, {j}, t)}));
    std::vector<kir::StmtP> chosen = {kir::ifThen(t < bound_, appendRow(t, best)),
                                      kir::decl("u_n", DType::I64, zero),
                                      kir::forLoop("u_j", best, n() - best, equal),
                                      kir::ifThen(t < bound_, {kir::store(counts_, {t}, count)}),
                                      kir::assign("u_prev", best),
                                      kir::assign("u_m", t + one)};
    std::vector<kir::StmtP> pass = {kir::decl("u_best", DType::I64, none),
                                    kir::forLoop("u_i", zero, n(), candidate),
                                    kir::ifThen(best < zero, {kir::assign("u_done", one)}, chosen)};
    return {kir::decl("u_m", DType::I64, zero), kir::decl("u_prev", DType::I64, none),
            kir::decl("u_done", DType::I64, zero),
            kir::forLoop("u_t", zero, n(), {kir::ifThen(done == zero, pass)})};
  }

  std::vector<kir::StmtP> firstOccurrence() {
    E m = kir::var("u_m"), i = kir::var("u_i"), r = kir::var("u_r"), grp = kir::var("u_g");
    E zero = E(int64_t(0)), one = E(int64_t(1));
    // Slice i against distinct slice r (read back through its first index).
    std::vector<kir::StmtP> test = {kir::decl("u_k", DType::I64, kir::load(indices_, {r}))};
    std::vector<kir::StmtP> cmp = compare("u_c", kir::var("u_k"), i);
    test.insert(test.end(), cmp.begin(), cmp.end());
    test.push_back(kir::ifThen(kir::var("u_c") == zero, {kir::assign("u_g", r)}));
    std::vector<kir::StmtP> append;
    append.push_back(kir::ifThen(m < bound_, [&] {
      std::vector<kir::StmtP> s = appendRow(m, i);
      s.push_back(kir::store(counts_, {m}, zero));
      return s;
    }()));
    append.push_back(kir::assign("u_g", m));
    append.push_back(kir::assign("u_m", m + one));
    std::vector<kir::StmtP> step = {
        kir::decl("u_g", DType::I64, E(int64_t(-1))),
        kir::forLoop("u_r", zero, kir::select(m < bound_, m, bound_),
                     {kir::ifThen(grp < zero, test)}),
        kir::ifThen(grp < zero, append),
        kir::ifThen(grp < bound_, {kir::store(counts_, {grp}, kir::load(counts_, {grp}) + one)}),
        kir::store(inverse_, {i}, grp)};
    return {kir::decl("u_m", DType::I64, zero), kir::forLoop("u_i", zero, n(), step)};
  }
};

// Requires: a unique anchor. Knobs: FlatLoopKnobs (one thread: buildSerial). One serial walk
// (flatloop::FlatLoopRecipe): ~3 scalar cycles a step (two loads, the order's compares).
class UniqueRecipe final : public flatloop::FlatLoopRecipe<> {
public:
  UniqueRecipe()
      : FlatLoopRecipe({.walk = flatloop::Loop::Walk::Serial, .hostCycles = 3.0, .registers = 32}) {
  }
  const char *name() const override { return "unique"; }
  bool lowers(const Node *a) const override { return a && a->op() == Op::Unique; }
  kir::Kernel build(const KernelGroup &g, const std::string &n, const Knobs &k) const override {
    AICF_CHECK(g.anchor, "unique recipe needs an anchor (group ", g.id, ")");
    return Unique(g, n, k).build();
  }
};

} // namespace

const Recipe &uniqueRecipe() {
  static const UniqueRecipe recipe;
  return recipe;
}

} // namespace aicf
