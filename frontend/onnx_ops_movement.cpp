// Pooling and data movement: Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat, Split,
// Slice, Gather, and gather / scatter by index tensors.
// Converters of the ONNX op table (onnx_ops.cpp; conventions in its comment).
#include "frontend/onnx_ops_internal.h"

#include "ir/infer_sym.h"

#include "frontend/onnx_tensor.h"
#include "support/checked_math.h"
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

// ---- pooling ----------------------------------------------------------------------------------

template <Op op>
void convPool(ConvertCtx &c) {
  Shape in = spatialDims(c, 0);
  auto k = c.attrIntsOpt("kernel_shape");
  if (!k)
    c.fail("attribute 'kernel_shape' is required");
  Window w = windowAttrs(c, in, *k);
  AttrMap attrs = {{"kernel_shape", *k},
                   {"strides", w.strides},
                   {"pads", w.pads},
                   {"dilations", w.dilations},
                   {"ceil_mode", c.attrInt("ceil_mode", 0)}};
  if (op == Op::AvgPool)
    attrs["count_include_pad"] = c.attrInt("count_include_pad", 0);
  c.setOutput(0, c.emit(op, {c.input(0)}, attrs));
  // MaxPool's Indices (opset 8+): the flat index of each maximum, its own node.
  if (op == Op::MaxPool && c.outputUsed(1)) {
    attrs["storage_order"] = c.attrInt("storage_order", 0);
    c.setOutput(1, c.emit(Op::MaxPoolIndices, {c.input(0)}, attrs));
  }
}

// ---- data movement ----------------------------------------------------------------------------

// Resolves a Reshape target: 0 copies the input dim (unless allowzero), -1 is inferred.
Shape resolveReshape(ConvertCtx &c, const Shape &in, Shape target, bool allowZero) {
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == 0 && !allowZero) {
      if (i >= in.size())
        c.fail(cat("shape ", shapeStr(target), " copies dim ", i, " that ", shapeStr(in),
                   " does not have"));
      target[i] = in[i];
    }
    if (target[i] == -1) {
      if (infer >= 0)
        c.fail(cat("shape ", shapeStr(target), " has more than one -1"));
      infer = static_cast<int64_t>(i);
    } else if (target[i] < 0) {
      c.fail(cat("shape ", shapeStr(target), " has a negative dim"));
    } else {
      // Target dims are model data: their product can overflow before it is compared.
      auto k = checkedMul(known, target[i]);
      if (!k || *k > kMaxTensorElements)
        c.fail(cat("shape ", shapeStr(target), " has more than ", kMaxTensorElements, " elements"));
      known = *k;
    }
  }
  int64_t numel = product(in);
  if (infer >= 0) {
    if (known == 0 || numel % known != 0)
      c.fail(cat("cannot reshape ", shapeStr(in), " to ", shapeStr(target)));
    target[static_cast<size_t>(infer)] = numel / known;
  }
  if (product(target) != numel)
    c.fail(cat("cannot reshape ", shapeStr(in), " (", numel, " elements) to ", shapeStr(target),
               " (", product(target), " elements)"));
  return target;
}

// resolveReshape over expressions: a 0 copies the input's dim, a -1 is the element count over
// the other dims, which must divide it for every value (a single-term divisor: a product of
// dims); every other dim must be >= 1 throughout the ranges.
SymElems resolveReshapeSym(ConvertCtx &c, const SymElems &in, SymElems target, bool allowZero) {
  std::optional<size_t> infer;
  SymExpr known = 1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == SymExpr(0) && !allowZero) {
      if (i >= in.size())
        c.fail(cat("shape ", symElemsStr(target), " copies dim ", i, " that ", symElemsStr(in),
                   " does not have"));
      target[i] = in[i];
    }
    if (target[i] == SymExpr(-1)) {
      if (infer)
        c.fail(cat("shape ", symElemsStr(target), " has more than one -1"));
      infer = i;
      continue;
    }
    if (target[i].isConstant() && target[i].constant() < 0)
      c.fail(cat("shape ", symElemsStr(target), " has a negative dim"));
    requireDimNonNegative(c, target[i], cat("reshape target dim ", i));
    known = symOk(c, SymExpr::mul(known, target[i]));
  }
  SymExpr numel = symProduct(c, in);
  if (infer) {
    auto q = divExactSym(numel, known);
    if (!q)
      c.fail(cat("cannot reshape ", symElemsStr(in), " to ", symElemsStr(target), ": ", numel.str(),
                 " elements over ", known.str(),
                 " is not a whole number for every value of the symbolic dims"));
    target[*infer] = *q;
  }
  if (symProduct(c, target) != numel)
    c.fail(cat("cannot reshape ", symElemsStr(in), " (", numel.str(), " elements) to ",
               symElemsStr(target), " (", symProduct(c, target).str(),
               " elements) for every value of the symbolic dims"));
  return target;
}

