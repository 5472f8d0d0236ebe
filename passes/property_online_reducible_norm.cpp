// online_reducible_norm (docs/algorithms.md): the statistics of a norm computable as a streaming
// reduction with a mergeable state. Each norm declares its state algebra; the lowering is
// generic over it (init, update, merge, finalize):
//   softmax / log_softmax: (max m, sum d) with rescaling d·e^(m-m')   [Milakov & Gimelshein]
//   layer_norm:            Welford (n, mean, M2), Chan's parallel merge
//   mean_variance_norm:    Welford as well; epsilon on the standard deviation, no parameters
//   rms_norm:              sum of squares (plain associative sum)
// Legality: the state merges (declared algebra), its update is associative up to floating-point
// reassociation, the reduced axes are trailing and contiguous (the streaming loop walks one
// contiguous row), parameters are constants of the normalised shape, epsilon in (0, 0.1].
// The certificate also carries the NormSpec (ir/properties.h) the lowering generates the kernel
// from, so a norm op declared here needs no recipe of its own.
#include "passes/property_checks.h"
#include "support/diagnostics.h"

namespace aicf {

namespace {

// The NormSpec of softmax, log_softmax, layer_norm, rms_norm (reducing [first, last]) or
// mean_variance_norm; see ir/properties.h for what the lowering generates from each field.
NormSpec normSpecOf(const Node &n, int64_t first, int64_t last) {
  NormSpec s;
  s.firstAxis = first;
  s.lastAxis = last;
  switch (n.op()) {
  case Op::Softmax: s.algebra = NormAlgebra::Softmax; break;
  case Op::LogSoftmax: s.algebra = NormAlgebra::LogSoftmax; break;
  case Op::LayerNorm:
    s.algebra = NormAlgebra::Welford;
    s.epsilon = n.f("epsilon");
    s.scaleOperand = n.numOperands() > 1 ? 1 : -1;
    s.biasOperand = n.numOperands() > 2 ? 2 : -1;
    break;
  case Op::MeanVarianceNorm:
    s.algebra = NormAlgebra::Welford;
    s.epsilon = n.f("epsilon");
    s.epsilonAt = EpsilonPlacement::StdDev;
    break;
  case Op::RmsNorm:
    s.algebra = NormAlgebra::SumSquares;
    s.epsilon = n.f("epsilon");
    s.scaleOperand = n.numOperands() > 1 ? 1 : -1;
    break;
  default: AICF_CHECK(false, "normSpecOf: ", n.name(), " declares no norm algebra");
  }
  return s;
}

// mean_variance_norm (ONNX MeanVarianceNormalization) reduces any set of axes: one Welford row
// exists only when they are the trailing axes [a, rank); its default [0, 2, 3] (per channel) is
// not. It has no parameters, and its epsilon sits on the standard deviation.
Certificate checkMeanVarianceNorm(const Node &n, const char *algebra) {
  const TensorType &xt = n.operand(0)->type();
  int64_t rank = xt.rank();
  std::vector<int64_t> axes = n.ints("axes");
  if (axes.empty())
    for (int64_t a = 0; a < rank; ++a)
      axes.push_back(a);
  bool range = !axes.empty() && axes.back() - axes.front() + 1 == int64_t(axes.size());
  bool trailing = range && axes.back() == rank - 1;
  Certificate c;
  c.property = MemProperty::OnlineReducibleNorm;
  c.rewrite = "two-pass (statistics, then normalise) -> one-pass streaming state";
  c.exactness = Exactness::Reassociated;
  c.conditions.push_back({"state mergeable", algebra, true});
  c.conditions.push_back({"update associative", "up to floating-point reassociation", true});
  c.conditions.push_back(
      {"reduce axes trailing and contiguous",
       cat("axes ", shapeStr(axes), " of ", xt.str(),
           trailing ? "" : (range ? " (not the innermost axes)" : " (not one contiguous range)")),
       trailing});
  double eps = n.f("epsilon");
  c.conditions.push_back({"epsilon in (0, 0.1]",
                          cat("epsilon = ", eps, " (added to the standard deviation)"),
                          eps > 0 && eps <= 0.1});
  if (range)
    c.norm = normSpecOf(n, axes.front(), axes.back());
  return c;
}

} // namespace

std::optional<Certificate> checkOnlineReducibleNorm(const Graph &, const Node &n, const Target &) {
  const char *algebra = nullptr;
  switch (n.op()) {
  case Op::Softmax:
  case Op::LogSoftmax:
    algebra = "(max, sum) with rescaling: merge m = max(m1, m2), d = d1*e^(m1-m) + d2*e^(m2-m)";
    break;
  case Op::LayerNorm:
  case Op::MeanVarianceNorm: algebra = "Welford (n, mean, M2) with Chan's merge"; break;
  case Op::RmsNorm: algebra = "sum of squares: merge s = s1 + s2"; break;
  default: return std::nullopt;
  }
  if (n.op() == Op::MeanVarianceNorm)
    return checkMeanVarianceNorm(n, algebra);
  const TensorType &xt = n.operand(0)->type();
  int64_t rank = xt.rank();
  int64_t axis = n.i("axis");
  if (axis < 0)
    axis += rank;
  Certificate c;
  c.property = MemProperty::OnlineReducibleNorm;
  c.rewrite = "two-pass (statistics, then normalise) -> one-pass streaming state";
  c.exactness = Exactness::Reassociated;
  c.conditions.push_back({"state mergeable", algebra, true});
  c.conditions.push_back({"update associative", "up to floating-point reassociation", true});
  bool softmaxLike = n.op() == Op::Softmax || n.op() == Op::LogSoftmax;
  bool trailing = softmaxLike ? axis == rank - 1 : axis >= 0 && axis < rank;
  std::string axes = softmaxLike ? cat("[", axis, "]") : cat("[", axis, "..", rank, ")");
  c.conditions.push_back(
      {"reduce axes trailing and contiguous",
       cat("axes ", axes, " of ", xt.str(), trailing ? "" : " (not the innermost axis)"),
       trailing});
  if (n.op() == Op::LayerNorm || n.op() == Op::RmsNorm) {
    std::vector<int64_t> normShape(xt.shape.begin() + std::max<int64_t>(axis, 0), xt.shape.end());
    bool constOk = true;
    std::string ev;
    for (size_t k = 1; k < n.numOperands(); ++k) {
      const Value *p = n.operand(k);
      constOk = constOk && p->isWeight();
      ev += cat(k > 1 ? ", " : "",
                k == 1 ? (n.op() == Op::LayerNorm ? "gamma " : "weight ") : "beta ",
                p->type().str(), p->isWeight() ? " constant" : " computed");
    }
    c.conditions.push_back(
        {cat("parameters constant with the normalised shape ", shapeStr(normShape)),
         ev.empty() ? "no parameters" : ev, constOk});
    double eps = n.f("epsilon");
    c.conditions.push_back({"epsilon in (0, 0.1]", cat("epsilon = ", eps), eps > 0 && eps <= 0.1});
  }
  c.norm = normSpecOf(n, axis, softmaxLike ? axis : rank - 1);
  return c;
}

} // namespace aicf
