// The norm state algebras (see state_algebra.h): softmax / log_softmax (online max and rescaled
// sum, Milakov & Gimelshein), layer_norm (Welford update, Chan merge) and rms_norm (sum of
// squares). Each is plain data over Kernel IR expressions; recipe_online_norm.cpp turns any of them
// into a one-pass kernel.
#include "lower/state_algebra.h"

#include "ir/graph.h"
#include "support/diagnostics.h"

#include <cmath>
#include <limits>

namespace aicf {

using kir::E;

namespace {

const double kNegInf = -std::numeric_limits<double>::infinity();

E f32(double v) {
  return kir::fconst(v, DType::F32);
}
E fv(const std::string &name) {
  return kir::var(name, DType::F32);
}
E s(const std::string &field) {
  return fv(stateVar(field));
}
E a(const std::string &field) {
  return fv("a_" + field);
}
E b(const std::string &field) {
  return fv("b_" + field);
}
E exp(E x) {
  return kir::unary(kir::UnOp::Exp, std::move(x));
}

// e^(from - to) as a rescaling factor, exact (1) when nothing changed; this also covers
// from = to = -inf, where the plain formula would give e^NaN.
E rescale(E from, E to) {
  return kir::select(from == to, f32(1.0), exp(from - to));
}

kir::Combiner combinerOf(const std::string &name, const std::vector<StateField> &fields) {
  kir::Combiner c;
  c.name = name;
  for (const StateField &f : fields)
    c.fields.emplace_back(f.name, f.dtype);
  return c;
}

// The (m, d) state shared by softmax and log_softmax.
StateAlgebra maxSumState(NormAlgebra algebra) {
  StateAlgebra alg;
  alg.algebra = algebra;
  alg.fields = {{"m", DType::F32, f32(kNegInf)}, {"d", DType::F32, f32(0.0)}};
  // m' = max(m, x); d' = d e^(m - m') + e^(x - m'), with e^(x - m') = 0 while m' is -inf (then
  // x is -inf too: it contributes nothing).
  alg.updateLets = {{"m_new", kir::max(s("m"), fv(kInputVar))}};
  alg.update = {fv("m_new"), s("d") * rescale(s("m"), fv("m_new")) +
                                 kir::select(fv("m_new") == f32(kNegInf), f32(0.0),
                                             exp(fv(kInputVar) - fv("m_new")))};
  alg.merge = combinerOf(enumName(algebra), alg.fields);
  alg.merge.lets = {{"mm", kir::max(a("m"), b("m"))}};
  alg.merge.merged = {fv("mm"),
                      a("d") * rescale(a("m"), fv("mm")) + b("d") * rescale(b("m"), fv("mm"))};
  return alg;
}

} // namespace

std::string stateVar(const std::string &field) {
  return "s_" + field;
}

StateAlgebra softmaxAlgebra() {
  StateAlgebra alg = maxSumState(NormAlgebra::Softmax);
  // y = e^(x - m) / d. A row of -inf has m = -inf: x - m is NaN, as ONNX defines the result.
  alg.finalizeLets = {{"inv_d", f32(1.0) / s("d")}};
  alg.finalize = exp(fv(kInputVar) - s("m")) * fv("inv_d");
  return alg;
}

StateAlgebra logSoftmaxAlgebra() {
  StateAlgebra alg = maxSumState(NormAlgebra::LogSoftmax);
  // (x - m) - log d, in that order: m + log d would round away the low bits of large inputs.
  alg.finalizeLets = {{"log_d", kir::unary(kir::UnOp::Log, s("d"))}};
  alg.finalize = (fv(kInputVar) - s("m")) - fv("log_d");
  return alg;
}

StateAlgebra welfordAlgebra(double epsilon, EpsilonPlacement epsilonAt, int scaleOperand,
                            int biasOperand) {
  StateAlgebra alg;
  alg.algebra = NormAlgebra::Welford;
  alg.fields = {
      {"n", DType::F32, f32(0.0)}, {"mean", DType::F32, f32(0.0)}, {"m2", DType::F32, f32(0.0)}};
  // n += 1; delta = x - mean; mean += delta / n; M2 += delta (x - mean').
  alg.updateLets = {{"n_new", s("n") + f32(1.0)},
                    {"delta", fv(kInputVar) - s("mean")},
                    {"mean_new", s("mean") + fv("delta") / fv("n_new")}};
  alg.update = {fv("n_new"), fv("mean_new"),
                s("m2") + fv("delta") * (fv(kInputVar) - fv("mean_new"))};
  // Chan et al.: n = na + nb; delta = mean_b - mean_a; mean = mean_a + delta nb / n;
  // M2 = M2_a + M2_b + delta^2 na nb / n. Two empty states (n = 0) merge to an empty state.
  alg.merge = combinerOf(enumName(alg.algebra), alg.fields);
  alg.merge.lets = {{"nn", a("n") + b("n")},
                    {"dd", b("mean") - a("mean")},
                    {"wb", kir::select(fv("nn") == f32(0.0), f32(0.0), b("n") / fv("nn"))}};
  alg.merge.merged = {fv("nn"), a("mean") + fv("dd") * fv("wb"),
                      a("m2") + b("m2") + fv("dd") * fv("dd") * a("n") * fv("wb")};
  // Population variance M2 / n, as ONNX and PyTorch use.
  // The epsilon sits under the square root (layer_norm) or on the standard deviation
  // (mean_variance_norm: (x - mean) / (sqrt(var) + eps)), as the certificate's NormSpec says.
  if (epsilonAt == EpsilonPlacement::StdDev)
    alg.finalizeLets = {
        {"inv_std", f32(1.0) / (kir::unary(kir::UnOp::Sqrt, s("m2") / s("n")) + f32(epsilon))}};
  else
    alg.finalizeLets = {{"inv_std", kir::unary(kir::UnOp::Rsqrt, s("m2") / s("n") + f32(epsilon))}};
  E y = (fv(kInputVar) - s("mean")) * fv("inv_std");
  if (scaleOperand >= 0) {
    alg.params.push_back({static_cast<size_t>(scaleOperand), "p_gamma"});
    y = y * fv("p_gamma");
  }
  if (biasOperand >= 0) {
    alg.params.push_back({static_cast<size_t>(biasOperand), "p_beta"});
    y = y + fv("p_beta");
  }
  alg.finalize = y;
  return alg;
}

StateAlgebra sumSquaresAlgebra(double epsilon, const SymExpr &rowLength, int scaleOperand,
                               int biasOperand) {
  // A symbolic row length is read from the dims (issue 21).
  E len = rowLength.isConstant() ? f32(double(rowLength.constant()))
                                 : kir::cast(kir::symE(rowLength), DType::F32);
  StateAlgebra alg;
  alg.algebra = NormAlgebra::SumSquares;
  alg.fields = {{"ss", DType::F32, f32(0.0)}};
  alg.update = {s("ss") + fv(kInputVar) * fv(kInputVar)};
  alg.merge = combinerOf(enumName(alg.algebra), alg.fields);
  alg.merge.merged = {a("ss") + b("ss")};
  alg.finalizeLets = {{"inv_rms", kir::unary(kir::UnOp::Rsqrt, s("ss") / len + f32(epsilon))}};
  E y = fv(kInputVar) * fv("inv_rms");
  if (scaleOperand >= 0) {
    alg.params.push_back({static_cast<size_t>(scaleOperand), "p_weight"});
    y = y * fv("p_weight");
  }
  if (biasOperand >= 0) {
    alg.params.push_back({static_cast<size_t>(biasOperand), "p_bias"});
    y = y + fv("p_bias");
  }
  alg.finalize = y;
  return alg;
}

StateAlgebra algebraFor(const NormSpec &spec, const SymExpr &rowLength) {
  switch (spec.algebra) {
  case NormAlgebra::Softmax: return softmaxAlgebra();
  case NormAlgebra::LogSoftmax: return logSoftmaxAlgebra();
  case NormAlgebra::Welford:
    return welfordAlgebra(spec.epsilon, spec.epsilonAt, spec.scaleOperand, spec.biasOperand);
  case NormAlgebra::SumSquares:
    return sumSquaresAlgebra(spec.epsilon, rowLength, spec.scaleOperand, spec.biasOperand);
  }
  throw InternalError("no such state algebra");
}

namespace {

// For a graph that never ran annotate-properties (Kernel IR tests that partition a parsed graph
// directly): the spec of the four built-in norm ops as the online_reducible_norm checker
// (passes/property_online_reducible_norm.cpp) would record it. A compiled model always takes the
// certificate's spec; an op the checker alone knows (mean_variance_norm) needs its certificate.
std::optional<NormSpec> derivedNormSpec(const Node &n) {
  NormSpec spec;
  switch (n.op()) {
  case Op::Softmax: spec.algebra = NormAlgebra::Softmax; break;
  case Op::LogSoftmax: spec.algebra = NormAlgebra::LogSoftmax; break;
  case Op::LayerNorm: spec.algebra = NormAlgebra::Welford; break;
  case Op::RmsNorm: spec.algebra = NormAlgebra::SumSquares; break;
  default: return std::nullopt;
  }
  int64_t rank = n.operand(0)->type().rank();
  int64_t axis = n.i("axis");
  if (axis < 0)
    axis += rank;
  bool singleAxis = n.op() == Op::Softmax || n.op() == Op::LogSoftmax;
  spec.firstAxis = axis;
  spec.lastAxis = singleAxis || rank == 0 ? axis : rank - 1;
  if (!singleAxis) {
    spec.epsilon = n.f("epsilon");
    spec.scaleOperand = n.numOperands() >= 2 ? 1 : -1;
    spec.biasOperand = n.op() == Op::LayerNorm && n.numOperands() >= 3 ? 2 : -1;
  }
  return spec;
}

} // namespace

std::optional<NormSpec> normSpecFor(const Node &n) {
  for (const Certificate &c : n.certificates)
    if (c.property == MemProperty::OnlineReducibleNorm && c.norm)
      return c.norm;
  return derivedNormSpec(n);
}

} // namespace aicf
