// The planner's prices for split-chains (passes/split_chains.h): the cost callback of the graph
// pass, which owns the legality rules, the decision and the rewrite. The chain as it is and each
// split form are planned on a scratch graph holding only the two contractions and their
// operands (host plans: with their weights packed as pack-weights packs them), so the forms are
// priced alike; fusion rule 8 chains each form's pair where that prices lower.
#pragma once

#include "passes/split_chains.h"
#include "plan/planner.h"

namespace aicf {

// The cost callback for `hw` (which must outlive it). `splitK`: GPU plans price the chain as it
// is with split-k's choice applied (the driver's later stage would split its contractions).
ChainSplitCostFn chainSplitCostFn(const Hardware &hw, const PlannerOptions &opts, bool splitK);

} // namespace aicf
