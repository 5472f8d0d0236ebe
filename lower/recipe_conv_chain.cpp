// The conv_chain recipe (issue 18; lower/fusion.h rule 10): an inverted residual -- 1 x 1
// expand -> k x k depthwise -> 1 x 1 project on the channel-blocked layout, as MobileNet and
// EfficientNet build them -- in one host kernel whose expanded rows never reach memory.
//
//   grid (n, rb: bands of R output rows)  one thread per block
//   ring [RR, CBh, Wp, 16]: the last RR = (G - 1) s + span expanded input rows, each in slot
//     row % RR, zero-padded left and right
//   for y0 in [band) step G:                              -- G output rows per step
//     the step's new input rows [lo, hi): s per output row (the whole window at the band's
//     first step); those inside the image, [ia, ib), expanded at once by
//     reduce k0: mma_tile(C1 = x[n, :, ia..ib, :, :] x W1) -- bias in its init, the activation
//     and the store into the rows' ring slots on its registers; the others zeros (without an
//     expand conv, a block of expansion 1, the input rows are copied in)
//     hs[G OW, Hp] = dw(ring) (+ bias, activation)        -- the projection's A rows
//     reduce k0 over Hp step BK: mma_tile(C2 += hs x W2)  -- bias / residual in its init,
//     out[n, q, y, x, l] = epilogue(C2)                      the epilogue on its registers
//
// Why: the expanded tensor is the largest in the block (6x the block's input for MobileNet-V2)
// and, unfused, is written by the expansion, read and written again by the depthwise conv and
// read by the projection. Here each expanded row is computed once per band (the ring keeps the
// KH rows a depthwise window spans, so consecutive output rows share them and no row is
// recomputed except the window's first rows at each band start) and stays in L1 / L2; the
// depthwise rows go straight into the projection's A. tile_compatible_compute
// holds for each product; the depthwise conv is an exact per-pixel window sum over the ring.
//
// Exactness: every expanded value is the expansion's sum in the plain kernel's K order (one
// micro-kernel pass); every depthwise output sums its taps in the direct kernel's order; the
// projection sums over K steps of BK as the plain tiled kernel does.
//
// Knobs: rows (R, output rows per block), G (output rows per projection step), BK (the
// projection's k step, a multiple of 16).
#include "lower/contraction.h"
#include "lower/recipe_support.h"
#include "lower/recipes.h"

#include "ir/epilogue.h"
#include "ir/graph.h"
#include "ir/op_registry.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <set>

