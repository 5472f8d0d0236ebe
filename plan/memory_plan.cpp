// See memory_plan.h. Buffers are created in a fixed order (inputs, weights, outputs,
// intermediates, then views as the steps name them) so ids and offsets are deterministic.
#include "plan/memory_plan.h"

#include "support/diagnostics.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <unordered_map>

namespace aicf {

namespace {

std::string valueLabel(const Value *v) {
  return v->name().empty() ? cat("%", v->id()) : v->name();
}

int addBuffer(Plan &p, ValueBuffers &vb, const Value *v, BufferKind kind, const TensorType &t,
              std::string label) {
  PlanBuffer b;
  b.id = cat("b", p.buffers.size());
  b.value = std::move(label);
  b.dtype = t.dtype;
  b.shape = t.shape;
  b.sym = t.sym;
  b.kind = kind;
  b.bytes = maxBytes(t, p.dims);
  p.buffers.push_back(b);
  int idx = static_cast<int>(p.buffers.size()) - 1;
  if (v)
    vb.index[v] = idx;
  return idx;
}

// Buffer id -> position in plan.buffers.
std::unordered_map<std::string, int> positions(const Plan &p) {
  std::unordered_map<std::string, int> index;
  for (size_t i = 0; i < p.buffers.size(); ++i)
    index[p.buffers[i].id] = static_cast<int>(i);
  return index;
}

} // namespace

ValueBuffers createValueBuffers(Plan &p, const Graph &g, const std::vector<KernelGroup> &groups) {
  ValueBuffers vb;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const Value *in = g.inputs()[i];
    p.buffers[addBuffer(p, vb, in, BufferKind::Input, in->type(), in->name())].ioIndex =
        static_cast<int>(i);
    p.lowerBoundBytes += in->type().bytes();
  }
  int64_t woff = 0;
  for (const Value *w : g.weights()) {
    int b = addBuffer(p, vb, w, BufferKind::Weight, w->type(), w->name());
    p.buffers[b].offset = woff;
    woff += alignUp(w->type().bytes(), 64);
    p.lowerBoundBytes += w->type().bytes();
    // Each weight is within the per-tensor limit, so checking the running total keeps it in int64.
    if (woff > kMaxTotalBytes)
      throw UserError(cat("the weights need more than ", kMaxTotalBytes,
                          " bytes (1 TiB), the limit for weights.bin"));
  }
  p.weightsBytes = woff;

  // Graph outputs: the producing kernel writes straight into the caller's buffer when the
  // output's storage is a node result not claimed by another output; otherwise a copy step.
  for (size_t k = 0; k < g.outputs().size(); ++k) {
    const Value *y = g.outputs()[k];
    const Value *s = storageOf(y);
    p.lowerBoundBytes += y->type().bytes();
    if (s->kind() == ValueKind::Result && !vb.index.count(s)) {
      int b = addBuffer(p, vb, s, BufferKind::Output, y->type(), y->name());
      p.buffers[b].ioIndex = static_cast<int>(k);
      if (y != s)
        vb.index[y] = b;
      continue;
    }
    int b = addBuffer(p, vb, nullptr, BufferKind::Output, y->type(), y->name());
    p.buffers[b].ioIndex = static_cast<int>(k);
    vb.copies.emplace_back(y, b);
  }
  // Intermediates (views get theirs as the steps name them: bufferFor). An output stored
  // through a layout op (KernelGroup::storeThrough) lives in the layout op's result: its writers
  // share that one buffer.
  for (const KernelGroup &grp : groups)
    for (const Value *v : grp.outputs) {
      if (vb.index.count(v))
        continue;
      if (const KernelGroup::StoreThrough *st = grp.storedThrough(v)) {
        if (!vb.index.count(st->into))
          addBuffer(p, vb, st->into, BufferKind::Arena, st->into->type(), valueLabel(st->into));
        vb.index[v] = vb.index.at(st->into);
        continue;
      }
      addBuffer(p, vb, v, BufferKind::Arena, v->type(), valueLabel(v));
    }
  return vb;
}

int bufferFor(Plan &p, ValueBuffers &vb, const Value *v) {
  auto it = vb.index.find(v);
  if (it != vb.index.end())
    return it->second;
  const Value *s = storageOf(v);
  AICF_CHECK(s != v, "value ", valueLabel(v), " has no buffer");
  int src = bufferFor(p, vb, s);
  int b = addBuffer(p, vb, v, BufferKind::Arena, v->type(), valueLabel(v));
  p.buffers[b].kind =
      p.buffers[src].kind == BufferKind::Output ? BufferKind::Arena : p.buffers[src].kind;
  p.buffers[b].aliasOf =
      p.buffers[src].aliasOf.empty() ? p.buffers[src].id : p.buffers[src].aliasOf;
  return b;
}

void addOutputCopies(Plan &p, ValueBuffers &vb) {
  for (const auto &[src, outBuf] : vb.copies) {
    PlanStep st;
    st.kind = "copy";
    st.recipe = "runtime";
    st.inputs.push_back(p.buffers[bufferFor(p, vb, src)].id);
    st.outputs.push_back(p.buffers[outBuf].id);
    st.bytes = st.lowerBoundBytes = 2 * src->type().bytes();
    p.steps.push_back(std::move(st));
  }
}