void convReshape(ConvertCtx &c) {
  bool allowZero = c.attrInt("allowzero", 0) != 0;
  if (c.opset() >= 5 && (c.type(0).isSymbolic() || symInput(c, 1))) {
    c.setOutput(0, c.reshapeSym(c.input(0), resolveReshapeSym(c, symShapeOf(c.type(0)),
                                                              c.symInts(1, "shape"), allowZero)));
    return;
  }
  Shape target = c.opset() < 5 ? c.attrInts("shape") : c.constInts(1, "shape");
  c.setOutput(0, c.reshape(c.input(0), resolveReshape(c, c.type(0).shape, target, allowZero)));
}

void convFlatten(ConvertCtx &c) {
  const Shape &s = c.type(0).shape;
  int64_t r = static_cast<int64_t>(s.size());
  int64_t axis = c.attrInt("axis", 1);
  if (axis < -r || axis > r)
    c.fail(cat("axis ", axis, " is out of range for rank ", r));
  if (axis < 0)
    axis += r;
  if (c.type(0).isSymbolic()) {
    SymElems d = symShapeOf(c.type(0));
    size_t a = static_cast<size_t>(axis);
    c.setOutput(0, c.reshapeSym(c.input(0), {symProduct(c, d, 0, a), symProduct(c, d, a)}));
    return;
  }
  c.setOutput(0, c.reshape(c.input(0), {product(s, 0, axis), product(s, axis)}));
}

// Squeeze / Unsqueeze axes: an attribute before opset 13, an input from 13 on.
std::optional<Shape> axesOperand(ConvertCtx &c) {
  if (c.opset() >= 13)
    return c.hasInput(1) ? std::optional<Shape>(c.constInts(1, "axes")) : std::nullopt;
  return c.attrIntsOpt("axes");
}

// Squeeze of symbolic dims: a dim is squeezed only when it is 1 for every value; one that is 1
// for some values only would change the rank with the value (refused).
void squeezeSym(ConvertCtx &c, const std::optional<Shape> &axes) {
  SymElems s = symShapeOf(c.type(0)), out;
  Shape ax;
  if (axes)
    ax = normAxes(c, *axes, static_cast<int64_t>(s.size()));
  for (size_t d = 0; d < s.size(); ++d) {
    bool one = s[d] == SymExpr(1);
    if (!axes) {
      if (!one && !s[d].isConstant() && c.bounds(s[d], "dim").lo <= 1)
        c.fail(cat("squeezes the dims of size 1 of ", c.type(0).str(), ", and dim ", d, " (",
                   s[d].str(), ") is 1 for some values only", c.rangesOf(s[d]), ": give the axes"));
      if (!one)
        out.push_back(s[d]);
      continue;
    }
    bool squeezed = std::binary_search(ax.begin(), ax.end(), static_cast<int64_t>(d));
    if (squeezed && !one)
      c.fail(cat("cannot squeeze axis ", d, " of ", c.type(0).str(),
                 ": its size is not 1 for every value of the symbolic dims"));
    if (!squeezed)
      out.push_back(s[d]);
  }
  c.setOutput(0, c.reshapeSym(c.input(0), out));
}

void convSqueeze(ConvertCtx &c) {
  const Shape &s = c.type(0).shape;
  auto axes = axesOperand(c);
  if (c.type(0).isSymbolic()) {
    squeezeSym(c, axes);
    return;
  }
  Shape out;
  if (!axes) {
    for (int64_t d : s)
      if (d != 1)
        out.push_back(d);
  } else {
    Shape ax = normAxes(c, *axes, static_cast<int64_t>(s.size()));
    for (size_t d = 0; d < s.size(); ++d) {
      bool squeezed = std::binary_search(ax.begin(), ax.end(), static_cast<int64_t>(d));
      if (squeezed && s[d] != 1)
        c.fail(cat("cannot squeeze axis ", d, " of ", c.type(0).str(), ": its size is not 1"));
      if (!squeezed)
        out.push_back(s[d]);
    }
  }
  c.setOutput(0, c.reshape(c.input(0), out));
}

