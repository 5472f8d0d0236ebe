// The direct_conv recipe: grouped / depthwise conv and conv_transpose, and the generic conv
// lowering (a group-1 conv whose tile_compatible_compute certificate fails); its kernels and its
// recipe object (lower/recipe.h). It shares the conv geometry (lower/contraction.h ConvGeom)
// with the implicit GEMM of contraction_conv_specs.cpp. Knobs: DirectConvKnobs (threads over
// output pixels; host: rows per block).
//
// Direct conv: grid (n, oc), threads over output pixels; each thread sums its pixel over the
// group's input channels and the kernel taps (conv_transpose: the taps whose input position
// o + pad - k dil is a multiple of the stride inside the input), adds the bias and applies the
// epilogue. The host has a row form, a padded-plane form and, for blocked convs, a 16-lane form.
#include "ir/epilogue.h"
#include "lower/contraction.h"
#include "lower/recipe_support.h"
#include "lower/recipes.h"
#include "support/int_math.h"

#include "ir/graph.h"
#include "support/diagnostics.h"

#include <algorithm>

namespace aicf {

using kir::E;
using kir::StmtP;
using namespace recipe;
using namespace contraction;

namespace {

// The padded-plane form's geometry (directConvPlane): recipe_support.h phasePlanes.
PhasePlanes planeGeom(const ConvGeom &geo) {
  return phasePlanes(geo.I, geo.pads, geo.O, geo.Kd, geo.dil, geo.strides[0]);
}

// A direct conv's per-output tail: the accumulated value `acc` at output index `out`, plus the
// bias, through the epilogue steps, stored to the group's outputs (row and plane forms).
std::vector<StmtP> convOutputStores(const KernelGroup &g, GroupExpr &gx, const Node &n,
                                    bool hasBias, E acc, const Index &out) {
  if (hasBias)
    acc = acc + asF32(gx.at(n.operand(2), {out[1]}));
  std::vector<StmtP> fin = {kir::decl("y0", DType::F32, acc)};
  std::string cur = "y0";
  Contraction c;
  c.outShape = n.result()->type().shape;
  splitEpilogue(n, hasBias ? 3 : 2, gx, false, c);
  auto steps = applySteps(c, gx, out, cur);
  fin.insert(fin.end(), steps.begin(), steps.end());
  auto stores = storeGroupOutputs(g, gx, n.result(), fvar(cur), out);
  fin.insert(fin.end(), stores.begin(), stores.end());
  return fin;
}

// The start every host direct-conv form shares: the kernel named, its params (filling
// `byValue`), the fused epilogue checked to keep the conv's shape.
kir::Kernel directConvKernel(const KernelGroup &g, const std::string &name,
                             std::map<const Value *, kir::BufferP> &byValue) {
  requireShapePreservingEpilogue(g, g.anchor->result());
  return startKernel(g, name, "direct_conv", byValue);
}

// Whether a conv's operands include a bias (beyond x, w and the epilogue's extras).
bool convHasBias(const Node &n) {
  return n.numOperands() == 3 + static_cast<size_t>(epilogueOperandCount(n.strs("epilogue")));
}

// Direct conv on the host, one output row (n, oc, o_0 .. o_{S-2}) at a time, `rows` rows per
// block: the row's accumulators live in an [OW] tile; for each input channel of the group, each
// outer tap whose input row exists (one check per row) and each tap kw of the last dim, the
// outputs whose input column lies inside the input form a range known at compile time
// (insideRange), so the innermost loop over ow is branch-free, reads the input at a constant
// stride and vectorises, with the tap's weight a scalar. Each output sums the same taps in the
// same order (cg, outer taps, kw) as the pixel-per-thread form. Then the bias, the epilogue and
// the group's stores, vectorised over the row.
kir::Kernel directConvRows(const KernelGroup &g, const std::string &name, const Knobs &knobs) {
  const Node &n = *g.anchor;
  std::map<const Value *, kir::BufferP> byValue;
  kir::Kernel k = directConvKernel(g, name, byValue);
  GroupExpr gx(g, byValue);
  const Value *x = n.operand(0), *w = n.operand(1);
  ConvGeom geo = convGeom(n);
  bool hasBias = convHasBias(n);
  size_t S = geo.S;
  int64_t Cg = geo.C / geo.G, Mg = geo.M / geo.G;
  int64_t OW = geo.O[S - 1], IW = geo.I[S - 1], KW = geo.Kd[S - 1], sw = geo.strides[S - 1],
          pw = geo.pads[S - 1], dw = geo.dil[S - 1];
  std::vector<int64_t> outer(geo.O.begin(), geo.O.end() - 1);
  int64_t rows = product(outer);
  int64_t R = std::clamp<int64_t>(knobs.get("rows", 1), 1, rows);
  k.threads = 1;
  k.knobs = {{"rows", R}};
  auto problem = std::make_shared<DirectConvProblem>();
  problem->pixels = product(geo.O);
  problem->taps = Cg * product(geo.Kd);
  problem->width = OW;
  problem->kernelTaps = product(geo.Kd);
  problem->stride = sw;
  problem->inputRows = product(geo.I) / IW;
  problem->inputWidth = IW;
  if (S == 2 && geo.strides[0] == geo.strides[1]) { // what the plane form would take
    PhasePlanes pg = planeGeom(geo);
    problem->planeLegal = true;
    problem->plane = pg.F;
    problem->padded = pg.phase;
  }
  k.problem = problem;
  k.grid = {{"n", geo.N}, {"oc", geo.M}, {"rb", ceilDiv(rows, R)}};
  auto acc = std::make_shared<kir::Buffer>(
      kir::Buffer{"acc", DType::F32, {OW}, kir::Scope::Shared, kir::Role::Temp, {}});
  k.allocs = {acc};
  k.body.push_back(kir::comment(cat("conv ", x->type().str(), " * ", w->type().str(), ", group ",
                                    geo.G, ": direct, one output row of ", OW,
                                    " pixels at a time, ", R, " rows per block")));
  E zero(int64_t(0)), nIdx = ivar("n"), oc = ivar("oc"), ow = ivar("ow");
  E grp = Mg == 1 ? oc : oc / E(Mg);
  E ic = grp * E(Cg) + ivar("cg");
  auto vecLoop = [](std::pair<int64_t, int64_t> r, std::vector<StmtP> body) {
    return vectorLoop("ow", E(r.first), E(r.second), std::move(body));
  };
  E row = ivar("rb") * E(R) + ivar("r");
  Index o = unflatIndex(outer, ivar("row"));
  std::vector<StmtP> body = {kir::decl("row", DType::I64, row)};
  body.push_back(vecLoop({0, OW}, {kir::store(acc, {ow}, f32(0.0))}));
  // The taps of the last dim, each over its range.
  Index xin, kOuter;
  for (size_t d = 0; d + 1 < S; ++d) {
    xin.push_back(ivar(cat("pi", d)));
    kOuter.push_back(ivar(cat("k", d)));
  }
  std::vector<StmtP> taps;
  for (int64_t kw = 0; kw < KW; ++kw) {
    auto r = insideRange(OW, sw, kw * dw - pw, IW);
    if (r.second <= r.first)
      continue;
    std::string wn = cat("w", kw);
    taps.push_back(kir::decl(wn, DType::F32,
                             asF32(gx.at(w, concat(concat({oc, ivar("cg")}, kOuter), {E(kw)})))));
    E xv = asF32(gx.at(x, concat(concat({nIdx, ic}, xin), {ow * E(sw) + E(kw * dw - pw)})));
    taps.push_back(vecLoop(r, {kir::store(acc, {ow}, kir::load(acc, {ow}) + xv * fvar(wn))}));
  }
  // The outer taps (k_0 outermost), the input-row check hoisted out of ow; channels outside.
  std::vector<StmtP> loops = taps;
  for (size_t d = S - 1; d-- > 0;) {
    std::string pi = cat("pi", d);
    E c = ivar(pi);
    std::vector<StmtP> level = {
        kir::decl(pi, DType::I64,
                  o[d] * E(geo.strides[d]) - E(geo.pads[d]) + kOuter[d] * E(geo.dil[d])),
        kir::ifThen((c >= zero) && (c < E(geo.I[d])), loops)};
    loops = {kir::forLoop(cat("k", d), zero, E(geo.Kd[d]), level)};
  }
  body.push_back(kir::forLoop("cg", zero, E(Cg), loops));
  // The bias, the epilogue and the stores over the row.
  body.push_back(vecLoop({0, OW}, convOutputStores(g, gx, n, hasBias, kir::load(acc, {ow}),
                                                   concat(concat({nIdx, oc}, o), {ow}))));
  std::vector<StmtP> rowLoop = {kir::forLoop("r", zero, E(R), body)};
  if (rows % R != 0)
    rowLoop = {kir::forLoop("r", zero, E(R), {kir::ifThen(row < E(rows), body)})};
  k.body.push_back(kir::region(k.threadVar, rowLoop));
  return k;
}

} // namespace

bool directBlockedConv(const Node &n) {
  if (n.op() != Op::BlockedConv)
    return false;
  const auto &ks = n.ints("kernel_shape");
  return n.i("depthwise") != 0 ||
         (n.i("blocked_input") == 0 &&
          n.operand(0)->type().shape[1] * ks[0] * ks[1] <= kMaxDirectBlockedTaps);
}

namespace {

// A depthwise blocked_conv on the host (ir/ops.def; passes/block_channels.cpp): block (n, cb,
// rows of R output rows); each output pixel is one 16-lane vector summing its window's taps,
// unrolled, 8 pixels of a row at a time where the row's range is that wide. A dense one on a plain
// input with few taps (kMaxDirectBlockedTaps: a grayscale image's 3 x 3 first conv) has the same
// form over (c, kh, kw), each tap an input scalar broadcast against 16 output channels' weights.
// The taps inside the input depend on the pixel only near the borders, so the rows and the columns
// split into ranges with one tap set each (tapRanges), and every range is a branch-free loop whose
// lane loop is one vector of FMAs (the tap weights are loop-invariant vectors, hoisted).
kir::Kernel directConvBlocked(const KernelGroup &g, const std::string &name, const Knobs &knobs) {
  const Node &n = *g.anchor;
  std::map<const Value *, kir::BufferP> byValue;
  kir::Kernel k = directConvKernel(g, name, byValue);
  GroupExpr gx(g, byValue);
  const Value *x = n.operand(0), *w = n.operand(1), *result = n.result();
  bool hasBias = convHasBias(n);
  const auto &xs = x->type().shape, &os = result->type().shape;
  const auto &ks = n.ints("kernel_shape"), &st = n.ints("strides"), &pd = n.ints("pads"),
             &dl = n.ints("dilations");
  int64_t H = xs[2], W = xs[3], OH = os[2], OW = os[3], KH = ks[0], KW = ks[1];
  bool depthwise = n.i("depthwise") != 0;
  int64_t C = depthwise ? 1 : xs[1]; // input channels per output channel
  int64_t R = std::clamp<int64_t>(knobs.get("rows", 1), 1, OH);
  k.threads = 1;
  k.knobs = {{"rows", R}};
  auto problem = std::make_shared<DirectConvProblem>();
  problem->pixels = OH * OW;
  problem->taps = C * KH * KW;
  problem->width = OW;
  problem->kernelTaps = KH * KW;
  problem->stride = st[1];
  problem->inputRows = H;
  problem->inputWidth = W;
  problem->blocked = true;
  k.problem = problem;
  k.grid = {{"n", xs[0]}, {"cb", os[1]}, {"rb", ceilDiv(OH, R)}};
  k.body.push_back(kir::comment(cat(depthwise ? "depthwise conv " : "conv ", x->type().str(), " * ",
                                    w->type().str(), ": one 16-lane vector per pixel",
                                    depthwise ? ", 8 pixels a step" : "", ", ", C * KH * KW,
                                    " taps unrolled; ", R, " rows per block")));
  E zero(int64_t(0)), nIdx = ivar("n"), cb = ivar("cb"), oh = ivar("oh"), ow = ivar("ow"),
                      l = ivar("l");
  E r0 = ivar("rb") * E(R);
  // A dense form sums its taps in 4 interleaved partial sums (tap t into sum t % 4), so the
  // FMA latency (4 cycles) does not serialise a pixel's C x KH x KW taps: the bundled cnn's
  // 3 x 3 x 3 conv 30 -> 25 us (whole model 48.0 -> 43.9 us). A depthwise pixel has few taps
  // and keeps one sum, in the order the other direct forms fold them.
  int64_t chains = depthwise ? 1 : std::max<int64_t>(1, std::min<int64_t>(4, C * KH * KW / 4));
  // Tap (c, kh, kw)'s product at output column `owE`.
  auto term = [&](int64_t c, int64_t kh, int64_t kw, E owE) {
    E ih = oh * E(st[0]) + E(kh * dl[0] - pd[0]), iw = owE * E(st[1]) + E(kw * dl[1] - pd[1]);
    return depthwise
               ? asF32(gx.at(x, {nIdx, cb, ih, iw, l})) * asF32(gx.at(w, {cb, E(kh), E(kw), l}))
               : asF32(gx.at(x, {nIdx, E(c), ih, iw})) *
                     asF32(gx.at(w, {E((c * KH + kh) * KW + kw), cb * E(int64_t(16)) + l}));
  };
  // The bias, the epilogue and the stores of the pixel at column `owE` whose sum is `acc`
  // (its scalars named y<tag>, e<tag>...).
  auto finish = [&](E acc, E owE, const std::string &tag) {
    if (hasBias)
      acc = acc + asF32(gx.at(n.operand(2), {cb * E(int64_t(16)) + l}));
    std::string cur = "y" + tag;
    std::vector<StmtP> fin = {kir::decl(cur, DType::F32, acc)};
    Contraction c;
    c.outShape = os;
    splitEpilogue(n, hasBias ? 3 : 2, gx, false, c);
    Index out = {nIdx, cb, oh, owE, l};
    auto steps = applySteps(c, gx, out, cur, tag == "0" ? "e" : cat("e", tag, "_"));
    fin.insert(fin.end(), steps.begin(), steps.end());
    auto stores = storeGroupOutputs(g, gx, result, fvar(cur), out);
    fin.insert(fin.end(), stores.begin(), stores.end());
    return fin;
  };
  auto pixel = [&](const TapRange &rows, const TapRange &cols) {
    std::vector<E> part(static_cast<size_t>(chains));
    int64_t t = 0;
    for (int64_t c = 0; c < C; ++c)
      for (int64_t kh : rows.taps)
        for (int64_t kw : cols.taps) {
          E &p = part[static_cast<size_t>(t++ % chains)];
          p = p ? p + term(c, kh, kw, ow) : f32(0.0) + term(c, kh, kw, ow);
        }
    E acc;
    for (E &p : part)
      if (p)
        acc = acc ? acc + p : p;
    return finish(acc ? acc : f32(0.0), ow, "0");
  };
  // A depthwise conv runs kDepthwisePixels pixels of a row per step, their sums interleaved
  // tap by tap (interleavedPixelSums, recipe_support.h).
  auto pixels = [&](const TapRange &rows, const TapRange &cols) {
    std::vector<E> owp;
    for (int64_t p = 0; p < kDepthwisePixels; ++p)
      owp.push_back(E(cols.lo) + ivar("owb") * E(kDepthwisePixels) + E(p));
    const auto nw = static_cast<int64_t>(cols.taps.size());
    return interleavedPixelSums(
        "s", static_cast<int64_t>(rows.taps.size()) * nw,
        [&](int64_t t, int64_t p) {
          return term(0, rows.taps[static_cast<size_t>(t / nw)],
                      cols.taps[static_cast<size_t>(t % nw)], owp[static_cast<size_t>(p)]);
        },
        [&](E sum, int64_t p) { return finish(sum, owp[static_cast<size_t>(p)], cat(p + 1)); });
  };
  std::vector<StmtP> body = tapRangeWalk(tapRanges(OH, KH, st[0], dl[0], pd[0], H),
                                         tapRanges(OW, KW, st[1], dl[1], pd[1], W), r0, R, pixel,
                                         depthwise ? kDepthwisePixels : 1, pixels);
  k.body.push_back(kir::region(k.threadVar, body));
  return k;
}

// Direct 2-D conv on the host over a zero-padded copy of each input plane, for narrow rows
// (where the row form's loops are mostly scalar remainders): block (n, oc) copies plane ic into
// stride x stride phase planes (planeGeom; one plane at stride 1) with the pads as zeros, and
// accumulates the output on a grid as wide as a phase plane: output (oh, ow) sits at
// f = oh Wq + ow, and tap (kh, kw) reads phase ((kh dh) % s, (kw dw) % s) at f + ((kh dh) / s)
// Wq + (kw dw) / s for every f at once: one long, unit-stride, branch-free vector loop per tap
// (the grid columns ow >= OW are computed and dropped; the copy is the only strided access).
// Same stride on both axes. Each output sums the taps in the same order as the other forms;
// taps over the padding add x = 0 (so an infinite weight next to the border would give NaN
// where the other forms skip the tap).
kir::Kernel directConvPlane(const KernelGroup &g, const std::string &name) {
  const Node &n = *g.anchor;
  std::map<const Value *, kir::BufferP> byValue;
  kir::Kernel k = directConvKernel(g, name, byValue);
  GroupExpr gx(g, byValue);
  const Value *x = n.operand(0), *w = n.operand(1);
  ConvGeom geo = convGeom(n);
  AICF_CHECK(geo.S == 2 && geo.strides[0] == geo.strides[1], "direct_conv plane form needs a 2-D ",
             "conv with equal strides (", n.where(), ")");
  bool hasBias = convHasBias(n);
  int64_t Cg = geo.C / geo.G, Mg = geo.M / geo.G;
  int64_t IH = geo.I[0], IW = geo.I[1], OH = geo.O[0], OW = geo.O[1], KH = geo.Kd[0],
          KW = geo.Kd[1], dh = geo.dil[0], dw = geo.dil[1], pt = geo.pads[0], pl = geo.pads[1];
  PhasePlanes pg = planeGeom(geo);
  int64_t st = pg.st, Wq = pg.Wq, F = pg.F, phase = pg.phase;
  k.threads = 1;
  k.knobs = {{"plane", 1}};
  auto problem = std::make_shared<DirectConvProblem>();
  problem->pixels = OH * OW;
  problem->taps = Cg * KH * KW;
  problem->width = OW;
  problem->plane = F;
  problem->padded = phase;
  problem->planeLegal = true;
  problem->kernelTaps = KH * KW;
  problem->stride = st;
  problem->inputRows = IH;
  problem->inputWidth = IW;
  k.problem = problem;
  k.grid = {{"n", geo.N}, {"oc", geo.M}};
  auto xp = std::make_shared<kir::Buffer>(
      kir::Buffer{"xp", DType::F32, {st * st * phase}, kir::Scope::Shared, kir::Role::Temp, {}});
  auto acc = std::make_shared<kir::Buffer>(
      kir::Buffer{"acc", DType::F32, {F}, kir::Scope::Shared, kir::Role::Temp, {}});
  k.allocs = {xp, acc};
  k.body.push_back(kir::comment(
      cat("conv ", x->type().str(), " * ", w->type().str(), ", group ", geo.G, ": direct over ",
          st == 1 ? "a padded" : cat(st * st, " phase planes of the padded"), " plane (", pg.Hq,
          "x", Wq, st == 1 ? "" : " each", "), outputs on a ", OH, "x", Wq, " grid")));
  E zero(int64_t(0)), nIdx = ivar("n"), oc = ivar("oc"), f = ivar("f");
  E grp = Mg == 1 ? oc : oc / E(Mg);
  E ic = grp * E(Cg) + ivar("cg");
  std::vector<StmtP> body = {vectorLoop("f", zero, E(F), {kir::store(acc, {f}, f32(0.0))})};
  // Per input channel: the phase planes, then one loop over the grid per tap.
  std::vector<StmtP> chan = fillPhasePlanes(xp, pg, IH, IW, pt, pl, f32(0.0), [&](E ih, E iw) {
    return asF32(gx.at(x, {nIdx, ic, ih, iw}));
  });
  for (int64_t kh = 0; kh < KH; ++kh)
    for (int64_t kw = 0; kw < KW; ++kw) {
      std::string wn = cat("w", kh, "_", kw);
      chan.push_back(kir::decl(wn, DType::F32, asF32(gx.at(w, {oc, ivar("cg"), E(kh), E(kw)}))));
      E xv = kir::load(xp, {f + E(pg.tap(kh * dh, kw * dw))});
      chan.push_back(
          vectorLoop("f", zero, E(F), {kir::store(acc, {f}, kir::load(acc, {f}) + xv * fvar(wn))}));
    }
  body.push_back(kir::forLoop("cg", zero, E(Cg), chan));
  // The bias, the epilogue and the stores, row by row.
  E oh = ivar("oh"), ow = ivar("ow");
  body.push_back(kir::forLoop(
      "oh", zero, E(OH),
      {vectorLoop("ow", zero, E(OW),
                  convOutputStores(g, gx, n, hasBias, kir::load(acc, {oh * E(Wq) + ow}),
                                   {nIdx, oc, oh, ow}))}));
  k.body.push_back(kir::region(k.threadVar, body));
  return k;
}

} // namespace

kir::Kernel recipeDirectConv(const KernelGroup &g, const std::string &name, const Knobs &knobs) {
  AICF_CHECK(g.anchor != nullptr &&
                 (g.anchor->op() == Op::Conv || g.anchor->op() == Op::ConvTranspose ||
                  g.anchor->op() == Op::BlockedConv),
             "direct_conv needs a conv anchor (group ", g.id, ")");
  const Node &n = *g.anchor;
  if (n.op() == Op::BlockedConv)
    return directConvBlocked(g, name, knobs);
  bool transpose = n.op() == Op::ConvTranspose;
  if (!transpose && !isGpuPlan(knobs)) {
    // The plane form where it applies (2-D, equal strides); the row form otherwise.
    const auto &st = n.ints("strides");
    bool planeLegal = st.size() == 2 && st[0] == st[1];
    return knobs.get("plane", 0) != 0 && planeLegal ? directConvPlane(g, name)
                                                    : directConvRows(g, name, knobs);
  }
  std::map<const Value *, kir::BufferP> byValue;
  kir::Kernel k = startKernel(g, name, "direct_conv", byValue);
  GroupExpr gx(g, byValue);
  const Value *x = n.operand(0), *w = n.operand(1), *result = n.result();
  requireShapePreservingEpilogue(g, result);
  ConvGeom geo = convGeom(n);
  size_t extras = transpose ? 0 : static_cast<size_t>(epilogueOperandCount(n.strs("epilogue")));
  bool hasBias = n.numOperands() == 3 + extras;
  int64_t P = product(geo.O);
  int64_t Cg = geo.C / geo.G, Mg = geo.M / geo.G;

  bool gpu = isGpuPlan(knobs);
  int64_t threads = std::max<int64_t>(
      1, knobs.get("threads", gpu ? std::clamp<int64_t>(nextPow2(P), 32, 256) : 1));
  k.threads = threads;
  k.knobs = {{"threads", threads}};
  auto problem = std::make_shared<DirectConvProblem>();
  problem->pixels = P;
  problem->taps = Cg * product(geo.Kd);
  k.problem = problem;
  k.grid = {{"n", geo.N}, {"oc", geo.M}};
  const std::string &t = k.threadVar;
  E nIdx = ivar("n"), oc = ivar("oc"), p = ivar("p");
  E grp = Mg == 1 ? oc : oc / E(Mg);
  k.body.push_back(kir::comment(cat(transpose ? "conv_transpose" : "conv", " ", x->type().str(),
                                    " * ", w->type().str(), ", group ", geo.G,
                                    ": direct, one output channel per block, threads over ", P,
                                    " output pixels")));

  Index o = unflat(geo.O, p);
  // Innermost: the tap's input position and its validity, then acc += x * w.
  Index kk, in;
  std::vector<E> conds;
  for (size_t d = 0; d < geo.S; ++d)
    kk.push_back(ivar(cat("k", d)));
  E ic = grp * E(Cg) + ivar("cg");
  E wv;
  if (!transpose) {
    for (size_t d = 0; d < geo.S; ++d) {
      E pos = o[d] * E(geo.strides[d]) - E(geo.pads[d]) + kk[d] * E(geo.dil[d]);
      in.push_back(pos);
      conds.push_back(pos >= E(int64_t(0)));
      conds.push_back(pos < E(geo.I[d]));
    }
    wv = asF32(gx.at(w, concat({oc, ivar("cg")}, kk)));
  } else {
    // o = i s - pad + k dil  =>  i = (o + pad - k dil) / s when divisible and inside.
    for (size_t d = 0; d < geo.S; ++d) {
      E num = o[d] + E(geo.pads[d]) - kk[d] * E(geo.dil[d]);
      conds.push_back(num >= E(int64_t(0)));
      if (geo.strides[d] != 1)
        conds.push_back(num % E(geo.strides[d]) == E(int64_t(0)));
      conds.push_back(num / E(geo.strides[d]) < E(geo.I[d]));
      in.push_back(num / E(geo.strides[d]));
    }
    E m = Mg == 1 ? E(int64_t(0)) : oc % E(Mg);
    wv = asF32(gx.at(w, concat({ic, m}, kk)));
  }
  StmtP tap =
      kir::ifThen(allOf(conds),
                  {kir::assign("acc", fvar("acc") + asF32(gx.at(x, concat({nIdx, ic}, in))) * wv)});
  StmtP loops = tap;
  for (size_t d = geo.S; d-- > 0;)
    loops = kir::forLoop(cat("k", d), E(int64_t(0)), E(geo.Kd[d]), {loops});
  loops = kir::forLoop("cg", E(int64_t(0)), E(Cg), {loops});

  Index out = concat({nIdx, oc}, o);
  std::vector<StmtP> pix = {kir::decl("acc", DType::F32, f32(0.0)), loops};
  E accv = fvar("acc");
  if (hasBias)
    accv = accv + asF32(gx.at(n.operand(2), {oc}));
  pix.push_back(kir::decl("y0", DType::F32, accv));
  std::string cur = "y0";
  if (!transpose) {
    Contraction c;
    c.outShape = result->type().shape;
    splitEpilogue(n, hasBias ? 3 : 2, gx, false, c);
    auto steps = applySteps(c, gx, out, cur);
    pix.insert(pix.end(), steps.begin(), steps.end());
  }
  auto stores = storeGroupOutputs(g, gx, result, fvar(cur), out);
  pix.insert(pix.end(), stores.begin(), stores.end());
  k.body.push_back(kir::region(t, {kir::forLoop("p", ivar(t), E(P) - ivar(t), pix, threads)}));
  return k;
}

namespace {

class DirectConvRecipe final : public Recipe {
public:
  const char *name() const override { return "direct_conv"; }
  bool lowers(const Node *a) const override {
    return a && (a->op() == Op::Conv || a->op() == Op::ConvTranspose || directBlockedConv(*a));
  }
  kir::Kernel build(const KernelGroup &g, const std::string &n, const Knobs &k) const override {
    return labelled(recipeDirectConv(g, n, k), name());
  }
  KnobSet canonicalKnobs(const KnobSet &k) const override {
    return knobsToMap(knobsFromMap<DirectConvKnobs>(k));
  }
  std::vector<KnobSet> candidates(const kir::Kernel &d, const Hardware &hw) const override {
    const auto &p = problemOf<DirectConvProblem>(d);
    std::vector<KnobSet> out;
    if (p.width > 0) { // host: output rows per block, or the padded-plane form
      int64_t rows = p.pixels / p.width;
      for (int64_t r : {1, 4, 16})
        if (r == 1 || r / 2 < rows)
          out.push_back(knobsToMap(DirectConvKnobs{std::nullopt, r, std::nullopt}));
      // The plane form streams its two planes once per tap: they must stay in L1 (measured:
      // 112 x 112 planes, ~100 KiB, run at ~6 cycles per vector, slower than the row form).
      if (p.planeLegal && (p.plane + p.padded) * 4 <= hw.l1dBytes) // a phase plane + the grid
        out.push_back(knobsToMap(DirectConvKnobs{std::nullopt, std::nullopt, 1}));
      return out;
    }
    for (int64_t t : hw.gpu ? std::vector<int64_t>{32, 64, 128, 256} : std::vector<int64_t>{1, 4})
      if (t == (hw.gpu ? 32 : 1) || t / 2 < p.pixels)
        out.push_back(knobsToMap(DirectConvKnobs{t, std::nullopt, std::nullopt}));
    return out;
  }
  // Pixel per thread (GPU, conv_transpose): each thread sums its pixels' taps serially. Host row
  // form: per block, rows x taps vector loops over the row (a strided input load and an FMA per
  // vector, ~1.5 cycles) plus ~40 cycles per tap loop of set-up, trip-count remainders and the
  // scalar weight load.
  CostShape costShape(const KernelGroup &g, const kir::Kernel &k, const Hardware &hw,
                      int64_t flops) const override {
    CostShape s;
    s.flops = double(flops);
    int64_t lanes = std::max<int64_t>(1, hw.gpu ? 1 : hw.vectorLanesF32());
    int64_t threads = std::max<int64_t>(1, k.threads);
    const DirectConvProblem &p = problemOf<DirectConvProblem>(k);
    if (p.blocked) {
      // Per pixel one 16-lane vector: an FMA and an input load per tap, ~2 cycles for a
      // depthwise conv (one chain of FMAs; the weights stay in registers), ~1.3 for a dense
      // one (4 interleaved sums), ~11 cycles of loop, bias and store, and the epilogue's steps
      // (an exponential and a division for sigmoid / silu / gelu / tanh / elu: ~28). Fitted on
      // MobileNet-V2 (3 x 3 depthwise with relu6: ~31 cycles a pixel), EfficientNet-B0
      // (depthwise with silu: ~53) and the bundled cnn (its 27-tap first conv: ~45), in cycles
      // of the clock the core really runs (bench-costmodel's calibration; first fitted
      // against the VM's nominal 2.6 GHz, 1.4x fewer). The taps are all of the work: the FLOP
      // term would count them twice.
      double epilogue = 0;
      for (const EpilogueStep &st : epilogueSteps(*g.anchor)) {
        bool transcendental = st.op == Op::Sigmoid || st.op == Op::Silu || st.op == Op::Gelu ||
                              st.op == Op::Tanh || st.op == Op::Elu;
        epilogue += transcendental ? 28.0 : 1.4;
      }
      // A fused prologue is evaluated at every tap (its cycles per vector, recipe_support.h).
      double prologue = recipe::prologueCycles(g) * double(p.taps);
      s.flops = 0;
      s.vectorShare = 0.5;
      s.scalarCycles =
          double(knobOf(k, &DirectConvKnobs::rows, 1)) * double(p.width) *
          ((p.taps > p.kernelTaps ? 1.3 : 2.0) * double(p.taps) + 11.0 + epilogue + prologue);
      return s;
    }
    if (p.width > 0 && !hw.gpu) {
      s.vectorShare = 0.5;
      // A vector loop of len elements: ~12 cycles of set-up, ~1.5 per full vector, and the
      // remainder scalar, ~1 cycle per element (measured on EfficientNet-B0's depthwise convs:
      // 28-wide rows ~21 cycles per tap, 14-wide ~7.5).
      // A strided input load is a gather: ~4 cycles per vector.
      double perVector = p.stride > 1 ? 4.0 : 1.5;
      auto loop = [lanes, perVector](int64_t len) { return hostLoopCycles(len, lanes, perVector); };
      if (knobOf(k, &DirectConvKnobs::plane) != 0) {
        // Per block and input channel: zero the phase planes, copy the plane in (strided
        // loads at stride > 1), then one unit-stride loop over the grid per tap.
        int64_t cg = std::max<int64_t>(1, p.taps / std::max<int64_t>(1, p.kernelTaps));
        auto unit = [lanes](int64_t len) { return hostLoopCycles(len, lanes, 1.5); };
        double perChannel = 1.5 * double(ceilDiv(p.padded * p.stride * p.stride, lanes)) +
                            double(p.inputRows * p.stride) * loop(p.inputWidth / p.stride) +
                            double(p.kernelTaps) * unit(p.plane);
        // A fused prologue is evaluated once per input element, as the plane is copied in.
        perChannel +=
            recipe::prologueCycles(g) * double(p.inputRows) * double(ceilDiv(p.inputWidth, lanes));
        s.scalarCycles = double(cg) * perChannel + double(p.pixels / p.width) * unit(p.width);
        return s;
      }
      // Row form: a fused prologue is evaluated at every tap of every vector.
      int64_t R = knobOf(k, &DirectConvKnobs::rows, 1);
      s.scalarCycles =
          double(R) * double(p.taps) *
          (loop(p.width) + recipe::prologueCycles(g) * double(ceilDiv(p.width, lanes)));
      return s;
    }
    s.vectorShare = hw.gpu ? 0.3 : 1.0 / double(lanes);
    s.chainSteps = double(p.taps) * double(ceilDiv(p.pixels, threads));
    s.chainCycles = 4;
    return s;
  }
  int64_t registers(const kir::Kernel &) const override { return 28; }
};

} // namespace

const Recipe &directConvRecipe() {
  static const DirectConvRecipe recipe;
  return recipe;
}

} // namespace aicf
