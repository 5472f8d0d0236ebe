// The data-movement recipe: transpose, concat, split, slice (negative steps included), gather,
// gather_elements and gather_nd (negative indices wrap), expand, tile, pad (constant / reflect /
// edge, negative pads crop) and resize (nearest with every nearest_mode, linear and cubic, with the
// half_pixel, pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn,
// half_pixel_symmetric and tf_crop_and_resize coordinate modes; the last stores extrapolation_value
// outside the input).
//
// Each op is an index map: a flat grid x threads x vector loop runs over the output elements
// (over the input's for split, whose pieces are several outputs), computes the source index of
// each element and copies, with the operand's fused prologue inlined at the read and the fused
// epilogue applied before the store. Semantics are the interpreter's
// (interp/kernels_data.cpp). Two details:
//   * reads stay in bounds whatever the data: the gathers clamp an out-of-range index (the
//     interpreter reports it as an error) and padded / concatenated reads are guarded;
//   * nearest resize needs the interpreter's exact source index, which is computed in double
//     there. The kernel computes the coordinate in f32; at compile time the f32 formula is
//     evaluated for every output coordinate and compared with the double one, and where they
//     would disagree the axis uses an exact step function of the output coordinate instead.
#include "lower/flat_loop.h"
#include "lower/recipes.h"

#include "support/diagnostics.h"

#include <algorithm>
#include <cmath>
#include <functional>

