// The streaming_attention recipe (docs/algorithms.md; weighted_streaming_reduction +
// tile_compatible_compute + rematerializable_intermediate; after FlashAttention):
// softmax(scale q k^T + mask) v without ever storing the scores to global memory.
//
//   grid (b: batch, qt: query tiles of BR rows)  block (t: threads); thread t owns the tm =
//   BR / threads consecutive tile rows t tm + [0, tm) (the mma_tile ownership rule).
//   region t { qs = Q tile (shared); m = -inf, l = 0, O = 0 (local, per owned row) }
//   for kt over the key tiles this query tile can see (causal: tiles wholly above the diagonal
//   are skipped by the loop bound):
//     region t { ksT = K tile transposed, vs = V tile (shared, zero beyond Sk) }; barrier
//     region t { S = 0 }; mma_tile(S += qs x ksT)                   -- scores, local
//     region t { per owned row: s = scale S (+ mask), -inf where masked (causal inside the
//                diagonal tile, mask false / -inf, keys beyond Sk); m' = max(m, max s);
//                p = e^(s - m') into ps (shared); l = l e^(m - m') + sum p; O *= e^(m - m') }
//     barrier; mma_tile(O += ps x vs); barrier                     -- weighted accumulation
//   region t { out = O / l, or 0 when l = 0 (every key masked); fused epilogue; store }
//
// Both products are block-level mma_tile collectives: the CUDA printer maps them to the
// block's threads, the host printer to its vector micro-kernel (BC and Dv multiples of 16).
// Every exponential is guarded for m = -inf (the rescale factor is 1 when the max did not
// move, p = 0 while the row has seen no key), so fully masked rows give zeros like the
// interpreter, never NaN. The causal mask hides key j from query i when j > i + (Sk - Sq). A
// mask is loaded through its broadcast index over [batch..., Sq, Sk]: bool keeps where true,
// float is added.
//
// Knobs: BR (query rows per block), BC (keys per tile), threads (divides BR).
#include "lower/recipe_support.h"
#include "lower/recipes.h"

#include "ir/graph.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <limits>

