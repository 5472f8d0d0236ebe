// The op registry (generated from ir/ops.def): one OpInfo per op.
#pragma once

#include "ir/attributes.h"
#include "ir/types.h"

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace aicf {

enum class Op : uint16_t {
#define OP(id, ...) id,
#include "ir/ops.def"
#undef OP
};

inline constexpr int kNumOps = 0
#define OP(id, ...) +1
#include "ir/ops.def"
#undef OP
    ;

enum OpFlags : uint32_t {
  PURE = 1u << 0,     // no side effects, deterministic: may be recomputed or removed
  EW = 1u << 1,       // elementwise
  BCAST = 1u << 2,    // numpy-style broadcasting of operands
  SEMANTIC = 1u << 3, // aicf semantic op (not an ONNX primitive)
  REDUCE = 1u << 4,   // reduces axes
  CONTRACT = 1u << 5, // contraction (matmul, conv)
  VIEW = 1u << 6,     // reshape-like: same bytes, new type
  // Sets the data dim its `dim` attribute names (issue 51): a result length known only at run
  // time. The last result is the dim's value (an i64 scalar the runtime reads after the step).
  SETS_DIM = 1u << 7,
};

struct AttrSpec {
  const char *name;
  AttrKind kind;
  bool required;
  AttrValue defaultValue; // meaningful when !required
};

class Node;
class InferCtx;
// Computes result types from operand types and attributes; reports problems with ctx.fail().
using InferFn = std::vector<TensorType> (*)(InferCtx &ctx);

struct OpInfo {
  Op op;
  const char *name;
  int minOperands;
  int maxOperands; // -1: variadic
  int numResults;  // -1: given by the node
  uint32_t flags;
  InferFn infer;
  const char *summary;
  std::vector<AttrSpec> attrs;

  bool has(OpFlags f) const { return (flags & f) != 0; }
  const AttrSpec *findAttr(std::string_view n) const;
};

const OpInfo &opInfo(Op op);
const char *opName(Op op);
// An elementwise op evaluated as a range reduction and a polynomial (or a power): exp, log,
// tanh, erf, sigmoid, gelu, silu, pow; far costlier per element than its FLOPs (the cost model).
bool isTranscendental(Op op);
std::optional<Op> opByName(std::string_view name);

// What an inference function sees: operand types, attributes (with schema defaults), and the
// constant data of operands that are weights (null otherwise).
class InferCtx {
public:
  InferCtx(const OpInfo &info, std::span<const TensorType> operands, const AttrMap &attrs,
           int numResults)
      : info_(info), operands_(operands), attrs_(attrs), numResults_(numResults) {}

  const OpInfo &info() const { return info_; }
  size_t numOperands() const { return operands_.size(); }
  const TensorType &operand(size_t i) const { return operands_[i]; }
  int numResults() const { return numResults_; }

  int64_t i(std::string_view name) const;
  double f(std::string_view name) const;
  const std::string &s(std::string_view name) const;
  const std::vector<int64_t> &ints(std::string_view name) const;
  const std::vector<double> &floats(std::string_view name) const;
  const std::vector<std::string> &strs(std::string_view name) const;

  // Throws a UserError whose message is `msg`; the verifier prefixes the node's location.
  [[noreturn]] void fail(const std::string &msg) const;

private:
  const AttrValue &get(std::string_view name, AttrKind kind) const;
  const OpInfo &info_;
  std::span<const TensorType> operands_;
  const AttrMap &attrs_;
  int numResults_;
};

// Thrown by InferCtx::fail; the verifier turns it into a located diagnostic.
struct InferError {
  std::string message;
};

// Looks up an attribute or its schema default; throws InternalError if neither exists or the
// kind differs (the verifier checks attributes against the schema before anyone reads them).
const AttrValue &attrOrDefault(const OpInfo &info, const AttrMap &attrs, std::string_view name,
                               AttrKind kind);

// Checks `attrs` against the op's schema; returns the first problem, or "" when they conform.
std::string checkAttrs(const OpInfo &info, const AttrMap &attrs);

// Broadcast two shapes numpy-style; nullopt if incompatible.
// Why inferred result types are unacceptable, or "": a result over the size limits (ir/types.h),
// or one with a negative dim although every operand is static. Used wherever inference runs
// (Graph::createNode, the parser, the verifier), so an oversized shape fails at its node.
std::string resultTypesProblem(std::span<const TensorType> operands,
                               std::span<const TensorType> results);

std::optional<std::vector<int64_t>> broadcastShapes(const std::vector<int64_t> &a,
                                                    const std::vector<int64_t> &b);

} // namespace aicf