namespace aicf {

namespace {

using kir::E;

E zero() {
  return E(int64_t(0));
}

using flatloop::computeValue; // values move in their compute type

// c clamped to [0, len): a symbolic length (issue 21) is read from the dims.
E clampIdx(E c, const SymExpr &len) {
  return kir::max(zero(), kir::min(c, kir::symE(len) - E(int64_t(1))));
}

int64_t normAxis(int64_t axis, size_t rank) {
  return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
}

// ---- resize coordinates (the interpreter's, in double, and the kernel's, in f32) ---------------

struct ResizeAxis {
  int64_t lenIn = 1, lenOut = 1;
  double scale = 1, resized = 1;
  double r0 = 0, r1 = 1; // tf_crop_and_resize: the axis's crop box
};

ResizeAxis resizeAxis(int64_t lenIn, int64_t lenOut, double attrScale, double r0 = 0,
                      double r1 = 1) {
  ResizeAxis r;
  r.lenIn = lenIn;
  r.lenOut = lenOut;
  r.r0 = r0;
  r.r1 = r1;
  r.scale = attrScale > 0 ? attrScale : double(lenOut) / double(lenIn);
  r.resized = double(lenIn) * r.scale;
  if (std::fabs(r.resized - double(lenOut)) < 1e-9 * std::max(1.0, r.resized))
    r.resized = double(lenOut);
  return r;
}

// half_pixel_symmetric's shift: the input centre times (1 - the output size over the real
// resized length).
double halfPixelSymmetricOffset(const ResizeAxis &a) {
  return double(a.lenIn) / 2 * (1 - double(a.lenOut) / a.resized);
}

double coordD(const std::string &mode, const ResizeAxis &a, int64_t xo) {
  double x = double(xo);
  if (mode == "half_pixel")
    return (x + 0.5) / a.scale - 0.5;
  if (mode == "pytorch_half_pixel")
    return a.resized > 1 ? (x + 0.5) / a.scale - 0.5 : 0.0;
  if (mode == "align_corners")
    return a.resized == 1 ? 0.0 : x * double(a.lenIn - 1) / (a.resized - 1);
  if (mode == "asymmetric")
    return x / a.scale;
  if (mode == "tf_half_pixel_for_nn")
    return (x + 0.5) / a.scale;
  if (mode == "half_pixel_symmetric")
    return halfPixelSymmetricOffset(a) + ((x + 0.5) / a.scale - 0.5);
  if (mode == "tf_crop_and_resize")
    return a.lenOut > 1 ? x * (a.r1 - a.r0) * double(a.lenIn - 1) / double(a.lenOut - 1) +
                              a.r0 * double(a.lenIn - 1)
                        : 0.5 * (a.r0 + a.r1) * double(a.lenIn - 1);
  throw UserError(cat("resize: coordinate_transformation_mode '", mode,
                      "' is not supported (half_pixel, pytorch_half_pixel, align_corners, "
                      "asymmetric, tf_half_pixel_for_nn, half_pixel_symmetric, "
                      "tf_crop_and_resize)"));
}

// Whether output coordinate xo of the axis maps outside the input (tf_crop_and_resize then
// stores extrapolation_value there).
bool outsideD(const std::string &mode, const ResizeAxis &a, int64_t xo) {
  double c = coordD(mode, a, xo);
  return mode == "tf_crop_and_resize" && (c < 0 || c > double(a.lenIn - 1));
}

// The same formula in f32, operation for operation as the kernel evaluates it (no
// multiply-add pairs, so no contraction can change it).
float coordF(const std::string &mode, const ResizeAxis &a, int64_t xo) {
  float x = static_cast<float>(xo), s = static_cast<float>(a.scale);
  if (mode == "half_pixel" || (mode == "pytorch_half_pixel" && a.resized > 1))
    return (x + 0.5f) / s - 0.5f;
  if (mode == "tf_half_pixel_for_nn")
    return (x + 0.5f) / s;
  if (mode == "half_pixel_symmetric")
    return static_cast<float>(halfPixelSymmetricOffset(a)) + ((x + 0.5f) / s - 0.5f);
  if (mode == "tf_crop_and_resize") // (nearestE takes the exact map: a multiply-add may fuse)
    return static_cast<float>(coordD(mode, a, xo));
  if (mode == "pytorch_half_pixel")
    return 0.0f;
  if (mode == "align_corners")
    return a.resized == 1 ? 0.0f
                          : x * static_cast<float>(a.lenIn - 1) / static_cast<float>(a.resized - 1);
  return x / s;
}

E coordE(const std::string &mode, const ResizeAxis &a, E xo) {
  E x = kir::cast(xo, DType::F32);
  auto f = [](double v) { return kir::fconst(static_cast<float>(v)); };
  if (mode == "half_pixel" || (mode == "pytorch_half_pixel" && a.resized > 1))
    return (x + f(0.5)) / f(a.scale) - f(0.5);
  if (mode == "tf_half_pixel_for_nn")
    return (x + f(0.5)) / f(a.scale);
  if (mode == "half_pixel_symmetric")
    return f(halfPixelSymmetricOffset(a)) + ((x + f(0.5)) / f(a.scale) - f(0.5));
  if (mode == "tf_crop_and_resize")
    return a.lenOut > 1 ? x * f((a.r1 - a.r0) * double(a.lenIn - 1) / double(a.lenOut - 1)) +
                              f(a.r0 * double(a.lenIn - 1))
                        : f(0.5 * (a.r0 + a.r1) * double(a.lenIn - 1));
  if (mode == "pytorch_half_pixel")
    return f(0.0);
  if (mode == "align_corners")
    return a.resized == 1 ? f(0.0) : x * f(double(a.lenIn - 1)) / f(a.resized - 1);
  return x / f(a.scale);
}

template <typename T>
int64_t nearestOf(const std::string &mode, T x, int64_t lenIn) {
  T fl = std::floor(x), r;
  if (mode == "round_prefer_floor")
    r = (x - fl > T(0.5)) ? fl + 1 : fl;
  else if (mode == "round_prefer_ceil")
    r = (x - fl >= T(0.5)) ? fl + 1 : fl;
  else if (mode == "floor")
    r = fl;
  else if (mode == "ceil")
    r = std::ceil(x);
  else
    throw UserError(cat("resize: nearest_mode '", mode,
                        "' is not supported (round_prefer_floor, round_prefer_ceil, floor, ceil)"));
  return std::clamp<int64_t>(static_cast<int64_t>(r), 0, lenIn - 1);
}

// The interpreter's nearest map (std::round differs from the floor form only at exact ties,
// which the prefer_* rule decides the same way).
std::vector<int64_t> nearestMap(const std::string &ctm, const std::string &nm,
                                const ResizeAxis &a) {
  std::vector<int64_t> m(static_cast<size_t>(a.lenOut));
  for (int64_t i = 0; i < a.lenOut; ++i)
    m[i] = nearestOf<double>(nm, coordD(ctm, a, i), a.lenIn);
  return m;
}

E nearestE(const std::string &ctm, const std::string &nm, const ResizeAxis &a, E xo) {
  std::vector<int64_t> want = nearestMap(ctm, nm, a);
  bool f32Exact = ctm != "tf_crop_and_resize";
  for (int64_t i = 0; i < a.lenOut && f32Exact; ++i)
    f32Exact = nearestOf<float>(nm, coordF(ctm, a, i), a.lenIn) == want[i];
  if (f32Exact) {
    E c = coordE(ctm, a, xo);
    E fl = kir::unary(kir::UnOp::Floor, c);
    E r;
    if (nm == "round_prefer_floor")
      r = kir::select(c - fl > kir::fconst(0.5), fl + kir::fconst(1.0), fl);
    else if (nm == "round_prefer_ceil")
      r = kir::select(c - fl >= kir::fconst(0.5), fl + kir::fconst(1.0), fl);
    else if (nm == "floor")
      r = fl;
    else
      r = kir::unary(kir::UnOp::Ceil, c);
    return kir::cast(kir::max(kir::fconst(0.0), kir::min(kir::fconst(double(a.lenIn - 1)), r)),
                     DType::I64);
  }
  // Exact step function: want[0] plus the jumps at every breakpoint.
  E idx = E(want[0]);
  for (int64_t i = 1; i < a.lenOut; ++i)
    if (want[i] != want[i - 1])
      idx = idx + kir::select(xo >= E(i), E(want[i] - want[i - 1]), zero());
  return idx;
}

// ---- the recipe ---------------------------------------------------------------------------------

class DataMovement {
public:
  DataMovement(const KernelGroup &g, const std::string &name, const Knobs &knobs)
      : g_(g), a_(*g.anchor), knobs_(knobs) {
    k_.name = name;
    k_.recipe = "data_movement";
    k_.params = groupParams(g, byValue_);
    ge_ = std::make_unique<GroupExpr>(g, byValue_);
  }