namespace aicf {

using kir::E;
using kir::StmtP;
using namespace recipe;

namespace {

const double kNegInf = -std::numeric_limits<double>::infinity();

E f32(double v) {
  return kir::fconst(v, DType::F32);
}
E fvar(const std::string &name) {
  return kir::var(name, DType::F32);
}
E ivar(const std::string &name) {
  return kir::var(name, DType::I64);
}

// A cooperative copy of a [rows, cols] tile: thread t takes elements t, t + threads, ... of the
// row-major tile. `src(r, c)` is the element's value and `valid(r)` (may be null) whether the
// tile row exists in the source; rows that do not are zero-filled. A block of one thread (the
// host plans) walks rows and then columns instead: no division per element, and the inner
// loop reads the source row contiguously, so it vectorises (the LLaMA query tile with its
// rotary prologue: flat, ~6 cycles an element).
StmtP tileCopy(const kir::BufferP &dst, int64_t rows, int64_t cols, int64_t threads,
               const std::string &t, const std::string &e, const std::function<E(E r, E c)> &src,
               const std::function<E(E r)> &valid) {
  if (threads == 1) {
    E r = ivar(e + "r"), c = ivar(e + "c");
    auto cols1 = [&](StmtP st) {
      return kir::forLoop(e + "c", E(int64_t(0)), E(cols), {st}, 1,
                          kir::Stmt::LoopKind::Vectorized);
    };
    StmtP copy = cols1(kir::store(dst, {r, c}, src(r, c)));
    E ok = valid ? valid(r) : E();
    StmtP row = ok ? kir::ifThen(ok, {copy}, {cols1(kir::store(dst, {r, c}, f32(0.0)))}) : copy;
    return kir::forLoop(e + "r", E(int64_t(0)), E(rows), {row});
  }
  E ev = ivar(e);
  E r = ev / E(cols), c = ev % E(cols);
  E ok = valid ? valid(r) : E();
  StmtP st = ok ? kir::ifThen(ok, {kir::store(dst, {r, c}, src(r, c))},
                              {kir::store(dst, {r, c}, f32(0.0))})
                : kir::store(dst, {r, c}, src(r, c));
  return kir::forLoop(e, ivar(t), E(rows * cols) - ivar(t), {st}, threads);
}

// The thread tiles of an m x n product on m16n8 fragments over `threads` (whole warps): as
// many warp rows as 16-row steps allow, up to the warps, the rest as warp columns; nullopt when
// a warp tile would not be whole m16n8 pairs.
struct WarpTiles {
  int64_t tm, tn;
};
std::optional<WarpTiles> warpTiles(int64_t m, int64_t n, int64_t threads) {
  if (threads % 32 != 0 || threads < 32)
    return std::nullopt;
  int64_t warps = threads / 32, wr = 1;
  while (wr * 2 <= warps && warps % (wr * 2) == 0 && m % (16 * wr * 2) == 0)
    wr *= 2;
  int64_t wc = warps / wr;
  if (m % (16 * wr) != 0 || n % (8 * wc) != 0)
    return std::nullopt;
  return WarpTiles{m / wr / 8, n / wc / 4};
}

// The kernel's tiles from the knobs: BR query rows by BC keys per tile, the threads, and on
// tensor cores the fragment and the two products' warp tiles (recipeStreamingAttention).
struct AttentionTiles {
  kir::MmaFrag frag = kir::MmaFrag::None;
  std::optional<WarpTiles> sTiles, oTiles;
  int64_t BR = 1, BC = 1, threads = 1;
};

AttentionTiles attentionTiles(const Node &n, const Knobs &knobs, int64_t Sq, int64_t D,
                              int64_t Dv) {
  AttentionTiles at;
  bool gpu = isGpuPlan(knobs);
  // Knobs. GPU: one query row per thread, tiles sized so the four shared tiles stay under
  // 44 KB (static shared memory is limited to 48 KB). Host: one thread owns the whole tile, so
  // both products run on the vector micro-kernel.
  int64_t brDefault = gpu ? (Sq <= 32 ? 32 : 64) : 64;
  // Head size <= 32: BC = 16 (at 32 the per-thread score row and its exponentials spilled
  // 24-128 bytes on sm_80/sm_90; at 16 ptxas reports no spills).
  int64_t bcDefault = gpu ? (D <= 32 ? 16 : 32) : 64;
  auto smem = [&](int64_t br, int64_t bc) { return 4 * (br * D + D * bc + bc * Dv + br * bc); };
  while (gpu && smem(brDefault, bcDefault) > 44 * 1024 && (brDefault > 16 || bcDefault > 16)) {
    if (bcDefault > 16)
      bcDefault /= 2;
    else
      brDefault /= 2;
  }
  // Tensor cores (a GPU plan of an attention in reduced precision, ir/precision.h): both
  // products on m16n8 fragments (kir.h), one query row per thread for the softmax; tiles of
  // 64 query rows over 4 warps, 64 keys (32 past head size 64). Head sizes the fragments
  // cannot tile fall back to the SIMT form (the step then reports fp32).
  kir::MmaFrag &frag = at.frag;
  frag = tensorFrag(n, knobs);
  // A head size no fragment tiles (D not a multiple of the instruction's k, Dv not of 8: a
  // Swin's 24) takes the SIMT form whatever the knobs: the planner's candidates for this kernel
  // are then SIMT ones, which name BR, BC and threads.
  if (frag != kir::MmaFrag::None && (D % kir::mmaFragK(frag) != 0 || Dv % 8 != 0))
    frag = kir::MmaFrag::None;
  std::optional<WarpTiles> &sTiles = at.sTiles, &oTiles = at.oTiles;
  const int64_t simtBR = brDefault, simtBC = bcDefault;
  if (frag != kir::MmaFrag::None) {
    brDefault = Sq <= 32 ? 32 : 64;
    bcDefault = std::max(D, Dv) <= 64 ? 64 : 32;
  }
  int64_t &BR = at.BR, &BC = at.BC;
  BR = std::max<int64_t>(1, knobs.get("BR", brDefault));
  BC = std::max<int64_t>(1, knobs.get("BC", bcDefault));
  if (frag != kir::MmaFrag::None) {
    int64_t threads = knobs.get("threads", 128);
    sTiles = warpTiles(BR, BC, threads);
    oTiles = warpTiles(BR, Dv, threads);
    if (!sTiles || !oTiles || threads < BR || D % kir::mmaFragK(frag) || BC % 16) {
      AICF_CHECK(!knobs.values.count("BR") && !knobs.values.count("BC") &&
                     !knobs.values.count("threads"),
                 "streaming_attention: tensor-core tiles BR ", BR, " BC ", BC, " threads ", threads,
                 " do not split into warp tiles (head sizes ", D, ", ", Dv, ")");
      frag = kir::MmaFrag::None;
      BR = simtBR;
      BC = simtBC;
    }
  }
  int64_t &threads = at.threads;
  threads = std::max<int64_t>(1, knobs.get("threads", frag != kir::MmaFrag::None ? 128
                                                      : gpu                      ? BR
                                                                                 : 1));
  AICF_CHECK(frag != kir::MmaFrag::None || BR % threads == 0, "streaming_attention: threads ",
             threads, " must divide BR ", BR);
  return at;
}

// The attention being lowered, as both forms of its kernel (SIMT, tensor cores) read it: the
// operands, the (symbolic) dims, the tiles chosen from the knobs, the grid coordinates, and the
// stages the forms share (tile copies, the scaled and masked score, the key tiles a query tile
// sees).
struct Attention {
  const KernelGroup *g = nullptr;
  const Node *n = nullptr;
  GroupExpr *gx = nullptr;
  const Value *q = nullptr, *kv = nullptr, *v = nullptr, *mask = nullptr, *result = nullptr;
  size_t r = 0; // the operands' rank
  std::vector<int64_t> batch;
  int64_t B = 1, Sq = 1, D = 1, Sk = 1, Dv = 1;
  // Symbolic dims (issue 21): the batch dims, Sq and Sk may depend on them (D and Dv are the
  // heads' static widths); every bound, guard and grid extent reads SqE / SkE / the symbolic
  // grid, and a tile is treated as ragged whenever its extent is symbolic.
  SymExpr bSym = 1, sqSym = 1, skSym = 1;
  E SqE, SkE;
  bool skSymbolic = false, causal = false, maskBool = false;
  double scale = 1.0;
  AttentionTiles at;
  std::string t; // the block's thread variable
  E tv;
  bool qRagged = false, kRagged = false; // always, where the extent is symbolic
  E nKTe;                                // key tiles in all
  std::vector<E> bIdx;                   // the batch coordinates of grid axis b
  E q0, k0;                              // the query tile's first row, key tile kt's first key

