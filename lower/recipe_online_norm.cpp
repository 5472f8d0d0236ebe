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
#include "lower/flat_loop.h"
#include "lower/recipe_support.h"
#include "lower/recipes.h"
#include "lower/state_algebra.h"

#include "ir/graph.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <cmath>

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

// One vector step of a host lane walk inside a loop over c: element i = i0 + v of lane v, i0 =
// c * lanes, the digits of i split per vector (flatloop::splitLaneDigits: a row read through a
// folded layout map, a layer norm over blocked channels, divides once per vector, not per lane).
std::vector<StmtP> laneSteps(int64_t lanes, const std::function<std::vector<StmtP>(E i)> &body) {
  E i = kir::var("i");
  std::vector<StmtP> inner = {kir::decl("i", DType::I64, kir::var("i0") + flatloop::lane())};
  std::vector<StmtP> b = flatloop::splitLaneDigits(body(i), lanes);
  inner.insert(inner.end(), b.begin(), b.end());
  return {kir::decl("i0", DType::I64, kir::var("c") * E(lanes)),
          recipe::vectorLoop("v", E(int64_t(0)), E(lanes), inner)};
}

// The host lane walk over a row of `len` elements, a vector of `lanes` a step, the last step
// guarded when lanes does not divide len.
std::vector<StmtP> laneWalk(int64_t len, int64_t lanes,
                            const std::function<std::vector<StmtP>(E i)> &body) {
  return {kir::forLoop("c", E(int64_t(0)), E(ceilDiv(len, lanes)), laneSteps(lanes, [&](E i) {
                         std::vector<StmtP> b = body(i);
                         if (len % lanes == 0)
                           return b;
                         return std::vector<StmtP>{kir::ifThen(i < E(len), b)};
                       }))};
}

// Host lane chains: a row of `len` (static) elements folded into `lanes` running states, one per
// vector lane (local ln_<f>[1, lanes]), lane v taking elements v, v + lanes, ...: each step updates
// every lane at once, a vector loop (the Welford division and the softmax rescaling's
// exponentials vectorise, where one chain of `threads` emulated threads ran them scalar). The
// elements past the last full vector update lanes 0.. one by one; then the algebra's merge folds
// the upper half of the lanes into the lower, log2(lanes) vector steps, and the row's state is
// left in s_<f>. `update(j, assign)` emits one element's update of the state in s_<f>.
std::vector<StmtP> laneChains(
    const StateAlgebra &alg, int64_t len, int64_t lanes, kir::Kernel &k,
    const std::function<std::vector<StmtP>(E, const std::function<StmtP(size_t, E)> &)> &update) {
  std::vector<kir::BufferP> ln;
  for (const StateField &f : alg.fields) {
    ln.push_back(std::make_shared<kir::Buffer>(
        kir::Buffer{"ln_" + f.name, f.dtype, {1, lanes}, kir::Scope::Local, kir::Role::Temp, {}}));
    k.allocs.push_back(ln.back());
  }
  E v = kir::var("v"), t = kir::var(k.threadVar);
  auto laneUpdate = [&](E j, E lane) {
    std::vector<StmtP> b;
    for (size_t i = 0; i < alg.fields.size(); ++i)
      b.push_back(kir::decl(stateVar(alg.fields[i].name), alg.fields[i].dtype,
                            kir::load(ln[i], {t, lane})));
    std::vector<StmtP> u = update(j, [&](size_t i, E val) {
      return kir::store(ln[i], {t, lane}, val);
    });
    b.insert(b.end(), u.begin(), u.end());
    return b;
  };
  std::vector<StmtP> out;
  std::vector<StmtP> init;
  for (size_t i = 0; i < alg.fields.size(); ++i)
    init.push_back(kir::store(ln[i], {t, v}, alg.fields[i].init));
  out.push_back(recipe::vectorLoop("v", E(int64_t(0)), E(lanes), init));
  int64_t full = len / lanes, tail = len % lanes;
  if (full > 0)
    out.push_back(kir::forLoop("c", E(int64_t(0)), E(full),
                               laneSteps(lanes, [&](E i) { return laneUpdate(i, v); })));
  if (tail > 0)
    out.push_back(kir::forLoop("v", E(int64_t(0)), E(tail), laneUpdate(E(full * lanes) + v, v)));
  // Merge by halves: lane v takes lane v + h, h = lanes / 2 .. 1.
  for (int64_t h = lanes / 2; h >= 1; h /= 2) {
    std::vector<StmtP> m;
    for (size_t i = 0; i < alg.fields.size(); ++i) {
      const auto &[fname, ftype] = alg.merge.fields[i];
      m.push_back(kir::decl("a_" + fname, ftype, kir::load(ln[i], {t, v})));
      m.push_back(kir::decl("b_" + fname, ftype, kir::load(ln[i], {t, v + E(h)})));
    }
    for (const auto &[nm, e] : alg.merge.lets)
      m.push_back(kir::decl(nm, e->type, e));
    for (size_t i = 0; i < alg.fields.size(); ++i)
      m.push_back(kir::store(ln[i], {t, v}, alg.merge.merged[i]));
    out.push_back(recipe::vectorLoop("v", E(int64_t(0)), E(h), m));
  }
  for (size_t i = 0; i < alg.fields.size(); ++i)
    out.push_back(kir::decl(stateVar(alg.fields[i].name), alg.fields[i].dtype,
                            kir::load(ln[i], {t, E(int64_t(0))})));
  return out;
}