void convUnsqueeze(ConvertCtx &c) {
  const Shape &s = c.type(0).shape;
  auto axes = axesOperand(c);
  if (!axes)
    c.fail("axes are required");
  int64_t outRank = static_cast<int64_t>(s.size() + axes->size());
  Shape ax = normAxes(c, *axes, outRank);
  if (c.type(0).isSymbolic()) {
    SymElems in = symShapeOf(c.type(0)), out;
    size_t next = 0;
    for (int64_t d = 0; d < outRank; ++d)
      out.push_back(std::binary_search(ax.begin(), ax.end(), d) ? SymExpr(1) : in[next++]);
    c.setOutput(0, c.reshapeSym(c.input(0), out));
    return;
  }
  Shape out;
  size_t next = 0;
  for (int64_t d = 0; d < outRank; ++d)
    out.push_back(std::binary_search(ax.begin(), ax.end(), d) ? 1 : s[next++]);
  c.setOutput(0, c.reshape(c.input(0), out));
}

void convTranspose(ConvertCtx &c) {
  int64_t r = c.rank(0);
  Shape perm = c.attrIntsOpt("perm").value_or(Shape{});
  if (!c.hasAttr("perm"))
    for (int64_t i = r - 1; i >= 0; --i)
      perm.push_back(i);
  for (int64_t &p : perm)
    p = normAxis(c, p, r, "perm entry");
  Shape id(static_cast<size_t>(r));
  std::iota(id.begin(), id.end(), 0);
  c.setOutput(0, perm == id ? c.input(0) : c.emit(Op::Transpose, {c.input(0)}, {{"perm", perm}}));
}

void convConcat(ConvertCtx &c) {
  std::vector<Value *> xs;
  for (size_t i = 0; i < c.numInputs(); ++i)
    if (c.hasInput(i))
      xs.push_back(c.input(i));
  if (xs.empty())
    c.fail("needs at least one input");
  // Concat-1 defaults the axis to 1; from opset 4 on it is required.
  int64_t axis = c.opset() < 4 ? c.attrInt("axis", 1) : c.attrIntReq("axis");
  axis = normAxis(c, axis, xs[0]->type().rank());
  // Empty pieces (a 0 extent along the axis) add nothing: dropped once their shape checks out.
  std::vector<Value *> kept;
  for (Value *x : xs) {
    const TensorType &t = x->type();
    if (!t.isStatic() || t.numel() != 0) {
      kept.push_back(x);
      continue;
    }
    Shape want = xs[0]->type().shape, got = t.shape;
    if (got.size() != want.size())
      c.fail(cat("input ", t.str(), " and ", xs[0]->type().str(), " differ in rank"));
    want[static_cast<size_t>(axis)] = got[static_cast<size_t>(axis)] = 0;
    if (got != want && xs[0]->type().numel() != 0)
      c.fail(cat("input ", t.str(), " does not fit ", xs[0]->type().str(), " beside axis ", axis));
  }
  if (!kept.empty() && kept.size() < xs.size())
    xs = kept;
  c.setOutput(0, xs.size() == 1 ? xs[0] : c.emit(Op::Concat, xs, {{"axis", axis}}));
}

