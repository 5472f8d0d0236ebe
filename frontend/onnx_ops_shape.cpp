// Expand, Tile, Pad, OneHot, CumSum, Resize / Upsample, DepthToSpace / SpaceToDepth, Trilu.
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

void expandSym(ConvertCtx &c) {
  SymElems in = symShapeOf(c.type(0)), target = c.symInts(1, "shape");
  size_t r = std::max(in.size(), target.size()), bad = 0;
  auto bc = broadcastSymShapes(in, target, &bad);
  if (!bc) {
    SymExpr a = bad < r - in.size() ? SymExpr(1) : in[bad - (r - in.size())];
    SymExpr b = bad < r - target.size() ? SymExpr(1) : target[bad - (r - target.size())];
    c.fail(cat("cannot expand ", c.type(0).str(), " to ", symElemsStr(target), ": ", a.str(),
               " and ", b.str(), " broadcast only where they are equal"));
  }
  SymElems out = *bc;
  for (size_t i = 0; i < r; ++i)
    requireDimNonNegative(c, out[i], cat("expanded dim ", i));
  c.setOutput(0, out == in ? c.input(0) : c.emit(Op::Expand, {c.input(0)}, symShapeAttrs(c, out)));
}

void convExpand(ConvertCtx &c) {
  if (c.type(0).isSymbolic() || symInput(c, 1)) {
    expandSym(c);
    return;
  }
  Shape target = c.constInts(1, "shape");
  auto out = broadcastShapes(c.type(0).shape, target);
  if (!out)
    c.fail(cat("cannot expand ", c.type(0).str(), " to ", shapeStr(target)));
  c.setOutput(0, *out == c.type(0).shape ? c.input(0)
                                         : c.emit(Op::Expand, {c.input(0)}, {{"shape", *out}}));
}

void convTile(ConvertCtx &c) {
  Shape reps = c.constInts(1, "repeats");
  bool identity = std::all_of(reps.begin(), reps.end(), [](int64_t v) { return v == 1; });
  c.setOutput(0, identity && static_cast<int64_t>(reps.size()) == c.rank(0)
                     ? c.input(0)
                     : c.emit(Op::Tile, {c.input(0)}, {{"repeats", reps}}));
}

void convPad(ConvertCtx &c) {
  int64_t r = c.rank(0);
  std::string mode = c.attrStr("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    c.fail(cat("mode '", mode, "' is not supported (constant, reflect or edge)"));
  Shape pads;
  double value = 0.0;
  if (c.opset() < 11) { // Pad-2: pads and value attributes
    pads = c.attrInts(c.hasAttr("pads") ? "pads" : "paddings");
    value = c.attrFloat("value", 0.0);
  } else {
    pads = c.constInts(1, "pads");
    if (c.hasInput(2)) {
      const Tensor &v = c.requireConst(2, "constant_value");
      if (v.numel() != 1)
        c.fail(cat("constant_value must be a scalar, got ", v.type().str()));
      value = v.getDouble(0);
    }
    if (c.hasInput(3)) { // Pad-18: pads for the listed axes only
      Shape axes = c.constInts(3, "axes");
      if (pads.size() != 2 * axes.size())
        c.fail(cat("pads ", shapeStr(pads), " need 2 values per axis of ", shapeStr(axes)));
      Shape full(static_cast<size_t>(2 * r), 0);
      for (size_t k = 0; k < axes.size(); ++k) {
        int64_t a = normAxis(c, axes[k], r);
        full[static_cast<size_t>(a)] = pads[k];
        full[static_cast<size_t>(r + a)] = pads[axes.size() + k];
      }
      pads = full;
    }
  }
  if (static_cast<int64_t>(pads.size()) != 2 * r)
    c.fail(cat("pads ", shapeStr(pads), " need ", 2 * r, " values for ", c.type(0).str()));
  if (std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; })) {
    c.setOutput(0, c.input(0));
    return;
  }
  c.setOutput(0, c.emit(Op::Pad, {c.input(0)}, {{"pads", pads}, {"mode", mode}, {"value", value}}));
}

