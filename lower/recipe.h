// A lowering recipe as one object (issue 16): what it lowers (op facts and the memory property
// it requires of the anchor), how it builds the Kernel IR, its typed knobs, the candidate knob
// sets the planner searches, and its share of the cost model (the traffic, FLOP and latency
// shape of the work, its re-reads, its register estimate). Everything one recipe knows lives
// in its file (lower/recipe_<name>.cpp); the registry (recipe_registry.cpp) lists them in
// selection order, and the lowering picks one from the anchor's certified properties
// (lower.cpp selectRecipe). The cost model (plan/cost_model.cpp) keeps only the generic terms.
// The recipe's name is a printed label (plan.yaml `recipe:`, Kernel IR `recipe(...)`); no code
// dispatches on it.
#pragma once

#include "ir/properties.h"
#include "kir/kir.h"
#include "lower/fusion.h"
#include "lower/lower.h"
#include "support/diagnostics.h"
#include "target/hardware.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <typeinfo>
#include <vector>

namespace aicf {

using KnobSet = std::map<std::string, int64_t>;

// What the recipe does per unit of work, beyond the group's FLOPs and bytes: the work it
// actually executes (tiles padded to full size), the bytes that come from a cache rather than
// from where the data lives (re-reads), how well it uses the vector units, and the length of
// the serial dependency chain each block walks.
struct CostShape {
  double flops = 0;        // executed, padding included
  double rereadBytes = 0;  // served by a cache (tile re-reads, accumulator reloads)
  int64_t rereadSet = 0;   // bytes the re-reads need resident to hit the cache
  double vectorShare = 1;  // share of the vector lanes used (host) / of FMA peak (GPU)
  double chainSteps = 0;   // serial dependent steps per block
  double chainCycles = 4;  // latency of one step (cycles)
  int64_t serialTiles = 1; // tile steps per block with a barrier (GPU latency term)
  double scalarCycles = 0; // host: scalar work per block that does not vectorise (cycles)
  // GPU: the tensor-core peak (FLOP/s) the products run at, vectorShare then its share; 0: SIMT
  // f32 (the FMA peak). The cost model also prices the fp32 SIMT form for --explain.
  double tensorFlopsPerSec = 0;
  // Host: the multiple of the f32 rate bf16 / int8 dot products give (in vectorShare already);
  // the cost model prices the same tiles without it too (KernelCost::fp32TimeUs).
  double dotSpeedup = 1;
};

// Operand re-reads beyond each param once: `memory` come again from memory, past the last-level
// cache (they count in the plan's bytes moved, like the compulsory bytes they are compared
// with), `cached` from a cache that keeps the operand between uses (a core's L1 or L2, the
// host's shared L3, the GPU's device L2: their time is priced, their bytes are not moved).
struct Rereads {
  int64_t memory = 0;
  int64_t cached = 0;
};

// The re-reads of an operand of `bytes` split into `slices` equal slices (a GEMM's row panels,
// attention's heads), each used by `uses` consecutive blocks of a launch of `blocks` (each use
// after the first a re-read), next to a block working set of `set` bytes. The last-level cache
// serves every re-read when the whole operand fits in half of it: the GPU's device L2 (the
// slices' blocks run concurrently across the SMs), the host's L3, shared by its cores (two
// cores streaming the same weights fetch them from memory once). Past it (host), a slice stays
// in a core's L2 between uses when it fits there beside the working set, and the blocks go to
// the cores in contiguous chunks, so a slice is read from memory once per core its run of uses
// touches (1 + (uses - 1) cores / blocks of them on average). `spread`: the uses are spread over
// the launch (every `blocks / uses`-th block: a GEMM's B, used once per row of tiles): then each
// core touching a slice holds it at once.
Rereads rereadsOf(const Hardware &hw, int64_t bytes, int64_t slices, int64_t uses, int64_t blocks,
                  int64_t set, bool spread = false);

class Recipe {
public:
  virtual ~Recipe() = default;

  // The printed label ("tiled_contraction"); unique in the registry.
  virtual const char *name() const = 0;

  // --- what it requires ---
  // Op facts: whether the recipe can lower a group with this anchor (nullptr: a group of
  // elementwise nodes only).
  virtual bool lowers(const Node *anchor) const = 0;
  // Group facts: whether the recipe lowers group `g` as partitioned. A group holding a chained
  // contraction (KernelGroup::chained, lower/fusion.h rule 8) is lowered only by the recipe
  // that says so; every other recipe lowers by its anchor alone.
  virtual bool lowersGroup(const KernelGroup &g) const {
    return g.chained.empty() && lowers(g.anchor);
  }
  // The memory property the anchor's certificate must establish; nullopt: none (the recipe
  // lowers by op facts alone).
  virtual std::optional<MemProperty> requiredProperty() const { return std::nullopt; }
  // True when the recipe is also its family's generic lowering: it lowers, in its plain form,
  // an anchor whose certificate fails when no later recipe of the registry lowers it.
  virtual bool genericFallback() const { return false; }
  // Whether the recipe lowers group g when its values have symbolic dims (issue 21): every
  // extent, bound, guard and stride it emits then reads the dims' variables where the sizes
  // depend on them. The compile driver also certifies each symbolic kernel by lowering it at
  // other points of the dims' ranges (stage shape-generic).
  virtual bool symbolicDims(const KernelGroup &g) const { return false; }
  // True when every output element is written at the index its inputs are read, after reading
  // them (elementwise maps): the memory plan may then give the output a dying input's storage.
  virtual bool writesInPlace() const { return false; }

