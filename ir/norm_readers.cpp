#include "ir/norm_readers.h"

#include "ir/index_map.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <functional>

namespace aicf {

bool isRowNorm(const Node &n) {
  if (n.op() != Op::LayerNorm && n.op() != Op::RmsNorm)
    return false;
  int64_t rank = n.operand(0)->type().rank();
  int64_t axis = n.i("axis");
  return rank >= 1 && n.operand(0)->type().isStatic() && (axis == -1 || axis == rank - 1);
}

std::optional<RowNormReaders> rowNormReaders(const Graph &g, const Node &norm, std::string *why) {
  RowNormReaders out;
  const int64_t K = norm.operand(0)->type().shape.back();
  auto fail = [&](std::string w) -> bool {
    if (why)
      *why = std::move(w);
    return false;
  };
  std::vector<const Node *> path; // the reshapes from the norm to `v`
  std::function<bool(const Value *)> walk = [&](const Value *v) {
    if (g.isOutput(v))
      return fail(cat("%", v->name(), " is a graph output"));
    std::vector<Node *> users = g.users(v);
    if (users.empty())
      return fail(cat("%", v->name(), " has no reader"));
    for (const Node *u : users) {
      if (u->op() == Op::Reshape && isLayoutOp(*u)) {
        if (u->result()->type().shape.empty() || u->result()->type().shape.back() != K)
          return fail(cat(u->name(), " (", u->where(), ") changes the last dim"));
        path.push_back(u);
        if (!walk(u->result()))
          return false;
        path.pop_back();
        continue;
      }
      bool contraction = u->op() == Op::MatMul || (u->op() == Op::Gemm && u->i("transA") == 0);
      if (!contraction || u->operand(0) != v || v->type().rank() < 2 ||
          std::count(u->operands().begin(), u->operands().end(), v) != 1)
        return fail(cat(u->name(), " (", u->where(), ") does not read it as the rows of A"));
      out.contractions.push_back(u);
      out.views.push_back(path);
    }
    return true;
  };
  if (!walk(norm.result()))
    return std::nullopt;
  return out;
}

} // namespace aicf