// The knobs of a norm kernel: the given ones, else the defaults below.
struct NormSchedule {
  int64_t threads = 1, vec = 1, cache = 0, lanes = 0;
};
NormSchedule normSchedule(NormAlgebra algebra, const SymExpr &lenSym, int64_t len, bool innerOne,
                          const Knobs &knobs) {
  // Knobs: GPU plans spread a row over a block (vec 4: 16-byte accesses). On the host, regions
  // are loops over the threads: for Welford / sum-of-squares states, 32 "threads" of one
  // element per step give independent dependency chains (512 x 768 layer_norm: 0.48 ms against
  // 2.3 ms for one chain); the exp-bound softmax states do best as one chain, 8 per step.
  bool gpu = isGpuPlan(knobs);
  bool manyChains = !gpu && (algebra == NormAlgebra::Welford || algebra == NormAlgebra::SumSquares);
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
  // Host lane chains (knob lanes): one thread whose row is split over `lanes` running states,
  // one per vector lane, updated a vector at a time and merged by halves at the end.
  int64_t lanes = gpu || !lenSym.isConstant() ? 0 : knobs.get("lanes", 0);
  if (lanes > 1) {
    AICF_CHECK((lanes & (lanes - 1)) == 0, "online_norm: lanes = ", lanes,
               " is not a power of two");
    threads = 1;
    cache = 0;
  }
  return {threads, vec, cache, lanes};
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

  NormSchedule sch = normSchedule(alg.algebra, lenSym, len, innerOne, knobs);
  int64_t threads = sch.threads, vec = sch.vec, cache = sch.cache, lanes = sch.lanes;
  k.threads = threads;
  k.grid = {{"row", rows}};
  if (!rowsSym.isConstant())
    k.symGrid = {SymExtent{rowsSym, 1}};
  k.knobs = {{"threads", threads}, {"vec", vec}, {"cache_row", cache}};
  if (lanes > 1)
    k.knobs["lanes"] = lanes;
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
  // One update of the state held in variables s_<f>: element j read, the new fields computed
  // from the old state, then assigned by `assignField`.
  auto update = [&](E j, const std::function<StmtP(size_t, E)> &assignField) {
    std::vector<StmtP> b;
    b.push_back(kir::decl(kInputVar, DType::F32, asF32(gx.at(x, elementIndex(j)))));
    if (xs)
      b.push_back(kir::store(xs, {j}, fvar(kInputVar)));
    for (const auto &[nm, e] : alg.updateLets)
      b.push_back(kir::decl(nm, e->type, e));
    // Every new field from the old state first, then the assignments.
    for (size_t i = 0; i < alg.fields.size(); ++i)
      b.push_back(kir::decl("u_" + alg.fields[i].name, alg.fields[i].dtype, alg.update[i]));
    for (size_t i = 0; i < alg.fields.size(); ++i)
      b.push_back(assignField(i, kir::var("u_" + alg.fields[i].name, alg.fields[i].dtype)));
    return b;
  };
  if (lanes > 1) {
    std::vector<StmtP> chains = laneChains(alg, len, lanes, k, update);
    r1.insert(r1.end(), chains.begin(), chains.end());
  } else {
    for (const StateField &f : alg.fields)
      r1.push_back(kir::decl(stateVar(f.name), f.dtype, f.init));
    auto walk1 = rowWalk(lenSym, threads, vec, t, kir::Stmt::LoopKind::Unrolled, [&](E j) {
      return update(j, [&](size_t i, E u) { return kir::assign(stateVar(alg.fields[i].name), u); });
    });
    r1.insert(r1.end(), walk1.begin(), walk1.end());
  }
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
  auto finalizeElement = [&](E j) {
    std::vector<StmtP> b;
    std::vector<E> idx = elementIndex(j);
    b.push_back(kir::decl(kInputVar, DType::F32, xs ? kir::load(xs, {j}) : asF32(gx.at(x, idx))));
    std::vector<E> normIdx = unflat(normSym, j);
    for (const NormParam &p : alg.params) {
      const Value *pv = n.operand(p.operand);
      b.push_back(
          kir::decl(p.var, DType::F32,
                    asF32(gx.at(pv, broadcastIndex(symShapeOf(pv->type()), normSym, normIdx)))));
    }
    b.push_back(kir::decl("y", DType::F32, alg.finalize));
    auto stores = storeGroupOutputs(g, gx, result, fvar("y"), idx);
    b.insert(b.end(), stores.begin(), stores.end());
    return b;
  };
  std::vector<StmtP> walk2;
  if (lanes > 1 && vec == lanes)
    walk2 = laneWalk(len, lanes, finalizeElement);
  else
    walk2 = rowWalk(lenSym, threads, vec, t,
                    innerOne ? kir::Stmt::LoopKind::Vectorized : kir::Stmt::LoopKind::Serial,
                    finalizeElement);
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
            out.push_back(knobsToMap(NormKnobs{t, v, cache, std::nullopt}));
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
          out.push_back(knobsToMap(NormKnobs{t, v, int64_t(0), std::nullopt}));
    // Lane chains: one state per vector lane; the finalize walks a vector at a time, its last
    // step guarded, when rows are contiguous.
    int64_t lanes = hw.vectorLanesF32();
    if (lanes > 1)
      out.push_back(knobsToMap(NormKnobs{int64_t(1), inner == 1 ? lanes : 1, int64_t(0), lanes}));
    return out;
  }
  CostShape costShape(const KernelGroup &, const kir::Kernel &k, const Hardware &hw,
                      int64_t flops) const override {
    const NormProblem &p = problemOf<NormProblem>(k);
    bool expRescale = p.algebra == NormAlgebra::Softmax || p.algebra == NormAlgebra::LogSoftmax;
    // Without cache_row the finalize pass reads each row a second time, from a cache.
    double secondPass = knobOf(k, &NormKnobs::cacheRow) ? 0.0 : double(p.rows * p.len) * 4.0;
    bool welford = p.algebra == NormAlgebra::Welford;
    int64_t lanes = knobOf(k, &NormKnobs::lanes, 0);
    if (!hw.gpu && lanes > 1)
      return laneChainShape(p, lanes, knobOf(k, &NormKnobs::vec, 1), welford, expRescale);
    CostShape s = rowStateShape(k, hw, flops, p.len, welford, expRescale, secondPass);
    // Host: the emulated threads' states merge one after another, each merge a scalar update
    // (the softmax's two exponentials): for short rows that is most of the work (Swin's 49-wide
    // window softmax with 32 chains: 6.6 ms against 1.4 predicted without it).
    if (!hw.gpu && k.threads > 1)
      s.scalarCycles += double(k.threads) * perStepCycles(welford, expRescale);
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

private:
  // Host cycles of one update or merge step, a vector of lanes or one scalar alike (a vector
  // exponential is a short polynomial): Welford's divide, the softmax's two exponentials.
  static double perStepCycles(bool welford, bool expRescale) {
    return expRescale ? 40.0 : welford ? 12.0 : 4.0;
  }
  // Lane chains per row: the full vectors' updates, the tail's scalar updates, log2(lanes)
  // merges and the finalize's steps (vec at a time), each ~perStepCycles; the updates and
  // merges are also a dependent chain. Fitted on Swin-T's 49-wide softmax (~560 cycles a row)
  // and tf_style_classifier's 64-channel layer norms.
  static CostShape laneChainShape(const NormProblem &p, int64_t lanes, int64_t vec, bool welford,
                                  bool expRescale) {
    CostShape s;
    double chain = double(p.len / lanes + p.len % lanes) + std::log2(double(lanes));
    double finalize = double(ceilDiv(p.len, std::max<int64_t>(vec, 1)));
    s.flops = 0;
    s.scalarCycles = perStepCycles(welford, expRescale) * (chain + finalize);
    s.chainSteps = chain;
    s.chainCycles = expRescale ? 20 : welford ? 13 : 4;
    s.rereadBytes = double(p.rows * p.len) * 4.0;
    s.rereadSet = p.len * 4;
    return s;
  }
};

} // namespace

const Recipe &onlineNormRecipe() {
  static const OnlineNormRecipe recipe;
  return recipe;
}

} // namespace aicf