  // A raw score of query `row` and key `key` (the variables the per-key code declares) scaled
  // and masked: the mask is loaded through its broadcast over [batch..., Sq, Sk], decided on
  // the symbolic dims (a dim of 1 broadcasts; any other must equal the scores' for every value
  // of the dims); bool keeps where true, float is added.
  E maskedScore(E raw) const {
    E row = ivar("row"), key = ivar("key");
    E s = raw * f32(scale);
    if (!mask)
      return s;
    std::vector<SymExpr> scores;
    for (size_t d = 0; d + 2 < r; ++d)
      scores.push_back(q->type().symDim(d));
    scores.push_back(sqSym);
    scores.push_back(skSym);
    const TensorType &mt = mask->type();
    std::vector<E> at = concat(bIdx, {row, key}), idx;
    size_t off = scores.size() - mt.shape.size();
    for (size_t d = 0; d < mt.shape.size(); ++d) {
      SymExpr md = mt.symDim(d), sd = scores[off + d];
      if (md == SymExpr(1) && sd != SymExpr(1))
        idx.push_back(E(int64_t(0)));
      else if (md == sd)
        idx.push_back(at[off + d]);
      else
        throw UserError(cat(n->where(), ": attention mask ", mt.str(),
                            " does not broadcast to the scores for every value of the dims"));
    }
    E mv = gx->at(mask, idx);
    return maskBool ? kir::select(mv, s, f32(kNegInf)) : s + asF32(mv);
  }
  // Whether key `key` is visible to query `row`: inside Sk, and not above the causal diagonal.
  E visibleKey() const {
    E row = ivar("row"), key = ivar("key");
    std::vector<E> visible;
    if (kRagged)
      visible.push_back(key < SkE);
    if (causal)
      visible.push_back(key <= row + (skSymbolic || !sqSym.isConstant() ? SkE - SqE : E(Sk - Sq)));
    return allOf(visible);
  }
  // The key tiles this query tile sees. Causal: query row i sees keys j <= i + (Sk - Sq), so
  // the tile needs ceil((min(q0 + BR, Sq) + Sk - Sq) / BC) key tiles (clamped to [0, nKT]).
  E keyTiles() const {
    if (!causal)
      return nKTe;
    const int64_t BR = at.BR, BC = at.BC;
    E needed = sqSym.isConstant() && !skSymbolic
                   ? (kir::min(q0 + E(BR), E(Sq)) + E(Sk - Sq + BC - 1)) / E(BC)
                   : (kir::min(q0 + E(BR), SqE) + (SkE - SqE) + E(BC - 1)) / E(BC);
    return kir::min(nKTe, kir::max(E(int64_t(0)), needed));
  }
  // Whether row jj of key tile kt is a key (null when every tile is whole).
  std::function<E(E)> keyValid() const {
    if (!kRagged)
      return nullptr;
    E first = k0, end = SkE;
    return [first, end](E jj) { return first + jj < end; };
  }
  // K transposed (ksT[c, j] = K[k0 + j, c]) so that S = qs x ksT is a plain mma_tile.
  StmtP keyTileCopy(const kir::BufferP &ksT) const {
    const int64_t threads = at.threads, BC = at.BC;
    E e = ivar("e");
    E jj = threads == 1 ? ivar("er") : e / E(D), c = threads == 1 ? ivar("ec") : e % E(D);
    E val = asF32(gx->at(kv, concat(bIdx, {k0 + jj, c})));
    std::function<E(E)> valid = keyValid();
    StmtP st = valid ? kir::ifThen(valid(jj), {kir::store(ksT, {c, jj}, val)},
                                   {kir::store(ksT, {c, jj}, f32(0.0))})
                     : kir::store(ksT, {c, jj}, val);
    return threads == 1 ? kir::forLoop("er", E(int64_t(0)), E(BC),
                                       {kir::forLoop("ec", E(int64_t(0)), E(D), {st})})
                        : kir::forLoop("e", tv, E(BC * D) - tv, {st}, threads);
  }
  StmtP valueTileCopy(const kir::BufferP &vsh) const {
    return tileCopy(
        vsh, at.BC, Dv, at.threads, t, "e",
        [&](E jj, E c) {
          return asF32(gx->at(v, concat(bIdx, {k0 + jj, c})));
        },
        keyValid());
  }
  StmtP queryTileCopy(const kir::BufferP &qsh) const {
    return tileCopy(
        qsh, at.BR, D, at.threads, t, "e",
        [&](E rr, E c) {
          return asF32(gx->at(q, concat(bIdx, {q0 + rr, c})));
        },
        !qRagged ? std::function<E(E)>() : [this](E rr) { return q0 + rr < SqE; });
  }
};

// The attention's operands and dims, checked: only the outermost batch dim and the sequence
// lengths may be symbolic.
Attention describe(const KernelGroup &g, GroupExpr &gx, const Knobs &knobs, const std::string &t) {
  Attention a;
  const Node &n = *g.anchor;
  a.g = &g;
  a.n = &n;
  a.gx = &gx;
  a.q = n.operand(0);
  a.kv = n.operand(1);
  a.v = n.operand(2);
  a.mask = n.numOperands() == 4 ? n.operand(3) : nullptr;
  a.result = n.result();
  requireShapePreservingEpilogue(g, a.result);
  const TensorType &qt = a.q->type(), &kt = a.kv->type();
  const std::vector<int64_t> &qshape = qt.shape;
  a.r = qshape.size();
  const size_t r = a.r;
  a.batch.assign(qshape.begin(), qshape.end() - 2);
  a.B = product(a.batch);
  a.Sq = qshape[r - 2];
  a.D = qshape[r - 1];
  a.Sk = kt.shape[r - 2];
  a.Dv = a.v->type().shape[r - 1];
  for (size_t d = 0; d + 2 < r; ++d) {
    if (d > 0 && !qt.symDim(d).isConstant())
      throw UserError(cat(n.where(), ": attention ", qt.str(),
                          ": only the outermost batch dim may be symbolic"));
    a.bSym = *SymExpr::mul(a.bSym, qt.symDim(d));
  }
  if (!qt.symDim(r - 1).isConstant() || !a.v->type().symDim(r - 1).isConstant())
    throw UserError(cat(n.where(), ": attention ", qt.str(), ": symbolic head widths"));
  a.sqSym = qt.symDim(r - 2);
  a.skSym = kt.symDim(r - 2);
  a.SqE = kir::symE(a.sqSym);
  a.SkE = kir::symE(a.skSym);
  a.skSymbolic = !a.skSym.isConstant();
  a.scale = n.f("scale");
  a.causal = n.i("causal") != 0;
  a.maskBool = a.mask && a.mask->type().dtype == DType::Bool;
  a.at = attentionTiles(n, knobs, a.Sq, a.D, a.Dv);
  a.t = t;
  a.tv = ivar(t);
  const int64_t BR = a.at.BR, BC = a.at.BC;
  a.qRagged = !a.sqSym.isConstant() || a.Sq % BR != 0;
  a.kRagged = a.skSymbolic || a.Sk % BC != 0;
  a.nKTe = a.skSymbolic ? (a.SkE + E(BC - 1)) / E(BC) : E(ceilDiv(a.Sk, BC));
  a.bIdx = a.batch.empty() ? std::vector<E>{} : unflat(a.batch, ivar("b"));
  a.q0 = ivar("qt") * E(BR);
  a.k0 = ivar("kt") * E(BC);
  return a;
}

// ---- tensor cores: S = qs x ksT and O += ps x vs on m16n8 fragments (kir.h) -----------------
// Each tile's scores leave the fragments for a shared f32 tile (ss), where the thread that owns
// a query row (thread t: row t) runs the online softmax over it in f32, writing the
// probabilities rounded to the precision (ps) and the row's rescale factor (rs); the fragments
// of O are then rescaled by their rows' factors and accumulate ps x vs. Q, K and V are rounded
// where they are staged; m, l and the exponentials stay f32.
void tensorCoreBody(kir::Kernel &k, const Attention &a, Precision precision) {
  const kir::MmaFrag frag = a.at.frag;
  const int64_t BR = a.at.BR, BC = a.at.BC, threads = a.at.threads, D = a.D, Dv = a.Dv;
  const std::string &t = a.t;
  const E &tv = a.tv, &q0 = a.q0, &k0 = a.k0;
  const DType stage = precisionStorage(precision);
  auto staged = [&](const char *nm, std::vector<int64_t> shape) {
    kir::BufferP b = tempBuffer(nm, std::move(shape), kir::Scope::Shared);
    b->dtype = stage;
    return b;
  };
  kir::BufferP qsh = staged("qs", {BR, D}), ksT = staged("ksT", {D, BC});
  kir::BufferP vsh = staged("vs", {BC, Dv}), psh = staged("ps", {BR, BC});
  kir::BufferP ssh = tempBuffer("ss", {BR, BC}, kir::Scope::Shared);
  kir::BufferP rsh = tempBuffer("rs", {BR}, kir::Scope::Shared);
  const int64_t tmS = a.at.sTiles->tm, tnS = a.at.sTiles->tn;
  const int64_t tmO = a.at.oTiles->tm, tnO = a.at.oTiles->tn;
  kir::BufferP S = tempBuffer("S", {threads, tmS, tnS}, kir::Scope::Local);
  kir::BufferP O = tempBuffer("O", {threads, tmO, tnO}, kir::Scope::Local);
  kir::BufferP mSt = tempBuffer("m_run", {threads, 1}, kir::Scope::Local);
  kir::BufferP lSt = tempBuffer("l_run", {threads, 1}, kir::Scope::Local);
  k.allocs = {qsh, ksT, vsh, psh, ssh, rsh, S, O, mSt, lSt};
  k.body.push_back(kir::comment(
      cat("streaming attention on tensor cores (", kir::mmaFragName(frag), ", ",
          precisionName(precision), " operands, f32 softmax): ", BR, " query rows x ", BC,
          "-key tiles, ", threads / 32, " warps; thread t owns query row t's softmax",
          a.causal ? "; causal: key tiles above the diagonal skipped" : "")));
  E i = ivar("i"), j = ivar("j"), zero = E(int64_t(0)), t0 = E(int64_t(0));
  E owner = threads > BR ? tv < E(BR) : E();
  auto ownedRow = [&](std::vector<StmtP> body, std::vector<StmtP> outside) {
    std::vector<StmtP> perRow = {kir::decl("row", DType::I64, q0 + tv)};
    if (a.qRagged)
      perRow.push_back(kir::ifThen(ivar("row") < a.SqE, body, outside));
    else
      perRow.insert(perRow.end(), body.begin(), body.end());
    return kir::region(t, owner ? std::vector<StmtP>{kir::ifThen(owner, perRow)} : perRow);
  };
  // Unrolled: the fragments' registers stay registers only under constant indices.
  constexpr auto kUnrolled = kir::Stmt::LoopKind::Unrolled;
  auto overFrag = [&](int64_t tmX, int64_t tnX, std::vector<StmtP> body) {
    return kir::region(
        t, {kir::forLoop("i", zero, E(tmX), {kir::forLoop("j", zero, E(tnX), body, 1, kUnrolled)},
                         1, kUnrolled)});
  };
  E rowS = kir::mmaTileRow(frag, BC, tmS, tnS, tv, i);
  E colS = kir::mmaTileCol(frag, BC, tmS, tnS, tv, j);
  E rowO = kir::mmaTileRow(frag, Dv, tmO, tnO, tv, i);
  E colO = kir::mmaTileCol(frag, Dv, tmO, tnO, tv, j);

  k.body.push_back(kir::region(t, {a.queryTileCopy(qsh)}));
  std::vector<StmtP> reset = {kir::store(mSt, {tv, t0}, f32(kNegInf)),
                              kir::store(lSt, {tv, t0}, f32(0.0))};
  k.body.push_back(kir::region(t, owner ? std::vector<StmtP>{kir::ifThen(owner, reset)} : reset));
  k.body.push_back(overFrag(tmO, tnO, {kir::store(O, {tv, i, j}, f32(0.0))}));

  std::vector<StmtP> tile;
  tile.push_back(kir::region(t, {a.keyTileCopy(ksT), a.valueTileCopy(vsh)}));
  tile.push_back(kir::barrier());
  tile.push_back(overFrag(tmS, tnS, {kir::store(S, {tv, i, j}, f32(0.0))}));
  tile.push_back(kir::mmaTile(S, qsh, ksT, BR, BC, D, tmS, tnS));
  tile.back()->frag = frag;
  tile.push_back(overFrag(tmS, tnS, {kir::store(ssh, {rowS, colS}, kir::load(S, {tv, i, j}))}));
  tile.push_back(kir::barrier());
  {
    E sc = a.maskedScore(kir::load(ssh, {tv, j}));
    E vis = a.visibleKey();
    std::vector<StmtP> perKey = {kir::decl("key", DType::I64, k0 + j)};
    if (static_cast<bool>(vis) && a.kRagged) // keys past the end: the mask is not read there
      perKey.push_back(kir::ifThen(vis, {kir::store(ssh, {tv, j}, sc)},
                                   {kir::store(ssh, {tv, j}, f32(kNegInf))}));
    else
      perKey.push_back(kir::store(ssh, {tv, j}, vis ? kir::select(vis, sc, f32(kNegInf)) : sc));
    perKey.push_back(kir::assign("m_tile", kir::max(fvar("m_tile"), kir::load(ssh, {tv, j}))));
    constexpr auto kVec = kir::Stmt::LoopKind::Vectorized;
    std::vector<StmtP> rowBody = {
        kir::decl("m_old", DType::F32, kir::load(mSt, {tv, t0})),
        kir::decl("m_tile", DType::F32, f32(kNegInf)),
        kir::forLoop("j", zero, E(BC), perKey, 1, kVec),
        kir::decl("m_new", DType::F32, kir::max(fvar("m_old"), fvar("m_tile"))),
        kir::decl("alpha", DType::F32,
                  kir::select(fvar("m_old") == fvar("m_new"), f32(1.0),
                              kir::unary(kir::UnOp::Exp, fvar("m_old") - fvar("m_new")))),
        kir::decl("l_tile", DType::F32, f32(0.0)),
        kir::forLoop("j", zero, E(BC),
                     {kir::decl("pj", DType::F32,
                                kir::select(fvar("m_new") == f32(kNegInf), f32(0.0),
                                            kir::unary(kir::UnOp::Exp,
                                                       kir::load(ssh, {tv, j}) - fvar("m_new")))),
                      kir::store(psh, {tv, j}, fvar("pj")),
                      kir::assign("l_tile", fvar("l_tile") + fvar("pj"))},
                     1, kVec),
        kir::store(lSt, {tv, t0}, kir::load(lSt, {tv, t0}) * fvar("alpha") + fvar("l_tile")),
        kir::store(mSt, {tv, t0}, fvar("m_new")),
        kir::store(rsh, {tv}, fvar("alpha"))};
    // Rows beyond Sq (last query tile): zero probabilities, nothing to rescale.
    std::vector<StmtP> padRow = {
        kir::forLoop("j", zero, E(BC), {kir::store(psh, {tv, j}, f32(0.0))}, 1, kVec),
        kir::store(rsh, {tv}, f32(1.0))};
    tile.push_back(ownedRow(rowBody, padRow));
  }
  tile.push_back(kir::barrier());
  tile.push_back(overFrag(
      tmO, tnO, {kir::store(O, {tv, i, j}, kir::load(O, {tv, i, j}) * kir::load(rsh, {rowO}))}));
  tile.push_back(kir::mmaTile(O, psh, vsh, BR, Dv, BC, tmO, tnO));
  tile.back()->frag = frag;
  tile.push_back(kir::barrier());
  k.body.push_back(kir::forLoop("kt", E(int64_t(0)), a.keyTiles(), tile));

  // 1 / l per row (0 for a fully masked row: zeros), then each fragment element of O
  // normalised, through the epilogue, stored.
  std::vector<StmtP> inv = {
      kir::decl("l_fin", DType::F32, kir::load(lSt, {tv, t0})),
      kir::store(rsh, {tv},
                 kir::select(fvar("l_fin") == f32(0.0), f32(0.0), f32(1.0) / fvar("l_fin")))};
  k.body.push_back(kir::region(t, owner ? std::vector<StmtP>{kir::ifThen(owner, inv)} : inv));
  k.body.push_back(kir::barrier());
  E row = ivar("row"), d = ivar("d");
  std::vector<StmtP> perD = {
      kir::decl("d", DType::I64, colO),
      kir::decl("y", DType::F32, kir::load(O, {tv, i, j}) * kir::load(rsh, {rowO}))};
  auto stores = storeGroupOutputs(*a.g, *a.gx, a.result, fvar("y"), concat(a.bIdx, {row, d}));
  perD.insert(perD.end(), stores.begin(), stores.end());
  std::vector<StmtP> fin = {kir::decl("row", DType::I64, q0 + rowO)};
  if (a.qRagged)
    fin.push_back(kir::ifThen(row < a.SqE, perD));
  else
    fin.insert(fin.end(), perD.begin(), perD.end());
  k.body.push_back(overFrag(tmO, tnO, fin));
}

// ---- SIMT: thread t owns tm = BR / threads query rows; S local, P shared ---------------------
void simtBody(kir::Kernel &k, const Attention &a) {
  const int64_t BR = a.at.BR, BC = a.at.BC, threads = a.at.threads, D = a.D, Dv = a.Dv;
  const int64_t tm = std::max<int64_t>(1, BR / threads); // query rows per thread
  const std::string &t = a.t;
  const E &tv = a.tv, &q0 = a.q0, &k0 = a.k0;
  kir::BufferP qsh = tempBuffer("qs", {BR, D}, kir::Scope::Shared);
  kir::BufferP ksT = tempBuffer("ksT", {D, BC}, kir::Scope::Shared);
  kir::BufferP vsh = tempBuffer("vs", {BC, Dv}, kir::Scope::Shared);
  kir::BufferP psh = tempBuffer("ps", {BR, BC}, kir::Scope::Shared);
  kir::BufferP S = tempBuffer("S", {threads, tm, BC}, kir::Scope::Local);
  kir::BufferP O = tempBuffer("O", {threads, tm, Dv}, kir::Scope::Local);
  kir::BufferP mSt = tempBuffer("m_run", {threads, tm}, kir::Scope::Local);
  kir::BufferP lSt = tempBuffer("l_run", {threads, tm}, kir::Scope::Local);
  k.allocs = {qsh, ksT, vsh, psh, S, O, mSt, lSt};

  k.body.push_back(kir::comment(
      cat("streaming attention: ", BR, " query rows x ", BC,
          "-key tiles; scores stay on chip (S local, P shared), online softmax (m, l) per row",
          a.causal ? "; causal: key tiles above the diagonal skipped" : "")));

  E i = ivar("i"), j = ivar("j"), d = ivar("d");
  E rowLocal = tv * E(tm) + i;
  E row = ivar("row");
  auto perOwnedRow = [&](std::vector<StmtP> body, std::vector<StmtP> outside = {}) {
    std::vector<StmtP> perRow = {kir::decl("row", DType::I64, q0 + rowLocal)};
    if (a.qRagged)
      perRow.push_back(kir::ifThen(row < a.SqE, body, outside));
    else
      perRow.insert(perRow.end(), body.begin(), body.end());
    return kir::region(t, {kir::forLoop("i", E(int64_t(0)), E(tm), perRow)});
  };
  auto vec = kir::Stmt::LoopKind::Vectorized;

  // Stage the query tile; reset the running state of the owned rows.
  k.body.push_back(kir::region(t, {a.queryTileCopy(qsh)}));
  k.body.push_back(kir::region(
      t, {kir::forLoop("i", E(int64_t(0)), E(tm),
                       {kir::store(mSt, {tv, i}, f32(kNegInf)), kir::store(lSt, {tv, i}, f32(0.0)),
                        kir::forLoop("d", E(int64_t(0)), E(Dv),
                                     {kir::store(O, {tv, i, d}, f32(0.0))}, 1, vec)})}));

  std::vector<StmtP> tile;
  {
    StmtP kCopy = a.keyTileCopy(ksT);
    tile.push_back(kir::region(t, {kCopy, a.valueTileCopy(vsh)}));
    tile.push_back(kir::barrier());
    tile.push_back(kir::region(
        t, {kir::forLoop("i", E(int64_t(0)), E(tm),
                         {kir::forLoop("j", E(int64_t(0)), E(BC),
                                       {kir::store(S, {tv, i, j}, f32(0.0))}, 1, vec)})}));
    tile.push_back(kir::mmaTile(S, qsh, ksT, BR, BC, D, tm, BC));
  }
  {
    // Scale and mask the scores of each owned row, then the online softmax step.
    E s = a.maskedScore(kir::load(S, {tv, i, j}));
    E vis = a.visibleKey();
    std::vector<StmtP> perKey = {kir::decl("key", DType::I64, k0 + j)};
    if (static_cast<bool>(vis) && a.kRagged) // keys past the end: the mask must not be read there
      perKey.push_back(kir::ifThen(vis, {kir::store(S, {tv, i, j}, s)},
                                   {kir::store(S, {tv, i, j}, f32(kNegInf))}));
    else
      perKey.push_back(kir::store(S, {tv, i, j}, vis ? kir::select(vis, s, f32(kNegInf)) : s));
    perKey.push_back(kir::assign("m_tile", kir::max(fvar("m_tile"), kir::load(S, {tv, i, j}))));
    // The row max and sum reassociate (weighted_streaming_reduction certifies it): vectorised
    // loops whose accumulators are reductions (kir::loopReductions).
    constexpr auto kVec = kir::Stmt::LoopKind::Vectorized;
    std::vector<StmtP> rowBody = {
        kir::decl("m_old", DType::F32, kir::load(mSt, {tv, i})),
        kir::decl("m_tile", DType::F32, f32(kNegInf)),
        kir::forLoop("j", E(int64_t(0)), E(BC), perKey, 1, kVec),
        kir::decl("m_new", DType::F32, kir::max(fvar("m_old"), fvar("m_tile"))),
        // alpha = e^(m_old - m_new): 1 when the max did not move (also -inf to -inf).
        kir::decl("alpha", DType::F32,
                  kir::select(fvar("m_old") == fvar("m_new"), f32(1.0),
                              kir::unary(kir::UnOp::Exp, fvar("m_old") - fvar("m_new")))),
        kir::decl("l_tile", DType::F32, f32(0.0)),
        kir::forLoop("j", E(int64_t(0)), E(BC),
                     {kir::decl("pj", DType::F32,
                                kir::select(fvar("m_new") == f32(kNegInf), f32(0.0),
                                            kir::unary(kir::UnOp::Exp,
                                                       kir::load(S, {tv, i, j}) - fvar("m_new")))),
                      kir::store(psh, {rowLocal, j}, fvar("pj")),
                      kir::assign("l_tile", fvar("l_tile") + fvar("pj"))},
                     1, kVec),
        kir::store(lSt, {tv, i}, kir::load(lSt, {tv, i}) * fvar("alpha") + fvar("l_tile")),
        kir::store(mSt, {tv, i}, fvar("m_new")),
        kir::forLoop("d", E(int64_t(0)), E(Dv),
                     {kir::store(O, {tv, i, d}, kir::load(O, {tv, i, d}) * fvar("alpha"))}, 1,
                     vec)};
    // Rows beyond Sq (last query tile) contribute zero probabilities.
    std::vector<StmtP> padRow = {kir::forLoop("j", E(int64_t(0)), E(BC),
                                              {kir::store(psh, {rowLocal, j}, f32(0.0))}, 1, vec)};
    tile.push_back(perOwnedRow(rowBody, padRow));
    tile.push_back(kir::barrier());
    tile.push_back(kir::mmaTile(O, psh, vsh, BR, Dv, BC, tm, Dv));
    tile.push_back(kir::barrier());
  }
  k.body.push_back(kir::forLoop("kt", E(int64_t(0)), a.keyTiles(), tile));

  // Normalise and store (fully masked rows: l = 0 -> zeros).
  std::vector<StmtP> perD = {kir::decl("y", DType::F32, kir::load(O, {tv, i, d}) * fvar("inv_l"))};
  auto stores = storeGroupOutputs(*a.g, *a.gx, a.result, fvar("y"), concat(a.bIdx, {row, d}));
  perD.insert(perD.end(), stores.begin(), stores.end());
  std::vector<StmtP> rowBody = {
      kir::decl("l_fin", DType::F32, kir::load(lSt, {tv, i})),
      kir::decl("inv_l", DType::F32,
                kir::select(fvar("l_fin") == f32(0.0), f32(0.0), f32(1.0) / fvar("l_fin"))),
      kir::forLoop("d", E(int64_t(0)), E(Dv), perD, 1, vec)};
  k.body.push_back(perOwnedRow(rowBody));
}

} // namespace

kir::Kernel recipeStreamingAttention(const KernelGroup &g, const std::string &name,
                                     const Knobs &knobs) {
  AICF_CHECK(g.anchor != nullptr && g.anchor->op() == Op::Attention,
             "streaming_attention needs an attention anchor (group ", g.id, ")");
  const Node &n = *g.anchor;
  std::map<const Value *, kir::BufferP> byValue;
  kir::Kernel k = startKernel(g, name, "streaming_attention", byValue);
  GroupExpr gx(g, byValue);
  const Attention a = describe(g, gx, knobs, k.threadVar);
  const int64_t BR = a.at.BR, BC = a.at.BC, threads = a.at.threads;
  k.threads = threads;
  k.knobs = {{"BR", BR}, {"BC", BC}, {"threads", threads}};
  auto problem = std::make_shared<AttentionProblem>();
  problem->batch = a.B;
  problem->Sq = a.Sq;
  problem->Sk = a.Sk;
  problem->D = a.D;
  problem->Dv = a.Dv;
  problem->causal = a.causal;
  problem->frag = a.at.frag;
  problem->precision = a.at.frag == kir::MmaFrag::None ? Precision::F32 : nodePrecision(n);
  k.problem = problem;

  // Grid: the batch dims flattened into one axis, then the query tiles.
  if (!a.batch.empty())
    k.grid.emplace_back("b", a.B);
  k.grid.emplace_back("qt", ceilDiv(a.Sq, BR));
  if (!a.bSym.isConstant() || !a.sqSym.isConstant()) {
    if (!a.batch.empty())
      k.symGrid.push_back(SymExtent{a.bSym, 1});
    k.symGrid.push_back(SymExtent{a.sqSym, BR});
  }
  if (a.at.frag != kir::MmaFrag::None)
    tensorCoreBody(k, a, problem->precision);
  else
    simtBody(k, a);
  return k;
}

} // namespace aicf

