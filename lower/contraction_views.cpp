// The operand views of the tiled contraction's host tiles (lower/contraction.h; kir.h mma_tile
// views): A or B read where it lies - rows at a fixed stride, k blocks of 16, a packed weight's
// column panels - found by writing the operand's load index as a linear form of the row, k and
// column variables; and the L1 / L2 fits that decide how a panel is streamed.
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

// An integer index expression as a sum of constant multiples of atoms plus a rest free of them.
// Atoms are the variables named in `vars` and floordivs / mods by constants of expressions
// involving them ("d:<X>/c", "m:<X>%c"). Where X = c * (X / c) + X % c makes a pair of such
// atoms one multiple of X (a flattened row split into batch and row: (r / 64) * 64 K + (r % 64)
// K = r K), the pair is replaced by it.
struct Linear {
  std::map<std::string, int64_t> coef;
  E rest = E(int64_t(0));
  std::map<std::string, std::pair<E, int64_t>> split; // atom -> (X, c)
};

bool involves(const kir::ExprP &e, const std::set<std::string> &vars) {
  if (!e)
    return false;
  if (e->kind == kir::Expr::Kind::Var)
    return vars.count(e->var) > 0;
  return std::any_of(e->args.begin(), e->args.end(),
                     [&](const kir::ExprP &a) { return involves(a, vars); });
}

void addScaled(Linear &into, const Linear &from, int64_t scale) {
  for (const auto &[atom, k] : from.coef)
    into.coef[atom] += k * scale;
  into.rest = into.rest + from.rest * E(scale);
  into.split.insert(from.split.begin(), from.split.end());
}

std::optional<Linear> linear(const E &e, const std::set<std::string> &vars) {
  Linear out;
  if (!involves(e.get(), vars)) {
    out.rest = e;
    return out;
  }
  if (e->kind == kir::Expr::Kind::Var) {
    out.coef[e->var] = 1;
    return out;
  }
  if (e->kind != kir::Expr::Kind::Binary || e->type != DType::I64)
    return std::nullopt;
  E a(e->args[0]), b(e->args[1]);
  switch (e->bop) {
  case kir::BinOp::Add:
  case kir::BinOp::Sub: {
    auto la = linear(a, vars), lb = linear(b, vars);
    if (!la || !lb)
      return std::nullopt;
    addScaled(out, *la, 1);
    addScaled(out, *lb, e->bop == kir::BinOp::Add ? 1 : -1);
    return out;
  }
  case kir::BinOp::Mul: {
    if (b->kind != kir::Expr::Kind::Int)
      std::swap(a, b);
    if (b->kind != kir::Expr::Kind::Int)
      return std::nullopt;
    auto la = linear(a, vars);
    if (!la)
      return std::nullopt;
    addScaled(out, *la, b->ival);
    return out;
  }
  case kir::BinOp::Div:
  case kir::BinOp::Mod: {
    if (b->kind != kir::Expr::Kind::Int || b->ival <= 0 || !linear(a, vars))
      return std::nullopt;
    std::string atom = cat(e->bop == kir::BinOp::Div ? "d:" : "m:", kir::exprStr(a), ":", b->ival);
    out.coef[atom] = 1;
    out.split[atom] = {a, b->ival};
    return out;
  }
  default: return std::nullopt;
  }
}

// The row-major flat offset of `load` in its buffer, linear over `vars`, with split pairs merged.
// The buffer holds f32, or `elem` (a bf16 or int8 weight's group panels, widened as they load).
std::optional<Linear> flatOffset(E load, const std::set<std::string> &vars,
                                 DType elem = DType::F32) {
  // (An int8 weight's element is read widened: a cast of its load.)
  if (elem == DType::I8 && load->kind == kir::Expr::Kind::Cast && load->type == DType::F32 &&
      load->args[0]->kind == kir::Expr::Kind::Load && load->args[0]->type == DType::I8)
    load = E(load->args[0]);
  if (load->kind != kir::Expr::Kind::Load ||
      load->type != (elem == DType::I8 ? elem : DType::F32) ||
      load->buf->scope != kir::Scope::Global ||
      (load->buf->dtype != DType::F32 && load->buf->dtype != elem))
    return std::nullopt;
  std::vector<int64_t> strides = stridesOf(load->buf->shape);
  // Summed with kir's operator+, which re-joins the digits of an unflattened index (a conv
  // weight read as [M, C * kh * kw] becomes row * K + k, not four split atoms).
  E flat = E(int64_t(0));
  for (size_t i = 0; i < load->args.size(); ++i)
    flat = flat + E(load->args[i]) * E(strides[i]);
  auto joined = linear(flat, vars);
  if (!joined)
    return std::nullopt;
  Linear out = *joined;
  for (auto it = out.split.begin(); it != out.split.end(); ++it) {
    const auto &[x, c] = it->second;
    std::string div = cat("d:", kir::exprStr(x), ":", c), mod = cat("m:", kir::exprStr(x), ":", c);
    if (!out.coef.count(div) || !out.coef.count(mod) || out.coef[div] != c * out.coef[mod])
      continue;
    int64_t k = out.coef[mod];
    out.coef.erase(div);
    out.coef.erase(mod);
    addScaled(out, *linear(x, vars), k);
  }
  std::erase_if(out.coef, [](const auto &kv) { return kv.second == 0; });
  return out;
}

