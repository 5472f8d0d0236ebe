// The text report of a plan for aicfc --explain (plan_report.cpp).
#pragma once

#include "plan/plan.h"

#include <ostream>

namespace aicf {

// A per-step table for --explain: kind, kernel, recipe, predicted bytes vs the compulsory lower
// bound, FLOPs; then the arena (planned vs naive) and the model's totals, the recorded decisions
// with their prices and each kernel's schedule search.
void printPlanReport(std::ostream &os, const Plan &plan);

} // namespace aicf
