// Splicing a loop body's plan into the enclosing plan (loop_bodies.h says why and how).
#include "plan/loop_bodies.h"

#include "support/diagnostics.h"
#include "support/int_math.h"

#include <algorithm>
#include <unordered_map>

namespace aicf {

int64_t spliceLoopBody(Plan &p, size_t at, const Plan &body, const std::string &prefix) {
  AICF_CHECK(at < p.steps.size() && p.steps[at].loop, "step ", at, " is no loop step");
  const std::vector<std::string> operands = p.steps[at].inputs, results = p.steps[at].outputs;
  std::unordered_map<std::string, size_t> outerIndex;
  for (size_t i = 0; i < p.buffers.size(); ++i)
    outerIndex[p.buffers[i].id] = i;
  const int64_t weightBase = alignUp(p.weightsBytes, 64);
  const int64_t arenaBase = alignUp(p.arenaBytes, 64);
  int64_t arenaEnd = arenaBase + alignUp(body.arenaBytes, 64);
  auto place = [&](PlanBuffer &b) {
    b.kind = BufferKind::Arena;
    b.offset = arenaEnd;
    arenaEnd += alignUp(std::max<int64_t>(b.bytes, 1), 64);
  };

  // The body's buffers, renumbered after the enclosing ones.
  std::unordered_map<std::string, std::string> rename;
  for (size_t k = 0; k < body.buffers.size(); ++k)
    rename[body.buffers[k].id] = cat("b", p.buffers.size() + k);
  std::vector<std::string> state(2 + results.size()), next(1 + results.size());
  const size_t first = p.buffers.size();
  for (const PlanBuffer &b : body.buffers) {
    PlanBuffer nb = b;
    nb.id = rename.at(b.id);
    nb.ioIndex = -1;
    if (!b.aliasOf.empty()) {
      nb.aliasOf = rename.at(b.aliasOf);
    } else if (b.kind == BufferKind::Input) {
      size_t k = static_cast<size_t>(b.ioIndex);
      AICF_CHECK(k < operands.size(), "loop body input ", k, " of ", operands.size());
      if (k < state.size()) {
        place(nb);
        state[k] = nb.id;
      } else { // an outer value: the loop step's operand itself
        const PlanBuffer &outer = p.buffers[outerIndex.at(operands[k])];
        nb.aliasOf = outer.aliasOf.empty() ? outer.id : outer.aliasOf;
        nb.kind = BufferKind::Arena;
      }
    } else if (b.kind == BufferKind::Output) {
      size_t k = static_cast<size_t>(b.ioIndex);
      AICF_CHECK(k < next.size(), "loop body output ", k, " of ", next.size());
      place(nb);
      next[k] = nb.id;
    } else if (b.kind == BufferKind::Weight) {
      nb.offset += weightBase;
    } else {
      nb.offset += arenaBase;
    }
    p.buffers.push_back(nb);
  }
  // Aliases point at their storage's root, wherever it now lives (views of state buffers, of
  // outer values), with its kind and offset (an alias of a caller's input stays no input).
  std::unordered_map<std::string, size_t> index = outerIndex;
  for (size_t i = first; i < p.buffers.size(); ++i)
    index[p.buffers[i].id] = i;
  for (size_t i = first; i < p.buffers.size(); ++i) {
    PlanBuffer &b = p.buffers[i];
    if (b.aliasOf.empty())
      continue;
    const PlanBuffer &src = p.buffers[index.at(b.aliasOf)];
    if (!src.aliasOf.empty())
      b.aliasOf = src.aliasOf;
    const PlanBuffer &root = p.buffers[index.at(b.aliasOf)];
    b.kind = root.kind == BufferKind::Weight ? BufferKind::Weight : BufferKind::Arena;
    b.offset = root.offset;
  }
  for (const std::string &id : state)
    AICF_CHECK(!id.empty(), "a loop body input is missing");
  for (const std::string &id : next)
    AICF_CHECK(!id.empty(), "a loop body output is missing");

  // The body's steps after the loop step; later steps' dispatch groups move with them.
  std::vector<PlanStep> steps;
  const int shift = static_cast<int>(at) + 1;
  for (const PlanStep &st : body.steps) {
    PlanStep ns = st;
    for (auto *ids : {&ns.inputs, &ns.outputs})
      for (std::string &id : *ids)
        id = rename.at(id);
    if (!ns.guard.empty())
      ns.guard = rename.at(ns.guard);
    if (ns.loop) {
      for (auto *ids : {&ns.loop->state, &ns.loop->next})
        for (std::string &id : *ids)
          id = rename.at(id);
    }
    if (!ns.kindId.empty())
      ns.kindId = prefix + ns.kindId;
    if (ns.group >= 0)
      ns.group += shift;
    steps.push_back(std::move(ns));
  }
  const int added = static_cast<int>(steps.size());
  for (size_t i = at + 1; i < p.steps.size(); ++i)
    if (p.steps[i].group > static_cast<int>(at))
      p.steps[i].group += added;
  PlanStep::Loop &loop = *p.steps[at].loop;
  loop.bodySteps = added;
  loop.state = state;
  loop.next = next;
  p.steps.insert(p.steps.begin() + shift, steps.begin(), steps.end());

  p.weightsBytes = weightBase + body.weightsBytes;
  p.naiveArenaBytes += body.naiveArenaBytes + (arenaEnd - arenaBase - alignUp(body.arenaBytes, 64));
  p.arenaBytes = arenaEnd;
  p.layout = layoutString(p);
  return weightBase;
}

} // namespace aicf
