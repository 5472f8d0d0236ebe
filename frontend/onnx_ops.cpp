// The ONNX op mapping table: one entry per ONNX op type, each a converter from one NodeProto to
// registry ops (ir/ops.def). Our IR is static-shaped and takes compile-time parameters as
// attributes, so converters read ONNX's parameter inputs (Reshape's shape, Slice's starts, ...)
// as constants, resolve ONNX conventions (0 / -1 in shapes, negative axes, auto_pad, clamped
// slice bounds) and emit fully explicit attributes. Version-specific semantics are handled in
// the converter, keyed on ctx.opset(): attribute-vs-input forms (Squeeze/Unsqueeze/Split/Reduce
// axes, Slice-1 vs 10, Clip-6 vs 11, Pad-2 vs 11), Upsample vs Resize, BatchNormalization, ...
// With dims compiled for a range (issue 21) a shape may be a list of expressions in the dims:
// the shape-reading converters (Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze, Expand,
// ConstantOfShape, Slice, Gather, Range, Trilu, Dropout) then resolve the same conventions over
// expressions, exactly for every value in the ranges or not at all; the others keep their
// static code, and what they would fix at the planning point is refused by the symbolic shape
// rules or by the importer's second ONNX inference (onnx_importer.cpp).
//
// The converters live by op family in onnx_ops_<family>.cpp (elementwise, nn, reduce,
// movement, shape, constants), declared in onnx_ops_internal.h; this file holds the helpers
// they share and the table, at the bottom, alphabetical.
#include "frontend/onnx_ops_internal.h"

#include "ir/infer_sym.h"

#include "frontend/onnx_tensor.h"
#include "support/diagnostics.h"
#include "support/int_math.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <numeric>

