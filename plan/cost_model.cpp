// The cost model (see cost_model.h). Three parts: the facts of a kernel (FLOPs, bytes with
// re-reads, registers), the GPU occupancy formula, and the time estimate per target kind. The
// per-recipe knowledge (what a tile re-reads, which loop is a serial dependency chain, how well
// a recipe uses the vector units) is written out here, one branch per recipe, so the whole model
// can be read in one place.
#include "plan/cost_model.h"

#include "support/diagnostics.h"
#include "support/int_math.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace aicf {

namespace {

int64_t knob(const kir::Kernel &k, const char *name, int64_t dflt = 0) {
  auto it = k.knobs.find(name);
  return it == k.knobs.end() ? dflt : it->second;
}
int64_t extent(const kir::Kernel &k, const char *name, int64_t dflt = 0) {
  auto it = k.extents.find(name);
  return it == k.extents.end() ? dflt : it->second;
}

// Instruction cost of one element of an elementwise op, in FLOP-equivalents (a vectorised
// exp / erf / tanh is a short polynomial plus range reduction: ~20 operations).
int64_t elementCost(Op op) {
  switch (op) {
  case Op::Exp:
  case Op::Log:
  case Op::Tanh:
  case Op::Erf:
  case Op::Sigmoid:
  case Op::Gelu:
  case Op::Silu:
  case Op::Pow: return 20;
  case Op::Div:
  case Op::Sqrt:
  case Op::Reciprocal: return 4;
  default: return 1;
  }
}

} // namespace

int64_t estimateFlops(const KernelGroup &grp) {
  int64_t flops = 0;
  for (const Node *n : grp.nodes) {
    const TensorType &out = n->result()->type();
    int64_t numel = out.isStatic() ? out.numel() : 0;
    switch (n->op()) {
    case Op::MatMul: flops += 2 * numel * n->operand(0)->type().shape.back(); break;
    case Op::Gemm: {
      const TensorType &a = n->operand(0)->type();
      flops += 2 * numel * (n->i("transA") ? a.shape[0] : a.shape[1]);
      break;
    }
    case Op::Conv:
    case Op::ConvTranspose: {
      const TensorType &w = n->operand(1)->type();
      int64_t per = 1;
      for (int64_t d = 1; d < w.rank(); ++d)
        per *= w.shape[d];
      flops += 2 * numel * per;
      break;
    }
    case Op::Attention: {
      const TensorType &q = n->operand(0)->type(), &k = n->operand(1)->type();
      int64_t sk = k.shape[k.rank() - 2], d = q.shape.back();
      int64_t rows = q.numel() / d;
      flops += rows * sk * (2 * d + 2 * out.shape.back() + elementCost(Op::Exp));
      break;
    }
    case Op::LayerNorm:
    case Op::RmsNorm: flops += 8 * numel; break;
    case Op::Softmax:
    case Op::LogSoftmax: flops += (4 + elementCost(Op::Exp)) * numel; break;
    default: {
      int64_t in = 0;
      for (const Value *v : n->operands())
        in = std::max(in, v->type().isStatic() ? v->type().numel() : 0);
      flops += std::max(in, numel) * elementCost(n->op());
    }
    }
  }
  return flops;
}

int64_t predictedBytes(const KernelGroup &grp, const kir::Kernel &k, int64_t *compulsory) {
  int64_t once = 0;
  for (const Value *v : grp.inputs)
    once += v->type().bytes();
  for (const Value *v : grp.outputs)
    once += v->type().bytes();
  if (compulsory)
    *compulsory = once;
  const Node *a = grp.anchor;
  if (k.recipe == "tiled_contraction" && a && (a->op() == Op::MatMul || a->op() == Op::Gemm)) {
    int64_t M = extent(k, "M"), N = extent(k, "N");
    int64_t aBytes = a->operand(0)->type().bytes(), bBytes = a->operand(1)->type().bytes();
    return once + aBytes * (ceilDiv(N, knob(k, "BN")) - 1) +
           bBytes * (ceilDiv(M, knob(k, "BM")) - 1);
  }
  if (k.recipe == "tiled_contraction" && a && a->op() == Op::Conv) {
    // Implicit GEMM: the weights are re-read per row tile of output pixels, the input per
    // column tile of output channels.
    int64_t M = extent(k, "M"), N = extent(k, "N");
    int64_t xBytes = a->operand(0)->type().bytes(), wBytes = a->operand(1)->type().bytes();
    return once + wBytes * (ceilDiv(M, knob(k, "BM")) - 1) +
           xBytes * (ceilDiv(N, knob(k, "BN")) - 1);
  }
  if (k.recipe == "streaming_attention" && a) {
    int64_t kv = a->operand(1)->type().bytes() + a->operand(2)->type().bytes();
    return once + kv * (ceilDiv(extent(k, "Sq"), knob(k, "BR")) - 1);
  }
  return once;
}

