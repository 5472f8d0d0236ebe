// merge-siblings: contractions that read the same A with constant weights (a transformer's q, k
// and v projections; any set of Linear layers side by side over one input) computed as one
// contraction over their weights concatenated along N, whose readers read it through a split:
//   [Y1 | Y2 | ...] = epi(X [W1 | W2 | ...] (+ [c1 | c2 | ...]))
// X is read once instead of once per sibling, in one kernel instead of several, with wider N
// tiles; and a row norm producing X then has one reader, which fusion rule 7 can fold into the
// merged contraction's A reads (LLaMA's and BERT's normalised input no longer stored). The split
// is a layout op: its readers read the merged result at their offsets (lower/fusion.h folds it),
// so nothing is copied.
//
// Legality: plain contractions (passes/contraction_parts.h) of the same A and K, with constant
// B, the same epilogue steps, and extra operands that are constant weights along N (last dim
// N_i, every other dim 1: concatenated) or one value shared by all and broadcast along N (last
// dim 1); no result is a graph output or read as a contraction's A (fusion rule 8 chains those:
// an MLP's gate and up projections stay apart). Exact: every output element is the same sum in
// the same order, through the same steps.
//
// The cost model decides: the compile driver passes a callback pricing the siblings as they
// are and merged (plan/sibling_merge_choice.h); the merged form is taken when takeForm
// (passes/price.h) prefers it: faster, or within the band of equal times and moving fewer
// bytes. Without a callback (aicf-opt --passes=merge-siblings) every legal set is merged.
#pragma once

#include "passes/pass.h"
#include "passes/price.h"

#include <functional>
#include <string>
#include <vector>

namespace aicf {

// One set of siblings' choice, as plan.yaml (merge_siblings) and --explain report it.
struct SiblingMergeDecision {
  std::vector<std::string> nodes;   // the siblings' locations, in graph order
  std::string merged;               // the merged contraction's type, "f32[2,64,512]"
  Price separate{-1}, together{-1}; // us -1: not priced
  bool chosen = false;
};

// The price of `siblings` (nodes of `g`, graph order) as they are (merged false) or merged.
using SiblingMergeCostFn =
    std::function<Price(const Graph &g, const std::vector<const Node *> &siblings, bool merged)>;

struct MergeSiblingsOptions {
  SiblingMergeCostFn cost;                                // none: merge every legal set
  std::vector<SiblingMergeDecision> *decisions = nullptr; // receives one per set, graph order
};

std::unique_ptr<Pass> createMergeSiblingsPass(MergeSiblingsOptions opts);

// The sets of siblings in `g` that the pass may merge, each in graph order (sets in the order of
// their first node).
std::vector<std::vector<const Node *>> siblingSets(const Graph &g);

// Emits the merged contraction of `siblings` (nodes of `g`, a set siblingSets returns) before
// `before` (new node and weights in `g`) and returns its result, [.., M, N1 + N2 + ...].
Value *emitMergedContraction(Graph &g, const std::vector<const Node *> &siblings, Node *before);

} // namespace aicf
