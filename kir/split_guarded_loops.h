// SplitGuardedLoops: a Kernel IR pass that splits a loop at the points where its guard changes.
//
// A recipe that stages a padded tile guards each element: a contraction's A staged in rows of
// BK = 704 for K = 688 writes `if (k0 + ac < 688) { A's prologue } else { 0 }`. g++ 12 does not
// vectorise a loop whose body branches so (masked loads of a fixed-trip loop: "no vectype for
// .MASK_LOAD"), so every element ran scalar, the full rows as well as the padded tail: the
// int8 LLaMA block's down projection staged its SiLU-and-requantize prologue at 16x its
// predicted time (1.65 ms of a 3.0 ms model).
//
//   for v in [b, e) { decls; if (c) then else otherwise }
//     ==>  for v in [b, L) { decls; otherwise }
//          for v in [L, H) { decls; then }
//          for v in [H, e) { decls; otherwise }
//
// when c, with the loop's load-free i64 declarations inlined, is a conjunction of comparisons
// whose sides are affine in v with v's coefficient +1 or -1 on one side: each comparison is
// then a bound v >= lo or v < hi, so the set of v where c holds is the interval [L, H) =
// [max(lo..., b), min(hi..., e)) (empty when H <= L), and the iterations run in their original
// order. The bounds read no load, no variable the loop declares or assigns, and divide only by
// non-zero constants, so evaluating them before the loop is safe. A loop without an else keeps
// only its middle part. Serial loops only: a vector loop of one vector's lanes keeps its fixed
// trip count (version-lane-guards versions it whole), an unrolled loop its unrolling; loops
// holding block-level statements (barrier, block_reduce, mma_tile, region, reduce) are left
// alone.
#pragma once

#include "kir/kir.h"

#include <string>
#include <vector>

namespace aicf::kir {

// Splits k's guarded loops; one note per kernel changed. Whether k changed.
bool splitGuardedLoops(Kernel &k, std::vector<std::string> &notes);

} // namespace aicf::kir
