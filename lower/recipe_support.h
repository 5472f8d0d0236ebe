// Helpers shared by the anchor recipes (norm, attention, contraction): shape arithmetic, index
// helpers and the writer of a group's outputs through its fused epilogue.
#pragma once

#include "lower/group_expr.h"
#include "lower/lower.h"
#include "support/int_math.h"

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace aicf::recipe {

// ceilDiv, roundUp, nextPow2, product: support/int_math.h.
using aicf::ceilDiv;
using aicf::nextPow2;
using aicf::product;
using aicf::roundUp;

// isGpuPlan: lower/lower.h.

// The tensor-core instruction a GPU plan's products run on for a node computed in reduced
// precision (its `precision` attribute, passes/assign_precision.cpp): m16n8k8 for tf32,
// m16n8k16 for fp16 / bf16; None (SIMT f32) on host plans and for fp32 nodes.
kir::MmaFrag tensorFrag(const Node &n, const Knobs &knobs);

// unflat (row-major multi-index of a flat index): lower/group_expr.h.
// `e` as an f32 value: group expressions of f16 / bf16 values carry their own (rounded) dtype;
// recipes compute in f32.
kir::E asF32(const kir::E &e);

// The concatenation of two index lists.
std::vector<kir::E> concat(std::vector<kir::E> a, const std::vector<kir::E> &b);
// Conjunction of the non-null conditions (null when there are none).
kir::E allOf(const std::vector<kir::E> &conds);

// The outputs o in [0, outputs) whose input position o * stride + offset lies in [0, limit), as
// [first, last): a window tap's branch-free range in a row walk (host pooling and direct conv).
std::pair<int64_t, int64_t> insideRange(int64_t outputs, int64_t stride, int64_t offset,
                                        int64_t limit);

// The ranges of consecutive outputs o in [0, count) over which the window taps t in [0, taps)
// whose input o * stride + t * dil - pad lies in [0, limit) stay the same set (possibly
// empty), and so does `padded`, the number of taps inside [-pad, limit + padEnd) (an average
// pool's count_include_pad count): at most 2 taps + 1 ranges. Host blocked conv and pooling
// unroll each range's taps.
struct TapRange {
  int64_t lo = 0, hi = 0;
  std::vector<int64_t> taps;
  int64_t padded = 0;
};
std::vector<TapRange> tapRanges(int64_t count, int64_t taps, int64_t stride, int64_t dil,
                                int64_t pad, int64_t limit, int64_t padEnd = 0);

// The walk of a 2-D window op on channel blocks (host blocked conv and pooling): for every
// range of output rows (`rows`) and of output columns (`cols`) with one tap set each,
// `pixel(rowRange, colRange)` gives one pixel's body over the loop variables oh, ow and the
// lane l; emitted as a loop over oh (the range clipped to the block's rows [r0, r0 + R)), one
// over ow, and a 16-lane vector loop over l. With `pixels` (P > 1), a column range at least P
// wide runs P pixels per step: a loop over owb whose lane loop is pixels(rowRange, colRange),
// the P pixels at ow = colRange.lo + owb P + p, then the leftover columns one by one.
using PixelBody = std::function<std::vector<kir::StmtP>(const TapRange &, const TapRange &)>;
std::vector<kir::StmtP> tapRangeWalk(const std::vector<TapRange> &rows,
                                     const std::vector<TapRange> &cols, kir::E r0, int64_t R,
                                     const PixelBody &pixel, int64_t P = 1,
                                     const PixelBody &pixels = {});

// A host depthwise conv's step of kDepthwisePixels pixels of a row (recipe_direct_conv.cpp,
// recipe_conv_chain.cpp): pixel p's sum is the scalar <name>p, started at 0 and added
// term(tap, p) for tap in [0, taps), tap by tap across the pixels, so each tap's weight vector
// is read once for all of them and the sums interleave (as ORT's NCHWc depthwise kernel does):
// one pixel at a time, a 5 x 5 to 9 x 9 conv's 25-81 weight vectors outgrow the registers (AVX2:
// two vectors a tap, 16 registers), so each FMA also loads its weight, and the pixel's one chain
// of FMAs waits on the FMA latency (3.8-6.5x the cost model's time on a Zen 3 core). Eight sums
// cover two FMA units' latency. Each pixel sums its taps in the single-pixel form's order. Then
// finish(sum, p) gives the statements that consume pixel p's sum.
constexpr int64_t kDepthwisePixels = 8;
std::vector<kir::StmtP>
interleavedPixelSums(const std::string &name, int64_t taps,
                     const std::function<kir::E(int64_t tap, int64_t pixel)> &term,
                     const std::function<std::vector<kir::StmtP>(kir::E, int64_t)> &finish);

// A 2-D window op's input seen as stride x stride phase planes (host conv / max-pool plane
// forms): the zero- (or -inf-) padded input, widened where needed so every window lies inside
// it (ceil_mode pooling), is split into phases of Hq x Wq, phase (a, b) holding padded element
// (a + s r, b + s c) at r Wq + c; outputs sit on a grid f = oh Wq + ow (F positions up to the
// last output) and window tap (kh, kw) reads phase ((kh dh) % s, (kw dw) % s) at f +
// ((kh dh) / s) Wq + (kw dw) / s; `phase` floats per phase plane cover every such read.
struct PhasePlanes {
  int64_t st = 1, Hq = 0, Wq = 0, F = 0, phase = 0;
  // The offset into the planes (all st * st of them, phase floats apart) that window tap
  // (dy, dx) = (kh dh, kw dw) reads output grid position f at: f + tap(dy, dx).
  int64_t tap(int64_t dy, int64_t dx) const {
    return ((dy % st) * st + dx % st) * phase + (dy / st) * Wq + dx / st;
  }
};
PhasePlanes phasePlanes(const std::vector<int64_t> &in, const std::vector<int64_t> &pads,
                        const std::vector<int64_t> &out, const std::vector<int64_t> &kernel,
                        const std::vector<int64_t> &dil, int64_t stride);

// Fills `xp` (st * st phase planes of `pg`) with `pad`, then copies an IH x IW input plane in,
// `value(ih, iw)` read with pads (pt, pl) before it: for each phase column the input columns
// that land there are contiguous, so each copy loop is a vector loop.
std::vector<kir::StmtP> fillPhasePlanes(const kir::BufferP &xp, const PhasePlanes &pg, int64_t IH,
                                        int64_t IW, int64_t pt, int64_t pl, kir::E pad,
                                        const std::function<kir::E(kir::E ih, kir::E iw)> &value);

// `for var in [begin, end)`, marked for vectorisation.
kir::StmtP vectorLoop(const std::string &var, kir::E begin, kir::E end,
                      std::vector<kir::StmtP> body);

// An f32 scratch buffer of the kernel (a shared tile or a per-thread local one).
kir::BufferP tempBuffer(const std::string &name, std::vector<int64_t> shape, kir::Scope scope);

// InternalError unless every group output has the anchor result's shape.
void requireShapePreservingEpilogue(const KernelGroup &g, const Value *anchorResult);

// Host cycles one evaluation of the group's fused prologue takes per element (the elementwise
// nodes the anchor reads its operand through, fusion rule 4; layout ops are index arithmetic):
// ~28 for an exponential-based op (sigmoid, silu, gelu, tanh, elu, exp, log, erf, softplus),
// ~4 for a division or square root, ~1.4 for the rest, as the direct conv's epilogue fit. A
// recipe that inlines its operand at every read (a window's taps) pays it per read: its cost
// shape says so, and fusion then prices folding such a prologue against storing it.
double prologueCycles(const KernelGroup &g);

// storeGroupOutputs (a group's outputs through its fused epilogue): lower/group_expr.h.

} // namespace aicf::recipe
