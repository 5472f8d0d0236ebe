// The Graph IR verifier: SSA and order, operand types against the registry's inference,
// attributes against the schema, outputs defined. Runs after the parser, the importer, and every
// pass that changed the graph.
#pragma once

#include "ir/graph.h"

#include <string>
#include <vector>

namespace aicf {

// One problem: `where` is the node's ONNX origin, else its file:line:col, else "node #i (op)"
// (values: their origin, position or "graph @name"); `pos` is the text position when the graph
// came from text (line 0 otherwise), so tools can match diagnostics to lines.
struct VerifierDiagnostic {
  std::string where;
  std::string message;
  SourcePos pos;
  std::string str() const { return where + ": " + message; }
};

// Every problem found, in graph order.
std::vector<VerifierDiagnostic> verifyGraphDetailed(const Graph &g);

// Returns every problem found, each "LOCATION: message" (LOCATION: the node's ONNX origin,
// else its file:line:col, else "node #i (op)").
std::vector<std::string> verifyGraphDiagnostics(const Graph &g);

// Throws UserError with the first problem ("error: " is added by the tool printing it).
void verifyGraph(const Graph &g);

} // namespace aicf
