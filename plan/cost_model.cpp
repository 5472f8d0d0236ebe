// The cost model (see cost_model.h). Three parts: the facts of a kernel (FLOPs, bytes with
// re-reads), the GPU occupancy formula, and the time estimate per target kind. The per-recipe
// knowledge (what a tile re-reads, which loop is a serial dependency chain, how well a recipe
// uses the vector units, its registers) is the recipe's (lower/recipe.h CostShape, in each
// lower/recipe_<name>.cpp); this file keeps only the generic terms.
#include "plan/cost_model.h"

#include "support/diagnostics.h"
#include "support/int_math.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace aicf {

namespace {

// Instruction cost of one element of an elementwise op, in FLOP-equivalents (a vectorised
// exp / erf / tanh is a short polynomial plus range reduction: ~20 operations).
int64_t elementCost(Op op) {
  if (isTranscendental(op))
    return 20;
  switch (op) {
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
    // A layout op folded into the group (lower/fusion.h, rule 0) is index arithmetic in the
    // reader's loads, not work of its own.
    if (n != grp.anchor && isLayoutOp(*n))
      continue;
    const TensorType &out = n->result()->type();
    int64_t numel = out.isStatic() ? out.numel() : 0;
    switch (n->op()) {
    case Op::MatMul: flops += 2 * numel * n->operand(0)->type().shape.back(); break;
    case Op::Gemm: {
      const TensorType &a = n->operand(0)->type();
      flops += 2 * numel * (n->i("transA") ? a.shape[0] : a.shape[1]);
      break;
    }
    case Op::BlockedConv: { // w [K, 16 OCB / group], or depthwise [CB, KH, KW, 16]
      const auto &ks = n->ints("kernel_shape");
      int64_t per =
          n->i("depthwise") ? ks[0] * ks[1] : n->operand(1)->type().shape[0] / n->i("group");
      flops += 2 * numel * per;
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

namespace {

// The bytes of `v` (a group input, or a view of one) that group `grp` reads: all of v, unless
// every node of the group reading it is a folded split or slice (rule 0), or a reshape whose
// result is read so: then only the pieces they take, each once. merge-siblings' q, k and v read
// through a split: the rotary kernel reads k's columns of the merged projection, not all of it.
int64_t bytesRead(const KernelGroup &grp, const Value *v, int depth = 0) {
  const int64_t whole = v->type().bytes();
  if (depth > 4)
    return whole;
  std::vector<const Value *> pieces;
  int64_t sum = 0;
  bool read = false;
  for (const Node *n : grp.nodes) {
    if (std::find(n->operands().begin(), n->operands().end(), v) == n->operands().end())
      continue;
    read = true;
    if (n->op() == Op::Reshape) {
      sum += bytesRead(grp, n->result(), depth + 1);
      continue;
    }
    if (n->op() != Op::Split && n->op() != Op::Slice)
      return whole;
    for (const Value *r : n->results()) {
      bool used = std::any_of(grp.nodes.begin(), grp.nodes.end(), [&](const Node *m) {
        return std::find(m->operands().begin(), m->operands().end(), r) != m->operands().end();
      });
      if (used && std::find(pieces.begin(), pieces.end(), r) == pieces.end()) {
        pieces.push_back(r);
        sum += r->type().bytes();
      }
    }
  }
  return read ? std::min(whole, sum) : whole;
}

} // namespace

int64_t predictedBytes(const KernelGroup &grp, const Recipe &recipe, const kir::Kernel &k,
                       const Hardware &hw, int64_t *compulsory, Rereads *rereads) {
  int64_t once = 0;
  for (const Value *v : grp.inputs)
    once += bytesRead(grp, v);
  for (const Value *v : grp.outputs)
    once += v->type().bytes();
  if (compulsory)
    *compulsory = once;
  Rereads r = recipe.rereads(grp, k, hw);
  if (rereads)
    *rereads = r;
  return once + r.memory;
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

// The host terms of a kernel's cost on `cores` cores (evaluateKernel).
void hostTerms(KernelCost &c, const CostShape &s, const Recipe &recipe, const Hardware &hw,
               int64_t blocks, double compulsory, double rereadBytes, int64_t cores) {
  const CostCoefficients &w = hw.cost;
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
  for (std::string &v : recipe.hostViolations(s, hw))
    c.violations.push_back(std::move(v));
  c.overlapUs = w.delta * std::min(c.trafficUs, c.computeUs);
}

} // namespace

KernelCost evaluateKernel(const KernelGroup &g, const Recipe &recipe, const kir::Kernel &k,
                          const Hardware &hw) {
  KernelCost c;
  c.flops = estimateFlops(g);
  Rereads rereads;
  c.bytes = predictedBytes(g, recipe, k, hw, &c.lowerBoundBytes, &rereads);
  c.sharedBytes = sharedBytesOf(k);
  CostShape s = recipe.costShape(g, k, hw, c.flops);
  int64_t blocks = gridBlocks(k);
  int64_t threads = std::max<int64_t>(1, k.threads);
  const CostCoefficients &w = hw.cost;
  // Every re-read is priced at the cache's bandwidth (the tiles keep what they re-read close),
  // whether or not the operand stays there between uses (which decides the bytes moved).
  double rereadBytes = double(rereads.memory + rereads.cached) + s.rereadBytes;
  double compulsory = double(c.lowerBoundBytes);

  if (hw.gpu) {
    c.registers = recipe.registers(k);
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
    double ilp = recipe.loadsInFlight();
    double inflight = warpsActive * double(hw.warpSize) * 4.0 *
                      double(std::max<int64_t>(1, knobOf(k, "vec", 1))) * ilp;
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
    const bool tensor = s.tensorFlopsPerSec > 0;
    double peak = (tensor ? s.tensorFlopsPerSec : hw.fp32FlopsPerSec) * smShare * s.vectorShare *
                  issue * laneUse;
    c.computeUs = 1e6 * s.flops / std::max(peak, 1.0) / tail;
    // The same tile in fp32 SIMT (FMAs at 70% of the f32 peak, the register tile's best), for
    // --explain's predicted speedup of the tensor cores.
    double simtUs =
        tensor ? 1e6 * s.flops /
                     std::max(hw.fp32FlopsPerSec * smShare * 0.7 * issue * laneUse, 1.0) / tail
               : 0.0;
    // Latency: the launch, plus one global-memory round trip (~0.5 µs) per serial tile step per
    // round of blocks, hidden by the other resident blocks.
    double rounds = std::ceil(busiest / double(bps));
    c.latencyUs = hw.launchUs + rounds * double(s.serialTiles) * 0.5 / resident;
    if (c.registers > hw.maxRegsPerThread) {
      c.spillBytes = (c.registers - hw.maxRegsPerThread) * 4 * 2 * threads * blocks *
                     std::max<int64_t>(1, s.serialTiles);
      c.spillUs = 1e6 * double(c.spillBytes) / l2bw;
    }
    const double overlapShare = w.delta * std::min(1.0, c.occupancy.fraction / 0.25);
    c.overlapUs = overlapShare * std::min(c.trafficUs, c.computeUs);
    if (tensor)
      c.fp32TimeUs = w.alpha * c.trafficUs + simtUs + w.beta * c.latencyUs + w.gamma * c.spillUs -
                     overlapShare * std::min(c.trafficUs, simtUs);
  } else {
    hostTerms(c, s, recipe, hw, blocks, compulsory, rereadBytes, std::max<int64_t>(1, hw.cores));
    // A step with less work than kHostSerialUs runs whole on the calling thread (hostChunks):
    // priced on one core (the RMSNorm of LLaMA's block, 128 x 256: 4 us predicted over two
    // cores, 15-17 us measured at one thread and at two).
    double t = w.alpha * c.trafficUs + c.computeUs + w.beta * c.latencyUs - c.overlapUs;
    if (hw.cores > 1 && t * double(hw.cores) < kHostSerialUs) {
      c.violations.clear();
      hostTerms(c, s, recipe, hw, blocks, compulsory, rereadBytes, 1);
      c.serial = true;
    }
    if (s.dotSpeedup != 1) { // bf16 / int8 products: the same tiles in f32, for --explain
      KernelCost f32 = c;
      CostShape s32 = s;
      s32.vectorShare /= s.dotSpeedup;
      hostTerms(f32, s32, recipe, hw, blocks, compulsory, rereadBytes,
                c.serial ? 1 : std::max<int64_t>(1, hw.cores));
      c.fp32TimeUs = w.alpha * f32.trafficUs + f32.computeUs + w.beta * f32.latencyUs +
                     w.gamma * f32.spillUs - f32.overlapUs;
    }
  }
  c.timeUs = w.alpha * c.trafficUs + c.computeUs + w.beta * c.latencyUs + w.gamma * c.spillUs -
             c.overlapUs;
  if (!hw.gpu && hw.cores > 1) {
    // The prediction a one-thread run is measured against (the plan is priced for every core).
    KernelCost one = c;
    if (!c.serial)
      hostTerms(one, s, recipe, hw, blocks, compulsory, rereadBytes, 1);
    c.oneCoreUs = w.alpha * one.trafficUs + one.computeUs + w.beta * one.latencyUs +
                  w.gamma * one.spillUs - one.overlapUs;
  }
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

namespace {

// Bytes one element read through `map` really moves, walking domain dim d fastest.
double bytesPerElement(const IndexMap &map, int d, double elem, double transaction) {
  std::optional<IndexMap::Stride> s = map.strideOf(d);
  if (!s) // an irregular gather: one transaction per element
    return std::max(elem, transaction);
  double stride = double(s->step < 0 ? -s->step : s->step);
  if (stride == 0)
    return elem;   // a broadcast: the same element again
  if (stride == 1) // contiguous runs: a transaction per run at least
    return std::max(elem, transaction / double(s->run));
  return std::min(stride * elem, std::max(elem, transaction));
}

// How many times `reader` reads operand `which`: a contraction reads A once per column tile
// and B once per row tile, attention K and V once per query tile (tiles of 64), a depthwise
// blocked conv its input once per tap over the stride (the direct form loads every tap's
// vector from the input; it stages nothing).
double rereads(const Node &reader, size_t which) {
  if (reader.op() == Op::BlockedConv && which == 0 && reader.i("depthwise") == 1) {
    int64_t taps = product(reader.ints("kernel_shape")), step = product(reader.ints("strides"));
    return double(std::max<int64_t>(1, taps / std::max<int64_t>(step, 1)));
  }
  const std::vector<int64_t> &out = reader.result(0)->type().shape;
  if (reader.info().has(CONTRACT) && reader.op() != Op::Conv && out.size() >= 2 && which < 2)
    return double(std::max<int64_t>(1, ceilDiv(out[out.size() - (which == 0 ? 1 : 2)], 64)));
  if (reader.op() == Op::Attention && (which == 1 || which == 2)) {
    const std::vector<int64_t> &q = reader.operand(0)->type().shape;
    return q.size() >= 2 ? double(std::max<int64_t>(1, ceilDiv(q[q.size() - 2], 64))) : 1;
  }
  return 1;
}

} // namespace

LayoutCost layoutFoldCost(const Hardware &hw, const LayoutRead &read) {
  LayoutCost c;
  const IndexMap &m = read.map;
  int64_t n = 1;
  for (int64_t d : m.domain)
    n *= d;
  double elem = n > 0 ? double(read.bytes) / double(n) : 4;
  double transaction = hw.gpu ? 32 : 64;
  std::vector<int> dims; // the domain's non-1 dims, innermost first
  for (size_t d = m.domain.size(); d-- > 0;)
    if (m.domain[d] != 1)
      dims.push_back(static_cast<int>(d));
  double per = elem;
  if (!dims.empty()) {
    per = bytesPerElement(m, dims[0], elem, transaction);
    // Tile copies can walk either of the two innermost dims; a blocked conv reads its input's
    // 16 lanes innermost, whatever the map.
    bool tiled = (read.reader->info().has(CONTRACT) && read.reader->op() != Op::BlockedConv) ||
                 read.reader->op() == Op::Attention;
    if (tiled && dims.size() > 1)
      per = std::min(per, bytesPerElement(m, dims[1], elem, transaction));
  }
  double wasted =
      double(n) * (per - elem) * rereads(*read.reader, static_cast<size_t>(read.operand));
  c.foldUs = streamUs(hw, wasted, 0);
  c.materializeUs = hw.launchUs + streamUs(hw, double(n) * per + double(read.bytes), 0);
  return c;
}

LayoutCostFn layoutCostFor(const Hardware &hw) {
  return [&hw](const LayoutRead &r) { return layoutFoldCost(hw, r); };
}

int64_t hostChunks(const Hardware &hw, int64_t blocks, double timeUs) {
  double work = timeUs * double(std::max<int64_t>(1, hw.cores)); // one core's time
  if (blocks <= 1 || work < kHostSerialUs)
    return 1;
  int64_t chunks = static_cast<int64_t>(std::ceil(work / kHostChunkUs));
  return std::clamp<int64_t>(chunks, 1, std::min<int64_t>(blocks, 0xffff));
}

} // namespace aicf
