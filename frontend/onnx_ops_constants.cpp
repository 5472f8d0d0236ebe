// Shape values and constants: Shape, Size, ConstantOfShape, Range, Constant, EyeLike, the
// window functions, Identity, Dropout.
// Converters of the ONNX op table (onnx_ops.cpp; conventions in its comment).
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

namespace aicf::onnx_ops {

// ---- constants --------------------------------------------------------------------------------

// A shape read at import is a constant; with symbolic dims it is a symbolic shape value (the
// planning-point dims as data, the dims' expressions beside them).
void convShape(ConvertCtx &c) {
  const Shape &s = c.type(0).shape;
  int64_t r = static_cast<int64_t>(s.size());
  int64_t start = c.attrInt("start", 0), end = c.attrInt("end", r);
  clampSlice(r, 1, start, end);
  Shape dims;
  SymElems elems;
  for (int64_t i = start; i < end; ++i) {
    dims.push_back(s[static_cast<size_t>(i)]);
    elems.push_back(c.type(0).symDim(static_cast<size_t>(i)));
  }
  int64_t n = static_cast<int64_t>(dims.size());
  c.setOutput(0, c.symConstant(Tensor::fromI64(dims, {n}), elems));
}

void convSize(ConvertCtx &c) {
  c.setOutput(0, c.symConstant(Tensor::fromI64({product(c.type(0).shape)}, {}),
                               {symProduct(c, symShapeOf(c.type(0)))}));
}

// Constants computed here from constant inputs (Range, EyeLike, windows) are allocated at once,
// so a few bytes of model could ask for gigabytes: their size is checked against the per-tensor
// limit and against kMaxComputedConstantBytes first. Real models compute position ids, masks
// and windows, far below it.
constexpr int64_t kMaxComputedConstantBytes = int64_t(256) << 20;

void checkConstantSize(const ConvertCtx &c, const TensorType &t) {
  if (std::string p = tensorSizeProblem(t); !p.empty())
    c.fail("result " + p);
  if (t.bytes() > kMaxComputedConstantBytes)
    c.fail(cat("result ", t.str(), " would be a constant of ", t.bytes(),
               " bytes computed at import, above the limit of ", kMaxComputedConstantBytes));
  c.checkComputeBudget(t.bytes());
}

// A small result is a constant; a large one is its single value broadcast (an expand, which
// readers fold as an index map), so that neither the importer nor weights.bin holds it.
void convConstantOfShape(ConvertCtx &c) {
  if (symInput(c, 0)) { // a symbolic shape: the value broadcast to it, never a weight
    SymElems shape = c.symInts(0, "shape");
    for (size_t i = 0; i < shape.size(); ++i) {
      if (shape[i].isConstant() && shape[i].constant() < 1)
        c.fail(cat("shape ", symElemsStr(shape), " has a dim < 1"));
      requireDimNonNegative(c, shape[i], cat("dim ", i));
    }
    std::optional<Tensor> value = c.attrTensor("value");
    if (value && value->numel() != 1)
      c.fail(cat("value must hold one element, got ", value->type().str()));
    Value *one = value ? c.constant(Tensor(TensorType(value->dtype(), {}), value->bytes()))
                       : c.scalar(DType::F32, 0.0);
    c.setOutput(0, c.emit(Op::Expand, {one}, symShapeAttrs(c, shape)));
    return;
  }
  Shape shape = c.constInts(0, "shape");
  for (int64_t d : shape)
    if (d < 0)
      c.fail(cat("shape ", shapeStr(shape), " has a negative dim"));
  std::optional<Tensor> value = c.attrTensor("value");
  if (value && value->numel() != 1)
    c.fail(cat("value must hold one element, got ", value->type().str()));
  TensorType type(value ? value->dtype() : DType::F32, shape);
  if (std::string p = tensorSizeProblem(type); !p.empty())
    c.fail("result " + p);
  if (!ConvertCtx::foldable(type)) {
    Value *one = value ? c.constant(Tensor(TensorType(value->dtype(), {}), value->bytes()))
                       : c.scalar(DType::F32, 0.0);
    c.setOutput(0, c.emit(Op::Expand, {one}, {{"shape", shape}}));
    return;
  }
  Tensor out(type);
  if (value && out.numel() > 0) {
    size_t es = dtypeSize(out.dtype());
    for (int64_t i = 0; i < out.numel(); ++i)
      std::memcpy(out.raw() + i * es, value->raw(), es);
  }
  c.setOutput(0, c.constant(std::move(out)));
}

// Range to a symbolic limit (position ids: Range(0, seq)): the values do not depend on the
// limit, only the count does, so it is the first `limit - start` elements of the range to the
// limit's maximum, a constant, by a slice with a symbolic end. From a constant start by step 1.
void rangeSym(ConvertCtx &c) {
  SymElems start = c.symInts(0, "start"), limit = c.symInts(1, "limit"),
           delta = c.symInts(2, "delta");
  if (start.size() != 1 || limit.size() != 1 || delta.size() != 1)
    c.fail("start, limit and delta must be scalars");
  if (!start[0].isConstant() || delta[0] != SymExpr(1))
    c.fail(cat("Range(", start[0].str(), ", ", limit[0].str(), ", ", delta[0].str(),
               ") over symbolic dims is supported from a constant start by step 1 only"));
  SymExpr n = symOk(c, SymExpr::sub(limit[0], start[0]));
  SymBounds b = c.bounds(n, "element count");
  if (b.lo < 1)
    c.fail(cat("the range has ", n.str(), " elements, not >= 1 for every value of the dims",
               c.rangesOf(n)));
  DType t = c.type(0).dtype;
  checkConstantSize(c, TensorType(t, {b.hi}));
  Tensor full(TensorType(t, {b.hi}));
  for (int64_t i = 0; i < b.hi; ++i)
    full.setInt(i, start[0].constant() + i);
  c.setOutput(0, c.emit(Op::Slice, {c.constant(std::move(full))},
                        {{"starts", Shape{0}},
                         {"ends", Shape{c.planning(n)}},
                         {"axes", Shape{0}},
                         {"steps", Shape{1}},
                         {"sym_starts", std::vector<std::string>{"0"}},
                         {"sym_ends", std::vector<std::string>{n.str()}}}));
}

void convRange(ConvertCtx &c) {
  if (symInput(c, 0) || symInput(c, 1) || symInput(c, 2)) {
    rangeSym(c);
    return;
  }
  const Tensor &start = c.requireConst(0, "start"), &limit = c.requireConst(1, "limit"),
               &delta = c.requireConst(2, "delta");
  for (const Tensor *t : {&start, &limit, &delta})
    if (t->numel() != 1)
      c.fail(cat("start, limit and delta must be scalars, got ", t->type().str()));
  DType t = start.dtype();
  Tensor out;
  if (isFloat(t)) {
    double s = start.getDouble(0), l = limit.getDouble(0), d = delta.getDouble(0);
    if (d == 0)
      c.fail("delta must not be 0");
    double count = std::ceil((l - s) / d);
    if (!(count <= static_cast<double>(kMaxTensorElements))) // also NaN
      c.fail(cat("result has ", count, " elements, above the limit of ", kMaxTensorElements,
                 " per tensor"));
    auto n = static_cast<int64_t>(std::max(0.0, count));
    checkConstantSize(c, TensorType(t, {n}));
    out = Tensor(TensorType(t, {n}));
    for (int64_t i = 0; i < n; ++i)
      out.setDouble(i, s + static_cast<double>(i) * d);
  } else {
    int64_t s = start.getInt(0), l = limit.getInt(0), d = delta.getInt(0);
    if (d == 0)
      c.fail("delta must not be 0");
    // In 128 bits: l - s + d can overflow int64.
    __int128 count = (static_cast<__int128>(l) - s + d + (d > 0 ? -1 : 1)) / d;
    if (count > kMaxTensorElements)
      c.fail(cat("result has more than ", kMaxTensorElements, " elements, the limit per tensor"));
    int64_t n = std::max<int64_t>(0, static_cast<int64_t>(count));
    checkConstantSize(c, TensorType(t, {n}));
    out = Tensor(TensorType(t, {n}));
    for (int64_t i = 0; i < n; ++i)
      out.setInt(i, s + i * d);
  }
  c.setOutput(0, c.constant(std::move(out)));
}

void convConstant(ConvertCtx &c) {
  if (c.hasAttr("sparse_value"))
    c.fail("sparse_value is not supported");
  if (c.hasAttr("value_string") || c.hasAttr("value_strings"))
    c.fail("string constants are not supported");
  Tensor t;
  if (c.hasAttr("value")) {
    t = *c.attrTensor("value");
  } else if (c.hasAttr("value_float")) {
    t = Tensor::scalarF32(static_cast<float>(c.attrFloat("value_float", 0)));
  } else if (c.hasAttr("value_floats")) {
    std::vector<double> v = c.attrFloats("value_floats");
    t = Tensor::fromF32(std::vector<float>(v.begin(), v.end()), {static_cast<int64_t>(v.size())});
  } else if (c.hasAttr("value_int")) {
    t = Tensor::fromI64({c.attrInt("value_int", 0)}, {});
  } else if (c.hasAttr("value_ints")) {
    Shape v = c.attrInts("value_ints");
    t = Tensor::fromI64(v, {static_cast<int64_t>(v.size())});
  } else {
    c.fail("has no value attribute");
  }
  c.setOutput(0, c.modelConstant(std::move(t))); // the model's data: not charged
}

void convEyeLike(ConvertCtx &c) {
  const TensorType &in = c.type(0);
  if (in.rank() != 2)
    c.fail(cat("input must be 2-D, got ", in.str()));
  DType t =
      c.hasAttr("dtype") ? castTarget(c, static_cast<int32_t>(c.attrInt("dtype", 1))) : in.dtype;
  int64_t k = c.attrInt("k", 0);
  if (!in.isStatic() || in.isSymbolic())
    c.fail(cat("input must have a static shape, got ", in.str()));
  checkConstantSize(c, TensorType(t, in.shape));
  Tensor out(TensorType(t, in.shape));
  for (int64_t i = 0; i < in.shape[0]; ++i)
    if (i + k >= 0 && i + k < in.shape[1])
      out.setDouble(i * in.shape[1] + i + k, 1.0);
  c.setOutput(0, c.constant(std::move(out)));
}

// Hann, Hamming and Blackman windows of a constant size: constants.
void convWindow(ConvertCtx &c) {
  Shape sz = c.constInts(0, "size");
  if (sz.size() != 1 || sz[0] < 0)
    c.fail("size must be a non-negative scalar");
  int64_t n = sz[0];
  DType t = castTarget(c, static_cast<int32_t>(c.attrInt("output_datatype", 1)));
  double denom = static_cast<double>(c.attrInt("periodic", 1) ? n : n - 1);
  checkConstantSize(c, TensorType(t, {n}));
  Tensor out(TensorType(t, {n}));
  for (int64_t i = 0; i < n; ++i) {
    double a = denom > 0 ? 2.0 * std::numbers::pi * static_cast<double>(i) / denom : 0.0, v;
    if (c.opType() == "HannWindow")
      v = 0.5 - 0.5 * std::cos(a);
    else if (c.opType() == "HammingWindow")
      v = 25.0 / 46.0 - (1.0 - 25.0 / 46.0) * std::cos(a);
    else
      v = 0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2 * a);
    out.setDouble(i, v);
  }
  c.setOutput(0, c.constant(std::move(out)));
}

