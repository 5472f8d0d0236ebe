// The planner's prices for merge-siblings (passes/merge_siblings.h): the cost callback of the
// graph pass, which owns the legality rules, the decision and the rewrite. The siblings as they
// are and merged are planned on a scratch graph holding only the contractions and their operands
// (host plans: with their weights packed as pack-weights packs them), so both forms are priced
// alike.
#pragma once

#include "passes/merge_siblings.h"
#include "plan/planner.h"

namespace aicf {

// The cost callback for `hw` (which must outlive it).
SiblingMergeCostFn siblingMergeCostFn(const Hardware &hw, const PlannerOptions &opts);

} // namespace aicf
