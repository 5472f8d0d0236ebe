// UnswitchInvariantSelects: a Kernel IR pass that takes a choice out of a loop when the loop
// does not change it.
//
// A reader folded through a concat (lower/fusion_rule_layout.cpp) reads each element through a
// select over the concat's pieces; through a chain of concats and channel shuffles (ShuffleNet:
// concat -> reshape -> transpose -> reshape -> split, block after block) the selects nest as deep
// as the chain, each condition heavy with index arithmetic. When the pieces are channels and the
// loop walks pixels, no condition reads the loop's variable, yet every element evaluates the
// whole chain, and a loop of branching scalar loads does not vectorise: shufflenet_v2's 1x1
// convs staged their B tiles at ~10x the predicted time.
//
//   for v { ... select(c, a, b) ... }
//     ==>  if (c) { for v { ... a ... } } else { for v { ... b ... } }
//
// when c reads no load, neither v nor any variable the loop declares, assigns or loops over,
// and divides only by non-zero constants (so evaluating it where the loop starts is safe even
// when the loop would not have evaluated it): c then has one value throughout the loop, and each
// copy computes exactly what the loop computes. Every select on the same condition (compared
// structurally) takes the same side. Loops are visited outermost first (a choice constant over
// an outer loop leaves it there) and each copy is unswitched again, until the original loop has
// become kMaxUnswitchedCopies copies. Loops holding block-level statements (barrier,
// block_reduce, mma_tile, region, reduce) are left alone: a GPU block must reach those together.
#pragma once

#include "kir/kir.h"

#include <string>
#include <vector>

namespace aicf::kir {

// How many copies one loop may become (a chain of n selects makes n + 1).
inline constexpr int kMaxUnswitchedCopies = 16;

// Whether `body` holds a block-level statement (barrier, block_reduce, mma_tile, region,
// reduce), which a GPU block must reach together: loop-versioning passes leave such loops alone.
bool holdsBlockLevel(const std::vector<StmtP> &body);

// Unswitches k's loops; one note per kernel changed. Whether k changed.
bool unswitchInvariantSelects(Kernel &k, std::vector<std::string> &notes);

} // namespace aicf::kir
