// The parts of a plain contraction (matmul with a rank-2 B, or gemm with transA 0, alpha 1,
// beta 1; f32) that the graph passes rewriting contractions with constant weights share
// (split-chains slices them along the hidden, merge-siblings concatenates them along N): the
// predicate, the extra operands with the epilogue steps that take them, and B read as [K, N].
#pragma once

#include "ir/epilogue.h"
#include "ir/graph.h"

#include <vector>

namespace aicf {

// v is a static f32 value; a constant f32 weight (its data known at compile time).
bool staticF32(const Value *v);
bool constantF32Weight(const Value *v);

// n is a matmul (A rank >= 2, B rank 2) or a gemm with transA 0, alpha 1 and beta 1, all f32.
bool plainContraction(const Node &n);

// One step on the accumulator with its extra operand (null: a step without one).
struct ContractionStep {
  EpilogueStep step;
  Value *operand = nullptr;
};

// n's extra operands in order (a gemm's C first, as an "add") with the epilogue steps that take
// them, and the steps without an operand, as one list of steps on the accumulator.
std::vector<ContractionStep> contractionSteps(const Node &n);

// B of a plain contraction as [K, N] (a gemm's transB applied), and its element (k, col) from
// B's data `b`.
int64_t contractionK(const Node &n);
int64_t contractionN(const Node &n);
float contractionB(const Node &n, const float *b, int64_t k, int64_t col);

} // namespace aicf