  kir::Kernel build() {
    if (a_.op() == Op::Split)
      return split();
    const Value *res = a_.result(0);
    auto elementStmts = [&](const std::vector<E> &oidx) {
      std::vector<kir::StmtP> out;
      E value = element(oidx, out);
      DType outT = res->type().dtype;
      if ((outT == DType::F16 || outT == DType::BF16) && value->type != outT)
        value = kir::cast(value, outT);
      std::vector<kir::StmtP> stores = storeGroupOutputs(g_, *ge_, res, value, oidx, "o");
      out.insert(out.end(), stores.begin(), stores.end());
      return out;
    };
    // A host read of a transposed innermost dim of 4, 8 or 16 (a channel block's lanes, an NHWC
    // tensor's channels) runs as a lane block (flatloop::laneBlockAxis).
    const TensorType &t = res->type();
    std::optional<size_t> lanes;
    if (!isGpuPlan(knobs_) && !t.isSymbolic())
      lanes = flatloop::laneBlockAxis(t.shape, elementStmts);
    if (!lanes) {
      elementLoop(t, elementStmts);
      return std::move(k_);
    }
    TensorType blockT = t;
    int64_t L = t.shape[*lanes];
    blockT.shape[*lanes] = 1;
    elementLoop(blockT, flatloop::laneBlock(*lanes, L, elementStmts));
    return std::move(k_);
  }

private:
  const KernelGroup &g_;
  const Node &a_;
  const Knobs &knobs_;
  kir::Kernel k_;
  std::map<const Value *, kir::BufferP> byValue_;
  std::unique_ptr<GroupExpr> ge_;

  static int64_t numel(const std::vector<int64_t> &s) {
    int64_t n = 1;
    for (int64_t d : s)
      n *= d;
    return n;
  }

  E at(const Value *v, const std::vector<E> &idx) { return computeValue(ge_->at(v, idx)); }

  // Fills the kernel with a loop over the elements of a value of type `t`, `body(idx)` giving
  // each element's statements: the flat grid x threads x vector loop, unflattening the element
  // number (on host plans, in planes where the vector straddles rows: flatloop::planes).
  // Symbolic dims (issue 21): the count, grid and guard from the dims; on host plans,
  // where the unflattening would divide by a run-time size per element, one block per row of
  // the last dim instead (its index unflattened once, the threads striding along the row).
  void elementLoop(const TensorType &t,
                   const std::function<std::vector<kir::StmtP>(const std::vector<E> &)> &body) {
    SymShape sym = symShapeOf(t);
    int64_t n = numel(t.shape);
    flatloop::Schedule s = flatloop::schedule(knobs_, n, 16, symNumel(sym));
    if (!t.isSymbolic() && !isGpuPlan(knobs_)) {
      int64_t vec = knobs_.get("vec", 16);
      if (std::optional<flatloop::Planes> p = flatloop::planes(t.shape, vec)) {
        s.vec = vec;
        flatloop::buildPlanes(k_, t.shape, *p, s, body);
        return;
      }
    }
    if (!t.isSymbolic() || isGpuPlan(knobs_) || sym.size() < 2) {
      flatloop::build(k_, n, s, [&](E i) { return body(unflatIndex(sym, i)); });
      return;
    }
    SymShape outer(sym.begin(), sym.end() - 1);
    std::vector<int64_t> outerPlan(t.shape.begin(), t.shape.end() - 1);
    int64_t rows = numel(outerPlan);
    SymExpr rowsSym = symNumel(outer);
    k_.grid = {{"b", std::max<int64_t>(rows, 1)}};
    if (!rowsSym.isConstant())
      k_.symGrid = {SymExtent{rowsSym, 1}};
    k_.threadVar = "t";
    k_.threads = s.threads;
    k_.knobs["threads"] = s.threads;
    k_.knobs["vec"] = 1; // the row loop is the vector loop
    auto problem = std::make_shared<FlatLoopProblem>();
    problem->n = n;
    problem->rows = rows;
    k_.problem = problem;
    std::vector<kir::StmtP> region;
    std::vector<E> idx;
    std::vector<E> outerIdx = unflatIndex(outer, kir::var("b"));
    for (size_t d = 0; d < outerIdx.size(); ++d) {
      if (outerIdx[d]->kind == kir::Expr::Kind::Int || outerIdx[d]->kind == kir::Expr::Kind::Var) {
        idx.push_back(outerIdx[d]);
        continue;
      }
      std::string r = cat("r", d);
      region.push_back(kir::decl(r, DType::I64, outerIdx[d]));
      idx.push_back(kir::var(r));
    }
    idx.push_back(kir::var("j"));
    E tv = kir::var(k_.threadVar);
    region.push_back(kir::forLoop("j", tv, kir::symE(sym.back()) - tv, body(idx), s.threads,
                                  s.threads == 1 ? kir::Stmt::LoopKind::Vectorized
                                                 : kir::Stmt::LoopKind::Serial));
    k_.body.push_back(kir::region(k_.threadVar, region));
  }

