// The planner's prices for split-k (passes/split_k.h): the cost callback of the split-k graph
// pass, which owns the legality rules, the decision and the rewrite. The contraction alone and
// each split form are planned on a scratch graph holding only the contraction's operands, so the
// two are priced alike (its fused epilogue included).
#pragma once

#include "passes/split_k.h"
#include "plan/planner.h"

namespace aicf {

// The cost callback for `hw` (which must outlive it).
SplitKCostFn splitKCostFn(const Hardware &hw, const PlannerOptions &opts);

} // namespace aicf
