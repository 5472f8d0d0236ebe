// Memory properties (DESIGN.md §3) and the certificates that record why one holds or not.
#pragma once

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

// What an online_reducible_norm certificate establishes about a norm, for the lowering: the
// state algebra and where its inputs come from. The lowering reads this, never the op, so a new
// norm op whose checker declares one of these algebras lowers with no codegen change.
struct NormSpec {
  std::string algebra;   // "softmax", "log_softmax", "welford", "sum_squares"
  int64_t firstAxis = 0; // the reduced axes [firstAxis, lastAxis] of operand 0 (normalised, >= 0)
  int64_t lastAxis = 0;
  double epsilon = 0;    // welford / sum_squares: added to the variance / mean square
  int scaleOperand = -1; // operand index of the per-element scale (gamma, weight); -1: none
  int biasOperand = -1;  // operand index of the per-element bias (beta); -1: none
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
