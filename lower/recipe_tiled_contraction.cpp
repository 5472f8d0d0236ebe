// The tiled_contraction recipe (tile_compatible_compute) for matmul (batched,
// broadcast batch dims, 1-D operands), gemm (transA / transB, alpha, beta, C) and conv with
// group 1 as an implicit GEMM: the tiled kernel built from a contraction spec
// (contraction_specs.cpp, contraction_conv_specs.cpp), with its operand views
// (contraction_views.cpp) and row norms (contraction_row_norm.cpp), and the recipe object.
// Grouped / depthwise conv and conv_transpose are recipe_direct_conv.cpp's.
//
// Tiled contraction, every op seen as D[b, row, col] = sum_k A[b, row, k] B[b, k, col]:
//   grid (b: batch, mt: M / BM, nt: N / BN)  block (t: threads = (BM / TM) (BN / TN))
//   reduce k0 in [0, K) step BK {
//     init:   region t { C[t, i, j] = 0 }                        -- local accumulator tile
//     update: region t { As = A[m0.., k0..] (BM x BK), Bs = B[k0.., n0..] (BK x BN), zero
//                        beyond the bounds }; barrier; mma_tile(C += As x Bs); barrier }
//   region t { C[t, i, j] = C[t, i, j] + g }                     -- additive epilogue terms
//   region t { D[...] = epilogue(C[t, i, j]) }                   -- the rest, fused nodes
// The additive terms (conv bias, gemm's beta C, leading "add" epilogue steps) are written as a
// separate self-update of the accumulator so that FuseReductionEpilogue can move them into the
// reduction's init (C = g instead of C = 0); its outcome is recorded as a comment in the kernel.
// Conv as implicit GEMM: row = output channel, col = output pixel, k = (input channel, kernel
// tap); the B tile is gathered from the input (im2col on the fly), padding reads as zero.
//
// Knobs: BM, BN, BK, TM, TN (threads follows). GPU plans: 256 threads, 8 x 8 (or 4 x 4, 2 x 2
// for small operands) thread tiles; the host plan: one thread owning the whole BM x BN tile so
// the host printer's vector micro-kernel runs it (BN a multiple of 16).
#include "kir/fuse_reduction_epilogue.h"
#include "lower/contraction.h"
#include "lower/recipe_support.h"
#include "lower/recipes.h"

#include "ir/graph.h"
#include "support/diagnostics.h"
#include "support/host_micro_kernel.h"

#include <algorithm>
#include <set>
#include <tuple>

