// rematerializable_intermediate (DESIGN.md §3): a value may be recomputed where it is consumed
// instead of being stored and reloaded. Legality: the producing op is pure, deterministic and
// side-effect free (registry flag PURE) and elementwise, so recomputing it inside a consumer's
// loop gives the same bits. Attention's score tile is rematerialised by construction.
// Whether recomputing is cheaper than storing is the planner's decision (cost model); this
// property only says it is allowed.
#include "passes/property_checks.h"
#include "support/diagnostics.h"

namespace aicf {

std::optional<Certificate> checkRematerializableIntermediate(const Graph &, const Node &n,
                                                             const Target &) {
  bool attention = n.op() == Op::Attention;
  if (!n.info().has(EW) && !attention)
    return std::nullopt;
  Certificate c;
  c.property = MemProperty::RematerializableIntermediate;
  c.rewrite =
      attention ? "scores recomputed per tile, never stored" : "store -> recompute in consumers";
  c.exactness = Exactness::Exact;
  bool pure = n.info().has(PURE);
  c.conditions.push_back(
      {"pure", pure ? "no side effects (registry)" : "op has side effects", pure});
  c.conditions.push_back(
      {"deterministic", pure ? "same inputs give the same bits" : "not guaranteed", pure});
  c.conditions.push_back(
      {"side-effect free", pure ? "writes only its result" : "writes elsewhere", pure});
  if (!attention)
    c.conditions.push_back(
        {"elementwise", cat(n.name(), ": each output element from the same input index"), true});
  return c;
}

} // namespace aicf