  // The anchor's value at output index `oidx`; may emit statements into `out` first.
  E element(const std::vector<E> &oidx, std::vector<kir::StmtP> &out) {
    const Value *x = a_.operand(0);
    const std::vector<int64_t> &xs = x->type().shape;
    switch (a_.op()) {
    case Op::Transpose: {
      const auto &perm = a_.ints("perm");
      std::vector<E> idx(xs.size());
      for (size_t d = 0; d < perm.size(); ++d)
        idx[perm[d]] = oidx[d];
      return at(x, idx);
    }
    case Op::Slice: {
      std::vector<E> idx = oidx;
      const auto &starts = a_.ints("starts"), &axes = a_.ints("axes"), &steps = a_.ints("steps");
      // A start that depends on symbolic dims (sym_starts, issue 21) is read from the dims;
      // constant starts hold for every value (ir/ops.def).
      static const std::vector<std::string> none;
      const std::vector<std::string> &symStarts =
          a_.hasAttr("sym_starts") ? a_.strs("sym_starts") : none;
      for (size_t j = 0; j < axes.size(); ++j) {
        int64_t ax = normAxis(axes[j], xs.size());
        E start = E(starts[j]);
        if (!symStarts.empty()) {
          std::optional<SymExpr> e = SymExpr::parse(symStarts.at(j));
          AICF_CHECK(e.has_value(), a_.where(), ": slice sym_starts '", symStarts.at(j), "'");
          start = kir::symE(*e);
        }
        idx[ax] = start + oidx[ax] * E(steps[j]);
      }
      return at(x, idx);
    }
    case Op::Expand:
      return at(x, broadcastIndex(symShapeOf(x->type()), symShapeOf(a_.result(0)->type()), oidx));
    case Op::Tile: {
      std::vector<E> idx = oidx;
      SymShape xsym = symShapeOf(x->type()), osym = symShapeOf(a_.result(0)->type());
      for (size_t d = 0; d < xs.size(); ++d)
        if (xsym[d] != osym[d])
          idx[d] = isUnitDim(xsym[d]) ? zero() : oidx[d] % kir::symE(xsym[d]);
      return at(x, idx);
    }
    case Op::Gather: return gather(oidx);
    case Op::GatherElements: return gatherElements(oidx);
    case Op::GatherND: return gatherND(oidx);
    case Op::Concat: return concat(oidx, out);
    case Op::Pad: return pad(oidx);
    case Op::Resize: return resize(oidx, out);
    default: break;
    }
    throw InternalError(cat("data_movement recipe: unsupported op ", a_.name()));
  }

  E gather(const std::vector<E> &oidx) {
    const Value *x = a_.operand(0), *ind = a_.operand(1);
    const std::vector<int64_t> &xs = x->type().shape;
    size_t axis = static_cast<size_t>(normAxis(a_.i("axis"), xs.size()));
    size_t ri = ind->type().shape.size();
    std::vector<E> iidx(oidx.begin() + static_cast<long>(axis),
                        oidx.begin() + static_cast<long>(axis + ri));
    E kv = ge_->at(ind, iidx);
    if (kv->type != DType::I64)
      kv = kir::cast(kv, DType::I64);
    SymExpr len = x->type().symDim(axis);
    kv = kir::select(kv < zero(), kv + kir::symE(len), kv);
    std::vector<E> idx(oidx.begin(), oidx.begin() + static_cast<long>(axis));
    idx.push_back(clampIdx(kv, len));
    idx.insert(idx.end(), oidx.begin() + static_cast<long>(axis + ri), oidx.end());
    return at(x, idx);
  }

  // indices[iidx] as an i64 index into an axis of `len`: negative counts from the end, then
  // clamped into the axis.
  E indexAt(const Value *ind, const std::vector<E> &iidx, int64_t len) {
    E kv = ge_->at(ind, iidx);
    if (kv->type != DType::I64)
      kv = kir::cast(kv, DType::I64);
    kv = kir::select(kv < zero(), kv + E(len), kv);
    return clampIdx(kv, SymExpr(len));
  }

