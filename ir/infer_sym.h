// Type inference with symbolic dims (see infer_sym.cpp): every caller of an op's inference goes
// through runInfer, so a symbolic operand either gets a rule or a clear refusal.
#pragma once

#include "ir/op_registry.h"

#include <optional>
#include <vector>

namespace aicf {

// info.infer(ctx), then, when an operand has symbolic dims, each result's dims as expressions
// (TensorType::sym); fails through ctx for an op without a symbolic rule.
std::vector<TensorType> runInfer(const OpInfo &info, InferCtx &ctx);

// numpy broadcasting of two symbolic shapes: a dim of 1 takes the other, equal dims stay. Any
// other pair would hold only where the two happen to be equal, which a range cannot promise:
// nullopt then, with `bad` (when given) the result dim that fails.
std::optional<std::vector<SymExpr>> broadcastSymShapes(const std::vector<SymExpr> &a,
                                                       const std::vector<SymExpr> &b,
                                                       size_t *bad = nullptr);

} // namespace aicf
