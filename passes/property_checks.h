// The four memory properties (docs/architecture.md), one checker each (passes/property_*.cpp). A
// checker returns nullopt when the property does not apply to the node's op, else a certificate
// with every legality condition evaluated (held or not). annotate-properties runs them all.
#pragma once

#include "ir/graph.h"
#include "target/target.h"

#include <optional>
#include <vector>

namespace aicf {

using PropertyCheck = std::optional<Certificate> (*)(const Graph &g, const Node &n,
                                                     const Target &target);

struct PropertyChecker {
  MemProperty property;
  PropertyCheck check;
};

std::optional<Certificate> checkOnlineReducibleNorm(const Graph &, const Node &, const Target &);
std::optional<Certificate> checkWeightedStreamingReduction(const Graph &, const Node &,
                                                           const Target &);
std::optional<Certificate> checkRematerializableIntermediate(const Graph &, const Node &,
                                                             const Target &);
std::optional<Certificate> checkTileCompatibleCompute(const Graph &, const Node &, const Target &);

// The registered checkers, in a fixed order (adding a property: one file and one line here).
inline const std::vector<PropertyChecker> &propertyCheckers() {
  static const std::vector<PropertyChecker> checkers = {
      {MemProperty::OnlineReducibleNorm, checkOnlineReducibleNorm},
      {MemProperty::WeightedStreamingReduction, checkWeightedStreamingReduction},
      {MemProperty::RematerializableIntermediate, checkRematerializableIntermediate},
      {MemProperty::TileCompatibleCompute, checkTileCompatibleCompute},
  };
  return checkers;
}

} // namespace aicf