// A's row stride in `lin`: its coefficient, or, for a single row whose index folded away (a
// 1 x 1 feature map: row 0 is the only one read) where `singleRow` allows it, K; 0 when A has
// no such stride.
int64_t aRowStride(const Contraction &c, const Linear &lin, bool singleRow) {
  auto it = lin.coef.find("aicf_row");
  if (it != lin.coef.end())
    return it->second;
  return singleRow && c.M == 1 && !c.Msym ? c.K : 0;
}

std::optional<RowView> aRowView(const Contraction &c, const Index &bi, bool singleRow) {
  if (c.aKDecls || c.aRowDecls || c.aValid)
    return std::nullopt;
  E at = c.aAt(bi, ivar("aicf_row"), ivar("aicf_kk"));
  auto lin = flatOffset(at, {"aicf_row", "aicf_kk"});
  if (!lin)
    return std::nullopt;
  int64_t ld = aRowStride(c, *lin, singleRow);
  size_t terms = lin->coef.count("aicf_row") ? 2 : 1;
  if (lin->coef.size() != terms || lin->coef["aicf_kk"] != 1 || ld < 1)
    return std::nullopt;
  return RowView{at->buf, lin->rest, ld};
}

std::optional<BlockView> aBlockView(const Contraction &c, const Index &bi, bool singleRow) {
  if (c.aKDecls || c.aRowDecls || c.aValid || c.K % 16 != 0)
    return std::nullopt;
  E at = c.aAt(bi, ivar("aicf_row"), ivar("aicf_kk"));
  auto lin = flatOffset(at, {"aicf_row", "aicf_kk"});
  std::string kk = kir::exprStr(ivar("aicf_kk"));
  if (!lin)
    return std::nullopt;
  int64_t ld = aRowStride(c, *lin, singleRow);
  size_t terms = lin->coef.count("aicf_row") ? 3 : 2;
  if (lin->coef.size() != terms || ld < 1 || lin->coef[cat("m:", kk, ":16")] != 1 ||
      lin->coef[cat("d:", kk, ":16")] < 16)
    return std::nullopt;
  return BlockView{at->buf, lin->rest, ld, lin->coef[cat("d:", kk, ":16")]};
}

// B seen in place: element (k, col) at base + k * ld + col of a kernel parameter (a pointwise
// conv's input as [C, pixels], a row-major right operand). The micro-kernel takes whole 16-wide
// column panels, so N must be a multiple of 16 (the last column tile then passes its valid
// width and reads nothing past the operand's rows).
std::optional<RowView> bRowView(const Contraction &c, const Index &bi) {
  if (c.bRowDecls || c.bColDecls || c.bHostCopy || c.bValid || c.N % 16 != 0)
    return std::nullopt;
  E at = c.bAt(bi, ivar("aicf_kk"), ivar("aicf_col"));
  auto lin = flatOffset(at, {"aicf_kk", "aicf_col"});
  if (!lin || lin->coef.size() != 2 || lin->coef["aicf_col"] != 1 || lin->coef["aicf_kk"] < 1)
    return std::nullopt;
  return RowView{at->buf, lin->rest, lin->coef["aicf_kk"]};
}

