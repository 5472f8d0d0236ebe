// The ONNX op mapping: one table entry per ONNX op type (onnx_ops.cpp; the converters by family in
// onnx_ops_<family>.cpp), each a converter that turns one NodeProto into registry ops with that
// op's version-specific semantics, and the context a converter works in (ConvertCtx,
// onnx_convert_ctx.cpp): inputs, attributes, compile-time constants, node creation with constant
// folding, and diagnostics naming the node.
#pragma once

#include "frontend/onnx_importer.h"
#include "frontend/onnx_sym_values.h"
#include "ir/graph.h"
#include "ir/instantiate.h"

#include <onnx/onnx_pb.h>

#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace aicf {

// Oldest and newest default-domain opset the importer accepts. Opsets 9..17 are the target;
// the older ones differ in ways the converters handle or refuse (legacy broadcast attributes,
// Reshape-1, Cast-1, BatchNormalization is_test, ...), and the newer ones add ops (Gelu-20,
// RMSNormalization-23, Attention-23) and input forms (Reduce/Pad axes, Split num_outputs) we know.
// 24..28 (what the onnx 1.23 wheel defines) change the ops we convert only by new element types
// (4- and 8-bit floats and integers, which the importer refuses by dtype) and new optional
// attributes and inputs (Attention-24's nonpad_kv_seqlen and Attention-25's windows, written
// out in plain ops; Range-27's stash_type only fixes the accumulation type).
inline constexpr int kMinOpset = 1;
inline constexpr int kMaxOpset = 28;

// What converters share with the importer.
struct ImportEnv {
  ImportEnv(Graph &g, std::string file_, std::string modelDir_)
      : graph(&g), file(std::move(file_)), modelDir(std::move(modelDir_)) {}

  Graph *graph; // where nodes go: the model's graph, or a loop body being converted
  // Inside a loop body kept at run time (onnx_importer.cpp, runtimeLoop): resolves a name the
  // body reads from an enclosing graph (a body input bound to the outer value, or a copy of an
  // outer constant); null at the top level.
  std::function<Value *(const std::string &)> capture;
  std::unordered_map<std::string, Value *> values; // ONNX value name -> IR value
  std::unordered_set<std::string> used;            // names some node or graph output reads
  std::unordered_set<std::string> graphOutputs;    // reserved for the graph's output values
  std::string file;                                // the model path, for diagnostics
  std::string modelDir;                            // for external data in Constant attributes
  // Dims compiled for a range (--dim NAME=MIN..MAX@OPT), and the symbolic shape values
  // (onnx_sym_values.h): weights holding a shape computation's planning-point data, with each
  // element as an expression in the dims. Only values with a non-constant element are listed.
  std::vector<DimRange> dims;
  std::unordered_map<const Value *, SymElems> symValues;
  // Bytes of the constants computed so far (folded nodes, Range, ConstantOfShape, masks ...),
  // charged against computedBudget: the model's own initializers and Constant nodes
  // are not computed and do not count.
  int64_t computedBytes = 0;
  int64_t computedBudget = kComputedConstantBudget; // from ImportOptions
  // Data dims (issue 51): --max bounds, and which of them a dim used (dim name -> the --max
  // key), so an unused --max is reported.
  const std::map<std::string, int64_t> *dataDimMax = nullptr;
  std::map<std::string, std::string> dataDimsBounded;
  std::map<std::string, Value *> dataDimCounts; // dim name -> its count (i64[]), where known
  // A quantized result (QuantizeLinear's, DynamicQuantizeLinear's, a QLinear op's: uint8 / int8
  // ...) -> the same integers as f32 (the saturated value before its cast), so whatever reads
  // the integers back as floats (DequantizeLinear, a QLinear op's input) skips the round trip
  // through the integer type: a QDQ model's activations stay f32 between its float ops.
  std::unordered_map<const Value *, Value *> quantizedAsF32;
  // A DequantizeLinear's f32 result -> its integers less the zero point (f32) and its scale (a
  // scalar, or 1-D along `axis`), so a Conv reading dequantized operands computes on the
  // integers and applies the scales after (onnx_ops_quant.cpp, integerDomainConv).
  struct Dequantized {
    Value *integers = nullptr;
    Value *scale = nullptr;
    int64_t axis = -1; // -1: a scalar scale
    // integers + offset lie in [0, 255] (an 8-bit type less a constant per-tensor zero point:
    // offset = zp - the type's lowest value); -1 when the zero point is not constant.
    int64_t offset = -1;
    double scaleValue = 0; // the scale when it is a one-element constant, else 0
  };
  std::unordered_map<const Value *, Dequantized> dequantized;
  // A QuantizeLinear's result whose input already lay on its grid (onnx_quant_grid.cpp) -> that
  // input, with the scale and zero point: a DequantizeLinear of it with the same ones is the
  // input itself.
  struct OnGrid {
    Value *source = nullptr;
    double scale = 0, zeroPoint = 0;
  };
  std::unordered_map<const Value *, OnGrid> onGrid;
};

