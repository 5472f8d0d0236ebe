// Helpers shared by the pattern-detection passes: reading constants, walking producer chains,
// flattening multiplication trees, and the legality condition every match must pass
// ("intermediates are consumed only inside the match"), with evidence naming the culprit.
#pragma once

#include "ir/graph.h"
#include "ir/properties.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace aicf {

// The value of a constant whose elements are all equal (a scalar, or a splat); else nullopt.
std::optional<double> splatValue(const Value *v);
// True when v is a constant splat within `relTol` of `want` (relative, absolute near zero).
bool isSplatNear(const Value *v, double want, double relTol = 1e-3);

// The defining node of v if it is `op`, else null.
Node *producer(const Value *v, Op op);

// For a commutative binary node (add, mul): the operand that is not `known`, or null if neither
// operand is `known`.
Value *otherOperand(const Node *n, const Value *known);

// Flattens a tree of `mul` nodes rooted at v into its factors; interior mul nodes go to `muls`.
// Only nodes whose result is used once (by the tree) are opened, so shared products stay whole.
std::vector<Value *> mulFactors(const Graph &g, Value *v, std::vector<Node *> &muls);

// Splits factors into constants-splats (multiplied together into `scale`) and the rest.
std::vector<Value *> splitConstFactors(const std::vector<Value *> &factors, double &scale);

// The legality condition "intermediates are consumed only inside the match": every result of
// the matched nodes except `root` is used only by matched nodes and is not a graph output.
Condition internalOnly(const Graph &g, const std::vector<Node *> &matched, const Value *root);

// A short name for a value in evidence strings: "x", "the result of /ln_1/Sub", "a constant".
std::string describe(const Value *v);

// All ONNX origins of the matched nodes in graph order (for the explain record).
std::vector<std::string> originsOf(const Graph &g, const std::vector<Node *> &matched);
Location fusedLocation(const Graph &g, const std::vector<Node *> &matched);

// The axes reduced by a reduce_* node, normalised against its input rank (empty axes: all).
std::vector<int64_t> reducedAxes(const Node *reduce);
// True when `axes` are exactly [first, rank) for some first (trailing and contiguous).
bool trailingContiguous(const std::vector<int64_t> &axes, int64_t rank);

// Removes the nodes of a match that have become dead after the root was replaced (in reverse
// order, so chains go); nodes still used elsewhere stay.
void eraseDead(Graph &g, std::vector<Node *> matched);

struct PassContext;

// The common tail of every pattern rewrite. `cert` holds the pattern's own legality conditions;
// the "intermediates consumed only inside the match" condition is added first. If every
// condition holds, `build` creates the replacement (its nodes inserted before `root`'s producer,
// which is passed in) and the matched nodes that became dead are erased. Either way the attempt
// is recorded in ctx.explain (as `resultLabel`, default: the new producer's op name). Returns
// whether the rewrite was applied.
bool applyIfLegal(Graph &g, PassContext &ctx, const char *pass, const std::string &pattern,
                  const std::vector<Node *> &matched, Value *root, Certificate cert,
                  const std::function<Value *(Node *insertBefore, const Location &loc)> &build,
                  const std::string &resultLabel = "");

} // namespace aicf
