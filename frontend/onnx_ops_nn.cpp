// Contractions (MatMul, Gemm, Conv, ConvTranspose), normalisations, LSTM, losses and attention.
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

// ---- contractions -----------------------------------------------------------------------------

// A quantized model's product of dequantized operands computes on the integers
// (integerDomainMatMul, onnx_ops_quant.cpp).
void convMatMul(ConvertCtx &c) {
  if (Value *y = integerDomainMatMul(c, nullptr)) {
    c.setOutput(0, y);
    return;
  }
  c.setOutput(0, c.emit(Op::MatMul, {c.input(0), c.input(1)}));
}

void convGemm(ConvertCtx &c) {
  std::vector<Value *> ops = {c.input(0), c.input(1)};
  if (c.hasInput(2))
    ops.push_back(c.input(2));
  AttrMap attrs = {{"alpha", c.attrFloat("alpha", 1.0)},
                   {"beta", c.attrFloat("beta", 1.0)},
                   {"transA", c.attrInt("transA", 0)},
                   {"transB", c.attrInt("transB", 0)}};
  if (Value *y = integerDomainMatMul(c, &attrs)) {
    c.setOutput(0, y);
    return;
  }
  c.setOutput(0, c.emit(Op::Gemm, ops, attrs));
}

Window windowAttrs(ConvertCtx &c, const Shape &in, const Shape &kernel) {
  size_t n = in.size();
  Window w;
  w.strides = c.attrIntsOpt("strides").value_or(Shape(n, 1));
  w.dilations = c.attrIntsOpt("dilations").value_or(Shape(n, 1));
  w.pads = c.attrIntsOpt("pads").value_or(Shape(2 * n, 0));
  if (w.strides.size() != n || w.dilations.size() != n || w.pads.size() != 2 * n ||
      kernel.size() != n)
    c.fail(cat("strides, dilations, kernel_shape and pads must have ", n, ", ", n, ", ", n, " and ",
               2 * n, " values for ", n, " spatial dims"));
  for (size_t i = 0; i < n; ++i)
    if (w.strides[i] < 1 || w.dilations[i] < 1 || kernel[i] < 1)
      c.fail("strides, dilations and kernel_shape must be >= 1");
  std::string autoPad = c.attrStr("auto_pad", "NOTSET");
  if (autoPad == "VALID") {
    w.pads.assign(2 * n, 0);
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (size_t i = 0; i < n; ++i) {
      int64_t out = (in[i] + w.strides[i] - 1) / w.strides[i];
      int64_t eff = (kernel[i] - 1) * w.dilations[i] + 1;
      int64_t total = std::max<int64_t>(0, (out - 1) * w.strides[i] + eff - in[i]);
      int64_t small = total / 2, big = total - small;
      w.pads[i] = autoPad == "SAME_UPPER" ? small : big;
      w.pads[n + i] = autoPad == "SAME_UPPER" ? big : small;
    }
  } else if (autoPad != "NOTSET" && !autoPad.empty()) {
    c.fail(cat("auto_pad '", autoPad, "' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID"));
  }
  return w;
}

Shape spatialDims(ConvertCtx &c, size_t input) {
  const Shape &s = c.type(input).shape;
  if (s.size() < 3)
    c.fail(cat("input '", c.inputName(input), "' must be [N, C, spatial...], got ",
               c.type(input).str()));
  return Shape(s.begin() + 2, s.end());
}

Shape kernelShape(ConvertCtx &c, const Shape &fromWeights) {
  auto k = c.attrIntsOpt("kernel_shape");
  if (k && *k != fromWeights)
    c.fail(
        cat("kernel_shape ", shapeStr(*k), " does not match the weights' ", shapeStr(fromWeights)));
  return fromWeights;
}

void convConv(ConvertCtx &c) {
  Shape in = spatialDims(c, 0);
  const Shape &ws = c.type(1).shape;
  if (ws.size() != in.size() + 2)
    c.fail(cat("weights ", c.type(1).str(), " do not match input ", c.type(0).str()));
  Shape kernel = kernelShape(c, Shape(ws.begin() + 2, ws.end()));
  Window w = windowAttrs(c, in, kernel);
  AttrMap attrs = {{"strides", w.strides},
                   {"pads", w.pads},
                   {"dilations", w.dilations},
                   {"group", c.attrInt("group", 1)}};
  // A quantized model's conv of dequantized operands: on the integers (onnx_ops_quant.cpp).
  if (Value *y = integerDomainConv(c, attrs)) {
    c.setOutput(0, y);
    return;
  }
  std::vector<Value *> ops = {c.input(0), c.input(1)};
  if (c.hasInput(2))
    ops.push_back(c.input(2));
  c.setOutput(0, c.emit(Op::Conv, ops, attrs));
}