// OneHot: indices (any numeric type, negative ones count from the end) compared with an iota
// along the new axis select values[1] (on) or values[0] (off).
void convOneHot(ConvertCtx &c) {
  Value *idx = c.castTo(c.input(0), DType::I64);
  const Tensor &depthT = c.requireConst(1, "depth");
  if (depthT.numel() != 1)
    c.fail(cat("depth must be a scalar, got ", depthT.type().str()));
  auto depth = static_cast<int64_t>(depthT.getDouble(0));
  if (depth < 1)
    c.fail(cat("depth ", depth, " must be >= 1"));
  Value *values = c.input(2);
  if (values->type().numel() != 2)
    c.fail(cat("values must hold [off, on], got ", values->type().str()));
  values = c.reshape(values, {2});
  auto pick = [&](int64_t i) {
    Value *v = c.emit(
        Op::Slice, {values},
        {{"starts", Shape{i}}, {"ends", Shape{i + 1}}, {"axes", Shape{0}}, {"steps", Shape{1}}});
    return c.reshape(v, {});
  };
  Value *off = pick(0), *on = pick(1);
  Value *dv = c.scalar(DType::I64, static_cast<double>(depth));
  Value *neg = c.emit(Op::Less, {idx, c.scalar(DType::I64, 0)});
  idx = c.emit(Op::Where, {neg, c.emit(Op::Add, {idx, dv}), idx});
  int64_t outRank = idx->type().rank() + 1;
  int64_t axis = normAxis(c, c.attrInt("axis", -1), outRank);
  Shape us = idx->type().shape;
  us.insert(us.begin() + axis, 1);
  Shape iotaShape(static_cast<size_t>(outRank), 1);
  iotaShape[static_cast<size_t>(axis)] = depth;
  Tensor iota(TensorType(DType::I64, iotaShape));
  for (int64_t i = 0; i < depth; ++i)
    iota.setInt(i, i);
  Value *hit = c.emit(Op::Equal, {c.reshape(idx, us), c.constant(std::move(iota))});
  c.setOutput(0, c.emit(Op::Where, {hit, on, off}));
}

// CumSum: y[..., i, ...] = sum of x[..., j, ...] over j <= i (j < i when exclusive; j >= i when
// reversed), as a constant [n, n] selection mask applied with where and reduced, which is exact
// for every dtype.
void convCumSum(ConvertCtx &c) {
  Value *x = c.input(0);
  Shape s = x->type().shape;
  int64_t r = static_cast<int64_t>(s.size());
  Shape ax = c.constInts(1, "axis");
  if (ax.size() != 1)
    c.fail("axis must be a scalar");
  int64_t axis = normAxis(c, ax[0], r);
  bool exclusive = c.attrInt("exclusive", 0) != 0, reverse = c.attrInt("reverse", 0) != 0;
  int64_t n = s[static_cast<size_t>(axis)];
  // Move the axis last, add a length-1 axis before it: [..., 1, n].
  Shape perm;
  for (int64_t d = 0; d < r; ++d)
    if (d != axis)
      perm.push_back(d);
  perm.push_back(axis);
  Value *xt = c.emit(Op::Transpose, {x}, {{"perm", perm}});
  Shape ts = xt->type().shape;
  Shape us = ts;
  us.insert(us.end() - 1, 1);
  Tensor sel(TensorType(DType::Bool, {n, n})); // sel[i][j]: does output i take input j?
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      sel.setInt(i * n + j, reverse ? (exclusive ? j > i : j >= i) : (exclusive ? j < i : j <= i));
  Value *picked = c.emit(
      Op::Where, {c.constant(std::move(sel)), c.reshape(xt, us), c.scalar(x->type().dtype, 0.0)});
  Value *sum =
      c.emit(Op::ReduceSum, {picked},
             {{"axes", Shape{static_cast<int64_t>(us.size()) - 1}}, {"keepdims", int64_t(0)}});
  Shape inv(static_cast<size_t>(r));
  for (int64_t d = 0; d < r; ++d)
    inv[static_cast<size_t>(perm[static_cast<size_t>(d)])] = d;
  c.setOutput(0, c.emit(Op::Transpose, {sum}, {{"perm", inv}}));
}