  // --- build ---
  // The kernel for `g`, named `name`, with `knobs` (missing knobs take the recipe's defaults
  // for the plan target). Sets Kernel::recipe, Kernel::knobs and Kernel::problem.
  virtual kir::Kernel build(const KernelGroup &g, const std::string &name,
                            const Knobs &knobs) const = 0;
  // `knobs` through the recipe's typed knobs struct and back (the names the recipe knows, with
  // their values; unknown names dropped). The plan.yaml / printed form is the name -> int map.
  virtual KnobSet canonicalKnobs(const KnobSet &knobs) const = 0;

  // --- planning ---
  // Candidate knob sets for the kernel `dflt` (built with the defaults), in a fixed order,
  // structurally valid (TM divides BM, ...); whether one fits is the cost model's question.
  virtual std::vector<KnobSet> candidates(const kir::Kernel &dflt, const Hardware &hw) const {
    (void)dflt;
    (void)hw;
    return {};
  }
  // The recipe's cost shape of kernel `k` (which this recipe built) on `hw`; `flops` is the
  // group's FLOPs.
  virtual CostShape costShape(const KernelGroup &g, const kir::Kernel &k, const Hardware &hw,
                              int64_t flops) const = 0;
  // Bytes re-read beyond each param once by the kernel's tiling (A per column of output tiles,
  // K and V per query tile...), split by where they come from on `hw` (rereadsOf below).
  virtual Rereads rereads(const KernelGroup &g, const kir::Kernel &k, const Hardware &hw) const {
    (void)g;
    (void)k;
    (void)hw;
    return {};
  }
  // Registers per thread on a GPU (calibrated against ptxas; bench-costmodel reports the error).
  virtual int64_t registers(const kir::Kernel &k) const = 0;
  // Independent loads a thread issues per step (tile copies many, flat loops one per vector).
  virtual double loadsInFlight() const { return 2.0; }
  // Host-only constraints beyond the generic ones ("tile working set ... > L2").
  virtual std::vector<std::string> hostViolations(const CostShape &s, const Hardware &hw) const {
    (void)s;
    (void)hw;
    return {};
  }
};

// A host tile working set (CostShape::rereadSet) that does not fit in L2, as a violation (the
// contraction recipes' hostViolations).
std::vector<std::string> tileSetViolations(const CostShape &s, const Hardware &hw);

// The registered recipes in selection order (recipe_registry.cpp; adding a recipe: one file
// and one line there).
const std::vector<const Recipe *> &recipeRegistry();

// Why a recipe was chosen for a group.
struct RecipeSelection {
  const Recipe *recipe = nullptr;
  std::string reason;    // "online_reducible_norm holds", "generic form: ... fails: ..."
  bool fallback = false; // a required property failed: the family's generic lowering
};

// Picks the recipe for `g` from its anchor's op facts and certified properties (Node::props,
// Node::certificates from annotate-properties): the first registered recipe that lowers the
// anchor and whose required property holds; else the generic recipe of the family, with the
// failed condition named. An anchor without certificates (annotate-properties did not run) is
// lowered by op facts. Throws UserError naming the node when no recipe lowers it.
RecipeSelection selectRecipe(const KernelGroup &g);

// `k` with Kernel::recipe set to `label` when the build left it empty.
kir::Kernel labelled(kir::Kernel k, const char *label);

// The cost shape of a kernel that folds rows into a running state (reduction, online_norm):
// each thread folds len / (threads · vec) elements into one state (a dependency chain), then
// the threads' states merge. `welford`: the update divides (a long chain); `expRescale`: the
// host update rescales by an exponential per element (softmax); `secondPassBytes`: a second
// read of the rows served by a cache.
// Host cycles of one vector loop over `len` elements: ~12 cycles of set-up, `perVector` per
// full vector (~1.5 unit-stride, ~4 when the loads are gathers) and ~1 per remainder element,
// which runs scalar (fitted on EfficientNet-B0's depthwise convs: 28-wide rows ~21 cycles per
// tap, 14-wide ~7.5). The row and plane forms of pooling and direct conv price their loops so.
double hostLoopCycles(int64_t len, int64_t lanes, double perVector);

CostShape rowStateShape(const kir::Kernel &k, const Hardware &hw, int64_t flops, int64_t len,
                        bool welford, bool expRescale, double secondPassBytes);

// A knob of a built kernel (Kernel::knobs), `dflt` when absent, by name: for the readers that
// serve kernels of several recipes (the cost model's vector width, rowStateShape, the shared
// fold of reduction states). A recipe reads its own kernels' knobs through its typed struct
// (lower/recipes.h: knobOf(k, &ChainKnobs::BM, 1)).
int64_t knobOf(const kir::Kernel &k, const char *name, int64_t dflt = 0);

// The typed problem description a recipe recorded on its kernel.
template <class P>
const P &problemOf(const kir::Kernel &k) {
  const P *p = dynamic_cast<const P *>(k.problem.get());
  if (!p)
    throw InternalError(
        cat("kernel ", k.name, " (", k.recipe, "): no ", typeid(P).name(), " problem description"));
  return *p;
}

} // namespace aicf
