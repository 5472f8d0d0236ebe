// The tiled_contraction recipe (tile_compatible_compute) for matmul (batched,
// broadcast batch dims, 1-D operands), gemm (transA / transB, alpha, beta, C) and conv with
// group 1 as an implicit GEMM; and the direct_conv recipe for grouped / depthwise conv and
// conv_transpose.
//
// Tiled contraction, every op seen as D[b, row, col] = sum_k A[b, row, k] B[b, k, col]:
//   grid (b: batch, mt: M / BM, nt: N / BN)  block (t: threads = (BM / TM) (BN / TN))
//   reduce k0 in [0, K) step BK {
//     init:   region t { C[t, i, j] = 0 }                        -- local accumulator tile
//     update: region t { As = A[m0.., k0..] (BM x BK), Bs = B[k0.., n0..] (BK x BN), zero
//                        beyond the bounds }; barrier; mma_tile(C += As x Bs); barrier }
//   region t { C[t, i, j] = C[t, i, j] + g }                     -- additive epilogue terms
//   region t { D[...] = epilogue(C[t, i, j]) }                   -- the rest, fused nodes
// The additive terms (conv bias, gemm's beta C, leading "add" epilogue steps) are written as a
// separate self-update of the accumulator so that FuseReductionEpilogue can move them into the
// reduction's init (C = g instead of C = 0); its outcome is recorded as a comment in the kernel.
// Conv as implicit GEMM: row = output channel, col = output pixel, k = (input channel, kernel
// tap); the B tile is gathered from the input (im2col on the fly), padding reads as zero.
//
// Knobs: BM, BN, BK, TM, TN (threads follows). GPU plans: 256 threads, 8 x 8 (or 4 x 4, 2 x 2
// for small operands) thread tiles; the host plan: one thread owning the whole BM x BN tile so
// the host printer's vector micro-kernel runs it (BN a multiple of 16).
//
// Direct conv: grid (n, oc), threads over output pixels; each thread sums its pixel over the
// group's input channels and the kernel taps (conv_transpose: the taps whose input position
// o + pad - k dil is a multiple of the stride inside the input), adds the bias and applies the
// epilogue.
#include "kir/fuse_reduction_epilogue.h"
#include "lower/contraction.h"
#include "lower/recipe_support.h"
#include "lower/recipes.h"

#include "ir/graph.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <set>