// Resize to `sizes` (output dims) with per-axis `scales` for the coordinate mapping.
// tf_crop_and_resize: `roi` is the crop box, [starts..., ends...] over every axis.
void emitResize(ConvertCtx &c, const Shape &sizes, const std::vector<double> &scales,
                const std::string &mode, const std::string &coord, const std::string &nearest,
                const std::vector<double> &roi = {}) {
  // Scale 1 maps every coordinate to itself, except in the modes that shift or crop.
  if (sizes == c.type(0).shape && coord != "tf_crop_and_resize" &&
      coord != "tf_half_pixel_for_nn" &&
      std::all_of(scales.begin(), scales.end(), [](double s) { return s == 1.0; })) {
    c.setOutput(0, c.input(0));
    return;
  }
  AttrMap attrs = {{"sizes", sizes},
                   {"scales", scales},
                   {"mode", mode},
                   {"coordinate_transformation_mode", coord},
                   {"nearest_mode", nearest}};
  if (mode == "cubic") {
    attrs["cubic_coeff_a"] = c.attrFloat("cubic_coeff_a", -0.75);
    attrs["exclude_outside"] = c.attrInt("exclude_outside", 0);
  }
  if (coord == "tf_crop_and_resize") {
    attrs["roi"] = roi;
    attrs["extrapolation_value"] = c.attrFloat("extrapolation_value", 0.0);
  }
  c.setOutput(0, c.emit(Op::Resize, {c.input(0)}, std::move(attrs)));
}

// Output dims from scales: floor(in * scale), computed in float like the ONNX reference.
Shape sizesFromScales(const Shape &in, const std::vector<double> &scales) {
  Shape out;
  for (size_t i = 0; i < in.size(); ++i)
    out.push_back(static_cast<int64_t>(
        std::floor(static_cast<float>(in[i]) * static_cast<float>(scales[i]))));
  return out;
}

std::string resizeMode(ConvertCtx &c) {
  std::string mode = c.attrStr("mode", "nearest");
  if (mode == "bilinear") // Upsample-7 accepted this spelling
    mode = "linear";
  if (mode != "nearest" && mode != "linear" && (mode != "cubic" || c.opType() == "Upsample"))
    c.fail(cat("mode '", mode, "' is not supported (nearest, linear or cubic)"));
  return mode;
}

// Upsample (7: scales attribute, 9: scales input) and Resize-10: asymmetric coordinates,
// nearest rounds down.
void convUpsample(ConvertCtx &c) {
  std::string mode = resizeMode(c);
  std::vector<double> scales = c.opset() < 9 ? c.attrFloats("scales") : c.constDoubles(1, "scales");
  const Shape &in = c.type(0).shape;
  if (scales.size() != in.size())
    c.fail(cat("scales need one value per axis of ", c.type(0).str()));
  emitResize(c, sizesFromScales(in, scales), scales, mode, "asymmetric", "floor");
}

