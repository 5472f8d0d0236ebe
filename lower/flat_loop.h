// Helpers shared by the pointwise, reduction, pooling and data-movement recipes
// (lower/recipe_{pointwise,reduction,pooling,data_movement}.cpp): default knobs per plan
// target, the flat "grid x threads x vector" loop over an output's elements and NaN-aware
// min/max updates. (The writer of a group's outputs is storeGroupOutputs, lower/group_expr.h.)
#pragma once

#include "lower/group_expr.h"
#include "lower/lower.h"
#include "lower/recipe.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace aicf::flatloop {

// Threads and vector width for a flat loop over `n` elements. cpu plans: one thread per block
// (OpenMP runs the grid) and the widest of 16/8/4/2/1 (at most maxVec) dividing n; cuda
// plans: 256 threads (128 below 64K elements) and 4-wide vectors when 4 divides n. Knobs
// "threads" and "vec" given explicitly win.
// Symbolic dims (issue 21): `symN`, the count as an expression, when it depends on the dims
// (n is then its planning value, which the default knobs are chosen for). The grid is
// ceil(symN / (threads * vec)) and the guard stays unless that chunk divides symN for every
// value of the dims: nothing in the loop depends on the planning value.
struct Schedule {
  int64_t threads = 1, vec = 1, blocks = 1;
  std::optional<SymExpr> symN;
};
Schedule schedule(const Knobs &k, int64_t n, int64_t maxVec = 16,
                  std::optional<SymExpr> symN = std::nullopt);

// Fills `kern` with grid(b: blocks) block(t: threads) and one region in which every thread
// handles `vec` consecutive elements, i = (b * threads + t) * vec + v, guarded by i < n when
// the grid overshoots; `body(i)` gives the statements for element i. Records the knobs. With
// s.symN the grid is symbolic (Kernel::symGrid) and the guard reads the dims.
void build(kir::Kernel &kern, int64_t n, const Schedule &s,
           const std::function<std::vector<kir::StmtP>(kir::E i)> &body);
// The first element of the current vector in a loop `build` made, (b * threads + t) * vec, and
// the lane v: i = vectorStart + lane.
kir::E vectorStart(const kir::Kernel &kern, const Schedule &s);
kir::E lane();

// The planner's candidates for a flat loop (pointwise, data movement, pooling): threads x vec
// per block, vec at most `maxVec` and dividing n, no mostly idle block.
std::vector<KnobSet> candidates(const kir::Kernel &k, const Hardware &hw, int64_t maxVec);
// The cost shape of a flat loop: independent elements, the vector width the explicit inner
// loop's. `hostCyclesPerElement` > 0: a host gather that computes a multi-index per element
// and does not vectorise (that many scalar cycles per element).
CostShape costShape(const kir::Kernel &k, const Hardware &hw, int64_t flops,
                    double hostCyclesPerElement);

// One line per thread and no vector loop, for recipes whose every line is a serial walk that
// no other thread touches (scatter's updates in order, top_k's selection passes): the flat loop
// over `lines`, with the problem recorded as {n = lines, lineWork = steps per line}.
void buildLines(kir::Kernel &kern, const Knobs &k, int64_t lines, int64_t lineWork,
                const std::function<std::vector<kir::StmtP>(kir::E line)> &body);
// One line, one thread, whatever the plan (threads and vec forced to 1): for recipes whose
// whole result is one serial walk (the ops that set a data dim, lower/recipe_non_zero.cpp,
// lower/recipe_nms.cpp: each result row's position depends on every row before it).
void buildSerial(kir::Kernel &kern, const Knobs &k, int64_t work,
                 const std::function<std::vector<kir::StmtP>()> &body);
// Their cost shape: independent lines, each lineWork dependent steps of `hostCyclesPerStep`
// scalar cycles on the host.
CostShape lineCostShape(const kir::Kernel &k, const Hardware &hw, int64_t flops,
                        double hostCyclesPerStep);
// A value in its compute type: f32 for f16 / bf16 (a fused f16 value is a rounded f32).
kir::E computeValue(kir::E v);
kir::E isNaN(kir::E x);
kir::E ne(kir::E a, kir::E b);
kir::E orE(kir::E a, kir::E b);
// The interpreter's maxNaN(acc, x) / minNaN(acc, x): a NaN, once seen, stays.
kir::E nanMaxUpdate(kir::E acc, kir::E x);
kir::E nanMinUpdate(kir::E acc, kir::E x);

// The planning shared by the serial recipes (non_zero, set_dim, non_max_suppression: one thread
// walks the whole op, flatloop::buildSerial): FlatLoopKnobs, nothing to search, lineCostShape at
// `cyclesPerStep` scalar cycles a step, over symbolic dims.
class SerialRecipe : public Recipe {
public:
  SerialRecipe(double cyclesPerStep, int64_t registers)
      : cyclesPerStep_(cyclesPerStep), registers_(registers) {}
  bool symbolicDims(const KernelGroup &) const override { return true; }
  KnobSet canonicalKnobs(const KnobSet &k) const override;
  std::vector<KnobSet> candidates(const kir::Kernel &, const Hardware &) const override {
    return {};
  }
  CostShape costShape(const KernelGroup &, const kir::Kernel &k, const Hardware &hw,
                      int64_t flops) const override {
    return lineCostShape(k, hw, flops, cyclesPerStep_);
  }
  int64_t registers(const kir::Kernel &) const override { return registers_; }

private:
  double cyclesPerStep_;
  int64_t registers_;
};

} // namespace aicf::flatloop