Occupancy cudaOccupancy(const Hardware &hw, int64_t threads, int64_t regsPerThread,
                        int64_t smemPerBlock) {
  Occupancy o;
  int64_t warpsBlk = ceilDiv(threads, hw.warpSize);
  if (warpsBlk <= 0)
    return o;
  int64_t regs = std::clamp<int64_t>(regsPerThread, 1, hw.maxRegsPerThread);
  int64_t regsWarp = roundUp(regs * hw.warpSize, hw.regAllocUnit);
  // Warps per SM the register file allows, in multiples of the 4 warp schedulers.
  int64_t warpsByRegs = (hw.regsPerSm / regsWarp) / 4 * 4;
  int64_t byRegs = warpsByRegs / warpsBlk;
  int64_t bySmem = smemPerBlock > 0 ? hw.smemPerSm / roundUp(smemPerBlock + hw.smemReservedPerBlock,
                                                             hw.smemAllocUnit)
                                    : std::numeric_limits<int64_t>::max();
  int64_t byWarps = std::min(hw.maxBlocksPerSm, hw.maxWarpsPerSm() / warpsBlk);
  o.blocksPerSm = std::min({byRegs, bySmem, byWarps});
  o.limiter = o.blocksPerSm == byRegs        ? "registers"
              : o.blocksPerSm == bySmem      ? "shared memory"
              : byWarps == hw.maxBlocksPerSm ? "blocks"
                                             : "warps";
  o.warpsPerSm = o.blocksPerSm * warpsBlk;
  o.fraction = hw.maxWarpsPerSm() ? double(o.warpsPerSm) / double(hw.maxWarpsPerSm()) : 0;
  return o;
}

int64_t estimateRegisters(const kir::Kernel &k) {
  // Calibrated on the testdata models against ptxas (sm_80 / sm_89 / sm_90, CUDA 13; the
  // CUDA table of bench/costmodel.md reports the error): the
  // accumulator tile and its operand fragments for contractions; the score row, the output
  // row and the query row for attention; the vector fragments for streaming kernels.
  if (k.recipe == "tiled_contraction") {
    int64_t tm = knob(k, "TM", 1), tn = knob(k, "TN", 1);
    return 34 + tm * tn + 2 * (tm + tn);
  }
  if (k.recipe == "streaming_attention") {
    int64_t tm = std::max<int64_t>(1, knob(k, "BR", 1) / std::max<int64_t>(1, k.threads));
    return 32 + tm * (2 * knob(k, "BC", 1) + extent(k, "Dv") + extent(k, "D"));
  }
  if (k.recipe == "online_norm")
    return 18 + 2 * knob(k, "vec", 1) + 4 * knob(k, "cache_row", 0);
  if (k.recipe == "pooling")
    return 10 + 5 * knob(k, "vec", 1);
  if (k.recipe == "reduction")
    return 16;
  if (k.recipe == "direct_conv")
    return 28;
  return 12 + 2 * knob(k, "vec", 1); // pointwise, data movement
}

