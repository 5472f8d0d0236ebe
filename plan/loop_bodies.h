// Loops kept at run time (issue 20: an ONNX Loop whose trip count or condition is known only
// then). The loop node owns its body graph; the driver compiles the body as a model of its own
// (every compile stage: its own fusion, kernels and memory plan) and splices that plan into the
// enclosing one here, after the loop step:
//   - the body's steps follow the loop step (PlanStep::Loop::bodySteps of them); the runtime runs
//     them once per iteration and the outer sequence resumes after them;
//   - the body's input buffers for the iteration number, the condition and the carried values
//     become arena buffers the runtime writes (`state`), its outputs arena buffers it copies back
//     from (`next`); the inputs for outer values alias the loop step's operands;
//   - the body's arena and those buffers are placed after the enclosing arena (the body runs
//     while the loop step does, so nothing of the enclosing plan is live there but what the loop
//     step reads), its weights after the enclosing weights, its kernel symbols prefixed.
// Nested loops are spliced inside out: the body's plan already holds its own loops' bodies.
#pragma once

#include "plan/plan.h"

#include <string>

namespace aicf {

// Splices `body` (the plan of the loop step at `at`'s body graph) into `plan` after that step
// and fills its PlanStep::loop. Body kernel symbols get `prefix`. Returns the offset in
// weights.bin where the body's weights (packed as `body` places them) go.
int64_t spliceLoopBody(Plan &plan, size_t at, const Plan &body, const std::string &prefix);

} // namespace aicf