// A shape value (symValues) whose expressions use only data dims, computed at run time from
// their counts (i64 products and sums, concatenated and reshaped to w's type): how a length
// known only then is read as data (Shape of a NonZero result gathered into TopK's k, or output).
// Null when an expression uses a dim of the inputs. Nodes go before `before` (null: at the end).
Value *materializeDataShape(ImportEnv &env, const Value *w, const Location &loc,
                            Node *before = nullptr);
// One expression of data dims as an i64[] value computed from their counts; null when it uses
// a dim of the inputs.
Value *materializeDataExpr(ImportEnv &env, const SymExpr &e, const Location &loc,
                           Node *before = nullptr);

class ConvertCtx {
public:
  ConvertCtx(ImportEnv &env, const onnx::NodeProto &node, int index, int opset);

  const onnx::NodeProto &node() const { return node_; }
  const std::string &opType() const { return node_.op_type(); }
  int opset() const { return opset_; }
  Graph &graph() { return *env_.graph; }
  ImportEnv &env() { return env_; }
  const Location &loc() const { return loc_; }

  // "node 'name' (Op)" or "node #3 (Op)" when the node has no name.
  std::string label() const;
  // Throws UserError "FILE: node 'name' (Op): msg" (exit code 2).
  [[noreturn]] void fail(const std::string &msg) const;

  // --- inputs ---
  size_t numInputs() const { return static_cast<size_t>(node_.input_size()); }
  bool hasInput(size_t i) const; // present and not the empty name (an omitted optional input)
  Value *input(size_t i) const;  // fails when absent
  const TensorType &type(size_t i) const { return input(i)->type(); }
  int64_t rank(size_t i) const { return type(i).rank(); }
  const std::string &inputName(size_t i) const;
  // The constant data of input i when it is a weight (an initializer, a Constant, or folded).
  // A symbolic shape value has no one value: null (a converter that can take one asks symInts).
  const Tensor *constInput(size_t i) const;
  // As constInput, but fails with "<what> input 'x' is not a compile-time constant" (or, for a
  // symbolic shape value, that it depends on the symbolic dims).
  const Tensor &requireConst(size_t i, const std::string &what) const;
  std::vector<int64_t> constInts(size_t i, const std::string &what) const;
  std::vector<double> constDoubles(size_t i, const std::string &what) const;
  // The elements of an integer input known at compile time as expressions in the symbolic
  // dims: a symbolic shape value's, or a constant's values.
  SymElems symInts(size_t i, const std::string &what) const;
  // v's elements when it is a symbolic shape value, else null.
  const SymElems *symValue(const Value *v) const;

  // --- outputs ---
  size_t numOutputs() const { return static_cast<size_t>(node_.output_size()); }
  bool outputUsed(size_t i) const; // named and read by a node or a graph output
  void setOutput(size_t i, Value *v);
  bool outputSet(size_t i) const;
  Value *output(size_t i) const; // what setOutput set (null when not set)

  // --- attributes (each checks the attribute's type and fails naming it) ---
  bool hasAttr(std::string_view name) const { return findAttr(name) != nullptr; }
  int64_t attrInt(std::string_view name, int64_t def) const;
  int64_t attrIntReq(std::string_view name) const;
  double attrFloat(std::string_view name, double def) const;
  std::string attrStr(std::string_view name, const std::string &def) const;
  std::vector<int64_t> attrInts(std::string_view name) const; // empty when absent
  std::optional<std::vector<int64_t>> attrIntsOpt(std::string_view name) const;
  std::vector<double> attrFloats(std::string_view name) const;
  std::optional<Tensor> attrTensor(std::string_view name) const;
  // Fails when the attribute is present with a value other than `allowed`.
  void requireAttrDefault(std::string_view name, int64_t allowed, const std::string &why) const;

