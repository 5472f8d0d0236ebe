// The ONNX importer's state and steps (internal to frontend/; importOnnx in onnx_importer.h is
// its interface). onnx_importer.cpp runs the steps in order; the dims binding, If, Loop / Scan
// and the sequence ops are in files of their own (named below).
#pragma once

#include "frontend/onnx_importer.h"
#include "frontend/onnx_inference.h"
#include "frontend/onnx_ops.h"
#include "frontend/onnx_tensor.h"
#include "support/diagnostics.h"

#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace aicf::onnx_import {

namespace fs = std::filesystem;
using Shape = std::vector<int64_t>;

class Importer {
public:
  Importer(const std::string &path, const ImportOptions &opts)
      : path_(path), opts_(opts), graph_(std::make_unique<Graph>()),
        env_(*graph_, path, fs::path(path).parent_path().string()) {
    env_.computedBudget = opts.computedConstantBudget;
    env_.dataDimMax = &opts_.dataDimMax;
  }

  // The types of the inputs --const bound (after run()).
  std::map<std::string, TensorType> constTypes() const {
    std::map<std::string, TensorType> out;
    for (const auto &[name, t] : constInputs_)
      out.emplace(name, t->type());
    return out;
  }

  // The steps in order (the list at the top of onnx_importer.cpp).
  std::unique_ptr<Graph> run() {
    load();
    checkOpset();
    checkOps();
    sortNodes();
    collectUses();
    loadInitializers();
    checkWindowAttributes();
    runChecker();
    expandSequenceInputs();
    bindDims();
    inferShapes();
    build();
    return std::move(graph_);
  }

private:
  [[noreturn]] void fail(const std::string &msg) const {
    throw UserError(cat(path_, ": ", msg), 2);
  }
  onnx::GraphProto &g() { return *model_.mutable_graph(); }
  std::string nodeRef(const onnx::NodeProto &n, int index) const {
    return n.name().empty() ? cat("#", index) : cat("'", n.name(), "'");
  }

  // A graph input as the model declares it (step 5 binds its dims).
  struct InputDecl {
    std::string name;
    onnx::ValueInfoProto *proto;
    bool hasShape;
    TensorType type; // declared; kDynamicDim where unknown
  };
  // The most iterations unrollLoop unrolls (onnx_import_loop.cpp).
  static constexpr int64_t kMaxUnroll = 256;

  // Steps 1-7 (onnx_importer.cpp): load, check, sort, infer, build, convert.
  static std::vector<std::string> nodeInputs(const onnx::NodeProto &n);
  void load();
  void checkOpset();
  void checkOps();
  void sortNodes();
  [[noreturn]] void reportCycle(const std::vector<int> &pending,
                                const std::map<std::string, int> &producer);
  void collectUses();
  void loadInitializers();
  void checkWindowAttributes();
  void runChecker();
  void inferShapes();
  void inferShapesAtOtherPoint();
  void build();
  void convertNode(const onnx::NodeProto &n, int index);
  void checkNoEmptyValues(const Graph &graph);
  void crossCheck(const ConvertCtx &ctx, const std::string &out);

  // Step 5, dims (onnx_import_dims.cpp): sequence inputs, --shape / --dim / --const binding.
  void expandSequenceInputs();
  void bindDims();
  // The dims --dim and --shape bind (params), and those compiled for a range.
  struct BoundDims {
    std::map<std::string, int64_t> params;
    std::map<std::string, const DimRange *> ranged;
  };
  void declareInputs();
  BoundDims namedDims();
  void resolveInputs(const BoundDims &b);
  void checkInputSizes();
  void writeBoundShapes(const std::map<std::string, int64_t> &params);
  Tensor constInput(const ConstFlag &f, const InputDecl &d) const;
  void checkDataDimMax() const;

