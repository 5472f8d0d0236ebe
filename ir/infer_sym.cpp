// Symbolic shape inference (issue 21). The op's own inference (ir/infer.cpp) computes and checks
// the result types at the planning point, as for a static graph; when an operand has symbolic
// dims, the rule here gives each result dim as an expression in the symbols. The rule is chosen
// by the op's inference function, since that function is what defines the op's shape semantics
// (every op inferred by inferBroadcast broadcasts, every one inferred by inferUnary keeps its
// operand's shape). An op without a rule is refused, naming the dims to bind, instead of
// carrying its planning-point shape as if it held for every value.
#include "ir/infer_sym.h"

#include "ir/epilogue.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <set>

namespace aicf {

#define OP(id, name, minOps, maxOps, nres, flags, infer, ...)                                      \
  std::vector<TensorType> infer(InferCtx &ctx);
#include "ir/ops.def"
#undef OP

namespace {

using SymShape = std::vector<SymExpr>;

SymShape symShape(const TensorType &t) {
  SymShape s;
  for (size_t i = 0; i < t.shape.size(); ++i)
    s.push_back(t.symDim(i));
  return s;
}

std::string symStr(const SymShape &s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i)
    out += (i ? "," : "") + s[i].str();
  return out + "]";
}

// numpy broadcasting for every value of the dims (broadcastSymShapes), or the node fails.
SymShape broadcastSym(const InferCtx &ctx, const SymShape &a, const SymShape &b) {
  size_t bad = 0;
  auto out = broadcastSymShapes(a, b, &bad);
  if (!out) {
    size_t r = std::max(a.size(), b.size());
    SymExpr da = bad < r - a.size() ? SymExpr(1) : a[bad - (r - a.size())];
    SymExpr db = bad < r - b.size() ? SymExpr(1) : b[bad - (r - b.size())];
    ctx.fail(cat(ctx.info().name, " operand shapes ", symStr(a), " and ", symStr(b),
                 " broadcast only where ", da.str(), " equals ", db.str(),
                 ": not for every value of the symbolic dims"));
  }
  return *out;
}

SymShape broadcastOperands(const InferCtx &ctx, size_t from, size_t to) {
  SymShape s = symShape(ctx.operand(from));
  for (size_t k = from + 1; k < to; ++k)
    s = broadcastSym(ctx, s, symShape(ctx.operand(k)));
  return s;
}

SymExpr product(const InferCtx &ctx, const SymShape &s) {
  SymExpr n = 1;
  for (const SymExpr &d : s) {
    auto p = SymExpr::mul(n, d);
    if (!p)
      ctx.fail(cat(ctx.info().name, " element count ", symStr(s), " overflows"));
    n = *p;
  }
  return n;
}

void requireEqual(const InferCtx &ctx, const SymExpr &a, const SymExpr &b, const char *what) {
  if (a != b)
    ctx.fail(cat(ctx.info().name, " ", what, " ", a.str(), " and ", b.str(),
                 " are equal only for some values of the symbolic dims"));
}

// Epilogue operands (from `first` on) broadcast to the result for every value.
void checkEpilogueSym(const InferCtx &ctx, size_t first, const SymShape &out) {
  for (size_t k = first; k < ctx.numOperands(); ++k) {
    SymShape b = broadcastSym(ctx, out, symShape(ctx.operand(k)));
    if (b != out)
      ctx.fail(cat(ctx.info().name, " epilogue operand ", ctx.operand(k).str(),
                   " does not broadcast to the result's ", symStr(out)));
  }
}

// A list attribute of expressions (reshape / expand sym_shape, slice sym_starts / sym_ends):
// empty when unset, else `want` parsed entries.
SymShape symList(const InferCtx &ctx, const char *attr, size_t want) {
  const auto &texts = ctx.strs(attr);
  if (texts.empty())
    return {};
  if (texts.size() != want)
    ctx.fail(cat(ctx.info().name, " ", attr, " has ", texts.size(), " entries for ", want));
  SymShape out;
  for (const std::string &t : texts) {
    std::string why;
    auto e = SymExpr::parse(t, &why);
    if (!e)
      ctx.fail(cat(ctx.info().name, " ", attr, " entry '", t, "': ", why));
    out.push_back(*e);
  }
  return out;
}

size_t axisOf(const InferCtx &ctx, int64_t axis, int64_t rank) {
  return static_cast<size_t>(axis < 0 ? axis + rank : axis);
}

// The elementwise ops' rules: the shape of operand 0, or the operands broadcast.
std::optional<std::vector<SymShape>> elementwiseRule(InferFn fn, const InferCtx &ctx,
                                                     const std::vector<TensorType> &results) {
  using F = InferFn;
  using R = std::vector<SymShape>;
  if (fn == F(inferNorm)) {
    // The parameters are weights (static): they broadcast to the normalised dims only where
    // those are static or the parameter's dim is 1.
    SymShape x = symShape(ctx.operand(0));
    size_t axis = axisOf(ctx, ctx.i("axis"), ctx.operand(0).rank());
    SymShape norm(x.begin() + static_cast<std::ptrdiff_t>(axis), x.end());
    for (size_t k = 1; k < ctx.numOperands(); ++k)
      if (broadcastSym(ctx, norm, symShape(ctx.operand(k))) != norm)
        ctx.fail(cat(ctx.info().name, " parameter ", ctx.operand(k).str(),
                     " does not broadcast to the normalised dims ", symStr(norm)));
  }
  // Results with the shape of operand 0.
  for (F same : {F(inferUnary), F(inferUnaryFloat), F(inferSoftmax), F(inferUnaryBool),
                 F(inferCast), F(inferNorm)})
    if (fn == same) {
      std::vector<SymShape> out;
      for (const TensorType &r : results) {
        if (r.shape != ctx.operand(0).shape)
          return R{};
        out.push_back(symShape(ctx.operand(0)));
      }
      return out;
    }
  if (fn == F(inferBroadcast) || fn == F(inferCompare) || fn == F(inferLogical))
    return R{broadcastOperands(ctx, 0, ctx.numOperands())};
  if (fn == F(inferPow))
    return R{broadcastOperands(ctx, 0, 2)};
  if (fn == F(inferWhere))
    return R{broadcastOperands(ctx, 0, 3)};
  return std::nullopt;
}

// The contractions' rules: gemm, matmul, attention (the contracted dims equal).
std::optional<std::vector<SymShape>> contractionRule(InferFn fn, const InferCtx &ctx) {
  using F = InferFn;
  using R = std::vector<SymShape>;
  if (fn == F(inferGemm)) {
    SymShape a = symShape(ctx.operand(0)), b = symShape(ctx.operand(1));
    bool ta = ctx.i("transA") != 0, tb = ctx.i("transB") != 0;
    requireEqual(ctx, ta ? a[0] : a[1], tb ? b[1] : b[0], "contracted dims");
    SymShape out{ta ? a[1] : a[0], tb ? b[0] : b[1]};
    size_t extras = static_cast<size_t>(epilogueOperandCount(ctx.strs("epilogue")));
    size_t first = 2;
    if (ctx.numOperands() == 3 + extras) {
      if (broadcastSym(ctx, out, symShape(ctx.operand(2))) != out)
        ctx.fail(
            cat("gemm C operand ", ctx.operand(2).str(), " does not broadcast to ", symStr(out)));
      first = 3;
    }
    checkEpilogueSym(ctx, first, out);
    return R{out};
  }
  if (fn == F(inferMatMul)) {
    SymShape a = symShape(ctx.operand(0)), b = symShape(ctx.operand(1));
    bool aVec = a.size() == 1, bVec = b.size() == 1;
    if (aVec)
      a.insert(a.begin(), SymExpr(1));
    if (bVec)
      b.push_back(SymExpr(1));
    requireEqual(ctx, a.back(), b[b.size() - 2], "contracted dims");
    SymShape out =
        broadcastSym(ctx, SymShape(a.begin(), a.end() - 2), SymShape(b.begin(), b.end() - 2));
    if (!aVec)
      out.push_back(a[a.size() - 2]);
    if (!bVec)
      out.push_back(b.back());
    checkEpilogueSym(ctx, 2, out);
    return R{out};
  }
  if (fn == F(inferAttention)) {
    SymShape q = symShape(ctx.operand(0)), k = symShape(ctx.operand(1)),
             v = symShape(ctx.operand(2));
    size_t r = q.size();
    requireEqual(ctx, q[r - 1], k[r - 1], "q and k head sizes");
    requireEqual(ctx, k[r - 2], v[r - 2], "k and v lengths");
    for (size_t d = 0; d + 2 < r; ++d) {
      requireEqual(ctx, q[d], k[d], "q and k batch dims");
      requireEqual(ctx, q[d], v[d], "q and v batch dims");
    }
    SymShape scores(q.begin(), q.end() - 1);
    scores.push_back(k[r - 2]);
    if (ctx.numOperands() == 4 && broadcastSym(ctx, scores, symShape(ctx.operand(3))) != scores)
      ctx.fail(cat("attention mask ", ctx.operand(3).str(), " does not broadcast to the scores ",
                   symStr(scores)));
    SymShape out(q.begin(), q.end() - 1);
    out.push_back(v[r - 1]);
    return R{out};
  }
  return std::nullopt;
}

// The rules of the ops that set a data dim (and fail): the dim's symbol where the length is
// known only at run time.
std::optional<std::vector<SymShape>> dataDimRule(InferFn fn, const InferCtx &ctx) {
  using F = InferFn;
  using R = std::vector<SymShape>;
  // Lengths known only at run time: the data dim's symbol (operands may be symbolic too).
  if (fn == F(inferNonZero))
    return R{{SymExpr(ctx.operand(0).rank()), SymExpr::symbol(ctx.s("dim"))}, {}};
  if (fn == F(inferSetDim))
    return R{{}};
  if (fn == F(inferChoose)) {
    SymShape x = symShape(ctx.operand(1)), y = symShape(ctx.operand(2));
    for (size_t d = 1; d < x.size(); ++d)
      requireEqual(ctx, x[d], y[d], "dims");
    x[0] = SymExpr::symbol(ctx.s("dim"));
    return R{x, {}};
  }
  if (fn == F(inferNms)) {
    requireEqual(ctx, ctx.operand(0).symDim(0), ctx.operand(1).symDim(0), "batch dims");
    requireEqual(ctx, ctx.operand(0).symDim(1), ctx.operand(1).symDim(2), "box counts");
    return R{{SymExpr::symbol(ctx.s("dim")), SymExpr(3)}, {}};
  }
  if (fn == F(inferUnique)) {
    SymShape x = symShape(ctx.operand(0));
    SymExpr dim = SymExpr::symbol(ctx.s("dim"));
    SymShape y = x;
    y[0] = dim;
    return R{y, {dim}, {x[0]}, {dim}, {}};
  }
  if (fn == F(inferTopK)) {
    SymShape x = symShape(ctx.operand(0));
    size_t axis = axisOf(ctx, ctx.i("axis"), ctx.operand(0).rank());
    SymShape k = symList(ctx, "sym_k", 1);
    x[axis] = k.empty() ? SymExpr(ctx.i("k")) : k[0];
    return R{x, x};
  }
  if (fn == F(inferFail)) // no operands: symbolic only through its own sym_shape
    return R{symList(ctx, "sym_shape", ctx.ints("shape").size())};
  return std::nullopt;
}

// The shape ops' rules: reshape, reductions, concat, split, slices, gathers, expand, tile,
// transpose.
std::optional<std::vector<SymShape>> shapeRule(InferFn fn, const InferCtx &ctx,
                                               const std::vector<TensorType> &results) {
  using F = InferFn;
  using R = std::vector<SymShape>;
  if (fn == F(inferReshape)) {
    SymShape out = symList(ctx, "sym_shape", ctx.ints("shape").size());
    if (out.empty())
      ctx.fail(cat("reshape of ", ctx.operand(0).str(), " to ", shapeStr(ctx.ints("shape")),
                   " needs the target's symbolic dims (sym_shape)"));
    // The element counts agree as polynomials: for every value of the dims, not just one.
    if (product(ctx, out) != product(ctx, symShape(ctx.operand(0))))
      ctx.fail(cat("reshape of ", ctx.operand(0).str(), " to ", symStr(out),
                   " changes the element count for some values of the symbolic dims"));
    return R{out};
  }
  if (fn == F(inferReduce)) {
    SymShape x = symShape(ctx.operand(0)), out;
    const auto &axes = ctx.ints("axes");
    for (size_t d = 0; d < x.size(); ++d) {
      bool reduced = axes.empty() ||
                     std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end();
      if (!reduced)
        out.push_back(x[d]);
      else if (ctx.i("keepdims"))
        out.push_back(SymExpr(1));
    }
    return R{out};
  }
  if (fn == F(inferConcat)) {
    SymShape out = symShape(ctx.operand(0));
    size_t axis = static_cast<size_t>(ctx.i("axis") < 0 ? ctx.i("axis") + ctx.operand(0).rank()
                                                        : ctx.i("axis"));
    for (size_t k = 1; k < ctx.numOperands(); ++k) {
      SymShape y = symShape(ctx.operand(k));
      for (size_t d = 0; d < out.size(); ++d)
        if (d != axis)
          requireEqual(ctx, out[d], y[d], "operand dims off the axis");
      auto sum = SymExpr::add(out[axis], y[axis]);
      if (!sum)
        ctx.fail("concat result dim overflows");
      out[axis] = *sum;
    }
    return R{out};
  }
  if (fn == F(inferSplit)) {
    // Pieces of fixed sizes: the split axis must be static; the other dims carry over.
    SymShape x = symShape(ctx.operand(0));
    size_t axis = static_cast<size_t>(ctx.i("axis") < 0 ? ctx.i("axis") + ctx.operand(0).rank()
                                                        : ctx.i("axis"));
    if (!x[axis].isConstant())
      ctx.fail(cat("split along dim ", axis, " of ", ctx.operand(0).str(),
                   " into fixed sizes holds for one value of ", x[axis].str(), " only"));
    std::vector<SymShape> out;
    for (int64_t sz : ctx.ints("sizes")) {
      SymShape piece = x;
      piece[axis] = SymExpr(sz);
      out.push_back(piece);
    }
    return out;
  }
  if (fn == F(inferArg)) {
    SymShape x = symShape(ctx.operand(0)), out;
    size_t axis = axisOf(ctx, ctx.i("axis"), ctx.operand(0).rank());
    for (size_t d = 0; d < x.size(); ++d)
      if (d != axis)
        out.push_back(x[d]);
      else if (ctx.i("keepdims"))
        out.push_back(SymExpr(1));
    return R{out};
  }
  if (fn == F(inferSlice)) {
    // A window with constant bounds keeps its static extent (the importer checked that the
    // bounds lie within the axis for every value in the dims' ranges, or bound them
    // symbolically); a symbolic bound gives end - start, with step 1 only: a longer step would
    // take a floor division of the extent.
    SymShape x = symShape(ctx.operand(0)), out = x;
    const auto &starts = ctx.ints("starts"), &ends = ctx.ints("ends"), &axes = ctx.ints("axes"),
               &steps = ctx.ints("steps");
    SymShape ss = symList(ctx, "sym_starts", axes.size()),
             se = symList(ctx, "sym_ends", axes.size());
    for (size_t k = 0; k < axes.size(); ++k) {
      size_t a = static_cast<size_t>(axes[k]);
      SymExpr s = ss.empty() ? SymExpr(starts[k]) : ss[k],
              e = se.empty() ? SymExpr(ends[k]) : se[k];
      if (s.isConstant() && e.isConstant()) {
        if (s.constant() != starts[k] || e.constant() != ends[k])
          ctx.fail(cat("slice symbolic bounds [", s.str(), ", ", e.str(), ") differ from [",
                       starts[k], ", ", ends[k], ")"));
        out[a] = SymExpr(results[0].shape[a]);
        continue;
      }
      if (steps[k] != 1)
        ctx.fail(cat("slice of axis ", a, " of ", ctx.operand(0).str(), " from ", s.str(), " to ",
                     e.str(), " by step ", steps[k],
                     ": a symbolic bound is supported with step 1 only"));
      auto extent = SymExpr::sub(e, s);
      if (!extent)
        ctx.fail("slice extent overflows");
      out[a] = *extent;
    }
    return R{out};
  }
  if (fn == F(inferGather)) {
    SymShape x = symShape(ctx.operand(0)), idx = symShape(ctx.operand(1));
    size_t axis = axisOf(ctx, ctx.i("axis"), ctx.operand(0).rank());
    SymShape out(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(axis));
    out.insert(out.end(), idx.begin(), idx.end());
    out.insert(out.end(), x.begin() + static_cast<std::ptrdiff_t>(axis) + 1, x.end());
    return R{out};
  }
  if (fn == F(inferExpand)) {
    SymShape target = symList(ctx, "sym_shape", ctx.ints("shape").size());
    if (target.empty())
      for (int64_t d : ctx.ints("shape"))
        target.push_back(SymExpr(d));
    return R{broadcastSym(ctx, symShape(ctx.operand(0)), target)};
  }
  if (fn == F(inferTile)) {
    SymShape out = symShape(ctx.operand(0));
    const auto &reps = ctx.ints("repeats");
    for (size_t d = 0; d < out.size(); ++d) {
      auto p = SymExpr::mul(out[d], SymExpr(reps[d]));
      if (!p)
        ctx.fail("tile result dim overflows");
      out[d] = *p;
    }
    return R{out};
  }
  if (fn == F(inferTranspose)) {
    SymShape x = symShape(ctx.operand(0)), out;
    for (int64_t p : ctx.ints("perm"))
      out.push_back(x[static_cast<size_t>(p)]);
    return R{out};
  }
  return std::nullopt;
}

// The per-image ops' rule (convolutions, pooling, per-image norms, pad, resize): each image of
// dim 0 (the batch) is computed from the same image of operand 0 alone, so a symbolic batch
// carries over to every result. Only dim 0 may be symbolic, in operand 0 and in an epilogue's
// operands (the others are weights and scales); an op that moves data across dim 0 (a pad or crop
// of it, a resize that scales it, a norm over it) has no rule.
std::optional<std::vector<SymShape>> perImageRule(InferFn fn, const InferCtx &ctx,
                                                  const std::vector<TensorType> &results) {
  using F = InferFn;
  using R = std::vector<SymShape>;
  if (fn != F(inferConv) && fn != F(inferBlockedConv) && fn != F(inferConvTranspose) &&
      fn != F(inferPool) && fn != F(inferGlobalPool) && fn != F(inferBatchNorm) &&
      fn != F(inferPad) && fn != F(inferResize) && fn != F(inferMeanVarianceNorm))
    return std::nullopt;
  const TensorType &x = ctx.operand(0);
  for (size_t d = 1; d < x.shape.size(); ++d)
    if (!x.symDim(d).isConstant())
      ctx.fail(cat(ctx.info().name, " of ", x.str(), ": only the batch (dim 0) may be symbolic"));
  // Weights and scales are static; an epilogue's extra operand (a residual) may share the batch.
  for (size_t k = 1; k < ctx.numOperands(); ++k) {
    const TensorType &y = ctx.operand(k);
    bool ok = !y.isSymbolic() || (y.shape.size() == x.shape.size() && y.symDim(0) == x.symDim(0));
    for (size_t d = 1; ok && d < y.shape.size(); ++d)
      ok = y.symDim(d).isConstant();
    if (!ok)
      ctx.fail(cat(ctx.info().name, " operand ", k, " ", y.str(),
                   " depends on symbolic dims: only the batch (dim 0) of the input and of an "
                   "epilogue's operands may"));
  }
  bool acrossImages = false;
  if (fn == F(inferPad)) {
    const auto &pads = ctx.ints("pads");
    acrossImages = pads.at(0) != 0 || pads.at(pads.size() / 2) != 0;
  } else if (fn == F(inferMeanVarianceNorm)) {
    const auto &axes = ctx.ints("axes");
    acrossImages = axes.empty() || std::find(axes.begin(), axes.end(), 0) != axes.end();
  }
  for (const TensorType &r : results)
    acrossImages = acrossImages || r.shape.empty() || r.shape[0] != x.shape[0];
  if (acrossImages)
    ctx.fail(cat(ctx.info().name, " of ", x.str(), " reads across dim 0 (", x.symDim(0).str(),
                 "): it cannot be symbolic here; bind it with --dim NAME=N"));
  R out;
  for (const TensorType &r : results) {
    SymShape s{x.symDim(0)};
    for (size_t d = 1; d < r.shape.size(); ++d)
      s.push_back(SymExpr(r.shape[d]));
    out.push_back(s);
  }
  return out;
}

std::vector<SymShape> ruleFor(InferFn fn, const InferCtx &ctx,
                              const std::vector<TensorType> &results) {
  if (auto r = perImageRule(fn, ctx, results))
    return *r;
  if (auto r = elementwiseRule(fn, ctx, results))
    return *r;
  if (auto r = contractionRule(fn, ctx))
    return *r;
  if (auto r = dataDimRule(fn, ctx))
    return *r;
  if (auto r = shapeRule(fn, ctx, results))
    return *r;
  return {};
}

} // namespace