void convSplit(ConvertCtx &c) {
  const Shape &s = c.type(0).shape;
  int64_t axis = normAxis(c, c.attrInt("axis", 0), static_cast<int64_t>(s.size()));
  int64_t dim = s[static_cast<size_t>(axis)];
  int64_t n = static_cast<int64_t>(c.numOutputs());
  Shape sizes;
  if ((c.opset() >= 13 || c.opset() < 2) && c.hasInput(1)) // Split-1 and 13+: an input
    sizes = c.constInts(1, "split");
  else if (c.opset() < 13 && c.hasAttr("split"))
    sizes = c.attrInts("split");
  if (sizes.empty()) {
    if (c.opset() >= 18 && c.hasAttr("num_outputs")) {
      // Split-18: chunks of ceil(dim / num_outputs), the last one smaller.
      int64_t parts = c.attrInt("num_outputs", n);
      if (parts != n || parts < 1)
        c.fail(cat("num_outputs = ", parts, " but the node has ", n, " outputs"));
      int64_t chunk = (dim + parts - 1) / parts;
      for (int64_t i = 0; i < parts; ++i)
        sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - chunk * i)));
    } else {
      if (n < 1 || dim % n != 0)
        c.fail(cat("dim ", dim, " does not split evenly into ", n, " outputs"));
      sizes.assign(static_cast<size_t>(n), dim / n);
    }
  }
  if (static_cast<int64_t>(sizes.size()) != n)
    c.fail(cat("split ", shapeStr(sizes), " has ", sizes.size(), " sizes for ", n, " outputs"));
  // Empty pieces (size 0 beside others: a rotary embedding over the whole head leaves nothing
  // unrotated) are constants holding no values, which Concat drops; the split cuts the rest.
  Shape kept;
  for (int64_t sz : sizes)
    if (sz != 0)
      kept.push_back(sz);
  if (kept.empty() || kept.size() == sizes.size() || c.type(0).isSymbolic()) {
    std::vector<Value *> outs = c.emitMulti(
        Op::Split, {c.input(0)}, {{"axis", axis}, {"sizes", sizes}}, static_cast<int>(n));
    for (size_t i = 0; i < outs.size(); ++i)
      c.setOutput(i, outs[i]);
    return;
  }
  std::vector<Value *> pieces =
      kept.size() == 1 ? std::vector<Value *>{c.input(0)}
                       : c.emitMulti(Op::Split, {c.input(0)}, {{"axis", axis}, {"sizes", kept}},
                                     static_cast<int>(kept.size()));
  size_t next = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] != 0) {
      c.setOutput(i, pieces[next++]);
      continue;
    }
    Shape empty = s;
    empty[static_cast<size_t>(axis)] = 0;
    c.setOutput(i, c.constant(Tensor(TensorType(c.type(0).dtype, empty))));
  }
}

// Clamps ONNX slice bounds to our convention (see inferSlice): for a positive step start and
// end lie in [0, dim]; for a negative one start lies in [0, dim-1] and end in [-1, dim-1].
void clampSlice(int64_t dim, int64_t step, int64_t &start, int64_t &end) {
  if (start < 0)
    start += dim;
  if (end < 0)
    end += dim;
  auto clamp = [](int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; };
  if (step > 0) {
    start = clamp(start, 0, dim);
    end = clamp(end, 0, dim);
  } else {
    start = clamp(start, -1, dim - 1);
    end = clamp(end, -1, dim - 1);
  }
}

// A slice bound (step > 0) over a symbolic axis or given as an expression, as clampSlice makes
// it: negative counts from the end, then clamped into [0, dim]. Exact only when the same case
// applies for every value of the dims (always within the axis, or always clamped to one end);
// a bound clamped for some values only would make the extent a min(), which is refused.
SymExpr sliceBound(ConvertCtx &c, const SymExpr &v, const SymExpr &dim, const char *what,
                   int64_t axis, const TensorType &t) {
  bool negative;
  if (v.isConstant()) {
    negative = v.constant() < 0;
  } else {
    SymBounds b = c.bounds(v, cat("slice ", what));
    if (b.lo < 0 && b.hi >= 0)
      c.fail(cat("slice ", what, " ", v.str(), " of axis ", axis, " of ", t.str(),
                 " is negative (counted from the end) for some values only", c.rangesOf(v)));
    negative = b.hi < 0;
  }
  SymExpr x = negative ? symOk(c, SymExpr::add(v, dim)) : v;
  if (c.provablyLe(dim, x))
    return dim;
  if (c.provablyLe(x, SymExpr(0)))
    return SymExpr(0);
  if (c.provablyLe(SymExpr(0), x) && c.provablyLe(x, dim))
    return x;
  // A constant bound into a length known only at run time (the first 100 of the boxes NMS
  // kept): min(v, len) is itself such a length, computed when the length is.
  if (v.isConstant() && v.constant() >= 0)
    if (Value *len = c.dataLength(dim)) {
      Value *bound =
          c.emit(Op::Min, {len, c.scalar(DType::I64, static_cast<double>(v.constant()))});
      int64_t most = std::min(v.constant(), c.bounds(dim, "axis length").hi);
      Value *count = c.emitDataDim(Op::SetDim, {bound}, {}, 1, most)[0];
      return SymExpr::symbol(count->def()->s("dim"));
    }
  c.fail(cat("slice ", what, " ", v.str(), " of axis ", axis, " of ", t.str(),
             " is clamped to the axis for some values of the dims only",
             c.rangesOf(symOk(c, SymExpr::add(x, dim)))));
}

