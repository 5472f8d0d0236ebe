// Reductions, ArgMax/ArgMin, TopK, and the ops whose result length is known only at run time
// (NonZero, Compress, Unique, NonMaxSuppression: issue 51).
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

// ---- reductions -------------------------------------------------------------------------------

// The reduced axes of a ReduceX node, or nullopt for "no reduction" (noop_with_empty_axes with
// empty axes). Axes became an input in ReduceSum-13 and in every other ReduceX at opset 18.
std::optional<Shape> reduceAxes(ConvertCtx &c, bool axesAsInput) {
  int64_t rank = c.rank(0);
  Shape axes;
  if (axesAsInput) {
    if (c.hasInput(1))
      axes = c.constInts(1, "axes");
  } else {
    axes = c.attrInts("axes");
  }
  if (axes.empty()) {
    if (c.attrInt("noop_with_empty_axes", 0))
      return std::nullopt;
    axes.resize(static_cast<size_t>(rank));
    std::iota(axes.begin(), axes.end(), 0);
    return axes;
  }
  return normAxes(c, axes, rank);
}

template <Op op>
void convReduce(ConvertCtx &c) {
  bool asInput = c.opset() >= 18 || (op == Op::ReduceSum && c.opset() >= 13);
  auto axes = reduceAxes(c, asInput);
  if (!axes) {
    c.setOutput(0, c.input(0));
    return;
  }
  c.setOutput(0,
              c.emit(op, {c.input(0)}, {{"axes", *axes}, {"keepdims", c.attrInt("keepdims", 1)}}));
}

void convReduceLogSum(ConvertCtx &c) {
  auto axes = reduceAxes(c, c.opset() >= 18);
  if (!axes) {
    c.setOutput(0, c.emit(Op::Log, {c.input(0)}));
    return;
  }
  Value *s = c.emit(Op::ReduceSum, {c.input(0)},
                    {{"axes", *axes}, {"keepdims", c.attrInt("keepdims", 1)}});
  c.setOutput(0, c.emit(Op::Log, {s}));
}

template <Op op>
void convArg(ConvertCtx &c) {
  int64_t axis = normAxis(c, c.attrInt("axis", 0), c.rank(0));
  c.setOutput(0, c.emit(op, {c.input(0)},
                        {{"axis", axis},
                         {"keepdims", c.attrInt("keepdims", 1)},
                         {"select_last_index", c.attrInt("select_last_index", 0)}}));
}

// TopK: k from the attribute (opset < 10) or an input; `sorted` = 0 allows any order, and the
// result is sorted anyway. A k computed at run time makes the outputs' length a data dim
// (set_dim, bounded by the axis's length: a k above it, or negative, fails the run).
void convTopK(ConvertCtx &c) {
  Value *x = c.input(0);
  if (x->type().rank() == 0)
    c.fail("input must have rank >= 1");
  int64_t axis = normAxis(c, c.attrInt("axis", -1), c.rank(0));
  const TensorType &t = x->type();
  // A symbolic axis (a length known only at run time, the candidates a NonZero kept) is read
  // from the dims; n is its most.
  const SymExpr len = t.symDim(static_cast<size_t>(axis));
  const int64_t n = c.bounds(len, "axis length").hi;
  AttrMap attrs{{"axis", axis}, {"largest", c.attrInt("largest", 1)}};
  std::vector<Value *> operands{x};
  if (c.opset() >= 10 && !c.constInput(1) && !c.symValue(c.input(1))) {
    Value *kv = c.input(1);
    if (kv->type().dtype != DType::I64 || !kv->type().isStatic() || kv->type().numel() != 1)
      c.fail(cat("k must be one i64 value, got ", kv->type().str()));
    Value *count = c.emitDataDim(Op::SetDim, {kv}, {}, 1, n)[0];
    const Node *setter = count->def();
    attrs["k"] = setter->i("bound");
    attrs["sym_k"] = std::vector<std::string>{setter->s("dim")};
    operands.push_back(count);
  } else {
    int64_t k = 0;
    if (c.opset() < 10) {
      k = c.attrInt("k", -1);
    } else {
      Shape kv = c.constInts(1, "k");
      if (kv.size() != 1)
        c.fail(cat("k must hold one value, got ", kv.size()));
      k = kv[0];
    }
    if (k < 0 || !c.provablyLe(SymExpr(k), len))
      c.fail(cat("k = ", k, " is not in [0, ", len.str(), "], the length of axis ", axis, " of ",
                 t.str(), c.rangesOf(len)));
    attrs["k"] = k;
  }
  std::vector<Value *> r = c.emitMulti(Op::TopK, operands, attrs, 2);
  c.setOutput(0, r[0]);
  c.setOutput(1, r[1]);
}