namespace {

int64_t gridBlocks(const kir::Kernel &k) {
  int64_t b = 1;
  for (const auto &[axis, n] : k.grid)
    b *= std::max<int64_t>(n, 1);
  return b;
}

int64_t sharedBytesOf(const kir::Kernel &k) {
  int64_t s = 0;
  for (const kir::BufferP &b : k.allocs)
    if (b->scope == kir::Scope::Shared)
      s += b->numel() * static_cast<int64_t>(dtypeSize(b->dtype));
  return s;
}

// What the recipe does per unit of work, beyond the group's FLOPs and bytes: the work it
// actually executes (tiles padded to full size), the bytes that come from a cache rather than
// from where the data lives (re-reads), how well it uses the vector units, and the length of
// the serial dependency chain each block walks.
struct Shape {
  double flops = 0;        // executed, padding included
  double rereadBytes = 0;  // served by a cache (tile re-reads, accumulator reloads)
  int64_t rereadSet = 0;   // bytes the re-reads need resident to hit the cache
  double vectorShare = 1;  // share of the vector lanes used (host) / of FMA peak (GPU)
  double chainSteps = 0;   // serial dependent steps per block
  double chainCycles = 4;  // latency of one step (cycles)
  int64_t serialTiles = 1; // tile steps per block with a barrier (GPU latency term)
  double scalarCycles = 0; // host: scalar work per block that does not vectorise (cycles)
};

Shape recipeShape(const KernelGroup &g, const kir::Kernel &k, const Hardware &hw, int64_t flops) {
  Shape s;
  s.flops = double(flops);
  int64_t lanes = std::max<int64_t>(1, hw.gpu ? 1 : hw.vectorLanesF32());
  int64_t threads = std::max<int64_t>(1, k.threads);
  int64_t vec = knob(k, "vec", 1);
  if (k.recipe == "tiled_contraction") {
    int64_t M = extent(k, "M", 1), N = extent(k, "N", 1), K = extent(k, "K", 1);
    int64_t B = extent(k, "batch", 1);
    int64_t BM = knob(k, "BM", 1), BN = knob(k, "BN", 1), BK = knob(k, "BK", 1);
    int64_t TM = knob(k, "TM", 1), TN = knob(k, "TN", 1);
    double exact = 2.0 * double(B * M * N * K);
    double padded = 2.0 * double(B * roundUp(M, BM) * roundUp(N, BN) * roundUp(K, BK));
    s.flops = double(flops) - exact + padded; // epilogue FLOPs stay as they are
    int64_t kSteps = ceilDiv(K, BK);
    s.serialTiles = kSteps;
    s.rereadSet = 4 * (BM * BK + BK * BN + BM * BN);
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
    //  * A tile copies are contiguous rows (vectorised): negligible; narrow n tiles (under two
    //    vectors) leave lanes idle.
    double wsKiB = double(4 * (BM * BK + BK * 32)) / 1024.0;
    s.vectorShare = 0.89 * std::min(1.0, double(BN) / double(2 * lanes)) / (1.0 + 0.00056 * wsKiB);
    s.scalarCycles = 0.45 * double(roundUp(K, BK) * BN);
    return s;
  }
  if (k.recipe == "streaming_attention") {
    int64_t B = extent(k, "batch", 1), Sq = extent(k, "Sq", 1), Sk = extent(k, "Sk", 1);
    int64_t D = extent(k, "D", 1), Dv = extent(k, "Dv", 1);
    int64_t BR = knob(k, "BR", 1), BC = knob(k, "BC", 1);
    int64_t nQT = ceilDiv(Sq, BR), nKT = ceilDiv(Sk, BC);
    double pairs = double(nQT * nKT);
    if (extent(k, "causal"))
      pairs = double(nQT) * (double(nKT) + 1.0) / 2.0;
    // Per (query tile, key tile): both products over full tiles, the exponentials, and the
    // rescaling of the output rows by exp(m_old - m_new).
    double perPair = double(BR * BC) * double(2 * D + 2 * Dv + 20) + double(BR * (Dv + 20));
    s.flops = double(B) * pairs * perPair;
    s.rereadBytes = 0; // K / V re-reads are in predictedBytes (they stream from memory)
    s.rereadSet = 4 * (BR * D + D * BC + BC * Dv + BR * BC);
    s.serialTiles = nKT;
    s.vectorShare = hw.gpu ? 0.35 : 0.3 * std::min(1.0, double(BC) / double(lanes));
    // The online-softmax state (m, l) of each row is a dependency chain across key tiles; on
    // the host each (row, key tile) also pays ~150 cycles of scalar bookkeeping (the running
    // max, the rescale factor, the loop set-up; measured on the GPT-2 block: BC 16 vs 64).
    double tilesPerRow = pairs / double(nQT);
    s.chainSteps = tilesPerRow * double(BR) / double(threads);
    s.chainCycles = 40;
    if (!hw.gpu)
      s.scalarCycles = tilesPerRow * double(BR) * 150.0;
    return s;
  }
  if (k.recipe == "online_norm" || k.recipe == "reduction") {
    int64_t len = extent(k, "len", 1);
    // Each thread folds its elements into one running state: len / (threads · vec) dependent
    // updates (a Welford update divides: a long chain), then the threads' states merge.
    // On the host a Welford update (with its division) is a ~13-cycle dependent step and the
    // vector width does not split the chain (each thread's running state is one (n, mean, M2)
    // triple; the search offers vec 1 only); the row is also ~3 cycles per element of
    // throughput. Measured on the GPT-2 layer norm (128 x 256, one core): threads 1 / 4 / 8 /
    // 16 / 32 take 210 / 84 / 62 / 48 / 48 us.
    bool welford = extent(k, "welford", 0) != 0;
    int64_t split = hw.gpu || !welford ? threads * std::max<int64_t>(vec, 1) : threads;
    s.chainSteps = double(ceilDiv(len, split)) + std::log2(double(threads));
    s.chainCycles = welford ? (hw.gpu ? 16 : 13) : 4;
    if (!hw.gpu && welford) {
      s.scalarCycles = 3.0 * double(len); // the measured per-element cost, FLOPs included
      s.flops = 0;
    }
    s.vectorShare =
        hw.gpu ? 0.5 : 0.5 * double(std::min(std::max<int64_t>(vec, 1), lanes)) / double(lanes);
    // Host softmax / log-softmax: the (max, sum) update rescales the running sum by an
    // exponential per element, scalar: ~15 cycles per element (measured: a [2,4,64,64]
    // softmax with its fused scale and causal mask takes ~230 us on one core).
    if (!hw.gpu && g.anchor &&
        (g.anchor->op() == Op::Softmax || g.anchor->op() == Op::LogSoftmax)) {
      s.scalarCycles = 15.0 * double(len);
      s.flops = 0;
    }
    if (k.recipe == "online_norm" && !knob(k, "cache_row", 0))
      s.rereadBytes = double(extent(k, "rows", 1) * len) * 4.0; // second pass over the row
    s.rereadSet = len * 4;
    return s;
  }
  if (k.recipe == "direct_conv") {
    s.vectorShare = hw.gpu ? 0.3 : 1.0 / double(lanes);
    s.chainSteps = double(extent(k, "taps", 1)) * double(ceilDiv(extent(k, "pixels", 1), threads));
    s.chainCycles = 4;
    return s;
  }
  // Flat loops (pointwise, data movement, pooling): independent elements; the vector width
  // is the explicit inner loop's.
  s.vectorShare =
      hw.gpu ? 0.5 : 0.6 * double(std::min(std::max<int64_t>(vec, 1), lanes)) / double(lanes);
  // Host gathers (transpose, split, concat, pooling windows) compute a multi-index per element
  // (64-bit divisions and remainders) and do not vectorise: ~7 cycles per element whatever the
  // knobs (measured: a 32K-element 4-d transpose takes ~108 us at every threads / vec setting),
  // and ~4 more per pooling tap.
  if (!hw.gpu && (k.recipe == "data_movement" || k.recipe == "pooling"))
    s.scalarCycles = (7.0 + 4.0 * double(k.recipe == "pooling" ? extent(k, "taps", 1) : 0)) *
                     double(std::max<int64_t>(threads, 1) * std::max<int64_t>(vec, 1));
  return s;
}

} // namespace

