// See branch_guards.h: the condition under which each kernel step's results are needed.
#include "plan/branch_guards.h"

#include <map>

namespace aicf {

namespace {

// When a value is needed: never, always, or only when `cond` is `when`.
struct Need {
  enum class Kind : uint8_t { Never, Always, When } kind = Kind::Never;
  const Value *cond = nullptr;
  bool when = true;

  static Need always() { return {Kind::Always, nullptr, true}; }
  static Need whenever(const Value *c, bool w) { return {Kind::When, c, w}; }
  bool operator==(const Need &o) const {
    return kind == o.kind && (kind != Kind::When || (cond == o.cond && when == o.when));
  }
};

// Needed under a or under b (a different condition, or both sides, is "always").
Need either(const Need &a, const Need &b) {
  if (a.kind == Need::Kind::Never)
    return b;
  if (b.kind == Need::Kind::Never || a == b)
    return a;
  return Need::always();
}

// Needed under `outer` and under (c, w): (c, w) inside an unconditional need; a need already
// under a condition keeps it (over-approximating the conjunction).
Need within(const Need &outer, const Value *c, bool w) {
  if (outer.kind == Need::Kind::Always)
    return Need::whenever(c, w);
  return outer;
}

} // namespace

int guardBranchSteps(Plan &plan, const Graph &g, const std::vector<KernelGroup> &groups,
                     const ValueBuffers &vb) {
  if (plan.target.gpu() || plan.planFor.gpu())
    return 0;
  std::vector<Node *> nodes = g.nodes();
  bool any = false;
  for (const Node *n : nodes)
    any = any || isBranchSelect(*n);
  if (!any)
    return 0;

  // Backwards over the graph: each node's need from its users' needs.
  std::map<const Node *, Need> need;
  for (const Value *o : g.outputs())
    if (o && o->def())
      need[o->def()] = Need::always();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    const Node *n = *it;
    Need mine = need[n];
    if (mine.kind == Need::Kind::Never)
      continue;
    bool select = isBranchSelect(*n);
    for (size_t k = 0; k < n->numOperands(); ++k) {
      const Node *d = n->operand(k)->def();
      if (!d)
        continue;
      Need through = mine;
      if (select && k > 0)
        through = within(mine, n->operand(0), k == 1);
      need[d] = either(need[d], through);
    }
  }

  // The step that writes each value (its group's index), for the "written before" check.
  std::map<const Value *, size_t> writer;
  for (size_t i = 0; i < groups.size(); ++i)
    for (const Value *v : groups[i].outputs)
      writer[v] = i;

  int guarded = 0;
  for (size_t i = 0; i < groups.size() && i < plan.steps.size(); ++i) {
    Need step;
    for (const Node *n : groups[i].nodes)
      step = either(step, need[n]);
    if (step.kind != Need::Kind::When)
      continue;
    auto buf = vb.index.find(step.cond);
    if (buf == vb.index.end())
      continue; // computed inside a kernel, never stored
    auto w = writer.find(step.cond);
    bool fresh = step.cond->isInput() || (w != writer.end() && w->second < i);
    if (!fresh)
      continue;
    PlanStep &st = plan.steps[i];
    st.guard = plan.buffers[static_cast<size_t>(buf->second)].id;
    st.guardWhen = step.when;
    ++guarded;
  }
  return guarded;
}

} // namespace aicf