// ---- lengths known only at run time (issue 51) --------------------------------------------------

// The most elements of t over the dims' ranges.
int64_t maxElements(const ConvertCtx &c, const TensorType &t) {
  int64_t n = 1;
  for (size_t d = 0; d < t.shape.size(); ++d) {
    int64_t hi = c.bounds(t.symDim(d), "dim").hi;
    if (__builtin_mul_overflow(n, hi, &n))
      c.fail(cat(t.str(), " has too many elements"));
  }
  return n;
}

// NonZero: i64[rank, n] (a data dim, at most the element count).
void convNonZero(ConvertCtx &c) {
  Value *x = c.input(0);
  c.setOutput(0, c.emitDataDim(Op::NonZero, {x}, {}, 2, maxElements(c, x->type()))[0]);
}

// Compress: the slices along `axis` (of the flattened input without one) whose condition is
// true: non_zero of the condition gives their indices, a gather takes them. A condition longer
// than the axis is refused unless constant (ONNX allows only false entries past the end).
void convCompress(ConvertCtx &c) {
  Value *x = c.input(0), *cond = c.input(1);
  if (cond->type().rank() != 1)
    c.fail(cat("condition must be 1-D, got ", cond->type().str()));
  int64_t axis = 0;
  if (c.hasAttr("axis")) {
    axis = normAxis(c, c.attrInt("axis", 0), c.rank(0));
  } else {
    SymExpr n = 1;
    for (size_t d = 0; d < x->type().shape.size(); ++d)
      n = *SymExpr::mul(n, x->type().symDim(d));
    x = c.reshapeSym(x, {n});
  }
  SymExpr len = x->type().symDim(static_cast<size_t>(axis));
  SymExpr condLen = cond->type().symDim(0);
  if (const Tensor *t = c.constInput(1)) {
    for (int64_t i = 0; i < t->numel(); ++i)
      if (t->getInt(i) != 0 && !c.provablyLe(SymExpr(i + 1), len))
        c.fail(
            cat("condition entry ", i, " is true, past the ", len.str(), " slices of axis ", axis));
  } else if (!c.provablyLe(condLen, len)) {
    c.fail(cat("condition of length ", condLen.str(), " is longer than axis ", axis, " (",
               len.str(), ")"));
  }
  Value *idx = c.emitDataDim(Op::NonZero, {cond}, {}, 2, c.bounds(condLen, "length").hi)[0];
  const TensorType &it = idx->type();
  idx = c.reshapeSym(idx, {it.symDim(1)});
  c.setOutput(0, c.emit(Op::Gather, {x, idx}, {{"axis", axis}}));
}

// Unique: the distinct slices along `axis` (of the flattened input without one), a data dim of
// at most the axis length. The unique op works along axis 0, so another axis is moved first and
// the slices moved back.
void convUnique(ConvertCtx &c) {
  Value *x = c.input(0);
  int64_t axis = 0;
  Shape perm;
  if (c.hasAttr("axis")) {
    if (x->type().rank() == 0)
      c.fail("input must have rank >= 1 with an axis");
    axis = normAxis(c, c.attrInt("axis", 0), c.rank(0));
    perm.push_back(axis);
    for (int64_t d = 0; d < x->type().rank(); ++d)
      if (d != axis)
        perm.push_back(d);
    if (axis != 0)
      x = c.emit(Op::Transpose, {x}, {{"perm", perm}});
  } else {
    SymExpr n = 1;
    for (size_t d = 0; d < x->type().shape.size(); ++d)
      n = *SymExpr::mul(n, x->type().symDim(d));
    x = c.reshapeSym(x, {n});
  }
  int64_t sorted = c.attrInt("sorted", 1);
  if (sorted != 0 && sorted != 1)
    c.fail(cat("sorted must be 0 or 1, got ", sorted));
  int64_t bound = c.bounds(x->type().symDim(0), "axis length").hi;
  std::vector<Value *> r = c.emitDataDim(Op::Unique, {x}, {{"sorted", sorted}}, 5, bound);
  if (axis != 0) { // the slices back in place: the inverse of perm
    Shape inv(perm.size());
    for (size_t d = 0; d < perm.size(); ++d)
      inv[static_cast<size_t>(perm[d])] = static_cast<int64_t>(d);
    r[0] = c.emit(Op::Transpose, {r[0]}, {{"perm", inv}});
  }
  for (size_t k = 0; k < 4; ++k)
    if (k < c.numOutputs())
      c.setOutput(k, r[k]);
}

