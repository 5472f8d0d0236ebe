// The recipe registry (lower/recipe.h) in selection order, and the helpers recipes share with
// the cost model (labels, knob reads, the row-state cost shape of reductions and norms).
// Order matters where two recipes lower the same anchor: the specialised one, which requires a
// certified property, comes first; the family's generic recipe after it (tiled_contraction
// before direct_conv for a conv). scatter and top_k lower only their own anchors (scatter:
// a copy, then the updates in order, which no index map expresses; top_k: k selection passes;
// non_zero, set_dim, non_max_suppression and choose: the ops that set a data dim).
#include "lower/recipe.h"
#include "lower/recipes.h"
#include "support/int_math.h"

#include <algorithm>
#include <cmath>

namespace aicf {

const std::vector<const Recipe *> &recipeRegistry() {
  static const std::vector<const Recipe *> registry = {
      &pointwiseRecipe(),
      &reductionRecipe(),
      &poolingRecipe(),
      &dataMovementRecipe(),
      &onlineNormRecipe(),
      &streamingAttentionRecipe(),
      &chainedContractionRecipe(),
      &convChainRecipe(),
      &tiledContractionRecipe(),
      &directConvRecipe(),
      &scatterRecipe(),
      &topKRecipe(),
      &nonZeroRecipe(),
      &setDimRecipe(),
      &nmsRecipe(),
      &uniqueRecipe(),
      &chooseRecipe(),
  };
  return registry;
}

Rereads rereadsOf(const Hardware &hw, int64_t bytes, int64_t slices, int64_t uses, int64_t blocks,
                  int64_t set, bool spread) {
  Rereads r;
  if (uses <= 1 || bytes <= 0)
    return r;
  int64_t all = bytes * (uses - 1);
  // The last-level cache (GPU: device L2; host: the shared L3) keeps the whole operand.
  int64_t llc = hw.gpu ? hw.l2Bytes : hw.l3Bytes;
  if (2.0 * double(bytes) <= double(llc)) {
    r.cached = all;
    return r;
  }
  if (hw.gpu) {
    r.memory = all;
    return r;
  }
  slices = std::max<int64_t>(1, slices);
  double slice = double(bytes) / double(slices);
  if (slice + double(set) > double(hw.l2Bytes)) {
    r.memory = all;
    return r;
  }
  // Reads of each slice from memory: once per core that uses it.
  double cores = double(std::max<int64_t>(1, hw.cores)), n = double(uses);
  double copies = spread
                      ? std::min(n, cores)
                      : std::min(n, 1.0 + (n - 1.0) * cores / double(std::max<int64_t>(1, blocks)));
  copies = std::min(n, std::max(1.0, copies));
  r.memory = std::llround(double(bytes) * (copies - 1.0));
  r.cached = all - r.memory;
  return r;
}

std::vector<std::string> tileSetViolations(const CostShape &s, const Hardware &hw) {
  if (s.rereadSet > hw.l2Bytes)
    return {cat("tile working set ", s.rereadSet, " bytes > L2 ", hw.l2Bytes, " bytes")};
  return {};
}

kir::Kernel labelled(kir::Kernel k, const char *label) {
  if (k.recipe.empty())
    k.recipe = label;
  return k;
}

int64_t knobOf(const kir::Kernel &k, const char *name, int64_t dflt) {
  auto it = k.knobs.find(name);
  return it == k.knobs.end() ? dflt : it->second;
}

double hostLoopCycles(int64_t len, int64_t lanes, double perVector) {
  lanes = std::max<int64_t>(lanes, 1);
  return 12.0 + perVector * double(len / lanes) + double(len % lanes);
}

CostShape rowStateShape(const kir::Kernel &k, const Hardware &hw, int64_t flops, int64_t len,
                        bool welford, bool expRescale, double secondPassBytes) {
  CostShape s;
  s.flops = double(flops);
  int64_t lanes = std::max<int64_t>(1, hw.gpu ? 1 : hw.vectorLanesF32());
  int64_t threads = std::max<int64_t>(1, k.threads);
  int64_t vec = knobOf(k, "vec", 1);
  // Each thread folds its elements into one running state: len / (threads · vec) dependent
  // updates (a Welford update divides: a long chain), then the threads' states merge.
  // On the host a Welford update (with its division) is a ~13-cycle dependent step and the
  // vector width does not split the chain (each thread's running state is one (n, mean, M2)
  // triple; the search offers vec 1 only); the row is also ~3 cycles per element of
  // throughput. Measured on the GPT-2 layer norm (128 x 256, one core): threads 1 / 4 / 8 /
  // 16 / 32 take 210 / 84 / 62 / 48 / 48 us.
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
  if (!hw.gpu && expRescale) {
    s.scalarCycles = 15.0 * double(len);
    s.flops = 0;
  }
  s.rereadBytes = secondPassBytes;
  s.rereadSet = len * 4;
  return s;
}

} // namespace aicf
