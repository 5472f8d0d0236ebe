// Helpers shared by the anchor recipes (see recipe_support.h).
#include "lower/recipe_support.h"

#include "support/diagnostics.h"

#include <algorithm>

namespace aicf::recipe {

using kir::E;

E asF32(const E &e) {
  return e->type == DType::F16 || e->type == DType::BF16 ? kir::cast(e, DType::F32) : e;
}

std::vector<E> concat(std::vector<E> a, const std::vector<E> &b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

E allOf(const std::vector<E> &conds) {
  E all;
  for (const E &c : conds) {
    if (!c)
      continue;
    all = all ? (all && c) : c;
  }
  return all;
}

void requireShapePreservingEpilogue(const KernelGroup &g, const Value *anchorResult) {
  for (const Value *v : g.outputs)
    if (v->type().shape != anchorResult->type().shape)
      throw InternalError(cat("group ", g.id, " (", g.kind, "): output ", v->name(), " ",
                              v->type().str(), " does not have the anchor's shape ",
                              anchorResult->type().str(),
                              "; the fused epilogue cannot be "
                              "computed per anchor element"));
}

std::pair<int64_t, int64_t> insideRange(int64_t outputs, int64_t stride, int64_t offset,
                                        int64_t limit) {
  int64_t lo = offset >= 0 ? 0 : ceilDiv(-offset, stride);
  int64_t hi = limit - offset <= 0 ? 0 : ceilDiv(limit - offset, stride);
  lo = std::min(lo, outputs);
  return {lo, std::clamp(hi, lo, outputs)};
}

} // namespace aicf::recipe
