// The ONNX op converters' shared declarations (frontend/onnx_ops*.cpp; the table itself is in
// onnx_ops.cpp): the helpers more than one family uses, and every converter the table names.
// Internal to the frontend: included by the onnx_ops*.cpp files only.
#pragma once

#include "frontend/onnx_ops.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace aicf::onnx_ops {

using Shape = std::vector<int64_t>;

// Explicit window attributes for conv / pool: strides, dilations and pads default to 1, 1, 0,
// and auto_pad is resolved to pads (SAME_UPPER puts the odd pad at the end, SAME_LOWER at the
// beginning; output size ceil(in / stride)).
struct Window {
  Shape strides, dilations, pads;
};

// onnx_ops_elementwise.cpp
DType castTarget(ConvertCtx &c, int32_t onnxType);
template <Op op>
void convBinary(ConvertCtx &c);
void convBitShift(ConvertCtx &c);
void convCast(ConvertCtx &c);
void convCastLike(ConvertCtx &c);
void convCelu(ConvertCtx &c);
void convClip(ConvertCtx &c);
void convElu(ConvertCtx &c);
void convGelu(ConvertCtx &c);
void convHardSigmoid(ConvertCtx &c);
void convInverseHyperbolic(ConvertCtx &c);
void convIsInf(ConvertCtx &c);
void convIsNaN(ConvertCtx &c);
void convLeakyRelu(ConvertCtx &c);
void convMish(ConvertCtx &c);
void convMod(ConvertCtx &c);
void convPRelu(ConvertCtx &c);
void convPow(ConvertCtx &c);
void convSelu(ConvertCtx &c);
void convShrink(ConvertCtx &c);
void convSinhCosh(ConvertCtx &c);
void convSoftsign(ConvertCtx &c);
void convSumMean(ConvertCtx &c);
void convTan(ConvertCtx &c);
void convThresholdedRelu(ConvertCtx &c);
template <Op op>
void convUnary(ConvertCtx &c);
template <Op op>
void convVariadic(ConvertCtx &c);
void convWhere(ConvertCtx &c);

// onnx_ops_nn.cpp
void convAttention(ConvertCtx &c);
void convBatchNorm(ConvertCtx &c);
void convConv(ConvertCtx &c);
void convConvTranspose(ConvertCtx &c);
void convGemm(ConvertCtx &c);
void convHardmax(ConvertCtx &c);
void convInstanceNorm(ConvertCtx &c);
void convLayerNorm(ConvertCtx &c);
void convLpNorm(ConvertCtx &c);
void convLrn(ConvertCtx &c);
void convLstm(ConvertCtx &c);
void convMatMul(ConvertCtx &c);
void convMeanVarianceNorm(ConvertCtx &c);
void convNllLoss(ConvertCtx &c);
void convRmsNorm(ConvertCtx &c);
template <Op op>
void convSoftmax(ConvertCtx &c);
void convSoftmaxCrossEntropy(ConvertCtx &c);
Shape kernelShape(ConvertCtx &c, const Shape &fromWeights);
Shape spatialDims(ConvertCtx &c, size_t input);
Window windowAttrs(ConvertCtx &c, const Shape &in, const Shape &kernel);

// onnx_ops_quant.cpp
void convConvInteger(ConvertCtx &c);
void convDequantizeLinear(ConvertCtx &c);
void convDynamicQuantizeLinear(ConvertCtx &c);
void convMatMulInteger(ConvertCtx &c);
void convQLinearConv(ConvertCtx &c);
void convQLinearMatMul(ConvertCtx &c);
void convQuantizeLinear(ConvertCtx &c);
Value *integerDomainConv(ConvertCtx &c, const AttrMap &convAttrs);
// gemmAttrs: the Gemm's alpha, beta, transA, transB; null for a MatMul.
Value *integerDomainMatMul(ConvertCtx &c, const AttrMap *gemmAttrs);

// onnx_quant_grid.cpp: a QuantizeLinear of x to `to` onto the grid x already lies on (null when
// it does not), and a DequantizeLinear of such a result with the same scale and zero point (the
// value quantized; null otherwise).
Value *quantizeOnGrid(ConvertCtx &c, Value *x, DType to);
Value *dequantizeOnGrid(ConvertCtx &c);

// onnx_ops_reduce.cpp
template <Op op>
void convArg(ConvertCtx &c);
void convCompress(ConvertCtx &c);
void convNonMaxSuppression(ConvertCtx &c);
void convNonZero(ConvertCtx &c);
template <Op op>
void convReduce(ConvertCtx &c);
void convReduceLogSum(ConvertCtx &c);
void convTopK(ConvertCtx &c);
void convUnique(ConvertCtx &c);

// onnx_ops_movement.cpp
void clampSlice(int64_t dim, int64_t step, int64_t &start, int64_t &end);
void convConcat(ConvertCtx &c);
void convFlatten(ConvertCtx &c);
void convGather(ConvertCtx &c);
void convGatherElements(ConvertCtx &c);
void convGatherND(ConvertCtx &c);
template <Op op>
void convPool(ConvertCtx &c);
void convReshape(ConvertCtx &c);
void convScatterElements(ConvertCtx &c);
void convScatterND(ConvertCtx &c);
void convSlice(ConvertCtx &c);
void convSplit(ConvertCtx &c);
void convSqueeze(ConvertCtx &c);
void convTranspose(ConvertCtx &c);
void convUnsqueeze(ConvertCtx &c);

// onnx_ops_shape.cpp
void convCumSum(ConvertCtx &c);
void convDepthToSpace(ConvertCtx &c);
void convExpand(ConvertCtx &c);
void convOneHot(ConvertCtx &c);
void convPad(ConvertCtx &c);
void convResize(ConvertCtx &c);
void convSpaceToDepth(ConvertCtx &c);
void convTile(ConvertCtx &c);
void convTrilu(ConvertCtx &c);
void convUpsample(ConvertCtx &c);

// onnx_ops_constants.cpp
void checkConstantSize(const ConvertCtx &c, const TensorType &t);
void convConstant(ConvertCtx &c);
void convConstantOfShape(ConvertCtx &c);
void convDropout(ConvertCtx &c);
void convEyeLike(ConvertCtx &c);
void convIdentity(ConvertCtx &c);
void convRange(ConvertCtx &c);
void convShape(ConvertCtx &c);
void convSize(ConvertCtx &c);
void convWindow(ConvertCtx &c);

// onnx_ops.cpp
void alias(ConvertCtx &c, size_t out, Value *v);
Shape normAxes(const ConvertCtx &c, Shape axes, int64_t rank, const char *what = "axis");
void requireDimNonNegative(const ConvertCtx &c, const SymExpr &e, const std::string &what);
bool symInput(const ConvertCtx &c, size_t i);
SymExpr symOk(const ConvertCtx &c, std::optional<SymExpr> e);
SymExpr symProduct(const ConvertCtx &c, const SymElems &s, size_t from = 0, size_t to = SIZE_MAX);
AttrMap symShapeAttrs(const ConvertCtx &c, const SymElems &dims);

} // namespace aicf::onnx_ops