// Slice's optional axes (default: 0, 1, ...) and steps (default: 1), and the four lists'
// lengths checked, for the static and the symbolic form alike.
void sliceDefaults(const ConvertCtx &c, size_t starts, size_t ends, Shape &axes, Shape &steps) {
  if (axes.empty())
    for (size_t i = 0; i < starts; ++i)
      axes.push_back(static_cast<int64_t>(i));
  if (steps.empty())
    steps.assign(starts, 1);
  if (ends != starts || axes.size() != starts || steps.size() != starts)
    c.fail("starts, ends, axes and steps must have the same length");
}

void sliceSym(ConvertCtx &c) {
  const TensorType &t = c.type(0);
  int64_t r = t.rank();
  SymElems starts, ends;
  Shape axes, steps;
  if (c.opset() < 10) {
    for (int64_t v : c.attrInts("starts"))
      starts.emplace_back(v);
    for (int64_t v : c.attrInts("ends"))
      ends.emplace_back(v);
    axes = c.attrInts("axes");
  } else {
    starts = c.symInts(1, "starts");
    ends = c.symInts(2, "ends");
    if (c.hasInput(3))
      axes = c.constInts(3, "axes");
    if (c.hasInput(4))
      steps = c.constInts(4, "steps");
  }
  sliceDefaults(c, starts.size(), ends.size(), axes, steps);
  std::vector<bool> seen(static_cast<size_t>(r), false);
  bool identity = true, symbolic = false;
  for (size_t k = 0; k < axes.size(); ++k) {
    axes[k] = normAxis(c, axes[k], r);
    if (seen[static_cast<size_t>(axes[k])])
      c.fail(cat("axis ", axes[k], " is sliced twice"));
    seen[static_cast<size_t>(axes[k])] = true;
    if (steps[k] == 0)
      c.fail("steps must not be 0");
    SymExpr dim = t.symDim(static_cast<size_t>(axes[k]));
    if (dim.isConstant() && starts[k].isConstant() && ends[k].isConstant()) {
      int64_t s0 = starts[k].constant(), e0 = ends[k].constant();
      clampSlice(dim.constant(), steps[k], s0, e0);
      starts[k] = s0;
      ends[k] = e0;
      identity = identity && steps[k] == 1 && s0 == 0 && e0 == dim.constant();
      continue;
    }
    if (steps[k] < 0)
      c.fail(cat("a reverse slice (step ", steps[k], ") of axis ", axes[k], " of ", t.str(),
                 " with symbolic dims or bounds is not supported"));
    starts[k] = sliceBound(c, starts[k], dim, "start", axes[k], t);
    ends[k] = sliceBound(c, ends[k], dim, "end", axes[k], t);
    SymExpr extent = symOk(c, SymExpr::sub(ends[k], starts[k]));
    if (!extent.isConstant() && steps[k] != 1)
      c.fail(cat("a slice of axis ", axes[k], " of ", t.str(), " from ", starts[k].str(), " to ",
                 ends[k].str(), " by step ", steps[k],
                 ": a symbolic extent is supported with step 1 only"));
    if (c.bounds(extent, "slice extent").lo < (c.usesDataDim(extent) ? 0 : 1))
      c.fail(cat("the slice [", starts[k].str(), ", ", ends[k].str(), ") of axis ", axes[k], " of ",
                 t.str(), " is empty for some values of the dims", c.rangesOf(extent)));
    symbolic = symbolic || !starts[k].isConstant() || !ends[k].isConstant();
    identity = identity && steps[k] == 1 && starts[k] == SymExpr(0) && ends[k] == dim;
  }
  if (identity) {
    c.setOutput(0, c.input(0));
    return;
  }
  Shape s0, e0;
  std::vector<std::string> ss, es;
  for (size_t k = 0; k < axes.size(); ++k) {
    s0.push_back(c.planning(starts[k]));
    e0.push_back(c.planning(ends[k]));
    ss.push_back(starts[k].str());
    es.push_back(ends[k].str());
  }
  AttrMap attrs = {{"starts", s0}, {"ends", e0}, {"axes", axes}, {"steps", steps}};
  if (symbolic) {
    attrs["sym_starts"] = ss;
    attrs["sym_ends"] = es;
  }
  c.setOutput(0, c.emit(Op::Slice, {c.input(0)}, std::move(attrs)));
}

