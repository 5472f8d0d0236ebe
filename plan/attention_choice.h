// The planner's prices for streaming and materialised attention (docs/cost-model.md, issue 10): the
// cost callback of the choose-attention graph pass (passes/choose_attention.h, which owns the
// legality rules, the decision and the rewrite). Each alternative's kernels are planned on the
// hardware description; on GPUs the streaming kernel wins whenever its tiles fit, the
// materialised form is what remains when no tile of a large head size fits shared memory.
#pragma once

#include "lower/fusion.h"
#include "passes/choose_attention.h"
#include "plan/planner.h"

#include <memory>
#include <string>
#include <vector>

namespace aicf {

// The cost callback for `hw` (which must outlive it): the streaming time is the planned cost of
// the attention's kernel group in the graph's partition, the materialised time the summed
// planned costs of the decomposition's kernels. A form no schedule fits gets -1 and the
// planner's reason.
AttentionCostFn attentionCostFn(const Hardware &hw, const PlannerOptions &opts);

} // namespace aicf
