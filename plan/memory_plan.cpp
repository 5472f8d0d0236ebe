#include "plan/memory_plan.h"

#include "support/diagnostics.h"

#include <algorithm>
#include <numeric>

namespace aicf {

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
