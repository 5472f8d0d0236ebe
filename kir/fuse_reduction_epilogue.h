// FuseReductionEpilogue (seed 002, docs/algorithms.md; after TVM's
// fuse_reduction_epilogue): a Kernel-IR pass that moves an additive epilogue into the
// reduction's init.
//
//   reduce k { init: acc[ai] = 0   update: acc[ai] += ... }      reduce k { init: acc[ai] = g'
//   ...                                                     ==>           update: acc[ai] += ... }
//   D[di] = acc[ei] + g        (or g + acc[ei])                  D[di] = acc[ei]
//
// g' is g with the epilogue's loop variables renamed to the reduction's (the epilogue's loop nest
// must match the init's loop nest: same regions, same loop bounds in the same order; guards
// (`if`) around the epilogue store carry over: init becomes `if (guard') acc = g' else acc = 0`).
// When D is the accumulator itself (acc[ei] = acc[ei] + g) the store disappears; when D is a
// different buffer that can hold the accumulation (same dtype and shape, same index, written
// nowhere else, and the accumulator is a kernel allocation), the reduction accumulates into D
// directly and both the temporary and the store disappear.
//
// Legal only when (each failure is reported with its reason):
//   * the epilogue is additive in the accumulator: acc + g or g + acc at the top of the stored
//     value (relu(acc + C), clip, acc * s ... stay after the reduction: fusing them into init
//     would change results);
//   * the accumulator is read exactly once after the reduction (the epilogue) and nothing else
//     consumes it (reads after a self-update acc = acc + g are reads of the result: allowed);
//   * the index maps line up (the epilogue reads acc at the index the init writes, through the
//     renaming) and g only uses variables and buffers available at the init (no variables bound
//     between the reduction and the epilogue, no buffer the reduction writes);
//   * the update only accumulates into acc (acc = acc + x, or mma_tile into acc).
// The rewrite is exact up to floating-point reassociation (g is added first instead of last).
#pragma once

#include "kir/kir.h"

#include <string>
#include <vector>

namespace aicf {

struct ReductionEpilogueOutcome {
  std::string accumulator; // buffer name
  bool applied = false;
  std::string reason; // applied: what changed; rejected: the condition that failed
  // Whether a store reads the accumulator after the reduction (an epilogue to consider). A
  // reduction consumed only otherwise (a contraction without additive terms reads C into its
  // final region through a decl) has nothing to fuse.
  bool hasEpilogue = false;
  std::string text() const; // "FuseReductionEpilogue(acc): applied: ..." / "... rejected: ..."
};

struct FuseReductionEpilogueResult {
  // One entry per reduction whose init zeroes an accumulator the update accumulates into, in
  // kernel order.
  std::vector<ReductionEpilogueOutcome> outcomes;
  bool applied() const; // any applied
};

// Runs the pass over `k` in place. With `annotate`, a Comment with each outcome's text is
// inserted before its reduction, so the printed Kernel IR shows what happened and why. With
// `onlyWithEpilogue`, reductions without an epilogue store are left out of the outcomes (and
// not annotated): the Kernel IR pipeline runs on every kernel and notes only real candidates.
FuseReductionEpilogueResult fuseReductionEpilogue(kir::Kernel &k, bool annotate = true,
                                                  bool onlyWithEpilogue = false);

} // namespace aicf
