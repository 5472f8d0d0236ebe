// The non_max_suppression recipe (ONNX NonMaxSuppression with compile-time thresholds), by the
// interpreter's kernel (interp/kernels_data.cpp kernel_NonMaxSuppression): per batch and
// class, the boxes by descending score (ties: the lower index; only scores above
// score_threshold when has_score_threshold), each kept unless its IoU with a box kept before it
// in this class is above iou_threshold, at most max_per_class kept; each kept box appends a row
// (batch, class, box) to the result. The count of rows is the last result and sets the data dim
// (ir/ops.def "lengths known only at run time").
//
// A row's position depends on every row before it, in (batch, class) order, so the op is one
// serial walk (flatloop::buildSerial). It needs no scratch memory: the candidates come in order
// by passes like top_k's (lower/recipe_top_k.cpp: pass j takes the best box after pass j - 1's
// choice), and the boxes kept so far in this class are the rows this kernel already wrote, read
// back from the result (box index in column 2). The IoU test is the interpreter's `suppresses`,
// the same f32 operations in the same order (min / max as std::min / std::max spell them), so
// the decisions match it. NaN scores, which the interpreter's sort leaves in no defined place,
// come after every number here, in index order.
//
// The result is reserved at the bound and its rows are 3 wide, so row r is at r * 3 whatever
// the count: no stride reads the dim (stale inside this kernel). Rows past the bound are not
// written: the walk stops there and reports bound + 1, which fails the run. The walk never
// reads the dim's planning value, so the kernel prints the same at 0 and at the bound.
#include "lower/flat_loop.h"
#include "lower/recipes.h"

#include "support/diagnostics.h"

#include <algorithm>

namespace aicf {

namespace {

using kir::E;

E notE(E a) {
  return kir::unary(kir::UnOp::Not, std::move(a));
}
// std::min / std::max exactly (NaN operands included): (b < a) ? b : a, (a < b) ? b : a.
E stdMin(E a, E b) {
  return kir::select(b < a, b, a);
}
E stdMax(E a, E b) {
  return kir::select(a < b, b, a);
}
E f32(double v) {
  return kir::fconst(static_cast<double>(static_cast<float>(v)), DType::F32);
}

class Nms {
public:
  Nms(const KernelGroup &g, const std::string &name, const Knobs &knobs)
      : g_(g), a_(*g.anchor), knobs_(knobs) {
    k_ = startKernel(g, name, "non_max_suppression", byValue_);
    ge_ = std::make_unique<GroupExpr>(g, byValue_);
  }

