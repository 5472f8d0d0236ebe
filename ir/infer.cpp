// Type and shape inference for every op in ir/ops.def. Each function validates its operands and
// attributes and returns the result types; problems are reported with ctx.fail("..."), whose
// message the verifier prefixes with the node's location.
#include "ir/epilogue.h"
#include "ir/op_registry.h"
#include "ir/precision.h"
#include "support/checked_math.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <cmath>

namespace aicf {

namespace {

// Shape arithmetic on attribute values (pads, strides, repeats, sizes): any of them can be huge,
// so every sum and product is checked and an overflow fails the node.
int64_t add(const InferCtx &ctx, int64_t a, int64_t b) {
  auto r = checkedAdd(a, b);
  if (!r)
    ctx.fail(cat(ctx.info().name, " result size overflows (", a, " + ", b, ")"));
  return *r;
}
int64_t sub(const InferCtx &ctx, int64_t a, int64_t b) {
  auto r = checkedSub(a, b);
  if (!r)
    ctx.fail(cat(ctx.info().name, " result size overflows (", a, " - ", b, ")"));
  return *r;
}
int64_t mul(const InferCtx &ctx, int64_t a, int64_t b) {
  auto r = checkedMul(a, b);
  if (!r)
    ctx.fail(cat(ctx.info().name, " result size overflows (", a, " * ", b, ")"));
  return *r;
}

std::string typeList(const InferCtx &ctx) {
  std::string s;
  for (size_t k = 0; k < ctx.numOperands(); ++k)
    s += (k ? " and " : "") + ctx.operand(k).str();
  return s;
}

void requireFloat(const InferCtx &ctx, size_t k) {
  if (!isFloat(ctx.operand(k).dtype))
    ctx.fail(cat(ctx.info().name, " needs a floating-point operand, got ", ctx.operand(k).str()));
}

void requireSameDType(const InferCtx &ctx, size_t from, size_t to) {
  for (size_t k = from + 1; k < to && k < ctx.numOperands(); ++k)
    if (ctx.operand(k).dtype != ctx.operand(from).dtype)
      ctx.fail(cat(ctx.info().name, " operand dtypes differ: ", typeList(ctx)));
}

int64_t normAxis(const InferCtx &ctx, int64_t axis, int64_t rank, const char *what = "axis") {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
    ctx.fail(cat(ctx.info().name, " ", what, " ", axis, " is out of range for rank ", rank));
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> broadcastAll(const InferCtx &ctx, size_t from, size_t to) {
  std::vector<int64_t> shape = ctx.operand(from).shape;
  for (size_t k = from + 1; k < to; ++k) {
    auto b = broadcastShapes(shape, ctx.operand(k).shape);
    if (!b)
      ctx.fail(cat(ctx.info().name, " operand shapes ", typeList(ctx), " do not broadcast"));
    shape = *b;
  }
  return shape;
}

// Checks the `epilogue` attribute and its extra operands (from `first` on) against `out`.
void checkEpilogue(const InferCtx &ctx, size_t first, const TensorType &out) {
  const auto &epi = ctx.strs("epilogue");
  for (const std::string &step : epi)
    if (!parseEpilogueStep(step))
      ctx.fail(cat(ctx.info().name, " epilogue step '", step, "' is unknown"));
  size_t need = static_cast<size_t>(epilogueOperandCount(epi));
  if (ctx.numOperands() - first != need)
    ctx.fail(cat(ctx.info().name, " epilogue consumes ", need, " operands, got ",
                 ctx.numOperands() - first));
  for (size_t k = first; k < ctx.numOperands(); ++k) {
    auto b = broadcastShapes(out.shape, ctx.operand(k).shape);
    if (!b || *b != out.shape)
      ctx.fail(cat(ctx.info().name, " epilogue operand ", ctx.operand(k).str(),
                   " does not broadcast to the result ", out.str()));
    if (ctx.operand(k).dtype != out.dtype)
      ctx.fail(cat(ctx.info().name, " epilogue operand ", ctx.operand(k).str(),
                   " has a different dtype than the result ", out.str()));
  }
}

} // namespace

// ---- elementwise ------------------------------------------------------------------------------

std::vector<TensorType> inferUnary(InferCtx &ctx) {
  return {ctx.operand(0)};
}

std::vector<TensorType> inferUnaryFloat(InferCtx &ctx) {
  requireFloat(ctx, 0);
  return {ctx.operand(0)};
}

// softmax / log_softmax: a float operand and an axis within its rank (negative counts from the
// end), so a bad axis is a verifier error, not an interpreter or codegen failure later.
std::vector<TensorType> inferSoftmax(InferCtx &ctx) {
  requireFloat(ctx, 0);
  normAxis(ctx, ctx.i("axis"), ctx.operand(0).rank());
  return {ctx.operand(0)};
}

std::vector<TensorType> inferUnaryBool(InferCtx &ctx) {
  if (ctx.operand(0).dtype != DType::Bool)
    ctx.fail(cat(ctx.info().name, " needs a bool operand, got ", ctx.operand(0).str()));
  return {ctx.operand(0)};
}

std::vector<TensorType> inferCast(InferCtx &ctx) {
  auto to = parseDType(ctx.s("to"));
  if (!to)
    ctx.fail(cat("cast to unknown dtype '", ctx.s("to"), "'"));
  TensorType t = ctx.operand(0);
  t.dtype = *to;
  return {t};
}

std::vector<TensorType> inferBroadcast(InferCtx &ctx) {
  requireSameDType(ctx, 0, ctx.numOperands());
  TensorType t = ctx.operand(0);
  t.shape = broadcastAll(ctx, 0, ctx.numOperands());
  t.dimNames.clear();
  return {t};
}

std::vector<TensorType> inferPow(InferCtx &ctx) {
  // ONNX Pow allows the exponent's dtype to differ; the result has the base's dtype.
  TensorType t = ctx.operand(0);
  t.shape = broadcastAll(ctx, 0, 2);
  t.dimNames.clear();
  return {t};
}

std::vector<TensorType> inferCompare(InferCtx &ctx) {
  requireSameDType(ctx, 0, 2);
  return {TensorType(DType::Bool, broadcastAll(ctx, 0, 2))};
}

std::vector<TensorType> inferLogical(InferCtx &ctx) {
  for (size_t k = 0; k < 2; ++k)
    if (ctx.operand(k).dtype != DType::Bool)
      ctx.fail(cat(ctx.info().name, " needs bool operands, got ", typeList(ctx)));
  return {TensorType(DType::Bool, broadcastAll(ctx, 0, 2))};
}

std::vector<TensorType> inferWhere(InferCtx &ctx) {
  if (ctx.operand(0).dtype != DType::Bool)
    ctx.fail(cat("where condition must be bool, got ", ctx.operand(0).str()));
  if (ctx.operand(1).dtype != ctx.operand(2).dtype)
    ctx.fail(cat("where branches have different dtypes: ", typeList(ctx)));
  return {TensorType(ctx.operand(1).dtype, broadcastAll(ctx, 0, 3))};
}

// ---- contractions -------------------------------------------------------------------------------

void checkPrecisionAttr(const InferCtx &ctx) {
  const std::string &p = ctx.s("precision");
  if (!p.empty() && (!parsePrecision(p) || *parsePrecision(p) == Precision::F32))
    ctx.fail(cat(ctx.info().name, " precision \"", p, "\" is not one of tf32, fp16, bf16, int8"));
}

// A contraction computed in reduced precision (its `precision` attribute, ir/precision.h) may
// read a B stored in the precision's type beside an f32 A: a weight assign-precision converted
// (passes/assign_precision.cpp). The result keeps A's type.
bool mixedPrecisionOperands(const InferCtx &ctx, const TensorType &a, const TensorType &b) {
  std::optional<Precision> p = parsePrecision(ctx.s("precision"));
  return p && a.dtype == DType::F32 && b.dtype == precisionStorage(*p) && b.dtype != a.dtype;
}

// integer_operands is 0 or 1; x_offset is -1 or, with integer_operands, in [0, 255] (ops.def).
void checkIntegerAttrs(const InferCtx &ctx) {
  int64_t io = ctx.i("integer_operands"), off = ctx.i("x_offset");
  if (io != 0 && io != 1)
    ctx.fail(cat(ctx.info().name, " integer_operands must be 0 or 1, got ", io));
  if (off != -1 && (io == 0 || off < 0 || off > 255))
    ctx.fail(cat(ctx.info().name,
                 " x_offset must be -1, or in [0, 255] with integer_operands, "
                 "got ",
                 off));
}

std::vector<TensorType> inferMatMul(InferCtx &ctx) {
  const TensorType &a = ctx.operand(0), &b = ctx.operand(1);
  checkPrecisionAttr(ctx);
  checkIntegerAttrs(ctx);
  if (a.dtype != b.dtype && !mixedPrecisionOperands(ctx, a, b))
    ctx.fail(cat("matmul operand dtypes differ: ", a.str(), " and ", b.str()));
  if (a.rank() < 1 || b.rank() < 1)
    ctx.fail(cat("matmul operands must have rank >= 1, got ", a.str(), " and ", b.str()));
  std::vector<int64_t> as = a.shape, bs = b.shape;
  bool aVec = as.size() == 1, bVec = bs.size() == 1;
  if (aVec)
    as.insert(as.begin(), 1);
  if (bVec)
    bs.push_back(1);
  int64_t k1 = as.back(), k2 = bs[bs.size() - 2];
  if (k1 != k2)
    ctx.fail(cat("matmul operand shapes ", a.str(), " and ", b.str(), " do not contract"));
  std::vector<int64_t> ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  auto batch = broadcastShapes(ab, bb);
  if (!batch)
    ctx.fail(cat("matmul batch dims of ", a.str(), " and ", b.str(), " do not broadcast"));
  std::vector<int64_t> out = *batch;
  if (!aVec)
    out.push_back(as[as.size() - 2]);
  if (!bVec)
    out.push_back(bs.back());
  TensorType t(a.dtype, out);
  checkEpilogue(ctx, 2, t);
  return {t};
}

std::vector<TensorType> inferGemm(InferCtx &ctx) {
  checkPrecisionAttr(ctx);
  checkIntegerAttrs(ctx);
  const TensorType &a = ctx.operand(0), &b = ctx.operand(1);
  if (a.rank() != 2 || b.rank() != 2)
    ctx.fail(cat("gemm operands must be matrices, got ", a.str(), " and ", b.str()));
  if (a.dtype != b.dtype && !mixedPrecisionOperands(ctx, a, b))
    ctx.fail(cat("gemm operand dtypes differ: ", a.str(), " and ", b.str()));
  int64_t m = ctx.i("transA") ? a.shape[1] : a.shape[0];
  int64_t ka = ctx.i("transA") ? a.shape[0] : a.shape[1];
  int64_t kb = ctx.i("transB") ? b.shape[1] : b.shape[0];
  int64_t n = ctx.i("transB") ? b.shape[0] : b.shape[1];
  if (ka != kb)
    ctx.fail(cat("gemm operand shapes ", a.str(), " and ", b.str(), " do not contract"));
  TensorType t(a.dtype, {m, n});
  size_t extras = static_cast<size_t>(epilogueOperandCount(ctx.strs("epilogue")));
  size_t first = 2;
  if (ctx.numOperands() == 3 + extras) {
    auto bc = broadcastShapes(t.shape, ctx.operand(2).shape);
    if (!bc || *bc != t.shape)
      ctx.fail(cat("gemm C operand ", ctx.operand(2).str(), " does not broadcast to ", t.str()));
    first = 3;
  }
  checkEpilogue(ctx, first, t);
  return {t};
}

namespace {
// Spatial output size of a convolution / pooling window.
// (strides and dilations are >= 1, checked before.)
int64_t windowOut(const InferCtx &ctx, int64_t in, int64_t k, int64_t stride, int64_t dil,
                  int64_t padBegin, int64_t padEnd, bool ceilMode) {
  if (k < 1)
    ctx.fail(cat(ctx.info().name, " kernel size ", k, " must be >= 1"));
  int64_t eff = add(ctx, mul(ctx, dil, k - 1), 1);
  int64_t span = sub(ctx, add(ctx, add(ctx, in, padBegin), padEnd), eff);
  if (span < 0)
    return 0;
  int64_t out = (ceilMode ? add(ctx, span, stride - 1) / stride : span / stride) + 1;
  // ceil mode: the last window must start inside the input or the begin padding
  if (ceilMode && (out - 1) * stride >= in + padBegin)
    --out;
  return out;
}

void checkWindowAttrs(const InferCtx &ctx, size_t spatial, bool hasKernelAttr) {
  auto need = [&](const char *name, size_t n) {
    if (ctx.ints(name).size() != n)
      ctx.fail(cat(ctx.info().name, " attribute ", name, " needs ", n, " values, got ",
                   ctx.ints(name).size()));
  };
  if (hasKernelAttr)
    need("kernel_shape", spatial);
  need("strides", spatial);
  need("dilations", spatial);
  need("pads", 2 * spatial);
  for (int64_t s : ctx.ints("strides"))
    if (s < 1)
      ctx.fail(cat(ctx.info().name, " strides must be >= 1"));
  for (int64_t d : ctx.ints("dilations"))
    if (d < 1)
      ctx.fail(cat(ctx.info().name, " dilations must be >= 1"));
}
} // namespace

std::vector<TensorType> inferConv(InferCtx &ctx) {
  checkPrecisionAttr(ctx);
  checkIntegerAttrs(ctx);
  const TensorType &x = ctx.operand(0), &w = ctx.operand(1);
  if (x.rank() < 3 || w.rank() != x.rank())
    ctx.fail(cat("conv needs x [N,C,...] and w [M,C/group,...] of equal rank, got ", x.str(),
                 " and ", w.str()));
  size_t spatial = static_cast<size_t>(x.rank() - 2);
  checkWindowAttrs(ctx, spatial, false);
  int64_t group = ctx.i("group");
  if (group < 1 || x.shape[1] % group != 0 || w.shape[0] % group != 0 ||
      w.shape[1] * group != x.shape[1])
    ctx.fail(cat("conv channels do not match: x ", x.str(), ", w ", w.str(), ", group ", group));
  std::vector<int64_t> out = {x.shape[0], w.shape[0]};
  const auto &st = ctx.ints("strides"), &dl = ctx.ints("dilations"), &pd = ctx.ints("pads");
  for (size_t s = 0; s < spatial; ++s)
    out.push_back(windowOut(ctx, x.shape[2 + s], w.shape[2 + s], st[s], dl[s], pd[s],
                            pd[spatial + s], false));
  TensorType t(x.dtype, out);
  size_t extras = static_cast<size_t>(epilogueOperandCount(ctx.strs("epilogue")));
  size_t first = 2;
  if (ctx.numOperands() == 3 + extras) {
    if (ctx.operand(2).shape != std::vector<int64_t>{w.shape[0]})
      ctx.fail(cat("conv bias must be [", w.shape[0], "], got ", ctx.operand(2).str()));
    first = 3;
  }
  checkEpilogue(ctx, first, t);
  return {t};
}

std::vector<TensorType> inferBlockedConv(InferCtx &ctx) {
  checkIntegerAttrs(ctx);
  const TensorType &x = ctx.operand(0), &w = ctx.operand(1);
  bool blocked = ctx.i("blocked_input") != 0, depthwise = ctx.i("depthwise") != 0;
  if (x.rank() != (blocked ? 5 : 4) || (blocked && x.shape[4] != 16))
    ctx.fail(cat("blocked_conv needs x ", blocked ? "[N, CB, H, W, 16]" : "[N, C, H, W]", ", got ",
                 x.str()));
  checkWindowAttrs(ctx, 2, true);
  const auto &ks = ctx.ints("kernel_shape");
  int64_t taps = mul(ctx, ks[0], ks[1]), outBlocks = 0;
  if (depthwise) {
    if (!blocked || w.shape != std::vector<int64_t>{x.shape[1], ks[0], ks[1], 16})
      ctx.fail(cat("depthwise blocked_conv needs a blocked x and w [CB, KH, KW, 16], got x ",
                   x.str(), ", w ", w.str()));
    outBlocks = x.shape[1];
  } else {
    int64_t G = ctx.i("group");
    if (G < 1 || (G > 1 && !blocked) || x.shape[1] % G != 0)
      ctx.fail(cat("grouped blocked_conv needs a blocked x whose blocks the ", G,
                   " groups divide, got x ", x.str()));
    int64_t K = mul(ctx, mul(ctx, x.shape[1], blocked ? 16 : 1), taps);
    if (w.rank() != 2 || w.shape[0] != K || w.shape[1] % 16 != 0 || w.shape[1] == 0)
      ctx.fail(cat("blocked_conv needs w [", K, ", 16 OCB", G > 1 ? " / group" : "", "], got ",
                   w.str()));
    outBlocks = mul(ctx, w.shape[1] / 16, G);
  }
  std::vector<int64_t> out = {x.shape[0], outBlocks};
  const auto &st = ctx.ints("strides"), &dl = ctx.ints("dilations"), &pd = ctx.ints("pads");
  for (size_t s = 0; s < 2; ++s)
    out.push_back(windowOut(ctx, x.shape[2 + s], ks[s], st[s], dl[s], pd[s], pd[2 + s], false));
  out.push_back(16);
  TensorType t(x.dtype, out);
  size_t extras = static_cast<size_t>(epilogueOperandCount(ctx.strs("epilogue")));
  size_t first = 2;
  if (ctx.numOperands() == 3 + extras) {
    if (ctx.operand(2).shape != std::vector<int64_t>{outBlocks * 16})
      ctx.fail(cat("blocked_conv bias must be [", outBlocks * 16, "], got ", ctx.operand(2).str()));
    first = 3;
  }
  checkEpilogue(ctx, first, t);
  return {t};
}

std::vector<TensorType> inferConvTranspose(InferCtx &ctx) {
  const TensorType &x = ctx.operand(0), &w = ctx.operand(1);
  if (x.rank() < 3 || w.rank() != x.rank())
    ctx.fail(cat("conv_transpose needs x [N,C,...] and w [C,M/group,...], got ", x.str(), " and ",
                 w.str()));
  size_t spatial = static_cast<size_t>(x.rank() - 2);
  checkWindowAttrs(ctx, spatial, false);
  int64_t group = ctx.i("group");
  if (group < 1 || w.shape[0] != x.shape[1])
    ctx.fail(cat("conv_transpose channels do not match: x ", x.str(), ", w ", w.str()));
  const auto &st = ctx.ints("strides"), &dl = ctx.ints("dilations"), &pd = ctx.ints("pads");
  std::vector<int64_t> op = ctx.ints("output_padding");
  if (op.empty())
    op.assign(spatial, 0);
  if (op.size() != spatial)
    ctx.fail("conv_transpose output_padding needs one value per spatial axis");
  std::vector<int64_t> out = {x.shape[0], mul(ctx, w.shape[1], group)};
  for (size_t s = 0; s < spatial; ++s) {
    int64_t span = add(ctx, mul(ctx, st[s], x.shape[2 + s] - 1), op[s]);
    int64_t eff = add(ctx, mul(ctx, w.shape[2 + s] - 1, dl[s]), 1);
    int64_t o = sub(ctx, sub(ctx, add(ctx, span, eff), pd[s]), pd[spatial + s]);
    if (o < 1)
      ctx.fail(
          cat("conv_transpose output size ", o, " along spatial axis ", s, " is not positive"));
    out.push_back(o);
  }
  if (ctx.numOperands() == 3 && ctx.operand(2).shape != std::vector<int64_t>{out[1]})
    ctx.fail(cat("conv_transpose bias must be [", out[1], "], got ", ctx.operand(2).str()));
  return {TensorType(x.dtype, out)};
}

// ---- reductions ---------------------------------------------------------------------------------

std::vector<TensorType> inferReduce(InferCtx &ctx) {
  const TensorType &x = ctx.operand(0);
  std::vector<int64_t> axes = ctx.ints("axes");
  for (size_t k = 0; k < axes.size(); ++k) {
    if (axes[k] < 0 || axes[k] >= x.rank())
      ctx.fail(cat(ctx.info().name, " axis ", axes[k], " is out of range for ", x.str()));
    if (k && axes[k] <= axes[k - 1])
      ctx.fail(cat(ctx.info().name, " axes must be sorted and unique"));
  }
  bool all = axes.empty();
  std::vector<int64_t> out;
  for (int64_t d = 0; d < x.rank(); ++d) {
    bool reduced = all || std::find(axes.begin(), axes.end(), d) != axes.end();
    if (!reduced)
      out.push_back(x.shape[d]);
    else if (ctx.i("keepdims"))
      out.push_back(1);
  }
  return {TensorType(x.dtype, out)};
}

std::vector<TensorType> inferArg(InferCtx &ctx) {
  const TensorType &x = ctx.operand(0);
  int64_t axis = normAxis(ctx, ctx.i("axis"), x.rank());
  std::vector<int64_t> out;
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (d != axis)
      out.push_back(x.shape[d]);
    else if (ctx.i("keepdims"))
      out.push_back(1);
  }
  return {TensorType(DType::I64, out)};
}

std::vector<TensorType> inferTopK(InferCtx &ctx) {
  const TensorType &x = ctx.operand(0);
  if (x.rank() == 0)
    ctx.fail(cat("top_k of a scalar ", x.str()));
  int64_t axis = normAxis(ctx, ctx.i("axis"), x.rank());
  int64_t k = ctx.i("k");
  if (k < 0 || k > x.shape[axis])
    ctx.fail(cat("k = ", k, " is not in [0, ", x.shape[axis], "], the length of axis ", axis,
                 " of ", x.str()));
  if (x.dtype == DType::Bool)
    ctx.fail(cat("top_k of ", x.str(), ": bool has no order"));
  if (ctx.numOperands() == 2) { // k known at run time: its count (set_dim), its expression
    if (ctx.operand(1) != TensorType(DType::I64, {}))
      ctx.fail(cat("top_k run-time k is ", ctx.operand(1).str(), ", not i64[]"));
    if (ctx.strs("sym_k").size() > 1) // (none once bound to the k of one run)
      ctx.fail("top_k sym_k holds one expression");
  }
  std::vector<int64_t> out = x.shape;
  out[axis] = k;
  return {TensorType(x.dtype, out), TensorType(DType::I64, out)};
}

// ---- lengths known only at run time -----------------------------------------------------------
// The planning types: the data dim at its bound (runInfer gives it its symbol).

namespace {
int64_t dataBound(InferCtx &ctx) {
  if (!isSymbolName(ctx.s("dim")))
    ctx.fail(cat(ctx.info().name, " dim '", ctx.s("dim"), "' is not an identifier"));
  int64_t bound = ctx.i("bound");
  if (bound < 0)
    ctx.fail(cat(ctx.info().name, " bound ", bound, " is negative"));
  return bound;
}
} // namespace

std::vector<TensorType> inferNonZero(InferCtx &ctx) {
  const TensorType &x = ctx.operand(0);
  int64_t bound = dataBound(ctx);
  if (x.isStatic() && bound > x.numel())
    ctx.fail(cat("non_zero bound ", bound, " is above the ", x.numel(), " elements of ", x.str()));
  return {TensorType(DType::I64, {x.rank(), bound}), TensorType(DType::I64, {})};
}

std::vector<TensorType> inferSetDim(InferCtx &ctx) {
  const TensorType &v = ctx.operand(0);
  dataBound(ctx);
  if (v.dtype != DType::I64 || !v.isStatic() || v.numel() != 1)
    ctx.fail(cat("set_dim of ", v.str(), ": needs one i64 element"));
  return {TensorType(DType::I64, {})};
}

std::vector<TensorType> inferChoose(InferCtx &ctx) {
  const TensorType &c = ctx.operand(0), &x = ctx.operand(1), &y = ctx.operand(2);
  int64_t bound = dataBound(ctx);
  if (c.dtype != DType::Bool || !c.isStatic() || c.numel() != 1)
    ctx.fail(cat("choose condition ", c.str(), ": needs one bool"));
  if (x.dtype != y.dtype || x.rank() != y.rank() || x.rank() < 1 ||
      !std::equal(x.shape.begin() + 1, x.shape.end(), y.shape.begin() + 1))
    ctx.fail(cat("choose of ", x.str(), " and ", y.str(), ": they may differ in dim 0 only"));
  if (bound < std::max(x.shape[0], y.shape[0]) && x.isStatic() && y.isStatic())
    ctx.fail(cat("choose bound ", bound, " is below the lengths of ", x.str(), " and ", y.str()));
  std::vector<int64_t> out = x.shape;
  out[0] = bound;
  return {TensorType(x.dtype, out), TensorType(DType::I64, {})};
}

std::vector<TensorType> inferNms(InferCtx &ctx) {
  const TensorType &boxes = ctx.operand(0), &scores = ctx.operand(1);
  int64_t bound = dataBound(ctx);
  if (boxes.rank() != 3 || boxes.shape[2] != 4 || !isFloat(boxes.dtype))
    ctx.fail(cat("non_max_suppression boxes ", boxes.str(), ": need float [batch, boxes, 4]"));
  if (scores.rank() != 3 || scores.dtype != boxes.dtype || scores.shape[0] != boxes.shape[0] ||
      scores.shape[2] != boxes.shape[1])
    ctx.fail(cat("non_max_suppression scores ", scores.str(), " do not match boxes ", boxes.str(),
                 ": need [batch, classes, boxes] of the same dtype"));
  if (ctx.i("max_per_class") < 0)
    ctx.fail("non_max_suppression max_per_class is negative");
  if (ctx.i("center_point_box") != 0 && ctx.i("center_point_box") != 1)
    ctx.fail("non_max_suppression center_point_box must be 0 or 1");
  return {TensorType(DType::I64, {bound, 3}), TensorType(DType::I64, {})};
}

std::vector<TensorType> inferUnique(InferCtx &ctx) {
  const TensorType &x = ctx.operand(0);
  int64_t bound = dataBound(ctx);
  if (x.rank() < 1)
    ctx.fail(cat("unique of a scalar ", x.str(), ": needs an axis 0"));
  if (ctx.i("sorted") != 0 && ctx.i("sorted") != 1)
    ctx.fail("unique sorted must be 0 or 1");
  std::vector<int64_t> y = x.shape;
  y[0] = bound;
  return {TensorType(x.dtype, y), TensorType(DType::I64, {bound}),
          TensorType(DType::I64, {x.shape[0]}), TensorType(DType::I64, {bound}),
          TensorType(DType::I64, {})};
}

// ---- normalisations -----------------------------------------------------------------------------

std::vector<TensorType> inferNorm(InferCtx &ctx) {
  requireFloat(ctx, 0);
  const TensorType &x = ctx.operand(0);
  int64_t axis = normAxis(ctx, ctx.i("axis"), x.rank());
  std::vector<int64_t> normShape(x.shape.begin() + axis, x.shape.end());
  for (size_t k = 1; k < ctx.numOperands(); ++k) {
    const TensorType &p = ctx.operand(k);
    auto b = broadcastShapes(normShape, p.shape);
    if (!b || *b != normShape || p.dtype != x.dtype)
      ctx.fail(cat(ctx.info().name, " parameter ", p.str(), " does not match the normalised shape ",
                   TensorType(x.dtype, normShape).str()));
  }
  if (ctx.f("epsilon") < 0)
    ctx.fail(cat(ctx.info().name, " epsilon must be >= 0"));
  return {x};
}

// mean_variance_norm: a float operand, axes as for reductions (sorted, unique, in range).
std::vector<TensorType> inferMeanVarianceNorm(InferCtx &ctx) {
  requireFloat(ctx, 0);
  const TensorType &x = ctx.operand(0);
  const std::vector<int64_t> &axes = ctx.ints("axes");
  for (size_t k = 0; k < axes.size(); ++k) {
    if (axes[k] < 0 || axes[k] >= x.rank())
      ctx.fail(cat(ctx.info().name, " axis ", axes[k], " is out of range for ", x.str()));
    if (k && axes[k] <= axes[k - 1])
      ctx.fail(cat(ctx.info().name, " axes must be sorted and unique"));
  }
  if (ctx.f("epsilon") < 0)
    ctx.fail(cat(ctx.info().name, " epsilon must be >= 0"));
  return {x};
}

std::vector<TensorType> inferBatchNorm(InferCtx &ctx) {
  requireFloat(ctx, 0);
  const TensorType &x = ctx.operand(0);
  if (x.rank() < 2)
    ctx.fail(cat(ctx.info().name, " needs x [N,C,...], got ", x.str()));
  for (size_t k = 1; k < ctx.numOperands(); ++k)
    if (ctx.operand(k).shape != std::vector<int64_t>{x.shape[1]})
      ctx.fail(
          cat(ctx.info().name, " parameter ", ctx.operand(k).str(), " must be [", x.shape[1], "]"));
  return {x};
}

std::vector<TensorType> inferAttention(InferCtx &ctx) {
  checkPrecisionAttr(ctx);
  const TensorType &q = ctx.operand(0), &k = ctx.operand(1), &v = ctx.operand(2);
  requireFloat(ctx, 0);
  if (q.rank() < 2 || k.rank() != q.rank() || v.rank() != q.rank())
    ctx.fail(cat("attention needs q, k, v of equal rank >= 2, got ", q.str(), ", ", k.str(), ", ",
                 v.str()));
  if (q.dtype != k.dtype || q.dtype != v.dtype)
    ctx.fail(cat("attention operand dtypes differ: ", q.str(), ", ", k.str(), ", ", v.str()));
  int64_t r = q.rank();
  if (q.shape[r - 1] != k.shape[r - 1])
    ctx.fail(cat("attention q and k head sizes differ: ", q.str(), " and ", k.str()));
  if (k.shape[r - 2] != v.shape[r - 2])
    ctx.fail(cat("attention k and v lengths differ: ", k.str(), " and ", v.str()));
  std::vector<int64_t> qb(q.shape.begin(), q.shape.end() - 2);
  std::vector<int64_t> kb(k.shape.begin(), k.shape.end() - 2);
  std::vector<int64_t> vb(v.shape.begin(), v.shape.end() - 2);
  if (qb != kb || qb != vb)
    ctx.fail(cat("attention batch dims differ: ", q.str(), ", ", k.str(), ", ", v.str()));
  std::vector<int64_t> scores = qb;
  scores.push_back(q.shape[r - 2]);
  scores.push_back(k.shape[r - 2]);
  if (ctx.numOperands() == 4) {
    const TensorType &m = ctx.operand(3);
    auto b = broadcastShapes(scores, m.shape);
    if (!b || *b != scores)
      ctx.fail(cat("attention mask ", m.str(), " does not broadcast to the scores ",
                   TensorType(q.dtype, scores).str()));
    if (m.dtype != DType::Bool && m.dtype != q.dtype)
      ctx.fail(cat("attention mask must be bool or ", dtypeName(q.dtype), ", got ", m.str()));
  }
  std::vector<int64_t> out = qb;
  out.push_back(q.shape[r - 2]);
  out.push_back(v.shape[r - 1]);
  return {TensorType(q.dtype, out)};
}

// ---- pooling ------------------------------------------------------------------------------------

namespace {

std::vector<int64_t> poolShape(InferCtx &ctx, bool blocked) {
  const TensorType &x = ctx.operand(0);
  if (x.rank() < (blocked ? 4 : 3) || (blocked && x.shape.back() != 16))
    ctx.fail(cat(ctx.info().name, " needs x ", blocked ? "[N,CB,...,16]" : "[N,C,...]", ", got ",
                 x.str()));
  size_t spatial = static_cast<size_t>(x.rank() - (blocked ? 3 : 2));
  checkWindowAttrs(ctx, spatial, true);
  const auto &ks = ctx.ints("kernel_shape"), &st = ctx.ints("strides"), &dl = ctx.ints("dilations"),
             &pd = ctx.ints("pads");
  std::vector<int64_t> out = {x.shape[0], x.shape[1]};
  for (size_t s = 0; s < spatial; ++s)
    out.push_back(windowOut(ctx, x.shape[2 + s], ks[s], st[s], dl[s], pd[s], pd[spatial + s],
                            ctx.i("ceil_mode") != 0));
  if (blocked)
    out.push_back(16);
  return out;
}

} // namespace

std::vector<TensorType> inferPool(InferCtx &ctx) {
  return {TensorType(ctx.operand(0).dtype, poolShape(ctx, ctx.i("blocked") != 0))};
}

std::vector<TensorType> inferPoolIndices(InferCtx &ctx) {
  int64_t order = ctx.i("storage_order");
  if (order != 0 && order != 1)
    ctx.fail(cat(ctx.info().name, " storage_order must be 0 or 1, got ", order));
  return {TensorType(DType::I64, poolShape(ctx, false))};
}

std::vector<TensorType> inferGlobalPool(InferCtx &ctx) {
  const TensorType &x = ctx.operand(0);
  if (x.rank() < 3)
    ctx.fail(cat(ctx.info().name, " needs x [N,C,...], got ", x.str()));
  std::vector<int64_t> out = {x.shape[0], x.shape[1]};
  out.resize(static_cast<size_t>(x.rank()), 1);
  return {TensorType(x.dtype, out)};
}

// ---- data movement ------------------------------------------------------------------------------

std::vector<TensorType> inferReshape(InferCtx &ctx) {
  const TensorType &x = ctx.operand(0);
  const auto &shape = ctx.ints("shape");
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      ctx.fail(cat("reshape target ", shapeStr(shape), " must be fully static"));
    n = mul(ctx, n, d);
  }
  if (x.isStatic() && n != x.numel())
    ctx.fail(cat("reshape of ", x.str(), " (", x.numel(), " elements) to ", shapeStr(shape), " (",
                 n, " elements)"));
  return {TensorType(x.dtype, shape)};
}