std::optional<std::vector<SymExpr>> broadcastSymShapes(const std::vector<SymExpr> &a,
                                                       const std::vector<SymExpr> &b, size_t *bad) {
  size_t r = std::max(a.size(), b.size());
  std::vector<SymExpr> out(r);
  for (size_t i = 0; i < r; ++i) {
    SymExpr da = i < r - a.size() ? SymExpr(1) : a[i - (r - a.size())];
    SymExpr db = i < r - b.size() ? SymExpr(1) : b[i - (r - b.size())];
    if (da == db || db == SymExpr(1)) {
      out[i] = da;
    } else if (da == SymExpr(1)) {
      out[i] = db;
    } else {
      if (bad)
        *bad = i;
      return std::nullopt;
    }
  }
  return out;
}

std::vector<TensorType> runInfer(const OpInfo &info, InferCtx &ctx) {
  std::vector<TensorType> results = info.infer(ctx);
  // Symbolic when an operand is, or when the op's own symbolic attributes give a dim an
  // expression (a slice of a constant buffer up to a symbolic end, an expand of a scalar to a
  // symbolic shape).
  bool symbolic = false;
  for (size_t k = 0; k < ctx.numOperands(); ++k)
    symbolic = symbolic || ctx.operand(k).isSymbolic();
  for (const AttrSpec &a : info.attrs)
    if (a.kind == AttrKind::Strings && std::string_view(a.name).rfind("sym_", 0) == 0)
      symbolic = symbolic || !ctx.strs(a.name).empty();
  symbolic = symbolic || info.has(SETS_DIM); // its result length is the data dim
  if (!symbolic) {
    for (TensorType &r : results)
      r.sym.clear();
    return results;
  }
  std::vector<SymShape> syms = ruleFor(info.infer, ctx, results);
  if (syms.size() != results.size()) {
    std::set<std::string> names;
    for (size_t k = 0; k < ctx.numOperands(); ++k)
      for (const SymExpr &e : ctx.operand(k).sym)
        for (const std::string &s : e.symbols())
          names.insert(s);
    std::string list;
    for (const std::string &n : names)
      list += (list.empty() ? "" : ", ") + n;
    ctx.fail(cat(info.name, " has no symbolic shape rule yet, and its operands depend on ", list,
                 ": bind ", names.size() == 1 ? "it" : "them", " to one value with --dim NAME=N"));
  }
  for (size_t r = 0; r < results.size(); ++r) {
    AICF_CHECK(syms[r].size() == results[r].shape.size(), "symbolic rule of ", info.name,
               " gives rank ", syms[r].size(), " for ", results[r].str());
    results[r].sym = syms[r];
    results[r].normalizeSym();
  }
  return results;
}

} // namespace aicf
