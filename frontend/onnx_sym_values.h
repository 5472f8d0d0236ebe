// Symbolic shape values (issue 21). An exporter computes target shapes at run time from the
// shapes of values: Shape, then Gather / Slice / Concat / Unsqueeze / arithmetic, into Reshape,
// Expand, ConstantOfShape, Slice bounds, Range. With a dim compiled for a range these small
// integer tensors have no one value: the importer keeps their planning-point data as a weight
// (what ONNX's own inference and the folding see) and, beside it, each element as an expression
// in the dims (ImportEnv::symValues). The ops consuming a shape read the expressions; anything
// that reads such a value as data is refused, so no planning value is baked into the model.
#pragma once

#include "ir/graph.h"
#include "support/sym_expr.h"

#include <optional>
#include <string>
#include <vector>

namespace aicf {

using SymElems = std::vector<SymExpr>;

// The elements of each result of `n` (a node whose operands are all weights, folded at import)
// as expressions. operandSyms[k]: operand k's expressions when it is a symbolic shape value, or
// null (its data is read). Each result is exact for every value of the dims in `dims`: an
// integer division must be exact, a comparison, min / max or sign must come out the same over
// the whole ranges, and floating-point values are refused. Throws UserError with a message
// naming what cannot be expressed.
std::vector<SymElems> evalSymbolic(const Node &n, const std::vector<const SymElems *> &operandSyms,
                                   const std::vector<DimRange> &dims);

// a / b for every valuation, when b is one term (c * product of symbols) that divides each term
// of a: how a reshape's -1 is the element count over the other dims. nullopt otherwise.
std::optional<SymExpr> divExactSym(const SymExpr &a, const SymExpr &b);

// "[batch,seq,128]"
std::string symElemsStr(const SymElems &e);

} // namespace aicf
