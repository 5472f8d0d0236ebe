// detect-attention: finds scaled dot-product attention written as primitive ops and replaces it
// by one `attention`:
//
//   s = matmul(q, kT) [* c | / c]           (or q and kT scaled separately)
//   s = where(cond, s, fill) | s + mask      (optional; cond constant lower-triangular -> causal)
//   p = softmax(s, axis = -1)
//   o = matmul(p, v)
//
// Why: materialised, the B·H·Sq·Sk score tensor is written and read three times; `attention`
// carries weighted_streaming_reduction + tile_compatible_compute + rematerializable_intermediate
// and lowers to a streaming (FlashAttention-style) kernel that never stores the scores.
// Legality: the scores feed only softmax·V; softmax runs over the key axis; q, k, v share batch
// dims; a where-mask has a constant fill that acts as -inf and, if constant (or a cut of a
// constant, with symbolic dims), is recognised as causal only when it really is lower-triangular;
// the head count matches the reshape that made the heads.
#include "ir/instantiate.h"
#include "passes/match.h"
#include "passes/passes.h"
#include "support/diagnostics.h"

#include <cmath>
#include <optional>

namespace aicf {

namespace {

struct AttnMatch {
  std::vector<Node *> nodes;
  Node *scoresMm = nullptr, *softmax = nullptr, *pv = nullptr;
  Value *q = nullptr, *kT = nullptr, *v = nullptr, *mask = nullptr;
  double scale = 1.0;
  bool causal = false;
  Node *where = nullptr;    // a where-mask, if any
  std::string maskEvidence; // what the mask was recognised as
  bool maskOk = true;
};

// Peels an optional scale off `s`; returns the unscaled value.
Value *peelScale(Value *s, AttnMatch &m) {
  if (Node *d = producer(s, Op::Div)) {
    if (auto c = splatValue(d->operand(1)); c && d->operand(1)->type().numel() == 1 && *c != 0) {
      m.scale /= *c;
      m.nodes.push_back(d);
      return d->operand(0);
    }
  }
  if (Node *mu = producer(s, Op::Mul)) {
    for (int k = 0; k < 2; ++k)
      if (auto c = splatValue(mu->operand(k)); c && mu->operand(k)->type().numel() == 1) {
        m.scale *= *c;
        m.nodes.push_back(mu);
        return mu->operand(1 - k);
      }
  }
  return s;
}

// Checks a constant boolean where-condition over the trailing [Sq, Sk] dims: lower-triangular
// (causal, with the key offset Sk - Sq), all true (no mask) or neither.
enum class MaskKind { Causal, AllTrue, Other };
MaskKind classifyBoolMask(const Tensor &cond, int64_t sq, int64_t sk, std::string &evidence) {
  const auto &sh = cond.shape();
  int64_t r = static_cast<int64_t>(sh.size());
  int64_t cq = r >= 2 ? sh[r - 2] : 1, ck = r >= 1 ? sh[r - 1] : 1;
  if ((cq != sq && cq != 1) || (ck != sk && ck != 1)) {
    evidence =
        cat("condition ", cond.type().str(), " does not cover the scores [", sq, ",", sk, "]");
    return MaskKind::Other;
  }
  bool causal = true, allTrue = true;
  int64_t firstBad = -1;
  int64_t rows = cond.numel() / std::max<int64_t>(cq * ck, 1);
  for (int64_t b = 0; b < rows; ++b)
    for (int64_t i = 0; i < sq; ++i)
      for (int64_t j = 0; j < sk; ++j) {
        int64_t ii = cq == 1 ? 0 : i, jj = ck == 1 ? 0 : j;
        bool keep = cond.getInt((b * cq + ii) * ck + jj) != 0;
        bool want = j <= i + (sk - sq);
        allTrue = allTrue && keep;
        if (keep != want && causal) {
          causal = false;
          firstBad = i * sk + j;
        }
      }
  if (causal) {
    evidence = cat("constant ", cond.type().str(), " is lower-triangular (key j kept iff j <= i + ",
                   sk - sq, ")");
    return MaskKind::Causal;
  }
  if (allTrue) {
    evidence = cat("constant ", cond.type().str(), " is all true (no masking)");
    return MaskKind::AllTrue;
  }
  evidence = cat("constant ", cond.type().str(), " is not lower-triangular (first difference at [",
                 firstBad / sk, ",", firstBad % sk, "])");
  return MaskKind::Other;
}

// The offset, as an expression, at which `v` starts along `axis`: a slice's start (symbolic or
// not) for the sliced axis, 0 otherwise. Null when a slice steps other than by 1.
std::optional<SymExpr> sliceStart(const Node *s, int64_t axis) {
  const auto &axes = s->ints("axes");
  const auto &sym = s->strs("sym_starts");
  for (size_t k = 0; k < axes.size(); ++k) {
    if (axes[k] != axis)
      continue;
    if (s->ints("steps")[k] != 1)
      return std::nullopt;
    return sym.empty() ? std::optional<SymExpr>(SymExpr(s->ints("starts")[k]))
                       : SymExpr::parse(sym[k]);
  }
  return SymExpr(0);
}

// A where-condition cut from a constant by slices of step 1 (torch's GPT-2 export slices the
// causal buffer tril(ones(N, N)) to rows [Sk - Sq, Sk) and columns [0, Sk), Sk read from the key's
// shape). With symbolic dims the cut's values are not known at compile time, but a banded
// constant -- keep(r, c) iff c - r <= k over the whole buffer -- cut from row r0 and column c0
// keeps key j for query i iff j - i <= k + r0 - c0: causal for every value of the dims exactly
// when k + r0 - c0 equals Sk - Sq as expressions. The cut must stay within the buffer for every
// value, which the dims' maxima decide.
bool causalCut(const Graph &g, const Value *cond, const SymExpr &sq, const SymExpr &sk,
               std::string &evidence) {
  const TensorType &ct = cond->type();
  int64_t r = ct.rank();
  if (r < 2 || ct.symDim(r - 2) != sq || ct.symDim(r - 1) != sk)
    return false;
  for (int64_t d = 0; d + 2 < r; ++d)
    if (ct.symDim(d) != SymExpr(1))
      return false;
  SymExpr r0 = 0, c0 = 0;
  const Value *v = cond;
  std::vector<const Node *> slices;
  while (Node *s = producer(v, Op::Slice)) {
    for (int64_t a : s->ints("axes"))
      if (a < r - 2)
        return false;
    auto dr = sliceStart(s, r - 2), dc = sliceStart(s, r - 1);
    auto nr = dr ? SymExpr::add(r0, *dr) : std::nullopt;
    auto nc = dc ? SymExpr::add(c0, *dc) : std::nullopt;
    if (!nr || !nc)
      return false;
    r0 = *nr;
    c0 = *nc;
    v = s->operand(0);
  }
  if (v == cond || !v->hasData() || v->type().dtype != DType::Bool)
    return false;
  const Tensor &buf = *v->data();
  const auto &bs = buf.shape();
  if (static_cast<int64_t>(bs.size()) != r)
    return false;
  for (int64_t d = 0; d + 2 < r; ++d)
    if (bs[d] != 1)
      return false;
  int64_t rows = bs[r - 2], cols = bs[r - 1];
  // The band k from the first row that keeps some columns but not all, then every entry checked.
  std::optional<int64_t> k;
  for (int64_t i = 0; i < rows && !k; ++i) {
    int64_t kept = 0;
    for (int64_t j = 0; j < cols; ++j)
      kept += buf.getInt(i * cols + j) != 0;
    if (kept > 0 && kept < cols)
      k = kept - 1 - i;
  }
  if (!k)
    return false;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      if ((buf.getInt(i * cols + j) != 0) != (j - i <= *k))
        return false;
  // Within the buffer: 0 <= r0, r0 + Sq <= rows, and the same for the columns.
  auto within = [&](const SymExpr &start, const SymExpr &len, int64_t size) {
    auto end = SymExpr::add(start, len);
    auto bs0 = symBounds(start, g.dims());
    auto be = end ? symBounds(*end, g.dims()) : std::nullopt;
    return bs0 && be && bs0->lo >= 0 && be->hi <= size;
  };
  if (!within(r0, sq, rows) || !within(c0, sk, cols))
    return false;
  auto offset = SymExpr::sub(r0, c0);
  auto want = SymExpr::sub(sk, sq);
  auto have = offset ? SymExpr::add(*offset, SymExpr(*k)) : std::nullopt;
  if (!have || !want || *have != *want)
    return false;
  evidence = cat(
      "constant ", describe(v), " ", buf.type().str(), " is banded (kept iff column - row <= ", *k,
      "), cut from row ", r0.str(), " and column ", c0.str(), " to [", sq.str(), ",", sk.str(),
      "], within the buffer for every value of the dims: key j kept iff j <= i + ", want->str());
  return true;
}

bool matchAt(const Graph &g, Node *sm, AttnMatch &m) {
  const TensorType &st = sm->result()->type();
  if (st.rank() < 2)
    return false;
  std::vector<Node *> us = g.users(sm->result());
  if (us.size() != 1 || us[0]->op() != Op::MatMul || us[0]->numOperands() != 2 ||
      us[0]->operand(0) != sm->result())
    return false;
  m.softmax = sm;
  m.pv = us[0];
  m.v = m.pv->operand(1);
  int64_t sq = st.shape[st.rank() - 2], sk = st.shape[st.rank() - 1];
  Value *s = sm->operand(0);
  // Optional mask (before or after the scale).
  for (int round = 0; round < 2; ++round) {
    if (Node *w = producer(s, Op::Where); w && !m.where && !m.mask) {
      auto fill = splatValue(w->operand(2));
      if (!fill)
        return false;
      m.where = w;
      m.nodes.push_back(w);
      bool fillOk = *fill <= -1e4;
      std::string fillEv = cat("fill ", *fill, fillOk ? " acts as -inf" : " is not <= -1e4");
      std::string cut;
      if (!w->operand(0)->isWeight() &&
          causalCut(g, w->operand(0), st.symDim(st.rank() - 2), st.symDim(st.rank() - 1), cut)) {
        m.causal = true;
        m.maskEvidence = cut + "; " + fillEv;
      } else if (w->operand(0)->hasData()) {
        std::string ev;
        MaskKind k = classifyBoolMask(*w->operand(0)->data(), sq, sk, ev);
        m.causal = k == MaskKind::Causal;
        if (k == MaskKind::Other)
          m.mask = w->operand(0);
        m.maskEvidence = ev + "; " + fillEv;
      } else {
        m.mask = w->operand(0);
        m.maskEvidence = cat("boolean mask ", describe(m.mask), "; ", fillEv);
      }
      m.maskOk = fillOk;
      s = w->operand(1);
      continue;
    }
    if (Node *a = producer(s, Op::Add); a && !m.where && !m.mask) {
      // The scores side is the one that leads (through an optional scale) to a matmul.
      for (int k = 0; k < 2; ++k) {
        AttnMatch probe;
        Value *core = peelScale(a->operand(k), probe);
        if (producer(core, Op::MatMul)) {
          m.mask = a->operand(1 - k);
          m.nodes.push_back(a);
          m.maskEvidence = cat("additive mask ", describe(m.mask), " ", m.mask->type().str());
          s = a->operand(k);
          break;
        }
      }
      if (m.mask)
        continue;
    }
    Value *before = s;
    s = peelScale(s, m);
    if (s == before)
      break;
  }
  Node *mm = producer(s, Op::MatMul);
  if (!mm || mm->numOperands() != 2)
    return false;
  m.scoresMm = mm;
  m.nodes.push_back(mm);
  m.nodes.push_back(sm);
  m.nodes.push_back(m.pv);
  // Scale applied to q and k separately (e.g. both by d^-1/4).
  m.q = peelScale(mm->operand(0), m);
  m.kT = peelScale(mm->operand(1), m);
  return m.q->type().rank() >= 2 && m.q->type().rank() == m.kT->type().rank() &&
         m.v->type().rank() == m.q->type().rank();
}

// Whether `from` broadcasts to `to` for every value of the dims: each dim equal to the
// target's, or 1.
bool broadcastsTo(const std::vector<SymExpr> &from, const std::vector<SymExpr> &to) {
  if (from.size() > to.size())
    return false;
  size_t off = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != to[off + i] && from[i] != SymExpr(1))
      return false;
  return true;
}

// Evidence for "head count consistent with the reshape constants".
Condition headsCondition(const Value *q) {
  Condition c{"head count consistent with the reshape constants", "", true};
  const TensorType &t = q->type();
  int64_t r = t.rank();
  if (r != 4) {
    c.evidence = cat("q ", t.str(), " has no separate head axis (not applicable)");
    return c;
  }
  int64_t h = t.shape[1], d = t.shape[3];
  Node *tr = producer(q, Op::Transpose);
  Node *rs = tr ? producer(tr->operand(0), Op::Reshape) : nullptr;
  if (!rs) {
    c.evidence = cat("q ", t.str(), ": ", h, " heads of ", d, " (not made by reshape+transpose)");
    return c;
  }
  const TensorType &src = rs->operand(0)->type();
  int64_t hidden = src.rank() ? src.shape.back() : 0;
  c.held = hidden == h * d && tr->ints("perm") == std::vector<int64_t>{0, 2, 1, 3};
  c.evidence = cat(h, " heads x ", d, " = ", h * d, " vs hidden ", hidden, " of ", src.str(),
                   " reshaped to ", shapeStr(rs->ints("shape")));
  return c;
}

class DetectAttention : public NamedPass<PassId::DetectAttention> {
public:
  bool run(Graph &g, PassContext &ctx) override {
    bool changed = false;
    for (Node *n : g.nodes()) {
      if (!g.hasNode(n) || n->op() != Op::Softmax)
        continue;
      AttnMatch m;
      if (!matchAt(g, n, m))
        continue;
      changed |= rewrite(g, ctx, m);
    }
    if (changed)
      g.sortTopologically();
    return changed;
  }

private:
  static bool rewrite(Graph &g, PassContext &ctx, AttnMatch &m) {
    const TensorType &qt = m.q->type(), &kt = m.kT->type(), &vt = m.v->type();
    int64_t r = qt.rank();
    int64_t axis = m.softmax->i("axis");
    Certificate cert;
    cert.property = MemProperty::WeightedStreamingReduction;
    const TensorType &scores = m.softmax->result()->type();
    cert.rewrite =
        cat("materialised attention (scores ", scores.str(), " stored) -> streaming attention");
    cert.exactness = Exactness::Reassociated;
    auto add = [&](std::string name, bool held, std::string ev) {
      cert.conditions.push_back({std::move(name), std::move(ev), held});
    };
    add("softmax over the key axis", axis == -1 || axis == r - 1,
        cat("axis ", axis, " of ", scores.str()));
    // Dims compared as expressions: with symbolic dims, equal at the planning point is not
    // enough.
    std::vector<SymExpr> qs = symShapeOf(qt), ks = symShapeOf(kt), vs = symShapeOf(vt);
    std::vector<SymExpr> qb(qs.begin(), qs.end() - 2), kb(ks.begin(), ks.end() - 2),
        vb(vs.begin(), vs.end() - 2);
    add("q, k, v share batch dims", qb == kb && qb == vb,
        cat("q ", qt.str(), ", k^T ", kt.str(), ", v ", vt.str()));
    add("floating-point operands", isFloat(qt.dtype), qt.str());
    if (m.where || m.mask)
      add("mask recognised", m.maskOk, m.maskEvidence);
    if (m.mask && !m.mask->isWeight() && m.mask->type().dtype != DType::Bool)
      add("additive mask broadcasts to the scores",
          broadcastsTo(symShapeOf(m.mask->type()), symShapeOf(scores)),
          cat(m.mask->type().str(), " vs ", scores.str()));
    cert.conditions.push_back(headsCondition(m.q));

    std::string pattern =
        cat("attention (", m.causal ? "causal " : "", m.where && !m.causal ? "where-masked " : "",
            m.mask && !m.where ? "additive mask " : "", "softmax(q k^T * ", formatFloat(m.scale),
            ") v)");
    return applyIfLegal(
        g, ctx, "detect-attention", pattern, m.nodes, m.pv->result(), std::move(cert),
        [&](Node *before, const Location &loc) {
          Value *k = transposeLastTwo(g, m.kT, before, loc);
          std::vector<Value *> ops = {m.q, k, m.v};
          if (m.mask)
            ops.push_back(m.mask);
          AttrMap attrs = {{"scale", m.scale}, {"causal", int64_t(m.causal ? 1 : 0)}};
          return g.createNode(Op::Attention, ops, attrs, loc, before)->result();
        });
  }

  // k = kT with its last two axes swapped; composes with a transpose that produced kT.
  static Value *transposeLastTwo(Graph &g, Value *kT, Node *before, const Location &loc) {
    int64_t r = kT->type().rank();
    std::vector<int64_t> swap(r);
    for (int64_t i = 0; i < r; ++i)
      swap[i] = i;
    std::swap(swap[r - 1], swap[r - 2]);
    Value *src = kT;
    std::vector<int64_t> perm = swap;
    Location where = loc;
    if (Node *t = producer(kT, Op::Transpose)) {
      where = t->loc;
      const auto &p = t->ints("perm");
      for (int64_t i = 0; i < r; ++i)
        perm[i] = p[swap[i]];
      src = t->operand(0);
    }
    bool identity = true;
    for (int64_t i = 0; i < r; ++i)
      identity = identity && perm[i] == i;
    if (identity)
      return src;
    return g.createNode(Op::Transpose, {src}, {{"perm", perm}}, where, before)->result();
  }
};

} // namespace

std::unique_ptr<Pass> createDetectAttentionPass() {
  return std::make_unique<DetectAttention>();
}

} // namespace aicf