std::vector<TensorType> inferTranspose(InferCtx &ctx) {
  const TensorType &x = ctx.operand(0);
  const auto &perm = ctx.ints("perm");
  if (static_cast<int64_t>(perm.size()) != x.rank())
    ctx.fail(cat("transpose perm ", shapeStr(perm), " does not match rank of ", x.str()));
  std::vector<bool> seen(perm.size(), false);
  std::vector<int64_t> out;
  for (int64_t p : perm) {
    if (p < 0 || p >= x.rank() || seen[p])
      ctx.fail(cat("transpose perm ", shapeStr(perm), " is not a permutation"));
    seen[p] = true;
    out.push_back(x.shape[p]);
  }
  return {TensorType(x.dtype, out)};
}

std::vector<TensorType> inferConcat(InferCtx &ctx) {
  const TensorType &x = ctx.operand(0);
  if (x.rank() == 0)
    ctx.fail(cat("concat operands must have rank >= 1, got ", x.str()));
  int64_t axis = normAxis(ctx, ctx.i("axis"), x.rank());
  std::vector<int64_t> out = x.shape;
  for (size_t k = 1; k < ctx.numOperands(); ++k) {
    const TensorType &y = ctx.operand(k);
    if (y.dtype != x.dtype || y.rank() != x.rank())
      ctx.fail(cat("concat operands differ: ", x.str(), " and ", y.str()));
    for (int64_t d = 0; d < x.rank(); ++d)
      if (d != axis && y.shape[d] != x.shape[d])
        ctx.fail(cat("concat operands ", x.str(), " and ", y.str(), " differ off axis ", axis));
    out[axis] = add(ctx, out[axis], y.shape[axis]);
  }
  return {TensorType(x.dtype, out)};
}

