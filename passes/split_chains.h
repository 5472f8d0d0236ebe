// split-chains: a chain of two contractions (an MLP's up- and down-projection: c1 read only as
// c2's A, the pair fusion rule 8 merges into one kernel) computed in S slices of the hidden
// dimension H, side by side, and the sum of the S partial outputs:
//   P[s] = epi1(X W1[:, s HS:(s + 1) HS] (+ c1's C and epilogue operands, sliced)) W2[s HS:(s + 1)
//   HS, :] Y    = epi2(sum_s P[s])          (c2's C, then its epilogue steps, on the sum)
// with HS = H / S: a batched pair of contractions over new weights W1s [S, 1.., K1, HS] and
// W2s [S, 1.., HS, N2] (X broadcast over S), a reduce_sum over S and elementwise nodes. Rule 8
// then chains each slice's pair into one kernel of S x (row tiles) blocks: on a GPU enough
// blocks to fill the SMs, on a multi-core host one slice per core, each reading only its slice
// of the weights. The partial outputs (S x the output, written and summed) replace the hidden
// activation (H / N2 x the output, written and read) in memory.
//
// Legality: c1 and c2 matmul (B rank 2) or gemm (transA 0, alpha 1, beta 1), f32 throughout; c1's
// result read only by c2, as A, and no graph output; both B constant weights (sliced at compile
// time); c1's C and epilogue operands constant weights along H, or broadcast along it (last dim
// 1). The sum adds the slices in slice order: the result is the chain's up to the reassociation
// of c2's sum over H (certified as reassociated).
//
// The cost model decides: the compile driver passes a callback pricing the pair as it is (with
// rule 8's own choice between one chained kernel and two) and split S ways; the pass takes the
// cheapest split when it beats the pair as it is by kMargin, else the split moving the fewest
// bytes within the band of equal times (passes/price.h: on a two-core host, GPT-2's MLP in two
// slices, each core reading half the weights once, instead of both cores streaming all of them).
// Without a callback (aicf-opt
// --passes=split-chains) every legal chain is split 2 ways.
#pragma once

#include "passes/pass.h"
#include "passes/slice_choice.h"

#include <functional>
#include <string>
#include <vector>

namespace aicf {

// One chain's choice (node: c2's location), as plan.yaml (split_chains) and --explain report it.
using ChainSplitDecision = SliceDecision;

// The predicted time and planned bytes of the chain c1 -> c2 (nodes of `g`) computed in `splits`
// hidden slices (1: as it is); a time of -1 when no schedule fits.
using ChainSplitCostFn =
    std::function<Price(const Graph &g, const Node &c1, const Node &c2, int splits)>;

struct SplitChainsOptions {
  ChainSplitCostFn cost;                                // none: split 2 ways wherever legal
  std::vector<ChainSplitDecision> *decisions = nullptr; // receives one per priced chain
  int force = 0; // > 0: this many slices wherever legal (still priced, for the record)
};

std::unique_ptr<Pass> createSplitChainsPass(SplitChainsOptions opts);

// The first contraction of the chain ending at `c2` (a node of `g`), or null when the pair cannot
// be split.
const Node *splittableChain(const Graph &g, const Node &c2);
// The slice counts the pass may use for the chain ending at c2, ascending: S divides H and
// leaves slices of at least 32 hidden columns.
std::vector<int> chainSplitCounts(const Graph &g, const Node &c2);

// Emits the chain c1 -> c2 split `splits` ways before `before` (new nodes and weights in `g`,
// which holds their operands) and returns the value that replaces c2's result.
Value *emitChainSplit(Graph &g, const Node &c1, const Node &c2, int splits, Node *before);

} // namespace aicf
