// The Graph IR ("MCIR", docs/architecture.md): SSA values, nodes and graphs.
//
// A Graph owns its Values and Nodes. Nodes are kept in a list that is always a valid execution
// order once a pass finishes (the verifier checks it). Values are graph inputs, weights
// (constants with data) or node results. Each value keeps its uses (one entry per operand slot),
// kept up to date by every operand change (addNode, setOperand(s), replaceAllUsesWith,
// eraseNode), so hasUses / users / rewrites cost the uses, not the graph: compile time stays
// near-linear on large models (a rewrite per layer would otherwise rescan every node).
#pragma once

#include "ir/attributes.h"
#include "ir/op_registry.h"
#include "ir/properties.h"
#include "ir/types.h"

#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

namespace aicf {

class Node;
class Graph;

// Where a node came from: the ONNX node names it was made of (merged nodes keep all of them).
struct Location {
  std::vector<std::string> origins;

  Location() = default;
  explicit Location(std::string origin) { origins.push_back(std::move(origin)); }
  bool empty() const { return origins.empty(); }
  std::string str() const; // "/attn/MatMul_1" or "fused[/a, /b]"; "" when empty
  static Location fuse(const std::vector<const Location *> &locs); // union, first-seen order
  bool operator==(const Location &o) const { return origins == o.origins; }
};

// A position in a text file, for diagnostics on parsed IR (line 0: not from text).
struct SourcePos {
  std::string file;
  int line = 0;
  int col = 0;
  std::string str() const; // "file:line:col"
};

enum class ValueKind : uint8_t { Input, Weight, Result };

class Value {
public:
  int id() const { return id_; } // unique in the graph, in creation order
  const std::string &name() const { return name_; }
  void setName(std::string n) { name_ = std::move(n); }

  // A structurally identical copy: same inputs, weights (sharing their data), nodes with their
  // attributes, locations and properties, value names and outputs.
  std::unique_ptr<Graph> clone() const;
  const TensorType &type() const { return type_; }
  void setType(TensorType t) { type_ = std::move(t); }
  ValueKind kind() const { return kind_; }
  bool isWeight() const { return kind_ == ValueKind::Weight; }
  bool isInput() const { return kind_ == ValueKind::Input; }
  Node *def() const { return def_; } // defining node of a result, else null
  int resultIndex() const { return resultIndex_; }
  // Weights only. A weight read from IR text whose data the printer elided (`= elided`, over
  // 16 elements) has none: data() then throws a UserError (exit 2) naming the weight, so
  // nothing computes with made-up values; code that can do without the values (pattern
  // matchers, CSE) asks hasData() first and treats the weight as unknown.
  const TensorPtr &data() const {
    if (elided_)
      throwDataElided();
    return data_;
  }
  bool hasData() const { return !elided_ && data_ != nullptr; }
  bool dataElided() const { return elided_; }
  void setData(TensorPtr d) {
    data_ = std::move(d);
    elided_ = false;
  }
  Location loc; // for weights and inputs: the ONNX name they came from
  SourcePos pos;

private:
  friend class Graph;
  friend class Node;
  std::vector<Node *> uses_; // the nodes reading this value, once per operand slot, any order
  size_t slot_ = 0;          // index in the graph's values_
  int id_ = 0;
  std::string name_;
  TensorType type_;
  ValueKind kind_ = ValueKind::Result;
  Node *def_ = nullptr;
  int resultIndex_ = 0;
  TensorPtr data_;
  bool elided_ = false;
  [[noreturn]] void throwDataElided() const;
};

class Node {
public:
  Op op() const { return op_; }
  const OpInfo &info() const { return opInfo(op_); }
  const char *name() const { return opName(op_); }

  const std::vector<Value *> &operands() const { return operands_; }
  Value *operand(size_t i) const { return operands_.at(i); }
  size_t numOperands() const { return operands_.size(); }
  void setOperand(size_t i, Value *v);
  void setOperands(std::vector<Value *> vs);
  const std::vector<Value *> &results() const { return results_; }
  Value *result(size_t i = 0) const { return results_.at(i); }
  size_t numResults() const { return results_.size(); }

  AttrMap attrs;
  Location loc;
  SourcePos pos;
  PropertySet props;
  std::vector<Certificate> certificates;
  // Op::Loop: the body graph the node owns (its inputs mirror the operands, its outputs are the
  // next condition and carried values; ir/ops.def); cloned with the node. Null for other ops.
  std::shared_ptr<Graph> body;

  // Attribute accessors; missing attributes fall back to the op's schema default.
  int64_t i(std::string_view name) const;
  double f(std::string_view name) const;
  const std::string &s(std::string_view name) const;
  const std::vector<int64_t> &ints(std::string_view name) const;
  const std::vector<double> &floats(std::string_view name) const;
  const std::vector<std::string> &strs(std::string_view name) const;
  bool hasAttr(std::string_view name) const { return attrs.find(std::string(name)) != attrs.end(); }

