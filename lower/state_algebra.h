// Norm state algebras (docs/algorithms.md, "Online normalisation") as data: a norm is
// described by its per-row state (fields with init values), update(state, x), an associative
// merge (a kir::Combiner, for block_reduce) and finalize(state, x) -> y. The online-norm recipe
// (recipe_online_norm.cpp) is generic over this description, so adding a norm means declaring its
// algebra here, not writing a kernel.
//
// Expressions are Kernel IR over named scalars:
//   * the current state field f is the variable stateVar(f) ("s_<f>"), the element is kInputVar;
//   * update: `updateLets` (evaluated in order) then one new value per field; all new values are
//     computed from the old state before any field is assigned;
//   * merge: the Combiner's "a_<f>" / "b_<f>" variables (kir.h);
//   * finalize: `finalizeLets` are per-row constants over the merged state (hoisted out of the
//     element loop), then `finalize` gives y from them, kInputVar and the param variables.
#pragma once

#include "ir/properties.h"
#include "kir/kir.h"
#include "support/sym_expr.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace aicf {

class Node;

using KirLet = std::pair<std::string, kir::E>;

struct StateField {
  std::string name; // "m", "d", "n", "mean", "m2", "ss"
  DType dtype = DType::F32;
  kir::E init;
};

// A per-element parameter the finalize reads (layer_norm gamma / beta, rms_norm weight): the
// norm node's operand `operand`, broadcast to the normalised shape, bound to variable `var`.
struct NormParam {
  size_t operand = 1;
  std::string var;
};

struct StateAlgebra {
  NormAlgebra algebra = NormAlgebra::Softmax;
  std::vector<StateField> fields;
  std::vector<KirLet> updateLets;
  std::vector<kir::E> update; // one per field
  kir::Combiner merge;
  std::vector<KirLet> finalizeLets;
  kir::E finalize;
  std::vector<NormParam> params;
};

inline constexpr const char *kInputVar = "x";
std::string stateVar(const std::string &field); // "s_<field>"

// Softmax: (m, d) = (running max, running sum of e^(x - m)) with rescaling. Every exponential
// is guarded so that a state that has seen only -inf (m = -inf, d = 0) merges without NaN; a row
// that is entirely -inf still finalizes to NaN, as ONNX and the interpreter define it.
StateAlgebra softmaxAlgebra();
// log_softmax: the same state; finalize (x - m) - log d.
StateAlgebra logSoftmaxAlgebra();
// Welford (n, mean, M2), Chan's merge; y = (x - mean) / sqrt(M2/n + eps) * g + b (epsilonAt
// StdDev: / (sqrt(M2/n) + eps)), the scale g
// and bias b read from operands `scaleOperand` / `biasOperand` (-1: none).
StateAlgebra welfordAlgebra(double epsilon, EpsilonPlacement epsilonAt, int scaleOperand,
                            int biasOperand);
// Sum of squares: s = sum of x^2 over a row of `rowLength`; y = x / sqrt(s/n + eps) * w + b.
// A symbolic `rowLength` (issue 21) is read from the dims' variables.
StateAlgebra sumSquaresAlgebra(double epsilon, const SymExpr &rowLength, int scaleOperand,
                               int biasOperand);

// The algebra a NormSpec names (ir/properties.h: softmax, log_softmax, welford, sum_squares).
// `rowLength` is the number of elements one state summarises.
StateAlgebra algebraFor(const NormSpec &spec, const SymExpr &rowLength);

// The NormSpec of a norm node: its online_reducible_norm certificate's (Certificate::norm,
// whether the certificate holds or not), nullopt when the node has none.
std::optional<NormSpec> normSpecFor(const Node &n);

} // namespace aicf