std::vector<TensorType> inferSplit(InferCtx &ctx) {
  const TensorType &x = ctx.operand(0);
  if (x.rank() == 0)
    ctx.fail(cat("split operand must have rank >= 1, got ", x.str()));
  int64_t axis = normAxis(ctx, ctx.i("axis"), x.rank());
  const auto &sizes = ctx.ints("sizes");
  if (ctx.numResults() >= 0 && static_cast<int>(sizes.size()) != ctx.numResults())
    ctx.fail(cat("split has ", ctx.numResults(), " results but ", sizes.size(), " sizes"));
  int64_t total = 0;
  std::vector<TensorType> out;
  for (int64_t s : sizes) {
    if (s < 0)
      ctx.fail("split sizes must be >= 0");
    total = add(ctx, total, s);
    TensorType t = x;
    t.shape[axis] = s;
    out.push_back(t);
  }
  if (total != x.shape[axis])
    ctx.fail(cat("split sizes ", shapeStr(sizes), " do not add up to ", x.shape[axis]));
  return out;
}

std::vector<TensorType> inferSlice(InferCtx &ctx) {
  const TensorType &x = ctx.operand(0);
  const auto &starts = ctx.ints("starts"), &ends = ctx.ints("ends"), &axes = ctx.ints("axes"),
             &steps = ctx.ints("steps");
  if (starts.size() != axes.size() || ends.size() != axes.size() || steps.size() != axes.size())
    ctx.fail("slice starts, ends, axes and steps must have the same length");
  std::vector<int64_t> out = x.shape;
  std::vector<bool> seen(static_cast<size_t>(x.rank()), false);
  for (size_t k = 0; k < axes.size(); ++k) {
    int64_t a = axes[k];
    if (a < 0 || a >= x.rank() || seen[a])
      ctx.fail(cat("slice axis ", a, " is invalid for ", x.str()));
    seen[a] = true;
    int64_t dim = x.shape[a], s = starts[k], e = ends[k], st = steps[k];
    if (st == 0)
      ctx.fail("slice step must not be 0");
    if (st > 0) {
      if (s < 0 || s > dim || e < 0 || e > dim)
        ctx.fail(cat("slice bounds [", s, ", ", e, ") out of range for dim ", dim));
      out[a] = e > s ? (e - s - 1) / st + 1 : 0;
    } else {
      if (s < -1 || s >= dim || e < -1 || e >= dim)
        ctx.fail(cat("slice bounds [", s, ", ", e, ") out of range for dim ", dim));
      int64_t mag = st == INT64_MIN ? INT64_MAX : -st; // -INT64_MIN overflows
      out[a] = s > e ? (s - e - 1) / mag + 1 : 0;
    }
  }
  return {TensorType(x.dtype, out)};
}

