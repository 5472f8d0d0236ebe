// The scatter recipe: scatter_elements and scatter_nd (ONNX ScatterElements / ScatterND), the
// result being the data with the updates written (or combined, `reduction` add, mul, max or
// min) at the positions the indices name, one update after another in row-major order of the
// updates, as the interpreter (interp/kernels_data.cpp) applies them.
//
// Updates at duplicate positions make the order matter (reduction none: the last one wins; a
// reduction: in order, exactly as the interpreter rounds), so the kernel splits the result into
// lines that no two threads share and whose updates it can apply in order:
//   * scatter_elements: a line is every position along the axis for one coordinate of the
//     other dims (an update changes only the axis coordinate, so it stays on its line);
//   * scatter_nd: a line is one position of the slice (the dims after the index tuple's k) over
//     every index tuple (an update writes its slice element e at tuple * slice + e).
// A flat loop over the lines (lower/flat_loop.h, one element per thread: no vector loop) gives
// each line to one thread, which copies the line of the data into the result, then walks the
// updates that land on it in order, reading the result back where a reduction combines. No two
// threads touch one element, so there is no barrier and the result is deterministic. The cost:
// a scatter_nd whose tuples address every dim (slice 1) is one line, a serial loop; exporters'
// scatters on constants fold at import instead (frontend/onnx_ops.cpp).
//
// Indices: negative ones count from the end; an update whose index is out of range is skipped
// (the interpreter reports it as an error), so nothing is written out of bounds. The result is
// read and written at storeIndex (lower/group_expr.h), so a result stored through a layout op
// (fusion rule 0) reads back what it wrote. Operands may carry fused prologues (GroupExpr::at);
// fusion gives the recipe no epilogue, since an element is final only after its last update.
#include "lower/flat_loop.h"
#include "lower/recipes.h"

#include "support/diagnostics.h"

namespace aicf {

namespace {

using kir::E;

E zero() {
  return E(int64_t(0));
}

using flatloop::computeValue; // values combine in their compute type

int64_t numel(const std::vector<int64_t> &s, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t n = 1;
  for (size_t i = from; i < s.size() && i < to; ++i)
    n *= s[i];
  return n;
}

class Scatter {
public:
  Scatter(const KernelGroup &g, const std::string &name, const Knobs &knobs)
      : g_(g), a_(*g.anchor), knobs_(knobs) {
    k_.name = name;
    k_.recipe = "scatter";
    k_.params = groupParams(g, byValue_);
    ge_ = std::make_unique<GroupExpr>(g, byValue_);
  }

  kir::Kernel build() {
    const Value *res = a_.result(0);
    AICF_CHECK(g_.outputs.size() == 1 && g_.outputs[0] == res, a_.where(),
               ": scatter group must store its result only");
    const std::string &r = a_.s("reduction");
    if (r != "none" && r != "add" && r != "mul" && r != "max" && r != "min")
      throw UserError(cat(a_.where(), ": ", a_.name(), ": reduction '", r,
                          "' is not none, add, mul, max or min"));
    if (a_.op() == Op::ScatterElements)
      scatterElements();
    else
      scatterND();
    return std::move(k_);
  }

private:
  const KernelGroup &g_;
  const Node &a_;
  const Knobs &knobs_;
  kir::Kernel k_;
  std::map<const Value *, kir::BufferP> byValue_;
  std::unique_ptr<GroupExpr> ge_;

  // The flat loop over `lines`, one line per thread (flatloop::buildLines).
  void lineLoop(int64_t lines, int64_t lineWork,
                const std::function<std::vector<kir::StmtP>(E)> &body) {
    flatloop::buildLines(k_, knobs_, lines, lineWork, body);
  }

  E operandAt(const Value *v, const std::vector<E> &idx) { return computeValue(ge_->at(v, idx)); }

  // An element of the indices (i32 or i64) as an i64.
  static E asIndex(E v) { return v->type == DType::I64 ? v : kir::cast(v, DType::I64); }

  // result[idx] = v (narrowed to an f16 / bf16 result).
  kir::StmtP storeResult(const std::vector<E> &idx, E v) {
    const Value *res = a_.result(0);
    DType t = res->type().dtype;
    if ((t == DType::F16 || t == DType::BF16) && v->type != t)
      v = kir::cast(v, t);
    return storeOutput(g_, ge_->param(res), res, idx, v);
  }

  // The update's value at `idx` of the result: the update itself, or combined with the
  // result's current value by the reduction (NaN propagates through max / min, as in the
  // interpreter; bool: add and max are or, mul and min and).
  E combined(const std::vector<E> &idx, E upd) {
    const std::string &r = a_.s("reduction");
    if (r == "none")
      return upd;
    const Value *res = a_.result(0);
    E cur = computeValue(kir::load(ge_->param(res), storeIndex(g_, res, idx)));
    DType t = res->type().dtype;
    if (t == DType::Bool)
      return kir::binary((r == "add" || r == "max") ? kir::BinOp::Or : kir::BinOp::And, cur, upd);
    if (r == "add")
      return cur + upd;
    if (r == "mul")
      return cur * upd;
    if (isFloat(t))
      return r == "max" ? flatloop::nanMaxUpdate(cur, upd) : flatloop::nanMinUpdate(cur, upd);
    return r == "max" ? kir::max(cur, upd) : kir::min(cur, upd);
  }

