// VersionLaneGuards: a Kernel IR pass that runs a guarded vector loop without its guard where the
// guard holds on every lane.
//
// A recipe whose grid or tile overruns the data guards each element: a pointwise kernel's
// `i < N` past the last block, a ragged column tile's `n0 + j < N`. Inside a 16-lane vectorised
// loop the guard makes every load a masked one, which g++ 12 does not vectorise for a loop of
// fixed trip count ("no vectype for .MASK_LOAD"): every element then runs scalar, the full
// blocks as well as the ragged one (squeezenet's int8 requantize steps ran at 10x their
// prediction, its 1000-class conv's epilogue at a third of the product's rate).
//
//   for v in [b, b + n) (vectorised) { decls; if (c) then }
//     ==>  if (c[v = b] && c[v = b + n - 1]) { for v { decls; then } }
//          else { for v { decls; if (c) then } }
//
// when c, with the loop's i64 declarations inlined, is a conjunction of comparisons between
// expressions affine in v (sums, differences, products by expressions that do not read v; no
// loads, no variable the loop assigns): such a set of v is an interval, so holding at both
// ends it holds throughout, and the copy computes exactly what the guarded loop computes. The
// host printer applies the same test to a fused mma_tile epilogue's 16 lanes (guardAtEnds).
#pragma once

#include "kir/kir.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace aicf::kir {

// Whether e is affine in v: an i64 built from integers, variables, v, sums and differences,
// and products in which one side does not read v (no loads).
bool affineIn(const ExprP &e, const std::string &v);

// e with the i64 definitions `defs` (name -> value) inlined, repeatedly (a definition may read
// an earlier one); null for a cycle.
ExprP inlineDefs(const ExprP &e, const std::map<std::string, ExprP> &defs);

// c[v = first] && c[v = last], `defs` (i64 scalars: name -> value) inlined into c first, when
// c is such a conjunction in v; nullopt otherwise.
std::optional<E> guardAtEnds(const E &cond, const std::string &v,
                             const std::map<std::string, ExprP> &defs, const E &first,
                             const E &last);

// Versions k's guarded vector loops; one note per kernel changed. Whether k changed.
bool versionLaneGuards(Kernel &k, std::vector<std::string> &notes);

} // namespace aicf::kir
