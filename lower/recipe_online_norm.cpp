// The online_norm recipe (online_reducible_norm, docs/algorithms.md): one kernel for every norm,
// generated from its state algebra (state_algebra.h) rather than written per norm.
//
//   grid (row: rows)  block (t: threads)
//   region t { state = init; for the thread's elements x of the row (vec at a time):
//              state = update(state, x) }; st[t] = state            -- local, per thread
//   block_reduce(algebra.merge, st -> red)                             -- hierarchical merge
//   region t { s = red; per-row finalize lets; for the thread's elements:
//              y = finalize(s, x, params); store the group's outputs (fused epilogue) }
//
// One pass over the input for the statistics and one for the output: 2 reads + 1 write per
// element, or 1 read + 1 write when the row is cached on chip (knob cache_row: the first region
// keeps each x, including any fused prologue, in shared memory for the second).
//
// A row is every element the state summarises: layer_norm / rms_norm normalise the axes
// [axis, rank), softmax / log_softmax the single axis `axis`. Rows are the product of the
// other dims. When softmax's axis is not the last one, a row is strided in memory; the same
// kernel handles it with strided addressing (correct, uncoalesced) and vec = 1 — the plain
// fallback lowering the design asks for.
//
// Knobs: threads (per row), vec (consecutive elements per thread step), cache_row (0/1).
#include "lower/recipe_support.h"
#include "lower/recipes.h"
#include "lower/state_algebra.h"

#include "ir/graph.h"
#include "support/diagnostics.h"

#include <algorithm>