namespace aicf {

namespace onnx_ops {

// Normalises a list of axes against `rank`, sorted and without duplicates.
Shape normAxes(const ConvertCtx &c, Shape axes, int64_t rank, const char *what) {
  for (int64_t &a : axes)
    a = normAxis(c, a, rank, what);
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    c.fail(cat("axes ", shapeStr(axes), " repeat an axis"));
  return axes;
}

void alias(ConvertCtx &c, size_t out, Value *v) {
  c.setOutput(out, v);
}

// ---- symbolic dims (issue 21) -----------------------------------------------------------------
// A converter whose inputs are static keeps its static code, so static compiles are unchanged;
// with a symbolic input dim or shape value it computes the result's dims as expressions.

bool symInput(const ConvertCtx &c, size_t i) {
  return c.hasInput(i) && c.symValue(c.input(i));
}

SymExpr symOk(const ConvertCtx &c, std::optional<SymExpr> e) {
  if (!e)
    c.fail("shape arithmetic on the symbolic dims overflows int64");
  return *e;
}

SymExpr symProduct(const ConvertCtx &c, const SymElems &s, size_t from, size_t to) {
  SymExpr n = 1;
  for (size_t i = from; i < s.size() && i < to; ++i)
    n = symOk(c, SymExpr::mul(n, s[i]));
  return n;
}

// `shape` (and `sym_shape` when a dim is symbolic) for a reshape or expand to `dims`.
AttrMap symShapeAttrs(const ConvertCtx &c, const SymElems &dims) {
  std::vector<int64_t> planned;
  std::vector<std::string> texts;
  bool symbolic = false;
  for (const SymExpr &e : dims) {
    planned.push_back(c.planning(e));
    texts.push_back(e.str());
    symbolic = symbolic || !e.isConstant();
  }
  AttrMap attrs{{"shape", planned}};
  if (symbolic)
    attrs["sym_shape"] = texts;
  return attrs;
}

// A dim given as an expression must be >= 0 for every value (a negative one is no shape at
// all). 0 is a length known only at run time come out empty (a data dim, min 0); the dims of
// the inputs have min >= 1.
void requireDimNonNegative(const ConvertCtx &c, const SymExpr &e, const std::string &what) {
  if (e.isConstant())
    return;
  if (c.bounds(e, what).lo < 0)
    c.fail(cat(what, " ", e.str(), " is not >= 0 for every value of the dims", c.rangesOf(e)));
}

} // namespace onnx_ops

namespace {

using namespace onnx_ops;

// ---- the table --------------------------------------------------------------------------------

constexpr OnnxOpEntry kTable[] = {
    // op type                   since  converter
    {"Abs", 1, convUnary<Op::Abs>},
    {"Acosh", 9, convInverseHyperbolic},
    {"Add", 1, convBinary<Op::Add>},
    {"And", 1, convBinary<Op::And>},
    {"ArgMax", 1, convArg<Op::ArgMax>},
    {"ArgMin", 1, convArg<Op::ArgMin>},
    {"Asinh", 9, convInverseHyperbolic},
    {"Atanh", 9, convInverseHyperbolic},
    {"Attention", 23, convAttention},
    {"AveragePool", 1, convPool<Op::AvgPool>},
    {"BatchNormalization", 1, convBatchNorm},
    {"BlackmanWindow", 17, convWindow},
    {"Cast", 1, convCast},
    {"CastLike", 15, convCastLike},
    {"Ceil", 1, convUnary<Op::Ceil>},
    {"Celu", 12, convCelu},
    {"Clip", 1, convClip},
    {"Compress", 9, convCompress},
    {"Concat", 1, convConcat},
    {"Constant", 1, convConstant},
    {"ConstantOfShape", 9, convConstantOfShape},
    {"Conv", 1, convConv},
    {"ConvInteger", 10, convConvInteger},
    {"ConvTranspose", 1, convConvTranspose},
    {"Cos", 7, convUnary<Op::Cos>},
    {"Cosh", 9, convSinhCosh},
    {"CumSum", 11, convCumSum},
    {"DepthToSpace", 1, convDepthToSpace},
    {"DequantizeLinear", 10, convDequantizeLinear},
    {"Div", 1, convBinary<Op::Div>},
    {"Dropout", 1, convDropout},
    {"DynamicQuantizeLinear", 11, convDynamicQuantizeLinear},
    {"Elu", 1, convElu},
    {"Equal", 1, convBinary<Op::Equal>},
    {"Erf", 9, convUnary<Op::Erf>},
    {"Exp", 1, convUnary<Op::Exp>},
    {"Expand", 8, convExpand},
    {"EyeLike", 9, convEyeLike},
    {"Flatten", 1, convFlatten},
    {"Floor", 1, convUnary<Op::Floor>},
    {"Gather", 1, convGather},
    {"GatherElements", 11, convGatherElements},
    {"GatherND", 11, convGatherND},
    {"Gelu", 20, convGelu},
    {"Gemm", 1, convGemm},
    {"GlobalAveragePool", 1, convUnary<Op::GlobalAvgPool>},
    {"GlobalMaxPool", 1, convUnary<Op::GlobalMaxPool>},
    {"Greater", 1, convBinary<Op::Greater>},
    {"GreaterOrEqual", 12, convBinary<Op::GreaterEqual>},
    {"HammingWindow", 17, convWindow},
    {"HannWindow", 17, convWindow},
    {"HardSigmoid", 1, convHardSigmoid},
    {"HardSwish", 14, convUnary<Op::HardSwish>},
    {"Hardmax", 1, convHardmax},
    {"Identity", 1, convIdentity},
    {"InstanceNormalization", 1, convInstanceNorm},
    {"IsInf", 10, convIsInf},
    {"IsNaN", 9, convIsNaN},
    {"LRN", 1, convLrn},
    {"LSTM", 7, convLstm},
    {"LayerNormalization", 17, convLayerNorm},
    {"LeakyRelu", 1, convLeakyRelu},
    {"Less", 1, convBinary<Op::Less>},
    {"LessOrEqual", 12, convBinary<Op::LessEqual>},
    {"Log", 1, convUnary<Op::Log>},
    {"LogSoftmax", 1, convSoftmax<Op::LogSoftmax>},
    {"LpNormalization", 1, convLpNorm},
    {"MatMul", 1, convMatMul},
    {"MatMulInteger", 10, convMatMulInteger},
    {"Max", 1, convVariadic<Op::Max>},
    {"MaxPool", 1, convPool<Op::MaxPool>},
    {"Mean", 1, convSumMean},
    {"MeanVarianceNormalization", 9, convMeanVarianceNorm},
    {"Min", 1, convVariadic<Op::Min>},
    {"Mish", 18, convMish},
    {"Mod", 10, convMod},
    {"BitShift", 11, convBitShift},
    {"Mul", 1, convBinary<Op::Mul>},
    {"Neg", 1, convUnary<Op::Neg>},
    {"NonMaxSuppression", 10, convNonMaxSuppression},
    {"Unique", 11, convUnique},
    {"NonZero", 9, convNonZero},
    {"NegativeLogLikelihoodLoss", 12, convNllLoss},
    {"Not", 1, convUnary<Op::Not>},
    {"OneHot", 9, convOneHot},
    {"Or", 1, convBinary<Op::Or>},
    {"PRelu", 1, convPRelu},
    {"Pad", 1, convPad},
    {"Pow", 1, convPow},
    {"QLinearConv", 10, convQLinearConv},
    {"QLinearMatMul", 10, convQLinearMatMul},
    {"QuantizeLinear", 10, convQuantizeLinear},
    {"RMSNormalization", 23, convRmsNorm},
    {"Range", 11, convRange},
    {"Reciprocal", 1, convUnary<Op::Reciprocal>},
    {"ReduceL1", 1, convReduce<Op::ReduceL1>},
    {"ReduceL2", 1, convReduce<Op::ReduceL2>},
    {"ReduceLogSum", 1, convReduceLogSum},
    {"ReduceLogSumExp", 1, convReduce<Op::ReduceLogSumExp>},
    {"ReduceMax", 1, convReduce<Op::ReduceMax>},
    {"ReduceMean", 1, convReduce<Op::ReduceMean>},
    {"ReduceMin", 1, convReduce<Op::ReduceMin>},
    {"ReduceProd", 1, convReduce<Op::ReduceProd>},
    {"ReduceSum", 1, convReduce<Op::ReduceSum>},
    {"ReduceSumSquare", 1, convReduce<Op::ReduceSumSquare>},
    {"Relu", 1, convUnary<Op::Relu>},
    {"Reshape", 1, convReshape},
    {"Resize", 10, convResize},
    {"Round", 11, convUnary<Op::Round>},
    {"Scatter", 9, convScatterElements},
    {"ScatterElements", 11, convScatterElements},
    {"ScatterND", 11, convScatterND},
    {"Selu", 1, convSelu},
    {"Shape", 1, convShape},
    {"Shrink", 9, convShrink},
    {"Sigmoid", 1, convUnary<Op::Sigmoid>},
    {"Sign", 9, convUnary<Op::Sign>},
    {"Sin", 7, convUnary<Op::Sin>},
    {"Sinh", 9, convSinhCosh},
    {"Size", 1, convSize},
    {"Slice", 1, convSlice},
    {"Softmax", 1, convSoftmax<Op::Softmax>},
    {"SoftmaxCrossEntropyLoss", 12, convSoftmaxCrossEntropy},
    {"Softplus", 1, convUnary<Op::Softplus>},
    {"Softsign", 1, convSoftsign},
    {"SpaceToDepth", 1, convSpaceToDepth},
    {"Split", 1, convSplit},
    {"Sqrt", 1, convUnary<Op::Sqrt>},
    {"Squeeze", 1, convSqueeze},
    {"Sub", 1, convBinary<Op::Sub>},
    {"Sum", 1, convSumMean},
    {"Tan", 7, convTan},
    {"Tanh", 1, convUnary<Op::Tanh>},
    {"ThresholdedRelu", 10, convThresholdedRelu},
    {"Tile", 6, convTile},
    {"Transpose", 1, convTranspose},
    {"TopK", 1, convTopK},
    {"Trilu", 14, convTrilu},
    {"Unsqueeze", 1, convUnsqueeze},
    {"Upsample", 7, convUpsample},
    {"Where", 9, convWhere},
    {"Xor", 1, convBinary<Op::Xor>},
};
} // namespace

std::span<const OnnxOpEntry> onnxOpTable() {
  return kTable;
}

const OnnxOpEntry *findOnnxOp(std::string_view opType) {
  for (const OnnxOpEntry &e : kTable)
    if (opType == e.opType)
      return &e;
  return nullptr;
}

} // namespace aicf