std::vector<TensorType> inferGather(InferCtx &ctx) {
  const TensorType &x = ctx.operand(0), &idx = ctx.operand(1);
  if (idx.dtype != DType::I64 && idx.dtype != DType::I32)
    ctx.fail(cat("gather indices must be i64 or i32, got ", idx.str()));
  if (x.rank() == 0)
    ctx.fail(cat("gather data must have rank >= 1, got ", x.str()));
  int64_t axis = normAxis(ctx, ctx.i("axis"), x.rank());
  std::vector<int64_t> out(x.shape.begin(), x.shape.begin() + axis);
  out.insert(out.end(), idx.shape.begin(), idx.shape.end());
  out.insert(out.end(), x.shape.begin() + axis + 1, x.shape.end());
  return {TensorType(x.dtype, out)};
}

namespace {

void requireIndices(const InferCtx &ctx, const TensorType &idx) {
  if (idx.dtype != DType::I64 && idx.dtype != DType::I32)
    ctx.fail(cat(ctx.info().name, " indices must be i64 or i32, got ", idx.str()));
}

void checkReduction(const InferCtx &ctx) {
  const std::string &r = ctx.s("reduction");
  if (r != "none" && r != "add" && r != "mul" && r != "max" && r != "min")
    ctx.fail(cat(ctx.info().name, " reduction '", r, "' is not none, add, mul, max or min"));
}

} // namespace