namespace aicf {

using kir::E;
using kir::StmtP;
using namespace recipe;

namespace contraction {

Tiles chooseTiles(const Contraction &c, const Knobs &knobs, kir::MmaFrag frag) {
  Tiles t{};
  if (frag != kir::MmaFrag::None) {
    // Tensor cores: warp tiles of 8 TM x 4 TN (m16n8 accumulators, kir.h); two warp rows from
    // 64 block rows on, up to four warp columns: 128 x 128 tiles are 8 warps of 64 x 32.
    auto pick = [](int64_t d) {
      return d > 64 ? int64_t(128) : d > 32 ? int64_t(64) : int64_t(32);
    };
    t.BM = knobs.get("BM", pick(c.M));
    t.BN = knobs.get("BN", pick(c.N));
    t.BK = knobs.get("BK", c.K > 16 ? 32 : 16);
    t.TM = knobs.get("TM", t.BM >= 64 ? t.BM / 16 : t.BM / 8);
    t.TN = knobs.get("TN", t.BN >= 128 ? t.BN / 16 : t.BN >= 64 ? t.BN / 8 : t.BN / 4);
    int64_t fk = kir::mmaFragK(frag);
    AICF_CHECK(t.BM > 0 && t.BN > 0 && t.BK > 0 && t.TM > 0 && t.TN > 0 && t.TM % 2 == 0 &&
                   t.TN % 2 == 0 && t.BM % (8 * t.TM) == 0 && t.BN % (4 * t.TN) == 0 &&
                   t.BK % fk == 0,
               "tiled_contraction: bad tensor-core tile knobs BM ", t.BM, " BN ", t.BN, " BK ",
               t.BK, " TM ", t.TM, " TN ", t.TN, " (", kir::mmaFragName(frag),
               ": TM and TN even, BM a multiple of 8 TM, BN of 4 TN, BK of ", fk, ")");
    t.threads = (t.BM / (8 * t.TM)) * (t.BN / (4 * t.TN)) * 32;
    if (knobs.values.count("threads"))
      AICF_CHECK(knobs.get("threads", 0) == t.threads,
                 "tiled_contraction: threads must be 32 (BM/8TM)(BN/4TN) = ", t.threads);
    return t;
  }
  if (isGpuPlan(knobs)) {
    auto pick = [](int64_t d) {
      return d > 64 ? int64_t(128) : d > 32 ? int64_t(64) : int64_t(32);
    };
    t.BM = knobs.get("BM", pick(c.M));
    t.BN = knobs.get("BN", pick(c.N));
    t.BK = knobs.get("BK", c.K >= 32 ? 32 : 16);
    t.TM = knobs.get("TM", std::max<int64_t>(1, t.BM / 16));
    t.TN = knobs.get("TN", std::max<int64_t>(1, t.BN / 16));
  } else {
    // Host: tiles of at most 128 x 256 x 128 (A block in L2, B panels packed into L1 by the
    // micro-kernel), balanced so the last tile is not mostly padding (M = 132: two tiles of 72
    // rows rather than 128 + 4). Measured on 512^3: ~135 GFLOP/s on one core.
    auto balanced = [](int64_t d, int64_t maxTile, int64_t align) {
      int64_t tiles = ceilDiv(std::max<int64_t>(d, 1), maxTile);
      return roundUp(ceilDiv(std::max<int64_t>(d, 1), tiles), align);
    };
    t.BM = knobs.get("BM", c.defaultBM ? c.defaultBM : balanced(c.M, 128, 8));
    t.BN = knobs.get("BN", balanced(c.N, 256, c.N >= 32 ? 32 : 16));
    t.BK = knobs.get("BK", balanced(c.K, 128, c.kAlign));
    t.TM = knobs.get("TM", t.BM);
    t.TN = knobs.get("TN", t.BN);
  }
  AICF_CHECK(t.BM > 0 && t.BN > 0 && t.BK > 0 && t.TM > 0 && t.TN > 0 && t.BM % t.TM == 0 &&
                 t.BN % t.TN == 0,
             "tiled_contraction: bad tile knobs BM ", t.BM, " BN ", t.BN, " BK ", t.BK, " TM ",
             t.TM, " TN ", t.TN);
  t.threads = (t.BM / t.TM) * (t.BN / t.TN);
  if (knobs.values.count("threads"))
    AICF_CHECK(knobs.get("threads", 0) == t.threads, "tiled_contraction: threads must be (BM/TM)",
               "(BN/TN) = ", t.threads);
  return t;
}

// A tile copy dst[r, c] = src(r, c) (zero where `valid` fails) by all threads: element
// e = t, t + threads, ... of the row-major tile; one thread walks rows and columns directly.
// `rowDecls(r)` / `colDecls(c)` (optional) declare scalars src and valid use, once per row and
// once per element (with `colOuter`, one thread walks columns outside rows and declares the
// column scalars once per column).
StmtP tileCopy(const kir::BufferP &dst, int64_t rows, int64_t cols, int64_t threads,
               const std::string &t, const std::string &tag, const std::function<E(E r, E c)> &src,
               const std::function<E(E r, E c)> &valid,
               const std::function<std::vector<StmtP>(E r)> &rowDecls,
               const std::function<std::vector<StmtP>(E c)> &colDecls, bool colOuter) {
  auto body = [&](E r, E c) {
    std::vector<StmtP> b = colDecls ? colDecls(c) : std::vector<StmtP>{};
    E ok = valid ? valid(r, c) : E();
    if (!ok)
      b.push_back(kir::store(dst, {r, c}, src(r, c)));
    else
      b.push_back(kir::ifThen(ok, {kir::store(dst, {r, c}, src(r, c))},
                              {kir::store(dst, {r, c}, f32(0.0))}));
    return b;
  };
  if (threads == 1 && colOuter) { // columns outside rows: per-column scalars leave the row loop
    E r = ivar(tag + "r"), c = ivar(tag + "c");
    std::vector<StmtP> colBody = colDecls ? colDecls(c) : std::vector<StmtP>{};
    std::vector<StmtP> b = body(r, c);
    b.erase(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(colBody.size()));
    colBody.push_back(kir::forLoop(tag + "r", E(int64_t(0)), E(rows), b));
    return kir::forLoop(tag + "c", E(int64_t(0)), E(cols), colBody);
  }
  if (threads == 1) {
    E r = ivar(tag + "r"), c = ivar(tag + "c");
    std::vector<StmtP> rowBody = rowDecls ? rowDecls(r) : std::vector<StmtP>{};
    rowBody.push_back(kir::forLoop(tag + "c", E(int64_t(0)), E(cols), body(r, c)));
    return kir::forLoop(tag + "r", E(int64_t(0)), E(rows), rowBody);
  }
  E e = ivar(tag + "e");
  std::vector<StmtP> elem = rowDecls ? rowDecls(e / E(cols)) : std::vector<StmtP>{};
  std::vector<StmtP> b = body(e / E(cols), e % E(cols));
  elem.insert(elem.end(), b.begin(), b.end());
  return kir::forLoop(tag + "e", ivar(t), E(rows * cols) - ivar(t), elem, threads);
}

namespace {

// A row norm epilogue (lower/fusion.h rule 9) needs whole output rows in one thread's tile:
// host plans, one column tile. The knobs with BN = TN = the padded row.
Knobs normEpilogueKnobs(const Node *normEpi, const Contraction &c, const Knobs &knobs) {
  Knobs kn = knobs;
  if (normEpi) {
    if (isGpuPlan(knobs))
      throw UserError(cat(normEpi->where(), ": ", normEpi->name(),
                          " as an epilogue needs tiles of whole output rows in one thread (host "
                          "plans)"));
    int64_t whole = roundUp(c.N, 16);
    if (kn.get("BN", whole) != whole || kn.get("TN", whole) != whole)
      throw UserError(cat(normEpi->where(), ": ", normEpi->name(),
                          " as an epilogue needs BN = TN = ", whole, " (whole rows)"));
    kn.values["BN"] = kn.values["TN"] = whole;
  }
  return kn;
}

// The facts the planner prices the kernel by (its operand views are filled in later).
std::shared_ptr<ContractionProblem> tiledProblem(const Node &n, const Contraction &c,
                                                 kir::MmaFrag frag, bool normEpilogue) {
  auto problem = std::make_shared<ContractionProblem>();
  problem->M = c.M;
  problem->N = c.N;
  problem->K = c.K;
  problem->batch = product(c.batch);
  problem->kAlign = c.kAlign;
  problem->normEpilogue = normEpilogue;
  problem->frag = frag;
  problem->precision = frag == kir::MmaFrag::None ? Precision::F32 : nodePrecision(n);
  problem->band = static_cast<bool>(c.bandFill);
  problem->liveShare = c.bandLiveShare;
  if (!c.bandGroups.empty()) {
    problem->rowGroup = c.bandGroups[0];
    problem->rowGroups = c.M / c.bandGroups[0];
    problem->bandBytes0 = c.bandBytes0;
    problem->bandRowBytes = c.bandRowBytes;
    problem->bBytes = n.operand(1)->type().bytes();
    if (c.bandBlocks.size() == 6 && c.bandBlocks[5] == 16)
      problem->channelBlockK = c.bandBlocks[3] * c.bandBlocks[4] * 16;
  }
  return problem;
}

// The operands a host tile of one thread reads where they lie (kir.h, mma_tile views), and the
// band a k x k blocked conv's block fills first.
struct TileViews {
  std::optional<RowView> aView;
  int64_t aBlock = 0; // A's k blocks of 16 this far apart (aBlockView), when read in place
  std::optional<PanelView> bView;
  std::optional<RowView> bRow;
  kir::BufferP band;
  bool any() const { return aView || bView || bRow; }
};

// Host tiles of one thread read an operand where it lies when they can (kir.h, mma_tile
// views): A when its rows are contiguous in k at a fixed row stride, B when it is a weight
// packed in column panels (passes/pack_weights.cpp) and the tiles cover whole panels. No tile
// copy is made for such an operand; the other is staged as before. Records the choice in
// `problem`.
TileViews chooseViews(const Contraction &c, const Tiles &tl, const Knobs &knobs, const Index &bi,
                      ContractionProblem &problem) {
  TileViews tv;
  std::optional<RowView> &aView = tv.aView, &bRow = tv.bRow;
  std::optional<PanelView> &bView = tv.bView;
  int64_t &aBlock = tv.aBlock;
  kir::BufferP &band = tv.band;
  if (c.bandFill) {
    AICF_CHECK(!isGpuPlan(knobs) && tl.threads == 1 && tl.BK % c.bandBlocks[5] == 0,
               "tiled_contraction: the band form needs a host tile of one thread and BK a "
               "multiple of its k blocks (BK ",
               tl.BK, ", blocks of ", c.bandBlocks[5], ")");
    band = std::make_shared<kir::Buffer>(
        kir::Buffer{"band", DType::F32, c.band, kir::Scope::Shared, kir::Role::Temp, {}});
  }
  // Packed panels serve column tiles of any multiple of 16: a tile may start or end inside a
  // panel (mma_tile's first column; mobilenet_v2's 144-channel expansions: one tile of 144
  // rather than 160, the bias still folded into the init; its 160-channel projections: two of
  // 80 rather than a staged copy of B).
  // (bf16 pair panels: every K step starts on a pair.)
  auto panelTiles = [&](const std::optional<PanelView> &pv) {
    return pv && tl.BN % 16 == 0 && !(tl.BK % pv->group != 0 && c.K > tl.BK);
  };
  if (!isGpuPlan(knobs) && tl.threads == 1 && band) {
    aView = RowView{band, E(int64_t(0)), c.bandLd};
    bView = bPanelView(c, bi);
    if (!panelTiles(bView))
      bView.reset();
    if (!bView)
      bRow = bRowView(c, bi);
  } else if (!isGpuPlan(knobs) && tl.threads == 1) {
    aView = aRowView(c, bi);
    // A in k blocks of 16 (a blocked conv's input): each K step starts on a block.
    if (!aView && tl.BK % 16 == 0)
      if (std::optional<BlockView> blk = aBlockView(c, bi)) {
        aView = RowView{blk->buf, blk->base, blk->ld};
        aBlock = blk->block;
      }
    bView = bPanelView(c, bi);
    if (!panelTiles(bView))
      bView.reset();
    if (!bView)
      bRow = bRowView(c, bi);
  }
  // A blocked A's B in rows exactly one panel wide (ld = N = 32 or 64: a stem's [147, 64]
  // weight, which pack-weights leaves as it is, its bytes already that panel) is read as the
  // panel: the 7 x 64 micro-kernel on resnet18's 7 x 7 stem, 2.61 -> 2.15 ms (ORT 2.25).
  auto onePanel = [&](const std::optional<RowView> &r) -> std::optional<PanelView> {
    if (!r || (!band && !aBlock) || r->ld != c.N || (c.N != 32 && c.N != 64))
      return std::nullopt;
    return PanelView{r->buf, r->base, c.N, c.K * c.N, c.N};
  };
  if (std::optional<PanelView> pv = onePanel(bRow); pv && tl.BN == c.N) {
    bView = pv;
    bRow.reset();
  }
  problem.aInPlace = aView.has_value();
  problem.bPanels = bView.has_value();
  problem.bStreamed = bView && streamsWeight(*bView, knobs);
  if (!isGpuPlan(knobs) && aView)
    if (std::optional<PanelView> pv = bView ? bView : bPanelView(c, bi))
      problem.bPanelWidth = pv->panel;
  if (!isGpuPlan(knobs) && bView)
    problem.hostProducts = bView->group == 4   ? Precision::I8
                           : bView->group == 2 ? Precision::BF16
                                               : Precision::F32;
  problem.bInPlace = bRow.has_value();
  return tv;
}

// How the regions over the thread's accumulator tile walk it: element (i, j) directly, or
// (host, whole 16-lane output groups) 16 lanes at a time, j = 16 jo + jl; guarded regions store
// only the elements inside the output.
struct TileWalk {
  const Tiles &tl;
  std::string t;
  E inside;
  // Tensor-core tiles walk their accumulators in unrolled loops: the fragments' registers are
  // only registers while every index into them is a constant (ptxas otherwise moves C to local
  // memory: 16-byte spills on sm_80).
  kir::Stmt::LoopKind accLoop;
  bool byLanes = false;

