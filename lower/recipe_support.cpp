// Helpers shared by the anchor recipes (see recipe_support.h).
#include "lower/recipe_support.h"

#include "support/diagnostics.h"

#include <algorithm>

namespace aicf::recipe {

using kir::E;

std::vector<E> unflat(const std::vector<int64_t> &shape, E flat) {
  std::vector<E> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    if (d == 0) {
      idx[d] = flat;
    } else {
      idx[d] = shape[d] == 1 ? E(int64_t(0)) : flat % E(shape[d]);
      flat = shape[d] == 1 ? flat : flat / E(shape[d]);
    }
  }
  return idx;
}

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

std::vector<kir::StmtP> storeGroupOutputs(const KernelGroup &g, GroupExpr &gx,
                                          const Value *anchorResult, const E &anchorValue,
                                          const std::vector<E> &idx) {
  gx.substitute(anchorResult, [anchorValue](const std::vector<E> &) { return anchorValue; });
  std::vector<kir::StmtP> out;
  for (const Value *v : g.outputs)
    out.push_back(kir::store(gx.param(v), idx, v == anchorResult ? anchorValue : gx.at(v, idx)));
  return out;
}

} // namespace aicf::recipe