  // The result has the indices' shape: x at the output index with the axis coordinate read
  // from indices there.
  E gatherElements(const std::vector<E> &oidx) {
    const Value *x = a_.operand(0), *ind = a_.operand(1);
    const std::vector<int64_t> &xs = x->type().shape;
    size_t axis = static_cast<size_t>(normAxis(a_.i("axis"), xs.size()));
    std::vector<E> idx = oidx;
    idx[axis] = indexAt(ind, oidx, xs[axis]);
    return at(x, idx);
  }

  // Output [indices' dims but the last, x's dims after batch_dims + k]: the batch coordinates,
  // then the k coordinates of the index tuple at the output's leading index, then the slice's.
  E gatherND(const std::vector<E> &oidx) {
    const Value *x = a_.operand(0), *ind = a_.operand(1);
    const std::vector<int64_t> &xs = x->type().shape, &is = ind->type().shape;
    size_t b = static_cast<size_t>(a_.i("batch_dims")), q = is.size();
    size_t k = static_cast<size_t>(is.back());
    std::vector<E> lead(oidx.begin(), oidx.begin() + static_cast<long>(q - 1));
    std::vector<E> idx(oidx.begin(), oidx.begin() + static_cast<long>(b));
    for (size_t j = 0; j < k; ++j) {
      std::vector<E> iidx = lead;
      iidx.push_back(E(static_cast<int64_t>(j)));
      idx.push_back(indexAt(ind, iidx, xs[b + j]));
    }
    idx.insert(idx.end(), oidx.begin() + static_cast<long>(q - 1), oidx.end());
    return at(x, idx);
  }

  E concat(const std::vector<E> &oidx, std::vector<kir::StmtP> &out) {
    size_t axis = static_cast<size_t>(normAxis(a_.i("axis"), oidx.size()));
    E c = oidx[axis];
    // if / else chain over the pieces; the value lands in a scalar. A piece's bounds along the
    // axis are sums of the operands' dims, read from the dims where symbolic (issue 21).
    std::vector<std::pair<E, E>> pieces; // (condition, value)
    SymExpr begin = 0;
    for (const Value *in : a_.operands()) {
      SymExpr len = in->type().symDim(axis);
      if (len.isConstant() && len.constant() == 0)
        continue;
      std::vector<E> idx = oidx;
      idx[axis] = c - kir::symE(begin);
      std::optional<SymExpr> end = SymExpr::add(begin, len);
      AICF_CHECK(end.has_value(), "concat: the axis length overflows");
      pieces.push_back({c < kir::symE(*end), at(in, idx)});
      begin = *end;
    }
    AICF_CHECK(!pieces.empty(), "concat with no elements");
    // Only the selected piece is read (the others' indices would be out of range).
    DType t = pieces.front().second->type;
    E init = isFloat(t)         ? kir::fconst(0.0)
             : t == DType::Bool ? kir::binary(kir::BinOp::Ne, zero(), zero())
                                : kir::cast(zero(), t);
    out.push_back(kir::decl("cv", t, init));
    std::vector<kir::StmtP> chain = {kir::assign("cv", pieces.back().second)};
    for (size_t j = pieces.size() - 1; j-- > 0;) {
      std::vector<kir::StmtP> then = {kir::assign("cv", pieces[j].second)};
      chain = {kir::ifThen(pieces[j].first, then, chain)};
    }
    out.insert(out.end(), chain.begin(), chain.end());
    return kir::var("cv", t);
  }

  E pad(const std::vector<E> &oidx) {
    const Value *x = a_.operand(0);
    const std::vector<int64_t> &xs = x->type().shape;
    const auto &pads = a_.ints("pads");
    const std::string &mode = a_.s("mode");
    size_t r = xs.size();
    if (mode != "constant" && mode != "reflect" && mode != "edge")
      throw UserError(cat(a_.where(), ": pad: mode '", mode, "' is not constant, reflect or edge"));
    std::vector<E> idx(r);
    E inside;
    for (size_t d = 0; d < r; ++d) {
      int64_t L = xs[d];
      E c = oidx[d] - E(pads[d]);
      if (pads[d] <= 0 && pads[r + d] <= 0) { // no padding on this axis (maybe cropped)
        idx[d] = c;
        continue;
      }
      if (mode == "constant") {
        E in = (c >= zero()) && (c < E(L));
        inside = inside ? (inside && in) : in;
        idx[d] = clampIdx(c, L);
      } else if (mode == "edge") {
        idx[d] = clampIdx(c, L);
      } else {
        int64_t period = 2 * (L - 1);
        if (period == 0) {
          idx[d] = zero();
        } else {
          E m = (c % E(period) + E(period)) % E(period);
          idx[d] = kir::select(m >= E(L), E(period) - m, m);
        }
      }
    }
    E v = at(x, idx);
    if (!inside)
      return v;
    double fillV = a_.f("value");
    DType t = x->type().dtype;
    E fill;
    if (isFloat(t))
      fill = kir::fconst(fillV);
    else if (t == DType::Bool)
      fill = kir::binary(kir::BinOp::Ne, E(int64_t(fillV != 0.0)), zero());
    else
      fill = kir::cast(E(static_cast<int64_t>(fillV)), v->type);
    return kir::select(inside, v, fill);
  }