std::vector<TensorType> inferGatherElements(InferCtx &ctx) {
  const TensorType &x = ctx.operand(0), &idx = ctx.operand(1);
  requireIndices(ctx, idx);
  if (x.rank() == 0 || idx.rank() != x.rank())
    ctx.fail(cat("gather_elements data ", x.str(), " and indices ", idx.str(),
                 " must have the same rank >= 1"));
  normAxis(ctx, ctx.i("axis"), x.rank());
  return {TensorType(x.dtype, idx.shape)};
}

std::vector<TensorType> inferGatherND(InferCtx &ctx) {
  const TensorType &x = ctx.operand(0), &idx = ctx.operand(1);
  requireIndices(ctx, idx);
  int64_t b = ctx.i("batch_dims");
  if (x.rank() == 0 || idx.rank() == 0)
    ctx.fail(cat("gather_nd data ", x.str(), " and indices ", idx.str(), " need rank >= 1"));
  if (b < 0 || b >= std::min(x.rank(), idx.rank()))
    ctx.fail(cat("gather_nd batch_dims ", b, " must be in [0, ", std::min(x.rank(), idx.rank()),
                 ") for data ", x.str(), " and indices ", idx.str()));
  int64_t k = idx.shape.back();
  if (k < 1 || b + k > x.rank())
    ctx.fail(cat("gather_nd index tuples of length ", k, " (the last dim of indices ", idx.str(),
                 ") must be in [1, ", x.rank() - b, "] for data ", x.str(), " and batch_dims ", b));
  for (int64_t d = 0; d < b; ++d)
    if (x.shape[d] != idx.shape[d])
      ctx.fail(cat("gather_nd batch dim ", d, " differs: data ", x.str(), ", indices ", idx.str()));
  std::vector<int64_t> out(idx.shape.begin(), idx.shape.end() - 1);
  out.insert(out.end(), x.shape.begin() + b + k, x.shape.end());
  return {TensorType(x.dtype, out)};
}