void convSlice(ConvertCtx &c) {
  if (c.type(0).isSymbolic() || (c.opset() >= 10 && (symInput(c, 1) || symInput(c, 2)))) {
    sliceSym(c);
    return;
  }
  const Shape &s = c.type(0).shape;
  int64_t r = static_cast<int64_t>(s.size());
  Shape starts, ends, axes, steps;
  if (c.opset() < 10) { // Slice-1: attributes, step 1
    starts = c.attrInts("starts");
    ends = c.attrInts("ends");
    axes = c.attrInts("axes");
  } else {
    starts = c.constInts(1, "starts");
    ends = c.constInts(2, "ends");
    if (c.hasInput(3))
      axes = c.constInts(3, "axes");
    if (c.hasInput(4))
      steps = c.constInts(4, "steps");
  }
  sliceDefaults(c, starts.size(), ends.size(), axes, steps);
  std::vector<bool> seen(static_cast<size_t>(r), false);
  bool identity = true;
  for (size_t k = 0; k < axes.size(); ++k) {
    axes[k] = normAxis(c, axes[k], r);
    if (seen[static_cast<size_t>(axes[k])])
      c.fail(cat("axis ", axes[k], " is sliced twice"));
    seen[static_cast<size_t>(axes[k])] = true;
    if (steps[k] == 0)
      c.fail("steps must not be 0");
    int64_t dim = s[static_cast<size_t>(axes[k])];
    clampSlice(dim, steps[k], starts[k], ends[k]);
    identity = identity && steps[k] == 1 && starts[k] == 0 && ends[k] == dim;
  }
  if (identity) {
    c.setOutput(0, c.input(0));
    return;
  }
  c.setOutput(0, c.emit(Op::Slice, {c.input(0)},
                        {{"starts", starts}, {"ends", ends}, {"axes", axes}, {"steps", steps}}));
}

// Constant indices into a symbolic axis: each must be in range for every value of the dim. A
// negative one counts from the end, a symbolic position: one such index is a slice of extent 1
// from dim + index (then the axis dropped for a scalar index); several are refused.
void gatherSym(ConvertCtx &c, Value *x, const Tensor &t, int64_t axis) {
  SymExpr dim = x->type().symDim(static_cast<size_t>(axis));
  SymBounds b = c.bounds(dim, "dim");
  bool negative = false;
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t v = t.getInt(i);
    if (v >= b.lo || v < -b.lo)
      c.fail(cat("index ", v, " is out of range for axis ", axis, " of ", x->type().str(),
                 " for some values of the dims", c.rangesOf(dim)));
    negative = negative || v < 0;
  }
  if (!negative) {
    c.setOutput(0, c.emit(Op::Gather, {x, c.input(1)}, {{"axis", axis}}));
    return;
  }
  if (t.numel() != 1)
    c.fail(cat("negative indices into the symbolic axis ", axis, " of ", x->type().str(),
               " count from a symbolic end: supported for one index only"));
  SymExpr start = symOk(c, SymExpr::add(dim, SymExpr(t.getInt(0))));
  SymExpr end = symOk(c, SymExpr::add(start, SymExpr(1)));
  Value *s = c.emit(Op::Slice, {x},
                    {{"starts", Shape{c.planning(start)}},
                     {"ends", Shape{c.planning(end)}},
                     {"axes", Shape{axis}},
                     {"steps", Shape{1}},
                     {"sym_starts", std::vector<std::string>{start.str()}},
                     {"sym_ends", std::vector<std::string>{end.str()}}});
  SymElems out = symShapeOf(x->type());
  out.erase(out.begin() + axis);
  out.insert(out.begin() + axis, static_cast<size_t>(t.type().rank()), SymExpr(1));
  c.setOutput(0, c.reshapeSym(s, out));
}