  // Axis d of the resize anchor (its crop box with tf_crop_and_resize).
  ResizeAxis axisOf(size_t d) const {
    const std::vector<int64_t> &xs = a_.operand(0)->type().shape;
    const std::vector<int64_t> &os = a_.result(0)->type().shape;
    const auto &scales = a_.floats("scales"), &roi = a_.floats("roi");
    AICF_CHECK(scales.size() == xs.size(), a_.where(), ": resize scales rank");
    if (a_.s("coordinate_transformation_mode") != "tf_crop_and_resize")
      return resizeAxis(xs[d], os[d], scales[d]);
    AICF_CHECK(roi.size() == 2 * xs.size(), a_.where(), ": resize roi rank");
    return resizeAxis(xs[d], os[d], scales[d], roi[d], roi[xs.size() + d]);
  }

  // The resized value, or with tf_crop_and_resize extrapolation_value where the output index
  // maps outside the input on some axis: per axis the inside indices form one range (the
  // coordinate is affine in the index), decided in double at compile time as the interpreter
  // decides it.
  E resize(const std::vector<E> &oidx, std::vector<kir::StmtP> &out) {
    E v = resizeValue(oidx, out);
    const std::string &ctm = a_.s("coordinate_transformation_mode");
    if (ctm != "tf_crop_and_resize")
      return v;
    const std::vector<int64_t> &os = a_.result(0)->type().shape;
    E inside;
    for (size_t d = 0; d < os.size(); ++d) {
      ResizeAxis ax = axisOf(d);
      int64_t lo = -1, hi = -2;
      bool any = false;
      for (int64_t i = 0; i < os[d]; ++i) {
        if (outsideD(ctm, ax, i)) {
          any = true;
          continue;
        }
        AICF_CHECK(lo < 0 || hi == i - 1, a_.where(), ": resize crop inside range not contiguous");
        if (lo < 0)
          lo = i;
        hi = i;
      }
      if (!any)
        continue;
      E in = lo < 0 ? (oidx[d] < zero()) : ((oidx[d] >= E(lo)) && (oidx[d] <= E(hi)));
      inside = inside ? (inside && in) : in;
    }
    if (!inside)
      return v;
    double ev = a_.f("extrapolation_value");
    E fill = isFloat(v->type) ? kir::fconst(ev, v->type)
                              : kir::cast(E(static_cast<int64_t>(ev)), v->type);
    return kir::select(inside, v, fill);
  }

  E resizeValue(const std::vector<E> &oidx, std::vector<kir::StmtP> &out) {
    const Value *x = a_.operand(0);
    const std::vector<int64_t> &xs = x->type().shape;
    const std::vector<int64_t> &os = a_.result(0)->type().shape;
    const std::string &mode = a_.s("mode"), &ctm = a_.s("coordinate_transformation_mode");
    size_t r = xs.size();
    if (mode == "nearest") {
      const std::string &nm = a_.s("nearest_mode");
      std::vector<E> idx(r);
      for (size_t d = 0; d < r; ++d) {
        ResizeAxis ax = axisOf(d);
        std::vector<int64_t> m = nearestMap(ctm, nm, ax);
        bool ident = xs[d] == os[d];
        for (int64_t i = 0; i < os[d] && ident; ++i)
          ident = m[i] == i;
        idx[d] = ident ? oidx[d] : nearestE(ctm, nm, ax, oidx[d]);
      }
      return at(x, idx);
    }
    if (mode == "cubic")
      return resizeCubic(oidx, out);
    if (mode != "linear")
      throw UserError(
          cat(a_.where(), ": resize: mode '", mode, "' is not nearest, linear or cubic"));
    // Multilinear: per resized axis i0, i1 = min(i0 + 1, len - 1) and the weight of i1.
    std::vector<size_t> axes;
    for (size_t d = 0; d < r; ++d) {
      ResizeAxis ax = axisOf(d);
      bool ident = xs[d] == os[d];
      for (int64_t i = 0; i < os[d] && ident; ++i) {
        double c = std::clamp(coordD(ctm, ax, i), 0.0, double(xs[d] - 1));
        ident = std::floor(c) == double(i) && c == std::floor(c);
      }
      if (ident)
        continue;
      axes.push_back(d);
      std::string s = cat("r", d);
      E c = coordE(ctm, ax, oidx[d]);
      c = kir::max(kir::fconst(0.0), kir::min(kir::fconst(double(xs[d] - 1)), c));
      out.push_back(kir::decl(s + "_c", DType::F32, c));
      E cv = kir::var(s + "_c", DType::F32);
      out.push_back(kir::decl(s + "_i0", DType::I64,
                              kir::cast(kir::unary(kir::UnOp::Floor, cv), DType::I64)));
      E i0 = kir::var(s + "_i0");
      out.push_back(kir::decl(s + "_i1", DType::I64, kir::min(i0 + E(int64_t(1)), E(xs[d] - 1))));
      out.push_back(kir::decl(s + "_w", DType::F32, cv - kir::cast(i0, DType::F32)));
    }
    return tapSum(x, oidx, axes, 2, [](const std::string &s, int k) {
      E w = kir::var(s + "_w", DType::F32);
      return k ? w : kir::fconst(1.0) - w;
    });
  }