KernelCost evaluateKernel(const KernelGroup &g, const kir::Kernel &k, const Hardware &hw) {
  KernelCost c;
  c.flops = estimateFlops(g);
  c.bytes = predictedBytes(g, k, &c.lowerBoundBytes);
  c.sharedBytes = sharedBytesOf(k);
  Shape s = recipeShape(g, k, hw, c.flops);
  int64_t blocks = gridBlocks(k);
  int64_t threads = std::max<int64_t>(1, k.threads);
  const CostCoefficients &w = hw.cost;
  double rereadBytes = double(c.bytes - c.lowerBoundBytes) + s.rereadBytes;
  double compulsory = double(c.lowerBoundBytes);

  if (hw.gpu) {
    c.registers = estimateRegisters(k);
    if (threads > hw.maxThreadsPerBlock)
      c.violations.push_back(cat("threads ", threads, " > ", hw.maxThreadsPerBlock, " per block"));
    if (c.sharedBytes > hw.smemPerBlock)
      c.violations.push_back(
          cat("shared memory ", c.sharedBytes, " > ", hw.smemPerBlock, " bytes per block"));
    int64_t regs = std::min(c.registers, hw.maxRegsPerThread);
    if (regs * roundUp(threads, hw.warpSize) > hw.regsPerSm)
      c.violations.push_back(
          cat("registers ", regs, " x ", threads, " threads > ", hw.regsPerSm, " per SM"));
    c.occupancy = cudaOccupancy(hw, threads, regs, c.sharedBytes);
    if (c.violations.empty() && c.occupancy.blocksPerSm == 0)
      c.violations.push_back(cat("no block fits on an SM (", c.occupancy.limiter, ")"));
    if (c.violations.empty() && c.occupancy.fraction + 1e-9 < w.minOccupancy)
      c.violations.push_back(cat("occupancy ", c.occupancy.fraction, " < minimum ", w.minOccupancy,
                                 " (", c.occupancy.limiter, ")"));
    int64_t bps = std::max<int64_t>(1, c.occupancy.blocksPerSm);
    // Load balance: the busiest SM runs ceil(blocks / SMs) blocks.
    double perSm = double(blocks) / double(hw.sms);
    double busiest = std::ceil(perSm);
    c.parallelism = blocks >= hw.sms ? perSm / busiest : perSm;
    double resident = std::min<double>(double(bps), busiest);
    double warpsActive = resident * double(ceilDiv(threads, hw.warpSize));
    // Bytes in flight per SM (Little's law over ~0.6 us of DRAM latency): resident warps x 32
    // lanes x the access width x the independent loads per thread (tile copies issue many,
    // flat loops one per vector); one SM can draw at most ~3x its fair share of DRAM.
    double ilp = (k.recipe == "tiled_contraction" || k.recipe == "streaming_attention") ? 8.0 : 2.0;
    double inflight = warpsActive * double(hw.warpSize) * 4.0 *
                      double(std::max<int64_t>(1, knob(k, "vec", 1))) * ilp;
    double perSmBw = std::min(inflight / 0.6e-6, 3.0 * hw.dramBytesPerSec / double(hw.sms));
    // Below one block per SM only the busy SMs' share of bandwidth and FLOPs is used; above
    // it the busiest SM sets the time (tail).
    double smShare = std::min(1.0, perSm);
    double tail = blocks >= hw.sms ? c.parallelism : 1.0;
    double bw = std::min(hw.dramBytesPerSec, perSmBw * double(hw.sms) * smShare);
    double l2bw = 3.0 * bw; // tile re-reads hit L2
    c.trafficUs = 1e6 * (compulsory / bw + rereadBytes / l2bw) / tail;
    double issue = std::min(1.0, warpsActive / 8.0); // 4 schedulers, 2 warps each hide latency
    // A block that is not a whole number of warps leaves lanes idle.
    double laneUse = double(threads) / double(roundUp(threads, hw.warpSize));
    double peak = hw.fp32FlopsPerSec * smShare * s.vectorShare * issue * laneUse;
    c.computeUs = 1e6 * s.flops / std::max(peak, 1.0) / tail;
    // Latency: the launch, plus one global-memory round trip (~0.5 µs) per serial tile step per
    // round of blocks, hidden by the other resident blocks.
    double rounds = std::ceil(busiest / double(bps));
    c.latencyUs = hw.launchUs + rounds * double(s.serialTiles) * 0.5 / resident;
    if (c.registers > hw.maxRegsPerThread) {
      c.spillBytes = (c.registers - hw.maxRegsPerThread) * 4 * 2 * threads * blocks *
                     std::max<int64_t>(1, s.serialTiles);
      c.spillUs = 1e6 * double(c.spillBytes) / l2bw;
    }
    c.overlapUs =
        w.delta * std::min(1.0, c.occupancy.fraction / 0.25) * std::min(c.trafficUs, c.computeUs);
  } else {
    int64_t cores = std::max<int64_t>(1, hw.cores);
    double perCore = double(blocks) / double(cores);
    double busiest = std::ceil(perCore);
    c.parallelism = blocks >= cores ? perCore / busiest : perCore;
    double busy = double(std::min(blocks, cores));
    double hz = hw.ghz * 1e9;
    // Where the compulsory bytes come from: the caches of the busy cores if they fit (the
    // previous kernel just wrote them), else L3, else DRAM.
    double l2 = double(hw.l2Bytes) * busy, l3 = double(hw.l3Bytes);
    double bwCompulsory = compulsory <= l2   ? hw.l2BytesPerCycle * hz * busy
                          : compulsory <= l3 ? hw.l3BytesPerCycle * hz * busy
                                             : hw.dramBytesPerSec;
    double bwReread = double(s.rereadSet) <= double(hw.l1dBytes)  ? hw.l1BytesPerCycle * hz * busy
                      : double(s.rereadSet) <= double(hw.l2Bytes) ? hw.l2BytesPerCycle * hz * busy
                                                                  : hw.l3BytesPerCycle * hz * busy;
    c.trafficUs = 1e6 * (compulsory / bwCompulsory + rereadBytes / bwReread);
    double peakCore = hz * double(hw.vectorLanesF32()) * 2.0 * double(hw.fmaUnits);
    c.computeUs =
        1e6 * s.flops / (peakCore * s.vectorShare * double(cores) * std::max(c.parallelism, 1e-9)) +
        1e6 * busiest * s.scalarCycles / hz;
    // Serial chains: each core walks its blocks' chains one after another.
    double chainUs = 1e6 * busiest * s.chainSteps * s.chainCycles / hz;
    // Dispatch (OpenMP fork / join), ~0.5 cycles of set-up per block (measured: flat loops
    // take the same time at 16 or 1 element per block), and the serial chains, which the
    // out-of-order core overlaps with the throughput work only in part (max + half the min
    // fits the layer-norm thread sweep above).
    c.latencyUs = hw.launchUs + 1e6 * busiest * 0.5 / hz + std::max(0.0, chainUs - c.computeUs) +
                  0.5 * std::min(chainUs, c.computeUs);
    if (k.recipe == "tiled_contraction" && s.rereadSet > hw.l2Bytes)
      c.violations.push_back(
          cat("tile working set ", s.rereadSet, " bytes > L2 ", hw.l2Bytes, " bytes"));
    c.overlapUs = w.delta * std::min(c.trafficUs, c.computeUs);
  }
  c.timeUs = w.alpha * c.trafficUs + c.computeUs + w.beta * c.latencyUs + w.gamma * c.spillUs -
             c.overlapUs;
  return c;
}