namespace aicf {

namespace {

// Requires: an attention anchor whose weighted_streaming_reduction certificate holds (the
// weighting rescales, the normalisation state merges, the mask applies per tile). No generic
// form: an attention whose certificate fails is materialised before lowering
// (plan/attention_choice.h) or refused naming the condition. Knobs: AttentionKnobs.
class StreamingAttentionRecipe final : public Recipe {
public:
  const char *name() const override { return "streaming_attention"; }
  bool lowers(const Node *a) const override { return a && a->op() == Op::Attention; }
  bool symbolicDims(const KernelGroup &) const override { return true; }
  std::optional<MemProperty> requiredProperty() const override {
    return MemProperty::WeightedStreamingReduction;
  }
  kir::Kernel build(const KernelGroup &g, const std::string &n, const Knobs &k) const override {
    return labelled(recipeStreamingAttention(g, n, k), name());
  }
  KnobSet canonicalKnobs(const KnobSet &k) const override {
    return knobsToMap(knobsFromMap<AttentionKnobs>(k));
  }
  std::vector<KnobSet> candidates(const kir::Kernel &d, const Hardware &hw) const override {
    const AttentionProblem &p = problemOf<AttentionProblem>(d);
    int64_t Sq = p.Sq, Sk = p.Sk;
    std::vector<KnobSet> out;
    if (p.frag != kir::MmaFrag::None) {
      // Tensor cores: warp-tiled products, one query row per thread at most.
      for (int64_t br : {32, 64, 128}) {
        if (br / 2 >= std::max<int64_t>(Sq, 32))
          continue;
        for (int64_t bc : {32, 64, 128}) {
          if (bc / 2 >= std::max<int64_t>(Sk, 32))
            continue;
          for (int64_t threads : {64, 128, 256})
            if (threads >= br && warpTiles(br, bc, threads) && warpTiles(br, p.Dv, threads))
              out.push_back(knobsToMap(AttentionKnobs{br, bc, threads}));
        }
      }
      return out;
    }
    for (int64_t br : {16, 32, 64, 128}) {
      if (br / 2 >= std::max<int64_t>(Sq, 16))
        continue; // a query tile mostly padding
      for (int64_t bc : {16, 32, 64, 128}) {
        if (bc / 2 >= std::max<int64_t>(Sk, 16))
          continue;
        if (!hw.gpu) {
          out.push_back(knobsToMap(AttentionKnobs{br, bc, int64_t(1)}));
          continue;
        }
        for (int64_t rowsPerThread : {1, 2})
          if (br / rowsPerThread >= 32) // whole warps
            out.push_back(knobsToMap(AttentionKnobs{br, bc, br / rowsPerThread}));
      }
    }
    return out;
  }
  CostShape costShape(const KernelGroup &, const kir::Kernel &k, const Hardware &hw,
                      int64_t flops) const override {
    CostShape s;
    s.flops = double(flops);
    int64_t threads = std::max<int64_t>(1, k.threads);
    const AttentionProblem &p = problemOf<AttentionProblem>(k);
    int64_t B = p.batch, Sq = p.Sq, Sk = p.Sk, D = p.D, Dv = p.Dv;
    int64_t BR = knobOf(k, &AttentionKnobs::BR, 1), BC = knobOf(k, &AttentionKnobs::BC, 1);
    int64_t nQT = ceilDiv(Sq, BR), nKT = ceilDiv(Sk, BC);
    if (!hw.gpu) {
      // Host, fitted on a sweep of all nine (BR, BC) of the GPT-2 block (causal), the ViT and
      // BERT layers and the LLaMA block (each 8 heads of 64 x 64) on one AMD EPYC core at one
      // thread (mean error 3%, worst 10%; the old form erred by 40-60%), scaled by 1.29, what
      // the same runs' GEMMs took against their prediction, so that attention ranks against the
      // kernels it would be replaced by. Per head, in the model's cycles:
      //  * ~11 cycles per score of every tile pair computed (the two products, the exponential,
      //    the masking): the products' FLOPs at 78% of the FMA peak;
      //  * ~0.83 cycles per float of every K / V tile row staged (ksT transposed, vs copied),
      //    once per (query tile, key tile): a small BR re-stages K and V for fewer rows;
      //  * ~43 cycles per (query row, key tile): the running max, the rescale of the row's
      //    output, the loop set-up.
      // Causal query tiles see ceil((min(q0 + BR, Sq) + Sk - Sq) / BC) key tiles, the kernel's
      // loop bound. The old form (30% of peak, 150 cycles per row and key tile plus a 40-cycle
      // chain) priced these heads at 1.6x their time, so choose-attention materialised the ViT
      // and LLaMA attention, 5-6% slower end to end.
      double tilePairs = 0;
      for (int64_t qt = 0; qt < nQT; ++qt)
        tilePairs += double(
            p.causal
                ? std::clamp<int64_t>(ceilDiv(std::min(Sq, (qt + 1) * BR) + Sk - Sq, BC), 0, nKT)
                : nKT);
      int64_t lanes = std::max<int64_t>(1, hw.vectorLanesF32());
      s.flops = double(B) * tilePairs * double(BR * BC) * double(2 * D + 2 * Dv + 20);
      s.vectorShare = 0.78 * std::min(1.0, double(BC) / double(lanes));
      s.scalarCycles =
          tilePairs * (double(BC) * 0.83 * double(D + Dv) + double(BR) * 43.0) / double(nQT);
      s.rereadSet = tileSet(k);
      s.serialTiles = nKT;
      return s;
    }
    double pairs = double(nQT * nKT);
    if (p.causal)
      pairs = double(nQT) * (double(nKT) + 1.0) / 2.0;
    if (p.frag != kir::MmaFrag::None) {
      // Tensor cores (unmeasured: not run on a GPU yet): the two products at the tiled
      // contraction's tensor rate for warp tiles of this size, the softmax (~20 FLOPs a score
      // plus the rescale of O) on the BR row owners at SIMT rate (35% of the f32 peak, as the
      // SIMT form), and a shared-memory round trip of every score (ss, ps).
      const bool tf32 = p.frag == kir::MmaFrag::M16N8K8;
      double products = double(B) * pairs * double(BR * BC) * double(2 * D + 2 * Dv);
      double softmax = double(B) * pairs * (double(BR * BC) * 20.0 + double(BR * Dv));
      double tensorPeak = tf32 ? hw.tensorTf32FlopsPerSec : hw.tensorF16FlopsPerSec;
      double tensorShare = 0.4; // fragments reloaded per key tile, barriers between phases
      double simt = 0.35 * double(std::min(BR, threads)) / double(threads);
      double seconds = products / std::max(tensorPeak * tensorShare, 1.0) +
                       softmax / std::max(hw.fp32FlopsPerSec * simt, 1.0);
      s.flops = products + softmax;
      s.tensorFlopsPerSec = tensorPeak;
      s.vectorShare = s.flops / std::max(tensorPeak * seconds, 1.0);
      s.rereadSet = tileSet(k);
      s.serialTiles = nKT;
      s.chainSteps = pairs / double(nQT);
      s.chainCycles = 40;
      return s;
    }
    // Per (query tile, key tile): both products over full tiles, the exponentials, and the
    // rescaling of the output rows by exp(m_old - m_new).
    double perPair = double(BR * BC) * double(2 * D + 2 * Dv + 20) + double(BR * (Dv + 20));
    s.flops = double(B) * pairs * perPair;
    s.rereadBytes = 0; // K / V re-reads are in rereads()
    s.rereadSet = tileSet(k);
    s.serialTiles = nKT;
    s.vectorShare = 0.35;
    // The online-softmax state (m, l) of each row is a dependency chain across key tiles.
    double tilesPerRow = pairs / double(nQT);
    s.chainSteps = tilesPerRow * double(BR) / double(threads);
    s.chainCycles = 40;
    return s;
  }
  // K and V are re-read per query tile: each head's K and V by the consecutive query tiles of
  // that head (grid (b, qt)).
  Rereads rereads(const KernelGroup &g, const kir::Kernel &k, const Hardware &hw) const override {
    const Node *a = g.anchor;
    const AttentionProblem &p = problemOf<AttentionProblem>(k);
    int64_t kv = a->operand(1)->type().bytes() + a->operand(2)->type().bytes();
    int64_t nQT = ceilDiv(p.Sq, knobOf(k, &AttentionKnobs::BR));
    return rereadsOf(hw, kv, p.batch, nQT, p.batch * nQT, tileSet(k));
  }
  // The score row, the output row and the query row per owned row.
  int64_t registers(const kir::Kernel &k) const override {
    const AttentionProblem &p = problemOf<AttentionProblem>(k);
    if (p.frag != kir::MmaFrag::None) {
      // Both accumulator tiles (S, O), the A and B fragments of the wider one.
      int64_t br = knobOf(k, &AttentionKnobs::BR, 1), threads = std::max<int64_t>(32, k.threads);
      std::optional<WarpTiles> st = warpTiles(br, knobOf(k, &AttentionKnobs::BC, 1), threads);
      std::optional<WarpTiles> ot = warpTiles(br, p.Dv, threads);
      if (st && ot)
        return 40 + st->tm * st->tn + ot->tm * ot->tn + 2 * std::max(st->tm, ot->tm) +
               std::max(st->tn, ot->tn);
    }
    int64_t tm =
        std::max<int64_t>(1, knobOf(k, &AttentionKnobs::BR, 1) / std::max<int64_t>(1, k.threads));
    return 32 + tm * (2 * knobOf(k, &AttentionKnobs::BC, 1) + p.Dv + p.D);
  }
  double loadsInFlight() const override { return 8.0; }

private:
  // The block's tiles: Q (BR x D), K^T (D x BC), V (BC x Dv) and the scores (BR x BC).
  static int64_t tileSet(const kir::Kernel &k) {
    const AttentionProblem &p = problemOf<AttentionProblem>(k);
    int64_t BR = knobOf(k, &AttentionKnobs::BR, 1), BC = knobOf(k, &AttentionKnobs::BC, 1);
    return 4 * (BR * p.D + p.D * BC + BC * p.Dv + BR * BC);
  }
};

} // namespace

const Recipe &streamingAttentionRecipe() {
  static const StreamingAttentionRecipe recipe;
  return recipe;
}

} // namespace aicf
