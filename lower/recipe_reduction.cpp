// The reduction recipe: reduce_* (sum, mean, max, min, prod, l1, l2, sum_square,
// log_sum_exp), arg_max / arg_min (select_last_index), the global pools, and instance_norm
// (whose per-(n, c) statistics are two such reductions).
//
// One block per output element ("row"): each thread folds a strided slice of the reduced
// elements (j = t, t + threads, ...) into a per-thread state kept in a `local` buffer, a
// block_reduce merges the states with the reduction's Combiner, and a final region finalises
// the state and writes the group's outputs through the fused epilogue. A prologue fused into
// the group (elementwise producers of the reduced operand) is inlined where elements are read.
// The states are the interpreter's (interp/kernels_reduce.cpp) in f32 (i64 for integers):
// max/min propagate NaN, log_sum_exp keeps a running (max, scaled sum) pair, arg_max/arg_min a
// (value, index) pair ordered so that merging in any order picks the interpreter's index
// (NaN wins, ties go to the first index, or the last with select_last_index).
#include "lower/flat_loop.h"
#include "lower/recipe_support.h"
#include "lower/recipes.h"

#include "support/diagnostics.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

namespace aicf {

namespace {

using flatloop::isNaN;
using flatloop::ne;
using flatloop::orE;
using kir::E;

E f32(double v) {
  return kir::fconst(v, DType::F32);
}
E i64(int64_t v) {
  return E(v);
}
// The float type a reduction of `t` accumulates in: f64 for f64, else f32.
DType floatCompute(DType t) {
  return t == DType::F64 ? DType::F64 : DType::F32;
}

int64_t prod(const std::vector<int64_t> &v) {
  int64_t n = 1;
  for (int64_t d : v)
    n *= d;
  return n;
}

// A reduction as a state algebra over scalar fields: init, update with an element (its value x
// and its position j along the reduced elements), merge of two states, finalize.
struct Algebra {
  std::string name;
  std::vector<std::pair<std::string, DType>> fields;
  std::vector<E> init;
  // update(state vars, x, j) -> new field values
  std::function<std::vector<E>(const std::vector<E> &, E, E)> update;
  // merge(a fields, b fields) -> merged fields
  std::function<std::vector<E>(const std::vector<E> &, const std::vector<E> &)> merge;
  // finalize(state) -> the reduction's value (in the output's compute type)
  std::function<E(const std::vector<E> &)> finalize;
};

Algebra sumLike(const std::string &name, DType acc, std::function<E(E)> term,
                std::function<E(E)> fin) {
  Algebra a;
  a.name = name;
  a.fields = {{"s", acc}};
  a.init = {isFloat(acc) ? kir::fconst(0.0, acc) : i64(0)};
  a.update = [term](const std::vector<E> &s, E x, E) { return std::vector<E>{s[0] + term(x)}; };
  a.merge = [](const std::vector<E> &p, const std::vector<E> &q) {
    return std::vector<E>{p[0] + q[0]};
  };
  a.finalize = [fin](const std::vector<E> &s) { return fin(s[0]); };
  return a;
}

// NaN-aware "b beats a" for arg_max / arg_min, with empty states (index -1) losing.
E argBetter(E va, E ia, E vb, E ib, bool isMax, bool last, bool fl) {
  E tie = last ? ib > ia : ib < ia;
  E cmp = isMax ? vb > va : vb < va;
  E better = orE(cmp, (va == vb) && tie);
  if (fl) {
    E an = isNaN(va), bn = isNaN(vb);
    // b NaN beats a non-NaN; two NaNs compare by index; otherwise by value.
    better = kir::select(bn, orE(kir::unary(kir::UnOp::Not, an), tie),
                         kir::unary(kir::UnOp::Not, an) && better);
  }
  return (ib >= i64(0)) && orE(ia < i64(0), better);
}

Algebra argAlgebra(bool isMax, bool last, DType vt) {
  bool fl = isFloat(vt);
  DType ct = fl ? floatCompute(vt) : DType::I64;
  Algebra a;
  a.name = isMax ? "arg_max" : "arg_min";
  a.fields = {{"v", ct}, {"i", DType::I64}};
  a.init = {fl ? kir::fconst(0.0, ct) : i64(0), i64(-1)};
  auto pick = [=](const std::vector<E> &p, E vb, E ib) {
    E take = argBetter(p[0], p[1], vb, ib, isMax, last, fl);
    return std::vector<E>{kir::select(take, vb, p[0]), kir::select(take, ib, p[1])};
  };
  a.update = [pick](const std::vector<E> &s, E x, E j) { return pick(s, x, j); };
  a.merge = [pick](const std::vector<E> &p, const std::vector<E> &q) {
    return pick(p, q[0], q[1]);
  };
  a.finalize = [](const std::vector<E> &s) { return s[1]; };
  return a;
}

// Float -> i64 as the interpreter truncates (NaN -> 0, saturating).
E floatToInt(E x) {
  const double lim = 9.2233714e18;
  E c = kir::select(x > f32(lim), f32(lim), kir::select(x < f32(-lim), f32(-lim), x));
  return kir::select(isNaN(x), i64(0), kir::cast(c, DType::I64));
}

Algebra reduceAlgebra(Op op, DType inT, const SymExpr &count) {
  bool fl = isFloat(inT);
  DType ct = fl ? floatCompute(inT) : DType::I64;
  DType ft = floatCompute(inT); // log_sum_exp's state
  auto fc = [ct](double v) { return kir::fconst(v, ct); };
  auto ff = [ft](double v) { return kir::fconst(v, ft); };
  auto toCt = [fl](E x) { return fl ? x : (x->type == DType::I64 ? x : kir::cast(x, DType::I64)); };
  auto id = [](E s) { return s; };
  switch (op) {
  case Op::ReduceSum: return sumLike("sum", ct, toCt, id);
  case Op::ReduceMean:
  case Op::GlobalAvgPool:
    return sumLike("sum", ct, toCt, [fl, count, fc, ct](E s) {
      if (count.isConstant()) {
        int64_t c = count.constant();
        if (c == 0)
          return fl ? fc(NAN) : i64(0);
        return fl ? s / fc(double(c)) : s / i64(c);
      }
      // A symbolic count (issue 21), read from the dims: 0 / 0 is the NaN of an empty mean;
      // an integer mean of nothing is 0 (the sum), never a division by zero.
      E c = kir::symE(count);
      return fl ? s / kir::cast(c, ct) : s / kir::max(c, i64(1));
    });
  case Op::ReduceL1:
    return sumLike(
        "sum_abs", ct,
        [=](E x) {
          E v = toCt(x);
          return fl ? kir::unary(kir::UnOp::Abs, v) : kir::select(v < i64(0), i64(0) - v, v);
        },
        id);
  case Op::ReduceSumSquare:
    return sumLike(
        "sum_square", ct, [=](E x) { return toCt(x) * toCt(x); }, id);
  case Op::ReduceL2:
    return sumLike(
        "sum_square", ct, [=](E x) { return toCt(x) * toCt(x); },
        [fl](E s) {
          if (fl)
            return kir::unary(kir::UnOp::Sqrt, s);
          return floatToInt(kir::unary(kir::UnOp::Sqrt, kir::cast(s, DType::F32)));
        });
  case Op::ReduceProd: {
    Algebra a = sumLike("prod", ct, toCt, id);
    a.init = {fl ? fc(1.0) : i64(1)};
    a.update = [toCt](const std::vector<E> &s, E x, E) { return std::vector<E>{s[0] * toCt(x)}; };
    a.merge = [](const std::vector<E> &p, const std::vector<E> &q) {
      return std::vector<E>{p[0] * q[0]};
    };
    return a;
  }
  case Op::ReduceMax:
  case Op::ReduceMin:
  case Op::GlobalMaxPool: {
    bool isMax = op != Op::ReduceMin;
    Algebra a;
    a.name = isMax ? "max" : "min";
    a.fields = {{"m", ct}};
    if (fl)
      a.init = {fc(isMax ? -INFINITY : INFINITY)};
    else
      a.init = {
          i64(isMax ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max())};
    auto upd = [fl, isMax](E acc, E x) {
      if (fl)
        return isMax ? flatloop::nanMaxUpdate(acc, x) : flatloop::nanMinUpdate(acc, x);
      return isMax ? kir::max(acc, x) : kir::min(acc, x);
    };
    a.update = [upd, toCt](const std::vector<E> &s, E x, E) {
      return std::vector<E>{upd(s[0], toCt(x))};
    };
    a.merge = [upd](const std::vector<E> &p, const std::vector<E> &q) {
      return std::vector<E>{upd(p[0], q[0])};
    };
    a.finalize = [](const std::vector<E> &s) { return s[0]; };
    return a;
  }
  case Op::ReduceLogSumExp: {
    // Running (m, s): s = sum of e^(x - m). Equal maxima scale by 1, so -inf / +inf states
    // never produce NaN; a non-finite maximum is the result itself, as in the interpreter.
    Algebra a;
    a.name = "log_sum_exp";
    a.fields = {{"m", ft}, {"s", ft}};
    a.init = {ff(-INFINITY), ff(0.0)};
    auto scale = [ff](E from, E to) {
      return kir::select(from == to, ff(1.0), kir::unary(kir::UnOp::Exp, from - to));
    };
    auto toF = [ft](E x) { return isFloat(x->type) ? x : kir::cast(x, ft); };
    a.update = [=](const std::vector<E> &s, E x, E) {
      E v = toF(x);
      E m = flatloop::nanMaxUpdate(s[0], v);
      return std::vector<E>{m, s[1] * scale(s[0], m) + scale(v, m)};
    };
    a.merge = [=](const std::vector<E> &p, const std::vector<E> &q) {
      E m = flatloop::nanMaxUpdate(p[0], q[0]);
      return std::vector<E>{m, p[1] * scale(p[0], m) + q[1] * scale(q[0], m)};
    };
    a.finalize = [fl, ff](const std::vector<E> &s) {
      E finite = (s[0] - s[0]) == ff(0.0);
      E r = kir::select(finite, s[0] + kir::unary(kir::UnOp::Log, s[1]), s[0]);
      return fl ? r : floatToInt(r);
    };
    return a;
  }
  default: break;
  }
  throw InternalError(cat("reduction recipe: no algebra for ", opName(op)));
}

// Interleaves kept and reduced coordinates into an index of the reduced operand.
std::vector<E> operandIndex(size_t rank, const std::vector<int> &reduced,
                            const std::vector<E> &keptIdx, const std::vector<E> &redIdx) {
  std::vector<E> idx(rank);
  size_t kk = 0, rr = 0;
  for (size_t d = 0; d < rank; ++d) {
    bool isRed = std::find(reduced.begin(), reduced.end(), static_cast<int>(d)) != reduced.end();
    idx[d] = isRed ? redIdx[rr++] : keptIdx[kk++];
  }
  return idx;
}

int64_t reductionThreads(const Knobs &k, int64_t count) {
  if (!isGpuPlan(k))
    return 1; // host: one thread per row, its state split across vector lanes (reductionLanes)
  return k.get("threads", count >= 2048 ? 256 : 128);
}

// Host plans: the row's elements are folded into `vec` lane states, lane l taking elements
// j = l, l + vec, ... (the order GPU threads take them), by a loop over vec-wide chunks whose
// inner loop over the lanes vectorises; the lanes then merge in order.
// A symbolic count (issue 21) does not bound the lanes: lanes past the count keep their initial
// state, which every merge leaves as it is.
int64_t reductionLanes(const Knobs &k, const SymExpr &count) {
  if (isGpuPlan(k))
    return 1;
  if (!count.isConstant())
    return std::max<int64_t>(k.get("vec", 16), 1);
  return std::clamp<int64_t>(k.get("vec", 16), 1, std::max<int64_t>(count.constant(), 1));
}

// Local per-thread state buffers and their shared block_reduce results, one per field.
struct StateBufs {
  std::vector<kir::BufferP> local, shared;
};

StateBufs stateBuffers(kir::Kernel &k, const Algebra &a, const std::string &prefix) {
  StateBufs sb;
  for (const auto &[field, dt] : a.fields) {
    auto l = std::make_shared<kir::Buffer>();
    l->name = prefix + "_" + field + "_t"; // per thread
    l->dtype = dt;
    l->shape = {k.threads};
    l->scope = kir::Scope::Local;
    auto s = std::make_shared<kir::Buffer>();
    s->name = prefix + "_" + field + "_all";
    s->dtype = dt;
    s->shape = {1};
    s->scope = kir::Scope::Shared;
    k.allocs.push_back(l);
    k.allocs.push_back(s);
    sb.local.push_back(l);
    sb.shared.push_back(s);
  }
  return sb;
}

kir::Combiner combinerOf(const Algebra &a) {
  kir::Combiner c;
  c.name = a.name;
  c.fields = a.fields;
  std::vector<E> pa, pb;
  for (const auto &[field, dt] : a.fields) {
    pa.push_back(kir::var("a_" + field, dt));
    pb.push_back(kir::var("b_" + field, dt));
  }
  c.merged = a.merge(pa, pb);
  return c;
}

// The host form of region 1 + block_reduce (reductionLanes): lane states in [lanes] tiles,
// updated a chunk of lanes at a time (the inner loop vectorises), the partial last chunk after,
// then merged in lane order into sb.shared, exactly the GPU threads' per-thread sequences and
// block_reduce's merge order.
void foldLanes(kir::Kernel &k, const Algebra &a, const StateBufs &sb, const SymExpr &count,
               const std::string &prefix, const std::function<E(E j)> &element,
               std::vector<kir::StmtP> preamble, int64_t lanes) {
  // The per-thread state buffers block_reduce would merge are not used here.
  std::erase_if(k.allocs, [&](const kir::BufferP &b) {
    return std::find(sb.local.begin(), sb.local.end(), b) != sb.local.end();
  });
  std::vector<kir::BufferP> lane;
  for (const auto &[field, dt] : a.fields) {
    auto b = std::make_shared<kir::Buffer>(kir::Buffer{
        prefix + "_" + field + "_l", dt, {lanes}, kir::Scope::Shared, kir::Role::Temp, {}});
    k.allocs.push_back(b);
    lane.push_back(b);
  }
  E l = kir::var(prefix + "_l"), zero(int64_t(0));
  auto laneLoop = [&](int64_t n, std::vector<kir::StmtP> body) {
    return kir::forLoop(prefix + "_l", zero, E(n), std::move(body), 1,
                        kir::Stmt::LoopKind::Vectorized);
  };
  std::vector<kir::StmtP> body = std::move(preamble);
  std::vector<kir::StmtP> init;
  for (size_t f = 0; f < a.fields.size(); ++f)
    init.push_back(kir::store(lane[f], {l}, a.init[f]));
  body.push_back(laneLoop(lanes, init));
  auto updateAt = [&](E chunk) {
    E j = chunk * E(lanes) + l;
    std::vector<E> state;
    for (size_t f = 0; f < a.fields.size(); ++f)
      state.push_back(kir::load(lane[f], {l}));
    E x = element(j);
    if (x->type == DType::F16 || x->type == DType::BF16)
      x = kir::cast(x, DType::F32);
    else if (!isFloat(x->type) && x->type != DType::I64)
      x = kir::cast(x, DType::I64);
    std::vector<E> next = a.update(state, x, j);
    std::vector<kir::StmtP> out;
    for (size_t f = 0; f < next.size(); ++f)
      out.push_back(kir::decl(cat(prefix, "_n", f), a.fields[f].second, next[f]));
    for (size_t f = 0; f < next.size(); ++f)
      out.push_back(kir::store(lane[f], {l}, kir::var(cat(prefix, "_n", f), a.fields[f].second)));
    return out;
  };
  std::string c = prefix + "_c";
  if (count.isConstant()) {
    int64_t chunks = count.constant() / lanes, rest = count.constant() % lanes;
    if (chunks > 0)
      body.push_back(kir::forLoop(c, zero, E(chunks), {laneLoop(lanes, updateAt(kir::var(c)))}));
    if (rest > 0)
      body.push_back(laneLoop(rest, updateAt(E(chunks))));
  } else {
    // A symbolic count (issue 21): the full chunks and the rest's lanes from the dims.
    E n = kir::symE(count), chunks = n / E(lanes);
    body.push_back(kir::forLoop(c, zero, chunks, {laneLoop(lanes, updateAt(kir::var(c)))}));
    if (!count.divisibleBy(lanes))
      body.push_back(kir::forLoop(prefix + "_l", zero, n % E(lanes), updateAt(chunks), 1,
                                  kir::Stmt::LoopKind::Vectorized));
  }
  // Merge the lanes in order: m = lane[0], then m = merge(m, lane[i]).
  std::vector<E> m, b;
  for (size_t f = 0; f < a.fields.size(); ++f) {
    std::string mn = cat(prefix, "_m", f);
    body.push_back(kir::decl(mn, a.fields[f].second, kir::load(lane[f], {zero})));
    m.push_back(kir::var(mn, a.fields[f].second));
    b.push_back(kir::load(lane[f], {kir::var(prefix + "_i")}));
  }
  std::vector<E> merged = a.merge(m, b);
  std::vector<kir::StmtP> step;
  for (size_t f = 0; f < merged.size(); ++f)
    step.push_back(kir::decl(cat(prefix, "_k", f), a.fields[f].second, merged[f]));
  for (size_t f = 0; f < merged.size(); ++f)
    step.push_back(
        kir::assign(cat(prefix, "_m", f), kir::var(cat(prefix, "_k", f), a.fields[f].second)));
  body.push_back(kir::forLoop(prefix + "_i", E(int64_t(1)), E(lanes - 1), step));
  for (size_t f = 0; f < a.fields.size(); ++f)
    body.push_back(kir::store(sb.shared[f], {zero}, m[f]));
  k.body.push_back(kir::region(k.threadVar, body));
}

// Region 1 + block_reduce: thread t folds elements j = t, t + T, ... < count, read by
// `element(j)`; the merged state lands in sb.shared.
void foldAndMerge(kir::Kernel &k, const Algebra &a, const StateBufs &sb, const SymExpr &count,
                  const std::string &prefix, const std::function<E(E j)> &element,
                  std::vector<kir::StmtP> preamble = {}) {
  std::string j = prefix + "_j";
  std::vector<kir::StmtP> init, update;
  std::vector<E> state;
  for (size_t f = 0; f < a.fields.size(); ++f) {
    std::string name = cat(prefix, "_", a.fields[f].first);
    DType dt = a.fields[f].second;
    init.push_back(kir::decl(name, dt, a.init[f]));
    state.push_back(kir::var(name, dt));
  }
  // Elements enter the state in its compute type: f32 for floats (f16 values that a fused
  // prologue rounded are typed f16), i64 for integers.
  E x = element(kir::var(j));
  if (x->type == DType::F16 || x->type == DType::BF16)
    x = kir::cast(x, DType::F32);
  else if (!isFloat(x->type) && x->type != DType::I64)
    x = kir::cast(x, DType::I64);
  std::vector<E> next = a.update(state, x, kir::var(j));
  if (next.size() == 1) {
    update.push_back(kir::assign(cat(prefix, "_", a.fields[0].first), next[0]));
  } else { // compute every new field from the old state before assigning any
    for (size_t f = 0; f < next.size(); ++f)
      update.push_back(kir::decl(cat(prefix, "_n", f), a.fields[f].second, next[f]));
    for (size_t f = 0; f < next.size(); ++f)
      update.push_back(kir::assign(cat(prefix, "_", a.fields[f].first),
                                   kir::var(cat(prefix, "_n", f), a.fields[f].second)));
  }
  int64_t lanes = knobOf(k, "vec", 1);
  if (lanes > 1) {
    foldLanes(k, a, sb, count, prefix, element, std::move(preamble), lanes);
    return;
  }
  E t = kir::var(k.threadVar);
  std::vector<kir::StmtP> body = std::move(preamble);
  body.push_back(kir::reduce(j, t, kir::symE(count) - t, init, update, k.threads));
  for (size_t f = 0; f < a.fields.size(); ++f)
    body.push_back(kir::store(sb.local[f], {t}, state[f]));
  k.body.push_back(kir::region(k.threadVar, body));
  k.body.push_back(kir::blockReduce(combinerOf(a), sb.local, sb.shared));
}

std::vector<E> mergedState(const Algebra &a, const StateBufs &sb) {
  std::vector<E> s;
  for (size_t f = 0; f < a.fields.size(); ++f)
    s.push_back(kir::load(sb.shared[f], {E(int64_t(0))}));
  return s;
}

kir::Kernel instanceNorm(const KernelGroup &g, const Knobs &knobs, kir::Kernel k, GroupExpr &ge) {
  const Node &a = *g.anchor;
  const Value *x = a.operand(0);
  const std::vector<int64_t> &xs = x->type().shape;
  AICF_CHECK(xs.size() >= 2, "instance_norm of rank ", xs.size());
  int64_t N = xs[0], C = xs[1];
  std::vector<int64_t> plane(xs.begin() + 2, xs.end());
  int64_t P = prod(plane);
  k.threads = reductionThreads(knobs, P);
  k.knobs["threads"] = k.threads;
  if (!isGpuPlan(knobs))
    k.knobs["vec"] = reductionLanes(knobs, P);
  auto problem = std::make_shared<ReductionProblem>();
  problem->rows = N * C;
  problem->len = P;
  k.problem = problem;
  k.grid = {{"row", N * C}};
  E row = kir::var("row");
  E n = row / E(C), c = row % E(C);
  auto xAt = [&](E j) {
    std::vector<E> idx = {n, c};
    for (const E &e : unflatIndex(plane, j))
      idx.push_back(e);
    return idx;
  };
  DType ct = DType::F32;
  Algebra sum = sumLike(
      "sum", ct, [](E v) { return v; }, [](E s) { return s; });
  // Pass 1: mean. Pass 2: centred sum of squares (exact, like the interpreter's two passes).
  StateBufs s1 = stateBuffers(k, sum, "mu");
  foldAndMerge(k, sum, s1, P, "mu", [&](E j) { return ge.at(x, xAt(j)); });
  E mean = kir::load(s1.shared[0], {E(int64_t(0))}) / f32(double(P));
  StateBufs s2 = stateBuffers(k, sum, "sq");
  foldAndMerge(k, sum, s2, P, "sq",
               [&](E j) {
                 E d = ge.at(x, xAt(j)) - kir::var("sq_mean", ct);
                 return d * d;
               },
               {kir::decl("sq_mean", ct, mean)});
  // Pass 3: normalise, scale, shift and run the epilogue, threads striding over the plane.
  E var = kir::load(s2.shared[0], {E(int64_t(0))}) / f32(double(P));
  E t = kir::var(k.threadVar);
  std::vector<kir::StmtP> body = {
      kir::decl("y_mean", ct, mean),
      kir::decl("y_scale", ct,
                ge.at(a.operand(1), {c}) / kir::unary(kir::UnOp::Sqrt, var + f32(a.f("epsilon")))),
      kir::decl("y_bias", ct, ge.at(a.operand(2), {c}))};
  std::vector<E> idx = xAt(kir::var("y_j"));
  E y = (ge.at(x, idx) - kir::var("y_mean", ct)) * kir::var("y_scale", ct) + kir::var("y_bias", ct);
  DType outT = a.result(0)->type().dtype;
  if (outT == DType::F16 || outT == DType::BF16)
    y = kir::cast(y, outT);
  std::vector<kir::StmtP> stores = storeGroupOutputs(g, ge, a.result(0), y, idx, "y");
  body.push_back(kir::forLoop("y_j", t, E(P) - t, stores, k.threads));
  k.body.push_back(kir::region(k.threadVar, body));
  return k;
}

} // namespace

// The host column form (see recipeReduction): block `row` owns outputs 16 row .. 16 row + 15,
// consecutive along the kept innermost dim; acc[l] folds reduced element j of output l in
// order j = 0, 1, ... (the interpreter's order).
// Symbolic dims (issue 21): the kept innermost dim is static (a multiple of 16), so the blocks
// are the kept elements over 16 whatever the dims; counts and indices read the dims.
kir::Kernel columnReduction(const KernelGroup &g, kir::Kernel k, GroupExpr &ge, const Algebra &alg,
                            const std::vector<int64_t> &xs, const std::vector<int> &reduced,
                            const std::vector<int64_t> &keptShape,
                            const std::vector<int64_t> &redShape, const SymShape &keptSym,
                            const SymShape &redSym) {
  const Node &a = *g.anchor;
  const Value *x = a.operand(0), *res = a.result(0);
  SymExpr rowsSym = symNumel(keptSym), countSym = symNumel(redSym);
  int64_t rows = prod(keptShape), count = prod(redShape);
  k.threads = 1;
  k.knobs = {{"threads", 1}, {"vec", 16}};
  auto problem = std::make_shared<ReductionProblem>();
  problem->rows = rows;
  problem->len = count;
  problem->columns = true;
  k.problem = problem;
  k.grid = {{"row", rows / 16}};
  if (!rowsSym.isConstant())
    k.symGrid = {SymExtent{*SymExpr::divExact(rowsSym, 16), 1}};
  auto acc = std::make_shared<kir::Buffer>(
      kir::Buffer{"acc", alg.fields[0].second, {1, 16}, kir::Scope::Local, kir::Role::Temp, {}});
  k.allocs = {acc};
  E t = kir::var(k.threadVar), l = kir::var("l"), j = kir::var("j");
  // Output 16 row + l of a shape whose last dim is a multiple of 16, as an index: the block's
  // index over the shape with its last dim counted in 16s, then the lane.
  auto laneIndex = [&](SymShape shape) {
    shape.back() = *SymExpr::divExact(shape.back(), 16);
    std::vector<E> idx = unflatIndex(shape, kir::var("row"));
    idx.back() = idx.back() * E(int64_t(16)) + l;
    return idx;
  };
  E loaded = kir::load(acc, {t, l});
  E xv = ge.at(x, operandIndex(xs.size(), reduced, laneIndex(keptSym), unflatIndex(redSym, j)));
  std::vector<kir::StmtP> body = {
      kir::comment(cat(a.name(), " over ", countSym.str(),
                       " elements for 16 consecutive outputs at a time, "
                       "their states one vector")),
      recipe::vectorLoop("l", E(int64_t(0)), E(int64_t(16)),
                         {kir::store(acc, {t, l}, alg.init[0])}),
      kir::forLoop(
          "j", E(int64_t(0)), kir::symE(countSym),
          {recipe::vectorLoop("l", E(int64_t(0)), E(int64_t(16)),
                              {kir::store(acc, {t, l}, alg.update({loaded}, xv, j)[0])})})};
  std::vector<kir::StmtP> stores = storeGroupOutputs(g, ge, res, alg.finalize({loaded}),
                                                     laneIndex(symShapeOf(res->type())), "o");
  body.push_back(recipe::vectorLoop("l", E(int64_t(0)), E(int64_t(16)), stores));
  k.body.push_back(kir::region(k.threadVar, body));
  return k;
}

// The GPU thread form (see recipeReduction): thread t of block `row` owns output
// o = row * threads + t and folds its reduced elements j = 0, 1, ... in order (the
// interpreter's order) into a state of its own. Outputs next to each other are next to each
// other in the input too (the innermost dim is kept), so a warp's loads are coalesced.
// Symbolic dims (issue 21): the reduced count is static (threadFormFits); symbolic rows take
// the threads knob as it is (no clamp to the planning rows), a grid and a guard from the dims.
kir::Kernel threadReduction(const KernelGroup &g, kir::Kernel k, GroupExpr &ge, const Algebra &alg,
                            const std::vector<int64_t> &xs, const std::vector<int> &reduced,
                            const std::vector<int64_t> &keptShape,
                            const std::vector<int64_t> &redShape, const SymShape &keptSym,
                            const SymShape &redSym, const Knobs &knobs) {
  const Node &a = *g.anchor;
  const Value *x = a.operand(0), *res = a.result(0);
  SymExpr rowsSym = symNumel(keptSym);
  int64_t rows = prod(keptShape), count = prod(redShape);
  k.threads = rowsSym.isConstant() ? std::min(knobs.get("threads", 256), roundUp(rows, 32))
                                   : knobs.get("threads", 256);
  k.knobs = {{"threads", k.threads}};
  auto problem = std::make_shared<ReductionProblem>();
  problem->rows = rows;
  problem->len = count;
  problem->perThread = true;
  k.problem = problem;
  k.grid = {{"row", ceilDiv(rows, k.threads)}};
  if (!rowsSym.isConstant())
    k.symGrid = {SymExtent{rowsSym, k.threads}};
  auto acc = std::make_shared<kir::Buffer>(kir::Buffer{
      "acc", alg.fields[0].second, {k.threads}, kir::Scope::Local, kir::Role::Temp, {}});
  k.allocs = {acc};
  E t = kir::var(k.threadVar), o = kir::var("o", DType::I64), j = kir::var("j");
  E loaded = kir::load(acc, {t});
  E xv =
      ge.at(x, operandIndex(xs.size(), reduced, unflatIndex(keptSym, o), unflatIndex(redSym, j)));
  std::vector<kir::StmtP> fold = {
      kir::store(acc, {t}, alg.init[0]),
      kir::forLoop("j", E(int64_t(0)), E(count),
                   {kir::store(acc, {t}, alg.update({loaded}, xv, j)[0])})};
  std::vector<kir::StmtP> stores = storeGroupOutputs(g, ge, res, alg.finalize({loaded}),
                                                     unflatIndex(symShapeOf(res->type()), o), "o");
  fold.insert(fold.end(), stores.begin(), stores.end());
  std::vector<kir::StmtP> body = {
      kir::comment(cat(a.name(), " over ", count, " elements, one output per thread")),
      kir::decl("o", DType::I64, kir::var("row") * E(k.threads) + t)};
  if (rowsSym.divisibleBy(k.threads))
    body.insert(body.end(), fold.begin(), fold.end());
  else
    body.push_back(kir::ifThen(o < kir::symE(rowsSym), fold));
  k.body.push_back(kir::region(k.threadVar, body));
  return k;
}

// A GPU reduction of a few elements per output along outer axes (split-k's partial sums: [S,
// M, N] over S) reads them with one thread per output, not one block per output.
// Symbolic dims (issue 21): the choice reads static facts only, so every value of the dims
// makes it alike: a symbolic count never fits (it is not bounded by 64), symbolic rows always
// count as many.
bool threadFormFits(const std::vector<int64_t> &xs, const std::vector<int> &reduced,
                    const SymExpr &count, const SymExpr &rows, int64_t rowsAtPlan,
                    const Algebra &alg) {
  int rank = static_cast<int>(xs.size());
  return alg.fields.size() == 1 && count.isConstant() && count.constant() > 0 &&
         count.constant() <= 64 && (!rows.isConstant() || rowsAtPlan >= 32) && !reduced.empty() &&
         reduced.back() != rank - 1;
}

kir::Kernel recipeReduction(const KernelGroup &g, const std::string &name, const Knobs &knobs) {
  AICF_CHECK(g.anchor, "reduction recipe needs an anchor (group ", g.id, ")");
  const Node &a = *g.anchor;
  std::map<const Value *, kir::BufferP> byValue;
  kir::Kernel k = startKernel(g, name, "reduction", byValue);
  GroupExpr ge(g, byValue);
  if (a.op() == Op::InstanceNorm)
    return instanceNorm(g, knobs, std::move(k), ge);

  const Value *x = a.operand(0);
  const std::vector<int64_t> &xs = x->type().shape;
  int rank = static_cast<int>(xs.size());
  std::vector<int> reduced;
  bool isArg = a.op() == Op::ArgMax || a.op() == Op::ArgMin;
  if (isArg) {
    int64_t axis = a.i("axis");
    if (axis < 0)
      axis += rank;
    AICF_CHECK(axis >= 0 && axis < std::max(rank, 1), "arg axis out of range");
    reduced = {static_cast<int>(axis)};
  } else if (a.op() == Op::GlobalAvgPool || a.op() == Op::GlobalMaxPool) {
    for (int d = 2; d < rank; ++d)
      reduced.push_back(d);
  } else {
    for (int64_t d : a.ints("axes"))
      reduced.push_back(static_cast<int>(d < 0 ? d + rank : d));
    if (reduced.empty())
      for (int d = 0; d < rank; ++d)
        reduced.push_back(d);
  }
  std::sort(reduced.begin(), reduced.end());
  // Symbolic dims (issue 21): the kept and reduced dims as expressions; the grid (rows), the
  // fold's count and every index read the dims where they depend on them.
  SymShape xsym = symShapeOf(x->type());
  std::vector<int64_t> keptShape, redShape;
  SymShape keptSym, redSym;
  for (int d = 0; d < rank; ++d) {
    if (std::find(reduced.begin(), reduced.end(), d) != reduced.end()) {
      redShape.push_back(xs[d]);
      redSym.push_back(xsym[d]);
    } else {
      keptShape.push_back(xs[d]);
      keptSym.push_back(xsym[d]);
    }
  }
  int64_t rows = prod(keptShape), count = prod(redShape);
  SymExpr rowsSym = symNumel(keptSym), countSym = symNumel(redSym);
  if (isArg)
    AICF_CHECK(count > 0, a.where(), ": arg reduction over an empty axis");

  Algebra alg =
      isArg ? argAlgebra(a.op() == Op::ArgMax, a.i("select_last_index") != 0, x->type().dtype)
            : reduceAlgebra(a.op(), x->type().dtype, countSym);
  // Host, the innermost dim kept and a multiple of 16 (a channel-blocked global pool: [N, CB,
  // H, W, 16] over H and W): 16 consecutive outputs per block, their one-field states a vector
  // that every reduced element updates with one contiguous load, instead of 16 strided rows.
  if (!isGpuPlan(knobs) && !isArg && alg.fields.size() == 1 &&
      (!countSym.isConstant() || count > 0) && reduced.back() != rank - 1 &&
      xsym.back().isConstant() && xs.back() % 16 == 0 && x->type().dtype == DType::F32 &&
      a.result()->type().dtype == DType::F32)
    return columnReduction(g, std::move(k), ge, alg, xs, reduced, keptShape, redShape, keptSym,
                           redSym);
  if (isGpuPlan(knobs) && !isArg && threadFormFits(xs, reduced, countSym, rowsSym, rows, alg))
    return threadReduction(g, std::move(k), ge, alg, xs, reduced, keptShape, redShape, keptSym,
                           redSym, knobs);
  k.threads = reductionThreads(knobs, count);
  k.knobs["threads"] = k.threads;
  if (!isGpuPlan(knobs))
    k.knobs["vec"] = reductionLanes(knobs, countSym);
  auto problem = std::make_shared<ReductionProblem>();
  problem->rows = std::max<int64_t>(rows, 1);
  problem->len = count;
  k.problem = problem;
  k.grid = {{"row", std::max<int64_t>(rows, 1)}};
  if (!rowsSym.isConstant())
    k.symGrid = {SymExtent{rowsSym, 1}};
  E row = kir::var("row");
  std::vector<E> keptIdx = unflatIndex(keptSym, row);

  StateBufs sb = stateBuffers(k, alg, "st");
  foldAndMerge(k, alg, sb, countSym, "st", [&](E j) {
    return ge.at(x, operandIndex(xs.size(), reduced, keptIdx, unflatIndex(redSym, j)));
  });

  // Final region: thread 0 finalises and writes the outputs (with the epilogue).
  const Value *res = a.result(0);
  E value = alg.finalize(mergedState(alg, sb));
  DType outT = res->type().dtype;
  if (outT == DType::F16 || outT == DType::BF16)
    value = kir::cast(value, outT);
  else if (!isFloat(outT) && value->type != outT)
    value = kir::cast(value, outT);
  std::vector<E> outIdx = unflatIndex(symShapeOf(res->type()), row);
  std::vector<kir::StmtP> stores = storeGroupOutputs(g, ge, res, value, outIdx, "o");
  E t = kir::var(k.threadVar);
  k.body.push_back(kir::region(k.threadVar, {kir::ifThen(t == E(int64_t(0)), stores)}));
  return k;
}

namespace {

// Requires: a reduce_*, arg_max / arg_min, global pool or instance_norm anchor. Knobs:
// FlatLoopKnobs: threads per output row (GPU plans; 1 on the host), vec lane states per row
// (host plans).
class ReductionRecipe final : public Recipe {
public:
  const char *name() const override { return "reduction"; }
  bool lowers(const Node *a) const override {
    if (!a)
      return false;
    switch (a->op()) {
    case Op::ReduceSum:
    case Op::ReduceMean:
    case Op::ReduceMax:
    case Op::ReduceMin:
    case Op::ReduceProd:
    case Op::ReduceL1:
    case Op::ReduceL2:
    case Op::ReduceSumSquare:
    case Op::ReduceLogSumExp:
    case Op::ArgMax:
    case Op::ArgMin:
    case Op::GlobalAvgPool:
    case Op::GlobalMaxPool:
    case Op::InstanceNorm: // per-(n, c) statistics: the block reduction machinery
      return true;
    default: return false;
    }
  }
  // Symbolic dims: kept dims (the grid) and reduced dims (the fold's count, a mean's divisor)
  // read from the dims; instance_norm's plane walks are static only.
  bool symbolicDims(const KernelGroup &g) const override {
    return g.anchor && g.anchor->op() != Op::InstanceNorm;
  }
  kir::Kernel build(const KernelGroup &g, const std::string &n, const Knobs &k) const override {
    return labelled(recipeReduction(g, n, k), name());
  }
  KnobSet canonicalKnobs(const KnobSet &k) const override {
    return knobsToMap(knobsFromMap<FlatLoopKnobs>(k));
  }
  std::vector<KnobSet> candidates(const kir::Kernel &d, const Hardware &hw) const override {
    int64_t len = problemOf<ReductionProblem>(d).len;
    std::vector<KnobSet> out;
    if (hw.gpu && problemOf<ReductionProblem>(d).perThread) {
      for (int64_t t : {64, 128, 256})
        out.push_back(knobsToMap(FlatLoopKnobs{t, std::nullopt}));
      return out;
    }
    if (hw.gpu) {
      for (int64_t t : {32, 64, 128, 256, 512})
        if (t == 32 || t / 2 < len)
          out.push_back(knobsToMap(FlatLoopKnobs{t, std::nullopt}));
      return out;
    }
    // Host: one thread, the row's state over vec lanes (several vectors of them hide the add
    // latency).
    for (int64_t v : {1, 16, 32, 64})
      if (v == 1 || v / 2 < len)
        out.push_back(knobsToMap(FlatLoopKnobs{1, v}));
    return out;
  }
  CostShape costShape(const KernelGroup &, const kir::Kernel &k, const Hardware &hw,
                      int64_t flops) const override {
    const ReductionProblem &p = problemOf<ReductionProblem>(k);
    if (p.columns) { // per block: a vector update per reduced element (~1.5 cycles)
      CostShape s;
      s.flops = double(flops);
      s.vectorShare = 0.5;
      s.scalarCycles = 1.5 * double(p.len) + 20.0;
      return s;
    }
    if (p.perThread) { // a serial fold of len elements per thread
      CostShape s;
      s.flops = double(flops);
      s.vectorShare = 0.5;
      s.chainSteps = double(p.len);
      return s;
    }
    return rowStateShape(k, hw, flops, p.len, false, false, 0.0);
  }
  int64_t registers(const kir::Kernel &) const override { return 16; }
};

} // namespace

const Recipe &reductionRecipe() {
  static const ReductionRecipe recipe;
  return recipe;
}

} // namespace aicf
