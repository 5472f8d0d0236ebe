#include "passes/match.h"

#include "passes/explain.h"
#include "passes/pass.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace aicf {

std::optional<double> splatValue(const Value *v) {
  if (!v || !v->hasData() || v->type().numel() == 0) // elided data: not a known constant
    return std::nullopt;
  const Tensor &t = *v->data();
  double first = t.getDouble(0);
  for (int64_t i = 1; i < t.numel(); ++i)
    if (t.getDouble(i) != first)
      return std::nullopt;
  return first;
}

bool isSplatNear(const Value *v, double want, double relTol) {
  auto s = splatValue(v);
  if (!s)
    return false;
  return std::fabs(*s - want) <= relTol * std::max(std::fabs(want), 1e-6);
}

Node *producer(const Value *v, Op op) {
  return v && v->def() && v->def()->op() == op ? v->def() : nullptr;
}

Value *otherOperand(const Node *n, const Value *known) {
  if (n->numOperands() != 2)
    return nullptr;
  if (n->operand(0) == known)
    return n->operand(1);
  if (n->operand(1) == known)
    return n->operand(0);
  return nullptr;
}

static void collectFactors(const Graph &g, Value *v, bool root, std::vector<Value *> &out,
                           std::vector<Node *> &muls) {
  Node *m = producer(v, Op::Mul);
  // Products broadcast associatively, so any tree can be flattened; matchers check that the
  // operand they rebuild from has the root's type.
  bool open = m && (root || (g.users(v).size() == 1 && !g.isOutput(v)));
  if (!open) {
    out.push_back(v);
    return;
  }
  muls.push_back(m);
  collectFactors(g, m->operand(0), false, out, muls);
  collectFactors(g, m->operand(1), false, out, muls);
}

std::vector<Value *> mulFactors(const Graph &g, Value *v, std::vector<Node *> &muls) {
  std::vector<Value *> out;
  collectFactors(g, v, true, out, muls);
  return out;
}

std::vector<Value *> splitConstFactors(const std::vector<Value *> &factors, double &scale) {
  std::vector<Value *> rest;
  scale = 1.0;
  for (Value *f : factors) {
    if (auto s = splatValue(f); s && f->type().numel() <= 1)
      scale *= *s;
    else
      rest.push_back(f);
  }
  return rest;
}

std::string describe(const Value *v) {
  if (v->isInput())
    return "input " + v->name();
  if (v->isWeight())
    return "constant " + (v->loc.empty() ? v->name() : v->loc.str());
  if (v->def())
    return "the result of " + v->def()->where();
  return v->name();
}

Condition internalOnly(const Graph &g, const std::vector<Node *> &matched, const Value *root) {
  Condition c;
  c.name = "intermediates consumed only inside the match";
  std::set<const Node *> inside(matched.begin(), matched.end());
  int intermediates = 0;
  for (const Node *n : matched)
    for (const Value *r : n->results()) {
      if (r == root)
        continue;
      ++intermediates;
      if (g.isOutput(r)) {
        c.evidence = describe(r) + " is also a graph output";
        return c;
      }
      for (const Node *u : g.users(r))
        if (!inside.count(u)) {
          c.evidence = describe(r) + " has a consumer outside the match: node " + u->where();
          return c;
        }
    }
  c.held = true;
  c.evidence = cat(intermediates, " intermediates, all consumed inside the match");
  return c;
}

std::vector<std::string> originsOf(const Graph &g, const std::vector<Node *> &matched) {
  std::vector<Node *> sorted = matched;
  std::sort(sorted.begin(), sorted.end(),
            [&](Node *a, Node *b) { return g.nodeIndex(a) < g.nodeIndex(b); });
  std::vector<std::string> out;
  for (Node *n : sorted)
    for (const std::string &o : n->loc.origins)
      if (std::find(out.begin(), out.end(), o) == out.end())
        out.push_back(o);
  return out;
}

Location fusedLocation(const Graph &g, const std::vector<Node *> &matched) {
  Location l;
  l.origins = originsOf(g, matched);
  return l;
}

std::vector<int64_t> reducedAxes(const Node *reduce) {
  std::vector<int64_t> axes = reduce->ints("axes");
  if (axes.empty())
    for (int64_t d = 0; d < reduce->operand(0)->type().rank(); ++d)
      axes.push_back(d);
  return axes;
}

bool trailingContiguous(const std::vector<int64_t> &axes, int64_t rank) {
  if (axes.empty())
    return false;
  for (size_t k = 0; k < axes.size(); ++k)
    if (axes[k] != rank - static_cast<int64_t>(axes.size()) + static_cast<int64_t>(k))
      return false;
  return true;
}

void eraseDead(Graph &g, std::vector<Node *> matched) {
  std::sort(matched.begin(), matched.end(),
            [&](Node *a, Node *b) { return g.nodeIndex(a) > g.nodeIndex(b); });
  matched.erase(std::unique(matched.begin(), matched.end()), matched.end());
  for (Node *n : matched) {
    if (!g.hasNode(n))
      continue;
    bool used = false;
    for (Value *r : n->results())
      used = used || g.hasUses(r);
    if (!used)
      g.eraseNode(n);
  }
}

bool applyIfLegal(Graph &g, PassContext &ctx, const char *pass, const std::string &pattern,
                  const std::vector<Node *> &matched, Value *root, Certificate cert,
                  const std::function<Value *(Node *insertBefore, const Location &loc)> &build,
                  const std::string &resultLabel) {
  cert.conditions.insert(cert.conditions.begin(), internalOnly(g, matched, root));
  RewriteRecord rec;
  rec.pass = pass;
  rec.pattern = pattern;
  rec.origins = originsOf(g, matched);
  bool ok = cert.holds();
  if (ok) {
    Value *repl = build(root->def(), fusedLocation(g, matched));
    g.replaceAllUsesWith(root, repl);
    eraseDead(g, matched);
    rec.applied = true;
    rec.result = !resultLabel.empty() ? resultLabel
                 : repl->def()        ? repl->def()->name()
                                      : describe(repl);
  } else {
    const Condition *bad = cert.firstFailed();
    rec.note = bad->name + ": " + bad->evidence;
  }
  rec.certificates.push_back(std::move(cert));
  if (ctx.explain)
    ctx.explain->add(std::move(rec));
  return ok;
}

} // namespace aicf
