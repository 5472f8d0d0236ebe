// The tiled_contraction recipe object: which anchors it takes, its knob candidates (host tiles
// from balanced splits that keep the A block in L2 and the B panel in L1 / L2; GPU thread-tile
// grids) and its cost shape (padded FLOPs, operand traffic and re-reads, micro-kernel terms).
// The kernel it builds is recipe_tiled_contraction.cpp's.
#include "lower/contraction.h"
#include "lower/recipe_support.h"
#include "lower/recipes.h"

#include "ir/graph.h"
#include "support/host_micro_kernel.h"

#include <algorithm>
#include <numeric>
#include <set>

namespace aicf {

using namespace recipe;
using namespace contraction;

namespace {

// Host cycles per element of a block's A rows for a row norm folded into A, beyond its FLOPs:
// the two statistics passes and the normalising tile copy. Fitted on one core of an AMD EPYC
// (issue 17): the folded GEMMs of the GPT-2, ViT and LLaMA blocks ran 8-13 us slower than
// their plain forms per 64 K elements of block rows (0.35-1.0 cycles per element, ~0.5 mean).
constexpr double kNormRowCycles = 0.5;

// bf16 products on AMX tiles, fitted on one core of this project's Xeon (Sapphire Rapids class,
// 2026-12-05): the tile loop (2 x 2 C tiles, their A and B tiles loaded per k tile) ran
// tdpbf16ps at 28 ns with its tiles in L1, 55 ns from L2 (a micro-benchmark), and resnet18's
// 64-channel 3 x 3 conv at 355 GFLOP/s inside the loop: ~0.17 of the tiles' nominal 16 products
// per f32 lane-cycle (cpu.amx_bf16_products). Per k step each C element is staged through
// memory into the tiles and back, ~1.3 cycles (the conv at k steps of 144 / 288 / 576: 1.47 /
// 1.29 / 1.11 ms); each A element is rounded into tile rows, ~0.3 cycles (perf: 18% of
// resnet18).
constexpr double kAmxShare = 0.17, kAmxStageCycles = 1.3, kAmxPackCycles = 0.3;

// The tiles' products per f32 lane-cycle for the problem's B (0: none on this CPU and -march),
// and the k of one tile (64 bytes of a row: 32 bf16 pairs' k, 64 int8 quads' k).
double amxProducts(const ContractionProblem &p, const Hardware &hw) {
  if (p.hostProducts == Precision::I8 || p.bStored == Precision::I8)
    return hw.amxInt8Products;
  return p.hostProducts == Precision::BF16 || p.bStored == Precision::BF16 ? hw.amxBf16Products
                                                                           : 0.0;
}
int64_t amxK(const ContractionProblem &p) {
  return p.hostProducts == Precision::I8 || p.bStored == Precision::I8 ? 64 : 32;
}

// A host tile's FLOPs and per-block cycles on AMX tiles (host_amx_prelude.cpp): products in
// whole tiles of 16 rows, 16 columns and 32 k; each k step packs the tile's A into tile rows
// (once per column tile) and stages its C through memory into the tile registers and back (the
// init or C in, the epilogue or C out), which the vector kernel does on its registers; nothing
// else per call.
void amxTileTerms(CostShape &s, const ContractionProblem &p, int64_t flops, int64_t BM, int64_t BN,
                  int64_t BK, double bCopy) {
  const int64_t kSteps = ceilDiv(p.K, BK), kPadded = kSteps * roundUp(std::min(BK, p.K), amxK(p));
  s.flops = double(flops) - 2.0 * double(p.batch * p.M * p.N * p.K) +
            2.0 * double(p.batch * roundUp(p.M, 16) * roundUp(p.N, 16) * kPadded) * p.liveShare;
  s.scalarCycles = kAmxStageCycles * double(kSteps * BM * BN) +
                   kAmxPackCycles * double(BM * kPadded) + bCopy * double(kPadded * BN);
}

// bf16 pairs and int8 quads (B's packed panels): the dot-product instruction's products per
// lane (the hardware's rate) at a measured share of it: the int8 kernel ran resnet18's 3 x 3
// convs 2.84x as fast as the f32 one (2.07 -> 0.73 ms: 0.71 of vpdpbusd's 4x, the chunk's A
// converted to uint8 quads and the column sums beside it), the bf16 one its convs ~1.6x (0.8 of
// vdpbf16ps' 2x; AMD EPYC, one core, docs/precision.md). On AMX tiles: kAmxShare of their rate,
// against the vector kernel's share f32 (the multiple of it the tiles give).
double dotSpeedup(const ContractionProblem &p, const Hardware &hw, bool tiles, double f32) {
  if (tiles)
    return kAmxShare * amxProducts(p, hw) / f32;
  if (p.hostProducts == Precision::I8 && hw.int8DotProducts > 0)
    return 0.71 * hw.int8DotProducts;
  if (p.hostProducts == Precision::BF16 && hw.bf16DotProducts > 0)
    return 0.8 * hw.bf16DotProducts;
  return 1.0;
}

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
      // bf16 / int8 products where the CPU and the folder's -march have AMX tiles: each tile
      // also on the tiles, in k steps of whole tiles (32 / 64 k) up to the whole K (C stays in
      // the tile registers across a step, and is staged through memory between steps).
      const bool amx = amxProducts(p, hw) > 0;
      std::set<int64_t> tileBks;
      if (amx)
        for (int64_t t : {128, 256, 512, 1024, 2048, 4096})
          tileBks.insert(balanced(K, t, std::lcm<int64_t>(amxK(p), p.kAlign)));
      for (int64_t bm : bms)
        for (int64_t bn : bns) {
          for (int64_t bk : bks)
            out.push_back(knobsToMap(ContractionKnobs{
                bm, bn, bk, bm, bn, std::nullopt, amx ? std::optional<int64_t>(0) : std::nullopt}));
          for (int64_t bk : tileBks)
            out.push_back(knobsToMap(ContractionKnobs{bm, bn, bk, bm, bn, std::nullopt, 1}));
        }
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
                out.push_back(
                    knobsToMap(ContractionKnobs{bm, bn, bk, tm, tn, std::nullopt, std::nullopt}));
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
              out.push_back(
                  knobsToMap(ContractionKnobs{bm, bn, bk, tm, tn, std::nullopt, std::nullopt}));
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
    //  * bf16 pairs and int8 quads, and AMX tiles: dotSpeedup (above the class).
    // (A tile that reads B in rows, not as its pair / quad panels, runs the vector kernel.)
    const bool tiles =
        knobOf(k, &ContractionKnobs::tiles, 0) != 0 && p.hostProducts != Precision::F32;
    s.dotSpeedup = dotSpeedup(p, hw, tiles, s.vectorShare);
    s.vectorShare *= s.dotSpeedup;
    // B read in place (a row view) is only packed by the micro-kernel (memcpy rows): ~0.2.
    double bCopy = p.bPanels ? 0.0 : p.bInPlace ? 0.2 : 0.45;
    if (tiles) {
      amxTileTerms(s, p, flops, BM, BN, BK, bCopy);
    } else {
      double microCalls = double(kSteps * ceilDiv(TM, blockRows) * ceilDiv(TN, blockCols));
      s.scalarCycles = bCopy * double(roundUp(K, BK) * BN) + 100.0 * microCalls;
    }
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
    if (p.fusedTile && !tiles)
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
