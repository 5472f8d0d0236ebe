// The contraction specs of matmul and gemm (lower/contraction.h): each op as D[b, row, col] =
// sum_k A[b, row, k] B[b, k, col] with its operand reads, epilogue and output index, and the
// epilogue helpers every contraction recipe shares (splitEpilogue, applySteps). The conv specs
// are in contraction_conv_specs.cpp; the tiled kernel built from a spec in
// recipe_tiled_contraction.cpp.
#include "lower/contraction.h"
#include "lower/recipe_support.h"

#include "ir/graph.h"
#include "ir/precision.h"
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
  if (nodePrecision(n) == Precision::I8) // the int8 micro-kernel reads A + x_offset as uint8
    c.aShift = n.i("x_offset");
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
  // was made, and a symbolic batch is lowered only as rows); GPU plans too for a symbolic
  // batch (a ranged BERT layer's projections, [batch, seq, 128] x [128, 128], had no other form).
  bool flatten = host ? c.M < flattenBelow || symBatch || c.Msym : symBatch;
  if (flatten && !aVec && !batch.empty() && product(bBatch) == 1 && aBatch == batch) {
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
  if (nodePrecision(n) == Precision::I8)
    c.aShift = n.i("x_offset");
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

} // namespace contraction

} // namespace aicf