void convResize(ConvertCtx &c) {
  if (c.opset() < 11) {
    convUpsample(c);
    return;
  }
  std::string mode = resizeMode(c);
  std::string coord = c.attrStr("coordinate_transformation_mode", "half_pixel");
  static const char *known[] = {
      "half_pixel",           "asymmetric",           "align_corners",     "pytorch_half_pixel",
      "tf_half_pixel_for_nn", "half_pixel_symmetric", "tf_crop_and_resize"};
  if (std::find(std::begin(known), std::end(known), coord) == std::end(known))
    c.fail(cat("coordinate_transformation_mode '", coord, "' is unknown"));
  std::string nearest = c.attrStr("nearest_mode", "round_prefer_floor");
  c.requireAttrDefault("antialias", 0, "antialiasing is not implemented");
  const Shape &in = c.type(0).shape;
  int64_t r = static_cast<int64_t>(in.size());
  Shape axes = c.attrIntsOpt("axes").value_or(Shape{});
  if (axes.empty())
    for (int64_t i = 0; i < r; ++i)
      axes.push_back(i);
  for (int64_t &a : axes)
    a = normAxis(c, a, r);

  const Tensor *sizesT = c.hasInput(3) ? &c.requireConst(3, "sizes") : nullptr;
  if (sizesT && sizesT->numel() == 0)
    sizesT = nullptr;
  Shape sizes = in;
  std::vector<double> scales(in.size(), 1.0);
  if (sizesT) {
    Shape given = sizesT->toInts();
    if (given.size() != axes.size())
      c.fail(cat("sizes ", shapeStr(given), " need one value per resized axis"));
    std::string policy = c.attrStr("keep_aspect_ratio_policy", "stretch");
    if (policy == "stretch") {
      for (size_t k = 0; k < axes.size(); ++k) {
        auto a = static_cast<size_t>(axes[k]);
        sizes[a] = given[k];
        scales[a] = static_cast<double>(static_cast<float>(given[k]) / static_cast<float>(in[a]));
      }
    } else if (policy == "not_larger" || policy == "not_smaller") {
      float scale = policy == "not_larger" ? INFINITY : 0.0f;
      for (size_t k = 0; k < axes.size(); ++k) {
        float s = static_cast<float>(given[k]) / static_cast<float>(in[axes[k]]);
        scale = policy == "not_larger" ? std::min(scale, s) : std::max(scale, s);
      }
      for (int64_t a : axes) {
        sizes[a] = static_cast<int64_t>(std::floor(static_cast<float>(in[a]) * scale + 0.5f));
        scales[a] = scale;
      }
    } else {
      c.fail(cat("keep_aspect_ratio_policy '", policy, "' is unknown"));
    }
  } else {
    std::vector<double> given = c.constDoubles(2, "scales");
    if (given.size() != axes.size())
      c.fail(cat("scales need one value per resized axis, got ", given.size()));
    for (size_t k = 0; k < axes.size(); ++k)
      scales[static_cast<size_t>(axes[k])] = given[k];
    sizes = sizesFromScales(in, scales);
  }
  // tf_crop_and_resize: the roi input, [starts, ends] over the resized axes (the others keep
  // the whole axis, [0, 1]). Output sizes from scales stay floor(in * scale), as ONNX Runtime
  // and the ONNX reference compute them.
  std::vector<double> roi;
  if (coord == "tf_crop_and_resize") {
    if (!c.hasInput(1))
      c.fail("coordinate_transformation_mode 'tf_crop_and_resize' needs the roi input");
    std::vector<double> given = c.constDoubles(1, "roi");
    if (given.size() != 2 * axes.size())
      c.fail(
          cat("roi needs 2 values per resized axis (", 2 * axes.size(), "), got ", given.size()));
    roi.assign(2 * in.size(), 0.0);
    std::fill(roi.begin() + static_cast<long>(in.size()), roi.end(), 1.0);
    for (size_t k = 0; k < axes.size(); ++k) {
      auto a = static_cast<size_t>(axes[k]);
      roi[a] = given[k];
      roi[in.size() + a] = given[axes.size() + k];
    }
  }
  emitResize(c, sizes, scales, mode, coord, nearest, roi);
}