  StmtP overTile(std::vector<StmtP> body, bool guarded) const {
    std::vector<StmtP> inner =
        guarded && static_cast<bool>(inside) ? std::vector<StmtP>{kir::ifThen(inside, body)} : body;
    return kir::region(
        t, {kir::forLoop("i", E(int64_t(0)), E(tl.TM),
                         {kir::forLoop("j", E(int64_t(0)), E(tl.TN), inner, 1, accLoop)}, 1,
                         accLoop)});
  }
  StmtP overLanes(const std::vector<StmtP> &body, bool guarded) const {
    std::vector<StmtP> lane = {
        kir::decl("j", DType::I64, ivar("jo") * E(int64_t(16)) + ivar("jl"))};
    if (guarded && static_cast<bool>(inside))
      lane.push_back(kir::ifThen(inside, body));
    else
      lane.insert(lane.end(), body.begin(), body.end());
    return kir::region(
        t, {kir::forLoop("i", E(int64_t(0)), E(tl.TM),
                         {kir::forLoop("jo", E(int64_t(0)), E(tl.TN / 16),
                                       {kir::forLoop("jl", E(int64_t(0)), E(int64_t(16)), lane, 1,
                                                     kir::Stmt::LoopKind::Vectorized)})})});
  }
  StmtP over(std::vector<StmtP> body, bool guarded) const {
    return byLanes ? overLanes(body, guarded) : overTile(std::move(body), guarded);
  }
  // The final region of a tile stored plane-wise (planeWiseStore): each lane's column, the
  // rows (consecutive pixels) innermost and vectorised.
  bool planes = false;
  StmtP overPlanes(const std::vector<StmtP> &body) const {
    std::vector<StmtP> lane = {
        kir::decl("j", DType::I64, ivar("jo") * E(int64_t(16)) + ivar("jl"))};
    if (static_cast<bool>(inside))
      lane.push_back(kir::ifThen(inside, body));
    else
      lane.insert(lane.end(), body.begin(), body.end());
    return kir::region(
        t, {kir::forLoop("jo", E(int64_t(0)), E(tl.TN / 16),
                         {kir::forLoop("jl", E(int64_t(0)), E(int64_t(16)),
                                       {kir::forLoop("i", E(int64_t(0)), E(tl.TM), lane, 1,
                                                     kir::Stmt::LoopKind::Vectorized)})})});
  }
};

// The tile buffers and the K step's position: the staged tiles As / Bs (read unless a view
// replaces them), the accumulators C, and the block's first row m0, column n0 and k0.
struct TileStep {
  kir::BufferP As, Bs, C;
  E m0, n0, k0;
};

// The tile copies of one K step by all threads: A unless read in place, B unless read in place
// (a host copy where the spec has one), zero beyond the bounds.
std::vector<StmtP> stageCopies(const Contraction &c, const Tiles &tl, const TileViews &v,
                               const TileStep &s, const Index &bi, const std::string &t) {
  const E &m0 = s.m0, &n0 = s.n0, &k0 = s.k0;
  auto aValid = [&](E r, E cc) {
    return allOf({c.mRagged(tl.BM) ? m0 + r < c.Me() : E(), c.K % tl.BK ? k0 + cc < E(c.K) : E(),
                  c.aValid ? c.aValid(bi, m0 + r, k0 + cc) : E()});
  };
  auto bValid = [&](E r, E cc) {
    return allOf({c.K % tl.BK ? k0 + r < E(c.K) : E(), c.N % tl.BN ? n0 + cc < E(c.N) : E(),
                  c.bValid ? c.bValid(bi, k0 + r, n0 + cc) : E()});
  };
  std::vector<StmtP> copies;
  if (!v.aView)
    copies.push_back(tileCopy(
        s.As, tl.BM, tl.BK, tl.threads, t, "a",
        [&](E r, E cc) { return c.aAt(bi, m0 + r, k0 + cc); }, aValid,
        c.aRowDecls ? [&](E r) { return c.aRowDecls(m0 + r); }
                    : std::function<std::vector<StmtP>(E)>(),
        c.aKDecls ? [&](E cc) { return c.aKDecls(k0 + cc); }
                  : std::function<std::vector<StmtP>(E)>(),
        static_cast<bool>(c.aKDecls)));
  if (!v.bView && !v.bRow)
    copies.push_back(tl.threads == 1 && c.bHostCopy
                         ? c.bHostCopy(bi, k0, n0, s.Bs)
                         : tileCopy(
                               s.Bs, tl.BK, tl.BN, tl.threads, t, "b",
                               [&](E r, E cc) { return c.bAt(bi, k0 + r, n0 + cc); }, bValid,
                               c.bRowDecls ? [&](E r) { return c.bRowDecls(k0 + r); }
                                           : std::function<std::vector<StmtP>(E)>(),
                               c.bColDecls ? [&](E cc) { return c.bColDecls(n0 + cc); }
                                           : std::function<std::vector<StmtP>(E)>()));
  return copies;
}

// The K step's mma_tile over the operands' views: a view has no zero padding, so the last row,
// column and K tiles pass their valid extents.
StmtP viewsMma(const Contraction &c, const Tiles &tl, const TileViews &tv, const TileStep &s,
               const Index &bi, const Knobs &knobs) {
  const std::optional<RowView> &aView = tv.aView, &bRow = tv.bRow;
  const std::optional<PanelView> &bView = tv.bView;
  const int64_t aBlock = tv.aBlock;
  const kir::BufferP &band = tv.band;
  const E &m0 = s.m0, &n0 = s.n0, &k0 = s.k0;
  kir::MmaViews v;
  // (A band of row groups is the tile's own: its first row is the band's start.)
  v.aOffset = !aView                          ? E(int64_t(0))
              : band && !c.bandGroups.empty() ? aView->base
              : aBlock || band                ? aView->base + m0 * E(aView->ld)
                                              : aView->base + m0 * E(aView->ld) + k0;
  v.lda = aView ? aView->ld : tl.BK;
  if (aBlock) { // the K step's first block of 16 lanes
    v.aBlocks = {aBlock, 0, 0, 1, 1, 16};
    v.firstBlock = k0 / E(int64_t(16));
  }
  if (band) {
    v.aBlocks = c.bandBlocks;
    v.aGroups = c.bandGroups;
    v.firstBlock = k0 / E(c.bandBlocks[5]);
    if (c.bandTapRows) {
      std::tie(v.tapLo, v.tapHi) = c.bandTapRows(bi, m0);
      v.aTaps = c.bandTaps;
    }
  }
  v.bOffset = bView ? bView->base + (n0 / E(bView->panel)) * E(bView->stride) + k0 * E(bView->panel)
              : bRow ? bRow->base + k0 * E(bRow->ld) + n0
                     : E(int64_t(0));
  v.ldb = bView ? 0 : bRow ? bRow->ld : tl.BN;
  v.bPanel = bView ? bView->panel : 0;
  if (bView && tl.BN % bView->panel != 0)
    v.bFirstCol = n0 % E(bView->panel);
  v.bPanelStride = bView ? bView->stride : 0;
  v.aShift = bView ? bView->aShift : 0;
  v.bPrefetch = bView && streamsWeight(*bView, knobs);
  // Rows past M take no part, A read in place or staged (its padding rows are zeros no store
  // reads): a batch-1 product (a squeeze-and-excitation's FCs, a classifier) staged in a tile of
  // 8 rows ran 8 rows of products for one.
  v.rows = c.mRagged(tl.BM) ? kir::min(E(tl.BM), c.Me() - m0) : E(tl.BM);
  v.cols = bView && ceilDiv(c.N, tl.BN) * tl.BN > bView->cols
               ? kir::min(E(tl.BN), E(bView->cols) - n0)
           : bRow && c.N % tl.BN != 0 ? kir::min(E(tl.BN), E(c.N) - n0)
                                      : E(tl.BN);
  v.depth = c.K % tl.BK ? kir::min(E(tl.BK), E(c.K) - k0) : E(tl.BK);
  return kir::mmaTileViews(s.C, aView ? aView->buf : s.As,
                           bView  ? bView->buf
                           : bRow ? bRow->buf
                                  : s.Bs,
                           tl.BM, tl.BN, tl.BK, tl.TM, tl.TN, v);
}

// The tile's last regions: the additive terms (and alpha) as a self-update of the accumulator,
// then the final region (or a row norm epilogue's regions) storing the outputs; `lanes`: the
// output's store index per 16-lane group (buildTiled).
void finishTile(kir::Kernel &k, const KernelGroup &g, GroupExpr &gx, const Contraction &c,
                const TileWalk &walk, const kir::BufferP &C, const Index &out,
                const std::optional<std::vector<IndexExpr>> &lanes) {
  const Node *normEpi = g.normEpilogue;
  const Value *result = g.anchor->result();
  const Tiles &tl = walk.tl;
  const std::string &t = walk.t;
  E tv = ivar(t), i = ivar("i"), j = ivar("j");
  int64_t colTiles = tl.BN / tl.TN;
  // Additive terms (and alpha) as a self-update of the accumulator, which FuseReductionEpilogue
  // (the driver's Kernel IR pipeline, kir/kir_pass.h) moves into the init.
  bool alphaInFinal = true;
  if (!c.addTerms.empty()) {
    E gsum;
    for (const auto &term : c.addTerms)
      gsum = gsum ? gsum + term(out) : term(out);
    E accv = kir::load(C, {tv, i, j});
    if (c.alpha != 1.0)
      accv = f32(c.alpha) * accv;
    alphaInFinal = false;
    std::vector<StmtP> upd = {kir::store(C, {tv, i, j}, accv + gsum)};
    k.body.push_back(walk.over(upd, true));
  }

  // The final region: the remaining epilogue steps, the fused elementwise nodes, the stores.
  std::string cur = "acc";
  E accv = kir::load(C, {tv, i, j});
  if (alphaInFinal && c.alpha != 1.0)
    accv = f32(c.alpha) * accv;
  std::vector<StmtP> fin = {kir::decl("acc", DType::F32, accv)};
  auto steps = applySteps(c, gx, out, cur);
  fin.insert(fin.end(), steps.begin(), steps.end());
  std::map<const Value *, std::vector<E>> storeAt;
  if (lanes) {
    Index dims(out.begin(), out.end() - 1);
    dims.push_back(ivar("nt") * E(tl.BN / 16) + (tv % E(colTiles)) * E(tl.TN / 16) + ivar("jo"));
    dims.push_back(ivar("jl"));
    for (const IndexExpr &e : *lanes)
      storeAt[g.outputs.front()].push_back(indexExpr(e, dims));
  }
  if (normEpi) {
    std::vector<StmtP> regions = normEpilogueRegions(
        *normEpi, g, gx, result, cur, fin, C, tv, tl.TM, c.N, out, t,
        [&](std::vector<StmtP> body) { return walk.over(std::move(body), true); }, k.allocs);
    k.body.insert(k.body.end(), regions.begin(), regions.end());
    return;
  }
  auto stores = storeGroupOutputs(g, gx, result, fvar(cur), out, "", storeAt);
  fin.insert(fin.end(), stores.begin(), stores.end());
  k.body.push_back(walk.planes ? walk.overPlanes(fin) : walk.over(fin, true));
}

} // namespace

kir::Kernel buildTiled(const KernelGroup &g, const std::string &name, const Knobs &knobs,
                       kir::Kernel k, GroupExpr &gx, Contraction c) {
  const Node &n = *g.anchor;
  const Value *result = n.result();
  requireShapePreservingEpilogue(g, result);
  const Node *normEpi = g.normEpilogue;
  Knobs kn = normEpilogueKnobs(normEpi, c, knobs);
  const kir::MmaFrag frag = c.bandFill ? kir::MmaFrag::None : tensorFrag(n, knobs);
  Tiles tl = chooseTiles(c, kn, frag);
  k.recipe = "tiled_contraction";
  k.threads = tl.threads;
  auto problem = tiledProblem(n, c, frag, normEpi != nullptr);
  k.problem = problem;
  k.knobs = {{"BM", tl.BM}, {"BN", tl.BN}, {"BK", tl.BK},
             {"TM", tl.TM}, {"TN", tl.TN}, {"threads", tl.threads}};
  const std::string &t = k.threadVar;
  E tv = ivar(t);
  if (!c.batch.empty())
    k.grid.emplace_back("b", product(c.batch));
  k.grid.emplace_back("mt", ceilDiv(c.M, tl.BM));
  k.grid.emplace_back("nt", ceilDiv(c.N, tl.BN));
  if (c.Msym) {
    for (const auto &[axis, extent] : k.grid)
      k.symGrid.push_back(SymExtent{SymExpr(extent), 1});
    k.symGrid[c.batch.empty() ? 0 : 1] = SymExtent{*c.Msym, tl.BM};
  }
  Index bi = c.batch.empty() ? Index{} : unflat(c.batch, ivar("b"));
  E m0 = ivar("mt") * E(tl.BM), n0 = ivar("nt") * E(tl.BN), k0 = ivar("k0");
  std::vector<kir::BufferP> normAllocs;
  std::vector<StmtP> normPrologue;
  if (const Node *norm = foldedRowNorm(g)) {
    normPrologue = rowNormPrologue(*norm, gx, c, tl, bi, m0, k.threadVar, normAllocs);
    problem->normRows = true;
  }
  TileViews views = chooseViews(c, tl, knobs, bi, *problem);

  // Tensor cores read the staged tiles in the precision's type: the staging store rounds (to
  // nearest even), where the operands' rounding happens (tf32 stages f32 and rounds as the
  // fragments load).
  const DType stage = precisionStorage(problem->precision);
  auto As = std::make_shared<kir::Buffer>(
      kir::Buffer{"As", stage, {tl.BM, tl.BK}, kir::Scope::Shared, kir::Role::Temp, {}});
  auto Bs = std::make_shared<kir::Buffer>(
      kir::Buffer{"Bs", stage, {tl.BK, tl.BN}, kir::Scope::Shared, kir::Role::Temp, {}});
  auto C = std::make_shared<kir::Buffer>(kir::Buffer{
      "C", DType::F32, {tl.threads, tl.TM, tl.TN}, kir::Scope::Local, kir::Role::Temp, {}});
  k.allocs = normAllocs;
  if (views.band)
    k.allocs.push_back(views.band);
  if (!views.aView)
    k.allocs.push_back(As);
  if (!views.bView && !views.bRow)
    k.allocs.push_back(Bs);
  k.allocs.push_back(C);

  k.body.push_back(
      kir::comment(cat(c.what, ": ", tl.BM, "x", tl.BN, " output tiles, K in steps of ", tl.BK,
                       ", ", tl.TM, "x", tl.TN, " accumulators per thread")));

  // The thread's accumulator element (i, j) sits at output (row, col).
  int64_t colTiles = tl.BN / tl.TN;
  E i = ivar("i"), j = ivar("j");
  E row = frag == kir::MmaFrag::None ? m0 + (tv / E(colTiles)) * E(tl.TM) + i
                                     : m0 + kir::mmaTileRow(frag, tl.BN, tl.TM, tl.TN, tv, i);
  E col = frag == kir::MmaFrag::None ? n0 + (tv % E(colTiles)) * E(tl.TN) + j
                                     : n0 + kir::mmaTileCol(frag, tl.BN, tl.TM, tl.TN, tv, j);
  E inside = allOf({c.mRagged(tl.BM) ? row < c.Me() : E(), c.N % tl.BN ? col < E(c.N) : E(),
                    c.rowValid ? c.rowValid(bi, row) : E()});
  TileWalk walk{tl, t, inside,
                frag == kir::MmaFrag::None ? kir::Stmt::LoopKind::Serial
                                           : kir::Stmt::LoopKind::Unrolled};

  // Host, a blocked conv: columns walked 16 lanes at a time (q: the channel block), so the
  // output's stores and the bias / residual loads are 16-float vectors.
  bool blockLanes = !isGpuPlan(knobs) && c.outLanes && tl.TN % 16 == 0 && tl.BN % 16 == 0;
  E q = ivar("nt") * E(tl.BN / 16) + (tv % E(colTiles)) * E(tl.TN / 16) + ivar("jo");
  // The output element of the thread's accumulator element (i, j).
  Index out = blockLanes ? c.outLanes(bi, row, q, ivar("jl")) : c.outIndex(bi, row, col);
  // Host: an output stored through a layout op whose 16-column groups land contiguously (a
  // head split's transpose: column h * 64 + d to [.., h, s, d]) walks its columns 16 at a
  // time, the store index computed per group and the lane added, so the store is a vector
  // store rather than a scatter with a division per lane (LLaMA q / k / v projections).
  std::optional<std::vector<IndexExpr>> lanes;
  if (!isGpuPlan(knobs) && !blockLanes && n.op() != Op::Conv && tl.TN % 16 == 0 &&
      tl.BN % 16 == 0 && g.outputs.size() == 1 && !c.outShape.empty() &&
      out.size() == c.outShape.size() && c.outShape.back() == c.N)
    lanes = laneSplitStore(g, g.outputs.front());
  // The init, the additive terms' self-update and the final region all walk the tile the same
  // way (16 lanes at a time or not), so FuseReductionEpilogue can move the terms into the init
  // and FuseMmaTileEpilogue the init and the final region into the mma_tile. Only outputs
  // stored as whole 16-lane groups (a blocked conv's, a head split's) walk by lanes: a
  // row-major GEMM output, stored from the micro-kernel 8 rows x 2 vectors per block instead
  // of row by row, ran slower fused (LLaMA's SwiGLU up-projection 0.49 -> 0.80 ms, GPT-2's MLP
  // GEMMs 5-10%).
  walk.byLanes = blockLanes || lanes.has_value();
  walk.planes = blockLanes && !g.normEpilogue && g.outputs.size() == 1 &&
                planeWiseStore(g, g.outputs.front());
  problem->fusedTile = walk.byLanes && tl.threads == 1 && views.any() && !walk.planes;
  // A conv's transcendental epilogue steps (SiLU, sigmoid, GELU...): ~1 cycle an element each
  // on the host, measured on EfficientNet-B0's 16 -> 96 expansion with SiLU (0.67 ms, 0.30 with
  // relu, 1.2 M outputs) - far beyond their FLOPs at the micro-kernel's rate, which the
  // model otherwise charged (predicted 0.34 ms). Convs only: rule 8 prices a matmul chain's
  // epilogue against the two plain kernels', which would both need it.
  if (n.op() == Op::BlockedConv)
    for (const auto &[step, operand] : c.steps)
      problem->epilogueCycles += isTranscendental(step.op) ? 1.0 : 0.0;
  if (c.bandFill)
    problem->bandPrologueCycles = recipe::prologueCycles(g);

  // The reduction over K tiles.
  std::vector<StmtP> zero = {kir::store(C, {tv, i, j}, f32(0.0))};
  std::vector<StmtP> init = {walk.over(zero, false)};
  std::vector<StmtP> update;
  TileStep step{As, Bs, C, m0, n0, k0};
  std::vector<StmtP> copies = stageCopies(c, tl, views, step, bi, t);
  if (!copies.empty()) {
    update.push_back(kir::region(t, copies));
    update.push_back(kir::barrier());
  }
  if (views.any()) {
    update.push_back(viewsMma(c, tl, views, step, bi, knobs));
  } else {
    update.push_back(kir::mmaTile(C, As, Bs, tl.BM, tl.BN, tl.BK, tl.TM, tl.TN));
    update.back()->frag = frag;
    update.push_back(kir::barrier());
  }
  if (views.band)
    k.body.push_back(kir::region(t, {c.bandFill(bi, m0, views.band)}));
  k.body.insert(k.body.end(), normPrologue.begin(), normPrologue.end());
  k.body.push_back(kir::reduce("k0", E(int64_t(0)), E(c.K), init, update, tl.BK));

  finishTile(k, g, gx, c, walk, C, out, lanes);
  return k;
}

} // namespace contraction

using namespace contraction;

kir::Kernel recipeTiledContraction(const KernelGroup &g, const std::string &name,
                                   const Knobs &knobs) {
  AICF_CHECK(g.anchor != nullptr, "tiled_contraction needs an anchor (group ", g.id, ")");
  const Node &n = *g.anchor;
  if (n.op() == Op::ConvTranspose || (n.op() == Op::Conv && !denseGroups(n)) ||
      directBlockedConv(n))
    return recipeDirectConv(g, name, knobs);
  std::map<const Value *, kir::BufferP> byValue;
  kir::Kernel k;
  k.name = name;
  k.params = groupParams(g, byValue);
  GroupExpr gx(g, byValue);
  Contraction c;
  switch (n.op()) {
  case Op::MatMul: c = matmulSpec(n, gx, !isGpuPlan(knobs)); break;
  case Op::Gemm: c = gemmSpec(n, gx); break;
  case Op::Conv: c = convSpec(n, gx); break;
  case Op::BlockedConv: c = blockedConvSpec(n, gx, !isGpuPlan(knobs), knobs); break;
  default:
    throw InternalError(cat("tiled_contraction cannot lower ", n.name(), " (", n.where(), ")"));
  }
  return buildTiled(g, name, knobs, std::move(k), gx, c);
}

namespace {

// Host cycles per element of a block's A rows for a row norm folded into A, beyond its FLOPs:
// the two statistics passes and the normalising tile copy. Fitted on one core of an AMD EPYC
// (issue 17): the folded GEMMs of the GPT-2, ViT and LLaMA blocks ran 8-13 us slower than
// their plain forms per 64 K elements of block rows (0.35-1.0 cycles per element, ~0.5 mean).
constexpr double kNormRowCycles = 0.5;

// Requires: a matmul, gemm or group-1 conv anchor whose tile_compatible_compute certificate
// holds (partial results accumulate, a tile's working set fits on chip). For matmul and gemm it
// is also the generic lowering (no other recipe lowers them; the planner only keeps tiles that
// fit); a conv whose certificate fails goes to direct_conv. Knobs: ContractionKnobs.
class TiledContractionRecipe final : public Recipe {
public:
  const char *name() const override { return "tiled_contraction"; }
  bool lowers(const Node *a) const override {
    return a && (a->op() == Op::MatMul || a->op() == Op::Gemm ||
                 (a->op() == Op::Conv && denseGroups(*a)) ||
                 (a->op() == Op::BlockedConv && !directBlockedConv(*a)));
  }
  std::optional<MemProperty> requiredProperty() const override {
    return MemProperty::TileCompatibleCompute;
  }
  bool genericFallback() const override { return true; }
  // Symbolic rows of a gemm or matmul (their specs read them; anything else they refuse).
  bool symbolicDims(const KernelGroup &g) const override {
    return g.anchor && (g.anchor->op() == Op::Gemm || g.anchor->op() == Op::MatMul);
  }
  kir::Kernel build(const KernelGroup &g, const std::string &n, const Knobs &k) const override {
    return labelled(recipeTiledContraction(g, n, k), name());
  }
  KnobSet canonicalKnobs(const KnobSet &k) const override {
    return knobsToMap(knobsFromMap<ContractionKnobs>(k));
  }
  std::vector<KnobSet> candidates(const kir::Kernel &d, const Hardware &hw) const override {
    const ContractionProblem &p = problemOf<ContractionProblem>(d);
    int64_t M = p.M, N = p.N, K = p.K;
    std::vector<KnobSet> out;
    if (!hw.gpu) {
      // One thread owns a tile; the micro-kernel packs B panels. Tiles from balanced splits of
      // each dimension: the A block (BM x BK) should live in L2, the B panel in L1 / L2.
      std::set<int64_t> bms, bns, bks;
      if (p.rowGroup) {
        // A band form's tiles are whole output rows: 1, 2, 4, ... rows or the whole image, in
        // balanced tiles, while the band a tile fills stays within half of L2.
        for (int64_t r : {1, 2, 4, 8, 16, 32, 64}) {
          int64_t rows = ceilDiv(p.rowGroups, ceilDiv(p.rowGroups, std::min(r, p.rowGroups)));
          if (rows == 1 || p.bandBytes0 + (rows - 1) * p.bandRowBytes <= hw.l2Bytes / 2)
            bms.insert(rows * p.rowGroup);
        }
      } else {
        for (int64_t t : {32, 64, 128, 256})
          bms.insert(balanced(M, t, 8));
      }
      // Column tiles aligned to 32, and to 16 (the micro-kernel's panel width) where that
      // pads less (N = 196 pixels: one tile of 208 rather than 224).
      // Panels 64 wide (a blocked conv's weight, N a multiple of 64): tiles of whole panels
      // that divide N, so that every block is the 7 x 64 micro-kernel and no tile ends in
      // padding (a ragged column tile guards its epilogue per lane, which GCC leaves scalar:
      // mobilenet_v3's 96 -> 576 convs with hard-swish, 55 us in tiles of 288, 93 in 320 + 256).
      // The same for panels 48 wide (N a multiple of 48: 8 x 48 blocks).
      const int64_t W = p.bPanelWidth;
      for (int64_t t : {64, 128, 256, 512}) {
        if (W >= 48) {
          for (int64_t bn = W; bn <= std::max(t, W); bn += W)
            if (N % bn == 0)
              bns.insert(bn);
          continue;
        }
        bns.insert(balanced(N, t, N >= 32 ? 32 : 16));
        bns.insert(balanced(N, t, 16));
      }
      // A row norm epilogue: one column tile of whole rows.
      if (p.normEpilogue)
        bns = {roundUp(N, 16)};
      for (int64_t t : {64, 128, 256})
        bks.insert(balanced(K, t, p.kAlign));
      // Operands read in place (mma_tile views) have no tile copy to keep small: the whole K
      // in one step keeps each accumulator block in registers across it.
      if (p.aInPlace && p.bPanels)
        for (int64_t t : {512, 1024})
          bks.insert(balanced(K, t, p.kAlign));
      // A band over a blocked input: k steps of whole input channel blocks (KH KW 16) whose
      // slice of a 64-wide weight panel stays in L1 with the row block's A (costShape).
      if (p.channelBlockK > 0 && W >= 48)
        for (int64_t bk = p.channelBlockK; bk <= K; bk += p.channelBlockK)
          if (l1Slice(bk, W, hostRegisterBlock(W / 16, {hw.vectorBits, hw.vectorRegisters()}).rows,
                      hw))
            bks.insert(bk);
      for (int64_t bm : bms)
        for (int64_t bn : bns)
          for (int64_t bk : bks)
            out.push_back(knobsToMap(ContractionKnobs{bm, bn, bk, bm, bn, std::nullopt}));
      return out;
    }
    // GPU: block tiles of 32..128 (no larger than the padded problem), a register tile TM x TN
    // per thread, 64..256 threads per block.
    auto tiles = [](int64_t d) {
      std::vector<int64_t> t;
      for (int64_t v : {32, 64, 128})
        if (v == 32 || v / 2 < d)
          t.push_back(v);
      return t;
    };
    if (p.frag != kir::MmaFrag::None) {
      // Tensor cores: warp tiles of 8 TM x 4 TN, one to eight warps; K steps of whole
      // instructions.
      int64_t fk = kir::mmaFragK(p.frag);
      for (int64_t bm : tiles(M))
        for (int64_t bn : tiles(N))
          for (int64_t bk : {16, 32, 64})
            for (int64_t tm : {2, 4, 8})
              for (int64_t tn : {2, 4, 8, 16}) {
                if (bk % fk || bk > std::max<int64_t>(16, roundUp(K, 16)) || bm % (8 * tm) ||
                    bn % (4 * tn))
                  continue;
                int64_t threads = (bm / (8 * tm)) * (bn / (4 * tn)) * 32;
                if (threads > 256)
                  continue;
                out.push_back(knobsToMap(ContractionKnobs{bm, bn, bk, tm, tn, std::nullopt}));
              }
      return out;
    }
    for (int64_t bm : tiles(M))
      for (int64_t bn : tiles(N))
        for (int64_t bk : {16, 32})
          for (int64_t tm : {2, 4, 8})
            for (int64_t tn : {2, 4, 8}) {
              if (bk > std::max<int64_t>(16, roundUp(K, 16)) || bm % tm || bn % tn)
                continue;
              int64_t threads = (bm / tm) * (bn / tn);
              if (threads < 64 || threads > 256)
                continue;
              out.push_back(knobsToMap(ContractionKnobs{bm, bn, bk, tm, tn, std::nullopt}));
            }
    return out;
  }
  CostShape costShape(const KernelGroup &, const kir::Kernel &k, const Hardware &hw,
                      int64_t flops) const override {
    CostShape s;
    s.flops = double(flops);
    int64_t lanes = std::max<int64_t>(1, hw.gpu ? 1 : hw.vectorLanesF32());
    const ContractionProblem &p = problemOf<ContractionProblem>(k);
    int64_t M = p.M, N = p.N, K = p.K, B = p.batch;
    int64_t BM = knobOf(k, &ContractionKnobs::BM, 1), BN = knobOf(k, &ContractionKnobs::BN, 1),
            BK = knobOf(k, &ContractionKnobs::BK, 1);
    int64_t TM = knobOf(k, &ContractionKnobs::TM, 1), TN = knobOf(k, &ContractionKnobs::TN, 1);
    double exact = 2.0 * double(B * M * N * K);
    double padded = 2.0 * double(B * roundUp(M, BM) * roundUp(N, BN) * roundUp(K, BK));
    // (epilogue FLOPs stay as they are; a band's skipped kernel rows cost nothing)
    s.flops = double(flops) - exact + padded * p.liveShare;
    int64_t kSteps = ceilDiv(K, BK);
    s.serialTiles = kSteps;
    s.rereadSet = tileSet(k);
    // A row norm folded into A: every block reads its BM rows of A twice for their statistics
    // and normalises each element it stages (~3 FLOPs each, beside the product's 2 K per
    // output element).
    double normElems = p.normRows ? double(BM * K) : 0.0; // per block
    s.flops += 6.0 * normElems * double(B * ceilDiv(M, BM) * ceilDiv(N, BN));
    // On a GPU each thread walks its rows' two passes serially before the first tile: about
    // two tile steps' worth of latency (unmeasured: the GPU path has not run on a GPU yet).
    if (hw.gpu && p.normRows)
      s.serialTiles += 2;
    if (hw.gpu && p.frag != kir::MmaFrag::None) {
      // Tensor cores (unmeasured: these kernels have not run on a GPU yet). Per k step a warp
      // loads TM / 2 A fragments (16 x fk) and TN / 2 B fragments (fk x 8) from shared memory
      // and issues (TM / 2)(TN / 2) instructions of 2 * 16 * 8 * fk FLOPs. Shared memory feeds
      // ~128 bytes a cycle an SM, the tensor cores want ~32 FLOPs per such byte at fp16 / bf16
      // (H100: 989 TFLOP/s over 132 SMs at 1.75 GHz), ~16 at tf32; mma.sync reaches ~2/3 of
      // the datasheet peak at best (wgmma, sm_90's full rate, is not used).
      const bool tf32 = p.frag == kir::MmaFrag::M16N8K8;
      const double fk = double(kir::mmaFragK(p.frag)), elem = tf32 ? 4.0 : 2.0;
      const double flops = double(TM / 2) * double(TN / 2) * 2.0 * 16.0 * 8.0 * fk;
      const double bytes = (double(TM / 2) * 16.0 + double(TN / 2) * 8.0) * fk * elem;
      s.tensorFlopsPerSec = tf32 ? hw.tensorTf32FlopsPerSec : hw.tensorF16FlopsPerSec;
      s.vectorShare = 0.65 * std::min(1.0, flops / bytes / (tf32 ? 16.0 : 32.0));
      return s;
    }
    if (hw.gpu) {
      // The accumulator tile stays in registers; FMAs per shared-memory load of the register
      // tile: TM·TN / (TM + TN); four or more keep the FMA pipes fed.
      double perLoad = double(TM * TN) / double(TM + TN);
      s.vectorShare = 0.7 * std::min(1.0, perLoad / 4.0);
      return s;
    }
    // Host, fitted on a sweep of every candidate of the GPT-2 block's four GEMMs on one core
    // (within-kernel rank correlation 0.89-0.97 for this form against 0 before):
    //  * the micro-kernel runs at ~89% of peak, losing ~0.056% per KiB of its working set (the
    //    A tile and one packed B panel, BK x 32) as that set leaves L1;
    //  * each tile gathers and packs its B tile (BK x BN) once per k step: ~0.45 cycles per
    //    element, so B is re-packed once per row of tiles (the dominant knob effect: BM);
    //  * A tile copies are contiguous rows (vectorised): negligible; narrow n tiles (under one
    //    vector) leave lanes idle.
    //  * operands read in place (mma_tile views): A's working set is the micro-kernel's row
    //    block (8 rows), not a staged tile; B in packed panels is not gathered at all.
    //  * every k step re-enters the micro-kernel once per 8 x 32 accumulator block, which loads
    //    that block from the tile (in L2 once the tile outgrows L1), fills its 16 FMA chains
    //    and stores it back: ~100 cycles a call (fitted on GPT-2's c_proj, K = 1024, on one
    //    AMD EPYC core: BK = 64 / 128 / 256 ran 0.63 / 0.61 / 0.60 ms), so short k steps on
    //    large tiles cost what the smaller B panel saves.
    //  * a blocked conv's B in 64-wide panels runs 7 x 64 blocks (28 accumulators) at ~5% more
    //    than the 8 x 32 rate (half the passes over the panel per row of A; resnet18's 64-channel
    //    3 x 3 convs 2.14 -> 2.03 ms).
    //  * 48-wide panels (N a multiple of 48, not of 64) run 8 x 48 blocks (24 accumulators),
    //    a third fewer passes over A than 8 x 32 blocks.
    //  * the register block follows the vector registers (host_micro_kernel.h): AVX2 7 x 16.
    bool wide = p.bPanels && p.bPanelWidth >= 48 && BN % p.bPanelWidth == 0;
    int64_t panelCols = wide ? p.bPanelWidth : 32;
    HostRegisterBlock rb = hostRegisterBlock(panelCols / 16, {hw.vectorBits, hw.vectorRegisters()});
    int64_t blockRows = rb.rows, blockCols = 16 * rb.groups;
    //  * a band's 7 x 64 blocks whose k step is whole input channel blocks with the weight
    //    slice in L1 (l1Slice) run ~9% faster than over a slice from L2: resnet18's 3 x 3 convs
    //    with BK = 144 (one channel block, 36 KB) against 576 / 384 / 768 / 512: layer1 1.38 ->
    //    1.23 ms, layer2 1.44 -> 1.33, layer3 1.48 -> 1.34, layer4 1.65 -> 1.47; BK = 192 (48
    //    KB) 1.33 and 96 / 128 (channel blocks split) 1.29 / 1.52 in layer1 / layer3.
    //    The band rows such a step reads (its channel blocks' share of the tile's band) should
    //    fit in L1 too: layer1 (56 pixels a row) at BK = 144 ran 1.23 ms in tiles of 4 or 8
    //    output rows (22 / 37 KB a step), 1.31 in 14 or 28 (59 / 111 KB); layer3 (14 a row) is
    //    fastest in tiles of 14 rows (16 KB).
    double slice = 1.0;
    if (wide && p.channelBlockK > 0 && p.rowGroup > 0) {
      int64_t R = std::max<int64_t>(1, BM / p.rowGroup);
      double bandStep =
          double(p.bandBytes0 + (R - 1) * p.bandRowBytes) * double(std::min(BK, K)) / double(K);
      bool aligned = BK % p.channelBlockK == 0 && l1Slice(BK, panelCols, blockRows, hw);
      slice = !aligned ? 0.91 : bandStep <= double(hw.l1dBytes) ? 1.0 : 0.94;
    }
    // A normalised by a folded row norm is staged one row block ahead of the micro-kernel's
    // use; measured, it runs as A in place does, plus its passes (kNormRowCycles).
    int64_t aRows = p.aInPlace || p.normRows ? blockRows : BM;
    double wsKiB = double(4 * (aRows * BK + BK * 32)) / 1024.0;
    // A tile one vector wide runs the 8 x 1 micro-kernel, ~0.8 of the 8 x 2 one's rate (it
    // loads a broadcast per FMA; mobilenet_v2's 32 -> 16 projection: 150 us, 85 GFLOP/s).
    double narrow = BN >= 2 * lanes ? 1.0 : BN >= lanes ? 0.82 : double(BN) / double(2 * lanes);
    s.vectorShare = (!wide                 ? 0.89
                     : p.bPanelWidth == 64 ? 0.935
                                           : 0.92) *
                    narrow * slice / (1.0 + 0.00056 * wsKiB);
    //  * bf16 pairs and int8 quads (B's packed panels): the dot-product instruction's products
    //    per lane (the hardware's rate) at a measured share of it: the int8 kernel ran resnet18's
    //    3 x 3 convs 2.84x as fast as the f32 one (2.07 -> 0.73 ms: 0.71 of vpdpbusd's 4x, the
    //    chunk's A converted to uint8 quads and the column sums beside it), the bf16 one its
    //    convs ~1.6x (0.8 of vdpbf16ps' 2x; AMD EPYC, one core, docs/precision.md).
    if (p.hostProducts == Precision::I8 && hw.int8DotProducts > 0)
      s.dotSpeedup = 0.71 * hw.int8DotProducts;
    else if (p.hostProducts == Precision::BF16 && hw.bf16DotProducts > 0)
      s.dotSpeedup = 0.8 * hw.bf16DotProducts;
    s.vectorShare *= s.dotSpeedup;
    double microCalls = double(kSteps * ceilDiv(TM, blockRows) * ceilDiv(TN, blockCols));
    // B read in place (a row view) is only packed by the micro-kernel (memcpy rows): ~0.2.
    double bCopy = p.bPanels ? 0.0 : p.bInPlace ? 0.2 : 0.45;
    s.scalarCycles = bCopy * double(roundUp(K, BK) * BN) + 100.0 * microCalls;
    // The folded norm's passes and its staging copy of A, per element of the block's rows.
    s.scalarCycles += kNormRowCycles * normElems;
    // A row norm epilogue: the norm's input back into the tile, two statistics passes and the
    // normalised store, ~1.5 cycles per element of the tile (unmeasured).
    if (p.normEpilogue)
      s.scalarCycles += 1.5 * double(BM * BN);
    // A fused tile (the init and epilogue on the micro-kernel's registers) touches its C tile
    // only between K steps: each step after the first stores and reloads it, its blocks'
    // accumulators per call, ~0.25 cycles a float of the block's tile. (Once fitted at ~1 cycle
    // a float of the whole output per block, counting each tile once per block; on this
    // project's Xeon squeezenet's 512 -> 1000 classifier conv now runs 1.32 ms in one K step
    // and in four, and resnet18's 3 x 3 convs are fastest in steps of one input channel block,
    // above.)
    if (p.fusedTile)
      s.scalarCycles += double(kSteps - 1) * double(BM * BN) * 0.25;
    s.scalarCycles += p.epilogueCycles * double(BM * BN);
    if (p.rowGroup) {
      // The band form of R = BM / OW output rows per tile (resnet18's 14 x 14 layer3, 2.36 MB
      // of weights: 2.33 ms at R = 1, 2.16 ms at R = 2..14; its 56 x 56 layer1, whose 147 KB
      // of weights stay in L2: 2.10 ms at every R):
      //  * each tile fills its band, ~0.1 cycles per float (vector copies), and applies a
      //    fused prologue per vector of 16 floats;
      //  * each row of tiles streams the whole weight once; beyond L2 its first pass over each
      //    k step's panel waits on L3, about half of that stream at L3 bandwidth, a quarter
      //    when the panels are prefetched a slice ahead (bStreamed: resnet18's layer4 3 x 3
      //    convs 2.08 -> 1.55 ms, against 1.3 ms with the weight in L2).
      // (Per block, as every scalar term: the tile's band, its BN columns of the weight.)
      int64_t R = std::max<int64_t>(1, BM / p.rowGroup);
      s.scalarCycles += (0.1 + p.bandPrologueCycles / 16.0) *
                        double(p.bandBytes0 + (R - 1) * p.bandRowBytes) / 4.0;
      if (p.bBytes > hw.l2Bytes / 2)
        s.scalarCycles += double(p.bBytes) * double(std::min(BN, N)) / double(N) /
                          ((p.bStreamed ? 4.0 : 2.0) * std::max(1.0, hw.l3BytesPerCycle));
    }
    return s;
  }
  // A is re-read per column of output tiles, B per row of them: an implicit-GEMM conv (rows =
  // output channels, columns = output pixels) re-reads its weights per column tile of pixels
  // and its input per row tile of channels. The grid runs (b, mt, nt) with nt innermost: a row
  // panel of A serves consecutive blocks, a column panel of B every nt-th one, so B stays in
  // the cache between uses only when the whole of it does, beside A's panel.
  Rereads rereads(const KernelGroup &g, const kir::Kernel &k, const Hardware &hw) const override {
    const Node *a = g.anchor;
    const ContractionProblem &p = problemOf<ContractionProblem>(k);
    bool gemm = a && (a->op() == Op::MatMul || a->op() == Op::Gemm || a->op() == Op::BlockedConv);
    if (!gemm && !(a && a->op() == Op::Conv))
      return {};
    // The operand seen as A (rows) and as B (columns): a conv's weight and input.
    int64_t aBytes = a->operand(gemm ? 0 : 1)->type().bytes();
    int64_t bBytes = a->operand(gemm ? 1 : 0)->type().bytes();
    int64_t mt = ceilDiv(p.M, knobOf(k, &ContractionKnobs::BM)),
            nt = ceilDiv(p.N, knobOf(k, &ContractionKnobs::BN));
    int64_t batch = std::max<int64_t>(1, p.batch), blocks = batch * mt * nt, set = tileSet(k);
    // Slices: A's row panels (of every batch entry A holds), B per batch entry it holds.
    auto entries = [&](int64_t bytes, int64_t perEntry) {
      return perEntry > 0 && bytes % perEntry == 0 ? std::clamp<int64_t>(bytes / perEntry, 1, batch)
                                                   : int64_t(1);
    };
    int64_t aSlices = entries(aBytes, 4 * p.M * p.K) * mt;
    int64_t bSlices = entries(bBytes, 4 * p.K * p.N);
    Rereads ra = rereadsOf(hw, aBytes, aSlices, nt, blocks, set);
    Rereads rb = rereadsOf(hw, bBytes, bSlices, mt, blocks, set + aBytes / aSlices, true);
    return {ra.memory + rb.memory, ra.cached + rb.cached};
  }
  // The accumulator tile and its operand fragments.
  int64_t registers(const kir::Kernel &k) const override {
    int64_t tm = knobOf(k, &ContractionKnobs::TM, 1), tn = knobOf(k, &ContractionKnobs::TN, 1);
    return 34 + tm * tn + 2 * (tm + tn);
  }
  double loadsInFlight() const override { return 8.0; }
  // On the host the A block and the B panel must stay in L2.
  std::vector<std::string> hostViolations(const CostShape &s, const Hardware &hw) const override {
    return tileSetViolations(s, hw);
  }

private:
  // The block's tiles: A (BM x BK), B (BK x BN) and the accumulator (BM x BN).
  static int64_t tileSet(const kir::Kernel &k) {
    int64_t BM = knobOf(k, &ContractionKnobs::BM, 1), BN = knobOf(k, &ContractionKnobs::BN, 1),
            BK = knobOf(k, &ContractionKnobs::BK, 1);
    return 4 * (BM * BK + BK * BN + BM * BN);
  }
  // Tile of at most `maxTile` that splits `d` into equal tiles, rounded up to `align` (132 rows
  // with maxTile 128: two tiles of 72, not 128 + 4).
  static int64_t balanced(int64_t d, int64_t maxTile, int64_t align) {
    d = std::max<int64_t>(d, 1);
    return roundUp(ceilDiv(d, ceilDiv(d, maxTile)), align);
  }
};

} // namespace

const Recipe &tiledContractionRecipe() {
  static const TiledContractionRecipe recipe;
  return recipe;
}

} // namespace aicf