namespace {

// A streaming elementwise pass over `bytes` with `flops` of work on the whole machine: DRAM (or
// the host cache level the bytes fit in) and the FMA peak at the flat-loop efficiency.
double streamUs(const Hardware &hw, double bytes, double flops) {
  if (hw.gpu)
    return 1e6 * (bytes / hw.dramBytesPerSec + flops / (0.5 * hw.fp32FlopsPerSec));
  double hz = hw.ghz * 1e9, cores = double(std::max<int64_t>(1, hw.cores));
  double bw = bytes <= double(hw.l2Bytes) * cores ? hw.l2BytesPerCycle * hz * cores
              : bytes <= double(hw.l3Bytes)       ? hw.l3BytesPerCycle * hz * cores
                                                  : hw.dramBytesPerSec;
  return 1e6 * (bytes / bw + flops / (0.6 * hw.peakFlops()));
}

} // namespace

RematCost rematerializationCost(const Hardware &hw, int64_t inBytes, int64_t outBytes,
                                int64_t flops, int consumers) {
  RematCost c;
  double n = double(std::max(consumers, 1));
  c.storeUs = hw.launchUs + streamUs(hw, double(inBytes + outBytes), double(flops)) +
              n * streamUs(hw, double(outBytes), 0);
  c.recomputeUs = n * streamUs(hw, double(inBytes), double(flops));
  return c;
}

RematCostFn rematCostFor(const Hardware &hw) {
  return [&hw](const KernelGroup &probe, int64_t inBytes, int64_t outBytes, int consumers) {
    return rematerializationCost(hw, inBytes, outBytes, estimateFlops(probe), consumers);
  };
}

} // namespace aicf
