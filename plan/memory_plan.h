// The memory plan (DESIGN.md §6): every intermediate gets an offset in one arena, from
// liveness over the static step order, so buffers whose lifetimes do not overlap share memory.
// Placement is greedy by size (largest first, lowest fitting offset; ties by id: deterministic).
// Steps whose constraints allow it write in place: a pointwise step's output takes the storage
// of a same-typed input that dies at that step. Views (reshape) alias their source.
#pragma once

#include "plan/plan.h"
#include "support/int_math.h"

#include <vector>

namespace aicf {

// Interval of steps [def, lastUse] during which a buffer must stay intact.
struct Lifetime {
  int def = 0;
  int lastUse = 0;
};

// Assigns `offset` of every Arena buffer without an alias in `plan`, using `life` (indexed like
// plan.buffers), honouring `shareWith` (buffer index -> index whose storage it takes, or -1).
// Sets plan.arenaBytes and plan.naiveArenaBytes. Alignment: 64 bytes.
void planArena(Plan &plan, const std::vector<Lifetime> &life, const std::vector<int> &shareWith);

} // namespace aicf
