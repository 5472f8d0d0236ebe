// Streaming or materialised attention, by cost (DESIGN.md §5, issue 10). An attention node is
// lowered either as one streaming kernel (lower/recipe_attention.cpp: scores never leave the
// chip) or materialised as the textbook sequence transpose(k) -> matmul -> scale (+ mask) ->
// softmax -> matmul, whose scores make a round trip through memory. The planner costs both
// (each alternative's kernels planned on the hardware description) and keeps the cheaper; on
// GPUs the streaming kernel wins whenever its tiles fit, the materialised form is what remains
// when no tile of a large head size fits shared memory.
//
// The materialised form is offered only where it has the same semantics: no mask, a causal
// mask that hides no whole row (Sk >= Sq), or a constant additive mask with finite values.
// Attention defines a fully masked row as zeros; softmax would give NaN there.
#pragma once

#include "lower/fusion.h"
#include "plan/planner.h"

#include <memory>
#include <string>
#include <vector>

namespace aicf {

struct AttentionDecision {
  std::string node;           // the attention node (its location, e.g. "/attn/MatMul")
  int nodeIndex = -1;         // its position in the graph
  double streamingUs = -1;    // -1: no streaming schedule fits (see streamingWhy)
  double materializedUs = -1; // -1: not offered or does not fit (see materializedWhy)
  std::string streamingWhy, materializedWhy;
  bool materialized = false;
};

// Costs both lowerings of the attention group `g` (anchor: an attention node).
AttentionDecision chooseAttention(const KernelGroup &g, const Hardware &hw,
                                  const PlannerOptions &opts);

// Replaces the attention node at `nodeIndex` in `graph` by its materialised sequence (inserted
// where it stood; its result's users and output name move to the final matmul).
void materializeAttention(Graph &graph, int nodeIndex);

} // namespace aicf
