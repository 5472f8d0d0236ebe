// Helpers shared by the anchor recipes (norm, attention, contraction): shape arithmetic, index
// helpers and the writer of a group's outputs through its fused epilogue.
#pragma once

#include "lower/group_expr.h"
#include "lower/lower.h"
#include "support/int_math.h"

#include <cstdint>
#include <limits>
#include <vector>

namespace aicf::recipe {

// ceilDiv, roundUp, nextPow2, product: support/int_math.h.
using aicf::ceilDiv;
using aicf::nextPow2;
using aicf::product;
using aicf::roundUp;

// isGpuPlan: lower/lower.h.

// unflat (row-major multi-index of a flat index): lower/group_expr.h.
// `e` as an f32 value: group expressions of f16 / bf16 values carry their own (rounded) dtype;
// recipes compute in f32.
kir::E asF32(const kir::E &e);

// The concatenation of two index lists.
std::vector<kir::E> concat(std::vector<kir::E> a, const std::vector<kir::E> &b);
// Conjunction of the non-null conditions (null when there are none).
kir::E allOf(const std::vector<kir::E> &conds);

// InternalError unless every group output has the anchor result's shape.
void requireShapePreservingEpilogue(const KernelGroup &g, const Value *anchorResult);

// storeGroupOutputs (a group's outputs through its fused epilogue): lower/group_expr.h.

} // namespace aicf::recipe