namespace aicf {

using kir::E;
using kir::StmtP;
using namespace recipe;

namespace contraction {

E f32(double v) {
  return kir::fconst(v, DType::F32);
}
E fvar(const std::string &name) {
  return kir::var(name, DType::F32);
}
E ivar(const std::string &name) {
  return kir::var(name, DType::I64);
}

// An extra epilogue operand broadcast to the output, at output index `out`.
std::function<E(const Index &)> broadcastTerm(const GroupExpr &gx, const Value *v,
                                              const std::vector<SymExpr> &outDims,
                                              double scale = 1.0) {
  return [&gx, v, outDims, scale](const Index &out) {
    E e = asF32(gx.at(v, broadcastIndex(symShapeOf(v->type()), outDims, out)));
    return scale == 1.0 ? e : f32(scale) * e;
  };
}

// Splits the `epilogue` attribute into leading additive terms and the remaining steps; extra
// operands start at operand `firstExtra`. `additive` says whether leading "add"s may still be
// collected (false once something non-additive was applied).
void splitEpilogue(const Node &n, size_t firstExtra, const GroupExpr &gx, bool additive,
                   Contraction &c) {
  size_t next = firstExtra;
  for (const EpilogueStep &step : epilogueSteps(n)) {
    const Value *operand = nullptr;
    if (step.takesOperand()) {
      AICF_CHECK(next < n.numOperands(), "epilogue step '", step.str(), "' has no operand at ",
                 n.where());
      operand = n.operand(next++);
    }
    if (additive && step.op == Op::Add) {
      c.addTerms.push_back(broadcastTerm(gx, operand, c.outDims()));
      continue;
    }
    additive = false;
    c.steps.emplace_back(step, operand);
  }
}

std::vector<int64_t> broadcastBatch(const std::vector<int64_t> &a, const std::vector<int64_t> &b) {
  size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> out(r, 1);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i + a.size() >= r ? a[i + a.size() - r] : 1;
    int64_t db = i + b.size() >= r ? b[i + b.size() - r] : 1;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Contraction matmulSpec(const Node &n, const GroupExpr &gx, bool host, int64_t flattenBelow) {
  Contraction c;
  const Value *a = n.operand(0), *b = n.operand(1);
  std::vector<int64_t> as = a->type().shape, bs = b->type().shape;
  bool aVec = as.size() == 1, bVec = bs.size() == 1;
  if (aVec)
    as.insert(as.begin(), 1);
  if (bVec)
    bs.push_back(1);
  std::vector<int64_t> aBatch(as.begin(), as.end() - 2), bBatch(bs.begin(), bs.end() - 2);
  c.batch = broadcastBatch(aBatch, bBatch);
  c.M = as[as.size() - 2];
  c.K = as.back();
  c.N = bs.back();
  // Symbolic dims: only the rows (of A, or of A's batch flattened into them) may depend on
  // them; K and N are the weight's.
  const TensorType &at = a->type(), &bt = b->type();
  SymExpr mSym = aVec ? SymExpr(1) : at.symDim(at.shape.size() - 2);
  bool symBatch = false;
  for (size_t i = 0; i + 2 < at.shape.size(); ++i)
    symBatch = symBatch || !at.symDim(i).isConstant();
  for (size_t i = 0; i + 2 < bt.shape.size(); ++i)
    symBatch = symBatch || !bt.symDim(i).isConstant();
  bool bMatrixSym = false;
  for (size_t i = bt.shape.size() >= 2 ? bt.shape.size() - 2 : 0; i < bt.shape.size(); ++i)
    bMatrixSym = bMatrixSym || !bt.symDim(i).isConstant();
  if (!at.symDim(at.shape.size() - 1).isConstant() || bMatrixSym)
    throw UserError(cat(n.where(), ": matmul ", at.str(), " x ", bt.str(),
                        ": symbolic dims are supported in A's rows only for now"));
  if (!mSym.isConstant())
    c.Msym = mSym;
  c.outShape = n.result()->type().shape;
  if (n.result()->type().isSymbolic())
    c.outSym = symShapeOf(n.result()->type());
  c.what = cat("matmul ", a->type().str(), " x ", b->type().str());
  std::vector<int64_t> batch = c.batch;
  // The operands' batch broadcast, decided on the symbolic dims: a symbolic batch dim is never
  // a broadcast one (its value 1 at some point is not a broadcast), so it reads as 2 here.
  std::vector<int64_t> aB = aBatch, bB = bBatch, oB = batch;
  if (symBatch) {
    auto mark = [](std::vector<int64_t> &dims, const TensorType &t, size_t lead) {
      for (size_t i = 0; i < dims.size(); ++i)
        if (i >= lead && !t.symDim(i - lead).isConstant())
          dims[i] = 2;
    };
    mark(aB, at, 0);
    mark(bB, bt, 0);
    for (size_t i = 0; i < oB.size(); ++i) {
      size_t ra = oB.size() - aB.size(), rb = oB.size() - bB.size();
      bool sa = i >= ra && !at.symDim(i - ra).isConstant();
      bool sb = i >= rb && !bt.symDim(i - rb).isConstant();
      if (sa || sb)
        oB[i] = 2;
    }
  }
  c.aAt = [&gx, a, aVec, aB, oB](const Index &bi, E row, E k) {
    Index idx = broadcastIndex(aB, oB, bi);
    if (!aVec)
      idx.push_back(row);
    idx.push_back(k);
    return asF32(gx.at(a, idx));
  };
  c.bAt = [&gx, b, bVec, bB, oB](const Index &bi, E k, E col) {
    Index idx = broadcastIndex(bB, oB, bi);
    idx.push_back(k);
    if (!bVec)
      idx.push_back(col);
    return asF32(gx.at(b, idx));
  };
  c.outIndex = [aVec, bVec](const Index &bi, E row, E col) {
    Index idx = bi;
    if (!aVec)
      idx.push_back(row);
    if (!bVec)
      idx.push_back(col);
    return idx;
  };
  // B shared by every batch (a [K, N] weight) and A not broadcast, with few rows per batch
  // (torch's attention in-projection reads x as [S, B, E]: 2 rows per batch of 96): the batch
  // dims become more rows of one [batch * M, K] x [K, N] product, so tiles are not mostly
  // padding and B is staged once per row tile instead of once per batch (torch's encoder
  // layer: 2.9 ms -> 0.43 ms for that matmul on one core). With 32 or more rows per batch the
  // per-batch tiles are as good (measured on the LLaMA MLP, 64 rows: slightly better). Host
  // plans only for now: on sm_80 the row split's index arithmetic costs BERT's projection
  // register spills (the GPU plans have not been measured on a GPU yet).
  // Symbolic rows or batch: always (the choice must not depend on where in the range the plan
  // was made, and a symbolic batch is lowered only as rows).
  if (host && !aVec && !batch.empty() && product(bBatch) == 1 && aBatch == batch &&
      (c.M < flattenBelow || symBatch || c.Msym)) {
    int64_t m = c.M;
    E mE = kir::symE(mSym); // the rows per batch entry as the code reads them
    auto aAt = c.aAt, bAt = c.bAt;
    auto outIndex = c.outIndex;
    Index zero(batch.size(), E(int64_t(0)));
    auto batchOf = [batch, mE](E row) { return unflat(batch, row / mE); };
    c.aAt = [aAt, batchOf, mE](const Index &, E row, E k) {
      return aAt(batchOf(row), row % mE, k);
    };
    c.bAt = [bAt, zero](const Index &, E k, E col) { return bAt(zero, k, col); };
    c.outIndex = [outIndex, batchOf, mE](const Index &, E row, E col) {
      return outIndex(batchOf(row), row % mE, col);
    };
    c.M = product(batch) * m;
    if (symBatch || c.Msym) {
      SymExpr rows = mSym;
      for (size_t i = 0; i < aBatch.size(); ++i)
        rows = *SymExpr::mul(rows, at.symDim(i));
      c.Msym = rows;
    }
    c.batch.clear();
  }
  if (symBatch && !c.batch.empty())
    throw UserError(cat(n.where(), ": matmul ", at.str(), " x ", bt.str(),
                        ": symbolic batch dims of a batched product are not supported yet"));
  splitEpilogue(n, 2, gx, true, c);
  return c;
}

Contraction gemmSpec(const Node &n, const GroupExpr &gx) {
  Contraction c;
  const Value *a = n.operand(0), *b = n.operand(1);
  bool transA = n.i("transA") != 0, transB = n.i("transB") != 0;
  const auto &epi = n.strs("epilogue");
  bool hasC = n.numOperands() == 3 + static_cast<size_t>(epilogueOperandCount(epi));
  c.outShape = n.result()->type().shape;
  c.M = c.outShape[0];
  c.N = c.outShape[1];
  if (const TensorType &rt = n.result()->type(); rt.isSymbolic()) {
    if (!rt.symDim(1).isConstant() ||
        !(transA ? a->type().symDim(0) : a->type().symDim(1)).isConstant())
      throw UserError(cat(n.where(), ": gemm ", a->type().str(), " x ", b->type().str(),
                          ": symbolic dims are supported in A's rows only for now"));
    c.Msym = rt.symDim(0);
    c.outSym = symShapeOf(rt);
  }
  c.K = transA ? a->type().shape[0] : a->type().shape[1];
  c.alpha = n.f("alpha");
  c.what = cat("gemm ", transA ? "A^T" : "A", " x ", transB ? "B^T" : "B", " ", a->type().str(),
               " x ", b->type().str(), c.alpha != 1.0 ? cat(", alpha ", c.alpha) : "",
               hasC ? cat(", beta ", n.f("beta"), " C") : "");
  c.aAt = [&gx, a, transA](const Index &, E row, E k) {
    return asF32(transA ? gx.at(a, {k, row}) : gx.at(a, {row, k}));
  };
  c.bAt = [&gx, b, transB](const Index &, E k, E col) {
    return asF32(transB ? gx.at(b, {col, k}) : gx.at(b, {k, col}));
  };
  c.outIndex = [](const Index &, E row, E col) { return Index{row, col}; };
  if (hasC)
    c.addTerms.push_back(broadcastTerm(gx, n.operand(2), c.outDims(), n.f("beta")));
  splitEpilogue(n, hasC ? 3 : 2, gx, true, c);
  return c;
}

// Convolution geometry shared by the implicit GEMM and the direct recipe.
struct ConvGeom {
  int64_t N = 0, C = 0, M = 0, G = 1;
  std::vector<int64_t> I, Kd, O, strides, pads, dil;
  size_t S = 0;
};

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

// blocked_conv (dense, ir/ops.def): D[n][pixel, channel] = sum_k A[pixel, k] W[k, channel] with
// rows = output pixels, columns = output channels (16 per block), k over (input block, kh, kw,
// lane) of a blocked input or (c, kh, kw) of a plain one. A pointwise conv (1 x 1, stride 1, no
// padding) on a blocked input reads A in place: pixel p, k at (k / 16) * block + p * 16 + k % 16
// (aBlockView); other convs stage A tiles, the tap's padding read as zero. The output walks
// its columns 16 lanes at a time: channel block q, lane l at [n, q, oh, ow, l].
Contraction blockedConvSpec(const Node &n, const GroupExpr &gx, bool host, const Knobs &knobs) {
  Contraction c;
  const Value *x = n.operand(0), *w = n.operand(1);
  const auto &epi = n.strs("epilogue");
  bool hasBias = n.numOperands() == 3 + static_cast<size_t>(epilogueOperandCount(epi));
  bool blocked = n.i("blocked_input") != 0;
  const auto &xs = x->type().shape, &os = n.result()->type().shape;
  const auto &ks = n.ints("kernel_shape"), &st = n.ints("strides"), &pd = n.ints("pads"),
             &dl = n.ints("dilations");
  std::vector<int64_t> O = {os[2], os[3]};
  int64_t H = xs[2], W = xs[3];
  c.outShape = os;
  c.batch = {xs[0]};
  c.M = os[2] * os[3];
  c.N = os[1] * 16;
  c.K = w->type().shape[0];
  std::vector<int64_t> kDims = blocked ? std::vector<int64_t>{xs[1], ks[0], ks[1], 16}
                                       : std::vector<int64_t>{xs[1], ks[0], ks[1]};
  c.what = cat("blocked conv ", x->type().str(), " * ", w->type().str(), " as GEMM (M = ", c.M,
               " pixels, N = ", c.N, " channels, K = ", c.K, ")");
  bool pointwise = blocked && ks[0] == 1 && ks[1] == 1 && st[0] == 1 && st[1] == 1 && pd[0] == 0 &&
                   pd[1] == 0 && pd[2] == 0 && pd[3] == 0;
  auto xAt = [&gx, x, blocked](E nIdx, const Index &k, E ih, E iw) {
    Index idx = blocked ? Index{nIdx, k[0], ih, iw, k[3]} : Index{nIdx, k[0], ih, iw};
    return asF32(gx.at(x, idx));
  };
  if (pointwise) {
    c.aAt = [xAt, O, kDims](const Index &bi, E row, E k) {
      Index p = unflatIndex(O, row);
      return xAt(bi[0], unflatIndex(kDims, k), p[0], p[1]);
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
      return xAt(bi[0], kk, ih, iw);
    };
    c.aValid = [kDims, pos, H, W](const Index &, E, E k) {
      auto [ih, iw] = pos(unflat(kDims, k));
      E zero(int64_t(0));
      return allOf({ih >= zero, ih < E(H), iw >= zero, iw < E(W)});
    };
  }
  c.bAt = [&gx, w](const Index &, E k, E col) { return asF32(gx.at(w, {k, col})); };
  c.kAlign = blocked ? 16 : 8;
  c.outIndex = [O](const Index &bi, E row, E col) {
    Index p = unflat(O, row);
    return Index{bi[0], col / E(int64_t(16)), p[0], p[1], col % E(int64_t(16))};
  };
  c.outLanes = [O](const Index &bi, E row, E q, E l) {
    Index p = unflat(O, row);
    return Index{bi[0], q, p[0], p[1], l};
  };
  // A plain input's band (the image's first conv, resnet's 7 x 7 / 2 on 3 channels) keeps
  // NCHW rows: k = (c, kh, kw) is read in blocks of one kernel row's KW contiguous taps.
  bool plainBand = host && !blocked && dl[1] == 1 && !(st[0] == 1 && st[1] == 1 && os[3] <= 5);
  if (host && (blocked || plainBand) && !pointwise) {
    // Band form: a tile's block first copies the input rows its output rows' taps read, for
    // every input block, into a band [CB, BR, Wp, 16] with the padding as zeros, so that tap
    // (kh, kw) of every pixel lies inside it, and the micro-kernel reads A from the band.
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
    int64_t CB = xs[1], KH = ks[0], KW = ks[1], OH = os[2], OW = os[3];
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
    c.bandFill = [&gx, x, CB, BR, Wp, H, OW, lo, hi, st, pd, R, grid,
                  lanes](const Index &bi, E m0, const kir::BufferP &band) {
      E zero(int64_t(0)), icb = ivar("bcb"), br = ivar("bbr"), wp = ivar("bwp"), l = ivar("bl");
      auto fill = [&](int64_t from, int64_t to, std::function<E()> value) {
        if (lanes == 1) // plain rows: the columns are the vector loop
          return vectorLoop("bwp", E(from), E(to),
                            {kir::store(band, {icb, br, wp, zero}, value())});
        return kir::forLoop("bwp", E(from), E(to - from),
                            {vectorLoop("bl", zero, E(int64_t(16)),
                                        {kir::store(band, {icb, br, wp, l}, value())})});
      };
      E ih = ivar("bih");
      auto zeros = [] { return f32(0.0); };
      std::vector<StmtP> inside;
      if (lo > 0)
        inside.push_back(fill(0, lo, zeros));
      inside.push_back(fill(lo, hi, [&] {
        Index at = lanes == 1 ? Index{bi[0], icb, ih, wp - E(pd[1])}
                              : Index{bi[0], icb, ih, wp - E(pd[1]), l};
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
    if (grid) {
      c.outIndex = [R, Wp](const Index &bi, E row, E col) {
        return Index{bi[0], col / E(int64_t(16)), bi[1] * E(R) + row / E(Wp), row % E(Wp),
                     col % E(int64_t(16))};
      };
      c.outLanes = [R, Wp](const Index &bi, E row, E q, E l) {
        return Index{bi[0], q, bi[1] * E(R) + row / E(Wp), row % E(Wp), l};
      };
      c.rowValid = [R, Wp, OW, OH](const Index &bi, E row) {
        E ok = row % E(Wp) < E(OW);
        return OH % R ? ok && (bi[1] * E(R) + row / E(Wp) < E(OH)) : ok;
      };
      c.what += cat(", ", R, " output rows per block from a padded band of ", BR, " x ", Wp,
                    " input pixels");
    } else {
      c.what += cat(", ", R, " output row", R > 1 ? "s" : "", " per tile from a band of ", BR,
                    " x ", Wp, " input pixels");
    }
  }
  if (hasBias) {
    const Value *bias = n.operand(2);
    c.addTerms.push_back([&gx, bias](const Index &out) {
      return asF32(gx.at(bias, {out[1] * E(int64_t(16)) + out[4]}));
    });
  }
  splitEpilogue(n, hasBias ? 3 : 2, gx, true, c);
  return c;
}

// Applies the remaining epilogue steps to `v`, one scalar per step.
std::vector<StmtP> applySteps(const Contraction &c, const GroupExpr &gx, const Index &out,
                              std::string &cur, const std::string &prefix) {
  std::vector<StmtP> body;
  for (size_t i = 0; i < c.steps.size(); ++i) {
    const auto &[step, operand] = c.steps[i];
    E opnd =
        operand
            ? asF32(gx.at(operand, broadcastIndex(symShapeOf(operand->type()), c.outDims(), out)))
            : E();
    std::string next = cat(prefix, i + 1);
    body.push_back(kir::decl(next, DType::F32, epilogueStepExpr(step, fvar(cur), opnd)));
    cur = next;
  }
  return body;
}

Tiles chooseTiles(const Contraction &c, const Knobs &knobs, kir::MmaFrag frag) {
  Tiles t{};
  if (frag != kir::MmaFrag::None) {
    // Tensor cores: warp tiles of 8 TM x 4 TN (m16n8 accumulators, kir.h); two warp rows from
    // 64 block rows on, up to four warp columns: 128 x 128 tiles are 8 warps of 64 x 32.
    auto pick = [](int64_t d) {
      return d > 64 ? int64_t(128) : d > 32 ? int64_t(64) : int64_t(32);
    };
    t.BM = knobs.get("BM", pick(c.M));
    t.BN = knobs.get("BN", pick(c.N));
    t.BK = knobs.get("BK", c.K > 16 ? 32 : 16);
    t.TM = knobs.get("TM", t.BM >= 64 ? t.BM / 16 : t.BM / 8);
    t.TN = knobs.get("TN", t.BN >= 128 ? t.BN / 16 : t.BN >= 64 ? t.BN / 8 : t.BN / 4);
    int64_t fk = kir::mmaFragK(frag);
    AICF_CHECK(t.BM > 0 && t.BN > 0 && t.BK > 0 && t.TM > 0 && t.TN > 0 && t.TM % 2 == 0 &&
                   t.TN % 2 == 0 && t.BM % (8 * t.TM) == 0 && t.BN % (4 * t.TN) == 0 &&
                   t.BK % fk == 0,
               "tiled_contraction: bad tensor-core tile knobs BM ", t.BM, " BN ", t.BN, " BK ",
               t.BK, " TM ", t.TM, " TN ", t.TN, " (", kir::mmaFragName(frag),
               ": TM and TN even, BM a multiple of 8 TM, BN of 4 TN, BK of ", fk, ")");
    t.threads = (t.BM / (8 * t.TM)) * (t.BN / (4 * t.TN)) * 32;
    if (knobs.values.count("threads"))
      AICF_CHECK(knobs.get("threads", 0) == t.threads,
                 "tiled_contraction: threads must be 32 (BM/8TM)(BN/4TN) = ", t.threads);
    return t;
  }
  if (isGpuPlan(knobs)) {
    auto pick = [](int64_t d) {
      return d > 64 ? int64_t(128) : d > 32 ? int64_t(64) : int64_t(32);
    };
    t.BM = knobs.get("BM", pick(c.M));
    t.BN = knobs.get("BN", pick(c.N));
    t.BK = knobs.get("BK", c.K >= 32 ? 32 : 16);
    t.TM = knobs.get("TM", std::max<int64_t>(1, t.BM / 16));
    t.TN = knobs.get("TN", std::max<int64_t>(1, t.BN / 16));
  } else {
    // Host: tiles of at most 128 x 256 x 128 (A block in L2, B panels packed into L1 by the
    // micro-kernel), balanced so the last tile is not mostly padding (M = 132: two tiles of 72
    // rows rather than 128 + 4). Measured on 512^3: ~135 GFLOP/s on one core.
    auto balanced = [](int64_t d, int64_t maxTile, int64_t align) {
      int64_t tiles = ceilDiv(std::max<int64_t>(d, 1), maxTile);
      return roundUp(ceilDiv(std::max<int64_t>(d, 1), tiles), align);
    };
    t.BM = knobs.get("BM", c.defaultBM ? c.defaultBM : balanced(c.M, 128, 8));
    t.BN = knobs.get("BN", balanced(c.N, 256, c.N >= 32 ? 32 : 16));
    t.BK = knobs.get("BK", balanced(c.K, 128, c.kAlign));
    t.TM = knobs.get("TM", t.BM);
    t.TN = knobs.get("TN", t.BN);
  }
  AICF_CHECK(t.BM > 0 && t.BN > 0 && t.BK > 0 && t.TM > 0 && t.TN > 0 && t.BM % t.TM == 0 &&
                 t.BN % t.TN == 0,
             "tiled_contraction: bad tile knobs BM ", t.BM, " BN ", t.BN, " BK ", t.BK, " TM ",
             t.TM, " TN ", t.TN);
  t.threads = (t.BM / t.TM) * (t.BN / t.TN);
  if (knobs.values.count("threads"))
    AICF_CHECK(knobs.get("threads", 0) == t.threads, "tiled_contraction: threads must be (BM/TM)",
               "(BN/TN) = ", t.threads);
  return t;
}

// A tile copy dst[r, c] = src(r, c) (zero where `valid` fails) by all threads: element
// e = t, t + threads, ... of the row-major tile; one thread walks rows and columns directly.
// `rowDecls(r)` / `colDecls(c)` (optional) declare scalars src and valid use, once per row and
// once per element (with `colOuter`, one thread walks columns outside rows and declares the
// column scalars once per column).
StmtP tileCopy(const kir::BufferP &dst, int64_t rows, int64_t cols, int64_t threads,
               const std::string &t, const std::string &tag, const std::function<E(E r, E c)> &src,
               const std::function<E(E r, E c)> &valid,
               const std::function<std::vector<StmtP>(E r)> &rowDecls,
               const std::function<std::vector<StmtP>(E c)> &colDecls, bool colOuter) {
  auto body = [&](E r, E c) {
    std::vector<StmtP> b = colDecls ? colDecls(c) : std::vector<StmtP>{};
    E ok = valid ? valid(r, c) : E();
    if (!ok)
      b.push_back(kir::store(dst, {r, c}, src(r, c)));
    else
      b.push_back(kir::ifThen(ok, {kir::store(dst, {r, c}, src(r, c))},
                              {kir::store(dst, {r, c}, f32(0.0))}));
    return b;
  };
  if (threads == 1 && colOuter) { // columns outside rows: per-column scalars leave the row loop
    E r = ivar(tag + "r"), c = ivar(tag + "c");
    std::vector<StmtP> colBody = colDecls ? colDecls(c) : std::vector<StmtP>{};
    std::vector<StmtP> b = body(r, c);
    b.erase(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(colBody.size()));
    colBody.push_back(kir::forLoop(tag + "r", E(int64_t(0)), E(rows), b));
    return kir::forLoop(tag + "c", E(int64_t(0)), E(cols), colBody);
  }
  if (threads == 1) {
    E r = ivar(tag + "r"), c = ivar(tag + "c");
    std::vector<StmtP> rowBody = rowDecls ? rowDecls(r) : std::vector<StmtP>{};
    rowBody.push_back(kir::forLoop(tag + "c", E(int64_t(0)), E(cols), body(r, c)));
    return kir::forLoop(tag + "r", E(int64_t(0)), E(rows), rowBody);
  }
  E e = ivar(tag + "e");
  std::vector<StmtP> elem = rowDecls ? rowDecls(e / E(cols)) : std::vector<StmtP>{};
  std::vector<StmtP> b = body(e / E(cols), e % E(cols));
  elem.insert(elem.end(), b.begin(), b.end());
  return kir::forLoop(tag + "e", ivar(t), E(rows * cols) - ivar(t), elem, threads);
}

// ---- Operand views (host tiles of one thread, kir.h mma_tile views) ----------------------------

// An integer index expression as a sum of constant multiples of atoms plus a rest free of them.
// Atoms are the variables named in `vars` and floordivs / mods by constants of expressions
// involving them ("d:<X>/c", "m:<X>%c"). Where X = c * (X / c) + X % c makes a pair of such
// atoms one multiple of X (a flattened row split into batch and row: (r / 64) * 64 K + (r % 64)
// K = r K), the pair is replaced by it.
struct Linear {
  std::map<std::string, int64_t> coef;
  E rest = E(int64_t(0));
  std::map<std::string, std::pair<E, int64_t>> split; // atom -> (X, c)
};

bool involves(const kir::ExprP &e, const std::set<std::string> &vars) {
  if (!e)
    return false;
  if (e->kind == kir::Expr::Kind::Var)
    return vars.count(e->var) > 0;
  return std::any_of(e->args.begin(), e->args.end(),
                     [&](const kir::ExprP &a) { return involves(a, vars); });
}

void addScaled(Linear &into, const Linear &from, int64_t scale) {
  for (const auto &[atom, k] : from.coef)
    into.coef[atom] += k * scale;
  into.rest = into.rest + from.rest * E(scale);
  into.split.insert(from.split.begin(), from.split.end());
}

std::optional<Linear> linear(const E &e, const std::set<std::string> &vars) {
  Linear out;
  if (!involves(e.get(), vars)) {
    out.rest = e;
    return out;
  }
  if (e->kind == kir::Expr::Kind::Var) {
    out.coef[e->var] = 1;
    return out;
  }
  if (e->kind != kir::Expr::Kind::Binary || e->type != DType::I64)
    return std::nullopt;
  E a(e->args[0]), b(e->args[1]);
  switch (e->bop) {
  case kir::BinOp::Add:
  case kir::BinOp::Sub: {
    auto la = linear(a, vars), lb = linear(b, vars);
    if (!la || !lb)
      return std::nullopt;
    addScaled(out, *la, 1);
    addScaled(out, *lb, e->bop == kir::BinOp::Add ? 1 : -1);
    return out;
  }
  case kir::BinOp::Mul: {
    if (b->kind != kir::Expr::Kind::Int)
      std::swap(a, b);
    if (b->kind != kir::Expr::Kind::Int)
      return std::nullopt;
    auto la = linear(a, vars);
    if (!la)
      return std::nullopt;
    addScaled(out, *la, b->ival);
    return out;
  }
  case kir::BinOp::Div:
  case kir::BinOp::Mod: {
    if (b->kind != kir::Expr::Kind::Int || b->ival <= 0 || !linear(a, vars))
      return std::nullopt;
    std::string atom = cat(e->bop == kir::BinOp::Div ? "d:" : "m:", kir::exprStr(a), ":", b->ival);
    out.coef[atom] = 1;
    out.split[atom] = {a, b->ival};
    return out;
  }
  default: return std::nullopt;
  }
}

// The row-major flat offset of `load` in its buffer, linear over `vars`, with split pairs merged.
std::optional<Linear> flatOffset(const E &load, const std::set<std::string> &vars) {
  if (load->kind != kir::Expr::Kind::Load || load->type != DType::F32 ||
      load->buf->scope != kir::Scope::Global || load->buf->dtype != DType::F32)
    return std::nullopt;
  std::vector<int64_t> strides = stridesOf(load->buf->shape);
  // Summed with kir's operator+, which re-joins the digits of an unflattened index (a conv
  // weight read as [M, C * kh * kw] becomes row * K + k, not four split atoms).
  E flat = E(int64_t(0));
  for (size_t i = 0; i < load->args.size(); ++i)
    flat = flat + E(load->args[i]) * E(strides[i]);
  auto joined = linear(flat, vars);
  if (!joined)
    return std::nullopt;
  Linear out = *joined;
  for (auto it = out.split.begin(); it != out.split.end(); ++it) {
    const auto &[x, c] = it->second;
    std::string div = cat("d:", kir::exprStr(x), ":", c), mod = cat("m:", kir::exprStr(x), ":", c);
    if (!out.coef.count(div) || !out.coef.count(mod) || out.coef[div] != c * out.coef[mod])
      continue;
    int64_t k = out.coef[mod];
    out.coef.erase(div);
    out.coef.erase(mod);
    addScaled(out, *linear(x, vars), k);
  }
  std::erase_if(out.coef, [](const auto &kv) { return kv.second == 0; });
  return out;
}

// A's row stride in `lin`: its coefficient, or, for a single row whose index folded away (a
// 1 x 1 feature map: row 0 is the only one read) where `singleRow` allows it, K; 0 when A has
// no such stride.
int64_t aRowStride(const Contraction &c, const Linear &lin, bool singleRow) {
  auto it = lin.coef.find("aicf_row");
  if (it != lin.coef.end())
    return it->second;
  return singleRow && c.M == 1 && !c.Msym ? c.K : 0;
}

std::optional<RowView> aRowView(const Contraction &c, const Index &bi, bool singleRow) {
  if (c.aKDecls || c.aRowDecls || c.aValid)
    return std::nullopt;
  E at = c.aAt(bi, ivar("aicf_row"), ivar("aicf_kk"));
  auto lin = flatOffset(at, {"aicf_row", "aicf_kk"});
  if (!lin)
    return std::nullopt;
  int64_t ld = aRowStride(c, *lin, singleRow);
  size_t terms = lin->coef.count("aicf_row") ? 2 : 1;
  if (lin->coef.size() != terms || lin->coef["aicf_kk"] != 1 || ld < 1)
    return std::nullopt;
  return RowView{at->buf, lin->rest, ld};
}

std::optional<BlockView> aBlockView(const Contraction &c, const Index &bi, bool singleRow) {
  if (c.aKDecls || c.aRowDecls || c.aValid || c.K % 16 != 0)
    return std::nullopt;
  E at = c.aAt(bi, ivar("aicf_row"), ivar("aicf_kk"));
  auto lin = flatOffset(at, {"aicf_row", "aicf_kk"});
  std::string kk = kir::exprStr(ivar("aicf_kk"));
  if (!lin)
    return std::nullopt;
  int64_t ld = aRowStride(c, *lin, singleRow);
  size_t terms = lin->coef.count("aicf_row") ? 3 : 2;
  if (lin->coef.size() != terms || ld < 1 || lin->coef[cat("m:", kk, ":16")] != 1 ||
      lin->coef[cat("d:", kk, ":16")] < 16)
    return std::nullopt;
  return BlockView{at->buf, lin->rest, ld, lin->coef[cat("d:", kk, ":16")]};
}

// B seen in place: element (k, col) at base + k * ld + col of a kernel parameter (a pointwise
// conv's input as [C, pixels], a row-major right operand). The micro-kernel takes whole 16-wide
// column panels, so N must be a multiple of 16 (the last column tile then passes its valid
// width and reads nothing past the operand's rows).
std::optional<RowView> bRowView(const Contraction &c, const Index &bi) {
  if (c.bRowDecls || c.bColDecls || c.bHostCopy || c.bValid || c.N % 16 != 0)
    return std::nullopt;
  E at = c.bAt(bi, ivar("aicf_kk"), ivar("aicf_col"));
  auto lin = flatOffset(at, {"aicf_kk", "aicf_col"});
  if (!lin || lin->coef.size() != 2 || lin->coef["aicf_col"] != 1 || lin->coef["aicf_kk"] < 1)
    return std::nullopt;
  return RowView{at->buf, lin->rest, lin->coef["aicf_kk"]};
}

std::optional<PanelView> bPanelView(const Contraction &c, const Index &bi) {
  if (c.bRowDecls || c.bColDecls || c.bHostCopy || c.bValid)
    return std::nullopt;
  E at = c.bAt(bi, ivar("aicf_kk"), ivar("aicf_col"));
  auto lin = flatOffset(at, {"aicf_kk", "aicf_col"});
  if (!lin || at->buf->shape.size() < 3)
    return std::nullopt;
  // [L.., P, K, NR]: a batched weight's entry (split-chains' slices) starts at the base.
  const std::vector<int64_t> &full = at->buf->shape;
  std::vector<int64_t> shape(full.end() - 3, full.end());
  int64_t nr = shape[2], stride = shape[1] * nr;
  std::string col = kir::exprStr(ivar("aicf_col"));
  auto coef = [&](const std::string &term) {
    auto it = lin->coef.find(term);
    return it == lin->coef.end() ? int64_t(0) : it->second;
  };
  if (nr % 16 != 0 || shape[1] != c.K || coef("aicf_kk") != nr)
    return std::nullopt;
  // One panel (N = NR) folds to rows of NR floats: col / NR is 0.
  bool onePanel = shape[0] == 1 && lin->coef.size() == 2 && coef("aicf_col") == 1;
  if (!onePanel && (lin->coef.size() != 3 || coef(cat("d:", col, ":", nr)) != stride ||
                    coef(cat("m:", col, ":", nr)) != 1))
    return std::nullopt;
  return PanelView{at->buf, lin->rest, nr, stride, shape[0] * nr};
}

// Whether a k step of bk rows of a panel `cols` wide, beside the A of a block of `rows` rows,
// fits in L1.
bool l1Slice(int64_t bk, int64_t cols, int64_t rows, const Hardware &hw) {
  return hw.l1dBytes > 0 && 4 * bk * (cols + rows) <= hw.l1dBytes;
}

// Whether a host tile reading B's panels streams the next panel slice ahead (mma_tile's
// bPrefetch): when the weight is wider than half of L2, each slice comes from L3 or memory
// once, and its first row-block pass would otherwise wait on it (resnet18's layer4 3 x 3 convs,
// 9.4 MB over 49 pixels: 2.08 -> 1.55 ms). A weight that stays in L2 gains nothing and pays the
// prefetch instructions (its 56 x 56 convs ran 7% slower with them).
bool streamsWeight(const PanelView &pv, const Knobs &knobs) {
  int64_t l2 = knobs.planFor.hw.l2Bytes;
  int64_t bytes = 4 * pv.stride * ceilDiv(pv.cols, pv.panel);
  return !isGpuPlan(knobs) && l2 > 0 && bytes > l2 / 2;
}

// The row norm folded into the group's A read (lower/fusion.h rule 7), or null.
const Node *foldedRowNorm(const KernelGroup &g) {
  for (const Node *m : g.nodes)
    if (m != g.anchor && (m->op() == Op::LayerNorm || m->op() == Op::RmsNorm))
      return m;
  return nullptr;
}

// A row norm read as A (lower/fusion.h rule 7, ir/norm_readers.h): the tile's rows' statistics
// first, two passes over each row of the raw A (the norm's input seen through A's reshapes): the
// mean, then the centred sum of squares (rms_norm: the sum of squares), into shared buffers
// `nm` / `nr` (mean and 1 / sqrt(var + eps)) of one entry per tile row; rows over threads. Then
// A reads the norm's result as (x - mean) * rstd * gamma + beta from two scalars each tile row
// declares (pn_mu, pn_rs): A is staged, never read in place.
std::vector<StmtP> rowNormPrologue(const Node &norm, GroupExpr &gx, Contraction &c, const Tiles &tl,
                                   const Index &bi, E m0, const std::string &t,
                                   std::vector<kir::BufferP> &allocs) {
  const Value *x = norm.operand(0), *y = norm.result();
  const std::vector<int64_t> xs = x->type().shape;
  const int64_t K = xs.back();
  const bool layer = norm.op() == Op::LayerNorm;
  const double eps = norm.f("epsilon");
  auto mean = std::make_shared<kir::Buffer>(
      kir::Buffer{"nm", DType::F32, {tl.BM}, kir::Scope::Shared, kir::Role::Temp, {}});
  auto rstd = std::make_shared<kir::Buffer>(
      kir::Buffer{"nr", DType::F32, {tl.BM}, kir::Scope::Shared, kir::Role::Temp, {}});
  if (layer)
    allocs.push_back(mean);
  allocs.push_back(rstd);
  // The statistics read the raw rows.
  gx.substitute(y, [&gx, x](const Index &idx) { return asF32(gx.at(x, idx)); });
  E r = ivar("nr_r"), row = m0 + r, kk = ivar("nr_k");
  std::vector<StmtP> body;
  E K_ = f32(double(K));
  if (layer) {
    body.push_back(kir::decl("ns", DType::F32, f32(0.0)));
    body.push_back(vectorLoop("nr_k", E(int64_t(0)), E(K),
                              {kir::assign("ns", fvar("ns") + c.aAt(bi, row, kk))}));
    body.push_back(kir::decl("nmu", DType::F32, fvar("ns") / K_));
    body.push_back(kir::decl("nv", DType::F32, f32(0.0)));
    body.push_back(vectorLoop("nr_k", E(int64_t(0)), E(K),
                              {kir::decl("nd", DType::F32, c.aAt(bi, row, kk) - fvar("nmu")),
                               kir::assign("nv", fvar("nv") + fvar("nd") * fvar("nd"))}));
    body.push_back(kir::store(mean, {r}, fvar("nmu")));
  } else {
    body.push_back(kir::decl("nv", DType::F32, f32(0.0)));
    body.push_back(vectorLoop("nr_k", E(int64_t(0)), E(K),
                              {kir::decl("nd", DType::F32, c.aAt(bi, row, kk)),
                               kir::assign("nv", fvar("nv") + fvar("nd") * fvar("nd"))}));
  }
  body.push_back(
      kir::store(rstd, {r}, f32(1.0) / kir::unary(kir::UnOp::Sqrt, fvar("nv") / K_ + f32(eps))));
  std::vector<StmtP> guarded =
      c.mRagged(tl.BM) ? std::vector<StmtP>{kir::ifThen(row < c.Me(), body)} : body;
  std::vector<StmtP> out = {
      kir::comment(cat(norm.name(), " %", y->name().empty() ? cat(y->id()) : y->name(),
                       " folded into A's rows (fusion rule 7): ", layer ? "mean and " : "",
                       "1 / sqrt(", layer ? "var" : "mean square",
                       " + eps) per tile row, A normalised as it is staged")),
      kir::region(t, {kir::forLoop("nr_r", ivar(t), E(tl.BM) - ivar(t), guarded, tl.threads)}),
      kir::barrier()};
  // A reads the normalised rows.
  const Value *gamma = norm.numOperands() > 1 ? norm.operand(1) : nullptr;
  const Value *beta = layer && norm.numOperands() > 2 ? norm.operand(2) : nullptr;
  gx.substitute(y, [&gx, x, xs, gamma, beta, layer](const Index &idx) {
    E v = asF32(gx.at(x, idx));
    v = layer ? (v - fvar("pn_mu")) * fvar("pn_rs") : v * fvar("pn_rs");
    if (gamma)
      v = v * asF32(gx.at(gamma, broadcastIndex(gamma->type().shape, xs, idx)));
    if (beta)
      v = v + asF32(gx.at(beta, broadcastIndex(beta->type().shape, xs, idx)));
    return v;
  });
  auto rowDecls = c.aRowDecls;
  c.aRowDecls = [rowDecls, mean, rstd, m0, layer](E rowAbs) {
    std::vector<StmtP> d = rowDecls ? rowDecls(rowAbs) : std::vector<StmtP>{};
    if (layer)
      d.push_back(kir::decl("pn_mu", DType::F32, kir::load(mean, {rowAbs - m0})));
    d.push_back(kir::decl("pn_rs", DType::F32, kir::load(rstd, {rowAbs - m0})));
    return d;
  };
  return out;
}

std::vector<StmtP> normEpilogueRegions(const Node &norm, const KernelGroup &g, GroupExpr &gx,
                                       const Value *result, const std::string &cur,
                                       std::vector<StmtP> fin, const kir::BufferP &C, E tv,
                                       int64_t TM, int64_t N, const Index &out,
                                       const std::string &t,
                                       const std::function<StmtP(std::vector<StmtP>)> &overTile,
                                       std::vector<kir::BufferP> &allocs) {
  // The norm's input back into the tile, its rows' statistics (two passes: the mean, then the
  // centred sum of squares; rms_norm: the sum of squares), then the normalised rows stored.
  std::vector<StmtP> out1;
  gx.substitute(result, [cur](const Index &) { return fvar(cur); });
  E i = ivar("i"), j = ivar("j");
  fin.push_back(kir::store(C, {tv, i, j}, asF32(gx.at(norm.operand(0), out))));
  out1.push_back(overTile(fin));
  const bool layer = norm.op() == Op::LayerNorm;
  int64_t threads = C->shape[0];
  kir::BufferP mu = tempBuffer("ne_mu", {threads, TM}, kir::Scope::Local);
  kir::BufferP rs = tempBuffer("ne_rs", {threads, TM}, kir::Scope::Local);
  if (layer)
    allocs.push_back(mu);
  allocs.push_back(rs);
  E jj = ivar("nj"), nN = f32(double(N));
  std::vector<StmtP> row;
  if (layer) {
    row.push_back(kir::decl("ns", DType::F32, f32(0.0)));
    row.push_back(vectorLoop("nj", E(int64_t(0)), E(N),
                             {kir::assign("ns", fvar("ns") + kir::load(C, {tv, i, jj}))}));
    row.push_back(kir::decl("nmu", DType::F32, fvar("ns") / nN));
  }
  row.push_back(kir::decl("nv", DType::F32, f32(0.0)));
  row.push_back(vectorLoop(
      "nj", E(int64_t(0)), E(N),
      {kir::decl("nd", DType::F32,
                 layer ? kir::load(C, {tv, i, jj}) - fvar("nmu") : kir::load(C, {tv, i, jj})),
       kir::assign("nv", fvar("nv") + fvar("nd") * fvar("nd"))}));
  if (layer)
    row.push_back(kir::store(mu, {tv, i}, fvar("nmu")));
  row.push_back(
      kir::store(rs, {tv, i},
                 f32(1.0) / kir::unary(kir::UnOp::Sqrt, fvar("nv") / nN + f32(norm.f("epsilon")))));
  out1.push_back(kir::region(t, {kir::forLoop("i", E(int64_t(0)), E(TM), row)}));
  const Value *gamma = norm.numOperands() > 1 ? norm.operand(1) : nullptr;
  const Value *beta = layer && norm.numOperands() > 2 ? norm.operand(2) : nullptr;
  const std::vector<int64_t> &ys = norm.result()->type().shape;
  E y = kir::load(C, {tv, i, j});
  y = layer ? (y - kir::load(mu, {tv, i})) * kir::load(rs, {tv, i}) : y * kir::load(rs, {tv, i});
  if (gamma)
    y = y * asF32(gx.at(gamma, broadcastIndex(gamma->type().shape, ys, out)));
  if (beta)
    y = y + asF32(gx.at(beta, broadcastIndex(beta->type().shape, ys, out)));
  std::vector<StmtP> last = {kir::decl("ny", DType::F32, y)};
  auto stores = storeGroupOutputs(g, gx, norm.result(), fvar("ny"), out);
  last.insert(last.end(), stores.begin(), stores.end());
  out1.push_back(overTile(last));
  return out1;
}

kir::Kernel buildTiled(const KernelGroup &g, const std::string &name, const Knobs &knobs,
                       kir::Kernel k, GroupExpr &gx, Contraction c) {
  const Node &n = *g.anchor;
  const Value *result = n.result();
  requireShapePreservingEpilogue(g, result);
  // A row norm epilogue (lower/fusion.h rule 9) needs whole output rows in one thread's tile:
  // host plans, one column tile.
  const Node *normEpi = g.normEpilogue;
  Knobs kn = knobs;
  if (normEpi) {
    if (isGpuPlan(knobs))
      throw UserError(cat(normEpi->where(), ": ", normEpi->name(),
                          " as an epilogue needs tiles of whole output rows in one thread (host "
                          "plans)"));
    int64_t whole = roundUp(c.N, 16);
    if (kn.get("BN", whole) != whole || kn.get("TN", whole) != whole)
      throw UserError(cat(normEpi->where(), ": ", normEpi->name(),
                          " as an epilogue needs BN = TN = ", whole, " (whole rows)"));
    kn.values["BN"] = kn.values["TN"] = whole;
  }
  const kir::MmaFrag frag = c.bandFill ? kir::MmaFrag::None : tensorFrag(n, knobs);
  Tiles tl = chooseTiles(c, kn, frag);
  k.recipe = "tiled_contraction";
  k.threads = tl.threads;
  auto problem = std::make_shared<ContractionProblem>();
  problem->M = c.M;
  problem->N = c.N;
  problem->K = c.K;
  problem->batch = product(c.batch);
  problem->kAlign = c.kAlign;
  problem->normEpilogue = normEpi != nullptr;
  problem->frag = frag;
  problem->precision = frag == kir::MmaFrag::None ? Precision::F32 : nodePrecision(n);
  problem->band = static_cast<bool>(c.bandFill);
  if (!c.bandGroups.empty()) {
    problem->rowGroup = c.bandGroups[0];
    problem->rowGroups = c.M / c.bandGroups[0];
    problem->bandBytes0 = c.bandBytes0;
    problem->bandRowBytes = c.bandRowBytes;
    problem->bBytes = n.operand(1)->type().bytes();
    if (c.bandBlocks.size() == 6 && c.bandBlocks[5] == 16)
      problem->channelBlockK = c.bandBlocks[3] * c.bandBlocks[4] * 16;
  }
  k.problem = problem;
  k.knobs = {{"BM", tl.BM}, {"BN", tl.BN}, {"BK", tl.BK},
             {"TM", tl.TM}, {"TN", tl.TN}, {"threads", tl.threads}};
  const std::string &t = k.threadVar;
  E tv = ivar(t);
  if (!c.batch.empty())
    k.grid.emplace_back("b", product(c.batch));
  k.grid.emplace_back("mt", ceilDiv(c.M, tl.BM));
  k.grid.emplace_back("nt", ceilDiv(c.N, tl.BN));
  if (c.Msym) {
    for (const auto &[axis, extent] : k.grid)
      k.symGrid.push_back(SymExtent{SymExpr(extent), 1});
    k.symGrid[c.batch.empty() ? 0 : 1] = SymExtent{*c.Msym, tl.BM};
  }
  Index bi = c.batch.empty() ? Index{} : unflat(c.batch, ivar("b"));
  E m0 = ivar("mt") * E(tl.BM), n0 = ivar("nt") * E(tl.BN), k0 = ivar("k0");
  std::vector<kir::BufferP> normAllocs;
  std::vector<StmtP> normPrologue;
  if (const Node *norm = foldedRowNorm(g)) {
    normPrologue = rowNormPrologue(*norm, gx, c, tl, bi, m0, k.threadVar, normAllocs);
    problem->normRows = true;
  }

  // Host tiles of one thread read an operand where it lies when they can (kir.h, mma_tile
  // views): A when its rows are contiguous in k at a fixed row stride, B when it is a weight
  // packed in column panels (passes/pack_weights.cpp) and the tiles cover whole panels. No tile
  // copy is made for such an operand; the other is staged as before.
  std::optional<RowView> aView;
  int64_t aBlock = 0; // A's k blocks of 16 this far apart (aBlockView), when read in place
  std::optional<PanelView> bView;
  std::optional<RowView> bRow;
  kir::BufferP band;
  if (c.bandFill) {
    AICF_CHECK(!isGpuPlan(knobs) && tl.threads == 1 && tl.BK % c.bandBlocks[5] == 0,
               "tiled_contraction: the band form needs a host tile of one thread and BK a "
               "multiple of its k blocks (BK ",
               tl.BK, ", blocks of ", c.bandBlocks[5], ")");
    band = std::make_shared<kir::Buffer>(
        kir::Buffer{"band", DType::F32, c.band, kir::Scope::Shared, kir::Role::Temp, {}});
  }
  // Packed panels serve column tiles of any multiple of 16: a tile may start or end inside a
  // panel (mma_tile's first column; mobilenet_v2's 144-channel expansions: one tile of 144
  // rather than 160, the bias still folded into the init; its 160-channel projections: two of
  // 80 rather than a staged copy of B).
  auto panelTiles = [&](const std::optional<PanelView> &pv) { return pv && tl.BN % 16 == 0; };
  if (!isGpuPlan(knobs) && tl.threads == 1 && band) {
    aView = RowView{band, E(int64_t(0)), c.bandLd};
    bView = bPanelView(c, bi);
    if (!panelTiles(bView))
      bView.reset();
    if (!bView)
      bRow = bRowView(c, bi);
  } else if (!isGpuPlan(knobs) && tl.threads == 1) {
    aView = aRowView(c, bi);
    // A in k blocks of 16 (a blocked conv's input): each K step starts on a block.
    if (!aView && tl.BK % 16 == 0)
      if (std::optional<BlockView> blk = aBlockView(c, bi)) {
        aView = RowView{blk->buf, blk->base, blk->ld};
        aBlock = blk->block;
      }
    bView = bPanelView(c, bi);
    if (!panelTiles(bView))
      bView.reset();
    if (!bView)
      bRow = bRowView(c, bi);
  }
  // A blocked A's B in rows exactly one panel wide (ld = N = 32 or 64: a stem's [147, 64]
  // weight, which pack-weights leaves as it is, its bytes already that panel) is read as the
  // panel: the 7 x 64 micro-kernel on resnet18's 7 x 7 stem, 2.61 -> 2.15 ms (ORT 2.25).
  auto onePanel = [&](const std::optional<RowView> &r) -> std::optional<PanelView> {
    if (!r || (!band && !aBlock) || r->ld != c.N || (c.N != 32 && c.N != 64))
      return std::nullopt;
    return PanelView{r->buf, r->base, c.N, c.K * c.N, c.N};
  };
  if (std::optional<PanelView> pv = onePanel(bRow); pv && tl.BN == c.N) {
    bView = pv;
    bRow.reset();
  }
  problem->aInPlace = aView.has_value();
  problem->bPanels = bView.has_value();
  problem->bStreamed = bView && streamsWeight(*bView, knobs);
  if (!isGpuPlan(knobs) && aView)
    if (std::optional<PanelView> pv = bView ? bView : bPanelView(c, bi))
      problem->bPanelWidth = pv->panel;
  problem->bInPlace = bRow.has_value();

  // Tensor cores read the staged tiles in the precision's type: the staging store rounds (to
  // nearest even), where the operands' rounding happens (tf32 stages f32 and rounds as the
  // fragments load).
  const DType stage = precisionStorage(problem->precision);
  auto As = std::make_shared<kir::Buffer>(
      kir::Buffer{"As", stage, {tl.BM, tl.BK}, kir::Scope::Shared, kir::Role::Temp, {}});
  auto Bs = std::make_shared<kir::Buffer>(
      kir::Buffer{"Bs", stage, {tl.BK, tl.BN}, kir::Scope::Shared, kir::Role::Temp, {}});
  auto C = std::make_shared<kir::Buffer>(kir::Buffer{
      "C", DType::F32, {tl.threads, tl.TM, tl.TN}, kir::Scope::Local, kir::Role::Temp, {}});
  k.allocs = normAllocs;
  if (band)
    k.allocs.push_back(band);
  if (!aView)
    k.allocs.push_back(As);
  if (!bView && !bRow)
    k.allocs.push_back(Bs);
  k.allocs.push_back(C);

  k.body.push_back(
      kir::comment(cat(c.what, ": ", tl.BM, "x", tl.BN, " output tiles, K in steps of ", tl.BK,
                       ", ", tl.TM, "x", tl.TN, " accumulators per thread")));

  // The thread's accumulator element (i, j) sits at output (row, col).
  int64_t colTiles = tl.BN / tl.TN;
  E i = ivar("i"), j = ivar("j");
  E row = frag == kir::MmaFrag::None ? m0 + (tv / E(colTiles)) * E(tl.TM) + i
                                     : m0 + kir::mmaTileRow(frag, tl.BN, tl.TM, tl.TN, tv, i);
  E col = frag == kir::MmaFrag::None ? n0 + (tv % E(colTiles)) * E(tl.TN) + j
                                     : n0 + kir::mmaTileCol(frag, tl.BN, tl.TM, tl.TN, tv, j);
  E inside = allOf({c.mRagged(tl.BM) ? row < c.Me() : E(), c.N % tl.BN ? col < E(c.N) : E(),
                    c.rowValid ? c.rowValid(bi, row) : E()});
  // Tensor-core tiles walk their accumulators in unrolled loops: the fragments' registers are
  // only registers while every index into them is a constant (ptxas otherwise moves C to local
  // memory: 16-byte spills on sm_80).
  const auto accLoop =
      frag == kir::MmaFrag::None ? kir::Stmt::LoopKind::Serial : kir::Stmt::LoopKind::Unrolled;
  auto overTile = [&](std::vector<StmtP> body, bool guarded) {
    std::vector<StmtP> inner =
        guarded && static_cast<bool>(inside) ? std::vector<StmtP>{kir::ifThen(inside, body)} : body;
    return kir::region(
        t, {kir::forLoop("i", E(int64_t(0)), E(tl.TM),
                         {kir::forLoop("j", E(int64_t(0)), E(tl.TN), inner, 1, accLoop)}, 1,
                         accLoop)});
  };

  // Host, a blocked conv: columns walked 16 lanes at a time (q: the channel block), so the
  // output's stores and the bias / residual loads are 16-float vectors.
  bool blockLanes = !isGpuPlan(knobs) && c.outLanes && tl.TN % 16 == 0 && tl.BN % 16 == 0;
  E q = ivar("nt") * E(tl.BN / 16) + (tv % E(colTiles)) * E(tl.TN / 16) + ivar("jo");
  auto overLanes = [&](const std::vector<StmtP> &body, bool guarded) {
    std::vector<StmtP> lane = {
        kir::decl("j", DType::I64, ivar("jo") * E(int64_t(16)) + ivar("jl"))};
    if (guarded && static_cast<bool>(inside))
      lane.push_back(kir::ifThen(inside, body));
    else
      lane.insert(lane.end(), body.begin(), body.end());
    return kir::region(
        t, {kir::forLoop("i", E(int64_t(0)), E(tl.TM),
                         {kir::forLoop("jo", E(int64_t(0)), E(tl.TN / 16),
                                       {kir::forLoop("jl", E(int64_t(0)), E(int64_t(16)), lane, 1,
                                                     kir::Stmt::LoopKind::Vectorized)})})});
  };
  // The output element of the thread's accumulator element (i, j).
  Index out = blockLanes ? c.outLanes(bi, row, q, ivar("jl")) : c.outIndex(bi, row, col);
  // Host: an output stored through a layout op whose 16-column groups land contiguously (a
  // head split's transpose: column h * 64 + d to [.., h, s, d]) walks its columns 16 at a
  // time, the store index computed per group and the lane added, so the store is a vector
  // store rather than a scatter with a division per lane (LLaMA q / k / v projections).
  std::optional<std::vector<IndexExpr>> lanes;
  if (!isGpuPlan(knobs) && !blockLanes && n.op() != Op::Conv && tl.TN % 16 == 0 &&
      tl.BN % 16 == 0 && g.outputs.size() == 1 && !c.outShape.empty() &&
      out.size() == c.outShape.size() && c.outShape.back() == c.N)
    lanes = laneSplitStore(g, g.outputs.front());
  // The init, the additive terms' self-update and the final region all walk the tile the same
  // way (16 lanes at a time or not), so FuseReductionEpilogue can move the terms into the init
  // and FuseMmaTileEpilogue the init and the final region into the mma_tile. Only outputs
  // stored as whole 16-lane groups (a blocked conv's, a head split's) walk by lanes: a
  // row-major GEMM output, stored from the micro-kernel 8 rows x 2 vectors per block instead
  // of row by row, ran slower fused (LLaMA's SwiGLU up-projection 0.49 -> 0.80 ms, GPT-2's MLP
  // GEMMs 5-10%).
  bool byLanes = blockLanes || lanes.has_value();
  problem->fusedTile = byLanes && tl.threads == 1 && (aView || bView || bRow);
  // A conv's transcendental epilogue steps (SiLU, sigmoid, GELU...): ~1 cycle an element each
  // on the host, measured on EfficientNet-B0's 16 -> 96 expansion with SiLU (0.67 ms, 0.30 with
  // relu, 1.2 M outputs) - far beyond their FLOPs at the micro-kernel's rate, which the
  // model otherwise charged (predicted 0.34 ms). Convs only: rule 8 prices a matmul chain's
  // epilogue against the two plain kernels', which would both need it.
  if (n.op() == Op::BlockedConv)
    for (const auto &[step, operand] : c.steps)
      problem->epilogueCycles += isTranscendental(step.op) ? 1.0 : 0.0;
  auto overC = [&](std::vector<StmtP> body, bool guarded) {
    return byLanes ? overLanes(body, guarded) : overTile(std::move(body), guarded);
  };

  // The reduction over K tiles.
  std::vector<StmtP> zero = {kir::store(C, {tv, i, j}, f32(0.0))};
  std::vector<StmtP> init = {overC(zero, false)};
  std::vector<StmtP> update;
  {
    auto aValid = [&](E r, E cc) {
      return allOf({c.mRagged(tl.BM) ? m0 + r < c.Me() : E(), c.K % tl.BK ? k0 + cc < E(c.K) : E(),
                    c.aValid ? c.aValid(bi, m0 + r, k0 + cc) : E()});
    };
    auto bValid = [&](E r, E cc) {
      return allOf({c.K % tl.BK ? k0 + r < E(c.K) : E(), c.N % tl.BN ? n0 + cc < E(c.N) : E(),
                    c.bValid ? c.bValid(bi, k0 + r, n0 + cc) : E()});
    };
    std::vector<StmtP> copies;
    if (!aView)
      copies.push_back(tileCopy(
          As, tl.BM, tl.BK, tl.threads, t, "a",
          [&](E r, E cc) { return c.aAt(bi, m0 + r, k0 + cc); }, aValid,
          c.aRowDecls ? [&](E r) { return c.aRowDecls(m0 + r); }
                      : std::function<std::vector<StmtP>(E)>(),
          c.aKDecls ? [&](E cc) { return c.aKDecls(k0 + cc); }
                    : std::function<std::vector<StmtP>(E)>(),
          static_cast<bool>(c.aKDecls)));
    if (!bView && !bRow)
      copies.push_back(tl.threads == 1 && c.bHostCopy
                           ? c.bHostCopy(bi, k0, n0, Bs)
                           : tileCopy(
                                 Bs, tl.BK, tl.BN, tl.threads, t, "b",
                                 [&](E r, E cc) { return c.bAt(bi, k0 + r, n0 + cc); }, bValid,
                                 c.bRowDecls ? [&](E r) { return c.bRowDecls(k0 + r); }
                                             : std::function<std::vector<StmtP>(E)>(),
                                 c.bColDecls ? [&](E cc) { return c.bColDecls(n0 + cc); }
                                             : std::function<std::vector<StmtP>(E)>()));
    if (!copies.empty()) {
      update.push_back(kir::region(t, copies));
      update.push_back(kir::barrier());
    }
    if (aView || bView || bRow) {
      // A view has no zero padding: the last row, column and K tiles pass their valid extents.
      kir::MmaViews v;
      // (A band of row groups is the tile's own: its first row is the band's start.)
      v.aOffset = !aView                          ? E(int64_t(0))
                  : band && !c.bandGroups.empty() ? aView->base
                  : aBlock || band                ? aView->base + m0 * E(aView->ld)
                                                  : aView->base + m0 * E(aView->ld) + k0;
      v.lda = aView ? aView->ld : tl.BK;
      if (aBlock) { // the K step's first block of 16 lanes
        v.aBlocks = {aBlock, 0, 0, 1, 1, 16};
        v.firstBlock = k0 / E(int64_t(16));
      }
      if (band) {
        v.aBlocks = c.bandBlocks;
        v.aGroups = c.bandGroups;
        v.firstBlock = k0 / E(c.bandBlocks[5]);
      }
      v.bOffset =
          bView  ? bView->base + (n0 / E(bView->panel)) * E(bView->stride) + k0 * E(bView->panel)
          : bRow ? bRow->base + k0 * E(bRow->ld) + n0
                 : E(int64_t(0));
      v.ldb = bView ? 0 : bRow ? bRow->ld : tl.BN;
      v.bPanel = bView ? bView->panel : 0;
      if (bView && tl.BN % bView->panel != 0)
        v.bFirstCol = n0 % E(bView->panel);
      v.bPanelStride = bView ? bView->stride : 0;
      v.bPrefetch = bView && streamsWeight(*bView, knobs);
      v.rows = aView && c.mRagged(tl.BM) ? kir::min(E(tl.BM), c.Me() - m0) : E(tl.BM);
      v.cols = bView && ceilDiv(c.N, tl.BN) * tl.BN > bView->cols
                   ? kir::min(E(tl.BN), E(bView->cols) - n0)
               : bRow && c.N % tl.BN != 0 ? kir::min(E(tl.BN), E(c.N) - n0)
                                          : E(tl.BN);
      v.depth = c.K % tl.BK ? kir::min(E(tl.BK), E(c.K) - k0) : E(tl.BK);
      update.push_back(kir::mmaTileViews(C, aView ? aView->buf : As,
                                         bView  ? bView->buf
                                         : bRow ? bRow->buf
                                                : Bs,
                                         tl.BM, tl.BN, tl.BK, tl.TM, tl.TN, v));
    } else {
      update.push_back(kir::mmaTile(C, As, Bs, tl.BM, tl.BN, tl.BK, tl.TM, tl.TN));
      update.back()->frag = frag;
      update.push_back(kir::barrier());
    }
  }
  if (band)
    k.body.push_back(kir::region(t, {c.bandFill(bi, m0, band)}));
  k.body.insert(k.body.end(), normPrologue.begin(), normPrologue.end());
  k.body.push_back(kir::reduce("k0", E(int64_t(0)), E(c.K), init, update, tl.BK));

  // Additive terms (and alpha) as a self-update of the accumulator, which FuseReductionEpilogue
  // (the driver's Kernel IR pipeline, kir/kir_pass.h) moves into the init.
  bool alphaInFinal = true;
  if (!c.addTerms.empty()) {
    E gsum;
    for (const auto &term : c.addTerms)
      gsum = gsum ? gsum + term(out) : term(out);
    E accv = kir::load(C, {tv, i, j});
    if (c.alpha != 1.0)
      accv = f32(c.alpha) * accv;
    alphaInFinal = false;
    std::vector<StmtP> upd = {kir::store(C, {tv, i, j}, accv + gsum)};
    k.body.push_back(overC(upd, true));
  }

  // The final region: the remaining epilogue steps, the fused elementwise nodes, the stores.
  std::string cur = "acc";
  E accv = kir::load(C, {tv, i, j});
  if (alphaInFinal && c.alpha != 1.0)
    accv = f32(c.alpha) * accv;
  std::vector<StmtP> fin = {kir::decl("acc", DType::F32, accv)};
  auto steps = applySteps(c, gx, out, cur);
  fin.insert(fin.end(), steps.begin(), steps.end());
  std::map<const Value *, std::vector<E>> storeAt;
  if (lanes) {
    Index dims(out.begin(), out.end() - 1);
    dims.push_back(ivar("nt") * E(tl.BN / 16) + (tv % E(colTiles)) * E(tl.TN / 16) + ivar("jo"));
    dims.push_back(ivar("jl"));
    for (const IndexExpr &e : *lanes)
      storeAt[g.outputs.front()].push_back(indexExpr(e, dims));
  }
  if (normEpi) {
    std::vector<StmtP> regions = normEpilogueRegions(
        *normEpi, g, gx, result, cur, fin, C, tv, tl.TM, c.N, out, t,
        [&](std::vector<StmtP> body) { return overC(std::move(body), true); }, k.allocs);
    k.body.insert(k.body.end(), regions.begin(), regions.end());
    return k;
  }
  auto stores = storeGroupOutputs(g, gx, result, fvar(cur), out, "", storeAt);
  fin.insert(fin.end(), stores.begin(), stores.end());
  k.body.push_back(overC(fin, true));
  return k;
}

} // namespace contraction

using namespace contraction;

kir::Kernel recipeTiledContraction(const KernelGroup &g, const std::string &name,
                                   const Knobs &knobs) {
  AICF_CHECK(g.anchor != nullptr, "tiled_contraction needs an anchor (group ", g.id, ")");
  const Node &n = *g.anchor;
  if (n.op() == Op::ConvTranspose || (n.op() == Op::Conv && !denseGroups(n)) ||
      directBlockedConv(n))
    return recipeDirectConv(g, name, knobs);
  std::map<const Value *, kir::BufferP> byValue;
  kir::Kernel k;
  k.name = name;
  k.params = groupParams(g, byValue);
  GroupExpr gx(g, byValue);
  Contraction c;
  switch (n.op()) {
  case Op::MatMul: c = matmulSpec(n, gx, !isGpuPlan(knobs)); break;
  case Op::Gemm: c = gemmSpec(n, gx); break;
  case Op::Conv: c = convSpec(n, gx); break;
  case Op::BlockedConv: c = blockedConvSpec(n, gx, !isGpuPlan(knobs), knobs); break;
  default:
    throw InternalError(cat("tiled_contraction cannot lower ", n.name(), " (", n.where(), ")"));
  }
  return buildTiled(g, name, knobs, std::move(k), gx, c);
}

namespace {

// The padded-plane form's geometry (directConvPlane): recipe_support.h phasePlanes.
PhasePlanes planeGeom(const ConvGeom &geo) {
  return phasePlanes(geo.I, geo.pads, geo.O, geo.Kd, geo.dil, geo.strides[0]);
}

// A direct conv's per-output tail: the accumulated value `acc` at output index `out`, plus the
// bias, through the epilogue steps, stored to the group's outputs (row and plane forms).
std::vector<StmtP> convOutputStores(const KernelGroup &g, GroupExpr &gx, const Node &n,
                                    bool hasBias, E acc, const Index &out) {
  if (hasBias)
    acc = acc + asF32(gx.at(n.operand(2), {out[1]}));
  std::vector<StmtP> fin = {kir::decl("y0", DType::F32, acc)};
  std::string cur = "y0";
  Contraction c;
  c.outShape = n.result()->type().shape;
  splitEpilogue(n, hasBias ? 3 : 2, gx, false, c);
  auto steps = applySteps(c, gx, out, cur);
  fin.insert(fin.end(), steps.begin(), steps.end());
  auto stores = storeGroupOutputs(g, gx, n.result(), fvar(cur), out);
  fin.insert(fin.end(), stores.begin(), stores.end());
  return fin;
}

// The start every host direct-conv form shares: the kernel named, its params (filling
// `byValue`), the fused epilogue checked to keep the conv's shape.
kir::Kernel directConvKernel(const KernelGroup &g, const std::string &name,
                             std::map<const Value *, kir::BufferP> &byValue) {
  requireShapePreservingEpilogue(g, g.anchor->result());
  return startKernel(g, name, "direct_conv", byValue);
}

// Whether a conv's operands include a bias (beyond x, w and the epilogue's extras).
bool convHasBias(const Node &n) {
  return n.numOperands() == 3 + static_cast<size_t>(epilogueOperandCount(n.strs("epilogue")));
}

// Direct conv on the host, one output row (n, oc, o_0 .. o_{S-2}) at a time, `rows` rows per
// block: the row's accumulators live in an [OW] tile; for each input channel of the group, each
// outer tap whose input row exists (one check per row) and each tap kw of the last dim, the
// outputs whose input column lies inside the input form a range known at compile time
// (insideRange), so the innermost loop over ow is branch-free, reads the input at a constant
// stride and vectorises, with the tap's weight a scalar. Each output sums the same taps in the
// same order (cg, outer taps, kw) as the pixel-per-thread form. Then the bias, the epilogue and
// the group's stores, vectorised over the row.
kir::Kernel directConvRows(const KernelGroup &g, const std::string &name, const Knobs &knobs) {
  const Node &n = *g.anchor;
  std::map<const Value *, kir::BufferP> byValue;
  kir::Kernel k = directConvKernel(g, name, byValue);
  GroupExpr gx(g, byValue);
  const Value *x = n.operand(0), *w = n.operand(1);
  ConvGeom geo = convGeom(n);
  bool hasBias = convHasBias(n);
  size_t S = geo.S;
  int64_t Cg = geo.C / geo.G, Mg = geo.M / geo.G;
  int64_t OW = geo.O[S - 1], IW = geo.I[S - 1], KW = geo.Kd[S - 1], sw = geo.strides[S - 1],
          pw = geo.pads[S - 1], dw = geo.dil[S - 1];
  std::vector<int64_t> outer(geo.O.begin(), geo.O.end() - 1);
  int64_t rows = product(outer);
  int64_t R = std::clamp<int64_t>(knobs.get("rows", 1), 1, rows);
  k.threads = 1;
  k.knobs = {{"rows", R}};
  auto problem = std::make_shared<DirectConvProblem>();
  problem->pixels = product(geo.O);
  problem->taps = Cg * product(geo.Kd);
  problem->width = OW;
  problem->kernelTaps = product(geo.Kd);
  problem->stride = sw;
  problem->inputRows = product(geo.I) / IW;
  problem->inputWidth = IW;
  if (S == 2 && geo.strides[0] == geo.strides[1]) { // what the plane form would take
    PhasePlanes pg = planeGeom(geo);
    problem->planeLegal = true;
    problem->plane = pg.F;
    problem->padded = pg.phase;
  }
  k.problem = problem;
  k.grid = {{"n", geo.N}, {"oc", geo.M}, {"rb", ceilDiv(rows, R)}};
  auto acc = std::make_shared<kir::Buffer>(
      kir::Buffer{"acc", DType::F32, {OW}, kir::Scope::Shared, kir::Role::Temp, {}});
  k.allocs = {acc};
  k.body.push_back(kir::comment(cat("conv ", x->type().str(), " * ", w->type().str(), ", group ",
                                    geo.G, ": direct, one output row of ", OW,
                                    " pixels at a time, ", R, " rows per block")));
  E zero(int64_t(0)), nIdx = ivar("n"), oc = ivar("oc"), ow = ivar("ow");
  E grp = Mg == 1 ? oc : oc / E(Mg);
  E ic = grp * E(Cg) + ivar("cg");
  auto vecLoop = [](std::pair<int64_t, int64_t> r, std::vector<StmtP> body) {
    return vectorLoop("ow", E(r.first), E(r.second), std::move(body));
  };
  E row = ivar("rb") * E(R) + ivar("r");
  Index o = unflatIndex(outer, ivar("row"));
  std::vector<StmtP> body = {kir::decl("row", DType::I64, row)};
  body.push_back(vecLoop({0, OW}, {kir::store(acc, {ow}, f32(0.0))}));
  // The taps of the last dim, each over its range.
  Index xin, kOuter;
  for (size_t d = 0; d + 1 < S; ++d) {
    xin.push_back(ivar(cat("pi", d)));
    kOuter.push_back(ivar(cat("k", d)));
  }
  std::vector<StmtP> taps;
  for (int64_t kw = 0; kw < KW; ++kw) {
    auto r = insideRange(OW, sw, kw * dw - pw, IW);
    if (r.second <= r.first)
      continue;
    std::string wn = cat("w", kw);
    taps.push_back(kir::decl(wn, DType::F32,
                             asF32(gx.at(w, concat(concat({oc, ivar("cg")}, kOuter), {E(kw)})))));
    E xv = asF32(gx.at(x, concat(concat({nIdx, ic}, xin), {ow * E(sw) + E(kw * dw - pw)})));
    taps.push_back(vecLoop(r, {kir::store(acc, {ow}, kir::load(acc, {ow}) + xv * fvar(wn))}));
  }
  // The outer taps (k_0 outermost), the input-row check hoisted out of ow; channels outside.
  std::vector<StmtP> loops = taps;
  for (size_t d = S - 1; d-- > 0;) {
    std::string pi = cat("pi", d);
    E c = ivar(pi);
    std::vector<StmtP> level = {
        kir::decl(pi, DType::I64,
                  o[d] * E(geo.strides[d]) - E(geo.pads[d]) + kOuter[d] * E(geo.dil[d])),
        kir::ifThen((c >= zero) && (c < E(geo.I[d])), loops)};
    loops = {kir::forLoop(cat("k", d), zero, E(geo.Kd[d]), level)};
  }
  body.push_back(kir::forLoop("cg", zero, E(Cg), loops));
  // The bias, the epilogue and the stores over the row.
  body.push_back(vecLoop({0, OW}, convOutputStores(g, gx, n, hasBias, kir::load(acc, {ow}),
                                                   concat(concat({nIdx, oc}, o), {ow}))));
  std::vector<StmtP> rowLoop = {kir::forLoop("r", zero, E(R), body)};
  if (rows % R != 0)
    rowLoop = {kir::forLoop("r", zero, E(R), {kir::ifThen(row < E(rows), body)})};
  k.body.push_back(kir::region(k.threadVar, rowLoop));
  return k;
}

} // namespace

bool directBlockedConv(const Node &n) {
  if (n.op() != Op::BlockedConv)
    return false;
  const auto &ks = n.ints("kernel_shape");
  return n.i("depthwise") != 0 ||
         (n.i("blocked_input") == 0 &&
          n.operand(0)->type().shape[1] * ks[0] * ks[1] <= kMaxDirectBlockedTaps);
}

namespace {

// A depthwise blocked_conv on the host (ir/ops.def; passes/block_channels.cpp): block (n, cb,
// rows of R output rows); each output pixel is one 16-lane vector summing its window's taps,
// unrolled. A dense one on a plain input with few taps (kMaxDirectBlockedTaps: a grayscale
// image's 3 x 3 first conv) has the same form over (c, kh, kw), each tap an input scalar
// broadcast against 16 output channels' weights. The taps inside the input depend on the pixel only
// near the borders, so the rows and the columns split into ranges with one tap set each
// (tapRanges), and every range is a branch-free loop whose lane loop is one vector of FMAs (the tap
// weights are loop-invariant vectors, hoisted).
kir::Kernel directConvBlocked(const KernelGroup &g, const std::string &name, const Knobs &knobs) {
  const Node &n = *g.anchor;
  std::map<const Value *, kir::BufferP> byValue;
  kir::Kernel k = directConvKernel(g, name, byValue);
  GroupExpr gx(g, byValue);
  const Value *x = n.operand(0), *w = n.operand(1), *result = n.result();
  bool hasBias = convHasBias(n);
  const auto &xs = x->type().shape, &os = result->type().shape;
  const auto &ks = n.ints("kernel_shape"), &st = n.ints("strides"), &pd = n.ints("pads"),
             &dl = n.ints("dilations");
  int64_t H = xs[2], W = xs[3], OH = os[2], OW = os[3], KH = ks[0], KW = ks[1];
  bool depthwise = n.i("depthwise") != 0;
  int64_t C = depthwise ? 1 : xs[1]; // input channels per output channel
  int64_t R = std::clamp<int64_t>(knobs.get("rows", 1), 1, OH);
  k.threads = 1;
  k.knobs = {{"rows", R}};
  auto problem = std::make_shared<DirectConvProblem>();
  problem->pixels = OH * OW;
  problem->taps = C * KH * KW;
  problem->width = OW;
  problem->kernelTaps = KH * KW;
  problem->stride = st[1];
  problem->inputRows = H;
  problem->inputWidth = W;
  problem->blocked = true;
  k.problem = problem;
  k.grid = {{"n", xs[0]}, {"cb", os[1]}, {"rb", ceilDiv(OH, R)}};
  k.body.push_back(kir::comment(cat(depthwise ? "depthwise conv " : "conv ", x->type().str(), " * ",
                                    w->type().str(), ": one 16-lane vector per pixel, ",
                                    C * KH * KW, " taps unrolled; ", R, " rows per block")));
  E zero(int64_t(0)), nIdx = ivar("n"), cb = ivar("cb"), oh = ivar("oh"), ow = ivar("ow"),
                      l = ivar("l");
  E r0 = ivar("rb") * E(R);
  // A dense form sums its taps in 4 interleaved partial sums (tap t into sum t % 4), so the
  // FMA latency (4 cycles) does not serialise a pixel's C x KH x KW taps: the bundled cnn's
  // 3 x 3 x 3 conv 30 -> 25 us (whole model 48.0 -> 43.9 us). A depthwise pixel has few taps
  // and keeps one sum, in the order the other direct forms fold them.
  int64_t chains = depthwise ? 1 : std::max<int64_t>(1, std::min<int64_t>(4, C * KH * KW / 4));
  auto pixel = [&](const TapRange &rows, const TapRange &cols) {
    std::vector<E> part(static_cast<size_t>(chains));
    int64_t t = 0;
    for (int64_t c = 0; c < C; ++c)
      for (int64_t kh : rows.taps)
        for (int64_t kw : cols.taps) {
          E ih = oh * E(st[0]) + E(kh * dl[0] - pd[0]), iw = ow * E(st[1]) + E(kw * dl[1] - pd[1]);
          E term =
              depthwise
                  ? asF32(gx.at(x, {nIdx, cb, ih, iw, l})) * asF32(gx.at(w, {cb, E(kh), E(kw), l}))
                  : asF32(gx.at(x, {nIdx, E(c), ih, iw})) *
                        asF32(gx.at(w, {E((c * KH + kh) * KW + kw), cb * E(int64_t(16)) + l}));
          E &p = part[static_cast<size_t>(t++ % chains)];
          p = p ? p + term : f32(0.0) + term;
        }
    E acc;
    for (E &p : part)
      if (p)
        acc = acc ? acc + p : p;
    if (!acc)
      acc = f32(0.0);
    if (hasBias)
      acc = acc + asF32(gx.at(n.operand(2), {cb * E(int64_t(16)) + l}));
    std::vector<StmtP> fin = {kir::decl("y0", DType::F32, acc)};
    std::string cur = "y0";
    Contraction c;
    c.outShape = os;
    splitEpilogue(n, hasBias ? 3 : 2, gx, false, c);
    Index out = {nIdx, cb, oh, ow, l};
    auto steps = applySteps(c, gx, out, cur);
    fin.insert(fin.end(), steps.begin(), steps.end());
    auto stores = storeGroupOutputs(g, gx, result, fvar(cur), out);
    fin.insert(fin.end(), stores.begin(), stores.end());
    return fin;
  };
  std::vector<StmtP> body = tapRangeWalk(tapRanges(OH, KH, st[0], dl[0], pd[0], H),
                                         tapRanges(OW, KW, st[1], dl[1], pd[1], W), r0, R, pixel);
  k.body.push_back(kir::region(k.threadVar, body));
  return k;
}

// Direct 2-D conv on the host over a zero-padded copy of each input plane, for narrow rows
// (where the row form's loops are mostly scalar remainders): block (n, oc) copies plane ic into
// stride x stride phase planes (planeGeom; one plane at stride 1) with the pads as zeros, and
// accumulates the output on a grid as wide as a phase plane: output (oh, ow) sits at
// f = oh Wq + ow, and tap (kh, kw) reads phase ((kh dh) % s, (kw dw) % s) at f + ((kh dh) / s)
// Wq + (kw dw) / s for every f at once: one long, unit-stride, branch-free vector loop per tap
// (the grid columns ow >= OW are computed and dropped; the copy is the only strided access).
// Same stride on both axes. Each output sums the taps in the same order as the other forms;
// taps over the padding add x = 0 (so an infinite weight next to the border would give NaN
// where the other forms skip the tap).
kir::Kernel directConvPlane(const KernelGroup &g, const std::string &name) {
  const Node &n = *g.anchor;
  std::map<const Value *, kir::BufferP> byValue;
  kir::Kernel k = directConvKernel(g, name, byValue);
  GroupExpr gx(g, byValue);
  const Value *x = n.operand(0), *w = n.operand(1);
  ConvGeom geo = convGeom(n);
  AICF_CHECK(geo.S == 2 && geo.strides[0] == geo.strides[1], "direct_conv plane form needs a 2-D ",
             "conv with equal strides (", n.where(), ")");
  bool hasBias = convHasBias(n);
  int64_t Cg = geo.C / geo.G, Mg = geo.M / geo.G;
  int64_t IH = geo.I[0], IW = geo.I[1], OH = geo.O[0], OW = geo.O[1], KH = geo.Kd[0],
          KW = geo.Kd[1], dh = geo.dil[0], dw = geo.dil[1], pt = geo.pads[0], pl = geo.pads[1];
  PhasePlanes pg = planeGeom(geo);
  int64_t st = pg.st, Wq = pg.Wq, F = pg.F, phase = pg.phase;
  k.threads = 1;
  k.knobs = {{"plane", 1}};
  auto problem = std::make_shared<DirectConvProblem>();
  problem->pixels = OH * OW;
  problem->taps = Cg * KH * KW;
  problem->width = OW;
  problem->plane = F;
  problem->padded = phase;
  problem->planeLegal = true;
  problem->kernelTaps = KH * KW;
  problem->stride = st;
  problem->inputRows = IH;
  problem->inputWidth = IW;
  k.problem = problem;
  k.grid = {{"n", geo.N}, {"oc", geo.M}};
  auto xp = std::make_shared<kir::Buffer>(
      kir::Buffer{"xp", DType::F32, {st * st * phase}, kir::Scope::Shared, kir::Role::Temp, {}});
  auto acc = std::make_shared<kir::Buffer>(
      kir::Buffer{"acc", DType::F32, {F}, kir::Scope::Shared, kir::Role::Temp, {}});
  k.allocs = {xp, acc};
  k.body.push_back(kir::comment(
      cat("conv ", x->type().str(), " * ", w->type().str(), ", group ", geo.G, ": direct over ",
          st == 1 ? "a padded" : cat(st * st, " phase planes of the padded"), " plane (", pg.Hq,
          "x", Wq, st == 1 ? "" : " each", "), outputs on a ", OH, "x", Wq, " grid")));
  E zero(int64_t(0)), nIdx = ivar("n"), oc = ivar("oc"), f = ivar("f");
  E grp = Mg == 1 ? oc : oc / E(Mg);
  E ic = grp * E(Cg) + ivar("cg");
  std::vector<StmtP> body = {vectorLoop("f", zero, E(F), {kir::store(acc, {f}, f32(0.0))})};
  // Per input channel: the phase planes, then one loop over the grid per tap.
  std::vector<StmtP> chan = fillPhasePlanes(xp, pg, IH, IW, pt, pl, f32(0.0), [&](E ih, E iw) {
    return asF32(gx.at(x, {nIdx, ic, ih, iw}));
  });
  for (int64_t kh = 0; kh < KH; ++kh)
    for (int64_t kw = 0; kw < KW; ++kw) {
      std::string wn = cat("w", kh, "_", kw);
      chan.push_back(kir::decl(wn, DType::F32, asF32(gx.at(w, {oc, ivar("cg"), E(kh), E(kw)}))));
      E xv = kir::load(xp, {f + E(pg.tap(kh * dh, kw * dw))});
      chan.push_back(
          vectorLoop("f", zero, E(F), {kir::store(acc, {f}, kir::load(acc, {f}) + xv * fvar(wn))}));
    }
  body.push_back(kir::forLoop("cg", zero, E(Cg), chan));
  // The bias, the epilogue and the stores, row by row.
  E oh = ivar("oh"), ow = ivar("ow");
  body.push_back(kir::forLoop(
      "oh", zero, E(OH),
      {vectorLoop("ow", zero, E(OW),
                  convOutputStores(g, gx, n, hasBias, kir::load(acc, {oh * E(Wq) + ow}),
                                   {nIdx, oc, oh, ow}))}));
  k.body.push_back(kir::region(k.threadVar, body));
  return k;
}

} // namespace

kir::Kernel recipeDirectConv(const KernelGroup &g, const std::string &name, const Knobs &knobs) {
  AICF_CHECK(g.anchor != nullptr &&
                 (g.anchor->op() == Op::Conv || g.anchor->op() == Op::ConvTranspose ||
                  g.anchor->op() == Op::BlockedConv),
             "direct_conv needs a conv anchor (group ", g.id, ")");
  const Node &n = *g.anchor;
  if (n.op() == Op::BlockedConv)
    return directConvBlocked(g, name, knobs);
  bool transpose = n.op() == Op::ConvTranspose;
  if (!transpose && !isGpuPlan(knobs)) {
    // The plane form where it applies (2-D, equal strides); the row form otherwise.
    const auto &st = n.ints("strides");
    bool planeLegal = st.size() == 2 && st[0] == st[1];
    return knobs.get("plane", 0) != 0 && planeLegal ? directConvPlane(g, name)
                                                    : directConvRows(g, name, knobs);
  }
  std::map<const Value *, kir::BufferP> byValue;
  kir::Kernel k = startKernel(g, name, "direct_conv", byValue);
  GroupExpr gx(g, byValue);
  const Value *x = n.operand(0), *w = n.operand(1), *result = n.result();
  requireShapePreservingEpilogue(g, result);
  ConvGeom geo = convGeom(n);
  size_t extras = transpose ? 0 : static_cast<size_t>(epilogueOperandCount(n.strs("epilogue")));
  bool hasBias = n.numOperands() == 3 + extras;
  int64_t P = product(geo.O);
  int64_t Cg = geo.C / geo.G, Mg = geo.M / geo.G;

  bool gpu = isGpuPlan(knobs);
  int64_t threads = std::max<int64_t>(
      1, knobs.get("threads", gpu ? std::clamp<int64_t>(nextPow2(P), 32, 256) : 1));
  k.threads = threads;
  k.knobs = {{"threads", threads}};
  auto problem = std::make_shared<DirectConvProblem>();
  problem->pixels = P;
  problem->taps = Cg * product(geo.Kd);
  k.problem = problem;
  k.grid = {{"n", geo.N}, {"oc", geo.M}};
  const std::string &t = k.threadVar;
  E nIdx = ivar("n"), oc = ivar("oc"), p = ivar("p");
  E grp = Mg == 1 ? oc : oc / E(Mg);
  k.body.push_back(kir::comment(cat(transpose ? "conv_transpose" : "conv", " ", x->type().str(),
                                    " * ", w->type().str(), ", group ", geo.G,
                                    ": direct, one output channel per block, threads over ", P,
                                    " output pixels")));

  Index o = unflat(geo.O, p);
  // Innermost: the tap's input position and its validity, then acc += x * w.
  Index kk, in;
  std::vector<E> conds;
  for (size_t d = 0; d < geo.S; ++d)
    kk.push_back(ivar(cat("k", d)));
  E ic = grp * E(Cg) + ivar("cg");
  E wv;
  if (!transpose) {
    for (size_t d = 0; d < geo.S; ++d) {
      E pos = o[d] * E(geo.strides[d]) - E(geo.pads[d]) + kk[d] * E(geo.dil[d]);
      in.push_back(pos);
      conds.push_back(pos >= E(int64_t(0)));
      conds.push_back(pos < E(geo.I[d]));
    }
    wv = asF32(gx.at(w, concat({oc, ivar("cg")}, kk)));
  } else {
    // o = i s - pad + k dil  =>  i = (o + pad - k dil) / s when divisible and inside.
    for (size_t d = 0; d < geo.S; ++d) {
      E num = o[d] + E(geo.pads[d]) - kk[d] * E(geo.dil[d]);
      conds.push_back(num >= E(int64_t(0)));
      if (geo.strides[d] != 1)
        conds.push_back(num % E(geo.strides[d]) == E(int64_t(0)));
      conds.push_back(num / E(geo.strides[d]) < E(geo.I[d]));
      in.push_back(num / E(geo.strides[d]));
    }
    E m = Mg == 1 ? E(int64_t(0)) : oc % E(Mg);
    wv = asF32(gx.at(w, concat({ic, m}, kk)));
  }
  StmtP tap =
      kir::ifThen(allOf(conds),
                  {kir::assign("acc", fvar("acc") + asF32(gx.at(x, concat({nIdx, ic}, in))) * wv)});
  StmtP loops = tap;
  for (size_t d = geo.S; d-- > 0;)
    loops = kir::forLoop(cat("k", d), E(int64_t(0)), E(geo.Kd[d]), {loops});
  loops = kir::forLoop("cg", E(int64_t(0)), E(Cg), {loops});

  Index out = concat({nIdx, oc}, o);
  std::vector<StmtP> pix = {kir::decl("acc", DType::F32, f32(0.0)), loops};
  E accv = fvar("acc");
  if (hasBias)
    accv = accv + asF32(gx.at(n.operand(2), {oc}));
  pix.push_back(kir::decl("y0", DType::F32, accv));
  std::string cur = "y0";
  if (!transpose) {
    Contraction c;
    c.outShape = result->type().shape;
    splitEpilogue(n, hasBias ? 3 : 2, gx, false, c);
    auto steps = applySteps(c, gx, out, cur);
    pix.insert(pix.end(), steps.begin(), steps.end());
  }
  auto stores = storeGroupOutputs(g, gx, result, fvar(cur), out);
  pix.insert(pix.end(), stores.begin(), stores.end());
  k.body.push_back(kir::region(t, {kir::forLoop("p", ivar(t), E(P) - ivar(t), pix, threads)}));
  return k;
}

namespace {

// Host cycles per element of a block's A rows for a row norm folded into A, beyond its FLOPs:
// the two statistics passes and the normalising tile copy. Fitted on one core of an AMD EPYC
// (issue 17): the folded GEMMs of the GPT-2, ViT and LLaMA blocks ran 8-13 us slower than
// their plain forms per 64 K elements of block rows (0.35-1.0 cycles per element, ~0.5 mean).
constexpr double kNormRowCycles = 0.5;

// Requires: a matmul, gemm or group-1 conv anchor whose tile_compatible_compute certificate
// holds (partial results accumulate, a tile's working set fits on chip). For matmul and gemm it
// is also the generic lowering (no other recipe lowers them; the planner only keeps tiles that
// fit); a conv whose certificate fails goes to direct_conv. Knobs: ContractionKnobs.
class TiledContractionRecipe final : public Recipe {
public:
  const char *name() const override { return "tiled_contraction"; }
  bool lowers(const Node *a) const override {
    return a && (a->op() == Op::MatMul || a->op() == Op::Gemm ||
                 (a->op() == Op::Conv && denseGroups(*a)) ||
                 (a->op() == Op::BlockedConv && !directBlockedConv(*a)));
  }
  std::optional<MemProperty> requiredProperty() const override {
    return MemProperty::TileCompatibleCompute;
  }
  bool genericFallback() const override { return true; }
  // Symbolic rows of a gemm or matmul (their specs read them; anything else they refuse).
  bool symbolicDims(const KernelGroup &g) const override {
    return g.anchor && (g.anchor->op() == Op::Gemm || g.anchor->op() == Op::MatMul);
  }
  kir::Kernel build(const KernelGroup &g, const std::string &n, const Knobs &k) const override {
    return labelled(recipeTiledContraction(g, n, k), name());
  }
  KnobSet canonicalKnobs(const KnobSet &k) const override {
    return knobsToMap(knobsFromMap<ContractionKnobs>(k));
  }
  std::vector<KnobSet> candidates(const kir::Kernel &d, const Hardware &hw) const override {
    const ContractionProblem &p = problemOf<ContractionProblem>(d);
    int64_t M = p.M, N = p.N, K = p.K;
    std::vector<KnobSet> out;
    if (!hw.gpu) {
      // One thread owns a tile; the micro-kernel packs B panels. Tiles from balanced splits of
      // each dimension: the A block (BM x BK) should live in L2, the B panel in L1 / L2.
      std::set<int64_t> bms, bns, bks;
      if (p.rowGroup) {
        // A band form's tiles are whole output rows: 1, 2, 4, ... rows or the whole image, in
        // balanced tiles, while the band a tile fills stays within half of L2.
        for (int64_t r : {1, 2, 4, 8, 16, 32, 64}) {
          int64_t rows = ceilDiv(p.rowGroups, ceilDiv(p.rowGroups, std::min(r, p.rowGroups)));
          if (rows == 1 || p.bandBytes0 + (rows - 1) * p.bandRowBytes <= hw.l2Bytes / 2)
            bms.insert(rows * p.rowGroup);
        }
      } else {
        for (int64_t t : {32, 64, 128, 256})
          bms.insert(balanced(M, t, 8));
      }
      // Column tiles aligned to 32, and to 16 (the micro-kernel's panel width) where that
      // pads less (N = 196 pixels: one tile of 208 rather than 224).
      // Panels 64 wide (a blocked conv's weight, N a multiple of 64): tiles of whole panels
      // that divide N, so that every block is the 7 x 64 micro-kernel and no tile ends in
      // padding (a ragged column tile guards its epilogue per lane, which GCC leaves scalar:
      // mobilenet_v3's 96 -> 576 convs with hard-swish, 55 us in tiles of 288, 93 in 320 + 256).
      for (int64_t t : {64, 128, 256, 512}) {
        if (p.bPanelWidth == 64) {
          for (int64_t bn = 64; bn <= t; bn += 64)
            if (N % bn == 0)
              bns.insert(bn);
          continue;
        }
        bns.insert(balanced(N, t, N >= 32 ? 32 : 16));
        bns.insert(balanced(N, t, 16));
      }
      // A row norm epilogue: one column tile of whole rows.
      if (p.normEpilogue)
        bns = {roundUp(N, 16)};
      for (int64_t t : {64, 128, 256})
        bks.insert(balanced(K, t, p.kAlign));
      // Operands read in place (mma_tile views) have no tile copy to keep small: the whole K
      // in one step keeps each accumulator block in registers across it.
      if (p.aInPlace && p.bPanels)
        for (int64_t t : {512, 1024})
          bks.insert(balanced(K, t, p.kAlign));
      // A band over a blocked input: k steps of whole input channel blocks (KH KW 16) whose
      // slice of a 64-wide weight panel stays in L1 with the row block's A (costShape).
      if (p.channelBlockK > 0 && p.bPanelWidth == 64)
        for (int64_t bk = p.channelBlockK; bk <= K; bk += p.channelBlockK)
          if (l1Slice(bk, 64, 7, hw))
            bks.insert(bk);
      for (int64_t bm : bms)
        for (int64_t bn : bns)
          for (int64_t bk : bks)
            out.push_back(knobsToMap(ContractionKnobs{bm, bn, bk, bm, bn, std::nullopt}));
      return out;
    }
    // GPU: block tiles of 32..128 (no larger than the padded problem), a register tile TM x TN
    // per thread, 64..256 threads per block.
    auto tiles = [](int64_t d) {
      std::vector<int64_t> t;
      for (int64_t v : {32, 64, 128})
        if (v == 32 || v / 2 < d)
          t.push_back(v);
      return t;
    };
    if (p.frag != kir::MmaFrag::None) {
      // Tensor cores: warp tiles of 8 TM x 4 TN, one to eight warps; K steps of whole
      // instructions.
      int64_t fk = kir::mmaFragK(p.frag);
      for (int64_t bm : tiles(M))
        for (int64_t bn : tiles(N))
          for (int64_t bk : {16, 32, 64})
            for (int64_t tm : {2, 4, 8})
              for (int64_t tn : {2, 4, 8, 16}) {
                if (bk % fk || bk > std::max<int64_t>(16, roundUp(K, 16)) || bm % (8 * tm) ||
                    bn % (4 * tn))
                  continue;
                int64_t threads = (bm / (8 * tm)) * (bn / (4 * tn)) * 32;
                if (threads > 256)
                  continue;
                out.push_back(knobsToMap(ContractionKnobs{bm, bn, bk, tm, tn, std::nullopt}));
              }
      return out;
    }
    for (int64_t bm : tiles(M))
      for (int64_t bn : tiles(N))
        for (int64_t bk : {16, 32})
          for (int64_t tm : {2, 4, 8})
            for (int64_t tn : {2, 4, 8}) {
              if (bk > std::max<int64_t>(16, roundUp(K, 16)) || bm % tm || bn % tn)
                continue;
              int64_t threads = (bm / tm) * (bn / tn);
              if (threads < 64 || threads > 256)
                continue;
              out.push_back(knobsToMap(ContractionKnobs{bm, bn, bk, tm, tn, std::nullopt}));
            }
    return out;
  }
  CostShape costShape(const KernelGroup &, const kir::Kernel &k, const Hardware &hw,
                      int64_t flops) const override {
    CostShape s;
    s.flops = double(flops);
    int64_t lanes = std::max<int64_t>(1, hw.gpu ? 1 : hw.vectorLanesF32());
    const ContractionProblem &p = problemOf<ContractionProblem>(k);
    int64_t M = p.M, N = p.N, K = p.K, B = p.batch;
    int64_t BM = knobOf(k, &ContractionKnobs::BM, 1), BN = knobOf(k, &ContractionKnobs::BN, 1),
            BK = knobOf(k, &ContractionKnobs::BK, 1);
    int64_t TM = knobOf(k, &ContractionKnobs::TM, 1), TN = knobOf(k, &ContractionKnobs::TN, 1);
    double exact = 2.0 * double(B * M * N * K);
    double padded = 2.0 * double(B * roundUp(M, BM) * roundUp(N, BN) * roundUp(K, BK));
    s.flops = double(flops) - exact + padded; // epilogue FLOPs stay as they are
    int64_t kSteps = ceilDiv(K, BK);
    s.serialTiles = kSteps;
    s.rereadSet = tileSet(k);
    // A row norm folded into A: every block reads its BM rows of A twice for their statistics
    // and normalises each element it stages (~3 FLOPs each, beside the product's 2 K per
    // output element).
    double normElems = p.normRows ? double(BM * K) : 0.0; // per block
    s.flops += 6.0 * normElems * double(B * ceilDiv(M, BM) * ceilDiv(N, BN));
    // On a GPU each thread walks its rows' two passes serially before the first tile: about
    // two tile steps' worth of latency (unmeasured: the GPU path has not run on a GPU yet).
    if (hw.gpu && p.normRows)
      s.serialTiles += 2;
    if (hw.gpu && p.frag != kir::MmaFrag::None) {
      // Tensor cores (unmeasured: these kernels have not run on a GPU yet). Per k step a warp
      // loads TM / 2 A fragments (16 x fk) and TN / 2 B fragments (fk x 8) from shared memory
      // and issues (TM / 2)(TN / 2) instructions of 2 * 16 * 8 * fk FLOPs. Shared memory feeds
      // ~128 bytes a cycle an SM, the tensor cores want ~32 FLOPs per such byte at fp16 / bf16
      // (H100: 989 TFLOP/s over 132 SMs at 1.75 GHz), ~16 at tf32; mma.sync reaches ~2/3 of
      // the datasheet peak at best (wgmma, sm_90's full rate, is not used).
      const bool tf32 = p.frag == kir::MmaFrag::M16N8K8;
      const double fk = double(kir::mmaFragK(p.frag)), elem = tf32 ? 4.0 : 2.0;
      const double flops = double(TM / 2) * double(TN / 2) * 2.0 * 16.0 * 8.0 * fk;
      const double bytes = (double(TM / 2) * 16.0 + double(TN / 2) * 8.0) * fk * elem;
      s.tensorFlopsPerSec = tf32 ? hw.tensorTf32FlopsPerSec : hw.tensorF16FlopsPerSec;
      s.vectorShare = 0.65 * std::min(1.0, flops / bytes / (tf32 ? 16.0 : 32.0));
      return s;
    }
    if (hw.gpu) {
      // The accumulator tile stays in registers; FMAs per shared-memory load of the register
      // tile: TM·TN / (TM + TN); four or more keep the FMA pipes fed.
      double perLoad = double(TM * TN) / double(TM + TN);
      s.vectorShare = 0.7 * std::min(1.0, perLoad / 4.0);
      return s;
    }
    // Host, fitted on a sweep of every candidate of the GPT-2 block's four GEMMs on one core
    // (within-kernel rank correlation 0.89-0.97 for this form against 0 before):
    //  * the micro-kernel runs at ~89% of peak, losing ~0.056% per KiB of its working set (the
    //    A tile and one packed B panel, BK x 32) as that set leaves L1;
    //  * each tile gathers and packs its B tile (BK x BN) once per k step: ~0.45 cycles per
    //    element, so B is re-packed once per row of tiles (the dominant knob effect: BM);
    //  * A tile copies are contiguous rows (vectorised): negligible; narrow n tiles (under one
    //    vector) leave lanes idle.
    //  * operands read in place (mma_tile views): A's working set is the micro-kernel's row
    //    block (8 rows), not a staged tile; B in packed panels is not gathered at all.
    //  * every k step re-enters the micro-kernel once per 8 x 32 accumulator block, which loads
    //    that block from the tile (in L2 once the tile outgrows L1), fills its 16 FMA chains
    //    and stores it back: ~100 cycles a call (fitted on GPT-2's c_proj, K = 1024, on one
    //    AMD EPYC core: BK = 64 / 128 / 256 ran 0.63 / 0.61 / 0.60 ms), so short k steps on
    //    large tiles cost what the smaller B panel saves.
    //  * a blocked conv's B in 64-wide panels runs 7 x 64 blocks (28 accumulators) at ~5% more
    //    than the 8 x 32 rate (half the passes over the panel per row of A; resnet18's 64-channel
    //    3 x 3 convs 2.14 -> 2.03 ms).
    bool wide = p.bPanels && p.bPanelWidth == 64 && BN % 64 == 0;
    int64_t blockRows = wide ? 7 : 8, blockCols = wide ? 64 : 32;
    //  * a band's 7 x 64 blocks whose k step is whole input channel blocks with the weight
    //    slice in L1 (l1Slice) run ~9% faster than over a slice from L2: resnet18's 3 x 3 convs
    //    with BK = 144 (one channel block, 36 KB) against 576 / 384 / 768 / 512: layer1 1.38 ->
    //    1.23 ms, layer2 1.44 -> 1.33, layer3 1.48 -> 1.34, layer4 1.65 -> 1.47; BK = 192 (48
    //    KB) 1.33 and 96 / 128 (channel blocks split) 1.29 / 1.52 in layer1 / layer3.
    //    The band rows such a step reads (its channel blocks' share of the tile's band) should
    //    fit in L1 too: layer1 (56 pixels a row) at BK = 144 ran 1.23 ms in tiles of 4 or 8
    //    output rows (22 / 37 KB a step), 1.31 in 14 or 28 (59 / 111 KB); layer3 (14 a row) is
    //    fastest in tiles of 14 rows (16 KB).
    double slice = 1.0;
    if (wide && p.channelBlockK > 0 && p.rowGroup > 0) {
      int64_t R = std::max<int64_t>(1, BM / p.rowGroup);
      double bandStep =
          double(p.bandBytes0 + (R - 1) * p.bandRowBytes) * double(std::min(BK, K)) / double(K);
      bool aligned = BK % p.channelBlockK == 0 && l1Slice(BK, 64, 7, hw);
      slice = !aligned ? 0.91 : bandStep <= double(hw.l1dBytes) ? 1.0 : 0.94;
    }
    // A normalised by a folded row norm is staged one row block ahead of the micro-kernel's
    // use; measured, it runs as A in place does, plus its passes (kNormRowCycles).
    int64_t aRows = p.aInPlace || p.normRows ? blockRows : BM;
    double wsKiB = double(4 * (aRows * BK + BK * 32)) / 1024.0;
    // A tile one vector wide runs the 8 x 1 micro-kernel, ~0.8 of the 8 x 2 one's rate (it
    // loads a broadcast per FMA; mobilenet_v2's 32 -> 16 projection: 150 us, 85 GFLOP/s).
    double narrow = BN >= 2 * lanes ? 1.0 : BN >= lanes ? 0.82 : double(BN) / double(2 * lanes);
    s.vectorShare = (wide ? 0.935 : 0.89) * narrow * slice / (1.0 + 0.00056 * wsKiB);
    double microCalls = double(kSteps * ceilDiv(TM, blockRows) * ceilDiv(TN, blockCols));
    // B read in place (a row view) is only packed by the micro-kernel (memcpy rows): ~0.2.
    double bCopy = p.bPanels ? 0.0 : p.bInPlace ? 0.2 : 0.45;
    s.scalarCycles = bCopy * double(roundUp(K, BK) * BN) + 100.0 * microCalls;
    // The folded norm's passes and its staging copy of A, per element of the block's rows.
    s.scalarCycles += kNormRowCycles * normElems;
    // A row norm epilogue: the norm's input back into the tile, two statistics passes and the
    // normalised store, ~1.5 cycles per element of the tile (unmeasured).
    if (p.normEpilogue)
      s.scalarCycles += 1.5 * double(BM * BN);
    // A fused tile (the init and epilogue on the micro-kernel's registers) touches its C tile
    // only between K steps: each step after the first stores and reloads it, its blocks'
    // accumulators per call, ~0.25 cycles a float of the block's tile. (Once fitted at ~1 cycle
    // a float of the whole output per block, counting each tile once per block; on this
    // project's Xeon squeezenet's 512 -> 1000 classifier conv now runs 1.32 ms in one K step
    // and in four, and resnet18's 3 x 3 convs are fastest in steps of one input channel block,
    // above.)
    if (p.fusedTile)
      s.scalarCycles += double(kSteps - 1) * double(BM * BN) * 0.25;
    s.scalarCycles += p.epilogueCycles * double(BM * BN);
    if (p.rowGroup) {
      // The band form of R = BM / OW output rows per tile (resnet18's 14 x 14 layer3, 2.36 MB
      // of weights: 2.33 ms at R = 1, 2.16 ms at R = 2..14; its 56 x 56 layer1, whose 147 KB
      // of weights stay in L2: 2.10 ms at every R):
      //  * each tile fills its band, ~0.1 cycles per float (vector copies);
      //  * each row of tiles streams the whole weight once; beyond L2 its first pass over each
      //    k step's panel waits on L3, about half of that stream at L3 bandwidth, a quarter
      //    when the panels are prefetched a slice ahead (bStreamed: resnet18's layer4 3 x 3
      //    convs 2.08 -> 1.55 ms, against 1.3 ms with the weight in L2).
      // (Per block, as every scalar term: the tile's band, its BN columns of the weight.)
      int64_t R = std::max<int64_t>(1, BM / p.rowGroup);
      s.scalarCycles += 0.1 * double(p.bandBytes0 + (R - 1) * p.bandRowBytes) / 4.0;
      if (p.bBytes > hw.l2Bytes / 2)
        s.scalarCycles += double(p.bBytes) * double(std::min(BN, N)) / double(N) /
                          ((p.bStreamed ? 4.0 : 2.0) * std::max(1.0, hw.l3BytesPerCycle));
    }
    return s;
  }
  // A is re-read per column of output tiles, B per row of them: an implicit-GEMM conv (rows =
  // output channels, columns = output pixels) re-reads its weights per column tile of pixels
  // and its input per row tile of channels. The grid runs (b, mt, nt) with nt innermost: a row
  // panel of A serves consecutive blocks, a column panel of B every nt-th one, so B stays in
  // the cache between uses only when the whole of it does, beside A's panel.
  Rereads rereads(const KernelGroup &g, const kir::Kernel &k, const Hardware &hw) const override {
    const Node *a = g.anchor;
    const ContractionProblem &p = problemOf<ContractionProblem>(k);
    bool gemm = a && (a->op() == Op::MatMul || a->op() == Op::Gemm || a->op() == Op::BlockedConv);
    if (!gemm && !(a && a->op() == Op::Conv))
      return {};
    // The operand seen as A (rows) and as B (columns): a conv's weight and input.
    int64_t aBytes = a->operand(gemm ? 0 : 1)->type().bytes();
    int64_t bBytes = a->operand(gemm ? 1 : 0)->type().bytes();
    int64_t mt = ceilDiv(p.M, knobOf(k, &ContractionKnobs::BM)),
            nt = ceilDiv(p.N, knobOf(k, &ContractionKnobs::BN));
    int64_t batch = std::max<int64_t>(1, p.batch), blocks = batch * mt * nt, set = tileSet(k);
    // Slices: A's row panels (of every batch entry A holds), B per batch entry it holds.
    auto entries = [&](int64_t bytes, int64_t perEntry) {
      return perEntry > 0 && bytes % perEntry == 0 ? std::clamp<int64_t>(bytes / perEntry, 1, batch)
                                                   : int64_t(1);
    };
    int64_t aSlices = entries(aBytes, 4 * p.M * p.K) * mt;
    int64_t bSlices = entries(bBytes, 4 * p.K * p.N);
    Rereads ra = rereadsOf(hw, aBytes, aSlices, nt, blocks, set);
    Rereads rb = rereadsOf(hw, bBytes, bSlices, mt, blocks, set + aBytes / aSlices, true);
    return {ra.memory + rb.memory, ra.cached + rb.cached};
  }
  // The accumulator tile and its operand fragments.
  int64_t registers(const kir::Kernel &k) const override {
    int64_t tm = knobOf(k, &ContractionKnobs::TM, 1), tn = knobOf(k, &ContractionKnobs::TN, 1);
    return 34 + tm * tn + 2 * (tm + tn);
  }
  double loadsInFlight() const override { return 8.0; }
  // On the host the A block and the B panel must stay in L2.
  std::vector<std::string> hostViolations(const CostShape &s, const Hardware &hw) const override {
    return tileSetViolations(s, hw);
  }

private:
  // The block's tiles: A (BM x BK), B (BK x BN) and the accumulator (BM x BN).
  static int64_t tileSet(const kir::Kernel &k) {
    int64_t BM = knobOf(k, &ContractionKnobs::BM, 1), BN = knobOf(k, &ContractionKnobs::BN, 1),
            BK = knobOf(k, &ContractionKnobs::BK, 1);
    return 4 * (BM * BK + BK * BN + BM * BN);
  }
  // Tile of at most `maxTile` that splits `d` into equal tiles, rounded up to `align` (132 rows
  // with maxTile 128: two tiles of 72, not 128 + 4).
  static int64_t balanced(int64_t d, int64_t maxTile, int64_t align) {
    d = std::max<int64_t>(d, 1);
    return roundUp(ceilDiv(d, ceilDiv(d, maxTile)), align);
  }
};

} // namespace

const Recipe &tiledContractionRecipe() {
  static const TiledContractionRecipe recipe;
  return recipe;
}

} // namespace aicf
