// The conv specs of the tiled contraction (lower/contraction.h): a group-1 (or densely grouped)
// conv as an implicit GEMM (convSpec: row = output channel, col = output pixel, k = (input
// channel, kernel tap), the B tile gathered from the input, padding read as zero) and a dense
// blocked_conv (blockedConvSpec: rows the output pixels, columns the output channels, with the
// host's band form for k x k convs); and the conv geometry the direct conv shares.
#include "lower/contraction.h"
#include "lower/recipe_support.h"

#include "ir/graph.h"
#include "ir/precision.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace aicf {

using kir::E;
using kir::StmtP;
using namespace recipe;

namespace contraction {

// A conv whose groups are wide enough to be contractions of their own (group 1, or at least 8
// input and 8 output channels per group: ResNeXt / RegNet blocks, and split-k's partial convs);
// narrower groups (depthwise) are direct convs.
bool denseGroups(const Node &n) {
  int64_t G = n.i("group");
  if (G == 1)
    return true;
  const auto &ws = n.operand(1)->type().shape;
  return ws.size() >= 3 && ws[1] >= 8 && ws[0] / G >= 8;
}

ConvGeom convGeom(const Node &n) {
  ConvGeom g;
  const auto &xs = n.operand(0)->type().shape, &ws = n.operand(1)->type().shape,
             &os = n.result()->type().shape;
  g.S = xs.size() - 2;
  g.N = xs[0];
  g.C = xs[1];
  g.M = os[1];
  g.G = n.i("group");
  g.I.assign(xs.begin() + 2, xs.end());
  g.Kd.assign(ws.begin() + 2, ws.end());
  g.O.assign(os.begin() + 2, os.end());
  g.strides = n.ints("strides");
  g.pads = n.ints("pads");
  g.dil = n.ints("dilations");
  return g;
}

Contraction convSpec(const Node &n, const GroupExpr &gx) {
  Contraction c;
  const Value *x = n.operand(0), *w = n.operand(1);
  const auto &epi = n.strs("epilogue");
  bool hasBias = n.numOperands() == 3 + static_cast<size_t>(epilogueOperandCount(epi));
  ConvGeom geo = convGeom(n);
  AICF_CHECK(denseGroups(n), "tiled_contraction needs groups of 8 or more channels (", n.where(),
             ")");
  // A grouped conv is a batch of G contractions: batch index (n, g), rows the group's Mg output
  // channels, k over its Cg input channels and the taps.
  const int64_t G = geo.G, Mg = geo.M / G, Cg = geo.C / G;
  c.outShape = n.result()->type().shape;
  c.batch = G == 1 ? std::vector<int64_t>{geo.N} : std::vector<int64_t>{geo.N, G};
  c.M = Mg;
  c.N = product(geo.O);
  // The group's first output and input channel (0 for group 1).
  auto firstOut = [G, Mg](const Index &b) { return G == 1 ? E(int64_t(0)) : b[1] * E(Mg); };
  auto firstIn = [G, Cg](const Index &b) { return G == 1 ? E(int64_t(0)) : b[1] * E(Cg); };
  std::vector<int64_t> kDims = {Cg};
  kDims.insert(kDims.end(), geo.Kd.begin(), geo.Kd.end());
  c.K = product(kDims);
  c.what =
      cat("conv ", x->type().str(), " * ", w->type().str(), " as implicit GEMM (M = ", c.M,
          " channels, N = ", c.N, " pixels, K = ", c.K, G == 1 ? "" : cat(", ", G, " groups"), ")");
  // The weight [M, C, k...] is row-major, so (row, k) reads it at row * K + k: unflattening k
  // into (ci, kp...) with flat / stride % extent lets the printer re-join the digits, and the
  // host tiles then read A in place (aRowView) instead of gathering it column by column.
  c.aAt = [&gx, w, kDims, firstOut](const Index &b, E row, E k) {
    return asF32(gx.at(w, concat({firstOut(b) + row}, unflatIndex(kDims, k))));
  };
  // B[k, col] = x[n, ci, i...] with (ci, kp...) = k over [C, Kd...], (op...) = col over O and
  // i_d = op_d s_d - pad_d + kp_d dil_d; the decompositions are declared as scalars.
  c.bRowDecls = [kDims](E k) {
    Index kk = unflat(kDims, k);
    std::vector<StmtP> d = {kir::decl("ci", DType::I64, kk[0])};
    for (size_t i = 1; i < kk.size(); ++i)
      d.push_back(kir::decl(cat("kp", i - 1), DType::I64, kk[i]));
    return d;
  };
  c.bColDecls = [geo](E col) {
    Index o = unflat(geo.O, col);
    std::vector<StmtP> d;
    for (size_t i = 0; i < geo.S; ++i)
      d.push_back(kir::decl(cat("ip", i), DType::I64,
                            o[i] * E(geo.strides[i]) - E(geo.pads[i]) +
                                ivar(cat("kp", i)) * E(geo.dil[i])));
    return d;
  };
  c.bAt = [&gx, x, geo, firstIn](const Index &bi, E, E) {
    Index idx = {bi[0], firstIn(bi) + ivar("ci")};
    for (size_t d = 0; d < geo.S; ++d)
      idx.push_back(ivar(cat("ip", d)));
    return asF32(gx.at(x, idx));
  };
  // The host copy walks each tile row (one k) by output rows: the innermost loop runs over the
  // last output axis, so the input positions are affine in it (contiguous for stride 1) and the
  // loop vectorises; only index arithmetic per output row remains outside it.
  int64_t K = c.K, N = c.N;
  c.bHostCopy = [&gx, x, geo, kDims, K, N, firstIn,
                 decls = c.bRowDecls](const Index &bi, E k0, E n0, const kir::BufferP &Bs) {
    int64_t BK = Bs->shape[0], BN = Bs->shape[1];
    size_t S = geo.S;
    int64_t OWL = geo.O[S - 1], orows = N / OWL;
    std::vector<int64_t> outer(geo.O.begin(), geo.O.end() - 1);
    E br = ivar("br"), orow = ivar("orow"), ow = ivar("ow");
    std::vector<StmtP> row = decls(k0 + br);
    row.push_back(kir::forLoop("bc", E(int64_t(0)), E(BN),
                               {kir::store(Bs, {br, ivar("bc")}, f32(0.0))}, 1,
                               kir::Stmt::LoopKind::Vectorized));
    // Output rows touching columns [n0, n0 + BN) of the tile.
    E rowBegin = n0 / E(OWL);
    E rowEnd = kir::min((n0 + E(BN + OWL - 1)) / E(OWL), E(orows));
    Index o = unflat(outer, orow), in;
    std::vector<E> outerOk;
    for (size_t d = 0; d + 1 < S; ++d) {
      E pos = o[d] * E(geo.strides[d]) - E(geo.pads[d]) + ivar(cat("kp", d)) * E(geo.dil[d]);
      in.push_back(pos);
      outerOk.push_back(pos >= E(int64_t(0)));
      outerOk.push_back(pos < E(geo.I[d]));
    }
    // The last dim's tap kp reads iw = ow s + off, off = kp dil - pad: inside the input for ow
    // in [owlo, owhi) (declared once per tile row), so the ow loop runs over that range with no
    // per-element check; the row's zero fill covers the rest.
    int64_t sw = geo.strides[S - 1], IW = geo.I[S - 1];
    E zero(int64_t(0)), off = ivar("woff");
    row.push_back(kir::decl("woff", DType::I64,
                            ivar(cat("kp", S - 1)) * E(geo.dil[S - 1]) - E(geo.pads[S - 1])));
    row.push_back(
        kir::decl("owlo", DType::I64, kir::select(off >= zero, zero, (E(sw - 1) - off) / E(sw))));
    row.push_back(kir::decl(
        "owhi", DType::I64,
        kir::min(E(OWL), kir::select(E(IW) - off <= zero, zero, (E(IW + sw - 1) - off) / E(sw)))));
    in.push_back(ow * E(sw) + off);
    Index xi = concat({bi[0], firstIn(bi) + ivar("ci")}, in);
    std::vector<StmtP> inner = {kir::store(Bs, {br, orow * E(OWL) + ow - n0}, asF32(gx.at(x, xi)))};
    E owBegin = kir::max(ivar("owlo"), n0 - orow * E(OWL));
    E owEnd = kir::min(ivar("owhi"), n0 + E(BN) - orow * E(OWL));
    StmtP owLoop =
        kir::forLoop("ow", owBegin, owEnd - owBegin, inner, 1, kir::Stmt::LoopKind::Vectorized);
    E ok = allOf(outerOk);
    row.push_back(kir::forLoop("orow", rowBegin, rowEnd - rowBegin,
                               {ok ? kir::ifThen(ok, {owLoop}) : owLoop}));
    std::vector<StmtP> body = row;
    if (K % BK != 0) // rows beyond K stay zero
      body = {kir::ifThen(k0 + br < E(K), row,
                          {kir::forLoop("bc", E(int64_t(0)), E(BN),
                                        {kir::store(Bs, {br, ivar("bc")}, f32(0.0))})})};
    return kir::forLoop("br", E(int64_t(0)), E(BK), body);
  };
  // Only the axes that can leave the input need a check.
  c.bValid = [geo](const Index &, E, E) {
    std::vector<E> conds;
    for (size_t d = 0; d < geo.S; ++d) {
      E in = ivar(cat("ip", d));
      bool low = geo.pads[d] > 0;
      bool high =
          (geo.O[d] - 1) * geo.strides[d] - geo.pads[d] + (geo.Kd[d] - 1) * geo.dil[d] >= geo.I[d];
      if (low)
        conds.push_back(in >= E(int64_t(0)));
      if (high)
        conds.push_back(in < E(geo.I[d]));
    }
    return allOf(conds);
  };
  // A pointwise conv (1 x 1 taps, stride 1, no padding) reads B = x[n] as a [C, pixels]
  // matrix: plain row-major tile copies with no per-row index arithmetic or bounds checks.
  bool pointwise = true;
  for (size_t d = 0; d < geo.S; ++d)
    pointwise = pointwise && geo.Kd[d] == 1 && geo.strides[d] == 1 && geo.pads[d] == 0 &&
                geo.pads[geo.S + d] == 0;
  if (pointwise) {
    c.bRowDecls = nullptr;
    c.bColDecls = nullptr;
    c.bHostCopy = nullptr;
    c.bValid = nullptr;
    c.bAt = [&gx, x, geo, firstIn](const Index &bi, E k, E col) {
      return asF32(gx.at(x, concat({bi[0], firstIn(bi) + k}, unflatIndex(geo.O, col))));
    };
  }
  c.outIndex = [geo, firstOut](const Index &bi, E row, E col) {
    return concat({bi[0], firstOut(bi) + row}, unflat(geo.O, col));
  };
  if (hasBias) {
    const Value *bias = n.operand(2);
    c.addTerms.push_back([&gx, bias](const Index &out) { return asF32(gx.at(bias, {out[1]})); });
  }
  splitEpilogue(n, hasBias ? 3 : 2, gx, true, c);
  return c;
}

namespace {

// Whether weight w is a constant whose every element is finite (a skipped product w * 0 is 0),
// also when it is read through the layout ops of packed panels (passes/pack_weights.cpp).
bool finiteWeight(const Value &w) {
  const Value *v = &w;
  while (v->def() && v->def()->numOperands() == 1 &&
         (v->def()->op() == Op::Transpose || v->def()->op() == Op::Reshape ||
          v->def()->op() == Op::Slice))
    v = v->def()->operand(0);
  if (!v->isWeight() || !v->hasData())
    return false;
  const Tensor &t = *v->data();
  if (t.dtype() == DType::F32)
    return std::all_of(t.data<float>(), t.data<float>() + t.numel(),
                       [](float x) { return std::isfinite(x); });
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isfinite(t.getDouble(i)))
      return false;
  return true;
}

// The share of a band's products the host micro-kernel computes (aicf_row_taps): per tile of R
// output rows (1: per row group) the kernel rows that read the input for one of its rows, and
// with kernel columns (taps[6] = W) per row block of pixels the kernel columns that read it for
// one of the block's pixels. Row blocks as the micro-kernel cuts a row: at most 7 pixels for a
// 4-vector panel (N a multiple of 64), else 8, of equal sizes.
double bandLiveShare(const std::vector<int64_t> &taps, int64_t s, int64_t padTop, int64_t KH,
                     int64_t KW, int64_t OH, int64_t OW, int64_t R, int64_t N) {
  const int64_t d = taps[0], H = taps[1], c0 = taps[3], cs = taps[4], cd = taps[5], W = taps[6];
  auto reads = [](int64_t lo, int64_t hi, int64_t n) { return lo <= n - 1 && hi >= 0; };
  const int64_t mb = N % 64 == 0 ? 7 : 8, nb = ceilDiv(OW, mb), per = ceilDiv(OW, nb);
  double colShare = 1.0; // the same for every row
  if (W) {
    int64_t pix = 0;
    for (int64_t i = 0; i < OW; i += per) {
      int64_t last = std::min(OW, i + per) - 1;
      for (int64_t kw = 0; kw < KW; ++kw)
        pix += reads(c0 + i * cs + kw * cd, c0 + last * cs + kw * cd, W) ? last - i + 1 : 0;
    }
    colShare = double(pix) / double(OW * KW);
  }
  double live = 0;
  for (int64_t t = 0; t < OH; t += R) {
    int64_t rows = 0; // the tile's live kernel rows
    for (int64_t kh = 0; kh < KH; ++kh)
      rows += reads(t * s - padTop + kh * d, (t + R - 1) * s - padTop + kh * d, H);
    live += double(std::min(R, OH - t)) * double(rows) / double(KH);
  }
  return live / double(OH) * colShare;
}

// The band form of a blocked conv's A on the host (blockedConvSpec): a tile's block first
// copies the input rows its output rows' taps read, for every input block, into a band
// [CB, BR, Wp, 16] with the padding as zeros, so that tap (kh, kw) of every pixel lies inside
// it, and the micro-kernel reads A from the band.
//  * Row groups (the usual form): a tile is R whole output rows (BM = R OW, the cost
//    model's knob). The band holds the BR = (R - 1) s + (KH - 1) d + 1 input rows they
//    read, Wp = (OW - 1) s + (KW - 1) d + 1 columns; pixel (r, ow) is A's row r OW + ow at
//    band row r s, column ow s (mma_tile groups of OW rows, s Wp 16 floats apart, s 16
//    within a group); tap (kh, kw) adds band row kh d, column kw d. More rows per tile
//    re-read the weights fewer times (resnet18's 7 x 7 layer4: 9.4 MB of weights streamed
//    once per output row at R = 1) and copy each input row fewer times.
//  * Padded grid (stride 1, rows of at most 5 pixels, which alone would give the
//    micro-kernel row blocks of at most 5 accumulator rows): the band holds BR = R + (KH -
//    1) d consecutive input rows, Wp = OW + (KW - 1) d wide, and A's rows are the padded grid
//    f = r Wp + ow, 16 floats apart, cut into blocks of 8 across the rows: tap (kh, kw)
//    reads band row r + kh d, column ow + kw d. The grid's columns ow >= OW (and rows past
//    OH) are computed and not stored.
//  * A plain input (row groups only): the band [C, BR, Wp] holds plain rows; k's block
//    (c, kh) starts at c BR Wp + kh d Wp and holds the KW taps of that kernel row.
//  * A grouped conv (group G > 1) is batched over its groups, the last batch index: the band
//    holds the group's CB / G input blocks, and its columns are the group's output blocks.
void bandForm(const Node &n, const GroupExpr &gx, const Knobs &knobs, Contraction &c) {
  const Value *x = n.operand(0);
  bool blocked = n.i("blocked_input") != 0;
  const auto &xs = x->type().shape, &os = n.result()->type().shape;
  const auto &ks = n.ints("kernel_shape"), &st = n.ints("strides"), &pd = n.ints("pads"),
             &dl = n.ints("dilations");
  int64_t H = xs[2], W = xs[3];
  int64_t G = n.i("group"), CB = xs[1] / G, OBg = os[1] / G;
  int64_t KH = ks[0], KW = ks[1], OH = os[2], OW = os[3];
  bool grid = blocked && st[0] == 1 && st[1] == 1 && OW <= 5;
  int64_t R = 1;
  if (grid) {
    R = std::clamp<int64_t>(ceilDiv(64, OW + (KW - 1) * dl[1]), 1, OH);
  } else {
    // R = 1 by default (one output row per tile); the cost model weighs more.
    c.defaultBM = OW;
    int64_t bm = knobs.get("BM", c.defaultBM);
    AICF_CHECK(bm > 0 && bm % OW == 0, "blocked conv ", n.where(),
               ": the band form's row tile BM must be whole output rows of ", OW, " pixels (BM ",
               bm, ")");
    R = std::min(bm / OW, OH);
  }
  int64_t Wp = grid ? OW + (KW - 1) * dl[1] : (OW - 1) * st[1] + (KW - 1) * dl[1] + 1;
  int64_t BR = grid ? R + (KH - 1) * dl[0] : (R - 1) * st[0] + (KH - 1) * dl[0] + 1;
  c.aAt = nullptr;
  c.aRowDecls = nullptr;
  c.aValid = nullptr;
  int64_t lanes = blocked ? 16 : 1;
  c.band = {CB, BR, Wp, lanes};
  c.bandBlocks = blocked
                     ? std::vector<int64_t>{BR * Wp * 16, dl[0] * Wp * 16, dl[1] * 16, KH, KW, 16}
                     : std::vector<int64_t>{BR * Wp, dl[0] * Wp, 0, KH, 1, KW};
  c.kAlign = blocked ? 16 : KW;
  c.bandLd = grid ? 16 : st[1] * lanes;
  if (grid) {
    c.batch = {xs[0], ceilDiv(OH, R)};
    c.M = R * Wp;
  } else {
    c.bandGroups = {OW, st[0] * Wp * lanes};
    c.bandBytes0 = CB * ((KH - 1) * dl[0] + 1) * Wp * lanes * 4;
    c.bandRowBytes = CB * st[0] * Wp * lanes * 4;
  }
  int64_t lo = std::min(Wp, pd[1]), hi = std::min(Wp, pd[1] + W);
  c.bandFill = [&gx, x, CB, G, BR, Wp, H, OW, lo, hi, st, pd, R, grid,
                lanes](const Index &bi, E m0, const kir::BufferP &band) {
    E zero(int64_t(0)), icb = ivar("bcb"), br = ivar("bbr"), wp = ivar("bwp"), l = ivar("bl");
    auto fill = [&](int64_t from, int64_t to, std::function<E()> value) {
      if (lanes == 1) // plain rows: the columns are the vector loop
        return vectorLoop("bwp", E(from), E(to), {kir::store(band, {icb, br, wp, zero}, value())});
      return kir::forLoop(
          "bwp", E(from), E(to - from),
          {vectorLoop("bl", zero, E(int64_t(16)), {kir::store(band, {icb, br, wp, l}, value())})});
    };
    E ih = ivar("bih");
    auto zeros = [] { return f32(0.0); };
    std::vector<StmtP> inside;
    if (lo > 0)
      inside.push_back(fill(0, lo, zeros));
    inside.push_back(fill(lo, hi, [&] {
      E xcb = G > 1 ? bi.back() * E(CB) + icb : icb;
      Index at = lanes == 1 ? Index{bi[0], xcb, ih, wp - E(pd[1])}
                            : Index{bi[0], xcb, ih, wp - E(pd[1]), l};
      return asF32(gx.at(x, at));
    }));
    if (hi < Wp)
      inside.push_back(fill(hi, Wp, zeros));
    // The tile's first output row times the stride, less the padding, then band row br.
    E first = grid ? bi[1] * E(R) - E(pd[0]) + br : m0 / E(OW) * E(st[0]) - E(pd[0]) + br;
    std::vector<StmtP> row = {
        kir::decl("bih", DType::I64, first),
        kir::ifThen((ih >= zero) && (ih < E(H)), inside, {fill(0, Wp, zeros)})};
    return kir::forLoop("bcb", zero, E(CB), {kir::forLoop("bbr", zero, E(BR), row)});
  };
  // The tile's output rows read input row first * s - pd + kh d .. (first + R - 1) s - pd + kh d
  // through kernel row kh, and with row groups pixel ow of a row input column ow sw - pw + kw dw
  // through kernel column kw (of a blocked input: a plain one's block holds a kernel row's
  // taps): the micro-kernel skips the blocks that read only the band's zeros (kir.h aTaps).
  if (finiteWeight(*n.operand(1)) && (pd[0] > 0 || pd[1] > 0 || pd[2] > 0 || pd[3] > 0)) {
    c.bandTapRows = [grid, R, OW, st, pd](const Index &bi, E m0) {
      E first = grid ? bi[1] * E(R) : m0 / E(OW);
      E lo = first * E(st[0]) - E(pd[0]);
      return std::pair{lo, lo + E((R - 1) * st[0])};
    };
    bool cols = !grid && blocked;
    c.bandTaps = {dl[0], H, grid ? 0 : st[0], -pd[1], st[1], dl[1], cols ? W : 0};
    c.bandLiveShare = bandLiveShare(c.bandTaps, st[0], pd[0], KH, KW, OH, OW, grid ? R : 1, c.N);
  }
  if (grid) {
    auto ob = [G, OBg](const Index &bi, E q) { return G > 1 ? bi.back() * E(OBg) + q : q; };
    c.outIndex = [R, Wp, ob](const Index &bi, E row, E col) {
      return Index{bi[0], ob(bi, col / E(int64_t(16))), bi[1] * E(R) + row / E(Wp), row % E(Wp),
                   col % E(int64_t(16))};
    };
    c.outLanes = [R, Wp, ob](const Index &bi, E row, E q, E l) {
      return Index{bi[0], ob(bi, q), bi[1] * E(R) + row / E(Wp), row % E(Wp), l};
    };
    c.rowValid = [R, Wp, OW, OH](const Index &bi, E row) {
      E ok = row % E(Wp) < E(OW);
      return OH % R ? ok && (bi[1] * E(R) + row / E(Wp) < E(OH)) : ok;
    };
    c.what += cat(", ", R, " output rows per block from a padded band of ", BR, " x ", Wp,
                  " input pixels");
  } else {
    c.what += cat(", ", R, " output row", R > 1 ? "s" : "", " per tile from a band of ", BR, " x ",
                  Wp, " input pixels");
  }
}

} // namespace