  // One line per coordinate of the dims other than the axis: copy the line, then for each
  // update position u along the axis (when the line lies inside the indices' extent) write
  // updates[.., u, ..] at the axis coordinate indices[.., u, ..].
  void scatterElements() {
    const Value *x = a_.operand(0), *ind = a_.operand(1), *upd = a_.operand(2);
    const std::vector<int64_t> &xs = x->type().shape, &is = ind->type().shape;
    int64_t a = a_.i("axis");
    size_t axis = static_cast<size_t>(a < 0 ? a + static_cast<int64_t>(xs.size()) : a);
    std::vector<int64_t> lineShape = xs;
    lineShape[axis] = 1;
    int64_t len = xs[axis];
    lineLoop(numel(lineShape), len + is[axis], [&](E i) {
      std::vector<E> line = unflatIndex(lineShape, i);
      std::vector<kir::StmtP> out;
      std::vector<E> idx = line;
      idx[axis] = kir::var("j");
      out.push_back(kir::forLoop("j", zero(), E(len), {storeResult(idx, operandAt(x, idx))}));
      std::vector<E> uidx = line;
      uidx[axis] = kir::var("u");
      std::vector<kir::StmtP> step;
      step.push_back(kir::decl("k", DType::I64, asIndex(ge_->at(ind, uidx))));
      E k = kir::var("k");
      step.push_back(kir::assign("k", kir::select(k < zero(), k + E(len), k)));
      std::vector<E> at = line;
      at[axis] = k;
      step.push_back(kir::ifThen((k >= zero()) && (k < E(len)),
                                 {storeResult(at, combined(at, operandAt(upd, uidx)))}));
      std::vector<kir::StmtP> updates = {kir::forLoop("u", zero(), E(is[axis]), step)};
      // Lines past the indices' extent on another dim get no update.
      E inside;
      for (size_t d = 0; d < xs.size(); ++d)
        if (d != axis && is[d] < xs[d]) {
          E in = line[d] < E(is[d]);
          inside = inside ? (inside && in) : in;
        }
      if (inside)
        updates = {kir::ifThen(inside, updates)};
      out.insert(out.end(), updates.begin(), updates.end());
      return out;
    });
  }

  // One line per element e of the slice (x's dims after the tuples' k): copy x[p..., e] for
  // every tuple position p, then for each index tuple u in order write updates[u..., e] at
  // x[indices[u..., 0], ..., indices[u..., k-1], e].
  void scatterND() {
    const Value *x = a_.operand(0), *ind = a_.operand(1), *upd = a_.operand(2);
    const std::vector<int64_t> &xs = x->type().shape, &is = ind->type().shape;
    size_t k = static_cast<size_t>(is.back());
    std::vector<int64_t> leadShape(xs.begin(), xs.begin() + static_cast<long>(k));
    std::vector<int64_t> sliceShape(xs.begin() + static_cast<long>(k), xs.end());
    std::vector<int64_t> tupleShape(is.begin(), is.end() - 1);
    int64_t positions = numel(leadShape), tuples = numel(tupleShape);
    lineLoop(numel(sliceShape), positions + tuples, [&](E i) {
      std::vector<E> e = unflatIndex(sliceShape, i);
      std::vector<kir::StmtP> out;
      std::vector<E> idx = unflatIndex(leadShape, kir::var("p"));
      idx.insert(idx.end(), e.begin(), e.end());
      out.push_back(kir::forLoop("p", zero(), E(positions), {storeResult(idx, operandAt(x, idx))}));
      std::vector<E> u = unflatIndex(tupleShape, kir::var("u"));
      std::vector<kir::StmtP> step;
      std::vector<E> at;
      E valid;
      for (size_t j = 0; j < k; ++j) {
        std::vector<E> iidx = u;
        iidx.push_back(E(static_cast<int64_t>(j)));
        std::string name = cat("k", j);
        step.push_back(kir::decl(name, DType::I64, asIndex(ge_->at(ind, iidx))));
        E kj = kir::var(name);
        step.push_back(kir::assign(name, kir::select(kj < zero(), kj + E(xs[j]), kj)));
        E in = (kj >= zero()) && (kj < E(xs[j]));
        valid = valid ? (valid && in) : in;
        at.push_back(kj);
      }
      at.insert(at.end(), e.begin(), e.end());
      std::vector<E> uidx = u;
      uidx.insert(uidx.end(), e.begin(), e.end());
      step.push_back(kir::ifThen(valid, {storeResult(at, combined(at, operandAt(upd, uidx)))}));
      out.push_back(kir::forLoop("u", zero(), E(tuples), step));
      return out;
    });
  }
};

// Requires: a scatter_elements or scatter_nd anchor. Knobs: FlatLoopKnobs (vec is always 1:
// a line's updates are a serial loop).
// Independent lines, each a serial walk over its copies and updates (~4 cycles an element on
// the host: an index computation, a load and a store that do not vectorise).
class ScatterRecipe final : public flatloop::FlatLoopRecipe<> {
public:
  ScatterRecipe()
      : FlatLoopRecipe({.walk = flatloop::Loop::Walk::Lines,
                        .maxVec = 1,
                        .hostCycles = 4.0,
                        .registers = 24}) {}
  const char *name() const override { return "scatter"; }
  bool lowers(const Node *a) const override {
    return a && (a->op() == Op::ScatterElements || a->op() == Op::ScatterND);
  }
  kir::Kernel build(const KernelGroup &g, const std::string &n, const Knobs &k) const override {
    AICF_CHECK(g.anchor, "scatter recipe needs an anchor (group ", g.id, ")");
    return labelled(Scatter(g, n, k).build(), name());
  }
};

} // namespace

const Recipe &scatterRecipe() {
  static const ScatterRecipe recipe;
  return recipe;
}

} // namespace aicf
