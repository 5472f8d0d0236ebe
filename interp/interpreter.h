// The reference interpreter (docs/architecture.md): runs any Graph IR on the CPU, one node at a
// time, with the registry's semantics. It is the ground truth for tests and --verify-passes, so it
// favours clarity over speed (but a BERT layer still runs in well under a second).
#pragma once

#include "ir/graph.h"
#include "ir/types.h"

#include <map>
#include <string>
#include <vector>

namespace aicf {

// Evaluates one node on concrete operand tensors (in operand order); returns its results.
// Throws UserError naming the node when the operands do not fit it (e.g. an index out of range).
std::vector<Tensor> evalNode(const Node &node, const std::vector<const Tensor *> &operands);

// Runs the whole graph. `inputs` in graph-input order; returns outputs in graph-output order.
std::vector<Tensor> interpret(const Graph &g, const std::vector<Tensor> &inputs);

// Runs the whole graph and returns every value (inputs, weights, all node results): the
// reference for kernel-level differential tests of fused groups.
std::map<const Value *, Tensor> interpretAll(const Graph &g, const std::vector<Tensor> &inputs);

// Seeded random inputs for every graph input: floats uniform in [-1, 1), integers 0 or 1 (real
// models feed integers as 0/1 masks or as indices; larger values make additive masks huge),
// bools fair coins. Deterministic for a given seed.
std::vector<Tensor> randomInputs(const Graph &g, uint64_t seed = 0);

} // namespace aicf
