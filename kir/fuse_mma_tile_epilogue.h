// FuseMmaTileEpilogue: a Kernel-IR pass that moves a host contraction tile's per-element init
// and epilogue into its mma_tile, so the micro-kernel runs them on its registers.
//
//   reduce k0 {                                        reduce k0 {
//     init: region t { for i, jo, jl {                   init: (nothing)
//             var j = jo * 16 + jl; C[t, i, j] = g } }   update: mma_tile C += A x B (..)
//     update: mma_tile C += A x B (..) }         ==>              fused first = k0 == 0,
//   region t { for i, jo, jl { var j = ..;                          last = k0 + BK >= K {
//     D[..] = f(C[t, i, j]) } }                             init { var j = ..; C[t, i, j] = g }
//                                                           epilogue { var j = ..;
//                                                                      D[..] = f(C[t, i, j]) } } }
//
// Why: with a short K (a pointwise conv's 16 to 64 input channels) the init's and the
// epilogue's passes over the C tile cost as much as the accumulation: mobilenet_v2's 16 -> 96
// expansion spent a third of its time on them. Fused, the accumulators start from the bias and
// leave through the activation straight into the output, and C is touched only between K steps.
//
// Legal when (each failure is noted with its reason):
//   * the reduction's update is exactly one mma_tile reading views (one thread owning the tile),
//     with tn a multiple of 16, accumulating into a local C;
//   * the init is one region walking C's tile as (i, jo, jl) with j = jo * 16 + jl, and so are
//     the regions right after the reduction that read C (the epilogue; regions left empty by
//     FuseReductionEpilogue are dropped), every access to C at its element [t, i, j];
//   * nothing else reads or writes C;
//   * when the tile's valid rows or columns are not the whole tile (a ragged last tile), every
//     store of the epilogue is guarded (an `if` around it), as the elements the micro-kernel
//     does not visit must not be stored.
// Exact: each element runs the same statements in the same order on the same values.
#pragma once

#include "kir/kir.h"

#include <string>
#include <vector>

namespace aicf {

struct MmaTileEpilogueOutcome {
  std::string accumulator;
  bool applied = false;
  std::string reason;
  std::string text() const; // "FuseMmaTileEpilogue(C): applied: ..." / "... rejected: ..."
};

// Runs the pass over `k` in place: one outcome per reduction whose update is a view mma_tile
// (the candidates), in kernel order, each also annotated as a comment before its reduction.
std::vector<MmaTileEpilogueOutcome> fuseMmaTileEpilogue(kir::Kernel &k);

} // namespace aicf
