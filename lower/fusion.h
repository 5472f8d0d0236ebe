// Fusion into kernels (docs/layout-and-fusion.md, issue "Kernel IR"): partitions the rewritten
// graph into kernel groups. Each group becomes one kernel:
//   * an anchor — a contraction (with its epilogue), a norm, attention, a reduction, a pooling
//     or a data-movement op — plus the rematerializable elementwise nodes fused into it: a
//     prologue (elementwise chains feeding an anchor operand and used nowhere else) and an
//     epilogue (elementwise consumers of the anchor's result that nothing else needs);
//   * or a pure elementwise group (a connected elementwise chain with no anchor).
// Reshape-like nodes (VIEW) are not kernels: their result aliases their operand's buffer.
// Recompute or store: an elementwise group read by one other group is always fused into it
// (rule 4 in fusion.cpp). One read by several groups is decided by the cost model when a
// hardware description is given (FusionOptions::hw): recomputed inside every consumer when
// that costs less than storing it once and reloading it in each (plan/cost_model.h,
// rematerializationCost); every such decision is recorded with both costs.
#pragma once

#include "ir/graph.h"
#include "ir/index_map.h"
#include "passes/price.h"
#include "support/enum_names.h"

#include <functional>

#include <string>
#include <vector>

namespace aicf {

struct KernelGroup {
  int id = 0;
  std::vector<std::string> dims; // the graph's symbolic dims (Graph::dims), in order
  std::string kind; // logical opcode: "attention", "layer_norm", "matmul", "fused_elementwise", ...
  Node *anchor = nullptr;    // null for a pure elementwise group
  std::vector<Node *> nodes; // every node of the group, in graph order
  // Read from outside the group, first-use order, no duplicates; a loop group: its operands.
  std::vector<Value *> inputs;
  // Produced here and used outside (or graph outputs); a loop group: all its results.
  std::vector<Value *> outputs;
  // Outputs stored through a layout op (rule 0, the producer side): output `value` is not
  // stored in a buffer of its own but into `into`, the layout op's result, at map(index). The
  // kernel's param for `value` is `into`'s buffer; several groups may write one `into` (the
  // operands of a concat), each its own region.
  // Through a slice on the way (a blocked conv's padded channels dropped before the layout op),
  // only the elements inside `keep` are stored.
  struct StoreThrough {
    const Value *value = nullptr;
    const Value *into = nullptr;
    IndexMap map;                 // domain: value's shape; range: into's
    std::vector<IndexBound> keep; // over value's index; empty: every element is stored
  };
  std::vector<StoreThrough> storeThrough;
  // Rule 8 (fusion.cpp): the contractions whose results, through the group's elementwise nodes,
  // are the anchor contraction's left operand A, computed inside this group one row tile at a
  // time and never stored (a chained contraction: an MLP's up-projection feeding its
  // down-projection; SwiGLU's gate and up projections, both over the same X); empty for every
  // other group. Rule 10: the blocked convs of an inverted residual computed inside the group
  // (the expansion, when there is one, then the depthwise conv), the anchor its projection.
  std::vector<const Node *> chained;
  // Rule 9 (fusion.cpp): a layer_norm / rms_norm over the last axis applied to the anchor
  // contraction's output rows before they are stored (BERT's post-LN after its projections):
  // the tile holds whole rows, computes their statistics and stores only the normalised rows.
  const Node *normEpilogue = nullptr;
  const StoreThrough *storedThrough(const Value *v) const {
    for (const StoreThrough &s : storeThrough)
      if (s.value == v)
        return &s;
    return nullptr;
  }
};

// One store-or-recompute decision for an elementwise group read by several groups.
struct RematDecision {
  // What was decided: an elementwise group read by several groups (rule 5), a row norm
  // recomputed in its readers' A reads (rule 7), or a contraction chained into the one reading
  // its result as A (rule 8: recomputeUs is then the fused kernel's time, storeUs the two
  // kernels').
  enum class Kind { Elementwise, RowNorm, Chain, NormEpilogue, ConvChain } kind = Kind::Elementwise;
  std::string what;                // "" (an elementwise group), or the norm node recomputed in
                                   // its readers' A reads (rule 7): "layer_norm <name>", or the
                                   // chain (rule 8): "gemm <c1> -> gemm <c2>", or the
                                   // conv chain (rule 10)
  std::vector<std::string> values; // the group's output values
  int consumers = 0;
  double storeUs = 0, recomputeUs = 0;
  bool recomputed = false;
};

// Fold or materialise (rule 0 in fusion.cpp): one read of a layout op's result (through further
// layout ops) by a node that is no layout op. `map` sends the reader's operand index to the
// layout op's operand index (for a concat: the piece of one operand).
struct LayoutRead {
  const Node *layout = nullptr;
  const Node *reader = nullptr;
  int operand = 0; // which operand of the reader
  IndexMap map;
  int64_t bytes = 0; // the reader's operand
};
struct LayoutCost {
  double foldUs = 0;        // what reading through the map costs the reader beyond a plain read
  double materializeUs = 0; // a data-movement kernel writing the result once
};
using LayoutCostFn = std::function<LayoutCost(const LayoutRead &)>;

// One layout op's decision: stored by its producers (no kernel: each producer writes its
// operand straight into the result through the scatter map), folded into its readers (no
// kernel: each reads the operand through the composed map) or materialised (a data-movement
// kernel).
struct LayoutDecision {
  const Node *node = nullptr;
  std::vector<std::string> reads;       // "reader-op %value: map", per read
  std::vector<std::string> stores;      // stored: "producer-op %value: map", per operand
  double foldUs = 0, materializeUs = 0; // summed over the reads; 0 when not priced
  bool folded = false;
  bool stored = false;
  std::string reason; // why, in words
};

struct Partition {
  std::vector<KernelGroup> groups; // in a valid execution order
  std::vector<Node *> views;       // reshape-like nodes: aliases, no kernel
  std::vector<RematDecision> remat;
  std::vector<LayoutDecision> layout; // in graph order
};

// Store or recompute (rule 5 in fusion.cpp): the two times of an elementwise group `probe`
// with `inBytes` of inputs and `outBytes` of outputs, read by `consumers` groups. Stored: one
// kernel (launch, read the inputs, compute, write the outputs) and every consumer reloads the
// outputs. Recomputed: every consumer reads the inputs and computes the values itself.
struct RematCost {
  double storeUs = 0, recomputeUs = 0;
};
using RematCostFn = std::function<RematCost(const KernelGroup &probe, int64_t inBytes,
                                            int64_t outBytes, int consumers)>;

// The predicted time of one candidate kernel group (the planner's best schedule for it; +inf
// when none fits) and the bytes that schedule moves (0: not given). A callback keeps the
// partition below the planner in the layering.
using KernelPrice = Price; // (passes/price.h)
using KernelCostFn = std::function<KernelPrice(const KernelGroup &)>;

// Rule 7's policy (aicfc --row-norms): a row norm read only as contractions' A is recomputed in
// their kernels when priced lower (Cost; still priced for the record under Fold), always where
// legal (Fold), or never (Store: a kernel of its own).
enum class RowNormPolicy { Cost, Fold, Store };
constexpr EnumNames<RowNormPolicy, 3> enumNames(RowNormPolicy) {
  return {{{RowNormPolicy::Cost, "cost"},
           {RowNormPolicy::Fold, "fold"},
           {RowNormPolicy::Store, "store"}}};
}

// Rules 8, 9 and 10's policy (aicfc --chain-contractions, --norm-epilogues, --conv-chains): the
// fused kernel when the planner prices it lower (Cost), always where legal (Fuse, still priced
// for the record), or never (Store: the intermediate stored).
enum class FusePolicy { Cost, Fuse, Store };
constexpr EnumNames<FusePolicy, 3> enumNames(FusePolicy) {
  return {{{FusePolicy::Cost, "cost"}, {FusePolicy::Fuse, "fuse"}, {FusePolicy::Store, "store"}}};
}

struct FusionOptions {
  // With a cost function (the planner's, plan/cost_model.h), shared elementwise groups are
  // recomputed in their consumers when that is cheaper; without one they are always stored
  // (computed once). A callback keeps the partition below the cost model in the layering.
  RematCostFn rematCost;
  // With a cost function, a layout op is folded into its readers only when that costs less than
  // materialising it; without one, every foldable layout op is folded.
  LayoutCostFn layoutCost;
  // With a cost function, a row norm read only as contractions' A (rule 7) is recomputed in
  // their kernels when their planned times beat the norm's kernel plus theirs as they are;
  // without one, it is always a kernel of its own.
  KernelCostFn kernelCost;
  // Rule 7's policy (--row-norms).
  RowNormPolicy rowNorms = RowNormPolicy::Cost;
  // Rule 8's policy (--chain-contractions, with a kernel cost function): a contraction read only
  // as another's A is chained into it.
  FusePolicy chains = FusePolicy::Cost;
  // Rule 9's policy (--norm-epilogues, with a kernel cost function): a row norm of a
  // contraction's output applied as its epilogue.
  FusePolicy normEpilogues = FusePolicy::Cost;
  // Rule 10's policy (--conv-chains, with a kernel cost function): an inverted residual's
  // expand, depthwise and project convs as one kernel.
  FusePolicy convChains = FusePolicy::Cost;
  // Off: every layout op is a kernel (and every reshape a view), as before issue 17.
  bool foldLayout = true;
  // The most nodes one group (one kernel) holds (rule 6 in fusion.cpp): longer elementwise
  // chains are cut into several kernels, so the host compiler's time per kernel stays bounded.
  int maxGroupNodes = 256;
};

Partition partitionGraph(const Graph &g, const FusionOptions &opts = {});

// A where choosing between the two branches of an If chosen at run time: its condition is one
// element computed at run time. That condition is stored by the group computing it, never
// recomputed in or folded into its readers, so that host plans can read it before the
// branches' steps and skip the side not taken (plan/branch_guards.h).
bool isBranchSelect(const Node &n);

// The value whose buffer `v` lives in: follows view (reshape) nodes back to their source.
const Value *storageOf(const Value *v);

} // namespace aicf