std::vector<TensorType> inferScatterElements(InferCtx &ctx) {
  const TensorType &x = ctx.operand(0), &idx = ctx.operand(1), &upd = ctx.operand(2);
  requireIndices(ctx, idx);
  if (x.rank() == 0 || idx.rank() != x.rank())
    ctx.fail(cat("scatter_elements data ", x.str(), " and indices ", idx.str(),
                 " must have the same rank >= 1"));
  if (upd.dtype != x.dtype || upd.shape != idx.shape)
    ctx.fail(cat("scatter_elements updates ", upd.str(), " must have the indices' shape ",
                 shapeStr(idx.shape), " and the data's dtype ", dtypeName(x.dtype)));
  int64_t axis = normAxis(ctx, ctx.i("axis"), x.rank());
  for (int64_t d = 0; d < x.rank(); ++d)
    if (d != axis && idx.shape[d] > x.shape[d])
      ctx.fail(
          cat("scatter_elements indices ", idx.str(), " exceed data ", x.str(), " on axis ", d));
  checkReduction(ctx);
  return {x};
}

std::vector<TensorType> inferScatterND(InferCtx &ctx) {
  const TensorType &x = ctx.operand(0), &idx = ctx.operand(1), &upd = ctx.operand(2);
  requireIndices(ctx, idx);
  if (x.rank() == 0 || idx.rank() == 0)
    ctx.fail(cat("scatter_nd data ", x.str(), " and indices ", idx.str(), " need rank >= 1"));
  int64_t k = idx.shape.back();
  if (k < 1 || k > x.rank())
    ctx.fail(cat("scatter_nd index tuples of length ", k, " (the last dim of indices ", idx.str(),
                 ") must be in [1, ", x.rank(), "] for data ", x.str()));
  std::vector<int64_t> want(idx.shape.begin(), idx.shape.end() - 1);
  want.insert(want.end(), x.shape.begin() + k, x.shape.end());
  if (upd.dtype != x.dtype || upd.shape != want)
    ctx.fail(cat("scatter_nd updates ", upd.str(), " must be ", dtypeName(x.dtype), shapeStr(want),
                 " for data ", x.str(), " and indices ", idx.str()));
  checkReduction(ctx);
  return {x};
}

