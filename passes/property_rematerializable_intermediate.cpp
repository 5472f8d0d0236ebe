// rematerializable_intermediate (docs/architecture.md): a value may be recomputed where it is
// consumed instead of being stored and reloaded. Legality: the producing op is pure, deterministic
// and side-effect free (registry flag PURE) and elementwise, so recomputing it inside a consumer's
// loop gives the same bits. Attention's score tile is rematerialised by construction. A row norm
// (layer_norm / rms_norm over the last axis) read only as contractions' A along that axis
// (ir/norm_readers.h) is recomputed in each reader's tiles: the reader computes its rows'
// statistics and normalises A as it stages it (reassociated: the statistics sum in the
// reader's order, not the norm kernel's).
// Whether recomputing is cheaper than storing is the planner's decision (cost model); this
// property only says it is allowed.
#include "ir/norm_readers.h"
#include "passes/property_checks.h"
#include "support/diagnostics.h"

namespace aicf {

namespace {

std::optional<Certificate> checkRowNorm(const Graph &g, const Node &n) {
  if (!isRowNorm(n))
    return std::nullopt;
  Certificate c;
  c.property = MemProperty::RematerializableIntermediate;
  c.rewrite = "store -> recompute the rows' statistics in each contraction's A read";
  c.exactness = Exactness::Reassociated;
  bool pure = n.info().has(PURE);
  c.conditions.push_back(
      {"pure", pure ? "no side effects (registry)" : "op has side effects", pure});
  bool f32 = n.result()->type().dtype == DType::F32;
  c.conditions.push_back({"f32", cat("result ", n.result()->type().str()), f32});
  std::string why;
  std::optional<RowNormReaders> rd = rowNormReaders(g, n, &why);
  std::string readers;
  if (rd)
    for (const Node *r : rd->contractions)
      readers += cat(readers.empty() ? "" : ", ", r->name(), " (", r->where(), ")");
  c.conditions.push_back({"read as whole rows",
                          rd ? cat("A of ", readers, " along the normalised axis") : why,
                          rd.has_value()});
  return c;
}

} // namespace

std::optional<Certificate> checkRematerializableIntermediate(const Graph &g, const Node &n,
                                                             const Target &) {
  if (n.op() == Op::LayerNorm || n.op() == Op::RmsNorm)
    return checkRowNorm(g, n);
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