namespace aicf {

using kir::E;
using kir::StmtP;
using namespace recipe;

namespace {

E fvar(const std::string &name) {
  return kir::var(name, DType::F32);
}

// The per-thread walk over a row of `len` elements: thread t takes `vec` consecutive elements
// at a time, the block covers threads * vec per step. `body(j)` is emitted once per element
// (j: the element's position in the row), guarded when the row does not fill the last step.
// A symbolic length (issue 21) reads the steps and the guard's bound from the dims, and keeps
// the guard unless the chunk divides the length for every value of the dims.
std::vector<StmtP> rowWalk(const SymExpr &len, int64_t threads, int64_t vec, const std::string &t,
                           kir::Stmt::LoopKind innerKind,
                           const std::function<std::vector<StmtP>(E j)> &body) {
  int64_t chunk = threads * vec;
  E steps = len.isConstant() ? E(ceilDiv(len.constant(), chunk)) : kir::symE(SymExtent{len, chunk});
  E j = kir::var("j");
  std::vector<StmtP> inner = {
      kir::decl("j", DType::I64, kir::var("c") * E(chunk) + kir::var(t) * E(vec) + kir::var("v"))};
  std::vector<StmtP> b = body(j);
  if (!len.divisibleBy(chunk))
    inner.push_back(kir::ifThen(j < kir::symE(len), b));
  else
    inner.insert(inner.end(), b.begin(), b.end());
  StmtP vloop = kir::forLoop("v", E(int64_t(0)), E(vec), inner, 1, innerKind);
  return {kir::forLoop("c", E(int64_t(0)), steps, {vloop})};
}

} // namespace

kir::Kernel recipeOnlineNorm(const KernelGroup &g, const std::string &name, const Knobs &knobs) {
  AICF_CHECK(g.anchor != nullptr, "online_norm needs an anchor (group ", g.id, ")");
  const Node &n = *g.anchor;
  std::map<const Value *, kir::BufferP> byValue;
  kir::Kernel k = startKernel(g, name, "online_norm", byValue);
  GroupExpr gx(g, byValue);

  const Value *x = n.operand(0);
  const Value *result = n.result();
  requireShapePreservingEpilogue(g, result);
  const std::vector<int64_t> &shape = x->type().shape;
  int64_t rank = static_cast<int64_t>(shape.size());
  // The reduced axes and the algebra come from the certificate's NormSpec, not from the op.
  std::optional<NormSpec> spec = normSpecFor(n);
  AICF_CHECK(spec.has_value(), "online_norm: ", n.name(), " at ", n.where(), " has no NormSpec");
  AICF_CHECK(spec->firstAxis >= 0 && spec->firstAxis <= std::max<int64_t>(rank - 1, 0) &&
                 spec->lastAxis >= spec->firstAxis &&
                 spec->lastAxis <= std::max<int64_t>(rank - 1, 0),
             "norm axes [", spec->firstAxis, ", ", spec->lastAxis, "] out of range at ", n.where());
  size_t a = static_cast<size_t>(spec->firstAxis);
  size_t normEnd = rank == 0 ? 0 : static_cast<size_t>(spec->lastAxis) + 1;
  std::vector<int64_t> outerDims(shape.begin(), shape.begin() + a);
  std::vector<int64_t> normDims(shape.begin() + a, shape.begin() + normEnd);
  std::vector<int64_t> innerDims(shape.begin() + normEnd, shape.end());
  int64_t len = product(normDims), inner = product(innerDims);
  int64_t rows = product(outerDims) * inner;
  // Symbolic dims (issue 21): the same split as expressions. Rows, the row length and the
  // inner stride are read from the dims wherever they depend on them.
  SymShape xsym = symShapeOf(x->type());
  SymShape outerSym(xsym.begin(), xsym.begin() + static_cast<std::ptrdiff_t>(a));
  SymShape normSym(xsym.begin() + static_cast<std::ptrdiff_t>(a),
                   xsym.begin() + static_cast<std::ptrdiff_t>(normEnd));
  SymShape innerSym(xsym.begin() + static_cast<std::ptrdiff_t>(normEnd), xsym.end());
  SymExpr lenSym = symNumel(normSym), innerN = symNumel(innerSym);
  SymExpr rowsSym = symNumel({symNumel(outerSym), innerN});
  bool innerOne = isUnitDim(innerN);
  StateAlgebra alg = algebraFor(*spec, lenSym);

  // Knobs: GPU plans spread a row over a block (vec 4: 16-byte accesses). On the host, regions
  // are loops over the threads: for Welford / sum-of-squares states, 32 "threads" of one
  // element per step give independent dependency chains (512 x 768 layer_norm: 0.48 ms against
  // 2.3 ms for one chain); the exp-bound softmax states do best as one chain, 8 per step.
  bool gpu = isGpuPlan(knobs);
  bool manyChains =
      !gpu && (alg.algebra == NormAlgebra::Welford || alg.algebra == NormAlgebra::SumSquares);
  int64_t vecDefault = innerOne && !manyChains ? (gpu ? 4 : 8) : 1;
  while (vecDefault > 1 && !lenSym.divisibleBy(vecDefault))
    vecDefault /= 2;
  int64_t vec = std::max<int64_t>(1, knobs.get("vec", vecDefault));
  int64_t threadsDefault =
      gpu ? std::clamp<int64_t>(nextPow2(ceilDiv(std::max<int64_t>(len, 1), vec)), 32, 512)
          : (manyChains ? std::clamp<int64_t>(len / 16, 1, 32) : 1);
  int64_t threads = std::max<int64_t>(1, knobs.get("threads", threadsDefault));
  int64_t cache = knobs.get("cache_row", gpu && len * 4 <= 16384 ? 1 : 0) != 0 ? 1 : 0;
  if (!lenSym.isConstant()) // the on-chip row is sized at compile time
    cache = 0;
  k.threads = threads;
  k.grid = {{"row", rows}};
  if (!rowsSym.isConstant())
    k.symGrid = {SymExtent{rowsSym, 1}};
  k.knobs = {{"threads", threads}, {"vec", vec}, {"cache_row", cache}};
  auto problem = std::make_shared<NormProblem>();
  problem->rows = rows;
  problem->len = len;
  problem->inner = inner;
  problem->algebra = alg.algebra;
  k.problem = problem;
  const std::string &t = k.threadVar;

  // Element (row, j) as a multi-index of the input / result shape.
  E row = kir::var("row");
  E outerIdx = innerOne ? row : row / kir::symE(innerN);
  E innerIdx = innerOne ? E(int64_t(0)) : row % kir::symE(innerN);
  auto elementIndex = [&](E j) {
    return concat(concat(unflat(outerSym, outerIdx), unflat(normSym, j)),
                  unflat(innerSym, innerIdx));
  };

  // Per-thread state (local, lives across regions) and the merged row state (shared).
  std::vector<kir::BufferP> st, red;
  for (const StateField &f : alg.fields) {
    st.push_back(std::make_shared<kir::Buffer>(
        kir::Buffer{"st_" + f.name, f.dtype, {threads}, kir::Scope::Local, kir::Role::Temp, {}}));
    red.push_back(std::make_shared<kir::Buffer>(
        kir::Buffer{"row_" + f.name, f.dtype, {1}, kir::Scope::Shared, kir::Role::Temp, {}}));
  }
  kir::BufferP xs;
  if (cache)
    xs = std::make_shared<kir::Buffer>(
        kir::Buffer{"xs", DType::F32, {len}, kir::Scope::Shared, kir::Role::Temp, {}});
  k.allocs = st;
  k.allocs.insert(k.allocs.end(), red.begin(), red.end());
  if (xs)
    k.allocs.push_back(xs);

  k.body.push_back(kir::comment(cat(n.name(), " over rows of ", lenSym.str(),
                                    " elements: state algebra '", enumName(alg.algebra), "' (",
                                    alg.fields.size(), " fields), one pass for the statistics")));

  // Region 1: stream the row into the thread's state.
  std::vector<StmtP> r1;
  for (const StateField &f : alg.fields)
    r1.push_back(kir::decl(stateVar(f.name), f.dtype, f.init));
  auto walk1 = rowWalk(lenSym, threads, vec, t, kir::Stmt::LoopKind::Unrolled, [&](E j) {
    std::vector<StmtP> b;
    b.push_back(kir::decl(kInputVar, DType::F32, asF32(gx.at(x, elementIndex(j)))));
    if (xs)
      b.push_back(kir::store(xs, {j}, fvar(kInputVar)));
    for (const auto &[nm, e] : alg.updateLets)
      b.push_back(kir::decl(nm, e->type, e));
    // Every new field from the old state first, then the assignments.
    for (size_t i = 0; i < alg.fields.size(); ++i)
      b.push_back(kir::decl("u_" + alg.fields[i].name, alg.fields[i].dtype, alg.update[i]));
    for (const StateField &f : alg.fields)
      b.push_back(kir::assign(stateVar(f.name), kir::var("u_" + f.name, f.dtype)));
    return b;
  });
  r1.insert(r1.end(), walk1.begin(), walk1.end());
  for (size_t i = 0; i < alg.fields.size(); ++i)
    r1.push_back(kir::store(st[i], {kir::var(t)},
                            kir::var(stateVar(alg.fields[i].name), alg.fields[i].dtype)));
  k.body.push_back(kir::region(t, r1));

  // The block-level merge.
  k.body.push_back(kir::blockReduce(alg.merge, st, red));

  // Region 2: finalize every element and store the group's outputs.
  std::vector<StmtP> r2;
  for (size_t i = 0; i < alg.fields.size(); ++i)
    r2.push_back(kir::decl(stateVar(alg.fields[i].name), alg.fields[i].dtype,
                           kir::load(red[i], {E(int64_t(0))})));
  for (const auto &[nm, e] : alg.finalizeLets)
    r2.push_back(kir::decl(nm, e->type, e));
  auto walk2 =
      rowWalk(lenSym, threads, vec, t,
              innerOne ? kir::Stmt::LoopKind::Vectorized : kir::Stmt::LoopKind::Serial, [&](E j) {
                std::vector<StmtP> b;
                std::vector<E> idx = elementIndex(j);
                b.push_back(kir::decl(kInputVar, DType::F32,
                                      xs ? kir::load(xs, {j}) : asF32(gx.at(x, idx))));
                std::vector<E> normIdx = unflat(normSym, j);
                for (const NormParam &p : alg.params) {
                  const Value *pv = n.operand(p.operand);
                  b.push_back(kir::decl(
                      p.var, DType::F32,
                      asF32(gx.at(pv, broadcastIndex(symShapeOf(pv->type()), normSym, normIdx)))));
                }
                b.push_back(kir::decl("y", DType::F32, alg.finalize));
                auto stores = storeGroupOutputs(g, gx, result, fvar("y"), idx);
                b.insert(b.end(), stores.begin(), stores.end());
                return b;
              });
  r2.insert(r2.end(), walk2.begin(), walk2.end());
  k.body.push_back(kir::region(t, r2));
  return k;
}

} // namespace aicf