  // The interpolated value: over every corner of `taps` taps per resized axis (axis d's tap k at
  // index variable r<d>_i<k>, weighing weight("r<d>", k)), the sum of the weight products times
  // the element; integer data rounded half to even, as the interpreter does.
  E tapSum(const Value *x, const std::vector<E> &oidx, const std::vector<size_t> &axes, int taps,
           const std::function<E(const std::string &, int)> &weight) {
    E sum;
    size_t corners = 1;
    for (size_t j = 0; j < axes.size(); ++j)
      corners *= static_cast<size_t>(taps);
    for (size_t corner = 0; corner < corners; ++corner) {
      std::vector<E> idx = oidx;
      E w;
      size_t rest = corner;
      for (size_t j = 0; j < axes.size(); ++j) {
        std::string s = cat("r", axes[j]);
        int k = static_cast<int>(rest % static_cast<size_t>(taps));
        rest /= static_cast<size_t>(taps);
        idx[axes[j]] = kir::var(cat(s, "_i", k));
        E wj = weight(s, k);
        w = w ? w * wj : wj;
      }
      E v = at(x, idx);
      if (!isFloat(v->type))
        v = kir::cast(v, DType::F32);
      E term = w ? w * v : v;
      sum = sum ? sum + term : term;
    }
    DType t = x->type().dtype;
    if (isFloat(t))
      return sum;
    E rounded = kir::unary(kir::UnOp::Round, sum);
    return kir::cast(kir::cast(rounded, DType::I64), t);
  }

  // Cubic (the interpreter's kernel_Resize): per resized axis the coordinate c in f32, taps
  // floor(c) - 1 .. floor(c) + 2 at indices clamped to the axis, Keys' weights at t = c -
  // floor(c) (exclude_outside: 0 outside the axis, the rest renormalised); the 4^axes corner
  // products summed.
  E resizeCubic(const std::vector<E> &oidx, std::vector<kir::StmtP> &out) {
    const Value *x = a_.operand(0);
    const std::vector<int64_t> &xs = x->type().shape;
    const std::vector<int64_t> &os = a_.result(0)->type().shape;
    const std::string &ctm = a_.s("coordinate_transformation_mode");
    double A = a_.f("cubic_coeff_a");
    bool exclude = a_.i("exclude_outside") != 0;
    auto f = [](double v) { return kir::fconst(v); };
    auto nearW = [&](E t) { return ((f(A + 2) * t - f(A + 3)) * t) * t + f(1.0); };
    auto farW = [&](E t) { return ((f(A) * t - f(5 * A)) * t + f(8 * A)) * t - f(4 * A); };
    std::vector<size_t> axes;
    for (size_t d = 0; d < xs.size(); ++d) {
      ResizeAxis ax = axisOf(d);
      bool ident = xs[d] == os[d];
      for (int64_t i = 0; i < os[d] && ident; ++i)
        ident = coordD(ctm, ax, i) == double(i);
      if (ident)
        continue;
      axes.push_back(d);
      std::string s = cat("r", d);
      out.push_back(kir::decl(s + "_c", DType::F32, coordE(ctm, ax, oidx[d])));
      E c = kir::var(s + "_c", DType::F32);
      out.push_back(
          kir::decl(s + "_b", DType::I64, kir::cast(kir::unary(kir::UnOp::Floor, c), DType::I64)));
      E b = kir::var(s + "_b");
      out.push_back(kir::decl(s + "_t", DType::F32, c - kir::cast(b, DType::F32)));
      E t = kir::var(s + "_t", DType::F32);
      E w[4] = {farW(t + f(1.0)), nearW(t), nearW(f(1.0) - t), farW(f(2.0) - t)};
      for (int k = 0; k < 4; ++k) {
        E j = b + E(int64_t(k - 1));
        out.push_back(kir::decl(cat(s, "_i", k), DType::I64,
                                kir::max(E(int64_t(0)), kir::min(j, E(xs[d] - 1)))));
        E wk = exclude ? kir::select((j >= E(int64_t(0))) && (j < E(xs[d])), w[k], f(0.0)) : w[k];
        out.push_back(kir::decl(cat(s, "_w", k), DType::F32, wk));
      }
      if (exclude) {
        E sum = kir::var(s + "_w0", DType::F32) + kir::var(s + "_w1", DType::F32) +
                kir::var(s + "_w2", DType::F32) + kir::var(s + "_w3", DType::F32);
        out.push_back(kir::decl(s + "_n", DType::F32, f(1.0) / sum));
      }
    }
    return tapSum(x, oidx, axes, 4, [&](const std::string &s, int k) {
      E w = kir::var(cat(s, "_w", k), DType::F32);
      return exclude ? w * kir::var(s + "_n", DType::F32) : w;
    });
  }