void convConvTranspose(ConvertCtx &c) {
  Shape in = spatialDims(c, 0);
  const Shape &ws = c.type(1).shape;
  size_t n = in.size();
  if (ws.size() != n + 2)
    c.fail(cat("weights ", c.type(1).str(), " do not match input ", c.type(0).str()));
  Shape kernel = kernelShape(c, Shape(ws.begin() + 2, ws.end()));
  Shape strides = c.attrIntsOpt("strides").value_or(Shape(n, 1));
  Shape dil = c.attrIntsOpt("dilations").value_or(Shape(n, 1));
  Shape pads = c.attrIntsOpt("pads").value_or(Shape(2 * n, 0));
  Shape outPad = c.attrIntsOpt("output_padding").value_or(Shape(n, 0));
  if (strides.size() != n || dil.size() != n || pads.size() != 2 * n || outPad.size() != n)
    c.fail(cat("strides, dilations, output_padding and pads must have ", n, ", ", n, ", ", n,
               " and ", 2 * n, " values"));
  std::string autoPad = c.attrStr("auto_pad", "NOTSET");
  auto outShape = c.attrIntsOpt("output_shape");
  if (outShape && outShape->size() == n + 2)
    outShape = Shape(outShape->begin() + 2, outShape->end());
  if (outShape && outShape->size() != n)
    c.fail(cat("output_shape ", shapeStr(*outShape), " needs ", n, " spatial values"));
  if (!outShape && (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER")) {
    outShape = Shape(n);
    for (size_t i = 0; i < n; ++i)
      (*outShape)[i] = in[i] * strides[i];
  }
  if (outShape) {
    // total padding = stride * (in - 1) + output_padding + ((k - 1) * dilation + 1) - out
    for (size_t i = 0; i < n; ++i) {
      int64_t total =
          strides[i] * (in[i] - 1) + outPad[i] + (kernel[i] - 1) * dil[i] + 1 - (*outShape)[i];
      if (total < 0) { // the output is longer than the padded result: pad at the end
        outPad[i] -= total;
        total = 0;
      }
      int64_t small = total / 2, big = total - small;
      pads[i] = autoPad == "SAME_UPPER" ? small : big;
      pads[n + i] = autoPad == "SAME_UPPER" ? big : small;
    }
  } else if (autoPad == "VALID") {
    pads.assign(2 * n, 0);
  } else if (autoPad != "NOTSET" && !autoPad.empty()) {
    c.fail(cat("auto_pad '", autoPad, "' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID"));
  }
  std::vector<Value *> ops = {c.input(0), c.input(1)};
  if (c.hasInput(2))
    ops.push_back(c.input(2));
  AttrMap attrs = {
      {"strides", strides}, {"pads", pads}, {"dilations", dil}, {"group", c.attrInt("group", 1)}};
  if (std::any_of(outPad.begin(), outPad.end(), [](int64_t v) { return v != 0; }))
    attrs["output_padding"] = outPad;
  c.setOutput(0, c.emit(Op::ConvTranspose, ops, attrs));
}

// ---- normalisations ---------------------------------------------------------------------------

// Softmax / LogSoftmax. Before opset 13 the input is coerced to 2-D at `axis` (default 1) and
// normalised over the flattened trailing part; from 13 on it is normalised along `axis` (-1).
template <Op op>
void convSoftmax(ConvertCtx &c) {
  Value *x = c.input(0);
  int64_t rank = x->type().rank();
  if (rank == 0)
    c.fail("input must have rank >= 1");
  int64_t axis = normAxis(c, c.attrInt("axis", c.opset() >= 13 ? -1 : 1), rank);
  if (c.opset() >= 13 || axis == rank - 1) {
    c.setOutput(0, c.emit(op, {x}, {{"axis", axis}}));
    return;
  }
  const Shape &s = x->type().shape;
  Value *flat = c.reshape(x, {product(s, 0, axis), product(s, axis)});
  c.setOutput(0, c.reshape(c.emit(op, {flat}, {{"axis", int64_t(1)}}), s));
}

// Mean and 1/sqrt(var + eps) over axes [axis, rank), in f32 (LayerNormalization's stash type).
void layerNormStats(ConvertCtx &c, Value *x, int64_t axis, double eps) {
  Value *xs = c.castTo(x, DType::F32);
  Shape axes;
  for (int64_t a = axis; a < x->type().rank(); ++a)
    axes.push_back(a);
  AttrMap red = {{"axes", axes}, {"keepdims", int64_t(1)}};
  Value *mean = c.emit(Op::ReduceMean, {xs}, red);
  Value *d = c.emit(Op::Sub, {xs, mean});
  Value *var = c.emit(Op::ReduceMean, {c.emit(Op::Mul, {d, d})}, red);
  Value *inv = c.emit(Op::Reciprocal,
                      {c.emit(Op::Sqrt, {c.emit(Op::Add, {var, c.scalar(DType::F32, eps)})})});
  if (c.outputUsed(1))
    c.setOutput(1, mean);
  if (c.outputUsed(2))
    c.setOutput(2, inv);
}

void convLayerNorm(ConvertCtx &c) {
  Value *x = c.input(0);
  int64_t axis = normAxis(c, c.attrInt("axis", -1), x->type().rank());
  double eps = c.attrFloat("epsilon", 1e-5);
  std::vector<Value *> ops = {x, c.input(1)};
  if (c.hasInput(2))
    ops.push_back(c.input(2));
  c.setOutput(0, c.emit(Op::LayerNorm, ops, {{"axis", axis}, {"epsilon", eps}}));
  if (c.outputUsed(1) || c.outputUsed(2))
    layerNormStats(c, x, axis, eps);
}

void convRmsNorm(ConvertCtx &c) {
  Value *x = c.input(0);
  int64_t axis = normAxis(c, c.attrInt("axis", -1), x->type().rank());
  c.setOutput(0, c.emit(Op::RmsNorm, {x, c.input(1)},
                        {{"axis", axis}, {"epsilon", c.attrFloat("epsilon", 1e-5)}}));
}

// BatchNormalization-14/15 with training_mode = 1: y normalised by the batch's own statistics,
// the mean and the population variance over every axis but the channel axis 1, computed with
// reduce_mean; outputs 1 and 2 are the updated running statistics, input_running * momentum +
// current * (1 - momentum) (ONNX's reference; momentum defaults to 0.9).
void batchNormTraining(ConvertCtx &c, const std::vector<Value *> &ops) {
  Value *x = ops[0];
  const Shape &xs = x->type().shape;
  DType t = x->type().dtype;
  Shape axes = {0};
  for (int64_t a = 2; a < static_cast<int64_t>(xs.size()); ++a)
    axes.push_back(a);
  Value *meanK = c.emit(Op::ReduceMean, {x}, {{"axes", axes}, {"keepdims", int64_t(1)}});
  Value *d = c.emit(Op::Sub, {x, meanK});
  Value *var =
      c.emit(Op::ReduceMean, {c.emit(Op::Mul, {d, d})}, {{"axes", axes}, {"keepdims", int64_t(0)}});
  Value *mean = c.reshape(meanK, {xs[1]});
  c.setOutput(0, c.emit(Op::BatchNorm, {x, ops[1], ops[2], mean, var},
                        {{"epsilon", c.attrFloat("epsilon", 1e-5)}}));
  double momentum = c.attrFloat("momentum", 0.9);
  for (size_t k = 1; k <= 2; ++k) {
    if (!c.outputUsed(k))
      continue;
    Value *running = c.emit(Op::Mul, {ops[2 + k], c.scalar(t, momentum)});
    Value *current = c.emit(Op::Mul, {k == 1 ? mean : var, c.scalar(t, 1.0 - momentum)});
    c.setOutput(k, c.castTo(c.emit(Op::Add, {running, current}), c.type(2 + k).dtype));
  }
}

void convBatchNorm(ConvertCtx &c) {
  if (c.opset() < 7 && c.attrInt("is_test", 0) == 0)
    c.fail("is_test = 0 (training mode, batch statistics) is not supported (inference only)");
  if (c.opset() < 9 && c.attrInt("spatial", 1) != 1)
    c.fail("spatial = 0 (per-activation statistics) is not supported");
  bool training = c.opset() >= 14 && c.attrInt("training_mode", 0) != 0;
  if (!training)
    for (size_t k = 1; k < c.numOutputs(); ++k)
      if (c.outputUsed(k))
        c.fail(cat("output ", k, " ('", c.node().output(static_cast<int>(k)),
                   "', a training statistic) needs training_mode = 1"));
  Value *x = c.input(0);
  DType t = x->type().dtype;
  // BatchNormalization-15 lets scale/bias and mean/var have their own float types.
  std::vector<Value *> ops = {x};
  for (size_t k = 1; k <= 4; ++k)
    ops.push_back(c.castTo(c.input(k), t));
  if (training) {
    batchNormTraining(c, ops);
    return;
  }
  c.setOutput(0, c.emit(Op::BatchNorm, ops, {{"epsilon", c.attrFloat("epsilon", 1e-5)}}));
}

void convInstanceNorm(ConvertCtx &c) {
  c.setOutput(0, c.emit(Op::InstanceNorm, {c.input(0), c.input(1), c.input(2)},
                        {{"epsilon", c.attrFloat("epsilon", 1e-5)}}));
}

// MeanVarianceNormalization: (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9) over `axes` (default
// [0, 2, 3]; empty: all axes). Over trailing contiguous axes [a, rank) it is one registry op,
// whose online_reducible_norm certificate (a Welford row) lowers it in one pass. Over any other
// axes no one-pass row exists, so it is ONNX's own function body in primitive ops, which the
// existing reduction and pointwise kernels lower.
void convMeanVarianceNorm(ConvertCtx &c) {
  Value *x = c.input(0);
  DType t = x->type().dtype;
  int64_t rank = x->type().rank();
  Shape axes = normAxes(c, c.attrIntsOpt("axes").value_or(Shape{0, 2, 3}), rank);
  bool trailing = !axes.empty() && axes.back() == rank - 1 &&
                  axes.back() - axes.front() + 1 == static_cast<int64_t>(axes.size());
  if (trailing && isFloat(t)) {
    c.setOutput(0, c.emit(Op::MeanVarianceNorm, {x}, {{"axes", axes}}));
    return;
  }
  AttrMap red = {{"axes", axes}, {"keepdims", int64_t(1)}};
  Value *mean = c.emit(Op::ReduceMean, {x}, red);
  Value *meanSq = c.emit(Op::Mul, {mean, mean});
  Value *sqMean = c.emit(Op::ReduceMean, {c.emit(Op::Mul, {x, x})}, red);
  Value *std = c.emit(Op::Sqrt, {c.emit(Op::Sub, {sqMean, meanSq})});
  Value *den = c.emit(Op::Add, {std, c.scalar(t, 1e-9)});
  c.setOutput(0, c.emit(Op::Div, {c.emit(Op::Sub, {x, mean}), den}));
}

// Hardmax: 1 at the first maximum along the axis (after the pre-13 coercion to 2-D), else 0.
void convHardmax(ConvertCtx &c) {
  Value *x = c.input(0);
  const Shape s = x->type().shape;
  int64_t rank = static_cast<int64_t>(s.size());
  if (rank == 0)
    c.fail("input must have rank >= 1");
  int64_t axis = normAxis(c, c.attrInt("axis", c.opset() >= 13 ? -1 : 1), rank);
  Value *v = x;
  if (c.opset() < 13 && axis != rank - 1) {
    v = c.reshape(x, {product(s, 0, axis), product(s, axis)});
    axis = 1;
  }
  const Shape vs = v->type().shape;
  Value *am = c.emit(Op::ArgMax, {v}, {{"axis", axis}, {"keepdims", int64_t(1)}});
  Shape iotaShape(vs.size(), 1);
  iotaShape[static_cast<size_t>(axis)] = vs[static_cast<size_t>(axis)];
  Tensor iota(TensorType(DType::I64, iotaShape));
  for (int64_t i = 0; i < iota.numel(); ++i)
    iota.setInt(i, i);
  Value *hit = c.emit(Op::Equal, {am, c.constant(std::move(iota))});
  c.setOutput(0, c.reshape(c.castTo(hit, x->type().dtype), s));
}

// LRN: the sum of squares over a window of channels is an average pool (count_include_pad) over
// the channel axis of x^2 reshaped to [N, 1, C, rest], times the window size.
// LSTM (opset 7 / 14) unrolled over its sequence, which is static once the dims are bound:
// the input projection of every step in one MatMul, then per step (per direction) the
// recurrent MatMul, the gates (ONNX order i, o, f, c), the cell and hidden updates:
//   i = sigma(x Wi + h Ri + b_i + Pi c), f = sigma(.. + Pf c), g = tanh(..),
//   c' = f c + i g, o = sigma(.. + Po c'), h' = o tanh(c').
// Default activations only, no clip, no input_forget, every sequence full length (Silero
// VAD's decoder: one step of 128 units per call).
void convLstm(ConvertCtx &c) {
  Value *x = c.input(0), *w = c.input(1), *r = c.input(2);
  std::string dir = c.attrStr("direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
    c.fail(cat("direction '", dir, "' is not forward, reverse or bidirectional"));
  if (!c.attrFloats("activation_alpha").empty() || !c.attrFloats("activation_beta").empty())
    c.fail("activation_alpha / activation_beta are not supported");
  if (c.hasAttr("activations")) {
    std::vector<std::string> acts;
    for (const auto &a : c.node().attribute())
      if (a.name() == "activations")
        for (const auto &sv : a.strings())
          acts.push_back(sv);
    for (size_t k = 0; k < acts.size(); ++k)
      if (acts[k] != (k % 3 == 0 ? "Sigmoid" : "Tanh"))
        c.fail(cat("activation '", acts[k], "' is not supported (only the defaults: Sigmoid, ",
                   "Tanh, Tanh)"));
  }
  if (c.hasAttr("clip"))
    c.fail("clip is not supported");
  c.requireAttrDefault("input_forget", 0, "coupled input and forget gates are not supported");
  int64_t layout = c.attrInt("layout", 0);
  if (x->type().rank() != 3 || w->type().rank() != 3 || r->type().rank() != 3)
    c.fail(cat("X, W and R must have rank 3 (got ", x->type().str(), ", ", w->type().str(), ", ",
               r->type().str(), ")"));
  if (layout == 1)
    x = c.emit(Op::Transpose, {x}, {{"perm", Shape{1, 0, 2}}});
  const Shape &xs = x->type().shape;
  int64_t T = xs[0], N = xs[1], I = xs[2], D = dir == "bidirectional" ? 2 : 1;
  int64_t H = c.attrInt("hidden_size", r->type().shape[2]);
  if (w->type().shape != Shape{D, 4 * H, I} || r->type().shape != Shape{D, 4 * H, H})
    c.fail(cat("W ", w->type().str(), " / R ", r->type().str(), " do not match ", D,
               " direction(s), hidden_size ", H, " and input size ", I));
  if (T > 1024)
    c.fail(cat("a sequence of ", T, " steps is unrolled at compile time; at most 1024"));
  if (c.hasInput(4)) {
    std::vector<int64_t> lens = c.constInts(4, "sequence_lens");
    for (int64_t l : lens)
      if (l != T)
        c.fail(cat("sequence_lens ", l, " differs from the sequence length ", T,
                   " (padded sequences are not supported)"));
  }
  DType dt = x->type().dtype;
  auto slice = [&](Value *v, int64_t axis, int64_t from, int64_t to) {
    return c.emit(
        Op::Slice, {v},
        {{"starts", Shape{from}}, {"ends", Shape{to}}, {"axes", Shape{axis}}, {"steps", Shape{1}}});
  };
  auto zeros = [&] { return c.constant(Tensor(TensorType(dt, {N, H}))); };
  std::vector<Value *> ys(static_cast<size_t>(D)), hs(static_cast<size_t>(D)),
      cs(static_cast<size_t>(D));
  for (int64_t d = 0; d < D; ++d) {
    Value *wT = c.emit(Op::Transpose, {c.reshape(slice(w, 0, d, d + 1), {4 * H, I})},
                       {{"perm", Shape{1, 0}}});
    Value *rT = c.emit(Op::Transpose, {c.reshape(slice(r, 0, d, d + 1), {4 * H, H})},
                       {{"perm", Shape{1, 0}}});
    // Every step's input projection at once, with both biases.
    Value *xw = c.emit(Op::MatMul, {c.reshape(x, {T * N, I}), wT});
    if (c.hasInput(3)) {
      Value *b = c.reshape(slice(c.input(3), 0, d, d + 1), {8 * H});
      xw = c.emit(Op::Add,
                  {xw, c.emit(Op::Add, {slice(b, 0, 0, 4 * H), slice(b, 0, 4 * H, 8 * H)})});
    }
    xw = c.reshape(xw, {T, N, 4 * H});
    Value *p = c.hasInput(7) ? c.reshape(slice(c.input(7), 0, d, d + 1), {3 * H}) : nullptr;
    Value *h = c.hasInput(5) ? c.reshape(slice(c.input(5), 0, d, d + 1), {N, H}) : zeros();
    Value *cell = c.hasInput(6) ? c.reshape(slice(c.input(6), 0, d, d + 1), {N, H}) : zeros();
    bool reverse = dir == "reverse" || d == 1;
    std::vector<Value *> steps(static_cast<size_t>(T));
    for (int64_t k = 0; k < T; ++k) {
      int64_t t = reverse ? T - 1 - k : k;
      Value *g = c.emit(
          Op::Add, {c.reshape(slice(xw, 0, t, t + 1), {N, 4 * H}), c.emit(Op::MatMul, {h, rT})});
      auto gate = [&](int64_t q) { return slice(g, 1, q * H, (q + 1) * H); };
      auto peep = [&](Value *v, int64_t q, Value *cv) {
        return p ? c.emit(Op::Add, {v, c.emit(Op::Mul, {slice(p, 0, q * H, (q + 1) * H), cv})}) : v;
      };
      Value *ig = c.emit(Op::Sigmoid, {peep(gate(0), 0, cell)});
      Value *fg = c.emit(Op::Sigmoid, {peep(gate(2), 2, cell)});
      Value *cg = c.emit(Op::Tanh, {gate(3)});
      cell = c.emit(Op::Add, {c.emit(Op::Mul, {fg, cell}), c.emit(Op::Mul, {ig, cg})});
      Value *og = c.emit(Op::Sigmoid, {peep(gate(1), 1, cell)});
      h = c.emit(Op::Mul, {og, c.emit(Op::Tanh, {cell})});
      steps[static_cast<size_t>(t)] = c.reshape(h, {1, 1, N, H});
    }
    ys[static_cast<size_t>(d)] =
        T == 1 ? steps[0] : c.emit(Op::Concat, steps, {{"axis", int64_t(0)}});
    hs[static_cast<size_t>(d)] = c.reshape(h, {1, N, H});
    cs[static_cast<size_t>(d)] = c.reshape(cell, {1, N, H});
  }
  auto stack = [&](std::vector<Value *> v, int64_t axis) {
    return v.size() == 1 ? v[0] : c.emit(Op::Concat, v, {{"axis", axis}});
  };
  Value *y = stack(ys, 1); // [T, D, N, H]
  if (layout == 1)
    y = c.emit(Op::Transpose, {y}, {{"perm", Shape{2, 0, 1, 3}}});
  Value *yh = stack(hs, 0), *yc = stack(cs, 0);
  if (layout == 1) {
    yh = c.emit(Op::Transpose, {yh}, {{"perm", Shape{1, 0, 2}}});
    yc = c.emit(Op::Transpose, {yc}, {{"perm", Shape{1, 0, 2}}});
  }
  c.setOutput(0, y);
  if (c.numOutputs() > 1)
    c.setOutput(1, yh);
  if (c.numOutputs() > 2)
    c.setOutput(2, yc);
}

void convLrn(ConvertCtx &c) {
  Value *x = c.input(0);
  const Shape &s = x->type().shape;
  if (s.size() < 3)
    c.fail(cat("input must be [N, C, ...], got ", x->type().str()));
  DType t = x->type().dtype;
  int64_t size = c.attrIntReq("size");
  if (size < 1)
    c.fail("size must be >= 1");
  double alpha = c.attrFloat("alpha", 1e-4), beta = c.attrFloat("beta", 0.75),
         bias = c.attrFloat("bias", 1.0);
  Value *sq = c.reshape(c.emit(Op::Mul, {x, x}), {s[0], 1, s[1], product(s, 2)});
  int64_t before = (size - 1) / 2, after = size - 1 - before;
  Value *avg = c.emit(Op::AvgPool, {sq},
                      {{"kernel_shape", Shape{size, 1}},
                       {"strides", Shape{1, 1}},
                       {"pads", Shape{before, 0, after, 0}},
                       {"dilations", Shape{1, 1}},
                       {"count_include_pad", int64_t(1)}});
  Value *den = c.emit(
      Op::Add, {c.emit(Op::Mul, {c.reshape(avg, s), c.scalar(t, alpha)}), c.scalar(t, bias)});
  den = c.emit(Op::Pow, {den, c.scalar(t, beta)});
  c.setOutput(0, c.emit(Op::Div, {x, den}));
}

// Shared by NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: -logp[n, target[n, ...], ...]
// weighted and reduced. The class is picked with a one-hot mask (no gather-elements op).
Value *nllLoss(ConvertCtx &c, Value *logp, Value *target, Value *weight) {
  const Shape &ls = logp->type().shape;
  if (ls.size() < 2)
    c.fail(cat("input must be [N, C, ...], got ", logp->type().str()));
  DType t = logp->type().dtype;
  int64_t classes = ls[1];
  Value *tgt = c.castTo(target, DType::I64);
  Shape ts = tgt->type().shape;
  Shape expanded = ts;
  expanded.insert(expanded.begin() + 1, 1);
  Shape iotaShape(ls.size(), 1);
  iotaShape[1] = classes;
  Tensor iota(TensorType(DType::I64, iotaShape));
  for (int64_t i = 0; i < classes; ++i)
    iota.setInt(i, i);
  Value *onehot = c.emit(Op::Equal, {c.reshape(tgt, expanded), c.constant(std::move(iota))});
  Value *mask = c.castTo(onehot, t); // [N, C, ...]
  AttrMap overClasses = {{"axes", Shape{1}}, {"keepdims", int64_t(0)}};
  Value *picked = c.emit(Op::ReduceSum, {c.emit(Op::Mul, {logp, mask})}, overClasses);
  // Per-element weight: weight[target] (0 where the target is out of range), 0 if ignored.
  Value *w;
  if (weight) {
    Shape wShape(ls.size(), 1);
    wShape[1] = classes;
    w = c.emit(Op::ReduceSum, {c.emit(Op::Mul, {mask, c.reshape(weight, wShape)})}, overClasses);
  } else {
    w = c.emit(Op::ReduceSum, {mask}, overClasses);
  }
  if (c.hasAttr("ignore_index")) {
    Value *ignore = c.scalar(DType::I64, static_cast<double>(c.attrInt("ignore_index", 0)));
    Value *keep = c.castTo(c.emit(Op::Not, {c.emit(Op::Equal, {tgt, ignore})}), t);
    w = c.emit(Op::Mul, {w, keep});
  }
  Value *loss = c.emit(Op::Neg, {c.emit(Op::Mul, {picked, w})});
  std::string reduction = c.attrStr("reduction", "mean");
  Shape all(ts.size());
  std::iota(all.begin(), all.end(), 0);
  AttrMap full = {{"axes", all}, {"keepdims", int64_t(0)}};
  if (reduction == "none")
    return loss;
  if (reduction == "sum")
    return c.emit(Op::ReduceSum, {loss}, full);
  if (reduction != "mean")
    c.fail(cat("reduction '", reduction, "' is not none, sum or mean"));
  return c.emit(Op::Div, {c.emit(Op::ReduceSum, {loss}, full), c.emit(Op::ReduceSum, {w}, full)});
}

void convNllLoss(ConvertCtx &c) {
  c.setOutput(0, nllLoss(c, c.input(0), c.input(1), c.hasInput(2) ? c.input(2) : nullptr));
}

void convSoftmaxCrossEntropy(ConvertCtx &c) {
  Value *scores = c.input(0);
  if (scores->type().rank() < 2)
    c.fail(cat("scores must be [N, C, ...], got ", scores->type().str()));
  Value *logp = c.emit(Op::LogSoftmax, {scores}, {{"axis", int64_t(1)}});
  c.setOutput(0, nllLoss(c, logp, c.input(1), c.hasInput(2) ? c.input(2) : nullptr));
  if (c.outputUsed(1))
    c.setOutput(1, logp);
}

void convLpNorm(ConvertCtx &c) {
  Value *x = c.input(0);
  int64_t axis = normAxis(c, c.attrInt("axis", -1), x->type().rank());
  int64_t p = c.attrInt("p", 2);
  if (p != 1 && p != 2)
    c.fail(cat("p = ", p, " is not 1 or 2"));
  Value *norm = c.emit(p == 1 ? Op::ReduceL1 : Op::ReduceL2, {x},
                       {{"axes", Shape{axis}}, {"keepdims", int64_t(1)}});
  // A zero vector normalises to zeros (ONNX's reference and ONNX Runtime), not 0 / 0 = NaN.
  DType t = x->type().dtype;
  Value *zero = c.emit(Op::Equal, {norm, c.scalar(t, 0.0)});
  c.setOutput(0, c.emit(Op::Where, {zero, c.scalar(t, 0.0), c.emit(Op::Div, {x, norm})}));
}

// A [sq, sk] constant of f(query i, key j) (bool or int64).
Value *attentionGrid(ConvertCtx &c, int64_t sq, int64_t sk,
                     const std::function<int64_t(int64_t, int64_t)> &f, DType dtype) {
  Tensor t(TensorType(dtype, {sq, sk}));
  for (int64_t i = 0; i < sq; ++i)
    for (int64_t j = 0; j < sk; ++j)
      t.setInt(i * sk + j, f(i, j));
  return c.constant(std::move(t));
}

Value *andMask(ConvertCtx &c, Value *a, Value *b) {
  return a ? c.emit(Op::And, {a, b}) : b;
}

// Attention-23/24/25 written out in plain ops, in the order of ONNX's reference
// (onnx/reference/ops/op_attention.py): Q and K each scaled by sqrt(scale), Q K^T, softcap, the
// additive bias (attn_mask padded to the keys with False / -inf, is_causal, the sliding window,
// nonpad_kv_seqlen's padding mask), softmax (in softmax_precision), fully-masked rows (an all
// -inf bias row) zeroed, then times V. q, k, v are [B, H, S, D] with the cache concatenated and
// the K/V heads repeated. The causal and window frontiers are query i, key j: j <= i + offset,
// offset - left <= j - i <= offset + right, with offset the cache length (a constant mask) or,
// for an external cache, nonpad_kv_seqlen[b] - Sq (a mask compared at run time). Returns Y;
// *qkOut is qk_matmul_output in its mode.
Value *attentionByOps(ConvertCtx &c, Value *q, Value *k, Value *v, int64_t past, double scale,
                      bool causal, Value **qkOut) {
  DType t = q->type().dtype;
  int64_t sq = q->type().shape[2], sk = k->type().shape[2], batch = q->type().shape[0];
  int64_t left = c.attrInt("left_window_size", -1), right = c.attrInt("right_window_size", -1);
  if (left < -1 || right < -1)
    c.fail("left_window_size and right_window_size must be -1 or nonnegative");
  Value *lens = nullptr; // nonpad_kv_seqlen as [B, 1, 1, 1] int64
  if (c.hasInput(6)) {
    if (c.hasInput(4))
      c.fail("nonpad_kv_seqlen cannot be combined with past_key / past_value");
    Value *n = c.input(6);
    if (n->type().shape != Shape{batch})
      c.fail(cat("nonpad_kv_seqlen ", n->type().str(), " is not [batch = ", batch, "]"));
    lens = c.reshape(c.castTo(n, DType::I64), {batch, 1, 1, 1});
  }
  // The mask: bool `allowed` and a float `added`, either absent.
  Value *allowed = nullptr, *added = nullptr;
  if (c.hasInput(3)) {
    Value *m = c.input(3);
    Shape ms = m->type().shape;
    bool isBool = m->type().dtype == DType::Bool;
    if (!ms.empty() && ms.back() > sk)
      c.fail(cat("attn_mask ", m->type().str(), " is longer than the ", sk, " keys"));
    if (!ms.empty() && ms.back() < sk) { // padded to the keys: False / -inf
      Shape ps = ms;
      ps.back() = sk - ms.back();
      Tensor pad(TensorType(m->type().dtype, ps));
      for (int64_t i = 0; i < pad.numel(); ++i)
        pad.setDouble(i, isBool ? 0.0 : -INFINITY);
      m = c.emit(Op::Concat, {m, c.constant(std::move(pad))}, {{"axis", int64_t(ms.size() - 1)}});
    }
    (isBool ? allowed : added) = m;
  }
  // Frontiers j - i <= offset + hi (hi >= 0 on that side) and j - i >= offset - lo.
  auto frontier = [&](int64_t hi, int64_t lo) {
    if (!lens) {
      return attentionGrid(
          c, sq, sk,
          [&](int64_t i, int64_t j) {
            int64_t d = j - i - past;
            return int64_t((hi < 0 || d <= hi) && (lo < 0 || d >= -lo));
          },
          DType::Bool);
    }
    // offset = lens - sq: j - i + sq - hi <= lens and lens <= j - i + sq + lo.
    Value *r = nullptr;
    if (hi >= 0)
      r = andMask(
          c, r,
          c.emit(Op::LessEqual,
                 {attentionGrid(
                      c, sq, sk, [&](int64_t i, int64_t j) { return j - i + sq - hi; }, DType::I64),
                  lens}));
    if (lo >= 0)
      r = andMask(
          c, r,
          c.emit(Op::LessEqual,
                 {lens, attentionGrid(
                            c, sq, sk, [&](int64_t i, int64_t j) { return j - i + sq + lo; },
                            DType::I64)}));
    return r;
  };
  if (causal)
    allowed = andMask(c, allowed, frontier(0, -1));
  if (left >= 0 || right >= 0)
    allowed = andMask(c, allowed, frontier(right, left));
  if (lens) { // padding: key j < nonpad_kv_seqlen[b]
    Tensor iota(TensorType(DType::I64, {sk}));
    for (int64_t j = 0; j < sk; ++j)
      iota.setInt(j, j);
    allowed = andMask(c, allowed, c.emit(Op::Less, {c.constant(std::move(iota)), lens}));
  }
  Value *bias = added;
  if (allowed)
    bias = c.emit(Op::Where, {allowed, added ? added : c.scalar(t, 0.0), c.scalar(t, -INFINITY)});

  Value *s = c.scalar(t, std::sqrt(scale));
  Value *kt = c.emit(Op::Transpose, {c.emit(Op::Mul, {k, s})}, {{"perm", Shape{0, 1, 3, 2}}});
  Value *qk = c.emit(Op::MatMul, {c.emit(Op::Mul, {q, s}), kt});
  double softcap = c.attrFloat("softcap", 0.0);
  if (softcap > 0) {
    Value *cap = c.scalar(t, softcap);
    qk = c.emit(Op::Mul, {c.emit(Op::Tanh, {c.emit(Op::Div, {qk, cap})}), cap});
  }
  int64_t mode = c.attrInt("qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3)
    c.fail(cat("qk_matmul_output_mode = ", mode, " is not 0, 1, 2 or 3"));
  *qkOut = qk;
  if (bias)
    qk = c.emit(Op::Add, {qk, bias});
  if (mode == 2)
    *qkOut = qk;
  if (c.hasAttr("softmax_precision"))
    qk = c.castTo(qk, castTarget(c, static_cast<int32_t>(c.attrInt("softmax_precision", 1))));
  Value *p = c.emit(Op::Softmax, {qk}, {{"axis", int64_t(-1)}});
  if (bias) {
    int64_t last = bias->type().rank() - 1;
    Value *rowMax =
        c.emit(Op::ReduceMax, {bias}, {{"axes", Shape{last}}, {"keepdims", int64_t(1)}});
    Value *none = c.emit(Op::Equal, {rowMax, c.scalar(t, -INFINITY)});
    p = c.emit(Op::Where, {none, c.scalar(p->type().dtype, 0.0), p});
  }
  p = c.castTo(p, t);
  if (mode == 3)
    *qkOut = p;
  return c.emit(Op::MatMul, {p, v});
}

// Attention-23/24/25. 3-D inputs [B, S, H*D] are split into heads; a past key / value cache
// [B, Hkv, P, D] is concatenated before the new keys / values (present_key / present_value are
// the concatenations); grouped-query K/V heads are repeated to the query heads. is_causal lets
// query i see key j <= i + P (P = 0 without a cache: top-left). Softcap, nonpad_kv_seqlen,
// sliding windows, a short attn_mask and qk_matmul_output are written out in plain ops
// (attentionByOps); the rest is our attention op, whose own causal flag is the bottom-right
// diagonal (P = Sk - Sq): another offset becomes a constant bool mask, and'ed with a given bool
// mask or turned into -inf in a given additive one.
void convAttention(ConvertCtx &c) {
  if (c.hasInput(4) != c.hasInput(5))
    c.fail("past_key and past_value must be given together");
  Value *q = c.input(0), *k = c.input(1), *v = c.input(2);
  int64_t r = q->type().rank();
  if (r != 3 && r != 4)
    c.fail(cat("Q must be 3-D or 4-D, got ", q->type().str()));
  if (k->type().rank() != r || v->type().rank() != r)
    c.fail("Q, K and V must have the same rank");
  auto splitHeads = [&](Value *t, int64_t heads, const char *what) {
    const Shape &s = t->type().shape;
    if (heads < 1 || s[2] % heads != 0)
      c.fail(cat(what, " ", t->type().str(), " does not split into ", heads, " heads"));
    Value *h = c.reshape(t, {s[0], s[1], heads, s[2] / heads});
    return c.emit(Op::Transpose, {h}, {{"perm", Shape{0, 2, 1, 3}}});
  };
  if (r == 3) {
    int64_t qh = c.attrInt("q_num_heads", 0), kvh = c.attrInt("kv_num_heads", 0);
    if (qh < 1 || kvh < 1)
      c.fail("3-D inputs need the q_num_heads and kv_num_heads attributes");
    q = splitHeads(q, qh, "Q");
    k = splitHeads(k, kvh, "K");
    v = splitHeads(v, kvh, "V");
  }
  int64_t past = 0;
  if (c.hasInput(4)) {
    Value *pk = c.input(4), *pv = c.input(5);
    const Shape &kss = k->type().shape, &pks = pk->type().shape, &pvs = pv->type().shape;
    if (pk->type().rank() != 4 || pv->type().rank() != 4 || pks[0] != kss[0] || pks[1] != kss[1] ||
        pks[3] != kss[3] || pvs[0] != kss[0] || pvs[1] != kss[1] || pvs[2] != pks[2] ||
        pvs[3] != v->type().shape[3])
      c.fail(cat("past_key ", pk->type().str(), " / past_value ", pv->type().str(),
                 " do not match the keys ", k->type().str(), " and values ", v->type().str()));
    past = pks[2];
    k = c.emit(Op::Concat, {pk, k}, {{"axis", int64_t(2)}});
    v = c.emit(Op::Concat, {pv, v}, {{"axis", int64_t(2)}});
  }
  const Shape &qs = q->type().shape, &ks = k->type().shape;
  int64_t hq = qs[1], hkv = ks[1];
  Value *presentK = k, *presentV = v;
  if (hq != hkv) {
    if (hkv < 1 || hq % hkv != 0)
      c.fail(cat("query heads ", hq, " are not a multiple of key/value heads ", hkv));
    auto repeat = [&](Value *t) {
      const Shape &s = t->type().shape;
      Value *u = c.reshape(t, {s[0], s[1], 1, s[2], s[3]});
      u = c.emit(Op::Expand, {u}, {{"shape", Shape{s[0], s[1], hq / hkv, s[2], s[3]}}});
      return c.reshape(u, {s[0], hq, s[2], s[3]});
    };
    k = repeat(k);
    v = repeat(v);
  }
  int64_t sq = qs[2], sk = ks[2];
  bool causal = c.attrInt("is_causal", 0) != 0;
  double scale = c.attrFloat("scale", 1.0 / std::sqrt(static_cast<double>(qs[3])));
  Value *mask = c.hasInput(3) ? c.input(3) : nullptr;
  bool byOps = c.hasInput(6) || c.attrFloat("softcap", 0.0) != 0.0 ||
               c.attrInt("left_window_size", -1) != -1 ||
               c.attrInt("right_window_size", -1) != -1 || c.outputUsed(3) ||
               (mask && mask->type().rank() > 0 && mask->type().shape.back() < sk);
  Value *y = nullptr, *qkOut = nullptr;
  if (byOps) {
    y = attentionByOps(c, q, k, v, past, scale, causal, &qkOut);
  } else {
    std::vector<Value *> ops = {q, k, v};
    if (causal && past != sk - sq) { // the op's diagonal is Sk - Sq: this one as a mask
      Value *allowed = attentionGrid(
          c, sq, sk, [&](int64_t i, int64_t j) { return int64_t(j <= i + past); }, DType::Bool);
      if (!mask)
        mask = allowed;
      else if (mask->type().dtype == DType::Bool)
        mask = c.emit(Op::And, {mask, allowed});
      else
        mask = c.emit(Op::Where, {allowed, mask, c.scalar(mask->type().dtype, -INFINITY)});
      causal = false;
    }
    if (mask)
      ops.push_back(mask);
    y = c.emit(Op::Attention, ops, {{"scale", scale}, {"causal", int64_t(causal)}});
  }
  if (r == 3) {
    const Shape &ys = y->type().shape;
    y = c.emit(Op::Transpose, {y}, {{"perm", Shape{0, 2, 1, 3}}});
    y = c.reshape(y, {ys[0], ys[2], ys[1] * ys[3]});
  }
  c.setOutput(0, y);
  if (c.outputUsed(1))
    c.setOutput(1, presentK);
  if (c.outputUsed(2))
    c.setOutput(2, presentV);
  if (c.outputUsed(3))
    c.setOutput(3, qkOut);
}

// The instances the table (onnx_ops.cpp) names.
template void convSoftmax<Op::LogSoftmax>(ConvertCtx &);
template void convSoftmax<Op::Softmax>(ConvertCtx &);

} // namespace aicf::onnx_ops