std::vector<Lifetime> computeLifetimes(const Plan &p) {
  std::vector<Lifetime> life(p.buffers.size(), Lifetime{1 << 30, -1});
  std::unordered_map<std::string, int> index = positions(p);
  auto touch = [&](int b, int step, bool def) {
    const PlanBuffer &pb = p.buffers[b];
    int owner = pb.aliasOf.empty() ? b : index.at(pb.aliasOf);
    Lifetime &l = life[owner];
    if (def)
      l.def = std::min(l.def, step);
    l.lastUse = std::max(l.lastUse, step);
  };
  for (size_t s = 0; s < p.steps.size(); ++s) {
    for (const std::string &id : p.steps[s].inputs)
      touch(index.at(id), static_cast<int>(s), false);
    for (const std::string &id : p.steps[s].outputs)
      touch(index.at(id), static_cast<int>(s), true);
  }
  return life;
}

std::vector<int> planInPlace(Plan &p, const std::vector<Lifetime> &life) {
  std::unordered_map<std::string, int> index = positions(p);
  std::vector<int> shareWith(p.buffers.size(), -1);
  for (size_t s = 0; s < p.steps.size(); ++s) {
    PlanStep &st = p.steps[s];
    if (!st.writesInPlace || st.outputs.size() != 1)
      continue;
    int o = index.at(st.outputs[0]);
    const PlanBuffer &ob = p.buffers[o];
    // An output another step writes first (a concat's slices) is not this step's alone.
    if (ob.kind != BufferKind::Arena || !ob.aliasOf.empty() || life[o].def != static_cast<int>(s))
      continue;
    for (const std::string &id : st.inputs) {
      int i = index.at(id);
      const PlanBuffer &ib = p.buffers[i];
      if (ib.kind == BufferKind::Arena && ib.aliasOf.empty() && ib.dtype == ob.dtype &&
          ib.shape == ob.shape && ib.sym == ob.sym && life[i].lastUse == static_cast<int>(s) &&
          life[i].def < static_cast<int>(s) &&
          std::count(st.inputs.begin(), st.inputs.end(), id) == 1) {
        shareWith[o] = i;
        st.inPlace = true;
        break;
      }
    }
  }
  return shareWith;
}

void finishLayout(Plan &p) {
  std::unordered_map<std::string, int> index = positions(p);
  for (PlanBuffer &b : p.buffers)
    if (!b.aliasOf.empty() && b.kind == BufferKind::Arena)
      b.offset = p.buffers[index.at(b.aliasOf)].offset;
  p.layout = layoutString(p);
}

void planMemory(Plan &p, ValueBuffers &vb) {
  addOutputCopies(p, vb);
  std::vector<Lifetime> life = computeLifetimes(p);
  std::vector<int> shareWith = planInPlace(p, life);
  planArena(p, life, shareWith);
  finishLayout(p);
}

void planArena(Plan &plan, const std::vector<Lifetime> &life, const std::vector<int> &shareWith) {
  size_t n = plan.buffers.size();
  AICF_CHECK(life.size() == n && shareWith.size() == n, "planArena: sizes differ");
  // Buffers that own arena storage, with lifetimes extended over everything sharing them.
  std::vector<Lifetime> span = life;
  auto root = [&](size_t i) {
    while (shareWith[i] >= 0)
      i = static_cast<size_t>(shareWith[i]);
    return i;
  };
  std::vector<size_t> owners;
  int64_t naive = 0;
  for (size_t i = 0; i < n; ++i) {
    const PlanBuffer &b = plan.buffers[i];
    if (b.kind != BufferKind::Arena || !b.aliasOf.empty())
      continue;
    naive += alignUp(b.bytes, 64);
    size_t r = root(i);
    if (r != i) {
      span[r].def = std::min(span[r].def, life[i].def);
      span[r].lastUse = std::max(span[r].lastUse, life[i].lastUse);
    } else {
      owners.push_back(i);
    }
  }
  std::sort(owners.begin(), owners.end(), [&](size_t a, size_t b) {
    if (plan.buffers[a].bytes != plan.buffers[b].bytes)
      return plan.buffers[a].bytes > plan.buffers[b].bytes;
    return a < b;
  });
  std::vector<size_t> placed;
  int64_t arena = 0;
  for (size_t i : owners) {
    int64_t size = alignUp(std::max<int64_t>(plan.buffers[i].bytes, 1), 64);
    // Memory ranges of already placed buffers alive at the same time, by offset.
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (size_t j : placed)
      if (span[j].def <= span[i].lastUse && span[i].def <= span[j].lastUse)
        busy.emplace_back(plan.buffers[j].offset,
                          plan.buffers[j].offset + alignUp(plan.buffers[j].bytes, 64));
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (const auto &[lo, hi] : busy) {
      if (offset + size <= lo)
        break;
      offset = std::max(offset, hi);
    }
    plan.buffers[i].offset = offset;
    arena = std::max(arena, offset + size);
    // Every buffer is within the per-tensor limit, so checking the arena as it grows keeps every
    // offset in int64.
    if (arena > kMaxTotalBytes)
      throw UserError(cat("the activation arena needs more than ", kMaxTotalBytes,
                          " bytes (1 TiB), the limit"));
    placed.push_back(i);
  }
  for (size_t i = 0; i < n; ++i)
    if (plan.buffers[i].kind == BufferKind::Arena && plan.buffers[i].aliasOf.empty() &&
        shareWith[i] >= 0)
      plan.buffers[i].offset = plan.buffers[root(i)].offset;
  plan.arenaBytes = arena;
  plan.naiveArenaBytes = naive;
}

} // namespace aicf