std::vector<TensorType> inferExpand(InferCtx &ctx) {
  const TensorType &x = ctx.operand(0);
  auto b = broadcastShapes(x.shape, ctx.ints("shape"));
  if (!b)
    ctx.fail(
        cat("expand of ", x.str(), " to ", shapeStr(ctx.ints("shape")), " does not broadcast"));
  return {TensorType(x.dtype, *b)};
}

std::vector<TensorType> inferTile(InferCtx &ctx) {
  const TensorType &x = ctx.operand(0);
  const auto &rep = ctx.ints("repeats");
  if (static_cast<int64_t>(rep.size()) != x.rank())
    ctx.fail(cat("tile repeats ", shapeStr(rep), " do not match rank of ", x.str()));
  std::vector<int64_t> out = x.shape;
  for (size_t d = 0; d < out.size(); ++d) {
    if (rep[d] < 0)
      ctx.fail("tile repeats must be >= 0");
    out[d] = mul(ctx, out[d], rep[d]);
  }
  return {TensorType(x.dtype, out)};
}

std::vector<TensorType> inferPad(InferCtx &ctx) {
  const TensorType &x = ctx.operand(0);
  const auto &pads = ctx.ints("pads");
  if (static_cast<int64_t>(pads.size()) != 2 * x.rank())
    ctx.fail(cat("pad needs ", 2 * x.rank(), " pads for ", x.str(), ", got ", pads.size()));
  const std::string &mode = ctx.s("mode");
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    ctx.fail(cat("pad mode '", mode, "' is not constant, reflect or edge"));
  std::vector<int64_t> out = x.shape;
  for (int64_t d = 0; d < x.rank(); ++d) {
    out[d] = add(ctx, out[d], add(ctx, pads[d], pads[x.rank() + d]));
    if (out[d] < 0)
      ctx.fail(cat("pad crops axis ", d, " of ", x.str(), " below zero"));
  }
  return {TensorType(x.dtype, out)};
}

