// Helpers shared by the pointwise, reduction, pooling and data-movement recipes
// (lower/recipe_{pointwise,reduction,pooling,data_movement}.cpp): default knobs per plan
// target, the flat "grid x threads x vector" loop over an output's elements and NaN-aware
// min/max updates, and FlatLoopRecipe, the one base of the flat-loop recipe objects. (The writer
// of a group's outputs is storeGroupOutputs, lower/group_expr.h.)
#pragma once

#include "lower/group_expr.h"
#include "lower/lower.h"
#include "lower/recipe.h"
#include "lower/recipes.h"

#include <algorithm>
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
// The lane split of `body`, the statements of a vector loop over lane v (lane()) whose element
// is i = i0 + v, i0 a multiple of `vec` (variables "i" and "i0" declared by the caller): every
// digit of i by a constant that vec divides, or that divides vec, is computed from i0 once per
// vector. `body` unchanged when it holds statements a flat loop's body does not.
std::vector<kir::StmtP> splitLaneDigits(const std::vector<kir::StmtP> &body, int64_t vec);

// The planner's candidates for a flat loop (pointwise, data movement, pooling): threads x vec
// per block, vec at most `maxVec` and dividing n, no mostly idle block.
std::vector<KnobSet> candidates(const kir::Kernel &k, const Hardware &hw, int64_t maxVec);
// The cost shape of a flat loop: independent elements, the vector width the explicit inner
// loop's. `hostCyclesPerElement` > 0: a host gather that computes a multi-index per element
// and does not vectorise (that many scalar cycles per element).
CostShape costShape(const kir::Kernel &k, const Hardware &hw, int64_t flops,
                    double hostCyclesPerElement);
// Host cycles per element that the element's index arithmetic costs when it does not
// vectorise: integer divisions and remainders whose dividend changes with the lane (with the
// element, without a vector loop), each a scalar multiply-high sequence; 0 when there are none.
// The flat-loop recipes price at least this per element, so the planner prefers the vector
// width whose lanes split off every digit (splitLaneDigits, the pointwise recipe's inner-plane
// split) and --profile's prediction sees the gather a map left.
double elementIndexCycles(const kir::Kernel &k);

// The plane form of a flat loop over a static shape (host plans, issue 53). A vector whose lanes
// straddle rows of a map (a 14 x 14 plane read through a channel shuffle: 196 floats, no multiple
// of 16) unflattens every lane by divisions, a gather. In the plane form the shape is split into
// outer dims and an inner plane (the innermost dims) whose size is padded to a multiple of the
// vector, so every vector lies in one plane: the outer index comes from the vector's first
// element, the inner one is the plane's flat offset plus the lane, [p / W, p % W], which the
// host printer joins back into p where the access's strides are W and 1 (contiguous loads and
// stores), and a guard skips the padding lanes. The plane is the innermost one or two dims: the
// first a multiple of the vector (no padding), else the least padded of those at least two
// vectors long; none where the lane split alone divides nothing per lane (8 x 8, rows of 16).
struct Planes {
  size_t split = 0;              // shape[split..] is the plane
  int64_t inner = 1, padded = 1; // its elements, and rounded up to the vector
};
std::optional<Planes> planes(const std::vector<int64_t> &shape, int64_t vec);
// `build` over outer x padded plane elements, body(idx) the statements of the element at the
// multi-index idx (guarded to the plane). Records the real element count, and that any vector
// width is a candidate (the plane is padded to it).
void buildPlanes(kir::Kernel &kern, const std::vector<int64_t> &shape, const Planes &p, Schedule s,
                 const std::function<std::vector<kir::StmtP>(const std::vector<kir::E> &)> &body);

// The lane block of a host flat loop over a static shape (issue 53). A reader of a transpose that
// moves an innermost dim of L = 4, 8 or 16 elements (a blocked value's channel lanes, an NHWC
// tensor's channels) to a non-innermost output axis a, while the output's innermost dim walks
// the input's next-to-innermost, reads each vector's lanes L floats apart: a gather, scalar on
// the host. In the lane block the loop runs over the shape with axis a set to 1, and each
// element's body is an unrolled loop over a's L positions (variable "c_l"): a vector's L loads
// then cover L whole vectors of the input, an interleaved group that the host compiler turns
// into contiguous loads and an in-register transpose, and its stores are L contiguous rows.
// laneBlockAxis probes `body` at a symbolic index and returns a, or none when no read is such a
// gather; laneBlock wraps `body` so (idx[a] the unrolled loop's variable).
std::optional<size_t>
laneBlockAxis(const std::vector<int64_t> &shape,
              const std::function<std::vector<kir::StmtP>(const std::vector<kir::E> &)> &body);
std::function<std::vector<kir::StmtP>(const std::vector<kir::E> &)>
laneBlock(size_t axis, int64_t L,
          std::function<std::vector<kir::StmtP>(const std::vector<kir::E> &)> body);

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

// How a flat-loop recipe's kernel walks its elements, for the planner and the cost model.
struct Loop {
  enum class Walk {
    Elements, // build: threads x vec per block; the cost shape at hostCycles a host element
              // (a gather computing a multi-index; 0: none)
    Lines,    // buildLines: a line per thread, no vector loop; hostCycles a step of a line
    Serial,   // buildSerial: one thread walks the op; nothing to search; hostCycles a step
  };
  Walk walk = Walk::Elements;
  int64_t maxVec = 16; // Elements, Lines: the widest vector the candidates try
  double hostCycles = 0;
  // Registers per thread: registers + registersPerVec * vec.
  int64_t registers = 0;
  int64_t registersPerVec = 0;
};

// The one base of the recipes whose kernel is a flat loop: pointwise, data_movement, pooling
// (build), scatter and top_k (buildLines), non_zero, set_dim, non_max_suppression and unique
// (buildSerial). It holds what they share, from their Loop: the typed knobs K (canonicalKnobs),
// the planner's candidates (flatloop::candidates at vec <= maxVec; none for a serial walk), the
// cost shape (costShape, or lineCostShape for lines and serial walks) and the register estimate.
// A serial walk runs over symbolic dims; the others say so themselves. Each recipe states its
// name, what it lowers, its build, and overrides only what differs (pooling's host forms).
template <class K = FlatLoopKnobs>
class FlatLoopRecipe : public Recipe {
public:
  explicit FlatLoopRecipe(Loop loop) : loop_(loop) {}
  bool symbolicDims(const KernelGroup &) const override { return loop_.walk == Loop::Walk::Serial; }
  KnobSet canonicalKnobs(const KnobSet &k) const override { return knobsToMap(knobsFromMap<K>(k)); }
  std::vector<KnobSet> candidates(const kir::Kernel &d, const Hardware &hw) const override {
    if (loop_.walk == Loop::Walk::Serial)
      return {};
    return flatloop::candidates(d, hw, loop_.maxVec);
  }
  CostShape costShape(const KernelGroup &, const kir::Kernel &k, const Hardware &hw,
                      int64_t flops) const override {
    if (loop_.walk == Loop::Walk::Elements)
      return flatloop::costShape(k, hw, flops,
                                 std::max(loop_.hostCycles, flatloop::elementIndexCycles(k)));
    return lineCostShape(k, hw, flops, loop_.hostCycles);
  }
  int64_t registers(const kir::Kernel &k) const override {
    if (loop_.registersPerVec == 0)
      return loop_.registers;
    return loop_.registers + loop_.registersPerVec * knobOf(k, &K::vec, 1);
  }

private:
  Loop loop_;
};

} // namespace aicf::flatloop