void convDepthToSpace(ConvertCtx &c) {
  const Shape &s = c.type(0).shape;
  int64_t b = c.attrIntReq("blocksize");
  if (s.size() != 4 || b < 1 || s[1] % (b * b) != 0)
    c.fail(cat("needs [N, C, H, W] with C divisible by blocksize^2, got ", c.type(0).str()));
  int64_t n = s[0], ch = s[1] / (b * b), h = s[2], w = s[3];
  bool crd = c.attrStr("mode", "DCR") == "CRD";
  Value *x = c.reshape(c.input(0), crd ? Shape{n, ch, b, b, h, w} : Shape{n, b, b, ch, h, w});
  Shape perm = crd ? Shape{0, 1, 4, 2, 5, 3} : Shape{0, 3, 4, 1, 5, 2};
  x = c.emit(Op::Transpose, {x}, {{"perm", perm}});
  c.setOutput(0, c.reshape(x, {n, ch, h * b, w * b}));
}

void convSpaceToDepth(ConvertCtx &c) {
  const Shape &s = c.type(0).shape;
  int64_t b = c.attrIntReq("blocksize");
  if (s.size() != 4 || b < 1 || s[2] % b != 0 || s[3] % b != 0)
    c.fail(cat("needs [N, C, H, W] with H and W divisible by blocksize, got ", c.type(0).str()));
  // mode (SpaceToDepth-28): DCR (the default, and the only layout before) puts the block
  // offset before the channel, CRD after it (DepthToSpace's CRD inverse).
  std::string mode = c.attrStr("mode", "DCR");
  if (mode != "DCR" && mode != "CRD")
    c.fail(cat("mode '", mode, "' is not DCR or CRD"));
  int64_t n = s[0], ch = s[1], h = s[2] / b, w = s[3] / b;
  Value *x = c.reshape(c.input(0), {n, ch, h, b, w, b});
  x = c.emit(Op::Transpose, {x},
             {{"perm", mode == "DCR" ? Shape{0, 3, 5, 1, 2, 4} : Shape{0, 1, 3, 5, 2, 4}}});
  c.setOutput(0, c.reshape(x, {n, ch * b * b, h, w}));
}

void checkConstantSize(const ConvertCtx &c, const TensorType &t);

// Trilu: a constant keep-mask over the last two axes selects x or zero.
void convTrilu(ConvertCtx &c) {
  Value *x = c.input(0);
  const Shape &s = x->type().shape;
  if (s.size() < 2)
    c.fail(cat("input must have rank >= 2, got ", x->type().str()));
  int64_t k = 0;
  if (c.hasInput(1)) {
    Shape kv = c.constInts(1, "k");
    if (kv.size() != 1)
      c.fail("k must be a scalar");
    k = kv[0];
  }
  bool upper = c.attrInt("upper", 1) != 0;
  int64_t rows = s[s.size() - 2], cols = s[s.size() - 1];
  // Symbolic rows or columns: mask[i, j] depends on i and j only, so the mask for any value is
  // the top-left corner of the one for the dims' maxima (a constant), cut by a slice.
  SymExpr symRows = x->type().symDim(s.size() - 2), symCols = x->type().symDim(s.size() - 1);
  bool symbolic = !symRows.isConstant() || !symCols.isConstant();
  if (symbolic) {
    rows = c.bounds(symRows, "rows").hi;
    cols = c.bounds(symCols, "columns").hi;
    checkConstantSize(c, TensorType(DType::Bool, {rows, cols}));
  }
  Tensor mask(TensorType(DType::Bool, {rows, cols}));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      mask.setInt(i * cols + j, upper ? j - i >= k : j - i <= k);
  Value *keep = c.constant(std::move(mask));
  if (symbolic)
    keep = c.emit(Op::Slice, {keep},
                  {{"starts", Shape{0, 0}},
                   {"ends", Shape{c.planning(symRows), c.planning(symCols)}},
                   {"axes", Shape{0, 1}},
                   {"steps", Shape{1, 1}},
                   {"sym_starts", std::vector<std::string>{"0", "0"}},
                   {"sym_ends", std::vector<std::string>{symRows.str(), symCols.str()}}});
  Value *zero = c.scalar(x->type().dtype, 0.0);
  c.setOutput(0, c.emit(Op::Where, {keep, x, zero}));
}

} // namespace aicf::onnx_ops
