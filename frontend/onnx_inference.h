// libonnx's shape inference, run where it cannot take the compiler down with it.
//
// The importer uses ONNX's inference only to cross-check its own shape rules (a converter whose
// result disagrees with ONNX's is an error at that node). libonnx 1.12's inference functions
// trust what they read: they index dims by the ranks and attribute lengths the model claims
// (convPoolShapeInference dereferencing a missing dim of an input declared with too low a rank,
// a zero stride dividing), so a malformed model file can crash the process there. Checking each
// family's preconditions in advance finds the instances, not the class. Instead the inference
// runs in a forked child process: its results come back through a pipe, and a child that
// crashes, throws, runs out of memory or hangs past a time limit gives no results, which is what
// the importer already does when ONNX's inference fails: its own shape rules decide alone, and
// they refuse a malformed node with a message naming it.
#pragma once

#include <onnx/onnx_pb.h>

#include <optional>
#include <string>

namespace aicf {

// The outcome of one isolated inference: the inferred value_info and outputs of the model's
// main graph (as a GraphProto holding just those two lists), or nothing, with why.
struct IsolatedInference {
  std::optional<onnx::GraphProto> inferred;
  std::string failure; // when !inferred: "threw: ...", "crashed (signal 11)", "timed out", ...
};

// Runs onnx::shape_inference::InferShapes (strict mode off, data propagation on) on a copy of
// `model` in a child process. `timeoutSeconds` bounds the child's run time.
IsolatedInference inferShapesIsolated(const onnx::ModelProto &model, int timeoutSeconds = 120);

} // namespace aicf
