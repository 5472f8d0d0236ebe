// split-k (GPU plans): a contraction with a deep reduction and too few output tiles to fill the
// GPU is computed as S partial contractions over slices of its K dimension, side by side in one
// kernel, and a sum of the S partial results that applies the contraction's bias and epilogue
// (a second kernel, one thread per output). resnet18's last 3 x 3 convs (512 channels by 49
// pixels, K = 4608) fill 32 of an H200's 132 SMs as one contraction; split 8 ways they fill
// all of them (measured on an H200: 0.16 -> 0.055 ms for the contraction as a GEMM).
//
// The forms, all f32:
//   conv (group 1), weight [M, C, k...]: a grouped conv with S groups over the weight
//     W'[s M + m, c', k...] = W[m, s C/S + c', k...], its result [N, S M, o...] viewed as
//     [N, S, M, o...] and summed over S; then + bias, then the epilogue steps.
//   gemm (transA 0, alpha 1, beta 1), A [M, K]: A viewed as [S, M, K/S] (reshape + transpose,
//     an index map), B as [S, K/S, N]; a batched matmul, summed over S; then + C, then the
//     epilogue steps.
//   matmul, A [..., M, K] with unit batch dims and B [K, N]: as gemm, viewed back to A's rank.
// The sum adds the S partial results in slice order: the result is the contraction's up to the
// reassociation of its k sum (certified as reassociated).
//
// The cost model decides: the compile driver passes a callback pricing the contraction alone
// and split S ways (plan/split_k_choice.h; passes/ sits below the planner); the pass takes the
// cheapest form when it beats the unsplit one by 10% (a margin for the model's error). Without
// a callback (aicf-opt --passes=split-k) every contraction the pass can split is split 4 ways
// (or the largest legal count below 4).
#pragma once

#include "passes/pass.h"
#include "passes/slice_choice.h"

#include <functional>
#include <string>
#include <vector>

namespace aicf {

// One contraction's choice, as plan.yaml (split_k) and --explain report it.
using SplitKDecision = SliceDecision;

// The predicted time and planned bytes of contraction `n` (a node of `g`) computed in `splits`
// slices (1: as it is); a time of -1 when no schedule fits.
using SplitKCostFn = std::function<Price(const Graph &g, const Node &n, int splits)>;

struct SplitKOptions {
  SplitKCostFn cost;                                // none: split 4 ways wherever legal
  std::vector<SplitKDecision> *decisions = nullptr; // receives one per priced node, graph order
};

std::unique_ptr<Pass> createSplitKPass(SplitKOptions opts);

// The slice counts the pass may use for `n`, ascending (empty: not a form it splits). A slice
// keeps at least 64 of K and, for a conv, 8 input channels per group.
std::vector<int> splitKCounts(const Node &n);

// Emits `n` split `splits` ways before `before` (new nodes and weights in `g`, which holds n's
// operands) and returns the value that replaces n's result.
Value *emitSplitK(Graph &g, const Node &n, int splits, Node *before);

} // namespace aicf
