// See contraction_parts.h.
#include "passes/contraction_parts.h"

namespace aicf {

bool staticF32(const Value *v) {
  return v->type().dtype == DType::F32 && v->type().isStatic();
}

bool constantF32Weight(const Value *v) {
  return v->isWeight() && v->hasData() && staticF32(v);
}

bool plainContraction(const Node &n) {
  if (n.op() != Op::MatMul && n.op() != Op::Gemm)
    return false;
  if (!staticF32(n.operand(0)) || !staticF32(n.operand(1)) || !staticF32(n.result()))
    return false;
  if (n.op() == Op::Gemm)
    return n.i("transA") == 0 && n.f("alpha") == 1.0 && n.f("beta") == 1.0;
  return n.operand(0)->type().shape.size() >= 2 && n.operand(1)->type().shape.size() == 2;
}

std::vector<ContractionStep> contractionSteps(const Node &n) {
  std::vector<ContractionStep> out;
  size_t extras = static_cast<size_t>(epilogueOperandCount(n.strs("epilogue")));
  size_t next = 2;
  if (n.op() == Op::Gemm && n.numOperands() == 3 + extras) {
    out.push_back({epilogueSteps(std::vector<std::string>{"add"}).front(), n.operand(2)});
    next = 3;
  }
  for (const EpilogueStep &s : epilogueSteps(n))
    out.push_back({s, s.takesOperand() ? n.operand(next++) : nullptr});
  return out;
}

namespace {

bool transposedB(const Node &n) {
  return n.op() == Op::Gemm && n.i("transB") != 0;
}

} // namespace

int64_t contractionK(const Node &n) {
  const auto &shape = n.operand(1)->type().shape;
  return transposedB(n) ? shape[1] : shape[0];
}

int64_t contractionN(const Node &n) {
  const auto &shape = n.operand(1)->type().shape;
  return transposedB(n) ? shape[0] : shape[1];
}

float contractionB(const Node &n, const float *b, int64_t k, int64_t col) {
  return transposedB(n) ? b[col * contractionK(n) + k] : b[k * contractionN(n) + col];
}

} // namespace aicf