  kir::Kernel build() {
    const Value *boxes = a_.operand(0), *scores = a_.operand(1);
    const Value *selected = a_.result(0), *count = a_.result(1);
    auto stored = [&](const Value *v) {
      return std::find(g_.outputs.begin(), g_.outputs.end(), v) != g_.outputs.end();
    };
    AICF_CHECK(stored(selected) && stored(count) && g_.storeThrough.empty(), a_.where(),
               ": the non_max_suppression group must store both results, not through a layout op");
    out_ = ge_->param(selected);
    SymShape bs = symShapeOf(boxes->type()), ss = symShapeOf(scores->type());
    const std::vector<int64_t> &bp = boxes->type().shape, &sp = scores->type().shape;
    const int64_t bound = a_.i("bound"), maxPer = a_.i("max_per_class");
    const bool thresholded = a_.i("has_score_threshold") != 0;
    centered_ = a_.i("center_point_box") != 0;
    iou_ = f32(a_.f("iou_threshold"));
    E scoreTh = f32(a_.f("score_threshold"));
    // Steps: per class, n passes of n candidates, each kept one tested against the kept ones.
    int64_t n = bp[1], work = bp[0] * sp[1] * n * (n + std::min(maxPer, n));

    E b = kir::var("nms_b"), c = kir::var("nms_c"), j = kir::var("nms_j"), t = kir::var("nms_t");
    E rows = kir::var("nms_rows"), first = kir::var("nms_first"), kept = kir::var("nms_kept");
    E pv = kir::var("nms_pv", DType::F32), pi = kir::var("nms_pi");
    E bv = kir::var("nms_bv", DType::F32), bi = kir::var("nms_bi"),
      v = kir::var("nms_v", DType::F32);
    E zero = E(int64_t(0)), one = E(int64_t(1));
    // Scores and coordinates in f32, as the interpreter reads them (FloatIn: f16 / bf16
    // widened, f64 rounded).
    auto asF32 = [](E x) { return x->type == DType::F32 ? x : kir::cast(x, DType::F32); };
    auto score = [&](E box) { return asF32(ge_->at(scores, {b, c, box})); };
    auto coord = [&](E box, int64_t q) { return asF32(ge_->at(boxes, {b, box, E(q)})); };

    flatloop::buildSerial(k_, knobs_, work, [&] {
      // A scan for pass j's candidate: the best box after the previous pass's choice.
      std::vector<kir::StmtP> scan = {kir::decl("nms_v", DType::F32, score(t))};
      E after = flatloop::orE(pi < zero, before(pv, pi, v, t));
      E take = after && flatloop::orE(bi < zero, before(v, t, bv, bi));
      if (thresholded)
        take = (v > scoreTh) && take;
      scan.push_back(kir::ifThen(take, {kir::assign("nms_bv", v), kir::assign("nms_bi", t)}));

      // Candidate bi (its corners once) against each kept row r of this class (its box in
      // column 2).
      std::vector<kir::StmtP> candidate;
      Corners ca = corners(bi, "nms_a", coord, candidate);
      std::vector<kir::StmtP> test = {kir::decl(
          "nms_k", DType::I64, kir::load(out_, {first + kir::var("nms_r"), E(int64_t(2))}))};
      Corners ck = corners(kir::var("nms_k"), "nms_k", coord, test);
      std::vector<kir::StmtP> iou = suppresses(ca, ck);
      test.insert(test.end(), iou.begin(), iou.end());
      test.push_back(kir::ifThen(kir::var("nms_sup", DType::Bool),
                                 {kir::assign("nms_keep", kir::cast(zero, DType::Bool))}));

      // Kept: row `rows` when it fits the reserve; past it, bound + 1 rows stop the walk.
      std::vector<kir::StmtP> append = {
          kir::ifThen(rows < E(bound), {kir::store(out_, {rows, E(int64_t(0))}, b),
                                        kir::store(out_, {rows, E(int64_t(1))}, c),
                                        kir::store(out_, {rows, E(int64_t(2))}, bi)}),
          kir::assign("nms_rows", rows + one), kir::assign("nms_kept", kept + one)};

      std::vector<kir::StmtP> keepTest = candidate;
      keepTest.push_back(kir::decl("nms_keep", DType::Bool, kir::cast(one, DType::Bool)));
      keepTest.push_back(kir::forLoop("nms_r", zero, kept, test));
      keepTest.push_back(kir::ifThen(kir::var("nms_keep", DType::Bool), append));

      std::vector<kir::StmtP> pass = {kir::decl("nms_bv", DType::F32, f32(0.0)),
                                      kir::decl("nms_bi", DType::I64, E(int64_t(-1))),
                                      kir::forLoop("nms_t", zero, kir::symE(bs[1]), scan),
                                      kir::ifThen(bi >= zero, keepTest),
                                      kir::assign("nms_pv", bv),
                                      kir::assign("nms_pi", bi)};
      // Pass j runs while the class wants more boxes, the last pass found one and the rows fit.
      E more = (kept < E(maxPer)) && flatloop::orE(j == zero, pi >= zero) && (rows <= E(bound));

      std::vector<kir::StmtP> cls = {
          kir::decl("nms_first", DType::I64, rows), kir::decl("nms_kept", DType::I64, zero),
          kir::decl("nms_pv", DType::F32, f32(0.0)),
          kir::decl("nms_pi", DType::I64, E(int64_t(-1))),
          kir::forLoop("nms_j", zero, kir::symE(bs[1]), {kir::ifThen(more, pass)})};
      return std::vector<kir::StmtP>{
          kir::decl("nms_rows", DType::I64, zero),
          kir::forLoop("nms_b", zero, kir::symE(bs[0]),
                       {kir::forLoop("nms_c", zero, kir::symE(ss[1]), cls)}),
          kir::store(ge_->param(count), {}, rows)};
    });
    return std::move(k_);
  }

private:
  const KernelGroup &g_;
  const Node &a_;
  const Knobs &knobs_;
  kir::Kernel k_;
  std::map<const Value *, kir::BufferP> byValue_;
  std::unique_ptr<GroupExpr> ge_;
  kir::BufferP out_;
  bool centered_ = false;
  E iou_;