// A Gather of an activation at constant indices that step evenly (one index, or i0, i0 + s, ...
// with s > 0: torch's x[:, 0], a class token, every other channel) is a strided slice reshaped to
// the gather's result: layout ops, which fusion folds into their readers as index maps, where a
// gather is a kernel of its own. Null when the indices do not step evenly (or x is a weight or
// symbolic: a shape value's gather stays as the symbolic-values fold reads it).
Value *gatherAsSlice(ConvertCtx &c, Value *x, const Tensor &t, int64_t axis, int64_t dim) {
  const int64_t n = t.numel();
  if (x->isWeight() || x->type().isSymbolic() || n < 1)
    return nullptr;
  auto at = [&](int64_t i) { return t.getInt(i) < 0 ? t.getInt(i) + dim : t.getInt(i); };
  const int64_t first = at(0), step = n > 1 ? at(1) - at(0) : 1;
  if (step <= 0)
    return nullptr;
  for (int64_t i = 1; i < n; ++i)
    if (at(i) != first + i * step)
      return nullptr;
  Value *sliced = c.emit(Op::Slice, {x},
                         {{"starts", Shape{first}},
                          {"ends", Shape{first + (n - 1) * step + 1}},
                          {"axes", Shape{axis}},
                          {"steps", Shape{step}}});
  const Shape &xs = x->type().shape;
  Shape out(xs.begin(), xs.begin() + axis);
  out.insert(out.end(), t.shape().begin(), t.shape().end());
  out.insert(out.end(), xs.begin() + axis + 1, xs.end());
  return c.reshape(sliced, out);
}

void convGather(ConvertCtx &c) {
  Value *x = c.input(0), *idx = c.input(1);
  int64_t axis = normAxis(c, c.attrInt("axis", 0), x->type().rank());
  int64_t dim = x->type().shape[static_cast<size_t>(axis)];
  // Constant indices: check the range and make negative ones positive.
  if (const Tensor *t = c.constInput(1)) {
    if (!isInteger(t->dtype()))
      c.fail(cat("indices must be integers, got ", t->type().str()));
    if (!x->type().symDim(static_cast<size_t>(axis)).isConstant()) {
      gatherSym(c, x, *t, axis);
      return;
    }
    bool negative = false;
    for (int64_t i = 0; i < t->numel(); ++i) {
      int64_t v = t->getInt(i);
      if (v < -dim || v >= dim)
        c.fail(cat("index ", v, " is out of range for axis ", axis, " of ", x->type().str()));
      negative = negative || v < 0;
    }
    if (negative) {
      Tensor fixed(TensorType(DType::I64, t->shape()));
      for (int64_t i = 0; i < t->numel(); ++i)
        fixed.setInt(i, t->getInt(i) < 0 ? t->getInt(i) + dim : t->getInt(i));
      idx = c.constant(std::move(fixed));
    }
    if (Value *s = gatherAsSlice(c, x, *t, axis, dim)) {
      c.setOutput(0, s);
      return;
    }
  }
  c.setOutput(0, c.emit(Op::Gather, {x, idx}, {{"axis", axis}}));
}

// ---- gather / scatter by index tensors ----------------------------------------------------------
// GatherElements, GatherND, ScatterElements (and Scatter-9, its deprecated spelling) and
// ScatterND map to the registry ops of the same semantics. Indices must be int32 or int64;
// constant ones are range-checked here so a bad model fails at import naming the node (the
// interpreter checks computed ones; compiled kernels keep their reads and writes in bounds). All
// inputs constant (an exporter's mask built by slice assignment): the node folds at import.

void requireIndexInput(const ConvertCtx &c, size_t i) {
  DType t = c.type(i).dtype;
  if (t != DType::I64 && t != DType::I32)
    c.fail(cat("indices must be int32 or int64, got ", c.type(i).str()));
}

// Constant element indices (GatherElements, ScatterElements): each in [-dim, dim) of the axis.
void checkElementIndices(const ConvertCtx &c, int64_t axis) {
  const Tensor *t = c.constInput(1);
  if (!t)
    return;
  int64_t dim = c.type(0).shape[static_cast<size_t>(axis)];
  for (int64_t i = 0; i < t->numel(); ++i) {
    int64_t v = t->getInt(i);
    if (v < -dim || v >= dim)
      c.fail(cat("index ", v, " is out of range for axis ", axis, " of ", c.type(0).str()));
  }
}