  // --- building ---
  // Creates a node (types inferred by the registry; errors name this ONNX node). When every
  // operand is a weight and the result is small, the node is evaluated right away and replaced
  // by a weight: this is how shape computations fold.
  Value *emit(Op op, std::vector<Value *> operands, AttrMap attrs = {});
  // A node of an op that sets a data dim (SETS_DIM: a result length known only at run time),
  // `bound` the most the model allows: a new dim named after this node's output `output`, its
  // bound lowered by --max, added to the graph's dims (min 0, planned at the bound). With
  // every operand constant the node is evaluated instead and no dim is made.
  // A new data dim's name for output `output` (its ONNX name as an identifier, made unique
  // among the dims) and that ONNX name; the --max given for it (by either name) and its key.
  std::pair<std::string, std::string> dataDimName(size_t output) const;
  std::optional<std::pair<std::string, int64_t>> dataDimMaxEntry(size_t output) const;
  std::vector<Value *> emitDataDim(Op op, std::vector<Value *> operands, AttrMap attrs,
                                   int numResults, int64_t bound, size_t output = 0);
  // e (an expression of data dims only) as an i64[] value computed at run time from their
  // counts; null when e uses a dim of the inputs.
  Value *dataLength(const SymExpr &e) { return materializeDataExpr(env_, e, loc_); }
  // Whether e uses a data dim.
  bool usesDataDim(const SymExpr &e) const {
    for (const std::string &s : e.symbols())
      if (env_.dataDimCounts.count(s))
        return true;
    return false;
  }
  // Whether a result of this type is small enough to be folded into a weight at import.
  static bool foldable(const TensorType &t);
  std::vector<Value *> emitMulti(Op op, std::vector<Value *> operands, AttrMap attrs,
                                 int numResults);
  Value *constant(Tensor t);      // a computed weight named after this node's output (charged)
  Value *modelConstant(Tensor t); // the same for data the model holds (a Constant node's value)
  // Fails unless `bytes` more of computed constants fit the import's budget (call before
  // computing them).
  void checkComputeBudget(int64_t bytes) const;
  Value *scalar(DType dtype, double v);                 // rank-0 weight
  Value *reshape(Value *v, std::vector<int64_t> shape); // no node when the shape is unchanged
  Value *castTo(Value *v, DType dtype);                 // no node when already that dtype
  // A shape value: `t` holds the planning-point data, `elems` every element as an expression
  // (listed in ImportEnv::symValues when one is not constant).
  Value *symConstant(Tensor t, SymElems elems);
  // A reshape to dims given as expressions (sym_shape when one is symbolic); no node when the
  // shape is unchanged.
  Value *reshapeSym(Value *v, const SymElems &shape);
  // `e`'s value at the planning point, and its bounds over the dims' ranges (failing, naming
  // `what`, when they overflow).
  int64_t planning(const SymExpr &e) const;
  SymBounds bounds(const SymExpr &e, const std::string &what) const;
  // " (seq in 1..64)": the ranges of e's symbols, for messages.
  std::string rangesOf(const SymExpr &e) const;
  // Whether a <= b for every value of the dims (false when the bounds cannot show it).
  bool provablyLe(const SymExpr &a, const SymExpr &b) const;

private:
  const onnx::AttributeProto *findAttr(std::string_view name) const;
  const onnx::AttributeProto &attrOfType(std::string_view name, int type) const;
  Value *fold(Node *n, size_t result);
  std::string weightName() const;
  std::map<std::string, int64_t> planningDims() const;
  std::string describeSym(const Value *v, const SymElems &e) const;

  ImportEnv &env_;
  const onnx::NodeProto &node_;
  int index_;
  int opset_;
  Location loc_;
  std::vector<Value *> outputs_;
};

using Converter = void (*)(ConvertCtx &ctx);

// A node that only moves values (Reshape, Transpose, Slice, Concat, MaxPool, ...) whose data
// inputs are dequantized onto one grid is converted on their integers, its results scaled after
// and recorded as dequantized (onnx_quant_grid.cpp): made before the node's converter runs
// (rebinding the inputs when it applies), `finish` after it; the destructor restores the inputs.
class QuantGridScope {
public:
  explicit QuantGridScope(ConvertCtx &c);
  ~QuantGridScope();
  QuantGridScope(const QuantGridScope &) = delete;
  QuantGridScope &operator=(const QuantGridScope &) = delete;
  void finish(ConvertCtx &c);

private:
  ImportEnv &env_;
  ImportEnv::Dequantized grid_;
  std::map<std::string, Value *> rebound_; // input name -> its value before the scope
};

struct OnnxOpEntry {
  const char *opType;
  int sinceOpset; // the first opset this op exists in (as far as we convert it)
  Converter convert;
};

// The whole table, in alphabetical order of op type.
std::span<const OnnxOpEntry> onnxOpTable();
// The entry for a default-domain op type, or null when we do not support it.
const OnnxOpEntry *findOnnxOp(std::string_view opType);

// Normalises an axis against a rank (fails through ctx when out of range).
int64_t normAxis(const ConvertCtx &ctx, int64_t axis, int64_t rank, const char *what = "axis");

} // namespace aicf