namespace aicf {

using namespace recipe;
using namespace contraction;

namespace {

constexpr int64_t kLanes = 16;

bool hasBiasOperand(const Node &n) {
  return n.numOperands() == 3 + static_cast<size_t>(epilogueOperandCount(n.strs("epilogue")));
}

// The chain of a conv_chain group: the optional expansion, the depthwise conv, the projection.
struct Chain {
  const Node *expand = nullptr, *dw = nullptr, *project = nullptr;
};

Chain chainOf(const KernelGroup &g) {
  Chain c;
  c.project = g.anchor;
  for (const Node *m : g.chained) {
    if (m->op() == Op::BlockedConv && m->i("depthwise") != 0)
      c.dw = m;
    else
      c.expand = m;
  }
  AICF_CHECK(c.project && c.dw && c.project->op() == Op::BlockedConv, "conv_chain: group ", g.id,
             " is not an expand -> depthwise -> project chain");
  return c;
}

// A 16-lane walk of an accumulator tile C [1, rows, cols] (i, jo, jl with j = jo 16 + jl), the
// form FuseMmaTileEpilogue moves onto the micro-kernel's registers.
StmtP overLanes(const std::string &t, int64_t rows, int64_t cols, std::vector<StmtP> body,
                E guard = E()) {
  std::vector<StmtP> lane = {kir::decl("j", DType::I64, ivar("jo") * E(kLanes) + ivar("jl"))};
  if (guard)
    lane.push_back(kir::ifThen(guard, body));
  else
    lane.insert(lane.end(), body.begin(), body.end());
  E zero(int64_t(0));
  return kir::region(
      t, {kir::forLoop("i", zero, E(rows),
                       {kir::forLoop("jo", zero, E(cols / kLanes),
                                     {kir::forLoop("jl", zero, E(kLanes), lane, 1,
                                                   kir::Stmt::LoopKind::Vectorized)})})});
}

// B of a 1 x 1 blocked conv read in place: its packed panels, else its rows.
struct WeightView {
  std::optional<PanelView> panel;
  std::optional<RowView> row;
};
WeightView weightView(const Contraction &c, const Index &bi, const Node &n) {
  WeightView v;
  v.panel = bPanelView(c, bi);
  if (!v.panel)
    v.row = bRowView(c, bi);
  if (!v.panel && !v.row)
    throw InternalError(
        cat("conv_chain: ", n.name(), "'s weight cannot be read in place (", n.where(), ")"));
  return v;
}
void intoViews(kir::MmaViews &v, const WeightView &w, E k0, int64_t N) {
  if (w.panel) {
    v.bOffset = w.panel->base + k0 * E(w.panel->panel);
    v.ldb = 0;
    v.bPanel = w.panel->panel;
    v.bPanelStride = w.panel->stride;
    v.aShift = w.panel->aShift;
    // bf16 pairs on AMX tiles wherever the -march has them (not priced against vdpbf16ps here:
    // only tiled_contraction's `tiles` knob is).
    v.bTiles = w.panel->group == 2;
  } else {
    v.bOffset = w.row->base + k0 * E(w.row->ld);
    v.ldb = w.row->ld;
  }
  v.cols = E(N);
}
const kir::BufferP &viewBuf(const WeightView &w) {
  return w.panel ? w.panel->buf : w.row->buf;
}

// The reduction of one 1 x 1 product C [1, rows, N] += A x B over K in steps of BK, then the
// conv's additive terms (a self-update FuseReductionEpilogue moves into the init) and `fin`
// (its remaining epilogue and stores), each walking the tile 16 lanes at a time.
std::vector<StmtP> pointwiseProduct(const std::string &t, const kir::BufferP &C,
                                    const kir::BufferP &A, const WeightView &w,
                                    const kir::MmaViews &aView, int64_t rows, E validRows,
                                    int64_t N, int64_t K, int64_t BK, const Contraction &c,
                                    const Index &out, std::vector<StmtP> fin, E guard) {
  E tv = ivar(t), i = ivar("i"), j = ivar("j"), k0 = ivar("k0");
  std::vector<StmtP> init = {overLanes(t, rows, N, {kir::store(C, {tv, i, j}, f32(0.0))})};
  kir::MmaViews v = aView;
  v.aOffset = v.aOffset + (v.aBlocks.empty() ? k0 : E(int64_t(0)));
  if (!v.aBlocks.empty())
    v.firstBlock = k0 / E(kLanes);
  intoViews(v, w, k0, N);
  v.rows = validRows;
  v.depth = K % BK ? kir::min(E(BK), E(K) - k0) : E(BK);
  std::vector<StmtP> body = {
      kir::reduce("k0", E(int64_t(0)), E(K), init,
                  {kir::mmaTileViews(C, A, viewBuf(w), rows, N, BK, rows, N, v)}, BK)};
  if (!c.addTerms.empty()) {
    E gsum;
    for (const auto &term : c.addTerms)
      gsum = gsum ? gsum + term(out) : term(out);
    body.push_back(
        overLanes(t, rows, N, {kir::store(C, {tv, i, j}, kir::load(C, {tv, i, j}) + gsum)}, guard));
  }
  body.push_back(overLanes(t, rows, N, std::move(fin), guard));
  return body;
}

// The facts the planner prices the chain by (ConvChainProblem).
std::shared_ptr<ConvChainProblem> chainProblem(const Chain &ch, const GroupExpr &gx, int64_t N,
                                               int64_t H, int64_t W, int64_t OH, int64_t OW,
                                               int64_t Hp, int64_t N2, int64_t taps, int64_t span,
                                               int64_t s) {
  const Node &dw = *ch.dw, &pj = *ch.project;
  auto problem = std::make_shared<ConvChainProblem>();
  problem->batch = N;
  problem->H = H;
  problem->W = W;
  problem->OH = OH;
  problem->OW = OW;
  problem->K1 = ch.expand ? ch.expand->operand(1)->type().shape[0] : 0;
  problem->Hp = Hp;
  problem->N2 = N2;
  problem->taps = taps;
  problem->span = span;
  problem->stride = s;
  // Transcendental steps of each conv's epilogue and of the group's nodes after it.
  auto transcendentals = [&](const Node *c) {
    double n = 0;
    if (!c)
      return n;
    for (const EpilogueStep &step : epilogueSteps(*c))
      n += isTranscendental(step.op) ? 1.0 : 0.0;
    for (const Node *m : gx.consumersInGroup(c->result()))
      if (m != ch.dw && m != ch.project)
        n += isTranscendental(m->op()) ? 1.0 : 0.0;
    return n;
  };
  problem->expandEpilogue = transcendentals(ch.expand);
  problem->dwEpilogue = transcendentals(&dw);
  problem->outEpilogue = transcendentals(&pj);
  return problem;
}

// A step's depthwise rows: gv output rows from y0 on, from the ring's rows (`slot`: an input
// row's ring slot) through the depthwise conv's epilogue and activations into hs, the
// projection's A (row yy OW + ox, channel cb 16 + l).
StmtP depthwiseRows(const Chain &ch, GroupExpr &gx, const std::string &t, const kir::BufferP &ring,
                    const kir::BufferP &hs, E n, E y0, E gv, const std::function<E(E)> &slot) {
  const Node &dw = *ch.dw, &pj = *ch.project;
  const auto &os = dw.result()->type().shape, &hsh = dw.operand(0)->type().shape;
  const auto &ks = dw.ints("kernel_shape"), &st = dw.ints("strides"), &pd = dw.ints("pads"),
             &dl = dw.ints("dilations");
  const int64_t CBh = hsh[1], OW = os[3], KH = ks[0], KW = ks[1], s = st[0], sw = st[1];
  E zero(int64_t(0)), l = ivar("l"), cb = ivar("cb");
  Index bi = {n};
  const Value *wd = dw.operand(1);
  bool dwBias = hasBiasOperand(dw);
  E yy = ivar("yy"), ox = ivar("ox");
  Contraction cd;
  cd.outShape = os;
  splitEpilogue(dw, dwBias ? 3 : 2, gx, false, cd);
  // Tap (kh, kw)'s product at output column oxE.
  auto term = [&](int64_t kh, int64_t kw, E oxE) {
    return kir::load(ring, {ivar(cat("s", kh)), cb, oxE * E(sw) + E(kw * dl[1]), l}) *
           asF32(gx.at(wd, {cb, E(kh), E(kw), l}));
  };
  // The bias, the epilogue, the activations and the store into hs of the pixel at column oxE
  // whose sum is `acc` (its scalars named <tag>0, <tag>1, ...).
  auto finish = [&](E acc, E oxE, const std::string &tag) {
    if (dwBias)
      acc = acc + asF32(gx.at(dw.operand(2), {cb * E(kLanes) + l}));
    std::string cur = cat(tag, 0);
    std::vector<StmtP> fin = {kir::decl(cur, DType::F32, acc)};
    auto steps = applySteps(cd, gx, {bi[0], cb, y0 + yy, oxE, l}, cur, tag);
    fin.insert(fin.end(), steps.begin(), steps.end());
    std::string dv = cur;
    gx.substitute(dw.result(), [dv](const Index &) { return fvar(dv); });
    fin.push_back(kir::store(hs, {yy * E(OW) + oxE, cb * E(kLanes) + l},
                             asF32(gx.at(pj.operand(0), {bi[0], cb, y0 + yy, oxE, l}))));
    return fin;
  };
  // kDepthwisePixels pixels of a row per step, their sums interleaved tap by tap
  // (interleavedPixelSums, recipe_support.h; the direct depthwise conv's form). The
  // single-pixel form (the remainder) is built last: the substitution it leaves is the one the
  // caller sees.
  const int64_t OWB = OW / kDepthwisePixels;
  std::vector<StmtP> perColumnBlock;
  if (OWB > 0) {
    std::vector<E> oxp;
    for (int64_t p = 0; p < kDepthwisePixels; ++p)
      oxp.push_back(ivar("oxb") * E(kDepthwisePixels) + E(p));
    auto px = interleavedPixelSums(
        "a", KH * KW,
        [&](int64_t t, int64_t p) { return term(t / KW, t % KW, oxp[static_cast<size_t>(p)]); },
        [&](E sum, int64_t p) {
          return finish(sum, oxp[static_cast<size_t>(p)], cat("d", p + 1, "_"));
        });
    perColumnBlock.push_back(
        kir::forLoop("oxb", zero, E(OWB), {vectorLoop("l", zero, E(kLanes), px)}));
  }
  E acc;
  for (int64_t kh = 0; kh < KH; ++kh)
    for (int64_t kw = 0; kw < KW; ++kw)
      acc = acc ? acc + term(kh, kw, ox) : f32(0.0) + term(kh, kw, ox);
  std::vector<StmtP> pix = finish(acc, ox, "d");
  if (OWB * kDepthwisePixels < OW)
    perColumnBlock.push_back(kir::forLoop("ox", E(OWB * kDepthwisePixels),
                                          E(OW - OWB * kDepthwisePixels),
                                          {vectorLoop("l", zero, E(kLanes), pix)}));
  std::vector<StmtP> perRow;
  for (int64_t kh = 0; kh < KH; ++kh)
    perRow.push_back(
        kir::decl(cat("s", kh), DType::I64, slot((y0 + yy) * E(s) - E(pd[0]) + E(kh * dl[0]))));
  perRow.push_back(kir::forLoop("cb", zero, E(CBh), perColumnBlock));
  return kir::region(t, {kir::forLoop("yy", zero, gv, perRow)});
}

// A step's new input rows [ia, ib) into the ring (`slot`: an input row's ring slot): the
// expansion's product of those rows with its epilogue and activations (C1 the accumulators,
// rowSlot / rowCol each tile row's ring slot and padded column), or the input rows copied.
// Appended to `stepBody`.
void newRows(const Chain &ch, GroupExpr &gx, const Knobs &knobs, const std::string &t,
             const kir::BufferP &ring, const kir::BufferP &C1, const kir::BufferP &rowSlot,
             const kir::BufferP &rowCol, E n, E ia, E ib, int64_t MR,
             const std::function<E(E)> &slot, std::vector<StmtP> &stepBody) {
  const Node &dw = *ch.dw;
  const Value *x = ch.expand ? ch.expand->operand(0) : dw.operand(0);
  const auto &xs = x->type().shape, &hsh = dw.operand(0)->type().shape;
  const int64_t W = xs[3], CBh = hsh[1], Hp = CBh * kLanes, pL = dw.ints("pads")[1];
  E tv = ivar(t), zero(int64_t(0)), l = ivar("l"), cb = ivar("cb"), wq = ivar("wq");
  Index bi = {n};
  std::vector<StmtP> inside;
  E i = ivar("i"), jo = ivar("jo"), jl = ivar("jl");
  E valid = (ib - ia) * E(W);
  if (ch.expand) {
    // Rows [ia, ib) of the input in place, as one product of (ib - ia) W pixel rows: in k
    // blocks of 16 lanes, or as plain rows (one block).
    Contraction ce = blockedConvSpec(*ch.expand, gx, true, knobs);
    // (A 1 x 1 map's single row reads in place too: its row index folds away.)
    std::optional<BlockView> av = aBlockView(ce, bi, true);
    if (!av)
      if (std::optional<RowView> rv = aRowView(ce, bi, true))
        av = BlockView{rv->buf, rv->base, rv->ld, 0};
    AICF_CHECK(av.has_value(), "conv_chain: ", ch.expand->name(), "'s input is not read in ",
               "place (", ch.expand->where(), ")");
    WeightView w1 = weightView(ce, bi, *ch.expand);
    kir::MmaViews v;
    v.aOffset = av->base + ia * E(W) * E(av->ld);
    v.lda = av->ld;
    if (av->block)
      v.aBlocks = {av->block, 0, 0, 1, 1, kLanes};
    // Each tile row's ring slot and padded column, tabled once per step: the epilogue then
    // stores without a division or modulo per 16 lanes (they cost as much as the product's
    // FMAs at a short K).
    E iy = ia + i / E(W), px = i % E(W);
    Index eout = {bi[0], jo, iy, px, jl};
    stepBody.push_back(kir::region(t, {kir::forLoop("i", zero, valid,
                                                    {kir::store(rowSlot, {i}, slot(iy)),
                                                     kir::store(rowCol, {i}, E(pL) + px)})}));
    std::vector<StmtP> fin = {kir::decl("acc", DType::F32, kir::load(C1, {tv, i, ivar("j")}))};
    std::string cur = "acc";
    auto steps = applySteps(ce, gx, eout, cur);
    fin.insert(fin.end(), steps.begin(), steps.end());
    // The expansion's activation nodes (the group's elementwise nodes up to the depthwise
    // conv's input) on the expanded value.
    std::string ev = cur;
    gx.substitute(ch.expand->result(), [ev](const Index &) { return fvar(ev); });
    fin.push_back(kir::store(ring, {kir::load(rowSlot, {i}), jo, kir::load(rowCol, {i}), jl},
                             asF32(gx.at(dw.operand(0), eout))));
    inside = pointwiseProduct(t, C1, av->buf, w1, v, MR * W, valid, Hp, ce.K, roundUp(ce.K, kLanes),
                              ce, eout, fin, MR == 1 ? E() : i < valid);
  } else {
    E iy = ivar("iy");
    inside = {kir::forLoop(
        "iy", ia, ib - ia,
        {kir::region(
            t, {kir::forLoop(
                   "cb", zero, E(CBh),
                   {kir::forLoop(
                       "wq", zero, E(W),
                       {vectorLoop("l", zero, E(kLanes),
                                   {kir::store(ring, {slot(iy), cb, E(pL) + wq, l},
                                               asF32(gx.at(x, {bi[0], cb, iy, wq, l})))})})})})})};
  }
  stepBody.push_back(kir::ifThen(ib > ia, inside));
}

} // namespace

kir::Kernel recipeConvChain(const KernelGroup &g, const std::string &name, const Knobs &knobs) {
  AICF_CHECK(g.anchor && !isGpuPlan(knobs),
             "conv_chain is a host recipe over channel-blocked convs (group ", g.id, ")");
  Chain ch = chainOf(g);
  const Node &dw = *ch.dw, &pj = *ch.project;
  std::map<const Value *, kir::BufferP> byValue;
  kir::Kernel k = startKernel(g, name, "conv_chain", byValue);
  GroupExpr gx(g, byValue);
  const Value *result = pj.result();
  requireShapePreservingEpilogue(g, result);
  const Value *x = ch.expand ? ch.expand->operand(0) : dw.operand(0);
  const auto &xs = x->type().shape, &hsh = dw.operand(0)->type().shape,
             &os = dw.result()->type().shape;
  const auto &ks = dw.ints("kernel_shape"), &st = dw.ints("strides"), &pd = dw.ints("pads"),
             &dl = dw.ints("dilations");
  const int64_t N = xs[0], H = xs[2], W = xs[3], CBh = hsh[1], Hp = CBh * kLanes;
  const int64_t OH = os[2], OW = os[3], KH = ks[0], KW = ks[1], s = st[0], sw = st[1];
  const int64_t span = (KH - 1) * dl[0] + 1;
  AICF_CHECK(s <= span && pd[0] < span && hsh[2] == H && hsh[3] == W, "conv_chain: ", dw.name(),
             " has no ring form (stride ", s, ", window ", span, ")");
  const int64_t pL = pd[1];
  const int64_t Wp = std::max(pL + W, (OW - 1) * sw + (KW - 1) * dl[1] + 1);
  const int64_t R = std::clamp<int64_t>(knobs.get("rows", OH), 1, OH);
  const int64_t G = std::clamp<int64_t>(knobs.get("G", 1), 1, R);
  const int64_t RR = span + (G - 1) * s; // ring rows: the input rows G output rows read
  const int64_t MP = G * OW;             // projection tile rows
  Index bi = {ivar("n")};
  Contraction cp = blockedConvSpec(pj, gx, true, knobs);
  const int64_t N2 = cp.N;
  const int64_t BK = std::clamp<int64_t>(roundUp(knobs.get("BK", Hp), kLanes), kLanes, Hp);
  k.threads = 1;
  k.knobs = {{"rows", R}, {"G", G}, {"BK", BK}};
  k.grid = {{"n", N}, {"rb", ceilDiv(OH, R)}};
  const std::string &t = k.threadVar;
  E tv = ivar(t), zero(int64_t(0)), l = ivar("l");

  k.problem = chainProblem(ch, gx, N, H, W, OH, OW, Hp, N2, KH * KW, span, s);

  auto ring = tempBuffer("ring", {RR, CBh, Wp, kLanes}, kir::Scope::Shared);
  auto hs = tempBuffer("hs", {MP, Hp}, kir::Scope::Shared);
  auto C2 = tempBuffer("C2", {1, MP, N2}, kir::Scope::Local);
  kir::BufferP C1, rowSlot, rowCol;
  k.allocs = {ring, hs};
  if (ch.expand) {
    int64_t rows = ((G - 1) * s + span) * W;
    C1 = tempBuffer("C1", {1, rows, Hp}, kir::Scope::Local);
    rowSlot = std::make_shared<kir::Buffer>(
        kir::Buffer{"rslot", DType::I64, {rows}, kir::Scope::Shared, kir::Role::Temp, {}});
    rowCol = std::make_shared<kir::Buffer>(
        kir::Buffer{"rcol", DType::I64, {rows}, kir::Scope::Shared, kir::Role::Temp, {}});
    k.allocs.insert(k.allocs.end(), {rowSlot, rowCol, C1});
  }
  k.allocs.push_back(C2);
  k.body.push_back(kir::comment(
      cat(ch.expand ? "1x1 expand -> " : "", KH, "x", KW, " depthwise (stride ", s,
          ") -> 1x1 project ", x->type().str(), " -> ", result->type().str(), ": ", R,
          " output rows per block, ", G, " per projection step; the last ", RR,
          " expanded rows in a ring of ", RR, " x ", CBh, " x ", Wp, " x 16, never stored")));

  // The band's output rows [y0, y1) and the slot of input row iy.
  E r0 = ivar("rb") * E(R);
  E rEnd = OH % R ? kir::min(r0 + E(R), E(OH)) : r0 + E(R);
  auto slot = [&](E iy) { return (iy + E(RR)) % E(RR); };
  E cb = ivar("cb"), wq = ivar("wq");

  // Zero the ring's pad columns once per block (the rows write only the interior).
  {
    std::vector<StmtP> pads;
    auto zeroCols = [&](int64_t from, int64_t to) {
      if (from < to)
        pads.push_back(
            kir::forLoop("wq", E(from), E(to - from),
                         {vectorLoop("l", zero, E(kLanes),
                                     {kir::store(ring, {ivar("sr"), cb, wq, l}, f32(0.0))})}));
    };
    zeroCols(0, pL);
    zeroCols(pL + W, Wp);
    if (!pads.empty())
      k.body.push_back(kir::region(
          t, {kir::forLoop("sr", zero, E(RR), {kir::forLoop("cb", zero, E(CBh), pads)})}));
  }

  // The steps of G output rows.
  std::vector<StmtP> stepBody;
  E y0 = ivar("y0");
  stepBody.push_back(kir::decl("gv", DType::I64, kir::min(E(G), rEnd - y0)));
  E gv = ivar("gv");
  // The step's new input rows [lo, hi): s per output row, and at the band's first step the
  // window's first span - s rows as well (min(..) is 0 there and span - s after). Those inside
  // the image, [ia, ib), are produced at once; the rest of the ring rows are zeros.
  const int64_t MR = (G - 1) * s + span; // the most rows one step produces
  stepBody.push_back(kir::decl(
      "lo", DType::I64, y0 * E(s) - E(pd[0]) + kir::min(E(span - s), (y0 - r0) * E(span - s))));
  stepBody.push_back(
      kir::decl("hi", DType::I64, (y0 + gv - E(int64_t(1))) * E(s) - E(pd[0]) + E(span)));
  E lo = ivar("lo"), hi = ivar("hi");
  stepBody.push_back(kir::decl("ia", DType::I64, kir::min(kir::max(lo, zero), hi)));
  E ia = ivar("ia");
  stepBody.push_back(kir::decl("ib", DType::I64, kir::max(ia, kir::min(hi, E(H)))));
  E ib = ivar("ib");
  auto zeroRows = [&](E from, E count) {
    E zr = ivar("zr");
    return kir::forLoop(
        "zr", from, count,
        {kir::region(
            t, {kir::forLoop("cb", zero, E(CBh),
                             {kir::forLoop("wq", E(pL), E(W),
                                           {vectorLoop("l", zero, E(kLanes),
                                                       {kir::store(ring, {slot(zr), cb, wq, l},
                                                                   f32(0.0))})})})})});
  };
  stepBody.push_back(zeroRows(lo, ia - lo));
  stepBody.push_back(zeroRows(ib, hi - ib));
  newRows(ch, gx, knobs, t, ring, C1, rowSlot, rowCol, bi[0], ia, ib, MR, slot, stepBody);

  // Depthwise rows into hs.
  stepBody.push_back(depthwiseRows(ch, gx, t, ring, hs, bi[0], y0, gv, slot));

  // The projection of the step's rows.
  {
    E i = ivar("i"), jo = ivar("jo"), jl = ivar("jl");
    Index out =
        G == 1 ? Index{bi[0], jo, y0, i, jl} : Index{bi[0], jo, y0 + i / E(OW), i % E(OW), jl};
    WeightView w2 = weightView(cp, bi, pj);
    kir::MmaViews v;
    v.aOffset = zero;
    v.lda = Hp;
    std::vector<StmtP> fin = {kir::decl("acc", DType::F32, kir::load(C2, {tv, i, ivar("j")}))};
    std::string cur = "acc";
    auto steps = applySteps(cp, gx, out, cur);
    fin.insert(fin.end(), steps.begin(), steps.end());
    auto stores = storeGroupOutputs(g, gx, result, fvar(cur), out);
    fin.insert(fin.end(), stores.begin(), stores.end());
    E valid = gv * E(OW);
    bool ragged = G > 1 && (R % G != 0 || OH % R != 0);
    auto body = pointwiseProduct(t, C2, hs, w2, v, MP, ragged ? valid : E(MP), N2, Hp, BK, cp, out,
                                 fin, ragged ? i < valid : E());
    stepBody.insert(stepBody.end(), body.begin(), body.end());
  }
  k.body.push_back(kir::forLoop("y0", r0, rEnd - r0, stepBody, G));
  return k;
}

namespace {

// Requires: a group holding an inverted residual (lower/fusion.h rule 10) on a host plan. No
// generic form: a chain the planner cannot fit stays three kernels. Knobs: ConvChainKnobs.
class ConvChainRecipe final : public Recipe {
public:
  const char *name() const override { return "conv_chain"; }
  bool lowers(const Node *a) const override { return a && a->op() == Op::BlockedConv; }
  bool lowersGroup(const KernelGroup &g) const override {
    return !g.chained.empty() && lowers(g.anchor);
  }
  std::optional<MemProperty> requiredProperty() const override {
    return MemProperty::TileCompatibleCompute;
  }
  kir::Kernel build(const KernelGroup &g, const std::string &n, const Knobs &k) const override {
    return labelled(recipeConvChain(g, n, k), name());
  }
  KnobSet canonicalKnobs(const KnobSet &k) const override {
    return knobsToMap(knobsFromMap<ConvChainKnobs>(k));
  }
  std::vector<KnobSet> candidates(const kir::Kernel &d, const Hardware &hw) const override {
    const ConvChainProblem &p = problemOf<ConvChainProblem>(d);
    std::vector<KnobSet> out;
    if (hw.gpu)
      return out;
    // The projection's k step: all of the hidden channels, or a share whose 32-column weight
    // panel slice fits in half of L1 beside the A rows.
    std::set<int64_t> bks = {p.Hp};
    for (int64_t parts : {2, 3, 4})
      if (int64_t bk = roundUp(ceilDiv(p.Hp, parts), 16); 4 * bk * 32 <= hw.l1dBytes / 2)
        bks.insert(bk);
    std::set<int64_t> rows;
    for (int64_t bands : {1, 2, 4, 8})
      rows.insert(ceilDiv(p.OH, std::min(bands, p.OH)));
    for (int64_t r : rows)
      for (int64_t g : std::set<int64_t>{1, 2, 4, p.OH})
        if (g == 1 || (g <= r && g * p.OW <= 64))
          for (int64_t bk : bks)
            out.push_back(knobsToMap(ConvChainKnobs{r, g, bk}));
    return out;
  }
  // The two products at the tiled kernel's micro-kernel rate (~85% of peak at these short K), the
  // depthwise windows per 16-lane vector ~1.5 cycles a tap and ~8 of loop, bias and store (the
  // ring's rows in L1: measured 21 cycles a vector for a 3 x 3 window, against the direct
  // kernel's 29), ~28 per transcendental step (its taps are not in the FLOP term),
  // ~1 cycle an element per transcendental epilogue step of the products (as tiled_contraction),
  // and ~100 cycles per micro-kernel call (8 x 32 blocks per step). The expanded and depthwise
  // tensors add no bytes: only the block's input, the weights and the output move. Measured on
  // this project's Xeon (MobileNet-V2, one core, against the three kernels it replaces): the
  // 112 x 112 block (a 4.8 MB expanded tensor, past L2) 0.60-0.66 -> 0.48-0.49 ms; blocks whose
  // expanded tensor fits in L2 within +-5%, the 7 x 7 ones 10-20% slower (rows of 7 pixels per
  // product): the model prices those above the three kernels, and they stay apart.
  CostShape costShape(const KernelGroup &, const kir::Kernel &k, const Hardware &hw,
                      int64_t) const override {
    CostShape s;
    const ConvChainProblem &p = problemOf<ConvChainProblem>(k);
    int64_t R = knobOf(k, &ConvChainKnobs::rows, p.OH), G = knobOf(k, &ConvChainKnobs::G, 1);
    int64_t bands = ceilDiv(p.OH, R);
    // The expanded rows a block computes: its output rows' s each, plus the window's first rows.
    double rowsPerBlock = double(R * p.stride + std::max<int64_t>(0, p.span - p.stride));
    double expanded = double(p.W) * double(p.Hp) * rowsPerBlock; // elements per block
    double expandFlops = 2.0 * double(p.K1) * expanded;
    double projectFlops = 2.0 * double(R * p.OW) * double(p.Hp) * double(p.N2);
    s.flops = (expandFlops + projectFlops) * double(p.batch * bands);
    s.vectorShare = hw.gpu ? 0.5 : 0.75;
    double dwVectors = double(R * p.OW) * double(p.Hp / 16);
    double perBlock = dwVectors * (1.5 * double(p.taps) + 8.0 + 28.0 * p.dwEpilogue);
    if (p.K1 > 0)
      perBlock += p.expandEpilogue * expanded +
                  double(ceilDiv(int64_t(rowsPerBlock) * p.W, 8) * ceilDiv(p.Hp, 32)) * 100.0;
    perBlock += p.outEpilogue * double(R * p.OW * p.N2);
    perBlock += double(ceilDiv(R, G)) * double(ceilDiv(G * p.OW, 8) * ceilDiv(p.N2, 32)) *
                double(ceilDiv(p.Hp, knobOf(k, &ConvChainKnobs::BK, p.Hp))) * 100.0;
    s.scalarCycles = perBlock;
    s.rereadSet = tileSet(p, G);
    return s;
  }
  // Each step's products read both weights whole (from L2 once they are there): W1 once per
  // step of new input rows, W2 once per step of output rows. With rows of few pixels (7 x 7
  // maps: one step of 7 pixels reads 1.8 MB of weights for 0.9 MFLOP) that, not the FMAs, sets
  // the time, and several output rows per step (G) share it.
  Rereads rereads(const KernelGroup &, const kir::Kernel &k, const Hardware &) const override {
    const ConvChainProblem &p = problemOf<ConvChainProblem>(k);
    int64_t R = knobOf(k, &ConvChainKnobs::rows, p.OH), G = knobOf(k, &ConvChainKnobs::G, 1);
    int64_t steps = p.batch * ceilDiv(p.OH, R) * ceilDiv(R, G);
    int64_t weights = 4 * (p.K1 * p.Hp + p.Hp * p.N2);
    return {0, std::max<int64_t>(0, steps - 1) * weights};
  }
  int64_t registers(const kir::Kernel &) const override { return 64; }
  std::vector<std::string> hostViolations(const CostShape &s, const Hardware &hw) const override {
    return tileSetViolations(s, hw);
  }

private:
  // The block's working set: the ring, the depthwise rows and the two accumulator tiles.
  static int64_t tileSet(const ConvChainProblem &p, int64_t G) {
    int64_t ringRows = p.span + (G - 1) * p.stride;
    return 4 * (ringRows * p.Hp * (p.W + p.span) + G * p.OW * (p.Hp + p.N2) + p.W * p.Hp);
  }
};

} // namespace

const Recipe &convChainRecipe() {
  static const ConvChainRecipe recipe;
  return recipe;
}

} // namespace aicf