// A bf16 (int8) weight's panels in groups of G = 2 (4) k rows (passes/pack_weights.cpp):
// [L.., P, Kg, NR, G], element (k, col) at (col / NR) stride + (k / G) G NR + (col % NR) G +
// k % G, stride = G Kg NR.
std::optional<PanelView> bGroupPanelView(const Contraction &c, const E &at, const Linear &lin,
                                         int64_t G) {
  const std::vector<int64_t> &full = at->buf->shape;
  if (full.size() < 4 || full.back() != G)
    return std::nullopt;
  std::vector<int64_t> shape(full.end() - 4, full.end());
  int64_t nr = shape[2], stride = G * shape[1] * nr;
  std::string col = kir::exprStr(ivar("aicf_col")), kk = kir::exprStr(ivar("aicf_kk"));
  auto coef = [&](const std::string &term) {
    auto it = lin.coef.find(term);
    return it == lin.coef.end() ? int64_t(0) : it->second;
  };
  if (nr % 16 != 0 || shape[1] != ceilDiv(c.K, G) || coef(cat("d:", kk, ":", G)) != G * nr ||
      coef(cat("m:", kk, ":", G)) != 1)
    return std::nullopt;
  bool onePanel = shape[0] == 1 && lin.coef.size() == 3 && coef("aicf_col") == G;
  if (!onePanel && (lin.coef.size() != 4 || coef(cat("d:", col, ":", nr)) != stride ||
                    coef(cat("m:", col, ":", nr)) != G))
    return std::nullopt;
  return PanelView{at->buf, lin.rest, nr, stride, shape[0] * nr, G, G == 4 ? c.aShift : 0};
}

std::optional<PanelView> bPanelView(const Contraction &c, const Index &bi) {
  if (c.bRowDecls || c.bColDecls || c.bHostCopy || c.bValid)
    return std::nullopt;
  E at = c.bAt(bi, ivar("aicf_kk"), ivar("aicf_col"));
  if (at->kind == kir::Expr::Kind::Cast) // (an int8 weight's load, widened)
    at = E(at->args[0]);
  if (at->kind != kir::Expr::Kind::Load)
    return std::nullopt;
  const DType wt = at->buf->dtype;
  auto lin = flatOffset(at, {"aicf_kk", "aicf_col"}, wt == DType::I8 ? DType::I8 : DType::BF16);
  if (lin && (wt == DType::BF16 || wt == DType::I8))
    return bGroupPanelView(c, at, *lin, wt == DType::I8 ? 4 : 2);
  if (!lin || at->buf->shape.size() < 3)
    return std::nullopt;
  // [L.., P, K, NR]: a batched weight's entry (split-chains' slices) starts at the base.
  const std::vector<int64_t> &full = at->buf->shape;
  std::vector<int64_t> shape(full.end() - 3, full.end());
  int64_t nr = shape[2], stride = shape[1] * nr;
  std::string col = kir::exprStr(ivar("aicf_col"));
  auto coef = [&](const std::string &term) {
    auto it = lin->coef.find(term);
    return it == lin->coef.end() ? int64_t(0) : it->second;
  };
  if (nr % 16 != 0 || shape[1] != c.K || coef("aicf_kk") != nr)
    return std::nullopt;
  // One panel (N = NR) folds to rows of NR floats: col / NR is 0.
  bool onePanel = shape[0] == 1 && lin->coef.size() == 2 && coef("aicf_col") == 1;
  if (!onePanel && (lin->coef.size() != 3 || coef(cat("d:", col, ":", nr)) != stride ||
                    coef(cat("m:", col, ":", nr)) != 1))
    return std::nullopt;
  return PanelView{at->buf, lin->rest, nr, stride, shape[0] * nr};
}

// Whether a k step of bk rows of a panel `cols` wide, beside the A of a block of `rows` rows,
// fits in L1.
bool l1Slice(int64_t bk, int64_t cols, int64_t rows, const Hardware &hw) {
  return hw.l1dBytes > 0 && 4 * bk * (cols + rows) <= hw.l1dBytes;
}

// Whether a host tile reading B's panels streams the next panel slice ahead (mma_tile's
// bPrefetch): when the weight is wider than half of L2, each slice comes from L3 or memory
// once, and its first row-block pass would otherwise wait on it (resnet18's layer4 3 x 3 convs,
// 9.4 MB over 49 pixels: 2.08 -> 1.55 ms). A weight that stays in L2 gains nothing and pays the
// prefetch instructions (its 56 x 56 convs ran 7% slower with them).
bool streamsWeight(const PanelView &pv, const Knobs &knobs) {
  int64_t l2 = knobs.planFor.hw.l2Bytes;
  int64_t bytes = 4 / pv.group * pv.stride * ceilDiv(pv.cols, pv.panel);
  return !isGpuPlan(knobs) && l2 > 0 && bytes > l2 / 2;
}

} // namespace contraction

} // namespace aicf
