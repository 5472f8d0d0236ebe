// choose-attention: streaming or materialised attention, as a graph pass (docs/cost-model.md, issue
// 10). An attention node is lowered either as one streaming kernel (lower/recipe_attention.cpp:
// scores never leave the chip) or materialised as the textbook sequence transpose(k) -> matmul
// -> scale (+ mask) -> softmax -> matmul, whose scores make a round trip through memory. The pass
// asks a cost callback for both predicted times (the compile driver passes the planner's,
// plan/attention_choice.h: passes/ sits below the planner) and rewrites the nodes it
// materialises in place; the pass manager verifies the result, and annotate-properties, run
// after it, gives the new nodes their properties.
//
// The materialised form is offered only where it has the same semantics: no mask, a causal
// mask that hides no whole row (Sk >= Sq), or a constant additive mask with finite values.
// Attention defines a fully masked row as zeros; softmax would give NaN there.
#pragma once

#include "passes/pass.h"
#include "support/enum_names.h"

#include <functional>
#include <string>
#include <vector>

namespace aicf {

// One attention node's choice, as plan.yaml (attention_lowering) and --explain report it.
struct AttentionDecision {
  std::string node;           // the attention node (its location, e.g. "/attn/MatMul")
  int nodeIndex = -1;         // its position in the graph
  double streamingUs = -1;    // -1: no streaming schedule fits (see streamingWhy)
  double materializedUs = -1; // -1: not offered or does not fit (see materializedWhy)
  std::string streamingWhy, materializedWhy;
  bool materialized = false;
};

// What the cost callback says about one attention node: the fields of AttentionDecision it
// fills are the two times and their reasons.
struct AttentionCost {
  double streamingUs = -1;
  double materializedUs = -1;
  std::string streamingWhy, materializedWhy;
};

// Prices both lowerings of `attention`, a node of `g`; the materialised one only when
// `offerMaterialized` (the pass found it exact). The pass prices every attention node before it
// rewrites any, so the callback may partition `g` once per run.
using AttentionCostFn =
    std::function<AttentionCost(const Graph &g, const Node &attention, bool offerMaterialized)>;

// --attention: the cost model's choice, or one form wherever it is offered and fits.
enum class AttentionPolicy { Cost, Streaming, Materialized };
constexpr EnumNames<AttentionPolicy, 3> enumNames(AttentionPolicy) {
  return {{{AttentionPolicy::Cost, "cost"},
           {AttentionPolicy::Streaming, "streaming"},
           {AttentionPolicy::Materialized, "materialized"}}};
}

struct ChooseAttentionOptions {
  AttentionPolicy policy = AttentionPolicy::Cost;
  // Without a callback nothing is priced: every attention whose materialised form is exact is
  // materialised (aicf-opt --passes=choose-attention shows the rewrite).
  AttentionCostFn cost;
  std::vector<AttentionDecision> *decisions = nullptr; // receives one per node, in graph order
};

std::unique_ptr<Pass> createChooseAttentionPass(ChooseAttentionOptions opts);

// Why materialising `attention` would change its result, or "" when it is exact.
std::string materializationBlocker(const Node &attention);

// Emits the materialised sequence for `attention` (its operands already in `g`) before
// `before`; returns the value that replaces the attention's result.
Value *emitMaterializedAttention(Graph &g, const Node &attention, Node *before);

} // namespace aicf