// NonMaxSuppression: the thresholds and the per-class limit must be compile-time constants;
// the selected rows are a data dim of at most batch x classes x min(limit, boxes).
void convNonMaxSuppression(ConvertCtx &c) {
  Value *boxes = c.input(0), *scores = c.input(1);
  auto scalarInput = [&](size_t i, const char *what) -> std::optional<double> {
    if (!c.hasInput(i))
      return std::nullopt;
    std::vector<double> v = c.constDoubles(i, what);
    if (v.size() > 1)
      c.fail(cat(what, " must hold one value, got ", v.size()));
    return v.empty() ? std::nullopt : std::optional<double>(v[0]);
  };
  std::optional<int64_t> maxPer; // an integer (INT64_MAX: no limit), not through a double
  if (c.hasInput(2)) {
    std::vector<int64_t> v = c.constInts(2, "max_output_boxes_per_class");
    if (v.size() > 1)
      c.fail(cat("max_output_boxes_per_class must hold one value, got ", v.size()));
    if (!v.empty())
      maxPer = v[0];
  }
  auto iou = scalarInput(3, "iou_threshold");
  auto score = scalarInput(4, "score_threshold");
  const TensorType &bt = boxes->type(), &st = scores->type();
  if (bt.rank() != 3 || st.rank() != 3)
    c.fail(cat("boxes ", bt.str(), " and scores ", st.str(), " must have rank 3"));
  int64_t per = maxPer ? std::max<int64_t>(0, *maxPer) : 0;
  int64_t batches = c.bounds(bt.symDim(0), "batch").hi;
  int64_t classes = c.bounds(st.symDim(1), "classes").hi;
  int64_t nb = c.bounds(bt.symDim(1), "boxes").hi;
  int64_t bound = 0;
  if (__builtin_mul_overflow(batches * classes, std::min(per, nb), &bound))
    c.fail("the most selected boxes overflow");
  AttrMap attrs{{"max_per_class", per},
                {"iou_threshold", iou ? *iou : 0.0},
                {"score_threshold", score ? *score : 0.0},
                {"has_score_threshold", int64_t(score ? 1 : 0)},
                {"center_point_box", c.attrInt("center_point_box", 0)}};
  if (bound == 0) { // nothing can be selected
    c.setOutput(0, c.constant(Tensor(TensorType(DType::I64, {0, 3}))));
    return;
  }
  c.setOutput(0, c.emitDataDim(Op::NonMaxSuppression, {boxes, scores}, attrs, 2, bound)[0]);
}

// The instances the table (onnx_ops.cpp) names.
template void convArg<Op::ArgMax>(ConvertCtx &);
template void convArg<Op::ArgMin>(ConvertCtx &);
template void convReduce<Op::ReduceL1>(ConvertCtx &);
template void convReduce<Op::ReduceL2>(ConvertCtx &);
template void convReduce<Op::ReduceLogSumExp>(ConvertCtx &);
template void convReduce<Op::ReduceMax>(ConvertCtx &);
template void convReduce<Op::ReduceMean>(ConvertCtx &);
template void convReduce<Op::ReduceMin>(ConvertCtx &);
template void convReduce<Op::ReduceProd>(ConvertCtx &);
template void convReduce<Op::ReduceSum>(ConvertCtx &);
template void convReduce<Op::ReduceSumSquare>(ConvertCtx &);

} // namespace aicf::onnx_ops