  kir::Kernel split() {
    const Value *x = a_.operand(0);
    const std::vector<int64_t> &xs = x->type().shape;
    size_t axis = static_cast<size_t>(normAxis(a_.i("axis"), xs.size()));
    // Symbolic dims: the split axis is static (its pieces have fixed sizes: ir/infer_sym.cpp),
    // the loop over the input's elements reads the dims (elementLoop).
    AICF_CHECK(x->type().symDim(axis).isConstant(), a_.where(), ": split along a symbolic axis");
    elementLoop(x->type(), [&](const std::vector<E> &idx) {
      std::vector<kir::StmtP> out;
      E v = at(x, idx);
      out.push_back(kir::decl("sv", v->type, v));
      E c = idx[axis];
      int64_t begin = 0;
      for (const Value *piece : a_.results()) {
        int64_t len = piece->type().shape[axis];
        bool written = std::find(g_.outputs.begin(), g_.outputs.end(), piece) != g_.outputs.end();
        if (written && len > 0) {
          std::vector<E> pidx = idx;
          pidx[axis] = c - E(begin);
          E val = kir::var("sv", v->type);
          const kir::BufferP &b = ge_->param(piece);
          if (!isFloat(b->dtype) && val->type != b->dtype)
            val = kir::cast(val, b->dtype);
          out.push_back(
              kir::ifThen((c >= E(begin)) && (c < E(begin + len)), {kir::store(b, pidx, val)}));
        }
        begin += len;
      }
      return out;
    });
    return std::move(k_);
  }
};

} // namespace

kir::Kernel recipeDataMovement(const KernelGroup &g, const std::string &name, const Knobs &k) {
  AICF_CHECK(g.anchor, "data_movement recipe needs an anchor (group ", g.id, ")");
  return DataMovement(g, name, k).build();
}

namespace {

// Requires: a transpose, concat, split, slice, gather, gather_elements, gather_nd, expand,
// tile, pad or resize anchor.
// Knobs: FlatLoopKnobs. Host gathers (transpose, split, concat) compute a multi-index per
// element (64-bit divisions and remainders) and do not vectorise: ~7 cycles per element whatever
// the knobs (measured: a 32K-element 4-d transpose takes ~108 us at every threads / vec setting).
class DataMovementRecipe final : public flatloop::FlatLoopRecipe<> {
public:
  DataMovementRecipe()
      : FlatLoopRecipe({.maxVec = 16, .hostCycles = 7.0, .registers = 12, .registersPerVec = 2}) {}
  const char *name() const override { return "data_movement"; }
  bool lowers(const Node *a) const override {
    if (!a)
      return false;
    switch (a->op()) {
    case Op::Transpose:
    case Op::Concat:
    case Op::Split:
    case Op::Slice:
    case Op::Gather:
    case Op::GatherElements:
    case Op::GatherND:
    case Op::Expand:
    case Op::Tile:
    case Op::Pad:
    case Op::Resize: return true;
    default: return false;
    }
  }
  // Symbolic dims: loop counts, output indices, piece bounds (concat), a gather's axis
  // length, an expand's or tile's source dims and a slice's symbolic starts read from the dims.
  // Pad and resize compute their source indices from the sizes at compile time (reflect
  // periods, per-coordinate resize maps), and gather_elements / gather_nd have no symbolic
  // shape rule: they are not lowered over symbolic dims.
  bool symbolicDims(const KernelGroup &g) const override {
    Op op = g.anchor ? g.anchor->op() : Op::Identity;
    return op != Op::Pad && op != Op::Resize && op != Op::GatherElements && op != Op::GatherND;
  }
  kir::Kernel build(const KernelGroup &g, const std::string &n, const Knobs &k) const override {
    return labelled(recipeDataMovement(g, n, k), name());
  }
};

} // namespace

const Recipe &dataMovementRecipe() {
  static const DataMovementRecipe recipe;
  return recipe;
}

} // namespace aicf