std::vector<TensorType> inferResize(InferCtx &ctx) {
  const TensorType &x = ctx.operand(0);
  const auto &sizes = ctx.ints("sizes");
  const auto &scales = ctx.floats("scales");
  if (static_cast<int64_t>(sizes.size()) != x.rank() ||
      static_cast<int64_t>(scales.size()) != x.rank())
    ctx.fail(cat("resize sizes and scales need one value per axis of ", x.str()));
  const std::string &mode = ctx.s("mode");
  if (mode != "nearest" && mode != "linear" && mode != "cubic")
    ctx.fail(cat("resize mode '", mode, "' is not nearest, linear or cubic"));
  const auto &roi = ctx.floats("roi");
  bool crop = ctx.s("coordinate_transformation_mode") == "tf_crop_and_resize";
  if (crop ? static_cast<int64_t>(roi.size()) != 2 * x.rank() : !roi.empty())
    ctx.fail(cat("resize roi needs ", crop ? "2 values per axis" : "tf_crop_and_resize", ", got ",
                 roi.size(), " values"));
  return {TensorType(x.dtype, sizes)};
}

// Loop: the carried values keep their types (the verifier checks the body against them).
// fail: the type its attributes give (the other branch's output type), static at the planning
// point; its symbolic dims come from sym_shape (infer_sym.cpp).
std::vector<TensorType> inferFail(InferCtx &ctx) {
  auto dt = parseDType(ctx.s("dtype"));
  if (!dt)
    ctx.fail(cat("fail of unknown dtype '", ctx.s("dtype"), "'"));
  const auto &shape = ctx.ints("shape");
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      ctx.fail(cat("fail shape ", shapeStr(shape), " must be fully static"));
    n = mul(ctx, n, d);
  }
  return {TensorType(*dt, shape)};
}

std::vector<TensorType> inferLoop(InferCtx &ctx) {
  int carried = ctx.numResults();
  if (carried < 0 || static_cast<size_t>(2 + carried) > ctx.numOperands())
    ctx.fail(cat("loop has ", ctx.numOperands(), " operands for ", carried, " carried values"));
  const TensorType &trip = ctx.operand(0), &cond = ctx.operand(1);
  if (trip != TensorType(DType::I64, {}))
    ctx.fail(cat("loop trip count is ", trip.str(), ", not i64[]"));
  if (cond != TensorType(DType::Bool, {}))
    ctx.fail(cat("loop condition is ", cond.str(), ", not bool[]"));
  std::vector<TensorType> out;
  for (int k = 0; k < carried; ++k)
    out.push_back(ctx.operand(static_cast<size_t>(2 + k)));
  return out;
}

} // namespace aicf