// blocked_conv (dense, ir/ops.def): D[n][pixel, channel] = sum_k A[pixel, k] W[k, channel] with
// rows = output pixels, columns = output channels (16 per block), k over (input block, kh, kw,
// lane) of a blocked input or (c, kh, kw) of a plain one. A pointwise conv (1 x 1, stride 1, no
// padding) on a blocked input reads A in place: pixel p, k at (k / 16) * block + p * 16 + k % 16
// (aBlockView); other convs stage A tiles, the tap's padding read as zero. The output walks
// its columns 16 lanes at a time: channel block q, lane l at [n, q, oh, ow, l]. A grouped one
// (group G > 1) is G contractions, the group the last batch index: N its 16 OCB / G columns, K
// its rows of the weight, A its input blocks, B from row g K.
Contraction blockedConvSpec(const Node &n, const GroupExpr &gx, bool host, const Knobs &knobs) {
  Contraction c;
  if (nodePrecision(n) == Precision::I8)
    c.aShift = n.i("x_offset");
  const Value *x = n.operand(0), *w = n.operand(1);
  const auto &epi = n.strs("epilogue");
  bool hasBias = n.numOperands() == 3 + static_cast<size_t>(epilogueOperandCount(epi));
  bool blocked = n.i("blocked_input") != 0;
  const auto &xs = x->type().shape, &os = n.result()->type().shape;
  const auto &ks = n.ints("kernel_shape"), &st = n.ints("strides"), &pd = n.ints("pads"),
             &dl = n.ints("dilations");
  std::vector<int64_t> O = {os[2], os[3]};
  int64_t H = xs[2], W = xs[3], G = n.i("group"), CBg = xs[1] / G, OBg = os[1] / G;
  c.outShape = os;
  c.batch = {xs[0]};
  c.M = os[2] * os[3];
  c.N = OBg * 16;
  c.K = w->type().shape[0] / G;
  // The group's first input and output block, its first weight row (G > 1: the last batch
  // index is the group).
  auto inBlock = [G, CBg](const Index &bi, E b) { return G > 1 ? bi.back() * E(CBg) + b : b; };
  auto outBlock = [G, OBg](const Index &bi, E q) { return G > 1 ? bi.back() * E(OBg) + q : q; };
  int64_t Kg = c.K;
  auto wRow = [G, Kg](const Index &bi, E k) { return G > 1 ? bi.back() * E(Kg) + k : k; };
  std::vector<int64_t> kDims = blocked ? std::vector<int64_t>{CBg, ks[0], ks[1], 16}
                                       : std::vector<int64_t>{xs[1], ks[0], ks[1]};
  c.what = cat("blocked conv ", x->type().str(), " * ", w->type().str(), " as GEMM (M = ", c.M,
               " pixels, N = ", c.N, " channels, K = ", c.K, ")");
  if (G > 1)
    c.what += cat(" per group of ", G);
  bool pointwise = blocked && ks[0] == 1 && ks[1] == 1 && st[0] == 1 && st[1] == 1 && pd[0] == 0 &&
                   pd[1] == 0 && pd[2] == 0 && pd[3] == 0;
  auto xAt = [&gx, x, blocked, inBlock](const Index &bi, const Index &k, E ih, E iw) {
    Index idx =
        blocked ? Index{bi[0], inBlock(bi, k[0]), ih, iw, k[3]} : Index{bi[0], k[0], ih, iw};
    return asF32(gx.at(x, idx));
  };
  if (pointwise) {
    c.aAt = [xAt, O, kDims](const Index &bi, E row, E k) {
      Index p = unflatIndex(O, row);
      return xAt(bi, unflatIndex(kDims, k), p[0], p[1]);
    };
  } else {
    // Per tile row: the output pixel's input corner; per element: the tap's position.
    c.aRowDecls = [O, st, pd](E row) {
      Index p = unflat(O, row);
      return std::vector<StmtP>{kir::decl("aih", DType::I64, p[0] * E(st[0]) - E(pd[0])),
                                kir::decl("aiw", DType::I64, p[1] * E(st[1]) - E(pd[1]))};
    };
    auto pos = [dl](const Index &k) {
      return std::pair<E, E>{ivar("aih") + k[1] * E(dl[0]), ivar("aiw") + k[2] * E(dl[1])};
    };
    c.aAt = [xAt, kDims, pos](const Index &bi, E, E k) {
      Index kk = unflat(kDims, k);
      auto [ih, iw] = pos(kk);
      return xAt(bi, kk, ih, iw);
    };
    c.aValid = [kDims, pos, H, W](const Index &, E, E k) {
      auto [ih, iw] = pos(unflat(kDims, k));
      E zero(int64_t(0));
      return allOf({ih >= zero, ih < E(H), iw >= zero, iw < E(W)});
    };
  }
  c.bAt = [&gx, w, wRow](const Index &bi, E k, E col) {
    return asF32(gx.at(w, {wRow(bi, k), col}));
  };
  c.kAlign = blocked ? 16 : 8;
  c.outIndex = [O, outBlock](const Index &bi, E row, E col) {
    Index p = unflat(O, row);
    return Index{bi[0], outBlock(bi, col / E(int64_t(16))), p[0], p[1], col % E(int64_t(16))};
  };
  c.outLanes = [O, outBlock](const Index &bi, E row, E q, E l) {
    Index p = unflat(O, row);
    return Index{bi[0], outBlock(bi, q), p[0], p[1], l};
  };
  // A plain input's band (the image's first conv, resnet's 7 x 7 / 2 on 3 channels) keeps
  // NCHW rows: k = (c, kh, kw) is read in blocks of one kernel row's KW contiguous taps.
  bool plainBand = host && !blocked && dl[1] == 1 && !(st[0] == 1 && st[1] == 1 && os[3] <= 5);
  // A pointwise conv whose input is not read in place (a fused prologue: DenseNet's BN -> ReLU
  // after a concat, lower/fusion.cpp Caps::pricedPrologue) fills a band of its tile's rows
  // too, the prologue applied once per element as the band is copied in.
  bool pointwiseBand = host && pointwise && gx.inlines(x) && !aBlockView(c, Index{ivar("aicf_b")});
  if (host && (blocked || plainBand) && (!pointwise || pointwiseBand))
    bandForm(n, gx, knobs, c);
  if (G > 1)
    c.batch.push_back(G);
  if (hasBias) {
    const Value *bias = n.operand(2);
    c.addTerms.push_back([&gx, bias](const Index &out) {
      return asF32(gx.at(bias, {out[1] * E(int64_t(16)) + out[4]}));
    });
  }
  splitEpilogue(n, hasBias ? 3 : 2, gx, true, c);
  return c;
}

} // namespace contraction

} // namespace aicf
