// The tiled_contraction recipe (tile_compatible_compute) for matmul (batched,
// broadcast batch dims, 1-D operands), gemm (transA / transB, alpha, beta, C) and conv with
// group 1 as an implicit GEMM: the tiled kernel built from a contraction spec
// (contraction_specs.cpp, contraction_conv_specs.cpp), with its operand views
// (contraction_views.cpp) and row norms (contraction_row_norm.cpp). The recipe object (knob
// candidates, pricing) is recipe_tiled_contraction_price.cpp's.
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

#include <algorithm>
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
    // (a bf16 / int8 weight's panel in k pairs / quads, as pack-weights lays every such weight)
    const int64_t group = r->buf->dtype == DType::BF16 ? 2 : r->buf->dtype == DType::I8 ? 4 : 1;
    return PanelView{r->buf, r->base, c.N, c.K * c.N, c.N, group};
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
  if (!isGpuPlan(knobs)) {
    E b = c.bAt(bi, ivar("aicf_kk"), ivar("aicf_col"));
    if (static_cast<bool>(b) &&
        b->kind == kir::Expr::Kind::Cast) // (an int8 / bf16 weight's load, widened)
      b = E(b->args[0]);
    const DType bt = b && b->buf ? b->buf->dtype : DType::F32;
    problem.bStored = bt == DType::BF16 ? Precision::BF16
                      : bt == DType::I8 ? Precision::I8
                                        : Precision::F32;
  }
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
  v.bTiles = bView && bView->group > 1 && knobs.get("tiles", 0) != 0;
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
  if (kn.values.count("tiles")) // AMX tiles: bf16 pair or int8 quad panels only (viewsMma)
    k.knobs["tiles"] = problem->hostProducts != Precision::F32 && kn.get("tiles", 0) != 0;
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

} // namespace aicf
