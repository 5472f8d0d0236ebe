// The chained_contraction recipe (tile_compatible_compute; lower/fusion.h rule 8):
// Y = epi2(epi1(X W1) W2) in one kernel, the hidden rows epi1(X W1) computed one [BM, BH] tile
// at a time and consumed at once, never written to memory. It is an MLP's up-projection and
// down-projection (CUTLASS calls it a back-to-back GEMM); FlashAttention's loop without the
// softmax rescale. The hidden activation (GPT-2: 512 KB written and read again) leaves the plan.
//
//   grid (b: batch, mt: M / BM)  block (t: threads)
//   [a row norm folded into X (rule 7): the tile rows' statistics; host: X's rows staged
//    normalised once per block (xs)]
//   region t { O = 0 }                                  -- the [BM, N2] output tile, local
//   for ht in [0, H / BH):                              -- hidden tiles, h0 = ht BH
//     region t { Hc = 0 }
//     for k0 in [0, K1) step BK: [stage X, W1 tiles; barrier]; mma_tile(Hc += X x W1[.., h0..])
//     region t { hs[r, j] = epi1(Hc[r, j]) }            -- c1's epilogue and the nodes to c2's A
//     [GPU: region t { w2s = W2[h0.., :] }]; barrier
//     mma_tile(O += hs x W2[h0.., :]); barrier
//   region t { Y[...] = epi2(O) }                       -- c2's epilogue and its fused nodes
//
// Both products are block-level mma_tile collectives over the same threads: thread t owns TM
// rows of the row tile, TN hidden columns of Hc and N2 TN / BH output columns of O. The host
// plan (one thread) reads X, W1 and W2 where they lie (kir.h mma_tile views: the packed
// panels of pack-weights) and hs from its stack tile; the GPU plan stages every operand tile
// in shared memory. Exactness: each output sums its hidden terms in hidden-tile order, and each
// hidden value sums its K1 terms as the plain contraction does (FP order of the second sum
// changes only by the tile split: "reassociated").
//
// A gated pair (SwiGLU: gate and up over the same X, combined by the group's elementwise nodes)
// computes both hidden tiles from one staging of X and combines them into hs. A row norm epilogue
// (rule 9, host plans: the thread's output tile holds whole rows) normalises the output rows
// before they are stored (contraction.h normEpilogueRegions).
//
// Knobs: BM, BH, BK, TM, TN (threads follows).
#include "lower/contraction.h"
#include "lower/recipe_support.h"
#include "lower/recipes.h"

#include "ir/graph.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <set>

