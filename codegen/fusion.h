// Fusion into kernels (DESIGN.md §4, issue "Kernel IR"): partitions the rewritten graph into
// kernel groups. Each group becomes one kernel:
//   * an anchor — a contraction (with its epilogue), a norm, attention, a reduction, a pooling
//     or a data-movement op — plus the rematerializable elementwise nodes fused into it: a
//     prologue (elementwise chains feeding an anchor operand and used nowhere else) and an
//     epilogue (elementwise consumers of the anchor's result that nothing else needs);
//   * or a pure elementwise group (a connected elementwise chain with no anchor).
// Reshape-like nodes (VIEW) are not kernels: their result aliases their operand's buffer.
// Whether recomputing is cheaper than storing is still decided here by a rule, not by the cost
// model: an elementwise node is fused into its only consumer (never duplicated). Costing the
// duplication against store + reload (codegen/cost_model.h) is future work.
#pragma once

#include "ir/graph.h"

#include <string>
#include <vector>

namespace aicf {

struct KernelGroup {
  int id = 0;
  std::string kind; // logical opcode: "attention", "layer_norm", "matmul", "fused_elementwise", ...
  Node *anchor = nullptr;       // null for a pure elementwise group
  std::vector<Node *> nodes;    // every node of the group, in graph order
  std::vector<Value *> inputs;  // read from outside the group, first-use order, no duplicates
  std::vector<Value *> outputs; // produced here and used outside (or graph outputs)
};

struct Partition {
  std::vector<KernelGroup> groups; // in a valid execution order
  std::vector<Node *> views;       // reshape-like nodes: aliases, no kernel
};

Partition partitionGraph(const Graph &g);

// The value whose buffer `v` lives in: follows view (reshape) nodes back to their source.
const Value *storageOf(const Value *v);

} // namespace aicf
