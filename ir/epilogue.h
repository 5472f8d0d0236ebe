// Contraction epilogue steps as typed values. The `epilogue` attribute of matmul, gemm and conv
// (ir/ops.def) lists ops applied to the accumulator in order; each step is an elementwise op of
// the registry with its attributes, so the interpreter and the lowering evaluate a step with the
// same code that evaluates the op itself (interp/kernels.cpp, lower/group_expr.cpp): an
// elementwise op added to the registry is an epilogue step with no further change. A binary step
// computes `acc op operand` with the contraction's next extra operand (broadcast to the result).
//
// The attribute keeps its text spelling (`epilogue = ["add", "gelu_tanh"]`): a step is its op's
// registry name, its attributes at their schema defaults; the one attribute variant with a
// spelling is "gelu_tanh" (gelu, approximate = "tanh"). The attribute is decoded here and only
// here.
#pragma once

#include "ir/graph.h"

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace aicf {

struct EpilogueStep {
  Op op = Op::Identity;
  AttrMap attrs; // the attributes that differ from the op's schema defaults

  bool takesOperand() const; // a binary op: consumes the next extra operand
  std::string str() const;   // the attribute's spelling: "add", "gelu_tanh"
  bool operator==(const EpilogueStep &) const = default;
};

// Whether `op` can be an epilogue step: pure, elementwise, one result, one operand or two (acc
// and the extra operand), no required attribute, and an f32 result from f32 operands (so no
// comparison, logic, cast or select).
bool isEpilogueOp(Op op);

// The step spelled `name`, or nullopt when no step has that spelling.
std::optional<EpilogueStep> parseEpilogueStep(std::string_view name);

// The step node `n` computes (its op, attributes other than the defaults), or nullopt when its op
// is not a step op or its attributes have no spelling (fuse-epilogue keeps such nodes apart).
std::optional<EpilogueStep> epilogueStepOf(const Node &n);

// A contraction's `epilogue` attribute, decoded. An unknown step is an InternalError: the
// verifier (ir/infer.cpp) reports it to the user before anything reads the steps.
std::vector<EpilogueStep> epilogueSteps(const std::vector<std::string> &attr);
std::vector<EpilogueStep> epilogueSteps(const Node &contraction);
std::vector<std::string> epilogueAttr(const std::vector<EpilogueStep> &steps);
// Number of extra operands an `epilogue` attribute consumes (one per binary step).
int epilogueOperandCount(const std::vector<std::string> &epilogue);

// A one-node graph applying `step` to f32 values: input %acc of `accShape` and, for a binary
// step, input %operand of `operandShape` (extra operands are widened to f32 first); the node's
// result is f32 of `accShape`. The interpreter runs the op's kernel on it and the lowering asks
// group_expr for the op's expression, so a step has exactly the op's semantics (computed in f32,
// the accumulator's type; the contraction rounds its result to the output dtype once).
struct StepNode {
  std::unique_ptr<Graph> graph;
  const Node *node = nullptr;
};
StepNode stepNode(const EpilogueStep &step, const std::vector<int64_t> &accShape = {},
                  const std::vector<int64_t> &operandShape = {});

} // namespace aicf
