// Memory properties (docs/architecture.md) and the certificates that record why one holds or not.
#pragma once

#include "support/enum_names.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace aicf {

enum class MemProperty : uint8_t {
  OnlineReducibleNorm,          // streaming reduction with a mergeable state
  WeightedStreamingReduction,   // softmax(QK^T)V computable in a stream
  RematerializableIntermediate, // may be recomputed instead of stored
  TileCompatibleCompute,        // dependency closure within a tile
};
inline constexpr MemProperty kAllProperties[] = {
    MemProperty::OnlineReducibleNorm, MemProperty::WeightedStreamingReduction,
    MemProperty::RematerializableIntermediate, MemProperty::TileCompatibleCompute};

const char *propertyName(MemProperty p); // "online_reducible_norm", ...
std::optional<MemProperty> parseProperty(std::string_view name);

// A set of properties, as a bit mask ordered as the enum (so printing is deterministic).
class PropertySet {
public:
  void add(MemProperty p) { bits_ |= bit(p); }
  void remove(MemProperty p) { bits_ &= static_cast<uint8_t>(~bit(p)); }
  bool has(MemProperty p) const { return (bits_ & bit(p)) != 0; }
  bool empty() const { return bits_ == 0; }
  std::vector<MemProperty> list() const;
  bool operator==(const PropertySet &o) const { return bits_ == o.bits_; }

private:
  static uint8_t bit(MemProperty p) { return static_cast<uint8_t>(1u << static_cast<int>(p)); }
  uint8_t bits_ = 0;
};

// Exactness of a rewrite with respect to the original computation.
enum class Exactness : uint8_t { Exact, Reassociated, Approximate };
const char *exactnessName(Exactness e);

// One legality condition, the values it was evaluated on, and whether it held.
struct Condition {
  std::string name;     // "intermediates consumed only inside the match"
  std::string evidence; // "%12 used by /attn/Softmax_1 only"
  bool held = false;
};

// Where a welford norm adds epsilon in its finalize (var = M2/n, the population variance):
//   Variance: y = (x - mean) / sqrt(var + epsilon)       layer_norm
//   StdDev:   y = (x - mean) / (sqrt(var) + epsilon)     ONNX MeanVarianceNormalization (1e-9)
// sum_squares always adds it to the mean square: y = x / sqrt(s/n + epsilon).
enum class EpsilonPlacement : uint8_t { Variance, StdDev };

// What an online_reducible_norm certificate establishes about a norm, for the lowering: the
// state algebra and where its inputs come from. The lowering reads this, never the op, so a new
// norm op whose checker declares one of these algebras lowers with no codegen change.
//
// The checker sets Certificate::norm whenever the op declares an algebra and its reduced axes
// are one contiguous range [firstAxis, lastAxis], whether or not the certificate holds (softmax
// over a leading axis, layer_norm with computed parameters: the algebra is still this one, and
// what a failed certificate gets is the lowering's choice). It is unset when the reduced axes
// are not one range (mean_variance_norm over [0, 2, 3]). The finalize of each algebra, with
// s = the row's state, n = the row length, g = scale (1 when none), b = bias (0 when none):
//   softmax:     y = e^(x - m) / d
//   log_softmax: y = (x - m) - log d
//   welford:     y = (x - mean) / sqrt(M2/n + epsilon) * g + b   (epsilonAt == Variance)
//                y = (x - mean) / (sqrt(M2/n) + epsilon) * g + b (epsilonAt == StdDev)
//   sum_squares: y = x / sqrt(s/n + epsilon) * g
// Scale and bias are broadcast to the normalised shape, the dims [firstAxis, rank) of operand 0.
enum class NormAlgebra : uint8_t { Softmax, LogSoftmax, Welford, SumSquares };
constexpr EnumNames<NormAlgebra, 4> enumNames(NormAlgebra) {
  return {{{NormAlgebra::Softmax, "softmax"},
           {NormAlgebra::LogSoftmax, "log_softmax"},
           {NormAlgebra::Welford, "welford"},
           {NormAlgebra::SumSquares, "sum_squares"}}};
}

struct NormSpec {
  NormAlgebra algebra = NormAlgebra::Softmax;
  int64_t firstAxis = 0; // the reduced axes [firstAxis, lastAxis] of operand 0 (normalised, >= 0)
  int64_t lastAxis = 0;
  double epsilon = 0;    // welford: where epsilonAt says; sum_squares: to the mean square; else 0
  int scaleOperand = -1; // operand index of the per-element scale (gamma, weight); -1: none
  int biasOperand = -1;  // operand index of the per-element bias (beta); -1: none
  EpsilonPlacement epsilonAt = EpsilonPlacement::Variance; // welford only; see above
};

// The record of one property check or rewrite: which property, what was checked, the outcome.
struct Certificate {
  MemProperty property;
  std::string rewrite; // "two-pass layer_norm -> one-pass Welford", "" when none
  std::vector<Condition> conditions;
  Exactness exactness = Exactness::Exact;
  std::optional<NormSpec> norm; // online_reducible_norm: the algebra the lowering generates from

  bool holds() const;
  const Condition *firstFailed() const;
};

} // namespace aicf
