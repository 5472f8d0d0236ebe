// Row norms inside a tiled contraction (lower/contraction.h): a layer_norm / rms_norm folded
// into the A read (lower/fusion.h rule 7: the tile rows' statistics first, A staged normalised)
// and a row norm applied as the epilogue (rule 9: tiles of whole output rows normalised before
// the store).
#include "lower/contraction.h"
#include "lower/recipe_support.h"

#include "ir/graph.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <set>

namespace aicf {

using kir::E;
using kir::StmtP;
using namespace recipe;

namespace contraction {

// The row norm folded into the group's A read (lower/fusion.h rule 7), or null.
const Node *foldedRowNorm(const KernelGroup &g) {
  for (const Node *m : g.nodes)
    if (m != g.anchor && (m->op() == Op::LayerNorm || m->op() == Op::RmsNorm))
      return m;
  return nullptr;
}

// A row norm read as A (lower/fusion.h rule 7, ir/norm_readers.h): the tile's rows' statistics
// first, two passes over each row of the raw A (the norm's input seen through A's reshapes): the
// mean, then the centred sum of squares (rms_norm: the sum of squares), into shared buffers
// `nm` / `nr` (mean and 1 / sqrt(var + eps)) of one entry per tile row; rows over threads. Then
// A reads the norm's result as (x - mean) * rstd * gamma + beta from two scalars each tile row
// declares (pn_mu, pn_rs): A is staged, never read in place.
std::vector<StmtP> rowNormPrologue(const Node &norm, GroupExpr &gx, Contraction &c, const Tiles &tl,
                                   const Index &bi, E m0, const std::string &t,
                                   std::vector<kir::BufferP> &allocs) {
  const Value *x = norm.operand(0), *y = norm.result();
  const std::vector<int64_t> xs = x->type().shape;
  const int64_t K = xs.back();
  const bool layer = norm.op() == Op::LayerNorm;
  const double eps = norm.f("epsilon");
  auto mean = std::make_shared<kir::Buffer>(
      kir::Buffer{"nm", DType::F32, {tl.BM}, kir::Scope::Shared, kir::Role::Temp, {}});
  auto rstd = std::make_shared<kir::Buffer>(
      kir::Buffer{"nr", DType::F32, {tl.BM}, kir::Scope::Shared, kir::Role::Temp, {}});
  if (layer)
    allocs.push_back(mean);
  allocs.push_back(rstd);
  // The statistics read the raw rows.
  gx.substitute(y, [&gx, x](const Index &idx) { return asF32(gx.at(x, idx)); });
  E r = ivar("nr_r"), row = m0 + r, kk = ivar("nr_k");
  std::vector<StmtP> body;
  E K_ = f32(double(K));
  if (layer) {
    body.push_back(kir::decl("ns", DType::F32, f32(0.0)));
    body.push_back(vectorLoop("nr_k", E(int64_t(0)), E(K),
                              {kir::assign("ns", fvar("ns") + c.aAt(bi, row, kk))}));
    body.push_back(kir::decl("nmu", DType::F32, fvar("ns") / K_));
    body.push_back(kir::decl("nv", DType::F32, f32(0.0)));
    body.push_back(vectorLoop("nr_k", E(int64_t(0)), E(K),
                              {kir::decl("nd", DType::F32, c.aAt(bi, row, kk) - fvar("nmu")),
                               kir::assign("nv", fvar("nv") + fvar("nd") * fvar("nd"))}));
    body.push_back(kir::store(mean, {r}, fvar("nmu")));
  } else {
    body.push_back(kir::decl("nv", DType::F32, f32(0.0)));
    body.push_back(vectorLoop("nr_k", E(int64_t(0)), E(K),
                              {kir::decl("nd", DType::F32, c.aAt(bi, row, kk)),
                               kir::assign("nv", fvar("nv") + fvar("nd") * fvar("nd"))}));
  }
  body.push_back(
      kir::store(rstd, {r}, f32(1.0) / kir::unary(kir::UnOp::Sqrt, fvar("nv") / K_ + f32(eps))));
  std::vector<StmtP> guarded =
      c.mRagged(tl.BM) ? std::vector<StmtP>{kir::ifThen(row < c.Me(), body)} : body;
  std::vector<StmtP> out = {
      kir::comment(cat(norm.name(), " %", y->name().empty() ? cat(y->id()) : y->name(),
                       " folded into A's rows (fusion rule 7): ", layer ? "mean and " : "",
                       "1 / sqrt(", layer ? "var" : "mean square",
                       " + eps) per tile row, A normalised as it is staged")),
      kir::region(t, {kir::forLoop("nr_r", ivar(t), E(tl.BM) - ivar(t), guarded, tl.threads)}),
      kir::barrier()};
  // A reads the normalised rows.
  const Value *gamma = norm.numOperands() > 1 ? norm.operand(1) : nullptr;
  const Value *beta = layer && norm.numOperands() > 2 ? norm.operand(2) : nullptr;
  gx.substitute(y, [&gx, x, xs, gamma, beta, layer](const Index &idx) {
    E v = asF32(gx.at(x, idx));
    v = layer ? (v - fvar("pn_mu")) * fvar("pn_rs") : v * fvar("pn_rs");
    if (gamma)
      v = v * asF32(gx.at(gamma, broadcastIndex(gamma->type().shape, xs, idx)));
    if (beta)
      v = v + asF32(gx.at(beta, broadcastIndex(beta->type().shape, xs, idx)));
    return v;
  });
  auto rowDecls = c.aRowDecls;
  c.aRowDecls = [rowDecls, mean, rstd, m0, layer](E rowAbs) {
    std::vector<StmtP> d = rowDecls ? rowDecls(rowAbs) : std::vector<StmtP>{};
    if (layer)
      d.push_back(kir::decl("pn_mu", DType::F32, kir::load(mean, {rowAbs - m0})));
    d.push_back(kir::decl("pn_rs", DType::F32, kir::load(rstd, {rowAbs - m0})));
    return d;
  };
  return out;
}

std::vector<StmtP> normEpilogueRegions(const Node &norm, const KernelGroup &g, GroupExpr &gx,
                                       const Value *result, const std::string &cur,
                                       std::vector<StmtP> fin, const kir::BufferP &C, E tv,
                                       int64_t TM, int64_t N, const Index &out,
                                       const std::string &t,
                                       const std::function<StmtP(std::vector<StmtP>)> &overTile,
                                       std::vector<kir::BufferP> &allocs) {
  // The norm's input back into the tile, its rows' statistics (two passes: the mean, then the
  // centred sum of squares; rms_norm: the sum of squares), then the normalised rows stored.
  std::vector<StmtP> out1;
  gx.substitute(result, [cur](const Index &) { return fvar(cur); });
  E i = ivar("i"), j = ivar("j");
  fin.push_back(kir::store(C, {tv, i, j}, asF32(gx.at(norm.operand(0), out))));
  out1.push_back(overTile(fin));
  const bool layer = norm.op() == Op::LayerNorm;
  int64_t threads = C->shape[0];
  kir::BufferP mu = tempBuffer("ne_mu", {threads, TM}, kir::Scope::Local);
  kir::BufferP rs = tempBuffer("ne_rs", {threads, TM}, kir::Scope::Local);
  if (layer)
    allocs.push_back(mu);
  allocs.push_back(rs);
  E jj = ivar("nj"), nN = f32(double(N));
  std::vector<StmtP> row;
  if (layer) {
    row.push_back(kir::decl("ns", DType::F32, f32(0.0)));
    row.push_back(vectorLoop("nj", E(int64_t(0)), E(N),
                             {kir::assign("ns", fvar("ns") + kir::load(C, {tv, i, jj}))}));
    row.push_back(kir::decl("nmu", DType::F32, fvar("ns") / nN));
  }
  row.push_back(kir::decl("nv", DType::F32, f32(0.0)));
  row.push_back(vectorLoop(
      "nj", E(int64_t(0)), E(N),
      {kir::decl("nd", DType::F32,
                 layer ? kir::load(C, {tv, i, jj}) - fvar("nmu") : kir::load(C, {tv, i, jj})),
       kir::assign("nv", fvar("nv") + fvar("nd") * fvar("nd"))}));
  if (layer)
    row.push_back(kir::store(mu, {tv, i}, fvar("nmu")));
  row.push_back(
      kir::store(rs, {tv, i},
                 f32(1.0) / kir::unary(kir::UnOp::Sqrt, fvar("nv") / nN + f32(norm.f("epsilon")))));
  out1.push_back(kir::region(t, {kir::forLoop("i", E(int64_t(0)), E(TM), row)}));
  const Value *gamma = norm.numOperands() > 1 ? norm.operand(1) : nullptr;
  const Value *beta = layer && norm.numOperands() > 2 ? norm.operand(2) : nullptr;
  const std::vector<int64_t> &ys = norm.result()->type().shape;
  E y = kir::load(C, {tv, i, j});
  y = layer ? (y - kir::load(mu, {tv, i})) * kir::load(rs, {tv, i}) : y * kir::load(rs, {tv, i});
  if (gamma)
    y = y * asF32(gx.at(gamma, broadcastIndex(gamma->type().shape, ys, out)));
  if (beta)
    y = y + asF32(gx.at(beta, broadcastIndex(beta->type().shape, ys, out)));
  std::vector<StmtP> last = {kir::decl("ny", DType::F32, y)};
  auto stores = storeGroupOutputs(g, gx, norm.result(), fvar("ny"), out);
  last.insert(last.end(), stores.begin(), stores.end());
  out1.push_back(overTile(last));
  return out1;
}

} // namespace contraction

} // namespace aicf
