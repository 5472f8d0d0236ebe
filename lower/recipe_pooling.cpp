// The pooling recipe: max_pool / avg_pool over N-d windows (NC... layout) with pads, strides,
// dilations, ceil_mode (already reflected in the output shape) and count_include_pad, and
// max_pool_indices (the flat form on every plan: the maximum's flat index in x, its first
// occurrence in window order, a NaN winning over numbers).
//
// A flat grid x threads x vector loop over the output elements; each element walks its window
// with one serial loop per spatial dim, reading only positions inside the input. Exactly the
// interpreter's rule (interp/kernels_reduce.cpp): max propagates NaN; avg divides by the
// in-input positions, or with count_include_pad by the positions inside the padded input
// (never those beyond the end padding that ceil_mode adds); an empty window gives NaN. The
// operand's fused prologue is inlined at each read, the epilogue applied before the store.
#include "lower/flat_loop.h"
#include "lower/recipe_support.h"
#include "lower/recipes.h"

#include "support/diagnostics.h"
#include "support/int_math.h"

#include <algorithm>
#include <cmath>

namespace aicf {

namespace {

using kir::E;

// The start every pooling form shares: the kernel named, its params (filling `byValue`).
kir::Kernel poolingKernel(const KernelGroup &g, const std::string &name,
                          std::map<const Value *, kir::BufferP> &byValue) {
  return startKernel(g, name, "pooling", byValue);
}

// The max_pool plane form (maxPoolPlane) applies: 2-D, equal strides.
// The type a pooling window folds in: f32, or f64 where f32 would round the values (f64, and
// integers wider than 16 bits; double holds them exactly up to 2^53).
DType poolCompute(DType t) {
  switch (t) {
  case DType::F64:
  case DType::I64:
  case DType::I32:
  case DType::U64:
  case DType::U32: return DType::F64;
  default: return DType::F32;
  }
}

// The folded value stored as the result dtype.
kir::E poolResult(kir::E value, DType outT) {
  return value->type == outT ? value : kir::cast(value, outT);
}

bool maxPoolPlaneLegal(const Node &a) {
  return a.op() == Op::MaxPool && a.i("blocked") == 0 && a.operand(0)->type().shape.size() == 4 &&
         poolCompute(a.operand(0)->type().dtype) == DType::F32 &&
         a.ints("strides")[0] == a.ints("strides")[1];
}

// The host form: one output row (n, c, o_0 .. o_{S-2}) at a time, `rows` rows per block. The
// row's accumulators live in a [OW] tile; for each window tap of the outer dims whose input row
// exists (one check per row, not per element), and each tap kw of the last dim, the outputs
// whose input column ow s - p + kw d lies inside the input form one contiguous range
// [lo(kw), hi(kw)) known at compile time, so the innermost loop over ow has no branch and
// vectorises. Average counts are products of per-dim counts: the outer dims' count per row and
// the last dim's count per ow (a sum of range tests). Same results as the flat form bit for
// bit: the same taps are folded in the same order (outer dims, then kw), and max propagates
// NaN through the same update.
kir::Kernel poolingRows(const KernelGroup &g, const std::string &name, const Knobs &knobs) {
  const Node &a = *g.anchor;
  bool isMax = a.op() == Op::MaxPool;
  bool includePad = !isMax && a.i("count_include_pad") != 0;
  const Value *x = a.operand(0);
  const Value *res = a.result(0);
  const DType ct = poolCompute(x->type().dtype);
  const std::vector<int64_t> &xs = x->type().shape, &os = res->type().shape;
  const auto &ks = a.ints("kernel_shape"), &st = a.ints("strides"), &pd = a.ints("pads"),
             &dl = a.ints("dilations");
  size_t S = xs.size() - 2;
  int64_t OW = os.back(), IW = xs.back(), KW = ks[S - 1], sw = st[S - 1], pw = pd[S - 1],
          pwEnd = pd[2 * S - 1], dw = dl[S - 1];
  std::vector<int64_t> rowShape(os.begin(), os.end() - 1);
  int64_t rows = product(rowShape);
  int64_t R = std::clamp<int64_t>(knobs.get("rows", 1), 1, rows);

  std::map<const Value *, kir::BufferP> byValue;
  kir::Kernel k = poolingKernel(g, name, byValue);
  GroupExpr ge(g, byValue);
  k.grid = {{"b", ceilDiv(rows, R)}};
  k.threadVar = "t";
  k.threads = 1;
  k.knobs = {{"rows", R}};
  auto problem = std::make_shared<FlatLoopProblem>();
  problem->n = product(os);
  problem->taps = product(ks);
  problem->rows = rows;
  problem->stride = sw;
  if (maxPoolPlaneLegal(a)) { // what the plane form would take
    recipe::PhasePlanes pg = recipe::phasePlanes({xs[2], xs[3]}, pd, {os[2], os[3]}, ks, dl, sw);
    problem->plane = pg.F;
    problem->padded = pg.phase;
    problem->planeRows = os[2];
  }
  k.problem = problem;
  auto acc = std::make_shared<kir::Buffer>(
      kir::Buffer{"acc", ct, {OW}, kir::Scope::Shared, kir::Role::Temp, {}});
  k.allocs = {acc};

  E zero(int64_t(0)), one(int64_t(1)), ow = kir::var("ow");
  // The range of ow whose input column for tap kw lies in [0, limit).
  auto range = [&](int64_t kw, int64_t limit) {
    return recipe::insideRange(OW, sw, kw * dw - pw, limit);
  };
  auto vecLoop = [](std::pair<int64_t, int64_t> r, std::vector<kir::StmtP> body) {
    return recipe::vectorLoop("ow", E(r.first), E(r.second), std::move(body));
  };

  E row = kir::var("b") * E(R) + kir::var("r");
  std::vector<E> ridx = unflatIndex(rowShape, kir::var("row"));
  std::vector<kir::StmtP> body = {kir::decl("row", DType::I64, row)};
  body.push_back(
      vecLoop({0, OW}, {kir::store(acc, {ow}, kir::fconst(isMax ? -INFINITY : 0.0, ct))}));
  if (!isMax) {
    body.push_back(kir::decl("cnt", DType::I64, one));
    body.push_back(kir::decl("pcnt", DType::I64, one));
  }
  // Innermost first: the taps of the last dim over their ranges.
  std::vector<E> xidx = {ridx[0], ridx[1]};
  for (size_t d = 0; d + 1 < S; ++d)
    xidx.push_back(kir::var(cat("pi", d)));
  std::vector<kir::StmtP> taps;
  for (int64_t kw = 0; kw < KW; ++kw) {
    std::vector<E> xi = xidx;
    xi.push_back(ow * E(sw) + E(kw * dw - pw));
    E v = ge.at(x, xi);
    if (v->type != ct)
      v = kir::cast(v, ct);
    E cur = kir::load(acc, {ow});
    E upd = isMax ? flatloop::nanMaxUpdate(cur, v) : cur + v;
    auto r = range(kw, IW);
    if (r.second > r.first)
      taps.push_back(vecLoop(r, {kir::store(acc, {ow}, upd)}));
  }
  {
    // Average counts of the outer dims: the taps inside the input (and inside the padded input).
    std::vector<kir::StmtP> countLoops;
    if (!isMax) {
      std::vector<kir::StmtP> cnts;
      for (size_t d = 0; d + 1 < S; ++d) {
        E c = ridx[2 + d] * E(st[d]) - E(pd[d]) + kir::var(cat("k", d)) * E(dl[d]);
        std::string cd = cat("c", d), pcd = cat("pc", d);
        body.push_back(kir::decl(cd, DType::I64, zero));
        body.push_back(kir::decl(pcd, DType::I64, zero));
        countLoops.push_back(kir::forLoop(
            cat("k", d), zero, E(ks[d]),
            {kir::ifThen((c >= zero) && (c < E(xs[2 + d])), {kir::assign(cd, kir::var(cd) + one)}),
             kir::ifThen(c < E(xs[2 + d] + pd[S + d]), {kir::assign(pcd, kir::var(pcd) + one)})}));
        cnts.push_back(kir::assign("cnt", kir::var("cnt") * kir::var(cd)));
        cnts.push_back(kir::assign("pcnt", kir::var("pcnt") * kir::var(pcd)));
      }
      body.insert(body.end(), countLoops.begin(), countLoops.end());
      body.insert(body.end(), cnts.begin(), cnts.end());
    }
    // The outer dims' window loops (k_0 outermost) around the taps, the input-row check hoisted
    // out of ow.
    std::vector<kir::StmtP> wrapped = taps;
    for (size_t d = S - 1; d-- > 0;) {
      std::string pi = cat("pi", d);
      E c = kir::var(pi);
      std::vector<kir::StmtP> level = {
          kir::decl(pi, DType::I64,
                    ridx[2 + d] * E(st[d]) - E(pd[d]) + kir::var(cat("k", d)) * E(dl[d])),
          kir::ifThen((c >= zero) && (c < E(xs[2 + d])), wrapped)};
      wrapped = {kir::forLoop(cat("k", d), zero, E(ks[d]), level)};
    }
    body.insert(body.end(), wrapped.begin(), wrapped.end());
  }
  // The last dim's counts per ow, then the value and the group's stores.
  std::vector<kir::StmtP> fin;
  std::vector<E> oidx = ridx;
  oidx.push_back(ow);
  E value = kir::load(acc, {ow});
  if (!isMax) {
    E cw, pcw;
    for (int64_t kw = 0; kw < KW; ++kw) {
      // Inside the padded input: iw < IW + pwEnd (iw >= -pw always holds).
      auto r = range(kw, IW), rp = recipe::insideRange(OW, sw, kw * dw, IW + pw + pwEnd);
      E in = kir::select((ow >= E(r.first)) && (ow < E(r.second)), one, zero);
      E inP = kir::select((ow >= E(rp.first)) && (ow < E(rp.second)), one, zero);
      cw = cw ? cw + in : in;
      pcw = pcw ? pcw + inP : inP;
    }
    E div = includePad ? kir::var("pcnt") * pcw : kir::var("cnt") * cw;
    fin.push_back(kir::decl("div", DType::I64, div));
    value = kir::select(kir::var("div") == zero, kir::fconst(NAN, ct),
                        value / kir::cast(kir::var("div"), ct));
  }
  DType outT = res->type().dtype;
  value = poolResult(value, outT);
  std::vector<kir::StmtP> stores = storeGroupOutputs(g, ge, res, value, oidx, "o");
  fin.insert(fin.end(), stores.begin(), stores.end());
  body.push_back(vecLoop({0, OW}, fin));
  std::vector<kir::StmtP> rowLoop = {kir::forLoop("r", zero, E(R), body)};
  if (rows % R != 0)
    rowLoop = {kir::forLoop("r", zero, E(R), {kir::ifThen(row < E(rows), body)})};
  k.body.push_back(kir::region(k.threadVar, rowLoop));
  return k;
}

// The host's plane form of a 2-D max_pool with equal strides, for narrow rows: block (n, c)
// copies its input plane into stride x stride phase planes (recipe_support.h phasePlanes)
// whose padding, and whatever lies past the input for ceil_mode windows, is -inf, then folds
// each window tap into a grid of outputs with one unit-stride vector loop (no bounds checks,
// no gathers). A -inf tap leaves the running max as it is, so each output sees the same
// updates in the same order as the row form (an empty window stays -inf there too).
// The host form of a channel-blocked 2-D pool (blocked = 1, [N, CB, H, W, 16]): block (n, cb,
// rows of R output rows); each output pixel is one 16-lane vector folding its window's taps,
// unrolled. The rows and columns split into ranges with one set of taps inside the input
// (recipe::tapRanges), so every range is a branch-free loop, and an average's divisor is a
// constant per range. Same taps in the same order (kh, then kw) as the interpreter.
kir::Kernel poolingBlocked(const KernelGroup &g, const std::string &name, const Knobs &knobs) {
  const Node &a = *g.anchor;
  bool isMax = a.op() == Op::MaxPool;
  bool includePad = !isMax && a.i("count_include_pad") != 0;
  const Value *x = a.operand(0), *res = a.result(0);
  const std::vector<int64_t> &xs = x->type().shape, &os = res->type().shape;
  const auto &ks = a.ints("kernel_shape"), &st = a.ints("strides"), &pd = a.ints("pads"),
             &dl = a.ints("dilations");
  AICF_CHECK(xs.size() == 5, a.where(), ": a blocked pool is 2-D here, got ", x->type().str());
  int64_t OH = os[2], OW = os[3];
  int64_t R = std::clamp<int64_t>(knobs.get("rows", 1), 1, OH);
  std::map<const Value *, kir::BufferP> byValue;
  kir::Kernel k = poolingKernel(g, name, byValue);
  GroupExpr ge(g, byValue);
  k.grid = {{"n", xs[0]}, {"cb", xs[1]}, {"rb", ceilDiv(OH, R)}};
  k.threads = 1;
  k.knobs = {{"rows", R}};
  auto problem = std::make_shared<FlatLoopProblem>();
  problem->n = product(os);
  problem->taps = ks[0] * ks[1];
  problem->rows = OH * xs[0] * xs[1];
  problem->stride = st[1];
  problem->blocked = true;
  k.problem = problem;
  k.body.push_back(kir::comment(cat(a.name(), " on 16-lane channel blocks: one vector per pixel, ",
                                    ks[0] * ks[1], " taps unrolled; ", R, " rows per block")));
  E nIdx = kir::var("n"), cb = kir::var("cb"), oh = kir::var("oh"), ow = kir::var("ow"),
    l = kir::var("l");
  E r0 = kir::var("rb") * E(R);
  auto pixel = [&](const recipe::TapRange &rows, const recipe::TapRange &cols) {
    // The running value is a scalar assigned per tap. Max keeps two: the plain maximum (x >
    // acc ? x : acc, one vmaxps, which skips a NaN x) and the first NaN seen (nan stays NaN
    // once it is, else takes x); a NaN among the taps wins at the end. Three vector ops per tap
    // where the NaN-propagating update (flatloop::nanMaxUpdate) takes six: resnet18's 3 x 3 / 2
    // pool 0.30 -> 0.19 ms. Same result as the interpreter's, that first NaN included.
    std::vector<kir::StmtP> fold = {
        kir::decl("acc", DType::F32, kir::fconst(isMax ? -INFINITY : 0.0))};
    E acc = kir::var("acc", DType::F32), nan = kir::var("first_nan", DType::F32);
    if (isMax)
      fold.push_back(kir::decl("first_nan", DType::F32, kir::fconst(0.0)));
    for (int64_t kh : rows.taps)
      for (int64_t kw : cols.taps) {
        E v = ge.at(x, {nIdx, cb, oh * E(st[0]) + E(kh * dl[0] - pd[0]),
                        ow * E(st[1]) + E(kw * dl[1] - pd[1]), l});
        if (v->type != DType::F32)
          v = kir::cast(v, DType::F32);
        if (isMax) {
          fold.push_back(kir::decl(cat("x", kh, "_", kw), DType::F32, v));
          E xv = kir::var(cat("x", kh, "_", kw), DType::F32);
          fold.push_back(kir::assign("acc", kir::select(xv > acc, xv, acc)));
          fold.push_back(kir::assign("first_nan", kir::select(flatloop::isNaN(nan), nan, xv)));
        } else {
          fold.push_back(kir::assign("acc", acc + v));
        }
      }
    int64_t count = includePad ? rows.padded * cols.padded
                               : static_cast<int64_t>(rows.taps.size() * cols.taps.size());
    E value = acc;
    if (!isMax)
      value = count ? acc / kir::fconst(double(count)) : kir::fconst(NAN);
    else if (count == 0)
      value = kir::fconst(-INFINITY);
    else
      value = kir::select(flatloop::isNaN(nan), nan, acc);
    std::vector<kir::StmtP> stores =
        storeGroupOutputs(g, ge, res, value, {nIdx, cb, oh, ow, l}, "o");
    fold.insert(fold.end(), stores.begin(), stores.end());
    return fold;
  };
  std::vector<kir::StmtP> body = recipe::tapRangeWalk(
      recipe::tapRanges(OH, ks[0], st[0], dl[0], pd[0], xs[2], pd[2]),
      recipe::tapRanges(OW, ks[1], st[1], dl[1], pd[1], xs[3], pd[3]), r0, R, pixel);
  k.body.push_back(kir::region(k.threadVar, body));
  return k;
}

kir::Kernel maxPoolPlane(const KernelGroup &g, const std::string &name) {
  const Node &a = *g.anchor;
  const Value *x = a.operand(0);
  const Value *res = a.result(0);
  const std::vector<int64_t> &xs = x->type().shape, &os = res->type().shape;
  const auto &ks = a.ints("kernel_shape"), &st = a.ints("strides"), &pd = a.ints("pads"),
             &dl = a.ints("dilations");
  AICF_CHECK(a.op() == Op::MaxPool && xs.size() == 4 && st[0] == st[1], a.where(),
             ": the pooling plane form needs a 2-D max_pool with equal strides");
  int64_t IH = xs[2], IW = xs[3], OH = os[2], OW = os[3], KH = ks[0], KW = ks[1], dh = dl[0],
          dw = dl[1], pt = pd[0], pl = pd[1];
  recipe::PhasePlanes pg = recipe::phasePlanes({IH, IW}, pd, {OH, OW}, ks, dl, st[0]);
  int64_t s = pg.st, Wq = pg.Wq, F = pg.F, phase = pg.phase;

  std::map<const Value *, kir::BufferP> byValue;
  kir::Kernel k = poolingKernel(g, name, byValue);
  GroupExpr ge(g, byValue);
  k.grid = {{"b", xs[0] * xs[1]}};
  k.threadVar = "t";
  k.threads = 1;
  k.knobs = {{"plane", 1}};
  auto problem = std::make_shared<FlatLoopProblem>();
  problem->n = product(os);
  problem->taps = KH * KW;
  problem->rows = product(os) / OW;
  problem->plane = F;
  problem->padded = phase;
  problem->planeRows = OH;
  problem->stride = s;
  k.problem = problem;
  auto xp = std::make_shared<kir::Buffer>(
      kir::Buffer{"xp", DType::F32, {s * s * phase}, kir::Scope::Shared, kir::Role::Temp, {}});
  auto acc = std::make_shared<kir::Buffer>(
      kir::Buffer{"acc", DType::F32, {F}, kir::Scope::Shared, kir::Role::Temp, {}});
  k.allocs = {xp, acc};
  E zero(int64_t(0)), f = kir::var("f"), nc = kir::var("b");
  E nIdx = nc / E(xs[1]), cIdx = nc % E(xs[1]);
  E ninf = kir::fconst(-INFINITY);
  std::vector<kir::StmtP> body = {
      recipe::vectorLoop("f", zero, E(F), {kir::store(acc, {f}, ninf)})};
  std::vector<kir::StmtP> fill =
      recipe::fillPhasePlanes(xp, pg, IH, IW, pt, pl, ninf, [&](E ih, E iw) {
        E v = ge.at(x, {nIdx, cIdx, ih, iw});
        return v->type == DType::F32 ? v : kir::cast(v, DType::F32);
      });
  body.insert(body.end(), fill.begin(), fill.end());
  for (int64_t kh = 0; kh < KH; ++kh)
    for (int64_t kw = 0; kw < KW; ++kw) {
      E xv = kir::load(xp, {f + E(pg.tap(kh * dh, kw * dw))});
      body.push_back(recipe::vectorLoop(
          "f", zero, E(F),
          {kir::store(acc, {f}, flatloop::nanMaxUpdate(kir::load(acc, {f}), xv))}));
    }
  E oh = kir::var("oh"), ow = kir::var("ow");
  E value = poolResult(kir::load(acc, {oh * E(Wq) + ow}), res->type().dtype);
  std::vector<kir::StmtP> stores = storeGroupOutputs(g, ge, res, value, {nIdx, cIdx, oh, ow}, "o");
  body.push_back(kir::forLoop("oh", zero, E(OH), {recipe::vectorLoop("ow", zero, E(OW), stores)}));
  k.body.push_back(kir::region(k.threadVar, body));
  return k;
}

} // namespace

kir::Kernel recipePooling(const KernelGroup &g, const std::string &name, const Knobs &knobs) {
  using kir::E;
  AICF_CHECK(g.anchor && (g.anchor->op() == Op::MaxPool || g.anchor->op() == Op::AvgPool ||
                          g.anchor->op() == Op::MaxPoolIndices),
             "pooling recipe on group ", g.id, " (", g.kind, ")");
  // max_pool_indices: the flat form on every plan.
  bool indices = g.anchor->op() == Op::MaxPoolIndices;
  if (!indices && g.anchor->i("blocked") != 0) // (one thread per block on a GPU plan too:
    return poolingBlocked(g, name, knobs);     // correct, not tuned)
  if (!indices && !isGpuPlan(knobs))
    return knobs.get("plane", 0) != 0 && maxPoolPlaneLegal(*g.anchor) ? maxPoolPlane(g, name)
                                                                      : poolingRows(g, name, knobs);
  const Node &a = *g.anchor;
  bool isMax = a.op() != Op::AvgPool;
  bool includePad = !isMax && a.i("count_include_pad") != 0;
  const Value *x = a.operand(0);
  const Value *res = a.result(0);
  const DType ct = poolCompute(x->type().dtype);
  const std::vector<int64_t> &xs = x->type().shape, &os = res->type().shape;
  const auto &ks = a.ints("kernel_shape"), &st = a.ints("strides"), &pd = a.ints("pads"),
             &dl = a.ints("dilations");
  size_t S = xs.size() - 2;
  AICF_CHECK(ks.size() == S && st.size() == S && dl.size() == S && pd.size() == 2 * S, a.where(),
             ": pooling attributes do not match rank ", xs.size());

  std::map<const Value *, kir::BufferP> byValue;
  kir::Kernel k = poolingKernel(g, name, byValue);
  GroupExpr ge(g, byValue);
  int64_t n = 1;
  for (int64_t d : os)
    n *= d;

  auto body = [&](E i) {
    std::vector<E> oidx = unflatIndex(os, i);
    E zero = E(int64_t(0)), one = E(int64_t(1));
    std::vector<kir::StmtP> out = {kir::decl("acc", ct, kir::fconst(isMax ? -INFINITY : 0.0, ct)),
                                   kir::decl("cnt", DType::I64, zero)};
    if (includePad)
      out.push_back(kir::decl("pcnt", DType::I64, zero));
    if (indices)
      out.push_back(kir::decl("arg", DType::I64, E(int64_t(-1))));
    // Innermost: the window position's input coordinates, then the accumulation.
    std::vector<E> xidx = {oidx[0], oidx[1]};
    std::vector<kir::StmtP> inner;
    E inside, insidePadded;
    // max_pool_indices: the position's flat index in x, (n C + c) * plane + the spatial offset
    // (row major, or the first spatial dim fastest for storage_order = 1).
    bool colMajor = indices && a.i("storage_order") != 0;
    E flat = oidx[0] * E(xs[1]) + oidx[1];
    E colOff;
    int64_t colStride = 1;
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
      flat = flat * E(xs[2 + d]) + (colMajor ? zero : c);
      colOff = colOff ? colOff + c * E(colStride) : c;
      colStride *= xs[2 + d];
    }
    if (colMajor)
      flat = flat + colOff;
    E v = ge.at(x, xidx);
    if (v->type != ct)
      v = kir::cast(v, ct);
    E acc = kir::var("acc", ct);
    std::vector<kir::StmtP> take;
    if (indices) {
      // The first maximum wins; a NaN over a number (the value max_pool gives).
      inner.push_back(kir::decl("xv", ct, v));
      E xv = kir::var("xv", ct), arg = kir::var("arg");
      auto orE = [](E a, E b) { return kir::binary(kir::BinOp::Or, a, b); };
      E better = orE(orE(arg<zero, xv> acc), flatloop::isNaN(xv) && (acc == acc));
      take = {kir::ifThen(better, {kir::assign("acc", xv), kir::assign("arg", flat)})};
    } else {
      E upd = isMax ? flatloop::nanMaxUpdate(acc, v) : acc + v;
      take = {kir::assign("acc", upd), kir::assign("cnt", kir::var("cnt") + one)};
    }
    inner.push_back(inside ? kir::ifThen(inside, take) : kir::seq(take));
    if (includePad && static_cast<bool>(insidePadded))
      inner.push_back(kir::ifThen(insidePadded, {kir::assign("pcnt", kir::var("pcnt") + one)}));
    std::vector<kir::StmtP> loops = inner;
    for (size_t d = S; d-- > 0;)
      loops = {kir::forLoop(cat("k", d), zero, E(ks[d]), loops)};
    out.insert(out.end(), loops.begin(), loops.end());
    E value = indices ? kir::var("arg") : acc;
    if (!isMax) {
      E div = includePad ? kir::var("pcnt") : kir::var("cnt");
      value = kir::select(div == zero, kir::fconst(NAN, ct), acc / kir::cast(div, ct));
    }
    DType outT = res->type().dtype;
    value = poolResult(value, outT);
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
class PoolingRecipe final : public flatloop::FlatLoopRecipe<PoolingKnobs> {
public:
  PoolingRecipe() : FlatLoopRecipe({.maxVec = 4, .registers = 10, .registersPerVec = 5}) {}
  const char *name() const override { return "pooling"; }
  bool lowers(const Node *a) const override {
    return a && (a->op() == Op::MaxPool || a->op() == Op::AvgPool || a->op() == Op::MaxPoolIndices);
  }
  kir::Kernel build(const KernelGroup &g, const std::string &n, const Knobs &k) const override {
    return labelled(recipePooling(g, n, k), name());
  }
  // The flat form: every GPU pool and max_pool_indices on the host (no rows counted).
  static bool flatForm(const FlatLoopProblem &p, const Hardware &hw) {
    return hw.gpu || (!p.blocked && p.rows == 0);
  }
  std::vector<KnobSet> candidates(const kir::Kernel &d, const Hardware &hw) const override {
    if (flatForm(problemOf<FlatLoopProblem>(d), hw))
      return FlatLoopRecipe::candidates(d, hw);
    // Host: output rows per block (OpenMP runs the blocks), no block mostly idle; the plane form
    // (max_pool) while a phase plane and the output grid stay in L1.
    const auto &p = problemOf<FlatLoopProblem>(d);
    std::vector<KnobSet> out;
    for (int64_t r : {1, 4, 16, 64})
      if (r == 1 || r / 2 < p.rows)
        out.push_back(knobsToMap(PoolingKnobs{std::nullopt, std::nullopt, r, std::nullopt}));
    if (p.plane > 0 && (p.plane + p.padded) * 4 <= hw.l1dBytes)
      out.push_back(knobsToMap(PoolingKnobs{std::nullopt, std::nullopt, std::nullopt, 1}));
    return out;
  }
  // GPU: the flat gather. Host: vector loops, each ~12 cycles of set-up, ~1.5 cycles per full
  // vector (~4 when the loads are strided: gathers) and ~1 per remainder element. Row form: per
  // row, a loop per window tap and the store loop. Plane form: per plane, the phase planes'
  // fill, the copy in (strided at stride > 1), a unit-stride loop per tap and the stores.
  CostShape costShape(const KernelGroup &g, const kir::Kernel &k, const Hardware &hw,
                      int64_t flops) const override {
    const auto &p = problemOf<FlatLoopProblem>(k);
    // A fused prologue (recipe_support.h) is evaluated at every tap, in the plane form once per
    // input element as the plane is copied in.
    const double prologue = recipe::prologueCycles(g);
    if (flatForm(p, hw))
      return flatloop::costShape(k, hw, flops, 7.0 + 4.0 * double(p.taps));
    CostShape s;
    int64_t lanes = std::max<int64_t>(1, hw.vectorLanesF32());
    auto loop = [lanes](int64_t len, double perVector) {
      return hostLoopCycles(len, lanes, perVector);
    };
    if (p.blocked) { // per pixel one vector: a load and a max / add per tap, ~8 of overhead
      s.flops = 0;   // (the taps are the work: counted here once; cycles of the real clock, as
                     // bench-costmodel calibrates it: 1.4x the nominal 2.6 GHz fit)
      s.vectorShare = 0.5;
      s.scalarCycles = double(knobOf(k, &PoolingKnobs::rows, 1)) *
                       double(p.n / std::max<int64_t>(p.rows, 1)) / 16.0 *
                       ((1.4 + prologue) * double(p.taps) + 8.4);
      return s;
    }
    double strided = p.stride > 1 ? 4.0 : 1.5;
    int64_t width = p.n / std::max<int64_t>(p.rows, 1);
    s.flops = double(flops);
    s.vectorShare = 0.5;
    if (knobOf(k, &PoolingKnobs::plane) != 0) {
      int64_t rowsPerPlane = std::max<int64_t>(1, p.planeRows);
      s.scalarCycles = 1.5 * double(ceilDiv(p.padded * p.stride * p.stride, lanes)) +
                       double(p.stride * p.stride) * double(ceilDiv(p.plane, lanes)) * strided +
                       double(p.taps) * loop(p.plane, 1.5) +
                       double(rowsPerPlane) * loop(width, 1.5) +
                       prologue * double(p.stride * p.stride) * double(ceilDiv(p.plane, lanes));
      return s;
    }
    int64_t R = knobOf(k, &PoolingKnobs::rows, 1);
    s.scalarCycles =
        double(R) *
        (double(p.taps) * (loop(width, strided) + prologue * double(ceilDiv(width, lanes))) +
         loop(width, 1.5));
    return s;
  }
};

} // namespace

const Recipe &poolingRecipe() {
  static const PoolingRecipe recipe;
  return recipe;
}

} // namespace aicf