namespace aicf {

using namespace recipe;
using namespace contraction;

namespace {

// Host: a batch over unbatched weights (an MLP over [B, T, D]) is always folded into the rows,
// so a row tile spans batch entries and the weights are streamed once per row tile, not once
// per batch entry and row tile.
Contraction specOf(const Node &n, const GroupExpr &gx, bool host) {
  switch (n.op()) {
  case Op::MatMul: return matmulSpec(n, gx, host, std::numeric_limits<int64_t>::max());
  case Op::Gemm: return gemmSpec(n, gx);
  default:
    throw InternalError(cat("chained_contraction cannot lower ", n.name(), " (", n.where(), ")"));
  }
}

struct ChainTiles {
  int64_t BM, BH, BK, TM, TN, TN2, threads;
  int64_t N2p; // the output tile's width: N2, or on the host N2 rounded up to whole 16-float
               // vectors (the micro-kernel's column unit; the columns past N2 are zeros)
};

ChainTiles chooseChainTiles(const Contraction &c1, const Contraction &c2, const Knobs &knobs) {
  ChainTiles t{};
  int64_t H = c1.N, N2 = c2.N;
  if (isGpuPlan(knobs)) {
    t.BM = knobs.get("BM", c1.M > 16 ? 32 : 16);
    t.BH = knobs.get("BH", 16);
    t.BK = knobs.get("BK", 16);
    t.TM = knobs.get("TM", std::max<int64_t>(1, t.BM / 16));
    // The output's thread tile (N2 TN / BH columns) must be whole.
    t.TN = knobs.get("TN", t.BH / std::gcd(N2, t.BH));
  } else {
    // Host: row tiles as tall as fit (every row tile streams the whole weights).
    t.BM = knobs.get("BM", std::min<int64_t>(roundUp(c1.M, 8), 128));
    t.BH = knobs.get("BH", std::min<int64_t>(roundUp(H, 32), 128));
    t.BK = knobs.get("BK", roundUp(c1.K, 8));
    t.TM = knobs.get("TM", t.BM);
    t.TN = knobs.get("TN", t.BH);
  }
  AICF_CHECK(t.BM > 0 && t.BH > 0 && t.BK > 0 && t.TM > 0 && t.TN > 0 && t.BM % t.TM == 0 &&
                 t.BH % t.TN == 0 && (N2 * t.TN) % t.BH == 0,
             "chained_contraction: bad tile knobs BM ", t.BM, " BH ", t.BH, " BK ", t.BK, " TM ",
             t.TM, " TN ", t.TN, " (N2 ", N2, ")");
  t.threads = (t.BM / t.TM) * (t.BH / t.TN);
  t.TN2 = isGpuPlan(knobs) ? N2 * t.TN / t.BH : roundUp(N2, 16);
  t.N2p = t.TN2 * (t.BH / t.TN);
  if (knobs.values.count("threads"))
    AICF_CHECK(knobs.get("threads", 0) == t.threads,
               "chained_contraction: threads must be (BM/TM)(BH/TN) = ", t.threads);
  return t;
}

// The host's in-place B view at (k0, n0) for a tile of `cols` columns and `depth` rows, or
// false when B has no view (it is then staged).
struct BView {
  std::optional<PanelView> panel;
  std::optional<RowView> row;
  explicit operator bool() const { return panel || row; }
  const kir::BufferP &buf() const { return panel ? panel->buf : row->buf; }
  void into(kir::MmaViews &v, E k0, E n0, int64_t tileCols, int64_t N) const {
    if (panel) {
      v.bOffset = panel->base + (n0 / E(panel->panel)) * E(panel->stride) + k0 * E(panel->panel);
      v.ldb = 0;
      v.bPanel = panel->panel;
      v.bPanelStride = panel->stride;
      v.aShift = panel->aShift;
      // bf16 pairs on AMX tiles wherever the -march has them (not priced against vdpbf16ps
      // here: only tiled_contraction's `tiles` knob is).
      v.bTiles = panel->group == 2;
      if (tileCols % panel->panel != 0)
        v.bFirstCol = n0 % E(panel->panel);
      v.cols = roundUp(N, tileCols) > panel->cols ? kir::min(E(tileCols), E(panel->cols) - n0)
                                                  : E(tileCols);
    } else {
      v.bOffset = row->base + k0 * E(row->ld) + n0;
      v.ldb = row->ld;
      v.cols = N % tileCols ? kir::min(E(tileCols), E(N) - n0) : E(tileCols);
    }
  }
};

BView hostBView(const Contraction &c, const Index &bi, int64_t tileCols) {
  BView v;
  v.panel = bPanelView(c, bi);
  if (v.panel && tileCols % 16 != 0)
    v.panel.reset();
  if (!v.panel)
    v.row = bRowView(c, bi);
  return v;
}

// The facts the planner prices the chained kernel by (its views are filled in later).
std::shared_ptr<ChainProblem> chainedProblem(const KernelGroup &g,
                                             const std::vector<const Node *> &n1s, const Node &n2,
                                             const Contraction &c1, const Contraction &c2) {
  const Node &n1 = *n1s.front();
  const int64_t M = c1.M, K1 = c1.K, H = c1.N, N2 = c2.N;
  const int64_t Q = static_cast<int64_t>(n1s.size());
  auto problem = std::make_shared<ChainProblem>();
  problem->M = M;
  problem->K1 = K1;
  problem->H = H;
  problem->N2 = N2;
  problem->firsts = Q;
  problem->normEpilogue = g.normEpilogue != nullptr;
  problem->batch = product(c1.batch);
  problem->xBytes = n1.operand(0)->type().bytes();
  for (const Node *m : n1s)
    problem->w1Bytes += m->operand(1)->type().bytes();
  problem->w2Bytes = n2.operand(1)->type().bytes();
  auto entries = [](const Value *v) {
    const auto &s = v->type().shape;
    return s.size() > 2 ? product(std::vector<int64_t>(s.begin(), s.end() - 2)) : int64_t(1);
  };
  problem->w1Entries = entries(n1.operand(1));
  problem->w2Entries = entries(n2.operand(1));
  problem->xEntries = c1.batch.empty() ? 1 : entries(n1.operand(0));
  return problem;
}

// What the steps of a chained kernel share (recipeChainedContraction): the contractions, the
// tiles, the thread variable, the batch index and the block's first row, hidden column and k.
struct ChainCtx {
  const std::vector<Contraction> &c1s;
  const ChainTiles &tl;
  std::string t;
  Index bi;
  E m0, h0, k0, Me;
  bool gpu, ragged;
  E rowsValid(E r) const { return ragged ? r < Me : E(); }
  std::string suffix(size_t q) const { return c1s.size() == 1 ? std::string() : cat(q); }
};

// The first products over K1 into the accumulators Hc: X's tile staged once per k step for all
// of them (GPU), or read where it lies or from its staged rows xs (host), each W1 in place or
// staged.
StmtP firstProducts(const ChainCtx &x, const kir::BufferP &As, const std::vector<kir::BufferP> &Bs,
                    const std::vector<kir::BufferP> &Hc, const kir::BufferP &xs,
                    const std::optional<RowView> &xView, const std::vector<BView> &w1Views) {
  const std::vector<Contraction> &c1s = x.c1s;
  const Contraction &c1 = c1s.front();
  const ChainTiles &tl = x.tl;
  const std::string &t = x.t;
  const Index &bi = x.bi;
  const E &m0 = x.m0, &h0 = x.h0, &k0 = x.k0, &Me = x.Me;
  const int64_t K1 = c1.K, H = c1.N;
  E zero(int64_t(0));
  auto rowsValid = [&x](E r) { return x.rowsValid(r); };
  auto suffix = [&x](size_t q) { return x.suffix(q); };
  const bool gpu = x.gpu, ragged = x.ragged;
  std::vector<StmtP> step;
  auto bValid = [&](E r, E cc) {
    return allOf({K1 % tl.BK ? k0 + r < E(K1) : E(), H % tl.BH ? h0 + cc < E(H) : E()});
  };
  if (gpu) {
    auto aValid = [&](E r, E cc) {
      return allOf({rowsValid(m0 + r), K1 % tl.BK ? k0 + cc < E(K1) : E()});
    };
    std::vector<StmtP> copies = {tileCopy(
        As, tl.BM, tl.BK, tl.threads, t, "a",
        [&](E r, E cc) { return c1.aAt(bi, m0 + r, k0 + cc); }, aValid,
        c1.aRowDecls ? [&](E r) { return c1.aRowDecls(m0 + r); }
                     : std::function<std::vector<StmtP>(E)>())};
    for (size_t q = 0; q < c1s.size(); ++q) {
      const Contraction &cq = c1s[q];
      copies.push_back(tileCopy(
          Bs[q], tl.BK, tl.BH, tl.threads, t, "b" + suffix(q),
          [&](E r, E cc) { return cq.bAt(bi, k0 + r, h0 + cc); }, bValid));
    }
    step.push_back(kir::region(t, copies));
    step.push_back(kir::barrier());
    for (size_t q = 0; q < c1s.size(); ++q)
      step.push_back(kir::mmaTile(Hc[q], As, Bs[q], tl.BM, tl.BH, tl.BK, tl.TM, tl.TN));
    step.push_back(kir::barrier());
  } else {
    for (size_t q = 0; q < c1s.size(); ++q) {
      const Contraction &cq = c1s[q];
      if (!w1Views[q])
        step.push_back(
            kir::region(t, {tileCopy(
                               Bs[q], tl.BK, tl.BH, 1, t, "b" + suffix(q),
                               [&](E r, E cc) { return cq.bAt(bi, k0 + r, h0 + cc); }, bValid)}));
      kir::MmaViews v;
      v.aOffset = xs ? k0 : xView->base + m0 * E(xView->ld) + k0;
      v.lda = xView->ld;
      if (w1Views[q]) {
        w1Views[q].into(v, k0, h0, tl.BH, H);
      } else {
        v.bOffset = zero;
        v.ldb = tl.BH;
        v.cols = E(tl.BH);
      }
      v.rows = !xs && ragged ? kir::min(E(tl.BM), Me - m0) : E(tl.BM);
      v.depth = K1 % tl.BK ? kir::min(E(tl.BK), E(K1) - k0) : E(tl.BK);
      step.push_back(kir::mmaTileViews(Hc[q], xView->buf, w1Views[q] ? w1Views[q].buf() : Bs[q],
                                       tl.BM, tl.BH, tl.BK, tl.TM, tl.TN, v));
    }
  }
  return kir::forLoop("k0", zero, E(K1), step, tl.BK);
}

// The hidden tile through the first contractions' epilogues (Hc) and the nodes between them
// and c2's A, into hs (zeros past M and H); W2's rows of the tile staged into w2s when
// `stageW2`. Then a barrier.
std::vector<StmtP> hiddenIntoShared(const ChainCtx &x, GroupExpr &gx,
                                    const std::vector<const Node *> &n1s, const Contraction &c2,
                                    const std::vector<kir::BufferP> &Hc, const kir::BufferP &hs,
                                    const kir::BufferP &w2s, bool stageW2) {
  const std::vector<Contraction> &c1s = x.c1s;
  const ChainTiles &tl = x.tl;
  const std::string &t = x.t;
  const Index &bi = x.bi;
  const E &h0 = x.h0;
  const int64_t H = c1s.front().N, N2 = c2.N;
  const int64_t Q = static_cast<int64_t>(c1s.size());
  E zero(int64_t(0)), tv = ivar(t), i = ivar("i"), j = ivar("j");
  int64_t colTiles = tl.BH / tl.TN;
  E rowLocal = (tv / E(colTiles)) * E(tl.TM) + i;
  E row = x.m0 + rowLocal;
  auto rowsValid = [&x](E r) { return x.rowsValid(r); };
  auto suffix = [&x](size_t q) { return x.suffix(q); };
  E hcol = h0 + (tv % E(colTiles)) * E(tl.TN) + j;
  std::vector<StmtP> body;
  for (size_t q = 0; q < c1s.size(); ++q) {
    const Contraction &cq = c1s[q];
    Index out1 = cq.outIndex(bi, row, hcol);
    E acc = kir::load(Hc[q], {tv, i, j});
    if (cq.alpha != 1.0)
      acc = f32(cq.alpha) * acc;
    for (const auto &term : cq.addTerms)
      acc = acc + term(out1);
    std::string cur = "h" + suffix(q);
    body.push_back(kir::decl(cur, DType::F32, acc));
    // Each contraction's epilogue scalars under names of its own.
    std::vector<StmtP> steps = applySteps(cq, gx, out1, cur, Q == 1 ? "e" : cat("e", q, "_"));
    body.insert(body.end(), steps.begin(), steps.end());
    std::string hv = cur;
    gx.substitute(n1s[q]->result(), [hv](const Index &) { return fvar(hv); });
  }
  body.push_back(kir::decl("hn", DType::F32, c2.aAt(bi, row, hcol)));
  E hsAt = (tv % E(colTiles)) * E(tl.TN) + j;
  // Rows past M and hidden columns past H hold zeros (the second product may read them).
  body.push_back(kir::store(hs, {rowLocal, hsAt}, fvar("hn")));
  if (E ok = allOf({rowsValid(row), H % tl.BH ? hcol < E(H) : E()}))
    body = {kir::ifThen(ok, body, {kir::store(hs, {rowLocal, hsAt}, f32(0.0))})};
  std::vector<StmtP> region = {
      kir::forLoop("i", zero, E(tl.TM), {kir::forLoop("j", zero, E(tl.TN), body)})};
  if (stageW2) {
    auto wValid = [&](E r, E cc) {
      return allOf({H % tl.BH ? h0 + r < E(H) : E(), tl.N2p != N2 ? cc < E(N2) : E()});
    };
    region.push_back(tileCopy(
        w2s, tl.BH, tl.N2p, tl.threads, t, "w", [&](E r, E cc) { return c2.bAt(bi, h0 + r, cc); },
        wValid));
  }
  return {kir::region(t, region), kir::barrier()};
}

// The output tile O through c2's epilogue and the group's fused nodes into the group's
// outputs (or a row norm epilogue's regions, which may add to `allocs`).
std::vector<StmtP> outputTile(const ChainCtx &x, const KernelGroup &g, GroupExpr &gx,
                              const Contraction &c2, const kir::BufferP &O,
                              std::vector<kir::BufferP> &allocs) {
  const ChainTiles &tl = x.tl;
  const std::string &t = x.t;
  const Index &bi = x.bi;
  const Value *result = g.anchor->result();
  const int64_t N2 = c2.N;
  E zero(int64_t(0)), tv = ivar(t), i = ivar("i"), j = ivar("j");
  int64_t colTiles = tl.BH / tl.TN;
  E rowLocal = (tv / E(colTiles)) * E(tl.TM) + i;
  E row = x.m0 + rowLocal;
  auto rowsValid = [&x](E r) { return x.rowsValid(r); };
  auto overTile = [&](int64_t tn, std::vector<StmtP> body) {
    return kir::region(
        t, {kir::forLoop("i", zero, E(tl.TM), {kir::forLoop("j", zero, E(tn), std::move(body))})});
  };
  E col = (tv % E(colTiles)) * E(tl.TN2) + j;
  Index out = c2.outIndex(bi, row, col);
  E acc = kir::load(O, {tv, i, j});
  if (c2.alpha != 1.0)
    acc = f32(c2.alpha) * acc;
  for (const auto &term : c2.addTerms)
    acc = acc + term(out);
  std::vector<StmtP> fin = {kir::decl("acc", DType::F32, acc)};
  std::string cur = "acc";
  std::vector<StmtP> steps = applySteps(c2, gx, out, cur);
  fin.insert(fin.end(), steps.begin(), steps.end());
  if (g.normEpilogue) { // whole output rows: one thread per block (host plans)
    E ok = allOf({rowsValid(row), tl.N2p != N2 ? col < E(N2) : E()});
    std::vector<StmtP> regions = normEpilogueRegions(
        *g.normEpilogue, g, gx, result, cur, fin, O, tv, tl.TM, N2, out, t,
        [&](std::vector<StmtP> body) {
          return overTile(tl.TN2, ok ? std::vector<StmtP>{kir::ifThen(ok, body)} : body);
        },
        allocs);
    return regions;
  }
  std::vector<StmtP> stores = storeGroupOutputs(g, gx, result, fvar(cur), out);
  fin.insert(fin.end(), stores.begin(), stores.end());
  if (E ok = allOf({rowsValid(row), tl.N2p != N2 ? col < E(N2) : E()}))
    fin = {kir::ifThen(ok, fin)};
  return {overTile(tl.TN2, fin)};
}

// The second product of a hidden tile: O += hs x W2[h0.., :], W2 read in place (host) or from
// its staged rows w2s.
StmtP secondProduct(const ChainCtx &x, const kir::BufferP &O, const kir::BufferP &hs,
                    const kir::BufferP &w2s, const BView &w2View, int64_t H, int64_t N2) {
  const ChainTiles &tl = x.tl;
  const E &h0 = x.h0;
  E zero(int64_t(0));
  const bool gpu = x.gpu;
  if (gpu) {
    return kir::mmaTile(O, hs, w2s, tl.BM, tl.N2p, tl.BH, tl.TM, tl.TN2);
  } else {
    kir::MmaViews v;
    v.aOffset = zero;
    v.lda = tl.BH;
    if (w2View) {
      w2View.into(v, h0, zero, N2, N2);
    } else {
      v.bOffset = zero;
      v.ldb = tl.N2p;
      v.cols = E(tl.N2p);
    }
    v.rows = E(tl.BM);
    v.depth = H % tl.BH ? kir::min(E(tl.BH), E(H) - h0) : E(tl.BH);
    return kir::mmaTileViews(O, hs, w2View ? w2View.buf() : w2s, tl.BM, tl.N2p, tl.BH, tl.TM,
                             tl.TN2, v);
  }
}

// Host plans: X read where it lies (or its tile rows staged once per block into xs, added to
// `allocs`: normalised, or gathered), the Ws in place where they can be; recorded in `problem`.
struct HostViews {
  std::optional<RowView> xView;
  std::vector<BView> w1Views;
  BView w2View;
  kir::BufferP xs;
};
HostViews hostViews(const std::vector<Contraction> &c1s, const Contraction &c2,
                    const ChainTiles &tl, const Index &bi, ChainProblem &problem,
                    std::vector<kir::BufferP> &allocs) {
  const Contraction &c1 = c1s.front();
  const int64_t K1 = c1.K, N2 = c2.N;
  HostViews v;
  v.w1Views.resize(c1s.size());
  AICF_CHECK(tl.threads == 1, "chained_contraction: host plans run one thread per block");
  v.xView = aRowView(c1, bi);
  problem.aInPlace = v.xView.has_value();
  if (!v.xView) {
    v.xs = tempBuffer("xs", {tl.BM, roundUp(K1, tl.BK)}, kir::Scope::Shared);
    allocs.push_back(v.xs);
    v.xView = RowView{v.xs, E(int64_t(0)), roundUp(K1, tl.BK)};
  }
  problem.b1Views = true;
  for (size_t q = 0; q < c1s.size(); ++q) {
    v.w1Views[q] = hostBView(c1s[q], bi, tl.BH);
    problem.b1Views = problem.b1Views && static_cast<bool>(v.w1Views[q]);
    problem.b1Rows = problem.b1Rows || v.w1Views[q].row.has_value();
  }
  v.w2View = hostBView(c2, bi, N2);
  problem.b2Views = static_cast<bool>(v.w2View);
  problem.b2Rows = v.w2View.row.has_value();
  return v;
}

} // namespace

kir::Kernel recipeChainedContraction(const KernelGroup &g, const std::string &name,
                                     const Knobs &knobs) {
  AICF_CHECK(g.anchor && !g.chained.empty(), "chained_contraction needs a chained group (group ",
             g.id, ")");
  const Node &n2 = *g.anchor;
  std::map<const Value *, kir::BufferP> byValue;
  kir::Kernel k = startKernel(g, name, "chained_contraction", byValue);
  GroupExpr gx(g, byValue);
  bool gpu = isGpuPlan(knobs);
  if (g.normEpilogue && gpu)
    throw UserError(cat(g.normEpilogue->where(), ": ", g.normEpilogue->name(),
                        " as an epilogue needs tiles of whole output rows in one thread (host "
                        "plans)"));
  // The first contractions (one, or a gated pair such as SwiGLU's gate and up projections),
  // all over the same X; c2 reads their results combined by the group's elementwise nodes.
  std::vector<const Node *> n1s = g.chained;
  std::vector<Contraction> c1s;
  for (const Node *n1 : n1s)
    c1s.push_back(specOf(*n1, gx, !gpu));
  Contraction &c1 = c1s.front();
  const Node &n1 = *n1s.front();
  Contraction c2 = specOf(n2, gx, !gpu);
  const Value *result = n2.result();
  requireShapePreservingEpilogue(g, result);
  for (size_t q = 0; q < c1s.size(); ++q)
    AICF_CHECK(n1s[q]->operand(0) == n1.operand(0) && c1s[q].batch == c2.batch &&
                   c1s[q].M == c2.M && c1s[q].N == c2.K && c1s[q].K == c1.K,
               "chained_contraction: ", n1s[q]->name(), " ", n1s[q]->result()->type().str(),
               " does not feed ", n2.name(), "'s A row for row (", n2.where(), ")");
  const int64_t M = c1.M, K1 = c1.K, H = c1.N, N2 = c2.N;
  ChainTiles tl = chooseChainTiles(c1, c2, knobs);
  k.threads = tl.threads;
  k.knobs = {{"BM", tl.BM}, {"BH", tl.BH}, {"BK", tl.BK},
             {"TM", tl.TM}, {"TN", tl.TN}, {"threads", tl.threads}};
  auto problem = chainedProblem(g, n1s, n2, c1, c2);
  k.problem = problem;
  const std::string &t = k.threadVar;
  E tv = ivar(t), zero(int64_t(0));
  if (!c1.batch.empty())
    k.grid.emplace_back("b", product(c1.batch));
  k.grid.emplace_back("mt", ceilDiv(M, tl.BM));
  if (c1.Msym) { // symbolic rows (issue 21): the row tiles and their guards read them
    if (!c1.batch.empty())
      throw UserError(cat(n2.where(), ": chained_contraction: symbolic rows with batch dims are "
                                      "not supported yet"));
    k.symGrid = {SymExtent{*c1.Msym, tl.BM}};
  }
  const E Me = c1.Me();
  const bool ragged = c1.mRagged(tl.BM);
  Index bi = c1.batch.empty() ? Index{} : unflat(c1.batch, ivar("b"));
  E m0 = ivar("mt") * E(tl.BM), h0 = ivar("ht") * E(tl.BH), k0 = ivar("k0");
  ChainCtx x{c1s, tl, t, bi, m0, h0, k0, Me, gpu, ragged};

  // A folded row norm: the tile rows' statistics first; X is then read normalised (c1.aAt; the
  // first contraction's reads of X stage it for all of them).
  std::vector<StmtP> prologue;
  if (const Node *norm = foldedRowNorm(g)) {
    Tiles nt{tl.BM, tl.BH, tl.BK, tl.TM, tl.TN, tl.threads};
    prologue = rowNormPrologue(*norm, gx, c1, nt, bi, m0, t, k.allocs);
    problem->normRows = true;
  }

  // Host views: X in place (or staged once per block, normalised), the Ws in place.
  HostViews views;
  views.w1Views.resize(c1s.size());
  if (!gpu)
    views = hostViews(c1s, c2, tl, bi, *problem, k.allocs);
  std::optional<RowView> &xView = views.xView;
  std::vector<BView> &w1Views = views.w1Views;
  BView &w2View = views.w2View;
  kir::BufferP &xs = views.xs;
  kir::BufferP As = tempBuffer("As", {tl.BM, tl.BK}, kir::Scope::Shared);
  std::vector<kir::BufferP> Bs, Hc;
  for (size_t q = 0; q < c1s.size(); ++q) {
    Bs.push_back(tempBuffer("Bs" + x.suffix(q), {tl.BK, tl.BH}, kir::Scope::Shared));
    Hc.push_back(tempBuffer("Hc" + x.suffix(q), {tl.threads, tl.TM, tl.TN}, kir::Scope::Local));
  }
  kir::BufferP hs = tempBuffer("hs", {tl.BM, tl.BH}, kir::Scope::Shared);
  kir::BufferP w2s = tempBuffer("w2s", {tl.BH, tl.N2p}, kir::Scope::Shared);
  kir::BufferP O = tempBuffer("O", {tl.threads, tl.TM, tl.TN2}, kir::Scope::Local);
  if (gpu)
    k.allocs.push_back(As);
  for (size_t q = 0; q < c1s.size(); ++q)
    if (gpu || !w1Views[q])
      k.allocs.push_back(Bs[q]);
  k.allocs.push_back(hs);
  if (gpu || !w2View)
    k.allocs.push_back(w2s);
  for (const kir::BufferP &h : Hc)
    k.allocs.push_back(h);
  k.allocs.push_back(O);

  std::string firsts;
  for (const Contraction &c : c1s)
    firsts += (firsts.empty() ? "" : " and ") + c.what;
  k.body.push_back(kir::comment(cat(firsts, " -> ", c2.what, ": chained, ", tl.BM,
                                    "-row tiles, hidden in tiles of ", tl.BH,
                                    " kept on chip (hs), K in steps of ", tl.BK, ", ", tl.TM, "x",
                                    tl.TN, " / ", tl.TM, "x", tl.TN2, " accumulators per thread")));
  k.body.insert(k.body.end(), prologue.begin(), prologue.end());

  // Thread t's accumulator elements: rows (t / colTiles) TM + i, hidden columns
  // (t % colTiles) TN + j, output columns (t % colTiles) TN2 + j (colTiles = BH / TN).
  E i = ivar("i"), j = ivar("j");
  auto overTile = [&](int64_t tn, std::vector<StmtP> body) {
    return kir::region(
        t, {kir::forLoop("i", zero, E(tl.TM), {kir::forLoop("j", zero, E(tn), std::move(body))})});
  };
  auto rowsValid = [&](E r) { return ragged ? r < Me : E(); };

  // Host: X's tile rows staged once (normalised when a norm is folded, or gathered when X is
  // not a plain row-major read).
  if (xs)
    k.body.push_back(
        kir::region(t, {tileCopy(
                           xs, tl.BM, roundUp(K1, tl.BK), 1, t, "x",
                           [&](E r, E cc) { return c1.aAt(bi, m0 + r, cc); },
                           [&](E r, E cc) {
                             return allOf({rowsValid(m0 + r), K1 % tl.BK ? cc < E(K1) : E()});
                           },
                           c1.aRowDecls ? [&](E r) { return c1.aRowDecls(m0 + r); }
                                        : std::function<std::vector<StmtP>(E)>())}));
  k.body.push_back(overTile(tl.TN2, {kir::store(O, {tv, i, j}, f32(0.0))}));

  std::vector<StmtP> hiddenTile;
  {
    std::vector<StmtP> zeros;
    for (const kir::BufferP &h : Hc)
      zeros.push_back(kir::store(h, {tv, i, j}, f32(0.0)));
    hiddenTile.push_back(overTile(tl.TN, zeros));
  }
  // The first products over K1.
  hiddenTile.push_back(firstProducts(x, As, Bs, Hc, xs, xView, w1Views));
  // The hidden tile through the first contractions' epilogues and the nodes between them and
  // c2's A, into hs.
  for (StmtP &st : hiddenIntoShared(x, gx, n1s, c2, Hc, hs, w2s, gpu || !w2View))
    hiddenTile.push_back(st);
  // The second product: O += hs x W2[h0.., :].
  hiddenTile.push_back(secondProduct(x, O, hs, w2s, w2View, H, N2));
  hiddenTile.push_back(kir::barrier());
  k.body.push_back(kir::forLoop("ht", zero, E(ceilDiv(H, tl.BH)), hiddenTile));

  // The output tile through c2's epilogue and the group's fused nodes.
  std::vector<StmtP> fin = outputTile(x, g, gx, c2, O, k.allocs);
  k.body.insert(k.body.end(), fin.begin(), fin.end());
  return k;
}

namespace {

// Requires: a group holding a chained contraction (lower/fusion.h rule 8: a matmul / gemm whose
// result, through its epilogue, is read only as the anchor contraction's A) whose anchor's
// tile_compatible_compute certificate holds. No generic form: a chain the planner cannot fit
// is priced +inf and stays two kernels. Knobs: ChainKnobs.
class ChainedContractionRecipe final : public Recipe {
public:
  const char *name() const override { return "chained_contraction"; }
  bool lowers(const Node *a) const override {
    return a && (a->op() == Op::MatMul || a->op() == Op::Gemm);
  }
  bool lowersGroup(const KernelGroup &g) const override {
    return !g.chained.empty() && lowers(g.anchor);
  }
  bool symbolicDims(const KernelGroup &) const override { return true; }
  std::optional<MemProperty> requiredProperty() const override {
    return MemProperty::TileCompatibleCompute;
  }
  kir::Kernel build(const KernelGroup &g, const std::string &n, const Knobs &k) const override {
    return labelled(recipeChainedContraction(g, n, k), name());
  }
  KnobSet canonicalKnobs(const KnobSet &k) const override {
    return knobsToMap(knobsFromMap<ChainKnobs>(k));
  }
  std::vector<KnobSet> candidates(const kir::Kernel &d, const Hardware &hw) const override {
    const ChainProblem &p = problemOf<ChainProblem>(d);
    std::vector<KnobSet> out;
    if (!hw.gpu) {
      // One thread per block; X read whole per step (K1 in one step keeps each micro-kernel
      // block in registers across it), hidden tiles of whole 32-float panels.
      std::set<int64_t> bms, bhs;
      for (int64_t t : {16, 32, 64, 128})
        bms.insert(roundUp(ceilDiv(p.M, ceilDiv(p.M, t)), 8));
      for (int64_t t : {32, 64, 128, 256})
        if (t / 2 < p.H)
          bhs.insert(std::min(t, roundUp(p.H, 32)));
      int64_t bk = roundUp(p.K1, 8);
      for (int64_t bm : bms)
        for (int64_t bh : bhs)
          out.push_back(knobsToMap(ChainKnobs{bm, bh, bk, bm, bh, std::nullopt}));
      return out;
    }
    // GPU: the hidden tile and W2's [BH, N2] rows staged in shared memory beside the X and W1
    // tiles: the tiles must fit the 48 KB of static shared memory.
    for (int64_t bm : {16, 32, 64})
      for (int64_t bh : {8, 16, 32})
        for (int64_t bk : {16, 32})
          for (int64_t tm : {1, 2, 4})
            for (int64_t tn : {1, 2, 4}) {
              if (bm % tm || bh % tn || (p.N2 * tn) % bh || bm / 2 >= std::max<int64_t>(p.M, 16))
                continue;
              int64_t threads = (bm / tm) * (bh / tn);
              int64_t tn2 = p.N2 * tn / bh;
              int64_t smem = 4 * (bm * bk + p.firsts * bk * bh + bm * bh + bh * p.N2);
              if (threads < 32 || threads > 256 || tn2 > 64 || smem > 44 * 1024)
                continue;
              out.push_back(knobsToMap(ChainKnobs{bm, bh, bk, tm, tn, std::nullopt}));
            }
    return out;
  }
  CostShape costShape(const KernelGroup &, const kir::Kernel &k, const Hardware &hw,
                      int64_t flops) const override {
    CostShape s;
    const ChainProblem &p = problemOf<ChainProblem>(k);
    int64_t BM = knobOf(k, &ChainKnobs::BM, 1), BH = knobOf(k, &ChainKnobs::BH, 1),
            BK = knobOf(k, &ChainKnobs::BK, 1);
    int64_t TM = knobOf(k, &ChainKnobs::TM, 1), TN = knobOf(k, &ChainKnobs::TN, 1);
    int64_t mt = ceilDiv(p.M, BM), ht = ceilDiv(p.H, BH), blocks = p.batch * mt;
    double exact = 2.0 * double(p.batch * p.M) * double(p.H) * double(p.firsts * p.K1 + p.N2);
    double padded =
        2.0 * double(blocks * BM) * double(ht * BH) * double(p.firsts * roundUp(p.K1, BK) + p.N2);
    s.flops = double(flops) - exact + padded;
    s.rereadSet = tileSet(k);
    s.serialTiles = ht * (ceilDiv(p.K1, BK) + 1);
    double normElems = p.normRows ? double(BM * p.K1) : 0.0; // per block
    s.flops += 6.0 * normElems * double(blocks);
    if (hw.gpu) {
      double perLoad = double(TM * TN) / double(TM + TN);
      s.vectorShare = 0.7 * std::min(1.0, perLoad / 4.0);
      if (p.normRows)
        s.serialTiles += 2;
      return s;
    }
    // Host: the tiled contraction's micro-kernel terms (recipe_tiled_contraction.cpp) for both
    // products: ~89% of peak less ~0.056% per KiB of the working set (the A rows of a
    // micro-kernel block and one 32-column panel of B), ~100 cycles per micro-kernel call (it
    // loads its 8 x 32 accumulator block, fills the FMA chains, stores it back): the first
    // product calls it once per k step and block of the hidden tile, the second once per
    // hidden tile and block of the output tile. Measured on this project's Xeon (GPT-2's MLP,
    // all 16 candidates by --candidate-rank, one thread): the chained forms ran 0.99-1.03x the
    // two plain kernels; LLaMA's gated MLP 0.95x at two threads, 1.0x at one.
    double wsKiB = double(4 * (8 * std::max(BK, BH) + std::max(BK, BH) * 32)) / 1024.0;
    s.vectorShare = 0.89 / (1.0 + 0.00056 * wsKiB);
    double calls1 = double(p.firsts * ceilDiv(p.K1, BK) * ceilDiv(BM, 8) * ceilDiv(BH, 32));
    double calls2 = double(ceilDiv(BM, 8) * ceilDiv(p.N2, 32));
    // The second product's calls cost ~10 cycles each, not 100: its accumulator blocks stay in
    // L1 / L2 between the hidden tiles (GPT-2's MLP on one core: hidden tiles of 32 ran 0.0155
    // ms slower than tiles of 256, for 3584 more calls).
    double perBlock = double(ht) * (100.0 * calls1 + 10.0 * calls2);
    // Each hidden tile's accumulators go through the epilogue into hs (its FLOPs are the
    // group's): a load and a store, ~0.25 cycles a float.
    perBlock += 0.25 * double(p.firsts * ht * BM * BH);
    // B staged (no view) ~0.45 cycles per element copied, read as rows (packed by the
    // micro-kernel as it goes) ~0.2, in packed panels nothing.
    double b1 = !p.b1Views ? 0.45 : p.b1Rows ? 0.2 : 0.0;
    double b2 = !p.b2Views ? 0.45 : p.b2Rows ? 0.2 : 0.0;
    perBlock +=
        double(ht) * (b1 * double(p.firsts * roundUp(p.K1, BK) * BH) + b2 * double(BH * p.N2));
    if (!p.aInPlace)
      perBlock += 0.1 * double(BM * p.K1);
    perBlock += 0.5 * normElems; // the folded norm's passes (kNormRowCycles)
    if (p.normEpilogue) // a row norm epilogue's passes over the output tile (as tiled_contraction)
      perBlock += 1.5 * double(BM * p.N2);
    s.scalarCycles = perBlock; // per block: the cost model takes the busiest core's blocks
    return s;
  }
  // Every block reads its batch entry's W1 and W2 whole (each row tile streams the whole hidden
  // dimension): a weight of one entry (an MLP's) by every block, spread over the launch; the
  // slices of a split chain each by the consecutive blocks of their slice. X's row tile is read
  // once per hidden tile, and by every slice when X is broadcast over them.
  Rereads rereads(const KernelGroup &, const kir::Kernel &k, const Hardware &hw) const override {
    const ChainProblem &p = problemOf<ChainProblem>(k);
    int64_t mt = ceilDiv(p.M, knobOf(k, &ChainKnobs::BM)), blocks = p.batch * mt;
    int64_t ht = ceilDiv(p.H, knobOf(k, &ChainKnobs::BH));
    int64_t set = tileSet(k);
    int64_t we = std::max<int64_t>(1, std::min(p.w1Entries, p.w2Entries));
    Rereads w = rereadsOf(hw, p.w1Bytes + p.w2Bytes, we, blocks / we, blocks, set, we == 1);
    // X: each block re-reads its row tile once per hidden tile after the first (from L2 when
    // it fits beside the tiles: the same core), and the blocks of other slices read it again.
    int64_t xSlices = std::max<int64_t>(1, p.xEntries) * mt;
    int64_t perSlice = std::max<int64_t>(1, blocks / xSlices);
    Rereads x = rereadsOf(hw, p.xBytes, xSlices, perSlice, blocks, set, perSlice > 1);
    int64_t within = p.xBytes * perSlice * (ht - 1);
    bool fits = hw.gpu ? 2 * p.xBytes <= hw.l2Bytes : p.xBytes / xSlices + set <= hw.l2Bytes;
    (fits ? x.cached : x.memory) += within;
    return {w.memory + x.memory, w.cached + x.cached};
  }
  int64_t registers(const kir::Kernel &k) const override {
    const ChainProblem &p = problemOf<ChainProblem>(k);
    int64_t tm = knobOf(k, &ChainKnobs::TM, 1), tn = knobOf(k, &ChainKnobs::TN, 1),
            bh = knobOf(k, &ChainKnobs::BH, 1);
    int64_t tn2 = p.N2 * tn / std::max<int64_t>(1, bh);
    return 34 + p.firsts * tm * tn + tm * tn2 + 2 * (tm + tn);
  }
  double loadsInFlight() const override { return 8.0; }
  std::vector<std::string> hostViolations(const CostShape &s, const Hardware &hw) const override {
    return tileSetViolations(s, hw);
  }

private:
  // The block's tiles: X's rows (BM x K1), the hidden tile with its accumulators (2 BM x BH),
  // W1's and W2's panels for one hidden tile (K1 x BH, BH x N2) and the output tile (BM x N2).
  static int64_t tileSet(const kir::Kernel &k) {
    const ChainProblem &p = problemOf<ChainProblem>(k);
    int64_t BM = knobOf(k, &ChainKnobs::BM, 1), BH = knobOf(k, &ChainKnobs::BH, 1);
    return 4 *
           (BM * p.K1 + (1 + p.firsts) * BM * BH + p.firsts * p.K1 * BH + BH * p.N2 + BM * p.N2);
  }
};

} // namespace

const Recipe &chainedContractionRecipe() {
  static const ChainedContractionRecipe recipe;
  return recipe;
}

} // namespace aicf
