// Per-image lowering (issue 55): a group over a symbolic batch whose recipe plans one shape (a
// convolution, pooling, a channel-blocked layout conversion) is lowered for one image and run
// once per image, the batch a grid axis.
//
// Why: a CNN's kernels compute each image of dim 0 from the same image alone, so a folder for
// batches 1..16 needs no new kernel forms, only the one-image kernel offset per image. Every
// recipe that lowers a static shape thereby takes a symbolic batch, without a symbolic form of
// its own; recipes with a symbolic form (contractions' rows, attention, norms) keep it.
//
// Legal when every value the group reads or writes is either static (a weight, a scale) or
// [B, static dims...] with one batch expression B, and every node computes each image of its
// result's dim 0 from the same image of its operands (perImageNode).
#pragma once

#include "kir/kir.h"
#include "lower/fusion.h"
#include "lower/lower.h"
#include "lower/recipe.h"

#include <optional>

namespace aicf {

// The batch expression when `g` can be lowered one image at a time (see above), else nullopt.
std::optional<SymExpr> perImageBatch(const KernelGroup &g);

// `r`'s kernel for `g` at one image (the group's batch values set to 1 while it builds), with
// an outermost grid axis over the batch `batch` and every per-image param offset by its image.
kir::Kernel buildPerImage(const Recipe &r, const KernelGroup &g, const std::string &name,
                          const Knobs &knobs, const SymExpr &batch);

} // namespace aicf
