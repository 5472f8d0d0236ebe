// Type inference with symbolic dims (see infer_sym.cpp): every caller of an op's inference goes
// through runInfer, so a symbolic operand either gets a rule or a clear refusal.
#pragma once

#include "ir/op_registry.h"

#include <vector>

namespace aicf {

// info.infer(ctx), then, when an operand has symbolic dims, each result's dims as expressions
// (TensorType::sym); fails through ctx for an op without a symbolic rule.
std::vector<TensorType> runInfer(const OpInfo &info, InferCtx &ctx);

} // namespace aicf
