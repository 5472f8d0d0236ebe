// See dispatch_groups.h.
#include "plan/dispatch_groups.h"

#include "plan/cost_model.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

namespace aicf {

namespace {

// The memory a buffer names: its storage root (views resolved) and, in the arena, the bytes.
struct Region {
  int root = -1; // plan.buffers index of the storage
  bool arena = false;
  int64_t begin = 0, end = 0; // arena byte range
};

bool overlap(const Region &a, const Region &b) {
  if (a.arena && b.arena)
    return a.begin < b.end && b.begin < a.end;
  return a.root == b.root; // inputs and outputs: the user's separate buffers
}

struct Touch {
  std::vector<Region> reads, writes;
};

class Regions {
public:
  explicit Regions(const Plan &p) : p_(p) {
    for (size_t i = 0; i < p.buffers.size(); ++i)
      byId_[p.buffers[i].id] = static_cast<int>(i);
  }
  // The region of buffer `id` into r; false for read-only memory (weights), which never conflicts.
  bool region(const std::string &id, Region &r) const {
    int i = byId_.at(id);
    for (int hops = 0; !p_.buffers[size_t(i)].aliasOf.empty() && hops < 64; ++hops)
      i = byId_.at(p_.buffers[size_t(i)].aliasOf);
    const PlanBuffer &b = p_.buffers[size_t(i)];
    if (b.kind == BufferKind::Weight)
      return false;
    r.root = i;
    r.arena = b.kind == BufferKind::Arena;
    r.begin = b.offset;
    r.end = b.offset + b.bytes;
    return true;
  }
  Touch touch(const PlanStep &s) const {
    Touch t;
    Region r;
    for (const std::string &id : s.inputs)
      if (region(id, r))
        t.reads.push_back(r);
    for (const std::string &id : s.outputs)
      if (region(id, r))
        t.writes.push_back(r);
    return t;
  }

private:
  const Plan &p_;
  std::unordered_map<std::string, int> byId_;
};

bool anyOverlap(const std::vector<Region> &a, const std::vector<Region> &b) {
  for (const Region &x : a)
    for (const Region &y : b)
      if (overlap(x, y))
        return true;
  return false;
}

// One's writes against the other's reads and writes, both ways.
bool conflict(const Touch &a, const Touch &b) {
  return anyOverlap(a.writes, b.reads) || anyOverlap(a.writes, b.writes) ||
         anyOverlap(b.writes, a.reads);
}

constexpr int64_t kMaxGroupChunks = 0xffff; // the pool's limit for one dispatch

} // namespace

void groupDispatches(Plan &plan, const Hardware &hw) {
  if (hw.gpu || plan.target.gpu())
    return;
  Regions regions(plan);
  std::vector<PlanStep> &steps = plan.steps;
  double cores = double(std::max<int64_t>(1, hw.cores));
  // Closes [first, end): a group when it has two steps or more and is worth a dispatch.
  auto close = [&](size_t first, size_t end) {
    if (end - first < 2)
      return;
    int64_t chunks = 0;
    double work = 0;
    for (size_t i = first; i < end; ++i) {
      chunks += steps[i].chunks;
      work += steps[i].timeUs * cores;
    }
    if (chunks == int64_t(end - first) && work < kHostSerialUs)
      return; // tiny steps that together still are not worth waking a worker
    for (size_t i = first; i < end; ++i)
      steps[i].group = static_cast<int>(first);
  };
  size_t first = 0;
  int64_t chunks = 0;
  std::vector<Touch> open; // the touches of steps [first, i)
  for (size_t i = 0; i < steps.size(); ++i) {
    PlanStep &s = steps[i];
    s.group = -1;
    // (A guarded step runs alone: the runtime decides it before dispatching. So does a step
    // setting a data dim: the runtime reads it and sizes the later steps before they start.)
    bool kernel = !s.kindId.empty() && s.chunks > 0 && s.guard.empty() && s.setsDims.empty();
    Touch t = kernel ? regions.touch(s) : Touch{};
    bool joins =
        kernel && !open.empty() && chunks + s.chunks <= kMaxGroupChunks &&
        std::none_of(open.begin(), open.end(), [&](const Touch &o) { return conflict(o, t); });
    if (!joins) {
      close(first, i);
      first = i;
      chunks = 0;
      open.clear();
    }
    if (!kernel) { // a runtime copy: alone, and nothing groups across it
      close(first, i + 1);
      first = i + 1;
      continue;
    }
    open.push_back(std::move(t));
    chunks += s.chunks;
  }
  close(first, steps.size());
}

} // namespace aicf
