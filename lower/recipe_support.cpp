// Helpers shared by the anchor recipes (see recipe_support.h).
#include "lower/recipe_support.h"

#include "ir/graph.h"
#include "ir/index_map.h"
#include "ir/precision.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <set>

namespace aicf::recipe {

using kir::E;

E asF32(const E &e) {
  return e->type == DType::F16 || e->type == DType::BF16 || e->type == DType::I8
             ? kir::cast(e, DType::F32)
             : e;
}

std::vector<E> concat(std::vector<E> a, const std::vector<E> &b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

E allOf(const std::vector<E> &conds) {
  E all;
  for (const E &c : conds) {
    if (!c)
      continue;
    all = all ? (all && c) : c;
  }
  return all;
}

kir::MmaFrag tensorFrag(const Node &n, const Knobs &knobs) {
  if (!isGpuPlan(knobs))
    return kir::MmaFrag::None;
  switch (nodePrecision(n)) {
  case Precision::TF32: return kir::MmaFrag::M16N8K8;
  case Precision::F16:
  case Precision::BF16: return kir::MmaFrag::M16N8K16;
  default: return kir::MmaFrag::None;
  }
}

kir::BufferP tempBuffer(const std::string &name, std::vector<int64_t> shape, kir::Scope scope) {
  return std::make_shared<kir::Buffer>(
      kir::Buffer{name, DType::F32, std::move(shape), scope, kir::Role::Temp, {}});
}

double prologueCycles(const KernelGroup &g) {
  if (!g.anchor)
    return 0;
  // The group's nodes the anchor depends on: walk back from its operands inside the group.
  std::set<const Node *> members(g.nodes.begin(), g.nodes.end()), seen;
  std::vector<const Node *> work;
  for (const Value *v : g.anchor->operands())
    if (v->def() && members.count(v->def()))
      work.push_back(v->def());
  double cycles = 0;
  while (!work.empty()) {
    const Node *n = work.back();
    work.pop_back();
    if (!seen.insert(n).second)
      continue;
    for (const Value *v : n->operands())
      if (v->def() && members.count(v->def()))
        work.push_back(v->def());
    if (isLayoutOp(*n))
      continue;
    switch (n->op()) {
    case Op::Sigmoid:
    case Op::Silu:
    case Op::Gelu:
    case Op::Tanh:
    case Op::Elu:
    case Op::Exp:
    case Op::Log:
    case Op::Erf:
    case Op::Softplus: cycles += 28.0; break;
    case Op::Div:
    case Op::Sqrt:
    case Op::Reciprocal: cycles += 4.0; break;
    default: cycles += 1.4;
    }
  }
  return cycles;
}

void requireShapePreservingEpilogue(const KernelGroup &g, const Value *anchorResult) {
  for (const Value *v : g.outputs)
    if (!sameShape(v->type(), anchorResult->type()))
      throw InternalError(cat("group ", g.id, " (", g.kind, "): output ", v->name(), " ",
                              v->type().str(), " does not have the anchor's shape ",
                              anchorResult->type().str(),
                              "; the fused epilogue cannot be "
                              "computed per anchor element"));
}

std::pair<int64_t, int64_t> insideRange(int64_t outputs, int64_t stride, int64_t offset,
                                        int64_t limit) {
  int64_t lo = offset >= 0 ? 0 : ceilDiv(-offset, stride);
  int64_t hi = limit - offset <= 0 ? 0 : ceilDiv(limit - offset, stride);
  lo = std::min(lo, outputs);
  return {lo, std::clamp(hi, lo, outputs)};
}

std::vector<TapRange> tapRanges(int64_t count, int64_t taps, int64_t stride, int64_t dil,
                                int64_t pad, int64_t limit, int64_t padEnd) {
  std::vector<TapRange> out;
  for (int64_t o = 0; o < count; ++o) {
    std::vector<int64_t> set;
    int64_t padded = 0;
    for (int64_t t = 0; t < taps; ++t) {
      int64_t i = o * stride + t * dil - pad;
      if (i >= 0 && i < limit)
        set.push_back(t);
      padded += i >= -pad && i < limit + padEnd ? 1 : 0;
    }
    if (out.empty() || out.back().taps != set || out.back().padded != padded)
      out.push_back(TapRange{o, o + 1, set, padded});
    else
      out.back().hi = o + 1;
  }
  return out;
}

std::vector<kir::StmtP> tapRangeWalk(const std::vector<TapRange> &rows,
                                     const std::vector<TapRange> &cols, kir::E r0, int64_t R,
                                     const PixelBody &pixel, int64_t P, const PixelBody &pixels) {
  using kir::E;
  const E zero(int64_t(0)), lanes(int64_t(16));
  std::vector<kir::StmtP> body;
  for (const TapRange &rr : rows)
    for (const TapRange &cr : cols) {
      const int64_t width = cr.hi - cr.lo, steps = P > 1 && pixels ? width / P : 0;
      std::vector<kir::StmtP> cols;
      if (steps > 0)
        cols.push_back(
            kir::forLoop("owb", zero, E(steps), {vectorLoop("l", zero, lanes, pixels(rr, cr))}));
      if (width > steps * P)
        cols.push_back(kir::forLoop("ow", E(cr.lo + steps * P), E(width - steps * P),
                                    {vectorLoop("l", zero, lanes, pixel(rr, cr))}));
      E lo = kir::max(E(rr.lo), r0), hi = kir::min(E(rr.hi), r0 + E(R));
      body.push_back(kir::forLoop("oh", lo, hi - lo, cols));
    }
  return body;
}

std::vector<kir::StmtP>
interleavedPixelSums(const std::string &name, int64_t taps,
                     const std::function<kir::E(int64_t tap, int64_t pixel)> &term,
                     const std::function<std::vector<kir::StmtP>(kir::E, int64_t)> &finish) {
  std::vector<kir::StmtP> body;
  for (int64_t p = 0; p < kDepthwisePixels; ++p)
    body.push_back(kir::decl(cat(name, p), DType::F32, kir::fconst(0.0, DType::F32)));
  for (int64_t t = 0; t < taps; ++t)
    for (int64_t p = 0; p < kDepthwisePixels; ++p)
      body.push_back(kir::assign(cat(name, p), kir::var(cat(name, p), DType::F32) + term(t, p)));
  for (int64_t p = 0; p < kDepthwisePixels; ++p) {
    auto fin = finish(kir::var(cat(name, p), DType::F32), p);
    body.insert(body.end(), fin.begin(), fin.end());
  }
  return body;
}

PhasePlanes phasePlanes(const std::vector<int64_t> &in, const std::vector<int64_t> &pads,
                        const std::vector<int64_t> &out, const std::vector<int64_t> &kernel,
                        const std::vector<int64_t> &dil, int64_t stride) {
  PhasePlanes p;
  p.st = stride;
  auto padded = [&](size_t d) {
    int64_t extent = in[d] + pads[d] + pads[d + 2];
    return std::max(extent, stride * (out[d] - 1) + (kernel[d] - 1) * dil[d] + 1);
  };
  p.Hq = ceilDiv(padded(0), stride);
  p.Wq = ceilDiv(padded(1), stride);
  p.F = (out[0] - 1) * p.Wq + out[1];
  int64_t reach = ((kernel[0] - 1) * dil[0] / stride) * p.Wq + (kernel[1] - 1) * dil[1] / stride;
  p.phase = std::max(p.Hq * p.Wq, p.F + reach);
  return p;
}

std::vector<kir::StmtP> fillPhasePlanes(const kir::BufferP &xp, const PhasePlanes &pg, int64_t IH,
                                        int64_t IW, int64_t pt, int64_t pl, E pad,
                                        const std::function<E(E ih, E iw)> &value) {
  int64_t s = pg.st;
  E zero(int64_t(0)), f = kir::var("f"), ih = kir::var("ih"), c = kir::var("c");
  std::vector<kir::StmtP> out = {
      vectorLoop("f", zero, E(s * s * pg.phase), {kir::store(xp, {f}, pad)})};
  // Input row ih lands in phase row (ih + pt) % s, row (ih + pt) / s; for phase column b the
  // columns c with iw = c s + b - pl inside [0, IW) are contiguous: c in [clo, chi).
  for (int64_t b = 0; b < s; ++b) {
    auto [clo, chi] = insideRange(pg.Wq, s, b - pl, IW);
    if (chi <= clo)
      continue;
    E pr = ih + E(pt);
    E dst = ((pr % E(s)) * E(s) + E(b)) * E(pg.phase) + (pr / E(s)) * E(pg.Wq) + c;
    out.push_back(
        kir::forLoop("ih", zero, E(IH),
                     {vectorLoop("c", E(clo), E(chi),
                                 {kir::store(xp, {dst}, value(ih, c * E(s) + E(b - pl)))})}));
  }
  return out;
}

kir::StmtP vectorLoop(const std::string &var, E begin, E end, std::vector<kir::StmtP> body) {
  return kir::forLoop(var, begin, end - begin, std::move(body), 1, kir::Stmt::LoopKind::Vectorized);
}

} // namespace aicf::recipe