// Identity disappears: its output is its input.
void convIdentity(ConvertCtx &c) {
  alias(c, 0, c.input(0));
}

// Dropout at inference is the identity; its mask (if read) is all ones.
void convDropout(ConvertCtx &c) {
  if (c.opset() >= 12 && c.hasInput(2)) {
    const Tensor &training = c.requireConst(2, "training_mode");
    if (training.numel() != 1)
      c.fail("training_mode is not one value");
    if (training.getInt(0) != 0) {
      // Training mode drops at random unless the ratio is 0: then it is the identity too.
      const Tensor *ratio =
          c.hasInput(1) ? &c.requireConst(1, "ratio of a training-mode Dropout") : nullptr;
      if (!ratio || ratio->numel() != 1 || ratio->getDouble(0) != 0.0)
        c.fail("training-mode Dropout with a ratio other than 0 is random (not supported: "
               "inference only)");
    }
  }
  Value *x = c.input(0);
  alias(c, 0, x);
  if (c.outputUsed(1) && x->type().isSymbolic()) { // all ones, broadcast to x's dims
    Tensor one(TensorType(c.opset() >= 10 ? DType::Bool : x->type().dtype, {}));
    one.setDouble(0, 1.0);
    c.setOutput(1, c.emit(Op::Expand, {c.constant(std::move(one))},
                          symShapeAttrs(c, symShapeOf(x->type()))));
  } else if (c.outputUsed(1)) {
    Tensor mask(TensorType(c.opset() >= 10 ? DType::Bool : x->type().dtype, x->type().shape));
    for (int64_t i = 0; i < mask.numel(); ++i)
      mask.setDouble(i, 1.0);
    c.setOutput(1, c.constant(std::move(mask)));
  }
}

} // namespace aicf::onnx_ops
