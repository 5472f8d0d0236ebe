// The cost model (docs/cost-model.md, seed 001): what one lowered kernel costs on one piece of
// hardware, and whether it fits at all. A kernel's cost is a predicted time in microseconds,
//   cost = α·traffic + β·latency + γ·spill − δ·parallelism
// with each term itself a time:
//   traffic      bytes / achievable bandwidth: compulsory bytes at the level the data lives in
//                (DRAM, or a cache it fits in), tile re-reads at the cache that holds them;
//                achievable bandwidth grows with the bytes in flight (warps, vector width)
//   compute      FLOPs / (peak · the share of the machine the grid keeps busy), added to the
//                traffic (XLA's t = c + m − overlap)
//   latency      launch overhead, per-block overhead and serial dependency chains (the k loop
//                of a reduction, a norm's running state) that parallelism does not hide
//   spill        registers beyond the per-thread maximum, stored and reloaded
//   parallelism  the overlap of compute and traffic that concurrency buys: δ·min(c, m), scaled
//                by occupancy on GPUs
// Constraints reject a candidate outright: threads per block, shared memory per block (static
// and dynamic), registers per block, a zero-block occupancy, occupancy below the description's
// minimum; on the host, a contraction tile whose A block does not fit in L2.
// The GPU occupancy is the CUDA occupancy calculator's (docs/cost-model.md): registers allocated
// per warp in units, warp granularity, shared-memory allocation units and the 1 KB per-block
// reserve.
#pragma once

#include "kir/kir.h"
#include "lower/fusion.h"
#include "lower/recipe.h"
#include "target/hardware.h"

#include <cstdint>
#include <string>
#include <vector>

namespace aicf {

struct Occupancy {
  int64_t blocksPerSm = 0;
  int64_t warpsPerSm = 0;
  double fraction = 0; // resident warps / the SM's maximum
  std::string limiter; // "registers", "shared memory", "warps", "blocks"
};

// The CUDA occupancy formula for blocks of `threads` threads using `regsPerThread` registers and
// `smemPerBlock` bytes of shared memory (static + dynamic). 0 blocks when one block cannot fit.
Occupancy cudaOccupancy(const Hardware &hw, int64_t threads, int64_t regsPerThread,
                        int64_t smemPerBlock);

// Floating-point operations of a group (transcendentals weighted by their instruction cost).
int64_t estimateFlops(const KernelGroup &g);
// Bytes moved on `hw`: each param once plus the re-reads the kernel's tiling implies that come
// from memory (the recipe's rereads: A per column of output tiles, B per row of them; K and V
// per query tile; those a cache keeps between uses are not moved again); `compulsory`
// receives each param once, `rereads` the recipe's re-reads (moved and cached).
int64_t predictedBytes(const KernelGroup &g, const Recipe &recipe, const kir::Kernel &k,
                       const Hardware &hw, int64_t *compulsory = nullptr,
                       Rereads *rereads = nullptr);

struct KernelCost {
  int64_t bytes = 0;           // predicted traffic, re-reads included
  int64_t lowerBoundBytes = 0; // each param once
  int64_t flops = 0;
  int64_t sharedBytes = 0;
  int64_t registers = 0; // estimate (GPU)
  int64_t spillBytes = 0;
  Occupancy occupancy;    // GPU
  double parallelism = 0; // share of the machine's SMs / cores the grid keeps busy, in (0, 1]
  // Terms, in microseconds (before the coefficients), and the total cost.
  double trafficUs = 0, computeUs = 0, latencyUs = 0, spillUs = 0, overlapUs = 0;
  double timeUs = 0;
  // Tensor-core kernels (CostShape::tensorFlopsPerSec) and the host's bf16 / int8 micro-kernels
  // (CostShape::dotSpeedup): the predicted time of the same tiles in fp32, for --explain's
  // speedup; 0 otherwise.
  double fp32TimeUs = 0;
  // Host: less than kHostSerialUs of work, so the step runs whole on the calling thread
  // (hostChunks) and is priced on one core.
  bool serial = false;
  // Host, on a machine of several cores: the same kernel's time on one core (what `aicf-run
  // --profile --threads 1` measures it against); 0 on one core's machine (timeUs) and on GPUs.
  double oneCoreUs = 0;
  std::vector<std::string> violations; // why the candidate cannot run; empty when it fits
  bool feasible() const { return violations.empty(); }
};

// The cost of kernel `k`, which `recipe` built for `g`: the recipe's cost shape and register
// estimate under the generic terms.
KernelCost evaluateKernel(const KernelGroup &g, const Recipe &recipe, const kir::Kernel &k,
                          const Hardware &hw);

// Store or recompute (lower/fusion.h, rule 5): an elementwise group with `inBytes` of
// inputs, `outBytes` of outputs and `flops` of work, read by `consumers` groups.
RematCost rematerializationCost(const Hardware &hw, int64_t inBytes, int64_t outBytes,
                                int64_t flops, int consumers);
// The fusion's cost callback for `hw` (the description must outlive the callback).
RematCostFn rematCostFor(const Hardware &hw);

// Host plans: into how many chunks the runtime's thread pool (runtime/thread_pool.h) cuts a step
// of `blocks` blocks predicted to take `timeUs` on `hw` (all its cores). Each chunk holds about
// kHostChunkUs of one core's work: a claim and a call cost well under a microsecond, and small
// chunks let the other threads take a descheduled thread's share. At most one chunk per block;
// a step under kHostSerialUs of work runs whole on the calling thread, since waking a worker
// would cost more than it saves (plan.yaml launch.chunks).
inline constexpr double kHostChunkUs = 10.0, kHostSerialUs = 10.0;
int64_t hostChunks(const Hardware &hw, int64_t blocks, double timeUs);

// Fold or materialise a layout op (lower/fusion.h, rule 0), for one read of its result. A read
// through the map costs what its stride wastes: each element read pulls a transaction (a host
// cache line, a GPU sector: uncoalesced) of min(stride, transaction) bytes instead of its own
// size. The reader sees the stride of the dim it walks fastest: the innermost (a flat loop) or,
// for a tiled reader (contraction, attention), the better of the last two, since a tile covers
// both and its packing reuses each line. Operands a tiled reader re-reads (a contraction's B
// once per row tile, attention's K and V once per query tile) pay the waste every time.
// Materialised: one kernel reads the operand through the map once and writes the result.
LayoutCost layoutFoldCost(const Hardware &hw, const LayoutRead &read);
// The fusion's layout callback for `hw` (the description must outlive the callback).
LayoutCostFn layoutCostFor(const Hardware &hw);

} // namespace aicf
