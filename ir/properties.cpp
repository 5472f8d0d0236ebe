#include "ir/properties.h"

namespace aicf {

const char *propertyName(MemProperty p) {
  switch (p) {
  case MemProperty::OnlineReducibleNorm: return "online_reducible_norm";
  case MemProperty::WeightedStreamingReduction: return "weighted_streaming_reduction";
  case MemProperty::RematerializableIntermediate: return "rematerializable_intermediate";
  case MemProperty::TileCompatibleCompute: return "tile_compatible_compute";
  }
  return "?";
}

std::optional<MemProperty> parseProperty(std::string_view name) {
  for (MemProperty p : kAllProperties)
    if (name == propertyName(p))
      return p;
  return std::nullopt;
}

std::vector<MemProperty> PropertySet::list() const {
  std::vector<MemProperty> out;
  for (MemProperty p : kAllProperties)
    if (has(p))
      out.push_back(p);
  return out;
}

const char *exactnessName(Exactness e) {
  switch (e) {
  case Exactness::Exact: return "exact";
  case Exactness::Reassociated: return "reassociated";
  case Exactness::Approximate: return "approximate";
  }
  return "?";
}

bool Certificate::holds() const {
  return firstFailed() == nullptr;
}

const Condition *Certificate::firstFailed() const {
  for (const Condition &c : conditions)
    if (!c.held)
      return &c;
  return nullptr;
}

} // namespace aicf