// Constant index tuples (GatherND, ScatterND): element j of each in [-dim, dim) of data axis
// batch_dims + j.
void checkTupleIndices(const ConvertCtx &c, int64_t batchDims) {
  const Tensor *t = c.constInput(1);
  if (!t || t->shape().empty())
    return;
  int64_t k = t->shape().back();
  const Shape &xs = c.type(0).shape;
  if (k < 1 || batchDims + k > static_cast<int64_t>(xs.size()))
    return; // inference reports the shape
  for (int64_t i = 0; i < t->numel(); ++i) {
    int64_t axis = batchDims + i % k, dim = xs[static_cast<size_t>(axis)], v = t->getInt(i);
    if (v < -dim || v >= dim)
      c.fail(cat("index ", v, " is out of range for axis ", axis, " of ", c.type(0).str()));
  }
}

std::string scatterReduction(const ConvertCtx &c) {
  std::string r = c.attrStr("reduction", "none");
  if (r != "none" && r != "add" && r != "mul" && r != "max" && r != "min")
    c.fail(cat("reduction '", r, "' is not none, add, mul, max or min"));
  return r;
}

void convGatherElements(ConvertCtx &c) {
  requireIndexInput(c, 1);
  if (c.rank(0) < 1 || c.rank(1) != c.rank(0))
    c.fail(cat("data ", c.type(0).str(), " and indices ", c.type(1).str(),
               " must have the same rank >= 1"));
  int64_t axis = normAxis(c, c.attrInt("axis", 0), c.rank(0));
  checkElementIndices(c, axis);
  c.setOutput(0, c.emit(Op::GatherElements, {c.input(0), c.input(1)}, {{"axis", axis}}));
}

void convGatherND(ConvertCtx &c) {
  requireIndexInput(c, 1);
  int64_t b = c.attrInt("batch_dims", 0);
  checkTupleIndices(c, b);
  // One index per tuple and no batch dims: a gather along axis 0 (what exporters write for
  // x[mask]: NonZero, Transpose, GatherND), which takes symbolic and run-time lengths.
  const TensorType &it = c.type(1);
  if (b == 0 && it.rank() >= 1 && it.symDim(static_cast<size_t>(it.rank() - 1)) == SymExpr(1)) {
    SymElems rows = symShapeOf(it);
    rows.pop_back();
    Value *idx = c.reshapeSym(c.input(1), rows);
    c.setOutput(0, c.emit(Op::Gather, {c.input(0), idx}, {{"axis", int64_t(0)}}));
    return;
  }
  c.setOutput(0, c.emit(Op::GatherND, {c.input(0), c.input(1)}, {{"batch_dims", b}}));
}

// ScatterElements, and Scatter (opsets 9 and 10, the same op without reduction).
void convScatterElements(ConvertCtx &c) {
  requireIndexInput(c, 1);
  if (c.rank(0) < 1 || c.rank(1) != c.rank(0))
    c.fail(cat("data ", c.type(0).str(), " and indices ", c.type(1).str(),
               " must have the same rank >= 1"));
  if (c.type(2).shape != c.type(1).shape)
    c.fail(cat("updates ", c.type(2).str(), " must have the shape of indices ", c.type(1).str()));
  int64_t axis = normAxis(c, c.attrInt("axis", 0), c.rank(0));
  checkElementIndices(c, axis);
  c.setOutput(0, c.emit(Op::ScatterElements, {c.input(0), c.input(1), c.input(2)},
                        {{"axis", axis}, {"reduction", scatterReduction(c)}}));
}

void convScatterND(ConvertCtx &c) {
  requireIndexInput(c, 1);
  checkTupleIndices(c, 0);
  c.setOutput(0, c.emit(Op::ScatterND, {c.input(0), c.input(1), c.input(2)},
                        {{"reduction", scatterReduction(c)}}));
}

// Expand with symbolic dims: numpy broadcasting of the input's dims and the target's, which
// holds for every value only where the two are equal or one is 1.

// The instances the table (onnx_ops.cpp) names.
template void convPool<Op::AvgPool>(ConvertCtx &);
template void convPool<Op::MaxPool>(ConvertCtx &);

} // namespace aicf::onnx_ops