  // If (onnx_import_if.cpp): inlined when the condition is known, else both branches and a select.
  void inlineIf(const onnx::NodeProto &n, int index);
  void runtimeIf(ConvertCtx &ctx, const onnx::NodeProto &n, int index);
  std::vector<Value *> tryBranch(const ConvertCtx &ctx, const onnx::NodeProto &n, int index,
                                 bool then, std::exception_ptr &error);
  std::vector<Value *> failBranch(const ConvertCtx &ctx, const onnx::NodeProto &n, Value *cond,
                                  bool then, std::exception_ptr error,
                                  const std::vector<Value *> &others);
  void warnIf(const std::string &w);
  std::vector<Value *> convertBranch(const ConvertCtx &ctx, const onnx::NodeProto &n, int index,
                                     bool then);
  const onnx::GraphProto &graphAttr(const ConvertCtx &ctx, const onnx::NodeProto &n,
                                    const std::string &name);
  void addBranchWeights(const ConvertCtx &ctx, const onnx::GraphProto &b);

  // Loop and Scan (onnx_import_loop.cpp): unrolled, or a Loop kept at run time.
  static Value *elementAt(ConvertCtx &ctx, Value *x, int64_t i);
  bool unrollLoop(const onnx::NodeProto &n, int index, bool scan9 = false);
  void scan8(ConvertCtx &ctx, const onnx::NodeProto &n, int index);
  void appendScanStacks(ConvertCtx &ctx, const onnx::NodeProto &n, const onnx::GraphProto &body,
                        Graph &g, const std::string &name, int states, int64_t scanBound,
                        const std::vector<Value *> &stackIns, std::vector<Value *> &outs);
  void sliceScanStacks(ConvertCtx &ctx, const onnx::NodeProto &n, Node &node, int states,
                       int scanOut, int64_t scanBound);
  void runtimeLoop(const onnx::NodeProto &n, int index);
  int64_t runtimeScanBound(ConvertCtx &ctx, const onnx::NodeProto &n, int states, int scanOut);
  void loopBodyOutputs(ConvertCtx &ctx, const onnx::NodeProto &n, const onnx::GraphProto &body,
                       Graph &g, const std::string &name, int states,
                       const std::vector<Value *> &operands, std::vector<Value *> &outs);

  // Sequences and optionals (onnx_import_sequence.cpp).
  static bool isSequenceOp(const std::string &op);
  void aliasSequence(const std::string &to, const std::string &from);
  std::vector<Value *> &sequenceInput(const ConvertCtx &ctx, size_t i);
  size_t sequencePosition(ConvertCtx &ctx, size_t i, size_t size, bool end);
  void convertSequenceOp(const onnx::NodeProto &n, int index);
  void sequenceMap(ConvertCtx &ctx, const onnx::NodeProto &n, int index);

  std::string path_;
  const ImportOptions &opts_;
  std::unique_ptr<Graph> graph_;
  ImportEnv env_;
  onnx::ModelProto model_;
  int opset_ = 0;
  bool newerThanLib_ = false;
  bool hasEmptyInput_ = false; // refused later, and kept from ONNX's inference
  std::vector<int> order_;     // sorted position -> the node's index in the file
  std::set<std::string> initializerNames_;
  std::map<std::string, TensorPtr> constInputs_; // --const: input name -> its value
  std::map<std::string, TensorPtr> initializers_;
  std::vector<InputDecl> inputs_;
  std::map<std::string, TensorType> onnxTypes_;
  std::map<std::string, TensorType> onnxTypesAlt_; // at otherPoint_ (inferShapesAtOtherPoint)
  std::map<std::string, int64_t> otherPoint_;
  std::unordered_map<std::string, std::vector<Value *>> seqs_; // sequences by ONNX name
  std::unordered_map<std::string, bool> optional_;             // optionals: present?
  std::map<int, std::string> branchSeqs_; // convertBranch: sequence outputs by position
  std::vector<std::string> *branchWarnings_ = nullptr;        // tryBranch: the branch's warnings
  std::map<std::string, std::vector<std::string>> seqInputs_; // --seq: NAME -> NAME.0 ...
  std::map<std::string, bool> optionalInputs_;                // optional inputs: present?
};

} // namespace aicf::onnx_import