namespace aicf {

namespace {

// Requires: an anchor with a NormSpec (its online_reducible_norm certificate's state algebra)
// and the certificate holding. It is also the norm family's generic lowering: a norm whose
// certificate fails (a softmax over a non-innermost axis, computed parameters, an epsilon out
// of range) gets the same state-algebra kernel in its plain form (strided rows take vec 1).
// Knobs: NormKnobs.
class OnlineNormRecipe final : public Recipe {
public:
  const char *name() const override { return "online_norm"; }
  bool lowers(const Node *a) const override { return a && normSpecFor(*a).has_value(); }
  std::optional<MemProperty> requiredProperty() const override {
    return MemProperty::OnlineReducibleNorm;
  }
  bool genericFallback() const override { return true; }
  // Symbolic dims: rows (the grid), the row length (the walk's steps and guard, rms_norm's
  // divisor) and the strides between them are read from the dims; a symbolic row is not cached
  // on chip (cache_row 0: the cache is sized at compile time).
  bool symbolicDims(const KernelGroup &) const override { return true; }
  kir::Kernel build(const KernelGroup &g, const std::string &n, const Knobs &k) const override {
    return labelled(recipeOnlineNorm(g, n, k), name());
  }
  KnobSet canonicalKnobs(const KnobSet &k) const override {
    return knobsToMap(knobsFromMap<NormKnobs>(k));
  }
  std::vector<KnobSet> candidates(const kir::Kernel &d, const Hardware &hw) const override {
    const NormProblem &p = problemOf<NormProblem>(d);
    int64_t len = p.len, inner = p.inner;
    std::vector<KnobSet> out;
    std::vector<int64_t> vecs;
    for (int64_t v : {1, 2, 4, 8, 16})
      if ((v == 1 || (inner == 1 && len % v == 0)) && v <= (hw.gpu ? 4 : hw.vectorLanesF32()))
        vecs.push_back(v);
    if (hw.gpu) {
      for (int64_t t : {32, 64, 128, 256, 512})
        for (int64_t v : vecs) {
          if (t > 32 && t * v / 2 >= len)
            continue; // half the threads would idle
          for (int64_t cache : {0, 1})
            out.push_back(knobsToMap(NormKnobs{t, v, cache}));
        }
      return out;
    }
    // Host: the vector width does not split a Welford chain (measured slower at few threads),
    // so layer norms vary only the number of chains.
    if (p.algebra == NormAlgebra::Welford)
      vecs = {1};
    for (int64_t t : {1, 4, 8, 16, 32})
      for (int64_t v : vecs)
        if (t == 1 || t * v <= len)
          out.push_back(knobsToMap(NormKnobs{t, v, int64_t(0)}));
    return out;
  }
  CostShape costShape(const KernelGroup &, const kir::Kernel &k, const Hardware &hw,
                      int64_t flops) const override {
    const NormProblem &p = problemOf<NormProblem>(k);
    bool expRescale = p.algebra == NormAlgebra::Softmax || p.algebra == NormAlgebra::LogSoftmax;
    // Without cache_row the finalize pass reads each row a second time, from a cache.
    double secondPass = knobOf(k, &NormKnobs::cacheRow) ? 0.0 : double(p.rows * p.len) * 4.0;
    CostShape s = rowStateShape(k, hw, flops, p.len, p.algebra == NormAlgebra::Welford, expRescale,
                                secondPass);
    // Host sum of squares (rms_norm): ~1 cycle per element beyond the vector model, its two
    // passes included (LLaMA's 128 x 256 RMSNorm: 15.5 us on one AMD EPYC core against 7.5
    // predicted without it).
    if (!hw.gpu && p.algebra == NormAlgebra::SumSquares)
      s.scalarCycles += 1.0 * double(p.len);
    return s;
  }
  int64_t registers(const kir::Kernel &k) const override {
    return 18 + 2 * knobOf(k, &NormKnobs::vec, 1) + 4 * knobOf(k, &NormKnobs::cacheRow);
  }
};

} // namespace

const Recipe &onlineNormRecipe() {
  static const OnlineNormRecipe recipe;
  return recipe;
}

} // namespace aicf
