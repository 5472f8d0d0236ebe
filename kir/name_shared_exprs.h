// NameSharedExprs: a Kernel IR pass that declares a large shared subexpression once.
//
// Expressions are DAGs (shared_ptr nodes): a lowering that reads an operand more than once shares
// its node (clip's NaN-propagating min and max read x three times; round, a select, a tanh-GELU
// read theirs again), and the printers write a DAG as a tree. Chained, the text grows
// geometrically with the chain: a QDQ model's fake-quantize chain (dequantize -> clip -> cast
// -> dequantize -> ... read through a pooling window) printed lines of 2.6 MB that g++ took
// minutes and gigabytes on, for a few dozen operations.
//
//   store(y[i], f(e, e, g(e)))   ==>   var cse0: T = e; store(y[i], f(cse0, cse0, g(cse0)))
//
// A node is named when (1) the statement reaches it along two or more edges, (2) its tree is
// at least kMinTreeSize nodes (small shared operands, a load or `acc + bias`, print as before:
// the C++ compiler shares them anyway), and (3) the statement evaluates it unconditionally
// (reachable without entering a select's branches or the right side of && / ||: an operand
// there may be a load guarded by the condition, e.g. a padded tap). Nodes are named innermost
// first, so a name's value reads the names before it. Only store, declaration and assignment
// statements are rewritten, and nothing inside an mma_tile's fused init and epilogue (their
// shape is the micro-kernel's contract); an assignment's own variable is never moved before
// it. The values computed are the same, in the same precision: a name has its node's type.
#pragma once

#include "kir/kir.h"

#include <string>
#include <vector>

namespace aicf::kir {

// Nodes smaller than this (counting a shared node once per reference) are left inline.
inline constexpr double kMinTreeSize = 16;

// Names k's large shared subexpressions; one note per kernel that changed. Whether k changed.
bool nameSharedExprs(Kernel &k, std::vector<std::string> &notes);

} // namespace aicf::kir
