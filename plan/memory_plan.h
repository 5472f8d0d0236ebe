// The memory plan (docs/architecture.md): every intermediate gets an offset in one arena, from
// liveness over the static step order, so buffers whose lifetimes do not overlap share memory.
// Placement is greedy by size (largest first, lowest fitting offset; ties by id: deterministic).
// Steps whose constraints allow it write in place: a pointwise step's output takes the storage
// of a same-typed input that dies at that step. Views (reshape) alias their source.
//
// The compile driver (driver/compile.cpp) runs it in two steps around the kernels: the value
// buffers first (createValueBuffers, before the steps name them), then, once the steps exist,
// planMemory: output copies, liveness, in-place reuse, arena placement and the layout string.
#pragma once

#include "lower/fusion.h"
#include "plan/plan.h"
#include "support/int_math.h"

#include <map>
#include <utility>
#include <vector>

namespace aicf {

// The plan buffer of each graph value, as the buffers are created.
struct ValueBuffers {
  std::map<const Value *, int> index; // value -> position in plan.buffers
  // Graph outputs whose storage is not their own buffer: (source value, output buffer), each
  // becomes a runtime copy step after the kernels.
  std::vector<std::pair<const Value *, int>> copies;
};

// Creates the buffers of the graph's inputs, weights (offsets into weights.bin) and outputs and
// of the intermediates `groups` write, in that fixed order, so ids and offsets are
// deterministic; sets plan.weightsBytes and adds the compulsory bytes to plan.lowerBoundBytes.
// UserError when the weights exceed kMaxTotalBytes.
ValueBuffers createValueBuffers(Plan &plan, const Graph &g, const std::vector<KernelGroup> &groups);

// The buffer of `v`; a view (reshape) gets, on first use, an alias buffer of its source's.
int bufferFor(Plan &plan, ValueBuffers &vb, const Value *v);

// After the kernel steps: the output copies, liveness, in-place reuse, the arena and the layout.
void planMemory(Plan &plan, ValueBuffers &vb);

// Interval of steps [def, lastUse] during which a buffer must stay intact.
struct Lifetime {
  int def = 0;
  int lastUse = 0;
};

// Assigns `offset` of every Arena buffer without an alias in `plan`, using `life` (indexed like
// plan.buffers), honouring `shareWith` (buffer index -> index whose storage it takes, or -1).
// Sets plan.arenaBytes and plan.naiveArenaBytes. Alignment: 64 bytes.
void planArena(Plan &plan, const std::vector<Lifetime> &life, const std::vector<int> &shareWith);

// The pieces of planMemory, in its order.
void addOutputCopies(Plan &plan, ValueBuffers &vb);
// Per buffer (indexed like plan.buffers): the first step writing it and the last step touching
// it; an alias's uses extend its source's interval. Untouched buffers get {1 << 30, -1}.
std::vector<Lifetime> computeLifetimes(const Plan &plan);
// In place: a pointwise step may write its output over a same-typed arena input that dies at
// that step (each element is read before it is written, at the same index). Marks the steps
// (PlanStep::inPlace) and returns shareWith for planArena.
std::vector<int> planInPlace(Plan &plan, const std::vector<Lifetime> &life);
// Gives each arena alias its source's offset and records plan.layout.
void finishLayout(Plan &plan);

} // namespace aicf