  // "/attn/MatMul_1" (the location), else "node #<index> (<op>)" for diagnostics.
  std::string where() const;

private:
  friend class Graph;
  void addUses();  // records this node as a user of each operand
  void dropUses(); // removes those records
  Op op_ = Op::Identity;
  int pos_ = -1; // position in the graph's order when the graph's index is valid
  std::vector<Value *> operands_;
  std::vector<Value *> results_;
};

// A reshape of `v` to `target` (symbolic dims allowed): the `shape` attribute at the graph's
// planning point, and `sym_shape` with every dim's expression when any is symbolic.
AttrMap reshapeAttrs(const Graph &g, const std::vector<SymExpr> &target);
// A reshape of `from` to `target` that keeps its dim 0 (a batch): when from's dim 0 is symbolic
// and target[0] is its planning value, the target's dim 0 is that expression; the other dims
// are taken as given (the reshape's inference refuses a count that differs for some batch).
AttrMap reshapeAttrs(const Graph &g, const Value &from, const std::vector<int64_t> &target);
// t's dims as expressions (constants for a static type).
std::vector<SymExpr> symShapeOf(const TensorType &t);

class Graph {
public:
  explicit Graph(std::string name = "main") : name_(std::move(name)) {}
  Graph(const Graph &) = delete;
  Graph &operator=(const Graph &) = delete;

  const std::string &name() const { return name_; }
  void setName(std::string n) { name_ = std::move(n); }

  // The symbolic dims (--dim NAME=MIN..MAX@OPT) the types may use, in the order the plan and
  // the runtime index them; empty for a static graph.
  const std::vector<DimRange> &dims() const { return dims_; }
  void setDims(std::vector<DimRange> d) { dims_ = std::move(d); }
  const DimRange *findDim(std::string_view name) const;
  // The node setting data dim `name` (a SETS_DIM op whose `dim` it is; issue 51), or null for
  // a dim of the inputs (and for a data dim whose node was removed as dead).
  const Node *dataDimSetter(std::string_view name) const;
  // Each symbol at its planning value (opt).
  std::map<std::string, int64_t> planningDims() const;

  // A structurally identical copy: same inputs, weights (sharing their data), nodes with their
  // attributes, locations and properties, value names and outputs.
  std::unique_ptr<Graph> clone() const;

  // --- construction ---
  // Names are made unique in the graph (a suffix _1, _2, ... is added on collision).
  Value *addInput(const std::string &name, TensorType type);
  Value *addWeight(const std::string &name, TensorPtr data);
  // A weight of type `t` whose data is absent (parsed from `= elided`): see Value::data().
  Value *addElidedWeight(const std::string &name, const TensorType &t);
  // Appends a node at the end, or before `before` when given. Result types are given.
  Node *addNode(Op op, std::vector<Value *> operands, std::vector<TensorType> resultTypes,
                AttrMap attrs = {}, Location loc = {}, Node *before = nullptr);
  // Like addNode, but infers the result types from the registry (throws UserError on failure).
  Node *createNode(Op op, std::vector<Value *> operands, AttrMap attrs = {}, Location loc = {},
                   Node *before = nullptr, int numResults = 1);

  void setOutputs(std::vector<Value *> outs) { outputs_ = std::move(outs); }
  void addOutput(Value *v) { outputs_.push_back(v); }
  void setOutput(size_t i, Value *v) { outputs_.at(i) = v; }

  // --- queries ---
  const std::vector<Value *> &inputs() const { return inputs_; }
  const std::vector<Value *> &outputs() const { return outputs_; }
  const std::vector<Value *> &weights() const { return weights_; }
  std::vector<Node *> nodes() const; // in order
  size_t numNodes() const { return nodes_.size(); }
  std::vector<Node *> users(const Value *v) const; // nodes using v, in order, no duplicates
  bool isOutput(const Value *v) const;
  bool hasUses(const Value *v) const; // used by a node or as a graph output
  Value *findValue(std::string_view name) const;

  // --- mutation ---
  // Replaces `from` by `to` in operands and graph outputs. When `from` is a graph output and
  // `to` an unnamed node result, `to` takes over the output's name (outputs keep ONNX names).
  void replaceAllUsesWith(Value *from, Value *to);
  // True when replacing `from` by `to` keeps every graph output's name: false when `from` is an
  // output and `to` is an input, a weight, another output or already named. Rewrites that
  // would lose an output name keep the node instead.
  bool canReplaceKeepingNames(const Value *from, const Value *to) const;
  void renameValue(Value *v, const std::string &name); // keeps names unique
  void eraseNode(Node *n);                             // its results must be unused
  void eraseWeight(Value *w);                          // must be unused
  void eraseInput(Value *in);                          // must be unused
  void moveBefore(Node *n, Node *anchor);
  // Restores a valid execution order after rewrites, keeping the current order where it is
  // already valid (stable). Throws InternalError on a cycle.
  void sortTopologically();
  // Removes nodes whose results are unused (pure ops only) and unused weights; returns count.
  int removeDeadCode();

  // Position in the order; -1 if not in the graph. Positions are indexed on first use after a
  // change to the node list, so queries between mutations are O(1).
  int nodeIndex(const Node *n) const;
  bool hasNode(const Node *n) const { return nodeSet_.count(n) > 0; } // O(1)

private:
  std::string uniqueName(const std::string &want);
  Value *newValue(const std::string &name, TensorType type, ValueKind kind);
  void dropValue(Value *v);

  std::string name_;
  std::vector<DimRange> dims_;
  std::vector<std::unique_ptr<Value>> values_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::unordered_set<const Node *> nodeSet_; // the nodes of nodes_ (hasNode)
  mutable bool posValid_ = false;            // every node's pos_ is its index in nodes_
  std::vector<Value *> inputs_, outputs_, weights_;
  int nextValueId_ = 0;
  std::set<std::string, std::less<>> takenNames_;
};

} // namespace aicf
