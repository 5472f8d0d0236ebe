// Host plans: the steps of a branch chosen at run time run only when their side is taken
// (issue 20: an If whose condition is known only at run time).
//
// The importer turns such an If into both branches plus where(cond, then, else) per output.
// Every kernel step then gets the condition under which its results are needed, computed
// backwards from the graph outputs: a where with a one-element runtime condition needs its then
// operand only when cond holds and its else operand only when it does not; any other node
// needs its operands whenever it is needed itself. A step needed only under (cond, true) or
// (cond, false) gets that guard (plan.yaml `guard: {buffer, when}`), and the runtime skips it
// on the other side. Needs are over-approximated, never under: two different conditions join
// to "always", and a need under nested conditions keeps the outer one. A guard is set only
// where the condition is a buffer written before the step (a graph input, or an earlier step's
// output), so the runtime reads it fresh. The where itself reads the skipped side's stale
// buffer and discards it; the memory plan covers both sides as if both ran.
//
// GPU plans keep every step unguarded (both branches run; the runtime would need the condition
// on the host, or a device-side conditional graph node).
#pragma once

#include "lower/fusion.h"
#include "plan/memory_plan.h"
#include "plan/plan.h"

namespace aicf {

// Sets PlanStep::guard / guardWhen on the kernel steps of a host plan (step i is groups[i]).
// Returns how many steps got a guard.
int guardBranchSteps(Plan &plan, const Graph &g, const std::vector<KernelGroup> &groups,
                     const ValueBuffers &vb);

} // namespace aicf