  // Score va at box ia comes before vb at ib: the greater score first, equal ones by index,
  // NaN after every number (two NaNs by index).
  static E before(E va, E ia, E vb, E ib) {
    E byIndex = ia < ib;
    E na = flatloop::isNaN(va), nb = flatloop::isNaN(vb);
    E numbers = flatloop::orE(va > vb, (va == vb) && byIndex); // false when either is NaN
    return flatloop::orE(numbers, flatloop::orE(notE(na) && nb, na && nb && byIndex));
  }

  // A box's corners as the interpreter's `suppresses` computes them (interp/kernels_data.cpp),
  // declared as f32 scalars <prefix>x0, x1, y0, y1 after its four coordinates.
  struct Corners {
    E x0, x1, y0, y1;
  };
  Corners corners(E box, const std::string &prefix, const std::function<E(E, int64_t)> &coord,
                  std::vector<kir::StmtP> &s) const {
    auto decl = [&](const std::string &name, E value) {
      s.push_back(kir::decl(prefix + name, DType::F32, value));
      return kir::var(prefix + name, DType::F32);
    };
    E q[4];
    for (int64_t i = 0; i < 4; ++i)
      q[i] = decl(cat("q", i), coord(box, i));
    if (!centered_) // [y1, x1, y2, x2]
      return {decl("x0", stdMin(q[1], q[3])), decl("x1", stdMax(q[1], q[3])),
              decl("y0", stdMin(q[0], q[2])), decl("y1", stdMax(q[0], q[2]))};
    E two = f32(2.0); // [x center, y center, width, height]
    return {decl("x0", q[0] - q[2] / two), decl("x1", q[0] + q[2] / two),
            decl("y0", q[1] - q[3] / two), decl("y1", q[1] + q[3] / two)};
  }

  // Statements declaring nms_sup: whether box a (the candidate) overlaps box b (a kept one) by
  // an IoU above the threshold, in `suppresses`' operations and order.
  std::vector<kir::StmtP> suppresses(const Corners &a, const Corners &b) const {
    std::vector<kir::StmtP> s;
    auto decl = [&](const std::string &name, E value) {
      s.push_back(kir::decl(name, DType::F32, value));
      return kir::var(name, DType::F32);
    };
    E ix0 = decl("nms_ix0", stdMax(a.x0, b.x0)), ix1 = decl("nms_ix1", stdMin(a.x1, b.x1));
    E iy0 = decl("nms_iy0", stdMax(a.y0, b.y0)), iy1 = decl("nms_iy1", stdMin(a.y1, b.y1));
    E inter = decl("nms_inter", (ix1 - ix0) * (iy1 - iy0));
    E areaA = decl("nms_area_a", (a.x1 - a.x0) * (a.y1 - a.y0));
    E areaB = decl("nms_area_b", (b.x1 - b.x0) * (b.y1 - b.y0));
    E uni = decl("nms_union", areaA + areaB - inter);
    E z = f32(0.0);
    E apart = flatloop::orE(ix1 <= ix0, iy1 <= iy0);
    E empty =
        flatloop::orE(flatloop::orE(inter <= z, areaA <= z), flatloop::orE(areaB <= z, uni <= z));
    s.push_back(
        kir::decl("nms_sup", DType::Bool, notE(apart) && notE(empty) && (inter / uni > iou_)));
    return s;
  }
};

// Requires: a non_max_suppression anchor. Knobs: FlatLoopKnobs (one thread: buildSerial).
// One serial walk (flatloop::FlatLoopRecipe): ~4 scalar cycles a step (a score load and the
// order's compares; an IoU test, ~20 flops and branches, counts as a few steps).
class NmsRecipe final : public flatloop::FlatLoopRecipe<> {
public:
  NmsRecipe()
      : FlatLoopRecipe({.walk = flatloop::Loop::Walk::Serial, .hostCycles = 4.0, .registers = 40}) {
  }
  const char *name() const override { return "non_max_suppression"; }
  bool lowers(const Node *a) const override { return a && a->op() == Op::NonMaxSuppression; }
  kir::Kernel build(const KernelGroup &g, const std::string &n, const Knobs &k) const override {
    AICF_CHECK(g.anchor, "non_max_suppression recipe needs an anchor (group ", g.id, ")");
    return Nms(g, n, k).build();
  }
};

} // namespace

const Recipe &nmsRecipe() {
  static const NmsRecipe recipe;
  return recipe;
}

} // namespace aicf
