// Host plans: which consecutive steps the runtime's thread pool runs as one dispatch (issue 19).
//
// Why: each dispatch ends in a join where the whole team waits for its slowest member, the
// point where a descheduled thread stalls everyone. Steps that share no memory need no join
// between them: BERT's Q, K and V projections, a network's parallel branches, a run of tiny
// steps. Grouped, their chunks go into one dispatch and each thread moves from one step's chunks
// to the next's without waiting. Tiny steps (one chunk each, run on the calling thread alone)
// that are independent form one dispatch of a chunk per step once together they are worth
// sharing (kHostSerialUs of one core's work).
//
// Independence is decided on memory, after the memory plan: two steps conflict when one writes
// bytes the other reads or writes (arena ranges, the user's input and output buffers, each view
// resolved to its storage; weights are read-only). Only kernel steps group, and only with their
// neighbours: the plan order stays the execution order. plan.yaml records a group as
// `launch.group: I` on each of its steps, I the index of its first step; the runtime checks the
// same condition when it loads the plan.
#pragma once

#include "plan/plan.h"
#include "target/hardware.h"

namespace aicf {

// Sets PlanStep::group (-1: the step runs alone) on a host plan's steps; needs the arena
// offsets (planMemory). GPU plans are left as they are: their steps go to one stream in order.
void groupDispatches(Plan &plan, const Hardware &hw);

} // namespace aicf
