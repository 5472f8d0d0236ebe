// ONNX -> Graph IR importer (see onnx_importer.h). The steps, in order:
//   1. read and parse the ModelProto ("cannot open" is exit code 1, everything else 2);
//   2. structural checks with precise messages: opset range, unknown domains and unsupported
//      ops (all listed at once), undefined values, cycles (nodes are sorted topologically);
//   3. initializers -> constant tensors (external data checked to stay in the model's folder);
//   4. window attributes checked (libonnx's inference divides by strides unchecked), then
//      onnx::checker (skipped for models newer than libonnx knows: IR > 8 or opset > 17);
//   5. binding dynamic dims (--shape / --dim; sizes within the limits of ir/types.h, no empty
//      tensors; a ranged dim at its planning value), then ONNX shape inference on the bound
//      model (with ranged dims, also at a second point of the ranges), in a child process
//      (onnx_inference.h), as a cross-check of our own shape rules;
//   6. one converter per node (onnx_ops.cpp), folding constant subgraphs as they appear;
//   7. outputs keep their ONNX names, dead code goes, and the graph is verified.
// Any problem is a UserError naming the file and, where there is one, the node.
#include "frontend/onnx_importer.h"

#include "frontend/onnx_inference.h"
#include "frontend/onnx_ops.h"
#include "frontend/onnx_tensor.h"
#include "ir/npy.h"
#include "ir/verifier.h"
#include "support/checked_math.h"
#include "support/diagnostics.h"

#include <onnx/checker.h>
#include <onnx/defs/schema.h>

#include <google/protobuf/io/coded_stream.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>

namespace fs = std::filesystem;

namespace aicf {

using Shape = std::vector<int64_t>;

namespace {

// ONNX's own validation and inference know opsets up to this (libonnx 1.12).
constexpr int kOnnxLibMaxOpset = 17;

bool isDefaultDomain(const std::string &d) {
  return d.empty() || d == "ai.onnx";
}

std::string oneLine(const std::string &s) {
  std::string out;
  bool space = false;
  for (char ch : s) {
    if (ch == '\n' || ch == '\r' || ch == '\t' || ch == ' ') {
      space = !out.empty();
      continue;
    }
    if (space)
      out += ' ';
    space = false;
    out += ch;
  }
  return out;
}

std::string shapeFlag(const std::vector<int64_t> &shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "x" : "") + (shape[i] < 0 ? std::string("N") : std::to_string(shape[i]));
  return s;
}

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

  // A node's inputs and, for If (or any node with graph attributes), the outer values its
  // subgraphs read: names used there and defined by none of their nodes, initializers or
  // inputs (ONNX's implicit inputs), which order the node after their producers.
  static std::vector<std::string> nodeInputs(const onnx::NodeProto &n) {
    std::vector<std::string> out(n.input().begin(), n.input().end());
    std::function<void(const onnx::GraphProto &, std::set<std::string>)> walk =
        [&](const onnx::GraphProto &b, std::set<std::string> defined) {
          for (const auto &t : b.initializer())
            defined.insert(t.name());
          for (const auto &v : b.input())
            defined.insert(v.name());
          for (const onnx::NodeProto &m : b.node()) {
            for (const std::string &in : m.input())
              if (!in.empty() && !defined.count(in))
                out.push_back(in);
            for (const auto &a : m.attribute())
              if (a.type() == onnx::AttributeProto::GRAPH)
                walk(a.g(), defined);
            for (const std::string &o : m.output())
              defined.insert(o);
          }
          for (const auto &o : b.output())
            if (!defined.count(o.name()))
              out.push_back(o.name());
        };
    for (const auto &a : n.attribute())
      if (a.type() == onnx::AttributeProto::GRAPH)
        walk(a.g(), {});
    return out;
  }

  // ---- 1. load ----------------------------------------------------------------------------------

  void load() {
    std::ifstream f(path_, std::ios::binary);
    std::error_code ec;
    if (!f || fs::is_directory(path_, ec))
      throw UserError(cat("cannot open ", path_), 1);
    f.seekg(0, std::ios::end);
    std::string bytes(static_cast<size_t>(std::max<std::streamoff>(0, f.tellg())), '\0');
    f.seekg(0);
    if (!f.read(bytes.data(), static_cast<std::streamsize>(bytes.size())))
      throw UserError(cat("cannot open ", path_), 1);
    if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()))
      fail("the model file is larger than 2 GiB, the protobuf limit (store the weights as "
           "external data)");
    google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t *>(bytes.data()),
                                              static_cast<int>(bytes.size()));
    in.SetTotalBytesLimit(std::numeric_limits<int>::max());
    if (!model_.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage())
      fail("not an ONNX model (the file does not parse as a ModelProto; truncated or not "
           "protobuf?)");
    if (!model_.has_graph() || model_.graph().node_size() + model_.graph().output_size() == 0)
      fail("not an ONNX model (it has no graph)");
  }

  // ---- 2. structure -----------------------------------------------------------------------------

  void checkOpset() {
    opset_ = -1;
    for (const auto &imp : model_.opset_import())
      if (isDefaultDomain(imp.domain()))
        opset_ = static_cast<int>(imp.version());
    if (opset_ < 0) {
      checkOps(); // a model of another domain only (training ops): its ops say more
      fail("the model imports no opset of the default ONNX domain");
    }
    if (opset_ < kMinOpset || opset_ > kMaxOpset)
      fail(cat("opset ", opset_, " is not supported (supported: ", kMinOpset, " to ", kMaxOpset,
               ")"));
    newerThanLib_ = opset_ > kOnnxLibMaxOpset || model_.ir_version() > onnx::IR_VERSION;
  }

  // Unknown domains and unsupported ops, each listed in full: "3 unsupported ops: NonMaxSuppression
  // (1: 'nms_0'), TopK (2: 'topk_1', 'topk_2')".
  void checkOps() {
    std::map<std::string, std::vector<std::string>> domains, unsupported;
    int numDomain = 0, numUnsupported = 0;
    // The nodes of If's branches count as their own (listed by the top-level node's index).
    std::function<void(const onnx::NodeProto &, int)> check = [&](const onnx::NodeProto &n, int i) {
      if (!isDefaultDomain(n.domain())) {
        domains[n.domain() + "::" + n.op_type()].push_back(nodeRef(n, i));
        ++numDomain;
      } else if (n.op_type() == "If" || n.op_type() == "Loop" || n.op_type() == "Scan" ||
                 n.op_type() == "SequenceMap") {
        for (const auto &a : n.attribute())
          if (a.type() == onnx::AttributeProto::GRAPH)
            for (const onnx::NodeProto &m : a.g().node())
              check(m, i);
      } else if (!findOnnxOp(n.op_type()) && !isSequenceOp(n.op_type())) {
        unsupported[n.op_type()].push_back(nodeRef(n, i));
        ++numUnsupported;
      }
    };
    for (int i = 0; i < g().node_size(); ++i)
      check(g().node(i), i);
    auto list = [](const std::map<std::string, std::vector<std::string>> &m) {
      std::string s;
      for (const auto &[op, nodes] : m) {
        s += cat(s.empty() ? "" : ", ", op, " (", nodes.size(), ": ");
        for (size_t k = 0; k < nodes.size() && k < 8; ++k)
          s += (k ? ", " : "") + nodes[k];
        s += nodes.size() > 8 ? ", ...)" : ")";
      }
      return s;
    };
    if (numDomain)
      fail(cat(
          numDomain, numDomain == 1 ? " op is" : " ops are",
          " in an unknown domain (only the default ONNX domain is supported): ", list(domains)));
    if (numUnsupported)
      fail(cat(numUnsupported, " unsupported op", numUnsupported == 1 ? "" : "s", ": ",
               list(unsupported)));
  }

  // Every node input must be defined; nodes are put in a topological order (stable: the file's
  // order where it is already valid), and a cycle is reported with the nodes on it.
  void sortNodes() {
    std::set<std::string> available;
    for (const auto &t : g().initializer())
      available.insert(t.name());
    for (const auto &v : g().input())
      available.insert(v.name());
    const int n = g().node_size();
    std::map<std::string, int> producer;
    for (int i = 0; i < n; ++i)
      for (const std::string &o : g().node(i).output()) {
        if (o.empty())
          continue;
        if (available.count(o) || producer.count(o))
          fail(cat("value '", o, "' is defined more than once (again by node ",
                   nodeRef(g().node(i), i), ")"));
        producer[o] = i;
      }
    std::set<std::string> sparse;
    for (const auto &t : g().sparse_initializer())
      sparse.insert(t.values().name());
    for (int i = 0; i < n; ++i)
      for (const std::string &in : g().node(i).input())
        if (sparse.count(in) && !available.count(in))
          fail(cat("node ", nodeRef(g().node(i), i), " (", g().node(i).op_type(), "): input '", in,
                   "' is a sparse initializer, which is not supported"));
    for (int i = 0; i < n; ++i)
      for (const std::string &in : nodeInputs(g().node(i)))
        if (!in.empty() && !available.count(in) && !producer.count(in))
          fail(cat("node ", nodeRef(g().node(i), i), " (", g().node(i).op_type(), "): input '", in,
                   "' is not a graph input, initializer or node output"));
    for (const auto &o : g().output())
      if (!available.count(o.name()) && !producer.count(o.name()))
        fail(cat("graph output '", o.name(), "' is not a graph input, initializer or node output"));

    std::vector<int> pending(static_cast<size_t>(n), 0);
    std::vector<std::vector<int>> users(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      std::set<int> deps;
      for (const std::string &in : nodeInputs(g().node(i))) {
        auto it = producer.find(in);
        if (!in.empty() && it != producer.end() && !available.count(in))
          deps.insert(it->second);
      }
      pending[i] = static_cast<int>(deps.size());
      for (int d : deps)
        users[d].push_back(i);
    }
    std::set<int> ready;
    for (int i = 0; i < n; ++i)
      if (pending[i] == 0)
        ready.insert(i);
    order_.clear();
    while (!ready.empty()) {
      int i = *ready.begin();
      ready.erase(ready.begin());
      order_.push_back(i);
      for (int u : users[i])
        if (--pending[u] == 0)
          ready.insert(u);
    }
    if (static_cast<int>(order_.size()) != n)
      reportCycle(pending, producer);
    // Rewrite the proto in that order (the checker and shape inference need it sorted).
    google::protobuf::RepeatedPtrField<onnx::NodeProto> sorted;
    for (int i : order_)
      sorted.Add()->Swap(g().mutable_node(i));
    g().mutable_node()->Swap(&sorted);
  }

  [[noreturn]] void reportCycle(const std::vector<int> &pending,
                                const std::map<std::string, int> &producer) {
    // Walk back from a stuck node along stuck producers until a node repeats.
    int start = 0;
    while (pending[start] == 0)
      ++start;
    std::vector<int> path;
    std::vector<int> seenAt(pending.size(), -1);
    int cur = start;
    while (seenAt[cur] < 0) {
      seenAt[cur] = static_cast<int>(path.size());
      path.push_back(cur);
      int next = -1;
      for (const std::string &in : g().node(cur).input()) {
        auto it = producer.find(in);
        if (!in.empty() && it != producer.end() && pending[it->second] > 0) {
          next = it->second;
          break;
        }
      }
      AICF_CHECK(next >= 0, "stuck node without a stuck producer");
      cur = next;
    }
    // In data-flow order (producer first), starting at the node that comes first in the file.
    std::vector<int> cycle(path.begin() + seenAt[cur], path.end());
    std::reverse(cycle.begin(), cycle.end());
    std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
    std::string s;
    for (int i : cycle)
      s += nodeRef(g().node(i), i) + " -> ";
    s += nodeRef(g().node(cycle[0]), cycle[0]);
    fail(cat("the graph has a cycle: ", s));
  }

  void collectUses() {
    for (const auto &n : g().node())
      for (const std::string &in : nodeInputs(n))
        if (!in.empty())
          env_.used.insert(in);
    // Inside If's branches: what their nodes read and what the branches return.
    std::function<void(const onnx::NodeProto &)> branches = [&](const onnx::NodeProto &n) {
      for (const auto &a : n.attribute())
        if (a.type() == onnx::AttributeProto::GRAPH) {
          for (const onnx::NodeProto &m : a.g().node()) {
            for (const std::string &in : m.input())
              if (!in.empty())
                env_.used.insert(in);
            branches(m);
          }
          for (const auto &o : a.g().output())
            env_.used.insert(o.name());
        }
    };
    for (const auto &n : g().node())
      branches(n);
    for (const auto &o : g().output()) {
      env_.used.insert(o.name());
      env_.graphOutputs.insert(o.name());
    }
  }

  // ---- 3. initializers
  // ----------------------------------------------------------------------------

  void loadInitializers() {
    for (onnx::TensorProto &t : *g().mutable_initializer()) {
      initializerNames_.insert(t.name());
      if (!env_.used.count(t.name()))
        continue;
      try {
        initializers_[t.name()] = std::make_shared<const Tensor>(tensorFromOnnx(t, env_.modelDir));
      } catch (const UserError &e) {
        fail(cat("initializer '", t.name(), "' ", e.what()));
      }
    }
    // Constant nodes may hold external data too: check it now, before the checker reads paths.
    for (int i = 0; i < g().node_size(); ++i)
      for (const auto &a : g().node(i).attribute())
        if (a.type() == onnx::AttributeProto::TENSOR && hasExternalData(a.t()))
          try {
            tensorFromOnnx(a.t(), env_.modelDir);
          } catch (const UserError &e) {
            fail(cat("node ", nodeRef(g().node(i), order_[i]), " (", g().node(i).op_type(),
                     "): attribute '", a.name(), "' ", e.what()));
          }
  }

  // ---- 4. window attributes, checker
  // --------------------------------------------------------------

  // libonnx 1.12's convPoolShapeInference divides by each stride without checking it (a zero
  // stride is SIGFPE) and trusts the lengths of kernel_shape, strides, dilations and pads. Check
  // them for every op that uses it (and ConvTranspose's inference) before libonnx sees them.
  void checkWindowAttributes() {
    static const std::set<std::string> windowOps = {"Conv", "ConvTranspose", "MaxPool",
                                                    "AveragePool", "LpPool"};
    for (int i = 0; i < g().node_size(); ++i) {
      const onnx::NodeProto &n = g().node(i);
      if (!isDefaultDomain(n.domain()) || !windowOps.count(n.op_type()))
        continue;
      auto bad = [&](const std::string &msg) {
        fail(cat("node ", nodeRef(n, order_[i]), " (", n.op_type(), "): ", msg));
      };
      std::map<std::string, std::vector<int64_t>> ints;
      for (const auto &a : n.attribute()) {
        if (a.type() == onnx::AttributeProto::INTS)
          ints[a.name()].assign(a.ints().begin(), a.ints().end());
        else if (a.type() == onnx::AttributeProto::INT && a.name() == "group" && a.i() < 1)
          bad(cat("attribute 'group' is ", a.i(), ", it must be >= 1"));
      }
      // Spatial rank: kernel_shape's length, else the first of the others present.
      size_t spatial = 0;
      const char *from = nullptr;
      for (const char *name : {"kernel_shape", "strides", "dilations"})
        if (!from && ints.count(name)) {
          spatial = ints[name].size();
          from = name;
        }
      if (!from && ints.count("pads")) {
        spatial = ints["pads"].size() / 2;
        from = "pads";
      }
      auto check = [&](const char *name, size_t count, int64_t min) {
        auto it = ints.find(name);
        if (it == ints.end())
          return;
        if (it->second.size() != count)
          bad(cat("attribute '", name, "' has ", it->second.size(), " values, ", from, " implies ",
                  count));
        for (int64_t v : it->second)
          if (v < min)
            bad(cat("attribute '", name, "' is ", shapeStr(it->second),
                    ": each value must be >= ", min));
      };
      check("kernel_shape", spatial, 1);
      check("strides", spatial, 1);
      check("dilations", spatial, 1);
      check("pads", 2 * spatial, 0);
      check("output_padding", spatial, 0);
    }
  }

  void runChecker() {
    if (newerThanLib_)
      return; // libonnx 1.12 rejects what it does not know; our own checks above still ran
    // The checker looks for external files relative to the working directory: give it the
    // absolute paths (already validated) for the duration of the check.
    std::vector<std::pair<onnx::StringStringEntryProto *, std::string>> restore;
    auto absolutise = [&](onnx::TensorProto &t) {
      if (!hasExternalData(t))
        return;
      for (auto &e : *t.mutable_external_data())
        if (e.key() == "location") {
          restore.emplace_back(&e, e.value());
          e.set_value(resolveExternalLocation(e.value(), env_.modelDir));
        }
    };
    for (auto &t : *g().mutable_initializer())
      absolutise(t);
    for (auto &n : *g().mutable_node())
      for (auto &a : *n.mutable_attribute())
        if (a.has_t())
          absolutise(*a.mutable_t());
    std::string problem;
    try {
      onnx::checker::check_model(model_);
    } catch (const std::exception &e) {
      problem = oneLine(e.what());
    }
    for (auto &[entry, value] : restore)
      entry->set_value(value);
    if (!problem.empty())
      fail(cat("the ONNX checker rejects the model: ", problem));
  }

  // ---- 5. dims
  // ------------------------------------------------------------------------------------

  struct InputDecl {
    std::string name;
    onnx::ValueInfoProto *proto;
    bool hasShape;
    TensorType type; // declared; kDynamicDim where unknown
  };

  // Sequence inputs (--seq NAME=COUNT) become the tensor inputs NAME.0 ... of the sequence's
  // element type (and shape, when it gives one: else --shape NAME.K=...); build() gathers them
  // into the sequence NAME. An optional input is refused.
  void expandSequenceInputs() {
    auto &ins = *g().mutable_input();
    std::set<std::string> names;
    for (int i = 0; i < ins.size(); ++i) {
      onnx::ValueInfoProto v = ins.Get(i);
      names.insert(v.name());
      if (v.type().has_optional_type()) { // present: its element's type; or absent
        optionalInputs_[v.name()] = !opts_.absentInputs.count(v.name());
        if (opts_.absentInputs.count(v.name())) {
          ins.DeleteSubrange(i, 1);
          --i;
          continue;
        }
        onnx::TypeProto elem = v.type().optional_type().elem_type();
        *ins.Mutable(i)->mutable_type() = elem;
        *v.mutable_type() = elem;
      }
      if (!v.type().has_sequence_type())
        continue;
      auto it = opts_.sequenceLengths.find(v.name());
      if (it == opts_.sequenceLengths.end())
        fail(cat("input '", v.name(), "' is a sequence: give its length with --seq ", v.name(),
                 "=COUNT (its elements become the inputs ", v.name(), ".0 ...)"));
      if (!v.type().sequence_type().elem_type().has_tensor_type())
        fail(cat("input '", v.name(), "' is a sequence of non-tensors"));
      std::vector<onnx::ValueInfoProto> elems;
      for (int64_t k = 0; k < it->second; ++k) {
        onnx::ValueInfoProto e;
        e.set_name(cat(v.name(), ".", k));
        *e.mutable_type() = v.type().sequence_type().elem_type();
        // Elements may differ in shape: a named dim of the element type is each one's own.
        if (e.type().tensor_type().has_shape())
          for (auto &dim : *e.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim())
            if (dim.has_dim_param())
              dim.clear_dim_param();
        elems.push_back(e);
        seqInputs_[v.name()].push_back(e.name());
      }
      seqInputs_[v.name()]; // a sequence of 0 inputs is still one
      ins.DeleteSubrange(i, 1);
      for (size_t k = 0; k < elems.size(); ++k)
        *ins.Add() = elems[k];
      // (appended at the end: re-visit position i)
      --i;
      names.erase(v.name());
    }
    for (const auto &[name, count] : opts_.sequenceLengths)
      if (!seqInputs_.count(name))
        fail(cat("--seq ", name, "=", count, ": the model has no sequence input '", name, "'"));
    for (const std::string &name : opts_.absentInputs)
      if (!optionalInputs_.count(name))
        fail(cat("--absent ", name, ": the model has no optional input '", name, "'"));
  }

  void bindDims() {
    std::set<std::string> inputNames;
    for (onnx::ValueInfoProto &v : *g().mutable_input()) {
      if (initializerNames_.count(v.name()))
        continue; // an initializer listed as input (IR < 4): a constant
      inputNames.insert(v.name());
      InputDecl d{v.name(), &v, v.type().tensor_type().has_shape(), {}};
      try {
        d.type = typeFromOnnx(v.type());
      } catch (const UserError &e) {
        fail(cat("input '", v.name(), "' ", e.what()));
      }
      if (auto c = opts_.constInputs.find(v.name()); c != opts_.constInputs.end()) {
        // Bound at compile time (--const): a constant from here on; the proto input gets the
        // value's shape for ONNX's inference.
        if (opts_.inputShapes.count(v.name()))
          fail(cat("--shape ", v.name(), " and --const ", c->second.text, " both bind input '",
                   v.name(), "' (give one)"));
        auto t = std::make_shared<const Tensor>(constInput(c->second, d));
        auto *shape = v.mutable_type()->mutable_tensor_type()->mutable_shape();
        shape->clear_dim();
        for (int64_t dim : t->shape())
          shape->add_dim()->set_dim_value(dim);
        constInputs_[v.name()] = t;
        continue;
      }
      inputs_.push_back(std::move(d));
    }
    for (const auto &[name, f] : opts_.constInputs)
      if (!inputNames.count(name)) {
        std::string names;
        for (const std::string &n : inputNames)
          names += (names.empty() ? "" : ", ") + n;
        fail(cat("--const ", f.text, ": the model has no input '", name, "'",
                 initializerNames_.count(name)
                     ? " (it is an initializer, already constant)"
                     : cat(" (inputs: ", names.empty() ? "none" : names, ")")));
      }
    for (const auto &o : g().output())
      if (o.has_type() && o.type().has_tensor_type())
        try {
          typeFromOnnx(o.type());
        } catch (const UserError &e) {
          fail(cat("output '", o.name(), "' ", e.what()));
        }

    // Named dims: --dim first, then what --shape implies for the inputs it binds. A dim
    // compiled for a range is bound to its planning value here (ONNX's inference and the
    // folding of shape computations see that), and stays a symbol in the inputs' types.
    std::map<std::string, int64_t> dimFlags = opts_.dimParams;
    std::map<std::string, const DimRange *> ranged;
    for (const DimRange &r : opts_.dimRanges) {
      dimFlags[r.name] = r.opt;
      ranged[r.name] = &r;
    }
    std::map<std::string, int64_t> params = dimFlags;
    std::map<std::string, std::string> paramSource;
    std::set<std::string> known;
    for (const InputDecl &d : inputs_)
      for (const std::string &n : d.type.dimNames)
        if (!n.empty())
          known.insert(n);
    for (const auto &[p, v] : dimFlags) {
      std::string flag = ranged.count(p) ? cat("--dim ", p, "=", ranged[p]->min, "..",
                                               ranged[p]->max, "@", ranged[p]->opt)
                                         : cat("--dim ", p, "=", v);
      if (!known.count(p)) {
        std::string names;
        for (const std::string &k : known)
          names += (names.empty() ? "" : ", ") + k;
        fail(cat(flag, ": no input dim is named '", p,
                 "' (named dims: ", names.empty() ? "none" : names, ")"));
      }
      paramSource[p] = flag;
    }
    for (const auto &[name, shape] : opts_.inputShapes) {
      auto it = std::find_if(inputs_.begin(), inputs_.end(),
                             // (clang 14 cannot capture a structured binding; an init-capture can)
                             [&n = name](const InputDecl &d) { return d.name == n; });
      if (it == inputs_.end()) {
        std::string names;
        for (const InputDecl &d : inputs_)
          names += (names.empty() ? "" : ", ") + d.name;
        fail(cat("--shape ", name, "=", shapeFlag(shape), ": the model has no input '", name,
                 "' (inputs: ", names.empty() ? "none" : names, ")"));
      }
      const TensorType &t = it->type;
      std::string flag = cat("--shape ", name, "=", shapeFlag(shape));
      if (it->hasShape && t.rank() != static_cast<int64_t>(shape.size()))
        fail(cat(flag, ": input '", name, "' has rank ", t.rank(), " (", t.str(), ")"));
      if (!it->hasShape)
        continue;
      for (size_t k = 0; k < shape.size(); ++k) {
        if (t.shape[k] >= 0 && t.shape[k] != shape[k])
          fail(cat(flag, ": dim ", k, " of input '", name, "' is ", t.shape[k], " in the model"));
        std::string p = t.dimName(k);
        if (p.empty())
          continue;
        if (ranged.count(p))
          fail(cat(flag, " binds dim '", p, "', which ", paramSource[p],
                   " compiles for a range (give one)"));
        auto bound = params.find(p);
        if (bound != params.end() && bound->second != shape[k])
          fail(cat(flag, " makes '", p, "' ", shape[k], " but ", paramSource[p], " makes it ",
                   bound->second));
        params[p] = shape[k];
        paramSource[p] = flag;
      }
    }

    // Resolve every input; collect what stays unbound, grouped by name.
    std::set<std::string> usedRanges;
    std::map<std::string, std::vector<std::string>> unboundNamed;
    std::vector<std::string> unboundOther;
    for (InputDecl &d : inputs_) {
      auto flagShape = opts_.inputShapes.find(d.name);
      if (flagShape != opts_.inputShapes.end()) {
        d.type.shape = flagShape->second;
        d.type.dimNames.clear();
      } else if (!d.hasShape) {
        unboundOther.push_back(
            cat("input '", d.name, "' has an unknown rank: --shape ", d.name, "=D0xD1x..."));
        continue;
      } else {
        bool open = false;
        std::vector<SymExpr> sym;
        for (size_t k = 0; k < d.type.shape.size(); ++k) {
          sym.emplace_back(d.type.shape[k]);
          if (d.type.shape[k] >= 0)
            continue;
          std::string p = d.type.dimName(k);
          auto it = params.find(p);
          if (!p.empty() && it != params.end()) {
            d.type.shape[k] = it->second;
            sym.back() = SymExpr(it->second);
            if (ranged.count(p)) {
              sym.back() = SymExpr::symbol(p);
              usedRanges.insert(p);
            }
          } else if (!p.empty()) {
            unboundNamed[p].push_back(cat("input '", d.name, "' dim ", k));
          } else {
            open = true;
          }
        }
        if (open)
          unboundOther.push_back(cat("input '", d.name, "' has unnamed dynamic dims: --shape ",
                                     d.name, "=", shapeFlag(d.type.shape)));
        d.type.dimNames.clear();
        d.type.sym = std::move(sym);
        d.type.normalizeSym();
      }
    }
    if (!unboundNamed.empty() || !unboundOther.empty()) {
      std::string s;
      for (const auto &[p, where] : unboundNamed) {
        s += cat(s.empty() ? "" : "; ", "'", p, "' (");
        for (size_t k = 0; k < where.size(); ++k)
          s += (k ? ", " : "") + where[k];
        s += cat("): --dim ", p, "=N");
      }
      for (const std::string &o : unboundOther)
        s += (s.empty() ? "" : "; ") + o;
      fail(cat(unboundNamed.size() + unboundOther.size(),
               " unbound dynamic dim(s), bind each with the flag shown: ", s));
    }

    // Every bound input within the size limits, checked before ONNX's inference computes with
    // these dims. An empty input (a 0 dim) is refused after conversion (checkNoEmptyValues), so
    // that one used where a constant is needed gets that error first; ONNX's inference does not
    // see it (its Reshape inference divides by dims).
    for (const InputDecl &d : inputs_) {
      auto flagShape = opts_.inputShapes.find(d.name);
      std::string how = flagShape != opts_.inputShapes.end()
                            ? cat(" (--shape ", d.name, "=", shapeFlag(flagShape->second), ")")
                            : "";
      if (std::string p = tensorSizeProblem(d.type); !p.empty())
        fail(cat("input '", d.name, "' ", p, how));
      hasEmptyInput_ = hasEmptyInput_ || !emptyDimProblem(d.type).empty();
    }

    // Write the bound shapes back so ONNX shape inference sees them; named dims elsewhere in the
    // model (outputs, value_info) get their values too.
    for (InputDecl &d : inputs_) {
      auto *shape = d.proto->mutable_type()->mutable_tensor_type()->mutable_shape();
      shape->clear_dim();
      for (int64_t v : d.type.shape)
        shape->add_dim()->set_dim_value(v);
    }
    auto substitute = [&](onnx::ValueInfoProto &v) {
      if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape())
        return;
      for (auto &dim : *v.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim())
        if (dim.has_dim_param() && params.count(dim.dim_param()))
          dim.set_dim_value(params.at(dim.dim_param()));
    };
    for (auto &v : *g().mutable_output())
      substitute(v);
    for (auto &v : *g().mutable_value_info())
      substitute(v);
  }

  // ONNX's inference on the bound model; its static results cross-check ours in build().
  void inferShapes() {
    if (newerThanLib_ || hasEmptyInput_)
      return;
    inferShapesAtOtherPoint();
    // In a child process (frontend/onnx_inference.h): libonnx's inference functions trust ranks
    // and attribute lengths. When it gives nothing, ours decides alone.
    IsolatedInference r = inferShapesIsolated(model_);
    if (!r.inferred)
      return;
    *g().mutable_output() = r.inferred->output(); // outputs' types completed, as in place
    for (const auto &v : r.inferred->value_info())
      try {
        TensorType t = typeFromOnnx(v.type());
        if (v.type().tensor_type().has_shape() && t.isStatic())
          onnxTypes_[v.name()] = t;
      } catch (const UserError &) {
      }
  }

  // With ranged dims, ONNX's inference runs a second time with each ranged dim at another value
  // of its range (its maximum, else its minimum; distinct dims at distinct values where the
  // ranges allow), and crossCheck evaluates our symbolic types there: a converter that read a
  // planning-point dim as a constant (and so built a static type where the size follows a dim)
  // is caught at its node, whatever op it is. The copy leaves out the large initializers (their
  // types stay, as inputs): shape inference reads only small ones' values.
  void inferShapesAtOtherPoint() {
    if (opts_.dimRanges.empty())
      return;
    std::set<int64_t> taken;
    for (const DimRange &r : opts_.dimRanges) {
      int64_t v = r.opt;
      for (int64_t cand : {r.max, r.min, (r.min + r.max) / 2, r.max - 1, r.min + 1})
        if (cand >= r.min && cand <= r.max && cand != r.opt && !taken.count(cand)) {
          v = cand;
          break;
        }
      taken.insert(v);
      otherPoint_[r.name] = v;
    }
    onnx::ModelProto alt;
    *alt.mutable_opset_import() = model_.opset_import();
    alt.set_ir_version(model_.ir_version());
    onnx::GraphProto &ag = *alt.mutable_graph();
    *ag.mutable_node() = g().node();
    *ag.mutable_input() = g().input();
    for (const onnx::TensorProto &t : g().initializer()) {
      int64_t n = 1;
      for (int64_t d : t.dims())
        n *= d;
      if (n <= 1024) {
        *ag.add_initializer() = t;
        continue;
      }
      onnx::ValueInfoProto *in = ag.add_input();
      in->set_name(t.name());
      auto *tt = in->mutable_type()->mutable_tensor_type();
      tt->set_elem_type(t.data_type());
      for (int64_t d : t.dims())
        tt->mutable_shape()->add_dim()->set_dim_value(d);
    }
    for (const auto &o : g().output()) {
      onnx::ValueInfoProto *v = ag.add_output();
      v->set_name(o.name());
      if (o.type().has_tensor_type())
        v->mutable_type()->mutable_tensor_type()->set_elem_type(o.type().tensor_type().elem_type());
    }
    for (onnx::ValueInfoProto &v : *ag.mutable_input())
      for (const InputDecl &d : inputs_)
        if (d.name == v.name() && d.type.isSymbolic()) {
          auto *shape = v.mutable_type()->mutable_tensor_type()->mutable_shape();
          shape->clear_dim();
          for (const SymExpr &e : d.type.sym)
            shape->add_dim()->set_dim_value(e.eval(otherPoint_).value_or(-1));
        }
    IsolatedInference r = inferShapesIsolated(alt);
    if (!r.inferred)
      return;
    for (const auto *list : {&r.inferred->value_info(), &r.inferred->output()})
      for (const auto &v : *list)
        try {
          TensorType t = typeFromOnnx(v.type());
          if (v.type().tensor_type().has_shape() && t.isStatic())
            onnxTypesAlt_[v.name()] = t;
        } catch (const UserError &) {
        }
  }

  // The value --const binds to input `d`: a .npy file of the input's dtype whose shape fits the
  // declared one (its dynamic dims take the file's), or one number for an input of one element.
  Tensor constInput(const ConstFlag &f, const InputDecl &d) const {
    std::string flag = cat("--const ", f.text);
    const TensorType &want = d.type;
    if (!f.isValue) {
      Tensor t = npyFor(readNpy(f.file), want.dtype); // bf16 comes as f32 (ir/npy.h)
      if (t.dtype() != want.dtype)
        fail(cat(flag, ": the file holds ", t.type().str(), " but input '", d.name, "' is ",
                 want.str()));
      if (d.hasShape) {
        bool fits = t.shape().size() == want.shape.size();
        for (size_t k = 0; fits && k < want.shape.size(); ++k)
          fits = want.shape[k] < 0 || want.shape[k] == t.shape()[k];
        if (!fits)
          fail(cat(flag, ": the file holds ", t.type().str(), " but input '", d.name, "' is ",
                   want.str()));
      }
      if (std::string p = tensorSizeProblem(t.type()); !p.empty())
        fail(cat(flag, ": ", p));
      return t;
    }
    std::vector<int64_t> shape;
    if (d.hasShape)
      for (int64_t dim : want.shape) {
        if (dim > 1)
          fail(cat(flag, ": input '", d.name, "' is ", want.str(),
                   ", not one element: bind it with NAME=FILE.npy"));
        shape.push_back(1);
      }
    Tensor t(TensorType(want.dtype, shape));
    double v = f.value;
    if (isFloat(want.dtype)) {
      t.setDouble(0, v);
    } else {
      bool integral = std::isfinite(v) && v == std::floor(v);
      double lo = want.dtype == DType::I8     ? -128.0
                  : want.dtype == DType::I32  ? -2147483648.0
                  : want.dtype == DType::Bool ? 0.0
                                              : -9223372036854775808.0;
      double hi = want.dtype == DType::I8     ? 127.0
                  : want.dtype == DType::I32  ? 2147483647.0
                  : want.dtype == DType::Bool ? 1.0
                                              : 9223372036854774784.0; // below 2^63
      bool fits = integral && v >= lo && v <= hi;
      if (!fits)
        fail(cat(flag, ": ", v, " is not a ", dtypeName(want.dtype), " value (input '", d.name,
                 "' is ", want.str(), ")"));
      t.setInt(0, static_cast<int64_t>(v));
    }
    return t;
  }

  // Every --max names a data dim the model has (by its name or its ONNX output's).
  void checkDataDimMax() const {
    std::set<std::string> used;
    for (const auto &[dim, key] : env_.dataDimsBounded)
      used.insert(key);
    std::string have;
    for (const DimRange &d : env_.dims)
      if (d.min == 0 && std::none_of(opts_.dimRanges.begin(), opts_.dimRanges.end(),
                                     [&](const DimRange &r) { return r.name == d.name; }))
        have += (have.empty() ? "" : ", ") + d.name;
    for (const auto &[key, n] : opts_.dataDimMax)
      if (!used.count(key))
        throw UserError(cat(path_, ": --max ", key, "=", n, ": the model has no length known only ",
                            "at run time of that name (",
                            have.empty() ? "it has none" : "the model's are: " + have, ")"));
  }

  // ---- 6./7. build ----------------------------------------------------------------------------

  void build() {
    Graph &graph = *graph_;
    std::string name = g().name();
    for (char &ch : name)
      if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_')
        ch = '_';
    graph.setName(name.empty() ? fs::path(path_).stem().string() : name);
    graph.setDims(opts_.dimRanges);
    env_.dims = opts_.dimRanges;
    for (const InputDecl &d : inputs_) {
      Value *v = graph.addInput(d.name, d.type);
      v->loc = Location(d.name);
      env_.values[d.name] = v;
      // An empty input (a 0 dim) holds no values: the graph reads an empty constant instead,
      // and what it computes folds (the input stays, unread, for the caller's 0 bytes).
      if (d.type.isStatic() && d.type.numel() == 0) {
        Value *w = graph.addWeight(d.name + ".empty", std::make_shared<const Tensor>(d.type));
        w->loc = Location(d.name);
        env_.values[d.name] = w;
      }
    }
    for (const auto &[oname, present] : optionalInputs_) // present, or --absent
      optional_[oname] = present;
    for (const auto &[sname, elems] : seqInputs_) { // --seq: the elements, in order
      std::vector<Value *> xs;
      for (const std::string &e : elems)
        xs.push_back(env_.values.at(e));
      seqs_[sname] = xs;
    }
    for (const auto &[cname, t] : constInputs_) { // --const: constants named as the inputs
      Value *w = graph.addWeight(cname, t);
      w->loc = Location(cname);
      env_.values[cname] = w;
    }
    for (const auto &t : g().initializer()) {
      auto it = initializers_.find(t.name());
      if (it == initializers_.end() || env_.values.count(t.name()))
        continue;
      Value *w = graph.addWeight(t.name(), it->second);
      w->loc = Location(t.name());
      env_.values[t.name()] = w;
    }
    initializers_.clear();

    for (int i = 0; i < g().node_size(); ++i)
      convertNode(g().node(i), order_[i]);
    checkDataDimMax();

    // Graph outputs: each a distinct, named result. An output that is an input, a weight or
    // another output (Identity chains) gets an identity node of its own.
    if (g().output().empty())
      fail("the graph has no outputs (nothing to compute)");
    std::vector<Value *> outs;
    std::vector<onnx::ValueInfoProto> outputs;
    for (const auto &o : g().output()) {
      // An optional output holding no element is not written; one holding one is that element.
      if (auto op = optional_.find(o.name()); op != optional_.end() && !op->second)
        continue;
      auto sq = seqs_.find(o.name());
      bool isSeq = o.type().has_sequence_type() ||
                   (o.type().has_optional_type() &&
                    o.type().optional_type().elem_type().has_sequence_type());
      if (!isSeq && sq == seqs_.end()) {
        onnx::ValueInfoProto t = o;
        if (t.type().has_optional_type())
          t.clear_type(); // the element's type is what it computes
        outputs.push_back(t);
        continue;
      }
      if (sq == seqs_.end())
        fail(cat("output '", o.name(), "' is a sequence that is not computed"));
      for (size_t k = 0; k < sq->second.size(); ++k) { // a sequence: its elements
        onnx::ValueInfoProto e;
        e.set_name(cat(o.name(), ".", k));
        env_.values[e.name()] = sq->second[k];
        outputs.push_back(e);
      }
    }
    if (outputs.empty())
      fail("the graph computes no tensor outputs (its sequences are empty, its optionals hold "
           "nothing)");
    for (const auto &o : outputs) {
      Value *v = env_.values.at(o.name());
      // A length known only at run time as an output: computed from its count.
      if (Value *m = materializeDataShape(env_, v, Location(o.name())))
        v = m;
      bool shared = std::find(outs.begin(), outs.end(), v) != outs.end();
      if (v->kind() != ValueKind::Result || shared || !v->name().empty())
        v = graph.createNode(Op::Identity, {v}, {}, Location(o.name()))->result();
      // Output values carry the ONNX output names; a weight of the same name (a constant
      // output) steps aside, an input of the same name (a pass-through) cannot.
      if (Value *clash = graph.findValue(o.name()); clash && clash->isWeight())
        graph.renameValue(clash, o.name() + ".const");
      graph.renameValue(v, o.name());
      if (o.has_type() && o.type().tensor_type().has_shape()) {
        TensorType declared = typeFromOnnx(o.type());
        // A length known only at run time cannot be checked here (an exporter declares the
        // length it traced with): such dims are left out.
        const TensorType &t = v->type();
        bool sameShape = declared.shape.size() == t.shape.size();
        for (size_t d = 0; sameShape && d < t.shape.size(); ++d) {
          bool data = false;
          for (const std::string &s : t.symDim(d).symbols())
            data = data || env_.dataDimCounts.count(s);
          sameShape = data || declared.shape[d] == t.shape[d];
        }
        if (declared.dtype != v->type().dtype || (declared.isStatic() && !sameShape))
          fail(cat("graph output '", o.name(), "' is declared ", declared.str(), " but computes ",
                   v->type().str()));
      }
      outs.push_back(v);
    }
    graph.setOutputs(outs);
    graph.removeDeadCode();
    // A shape value computed from the symbolic dims holds its planning-point data: converters
    // refuse to read it as data, and this catches what reaches the graph otherwise (an output).
    for (const Value *w : graph.weights())
      if (auto it = env_.symValues.find(w); it != env_.symValues.end() && graph.hasUses(w))
        fail(cat("node '", w->loc.str(), "': the shape value ", symElemsStr(it->second),
                 " computed from the symbolic dims is used as data (a graph output or an "
                 "operand): values computed from symbolic dims are supported only as shapes"));
    checkNoEmptyValues(graph);
    try {
      verifyGraph(graph);
    } catch (const UserError &e) {
      fail(cat("the imported graph does not verify: ", e.what()));
    }
  }

  // One node into the graph (`index`: its position in the file, for messages). An If is
  // replaced by the branch its condition selects.
  void convertNode(const onnx::NodeProto &n, int index) {
    if (n.op_type() == "If") {
      inlineIf(n, index);
      return;
    }
    if (n.op_type() == "Loop" || n.op_type() == "Scan") {
      if (!unrollLoop(n, index))
        runtimeLoop(n, index);
      return;
    }
    if (isSequenceOp(n.op_type())) {
      convertSequenceOp(n, index);
      return;
    }
    if (n.op_type() == "Identity" && n.input_size() == 1 && n.output_size() == 1 &&
        (seqs_.count(n.input(0)) || optional_.count(n.input(0)))) {
      aliasSequence(n.output(0), n.input(0)); // of a sequence or optional
      return;
    }
    const OnnxOpEntry *entry = findOnnxOp(n.op_type());
    AICF_CHECK(entry, "unsupported op ", n.op_type(), " passed checkOps");
    ConvertCtx ctx(env_, n, index, opset_);
    if (opset_ < entry->sinceOpset)
      ctx.fail(cat(n.op_type(), " needs opset >= ", entry->sinceOpset, ", the model imports opset ",
                   opset_));
    entry->convert(ctx);
    for (size_t k = 0; k < ctx.numOutputs(); ++k) {
      const std::string &out = n.output(static_cast<int>(k));
      if (out.empty())
        continue;
      if (!ctx.outputSet(k)) {
        if (env_.used.count(out))
          ctx.fail(cat("output ", k, " ('", out, "') is not supported"));
        continue;
      }
      crossCheck(ctx, out);
    }
  }

  // If with a condition known at compile time (a constant, or computed from constants and
  // --const inputs): its outputs are the selected branch's, whose initializers and nodes join
  // the graph (nested Ifs the same way). A condition known only at run time: runtimeIf.
  void inlineIf(const onnx::NodeProto &n, int index) {
    ConvertCtx ctx(env_, n, index, opset_);
    const Tensor *cond = ctx.constInput(0);
    if (!cond) {
      runtimeIf(ctx, n, index);
      return;
    }
    if (cond->numel() != 1)
      ctx.fail(cat("condition '", n.input(0), "' has ", cond->numel(), " elements, not one"));
    bool taken = cond->getDouble(0) != 0;
    branchSeqs_.clear();
    std::vector<Value *> outs = convertBranch(ctx, n, index, taken);
    for (int k = 0; k < n.output_size(); ++k) {
      if (n.output(k).empty())
        continue;
      if (auto b = branchSeqs_.find(k); b != branchSeqs_.end())
        aliasSequence(n.output(k), b->second);
      else
        env_.values[n.output(k)] = outs[static_cast<size_t>(k)];
    }
  }

  // If with a condition known only at run time: both branches join the graph, and each output
  // is where(cond, then value, else value) with the scalar condition. Host plans run a branch's
  // kernels only when its side is taken (plan/branch_guards.h); GPU plans and the interpreter
  // compute both. The branches must give each output the same dtype and shape.
  // A branch that cannot be converted at the bound shapes (a UserError while converting it: a
  // VAD's branch for the other sample rate, given this rate's chunk) becomes a run-time failure
  // when the other converts (issue 51): what it added is dropped (dead code, its names unbound
  // again), each of its outputs is a `fail` node of the other branch's type, and a warning names
  // the inputs the condition is computed from (tryBranch, failBranch). Both failing is an error.
  void runtimeIf(ConvertCtx &ctx, const onnx::NodeProto &n, int index) {
    for (const auto &a : n.attribute())
      if (a.type() == onnx::AttributeProto::GRAPH)
        for (const auto &o : a.g().output())
          if (o.type().has_sequence_type() || o.type().has_optional_type())
            ctx.requireConst(0, "condition of an If returning a sequence or optional");
    Value *cond = ctx.input(0);
    const TensorType &ct = cond->type();
    if (ct.dtype != DType::Bool)
      ctx.fail(cat("condition '", n.input(0), "' is ", ct.str(), ", not bool"));
    if (!ct.isStatic() || ct.numel() != 1)
      ctx.fail(cat("condition '", n.input(0), "' is ", ct.str(), ", not one element"));
    cond = ctx.reshape(cond, {});
    branchSeqs_.clear();
    std::exception_ptr thenError, elseError;
    std::vector<Value *> thenOuts = tryBranch(ctx, n, index, true, thenError);
    std::vector<Value *> elseOuts = tryBranch(ctx, n, index, false, elseError);
    if (thenError && elseError)
      std::rethrow_exception(thenError); // as when the then branch stopped the import
    if (thenError || elseError) {
      bool then = thenError != nullptr;
      std::vector<Value *> &fails = then ? thenOuts : elseOuts;
      fails =
          failBranch(ctx, n, cond, then, then ? thenError : elseError, then ? elseOuts : thenOuts);
    }
    if (!branchSeqs_.empty())
      ctx.fail(cat("output ", branchSeqs_.begin()->first, " is a sequence or optional: an If ",
                   "chosen at run time returns tensors only (bind its condition with --const)"));
    for (int k = 0; k < n.output_size(); ++k) {
      if (n.output(k).empty())
        continue;
      const TensorType &t = thenOuts[static_cast<size_t>(k)]->type(),
                       &e = elseOuts[static_cast<size_t>(k)]->type();
      // Lengths that differ (dim 0, the other dims equal): the chosen side's length is known
      // only at run time (a data dim), at most the longer side's.
      bool lengths = t.dtype == e.dtype && t.rank() == e.rank() && t.rank() >= 1 && t != e;
      for (size_t d = 1; lengths && d < t.shape.size(); ++d)
        lengths = t.symDim(d) == e.symDim(d);
      if (lengths) {
        int64_t most =
            std::max(ctx.bounds(t.symDim(0), "length").hi, ctx.bounds(e.symDim(0), "length").hi);
        env_.values[n.output(k)] = ctx.emitDataDim(
            Op::Choose, {cond, thenOuts[static_cast<size_t>(k)], elseOuts[static_cast<size_t>(k)]},
            {}, 2, most, static_cast<size_t>(k))[0];
        continue;
      }
      if (t != e)
        ctx.fail(cat("output ", k, " ('", n.output(k), "') is ", t.str(),
                     " in the then branch and ", e.str(),
                     " in the else branch: a branch chosen at run time needs the same "
                     "type from both (bind the condition's inputs with --const to choose at "
                     "compile time)"));
      env_.values[n.output(k)] = ctx.emit(
          Op::Where, {cond, thenOuts[static_cast<size_t>(k)], elseOuts[static_cast<size_t>(k)]});
    }
  }

  // convertBranch, or, when it throws a UserError, nothing: the names it bound (values,
  // sequences, optionals) are restored, the nodes and weights it added are left dead (the graph's
  // dead code goes at the end of the import, as an unrolling given up leaves it), and `error`
  // holds the exception.
  std::vector<Value *> tryBranch(const ConvertCtx &ctx, const onnx::NodeProto &n, int index,
                                 bool then, std::exception_ptr &error) {
    std::unordered_map<std::string, Value *> values = env_.values;
    auto seqs = seqs_;
    auto optional = optional_;
    auto branchSeqs = branchSeqs_;
    // The warnings of Ifs nested in the branch count only if the branch converts.
    std::vector<std::string> warnings;
    struct Collect {
      std::vector<std::string> *&at, *outer;
      ~Collect() { at = outer; }
    } collect{branchWarnings_, branchWarnings_};
    branchWarnings_ = &warnings;
    try {
      std::vector<Value *> outs = convertBranch(ctx, n, index, then);
      branchWarnings_ = collect.outer;
      for (const std::string &w : warnings)
        warnIf(w);
      return outs;
    } catch (const UserError &) {
      error = std::current_exception();
    }
    env_.values = std::move(values);
    seqs_ = std::move(seqs);
    optional_ = std::move(optional);
    branchSeqs_ = std::move(branchSeqs);
    return {};
  }

  // The outputs of the branch (`then` true: the then branch) that failed with `error`, given
  // that the other converted to `others`: one fail node per output, of the other's type, whose
  // message is the run-time error "branch 'then_branch' of If 'NAME' cannot run at these shapes:
  // <the converter's message>" (NAME: the If's node name, else its first output's name). Warns,
  // naming the graph inputs the condition is computed from and the --const that removes the
  // branch.
  std::vector<Value *> failBranch(const ConvertCtx &ctx, const onnx::NodeProto &n, Value *cond,
                                  bool then, std::exception_ptr error,
                                  const std::vector<Value *> &others) {
    std::string reason;
    try {
      std::rethrow_exception(error);
    } catch (const UserError &e) {
      reason = e.what();
    }
    if (std::string file = env_.file + ": "; reason.rfind(file, 0) == 0)
      reason = reason.substr(file.size());
    const char *side = then ? "then" : "else";
    std::string ifName = !n.name().empty() ? n.name() : n.output_size() ? n.output(0) : "";
    std::string message =
        cat("branch '", side, "_branch' of If '", ifName, "' cannot run at these shapes: ", reason);
    std::vector<Value *> outs;
    for (size_t k = 0; k < others.size(); ++k) {
      const Value *o = others[k];
      if (!o) { // a sequence: refused below, as for any If chosen at run time
        outs.push_back(nullptr);
        continue;
      }
      const TensorType &t = o->type();
      AttrMap attrs{
          {"message", message}, {"dtype", std::string(dtypeName(t.dtype))}, {"shape", t.shape}};
      if (t.isSymbolic()) {
        std::vector<std::string> texts;
        for (size_t d = 0; d < t.shape.size(); ++d)
          texts.push_back(t.symDim(d).str());
        attrs["sym_shape"] = texts;
      }
      // Not ctx.emit: a node without operands would be folded, that is, run.
      outs.push_back(env_.graph->createNode(Op::Fail, {}, std::move(attrs), ctx.loc())->result());
    }
    // The graph inputs the condition is computed from.
    std::vector<const Value *> inputs, stack{cond};
    std::set<const Value *> seen;
    while (!stack.empty()) {
      const Value *v = stack.back();
      stack.pop_back();
      if (!seen.insert(v).second)
        continue;
      if (v->isInput())
        inputs.push_back(v);
      else if (v->def())
        stack.insert(stack.end(), v->def()->operands().begin(), v->def()->operands().end());
    }
    std::sort(inputs.begin(), inputs.end(),
              [](const Value *a, const Value *b) { return a->name() < b->name(); });
    std::string names, flags;
    for (size_t k = 0; k < inputs.size(); ++k) {
      const Value *in = inputs[k];
      names += cat(k == 0 ? "" : k + 1 == inputs.size() ? " and " : ", ", "'", in->name(), "'");
      flags += cat(k ? " " : "", "--const ", in->name(), "=",
                   in->type().isStatic() && in->type().numel() == 1 ? "<value>" : "<file.npy>");
    }
    std::string decided =
        env_.capture     ? std::string("Its condition is computed inside a loop body")
        : inputs.empty() ? std::string("Its condition is computed at run time")
                         : cat("Its condition is decided by input", inputs.size() > 1 ? "s " : " ",
                               names, ": ", flags, " removes the branch");
    warnIf(cat("If '", ifName, "': the ", side, " branch cannot run at these shapes (", reason,
               "); it fails at run time if taken. ", decided));
    return outs;
  }

  // A warning of failBranch: printed, or kept while the branch it was found in converts.
  void warnIf(const std::string &w) {
    if (branchWarnings_)
      branchWarnings_->push_back(w);
    else
      warn(w);
  }

  // The then (`then` true) or else branch of an If converted into the graph: its initializers
  // and nodes; returns the values of its outputs, one per output of n.
  std::vector<Value *> convertBranch(const ConvertCtx &ctx, const onnx::NodeProto &n, int index,
                                     bool then) {
    const char *side = then ? "then" : "else";
    const onnx::GraphProto &branch = graphAttr(ctx, n, cat(side, "_branch"));
    if (branch.output_size() != n.output_size())
      ctx.fail(cat("the ", side, " branch returns ", branch.output_size(), " values for ",
                   n.output_size(), " outputs"));
    addBranchWeights(ctx, branch);
    for (const onnx::NodeProto &m : branch.node())
      convertNode(m, index);
    std::vector<Value *> outs;
    for (int k = 0; k < n.output_size(); ++k) {
      const std::string &o = branch.output(k).name();
      if (seqs_.count(o) || optional_.count(o)) { // a sequence or optional: by name
        outs.push_back(nullptr);
        branchSeqs_[k] = o;
        continue;
      }
      auto it = env_.values.find(o);
      if (it == env_.values.end())
        ctx.fail(cat("branch output '", o, "' is not computed"));
      outs.push_back(it->second);
    }
    return outs;
  }

  // The graph attribute `name` of n (failing through ctx when it is missing).
  const onnx::GraphProto &graphAttr(const ConvertCtx &ctx, const onnx::NodeProto &n,
                                    const std::string &name) {
    for (const auto &a : n.attribute())
      if (a.name() == name && a.type() == onnx::AttributeProto::GRAPH)
        return a.g();
    ctx.fail(cat("has no ", name, " graph"));
  }

  // A subgraph's initializers as weights.
  void addBranchWeights(const ConvertCtx &ctx, const onnx::GraphProto &b) {
    for (const auto &t : b.initializer()) {
      TensorPtr v;
      try {
        v = std::make_shared<const Tensor>(tensorFromOnnx(t, env_.modelDir));
      } catch (const UserError &e) {
        ctx.fail(cat("subgraph initializer '", t.name(), "' ", e.what()));
      }
      Value *w = env_.graph->addWeight(t.name(), v);
      w->loc = Location(t.name());
      env_.values[t.name()] = w;
    }
  }

  // Loop with a trip count known at compile time, and Scan (static scan length), unrolled: the
  // body's nodes are converted once per iteration with the loop-carried values (and Loop's
  // iteration number, Scan's slices) bound to its inputs. Loop's scan outputs, and Scan's, are
  // the per-iteration values stacked on a new first axis. At most kMaxUnroll iterations.
  // Returns false, converting nothing, for a Loop to keep at run time (runtimeLoop): no trip
  // count, one known only at run time or above kMaxUnroll, or a condition computed at run time.
  static constexpr int64_t kMaxUnroll = 256;

  // x[i] along the first axis, that axis dropped (a scan slice, a batch element).
  static Value *elementAt(ConvertCtx &ctx, Value *x, int64_t i) {
    Shape rest(x->type().shape.begin() + 1, x->type().shape.end());
    Value *sl = ctx.emit(
        Op::Slice, {x},
        {{"starts", Shape{i}}, {"ends", Shape{i + 1}}, {"axes", Shape{0}}, {"steps", Shape{1}}});
    return ctx.reshape(sl, rest);
  }
  bool unrollLoop(const onnx::NodeProto &n, int index, bool scan9 = false) {
    ConvertCtx ctx(env_, n, index, opset_);
    const onnx::GraphProto &body = graphAttr(ctx, n, "body");
    bool loop = n.op_type() == "Loop";
    int64_t states = 0, trips = 0, scanIn = 0;
    std::vector<Value *> carried;
    std::vector<std::string> seqKey; // Loop: where a carried sequence lives now ("": a tensor)
    Value *cond = nullptr;
    // What the unrolling binds, restored when it gives up (the nodes it added are dead then).
    std::unordered_map<std::string, Value *> before;
    if (loop) {
      const Tensor *m = ctx.constInput(0);
      if (!m || m->numel() != 1 || m->getInt(0) > kMaxUnroll)
        return false;
      trips = m->getInt(0);
      if (ctx.hasInput(1)) {
        cond = ctx.input(1);
        if (!cond->isWeight())
          return false;
      }
      before = env_.values;
      states = static_cast<int64_t>(n.input_size()) - 2;
      for (int64_t j = 0; j < states; ++j) { // a carried sequence is followed by name
        const std::string &in = n.input(static_cast<int>(2 + j));
        seqKey.push_back(seqs_.count(in) ? in : "");
        carried.push_back(seqKey.back().empty() ? ctx.input(static_cast<size_t>(2 + j)) : nullptr);
      }
      if (body.input_size() != 2 + states || body.output_size() < 1 + states)
        ctx.fail(cat("the body takes ", body.input_size(), " inputs and returns ",
                     body.output_size(), " values for ", states, " loop-carried values"));
    } else {
      scanIn = ctx.attrIntReq("num_scan_inputs");
      states = static_cast<int64_t>(n.input_size()) - scanIn;
      for (const char *a : {"scan_input_axes", "scan_input_directions", "scan_output_axes",
                            "scan_output_directions"})
        for (int64_t v : ctx.attrInts(a))
          if (v != 0)
            ctx.fail(cat(a, " other than 0 is not supported"));
      if (opset_ < 9 && !scan9) {
        scan8(ctx, n, index);
        return true;
      }
      for (int64_t j = 0; j < states; ++j)
        carried.push_back(ctx.input(static_cast<size_t>(j)));
      trips = scanIn > 0 ? ctx.input(static_cast<size_t>(states))->type().shape.at(0) : 0;
      for (int64_t j = 0; j < scanIn; ++j)
        if (ctx.input(static_cast<size_t>(states + j))->type().shape.at(0) != trips)
          ctx.fail("the scan inputs differ in length");
      if (body.input_size() != states + scanIn || body.output_size() < states)
        ctx.fail(cat("the body takes ", body.input_size(), " inputs and returns ",
                     body.output_size(), " values for ", states, " state values"));
    }
    if (trips > kMaxUnroll)
      ctx.fail(cat(trips, " iterations: Scan is unrolled at compile time, at most ", kMaxUnroll,
                   " iterations"));
    const int64_t scanOut = body.output_size() - (loop ? 1 : 0) - states;
    std::vector<std::vector<Value *>> scans(static_cast<size_t>(scanOut));
    int64_t it = 0;
    for (; it < trips; ++it) {
      if (cond) {
        if (!cond->isWeight()) { // computed at run time: the loop is kept at run time
          env_.values = std::move(before);
          return false;
        }
        if (cond->data()->getDouble(0) == 0)
          break;
      }
      int64_t first = 0;
      if (loop) {
        env_.values[body.input(0).name()] = ctx.constant(Tensor::fromI64({it}, {}));
        if (!body.input(1).name().empty()) { // without a condition input it reads true
          Tensor yes(TensorType(DType::Bool, {}));
          yes.setInt(0, 1);
          env_.values[body.input(1).name()] = cond ? cond : ctx.constant(yes);
        }
        first = 2;
      }
      for (int64_t j = 0; j < states; ++j)
        if (j < static_cast<int64_t>(seqKey.size()) && !seqKey[j].empty())
          aliasSequence(body.input(static_cast<int>(first + j)).name(), seqKey[j]);
        else
          env_.values[body.input(static_cast<int>(first + j)).name()] = carried[j];
      for (int64_t j = 0; j < scanIn; ++j) { // Scan: this iteration's slice of each input
        env_.values[body.input(static_cast<int>(states + j)).name()] =
            elementAt(ctx, ctx.input(static_cast<size_t>(states + j)), it);
      }
      addBranchWeights(ctx, body);
      for (const onnx::NodeProto &m : body.node())
        convertNode(m, index);
      auto out = [&](int64_t k) {
        auto f = env_.values.find(body.output(static_cast<int>(k)).name());
        if (f == env_.values.end())
          ctx.fail(
              cat("body output '", body.output(static_cast<int>(k)).name(), "' is not computed"));
        return f->second;
      };
      int64_t o = 0;
      if (loop) { // without a condition input the body's condition is ignored (a for loop)
        Value *next = out(o++);
        if (ctx.hasInput(1))
          cond = next;
      }
      for (int64_t j = 0; j < states; ++j) {
        if (j < static_cast<int64_t>(seqKey.size()) && !seqKey[j].empty()) {
          seqKey[j] = body.output(static_cast<int>(o++)).name();
          if (!seqs_.count(seqKey[j]))
            ctx.fail(cat("body output '", seqKey[j], "' is not a sequence"));
          continue;
        }
        carried[j] = out(o++);
      }
      for (int64_t k = 0; k < scanOut; ++k) {
        Value *v = out(o++);
        Shape one = v->type().shape;
        one.insert(one.begin(), 1);
        scans[k].push_back(ctx.reshape(v, one));
      }
    }
    for (int64_t j = 0; j < states; ++j) {
      if (n.output(static_cast<int>(j)).empty())
        continue;
      if (j < static_cast<int64_t>(seqKey.size()) && !seqKey[j].empty())
        aliasSequence(n.output(static_cast<int>(j)), seqKey[j]);
      else
        env_.values[n.output(static_cast<int>(j))] = carried[j];
    }
    for (int64_t k = 0; k < scanOut; ++k) {
      const std::string &name = n.output(static_cast<int>(states + k));
      if (name.empty())
        continue;
      if (scans[k].empty())
        ctx.fail(cat("scan output '", name, "' would be empty (no iteration ran)"));
      env_.values[name] = scans[k].size() == 1
                              ? scans[k][0]
                              : ctx.emit(Op::Concat, scans[k], {{"axis", int64_t(0)}});
    }
    return true;
  }

  // ---- sequences and optionals --------------------------------------------------------------
  // A sequence is a list of tensors known at compile time (its length and each element's type):
  // seqs_ maps its ONNX name to the element values, and the sequence ops edit the lists. An
  // optional is a tensor or sequence that may be absent: optional_ says whether it is present
  // (its value is under the same name, as a tensor or sequence). A sequence input is given as
  // its elements (--seq NAME=COUNT: inputs NAME.0 ...), a sequence output as its elements.
  static bool isSequenceOp(const std::string &op) {
    static const std::set<std::string> ops = {
        "SequenceConstruct", "SequenceEmpty",  "SequenceInsert",     "SequenceErase",
        "SequenceAt",        "SequenceLength", "ConcatFromSequence", "SplitToSequence",
        "SequenceMap",       "Optional",       "OptionalHasElement", "OptionalGetElement"};
    return ops.count(op) > 0;
  }

  // `to` becomes the same sequence or optional as `from` (or the same tensor).
  void aliasSequence(const std::string &to, const std::string &from) {
    if (auto it = seqs_.find(from); it != seqs_.end())
      seqs_[to] = it->second;
    if (auto it = optional_.find(from); it != optional_.end())
      optional_[to] = it->second;
    if (auto it = env_.values.find(from); it != env_.values.end())
      env_.values[to] = it->second;
  }

  std::vector<Value *> &sequenceInput(const ConvertCtx &ctx, size_t i) {
    auto it = seqs_.find(ctx.inputName(i));
    if (!ctx.hasInput(i) || it == seqs_.end())
      ctx.fail(cat("input ", i, " ('", ctx.inputName(i), "') is not a sequence"));
    return it->second;
  }

  // A position input (Sequence At / Insert / Erase): constant, negative from the end, within
  // [-size, size] (`end` true: insert may append) or [-size, size - 1].
  size_t sequencePosition(ConvertCtx &ctx, size_t i, size_t size, bool end) {
    if (!ctx.hasInput(i))
      return end ? size : size - 1;
    int64_t p = ctx.constInts(i, "position").at(0), n = static_cast<int64_t>(size);
    if (p < -n || p > (end ? n : n - 1))
      ctx.fail(cat("position ", p, " is outside the sequence of ", n));
    return static_cast<size_t>(p < 0 ? p + n : p);
  }

  void convertSequenceOp(const onnx::NodeProto &n, int index) {
    ConvertCtx ctx(env_, n, index, opset_);
    const std::string &op = n.op_type();
    const std::string out = n.output_size() ? n.output(0) : "";
    if (op == "SequenceEmpty") {
      seqs_[out] = {};
    } else if (op == "SequenceConstruct") {
      std::vector<Value *> xs;
      for (size_t k = 0; k < ctx.numInputs(); ++k)
        xs.push_back(ctx.input(k));
      for (Value *x : xs)
        if (x->type().dtype != xs[0]->type().dtype)
          ctx.fail(
              cat("the elements differ in dtype: ", xs[0]->type().str(), " and ", x->type().str()));
      seqs_[out] = xs;
    } else if (op == "SequenceInsert") {
      std::vector<Value *> xs = sequenceInput(ctx, 0);
      Value *x = ctx.input(1);
      if (!xs.empty() && x->type().dtype != xs[0]->type().dtype)
        ctx.fail(cat("inserting ", x->type().str(), " into a sequence of ",
                     dtypeName(xs[0]->type().dtype)));
      xs.insert(xs.begin() + static_cast<int64_t>(sequencePosition(ctx, 2, xs.size(), true)), x);
      seqs_[out] = xs;
    } else if (op == "SequenceErase") {
      std::vector<Value *> xs = sequenceInput(ctx, 0);
      if (xs.empty())
        ctx.fail("erasing from an empty sequence");
      xs.erase(xs.begin() + static_cast<int64_t>(sequencePosition(ctx, 1, xs.size(), false)));
      seqs_[out] = xs;
    } else if (op == "SequenceAt") {
      std::vector<Value *> &xs = sequenceInput(ctx, 0);
      if (xs.empty())
        ctx.fail("reading from an empty sequence");
      ctx.setOutput(0, xs[sequencePosition(ctx, 1, xs.size(), false)]);
    } else if (op == "SequenceLength") {
      ctx.setOutput(0, ctx.constant(Tensor::fromI64(
                           {static_cast<int64_t>(sequenceInput(ctx, 0).size())}, {})));
    } else if (op == "ConcatFromSequence") {
      std::vector<Value *> xs = sequenceInput(ctx, 0);
      if (xs.empty())
        ctx.fail("concatenating an empty sequence");
      const int64_t rank = xs[0]->type().rank();
      const bool fresh = ctx.attrInt("new_axis", 0) != 0;
      int64_t axis = ctx.attrIntReq("axis");
      if (axis < -(rank + fresh) || axis > rank - 1 + fresh)
        ctx.fail(cat("axis ", axis, " is outside rank ", rank + fresh));
      if (axis < 0)
        axis += rank + fresh;
      if (fresh)
        for (Value *&x : xs) {
          Shape sh = x->type().shape;
          sh.insert(sh.begin() + axis, 1);
          x = ctx.reshape(x, sh);
        }
      ctx.setOutput(0, xs.size() == 1 ? xs[0] : ctx.emit(Op::Concat, xs, {{"axis", axis}}));
    } else if (op == "SplitToSequence") {
      Value *x = ctx.input(0);
      const Shape &shape = x->type().shape;
      int64_t axis = ctx.attrInt("axis", 0);
      if (axis < -x->type().rank() || axis >= x->type().rank())
        ctx.fail(cat("axis ", axis, " is outside rank ", x->type().rank()));
      if (axis < 0)
        axis += x->type().rank();
      const int64_t dim = shape[static_cast<size_t>(axis)];
      Shape sizes;
      bool squeeze = false;
      if (!ctx.hasInput(1)) { // pieces of 1, squeezed unless keepdims
        sizes.assign(static_cast<size_t>(dim), 1);
        squeeze = ctx.attrInt("keepdims", 1) == 0;
      } else {
        const Tensor &t = ctx.requireConst(1, "split");
        if (t.shape().empty()) { // a scalar: chunks of that size, the last one smaller
          int64_t chunk = t.getInt(0);
          if (chunk <= 0)
            ctx.fail(cat("split ", chunk, " is not positive"));
          for (int64_t at = 0; at < dim; at += chunk)
            sizes.push_back(std::min(chunk, dim - at));
        } else {
          sizes = ctx.constInts(1, "split");
        }
      }
      std::vector<Value *> pieces =
          sizes.size() == 1 ? std::vector<Value *>{x}
                            : ctx.emitMulti(Op::Split, {x}, {{"axis", axis}, {"sizes", sizes}},
                                            static_cast<int>(sizes.size()));
      if (squeeze)
        for (Value *&v : pieces) {
          Shape sh = v->type().shape;
          sh.erase(sh.begin() + axis);
          v = ctx.reshape(v, sh);
        }
      seqs_[out] = pieces;
    } else if (op == "SequenceMap") {
      sequenceMap(ctx, n, index);
    } else if (op == "Optional") {
      if (ctx.hasInput(0))
        aliasSequence(out, n.input(0));
      optional_[out] = ctx.hasInput(0);
    } else if (op == "OptionalHasElement") {
      bool present = false;
      if (ctx.hasInput(0)) {
        auto it = optional_.find(n.input(0));
        present = it == optional_.end() ? true : it->second; // a plain tensor or sequence
      }
      Tensor t(TensorType(DType::Bool, {}));
      t.setInt(0, present ? 1 : 0);
      ctx.setOutput(0, ctx.constant(std::move(t)));
    } else if (op == "OptionalGetElement") {
      auto it = optional_.find(n.input(0));
      if (it != optional_.end() && !it->second)
        ctx.fail(cat("optional '", n.input(0), "' holds no element"));
      if (!seqs_.count(n.input(0)))
        ctx.input(0); // fails naming it when it is undefined
      aliasSequence(out, n.input(0));
    }
  }

  // SequenceMap: the body once per element (unrolled), reading the k-th element of each
  // sequence input and every tensor input whole; each body output collects a sequence.
  void sequenceMap(ConvertCtx &ctx, const onnx::NodeProto &n, int index) {
    const onnx::GraphProto &body = graphAttr(ctx, n, "body");
    const size_t count = sequenceInput(ctx, 0).size();
    if (static_cast<size_t>(body.input_size()) != ctx.numInputs())
      ctx.fail(cat("the body takes ", body.input_size(), " inputs for ", ctx.numInputs()));
    for (size_t i = 1; i < ctx.numInputs(); ++i)
      if (seqs_.count(ctx.inputName(i)) && seqs_.at(ctx.inputName(i)).size() != count)
        ctx.fail(cat("the sequences differ in length (", count, " and ",
                     seqs_.at(ctx.inputName(i)).size(), ")"));
    std::vector<std::vector<Value *>> outs(static_cast<size_t>(body.output_size()));
    for (size_t k = 0; k < count; ++k) {
      for (size_t i = 0; i < ctx.numInputs(); ++i) {
        auto it = seqs_.find(ctx.inputName(i));
        env_.values[body.input(static_cast<int>(i)).name()] =
            it != seqs_.end() ? it->second[k] : ctx.input(i);
      }
      addBranchWeights(ctx, body);
      for (const onnx::NodeProto &m : body.node())
        convertNode(m, index);
      for (int j = 0; j < body.output_size(); ++j) {
        auto it = env_.values.find(body.output(j).name());
        if (it == env_.values.end())
          ctx.fail(cat("body output '", body.output(j).name(), "' is not computed"));
        outs[static_cast<size_t>(j)].push_back(it->second);
      }
    }
    for (int j = 0; j < n.output_size() && j < body.output_size(); ++j)
      seqs_[n.output(j)] = outs[static_cast<size_t>(j)];
  }

  // Scan-8: every input and output has a leading batch axis (scan inputs [batch, sequence, ...])
  // and input 0 is the optional sequence_lens. Each batch element is a Scan-9 of its own,
  // unrolled, and the results are stacked on the batch axis. Sequence lengths other than the
  // full one (ragged batches) and reversed directions are refused.
  void scan8(ConvertCtx &ctx, const onnx::NodeProto &n, int index) {
    for (int64_t v : ctx.attrInts("directions"))
      if (v != 0)
        ctx.fail("directions other than 0 are not supported");
    const int64_t scanIn = ctx.attrIntReq("num_scan_inputs");
    const int ins = n.input_size() - 1;
    if (ins < scanIn || scanIn < 1)
      ctx.fail(cat(ins, " inputs after sequence_lens for ", scanIn, " scan inputs"));
    const Shape &first = ctx.type(static_cast<size_t>(1 + ins - scanIn)).shape;
    if (first.size() < 2)
      ctx.fail("a scan input needs a batch and a sequence axis");
    const int64_t batch = first[0], length = first[1];
    if (ctx.hasInput(0))
      for (int64_t l : ctx.constInts(0, "sequence_lens"))
        if (l != length)
          ctx.fail(cat("sequence_lens ", l, " differs from the scan length ", length,
                       " (ragged batches are not supported)"));
    for (int k = 1; k <= ins; ++k)
      if (ctx.rank(static_cast<size_t>(k)) < 1 ||
          ctx.type(static_cast<size_t>(k)).shape[0] != batch)
        ctx.fail(cat("input '", n.input(k), "' has no batch axis of ", batch));
    std::vector<std::vector<Value *>> outs(static_cast<size_t>(n.output_size()));
    for (int64_t b = 0; b < batch; ++b) {
      onnx::NodeProto one = n; // this batch element's Scan-9
      one.clear_input();
      one.clear_output();
      for (int k = 1; k <= ins; ++k) {
        std::string name = cat(n.input(k), ".batch", b);
        env_.values[name] = elementAt(ctx, ctx.input(static_cast<size_t>(k)), b);
        one.add_input(name);
      }
      for (int k = 0; k < n.output_size(); ++k)
        one.add_output(n.output(k).empty() ? "" : cat(n.output(k), ".batch", b));
      unrollLoop(one, index, /*scan9=*/true);
      for (int k = 0; k < n.output_size(); ++k) {
        if (n.output(k).empty())
          continue;
        Value *v = env_.values.at(one.output(k));
        Shape withBatch = v->type().shape;
        withBatch.insert(withBatch.begin(), 1);
        outs[static_cast<size_t>(k)].push_back(ctx.reshape(v, withBatch));
      }
    }
    for (int k = 0; k < n.output_size(); ++k)
      if (!n.output(k).empty())
        env_.values[n.output(k)] = outs[k].size() == 1
                                       ? outs[k][0]
                                       : ctx.emit(Op::Concat, outs[k], {{"axis", int64_t(0)}});
  }

  // A run-time loop's scan outputs, in its body (runtimeLoop, issue 51): each value written at
  // row `iteration` of its stack (the last row once past the bound: the count then fails the
  // run after the loop, naming --max), the stacks' inputs typed from the values, and the count
  // of iterations run (iteration + 1), appended to the body's outputs.
  void appendScanStacks(ConvertCtx &ctx, const onnx::NodeProto &n, const onnx::GraphProto &body,
                        Graph &g, const std::string &name, int states, int64_t scanBound,
                        const std::vector<Value *> &stackIns, std::vector<Value *> &outs) {
    const int scanOut = static_cast<int>(stackIns.size()) - 1;
    const int64_t rows = std::max<int64_t>(scanBound, 1);
    Value *iter = g.inputs()[0];
    // (Constants named after the body: the plan finds weights by name, and the loop node's own
    // outputs name the outer graph's.)
    auto constant = [&](const std::string &what, int64_t v) {
      Value *w = g.addWeight(cat(name, ".", what),
                             std::make_shared<const Tensor>(Tensor::fromI64({v}, {})));
      w->loc = ctx.loc();
      return w;
    };
    Value *at = ctx.reshape(ctx.emit(Op::Min, {iter, constant("last_row", rows - 1)}), {1, 1});
    for (int k = 0; k < scanOut; ++k) {
      const std::string &o = body.output(1 + states + k).name();
      auto it = env_.values.find(o);
      Value *v = it != env_.values.end() ? it->second : env_.capture(o);
      if (!v)
        ctx.fail(cat("body output '", o, "' is not computed"));
      const TensorType &t = v->type();
      if (!t.isStatic())
        ctx.fail(cat("scan output '", o, "' is ", t.str(),
                     ": a loop kept at run time needs its scan values' shapes fixed"));
      Shape stacked = t.shape, one = t.shape;
      stacked.insert(stacked.begin(), rows);
      one.insert(one.begin(), 1);
      int64_t elems = 1;
      for (int64_t d : stacked)
        elems = checkedMul(elems, d).value_or(kMaxTensorElements + 1);
      if (elems > kMaxTensorElements)
        ctx.fail(cat("scan output '", o, "': ", rows, " rows of ", t.str(),
                     " are too many elements (lower them with --max ", n.output(states), "=N)"));
      Value *stack = stackIns[static_cast<size_t>(k)];
      stack->setType(TensorType(t.dtype, stacked));
      outs.push_back(ctx.emit(Op::ScatterND, {stack, at, ctx.reshape(v, one)}));
    }
    outs.push_back(ctx.emit(Op::Add, {iter, constant("one", 1)}));
  }

  // After a run-time loop with scan outputs: the count of iterations run becomes a data dim
  // (set_dim, bounded by scanBound) and each stack is sliced to it.
  void sliceScanStacks(ConvertCtx &ctx, const onnx::NodeProto &n, Node &node, int states,
                       int scanOut, int64_t scanBound) {
    Value *count = node.result(static_cast<size_t>(states + scanOut));
    Value *len =
        ctx.emitDataDim(Op::SetDim, {count}, {}, 1, scanBound, static_cast<size_t>(states))[0];
    const std::string &dim = len->def()->s("dim");
    const int64_t bound = len->def()->i("bound");
    for (int k = 0; k < scanOut && states + k < n.output_size(); ++k) {
      if (n.output(states + k).empty())
        continue;
      Value *stack = node.result(static_cast<size_t>(states + k));
      env_.values[n.output(states + k)] = ctx.emit(Op::Slice, {stack},
                                                   {{"starts", Shape{0}},
                                                    {"ends", Shape{bound}},
                                                    {"axes", Shape{0}},
                                                    {"steps", Shape{1}},
                                                    {"sym_ends", std::vector<std::string>{dim}}});
    }
  }

  // A Loop kept at run time (ONNX Loop semantics; interp kernel_Loop, plan `loop` steps): a loop
  // node owning its body, converted into a graph of its own. The values the body reads from
  // enclosing graphs become body inputs (operands of the node after the carried values);
  // constants are copied in, so they fold inside the body. The carried values must keep their
  // types from one iteration to the next, and scan outputs (stacked per iteration, so as long
  // as the loop runs) need a trip count known at compile time.
  void runtimeLoop(const onnx::NodeProto &n, int index) {
    ConvertCtx ctx(env_, n, index, opset_);
    const onnx::GraphProto &body = graphAttr(ctx, n, "body");
    const int states = n.input_size() - 2;
    if (states < 0 || body.input_size() != 2 + states || body.output_size() < 1 + states)
      ctx.fail(cat("the body takes ", body.input_size(), " inputs and returns ", body.output_size(),
                   " values for ", std::max(states, 0), " loop-carried values"));
    const int scanOut = body.output_size() - 1 - states;
    if (n.output_size() > states + scanOut)
      ctx.fail(cat("the loop has ", n.output_size(), " outputs, its body ", states,
                   " loop-carried values and ", scanOut, " scan outputs"));
    for (int j = 0; j < states; ++j)
      if (seqs_.count(n.input(2 + j))) { // a carried sequence: unrolled, or nothing
        std::string what = "of a loop carrying a sequence (unrolled at compile time)";
        if (ctx.hasInput(0))
          ctx.requireConst(0, "trip count " + what);
        if (ctx.hasInput(1))
          ctx.requireConst(1, "condition " + what);
        ctx.fail(cat("loop-carried sequence '", n.input(2 + j), "': a loop carrying a sequence ",
                     "is unrolled at compile time, at most ", kMaxUnroll, " iterations with a ",
                     "condition known then"));
      }
    // Scan outputs (a value per iteration, stacked): as long as the iterations the loop runs,
    // known only at run time, at most the trip count when it is a constant, or the --max the
    // user gives for the first scan output.
    int64_t scanBound = -1;
    if (scanOut > 0) {
      const int first = states; // the node output of the first scan output
      if (const Tensor *m = ctx.constInput(0);
          m && m->numel() == 1 && m->getInt(0) >= 0 && m->getInt(0) <= kMaxTensorElements)
        scanBound = m->getInt(0);
      if (auto most = ctx.dataDimMaxEntry(static_cast<size_t>(first)))
        scanBound = scanBound < 0 ? most->second : std::min(scanBound, most->second);
      if (scanBound < 0)
        ctx.fail(cat("the scan outputs of a loop kept at run time are as long as the iterations "
                     "it runs, and the trip count M gives no bound",
                     ctx.hasInput(0) ? "" : " (none)", ": give their most with --max ",
                     n.output(first), "=N"));
    }
    auto scalar = [&](size_t i, DType dt, const char *what) {
      Value *v = ctx.input(i);
      const TensorType &t = v->type();
      if (t.dtype != dt || !t.isStatic() || t.numel() != 1)
        ctx.fail(cat(what, " '", n.input(static_cast<int>(i)), "' is ", t.str(), ", not one ",
                     dtypeName(dt)));
      return ctx.reshape(v, {});
    };
    Value *trip = ctx.hasInput(0) ? scalar(0, DType::I64, "trip count M")
                                  : ctx.constant(Tensor::fromI64({INT64_MAX}, {}));
    Value *cond = nullptr;
    if (ctx.hasInput(1)) {
      cond = scalar(1, DType::Bool, "condition");
    } else {
      Tensor yes(TensorType(DType::Bool, {}));
      yes.setInt(0, 1);
      cond = ctx.constant(yes);
    }
    std::vector<Value *> operands = {trip, cond};
    for (int j = 0; j < states; ++j)
      operands.push_back(ctx.input(static_cast<size_t>(2 + j)));

    // The body graph, its inputs mirroring the operands.
    std::string name = "loop_" + (n.name().empty() ? n.output(0) : n.name());
    for (char &ch : name)
      if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_')
        ch = '_';
    auto g = std::make_shared<Graph>(name);
    std::vector<std::string> bodyIn;
    for (int k = 0; k < body.input_size(); ++k)
      bodyIn.push_back(body.input(k).name().empty() ? cat("in", k) : body.input(k).name());
    std::unordered_map<std::string, Value *> values;
    for (size_t k = 0; k < operands.size(); ++k) {
      TensorType t = k == 0 ? TensorType(DType::I64, {}) : operands[k]->type();
      Value *v = g->addInput(bodyIn[k], t);
      v->loc = Location(bodyIn[k]);
      values[bodyIn[k]] = v;
    }
    // Scan outputs kept at run time: each a carried stack of scanBound rows that the body writes
    // its value into at row `iteration` (scatter_nd), and one carried count of the iterations
    // run (iteration + 1); after the loop, set_dim makes the count a data dim and each stack is
    // sliced to it. The stacks' types are the body's values', known once it is converted: their
    // inputs are typed then, their initial values (zeros) made in the outer graph after.
    std::vector<Value *> stackIns;
    for (int k = 0; k <= scanOut && scanOut > 0; ++k) { // the stacks, then the count
      std::string in = k < scanOut ? cat(name, ".scan", k) : cat(name, ".count");
      Value *v = g->addInput(in, TensorType(DType::I64, {}));
      v->loc = Location(in);
      stackIns.push_back(v);
      operands.push_back(nullptr); // set after the body
    }
    // Names the body reads from outside: resolved once each, through the enclosing scopes.
    Graph *outerGraph = env_.graph;
    std::unordered_map<std::string, Value *> outerValues = std::move(env_.values);
    std::function<Value *(const std::string &)> outerCapture = std::move(env_.capture);
    std::unordered_map<std::string, Value *> captured;
    env_.graph = g.get();
    env_.values = std::move(values);
    env_.capture = [&](const std::string &vname) -> Value * {
      if (auto it = captured.find(vname); it != captured.end())
        return it->second;
      Value *outer = nullptr;
      if (auto it = outerValues.find(vname); it != outerValues.end())
        outer = it->second;
      else if (outerCapture)
        outer = outerCapture(vname);
      if (!outer)
        return nullptr;
      Value *v = nullptr;
      if (auto sym = env_.symValues.find(outer); sym != env_.symValues.end())
        ctx.fail(cat("the body reads '", vname, "', the shape value ", symElemsStr(sym->second),
                     " computed from the symbolic dims: not supported in a loop kept at run "
                     "time (bind the dims with --dim NAME=N)"));
      if (outer->isWeight()) {
        v = g->addWeight(vname, outer->data());
      } else {
        v = g->addInput(vname, outer->type());
        operands.push_back(outer);
      }
      v->loc = Location(vname);
      return captured[vname] = v;
    };
    auto restore = [&] {
      env_.graph = outerGraph;
      env_.values = std::move(outerValues);
      env_.capture = std::move(outerCapture);
    };
    std::vector<Value *> outs;
    try {
      addBranchWeights(ctx, body);
      for (const onnx::NodeProto &m : body.node())
        convertNode(m, index);
      for (int k = 0; k < 1 + states; ++k) {
        const std::string &o = body.output(k).name();
        auto it = env_.values.find(o);
        Value *v = it != env_.values.end() ? it->second : env_.capture(o);
        if (!v)
          ctx.fail(cat("body output '", o, "' is not computed"));
        if (k == 0 && !ctx.hasInput(1)) {
          // No condition input: ONNX ignores the body's condition (a for loop).
          Tensor yes(TensorType(DType::Bool, {}));
          yes.setInt(0, 1);
          v = g->addWeight(cat(name, ".true"), std::make_shared<const Tensor>(std::move(yes)));
        } else if (k == 0) {
          if (v->type().dtype != DType::Bool || v->type().numel() != 1)
            ctx.fail(cat("body output '", o, "' (the condition) is ", v->type().str(),
                         ", not one bool"));
          if (v->type().rank() != 0)
            v = g->createNode(Op::Reshape, {v}, {{"shape", Shape{}}}, ctx.loc())->result();
        } else if (v->type() != operands[static_cast<size_t>(1 + k)]->type()) {
          ctx.fail(cat("loop-carried value '", n.input(1 + k), "' is ",
                       operands[static_cast<size_t>(1 + k)]->type().str(), " but the body returns ",
                       v->type().str(), " for it: a loop kept at run time needs its carried ",
                       "values to keep their types (bind the trip count with --const to unroll)"));
        }
        // Each output a distinct node result of the body.
        bool shared = std::find(outs.begin(), outs.end(), v) != outs.end();
        if (v->kind() != ValueKind::Result || shared)
          v = g->createNode(Op::Identity, {v}, {}, ctx.loc())->result();
        outs.push_back(v);
      }
      if (scanOut > 0)
        appendScanStacks(ctx, n, body, *g, name, states, scanBound, stackIns, outs);
    } catch (...) {
      restore();
      throw;
    }
    restore();
    g->setOutputs(outs);
    g->removeDeadCode();
    for (int k = 0; k <= scanOut && scanOut > 0; ++k) { // the stacks' zeros, the count's 0
      const TensorType &t = stackIns[static_cast<size_t>(k)]->type();
      ctx.checkComputeBudget(t.bytes());
      Value *w = outerGraph->addWeight(stackIns[static_cast<size_t>(k)]->name() + ".init",
                                       std::make_shared<const Tensor>(Tensor(t)));
      w->loc = ctx.loc();
      operands[static_cast<size_t>(2 + states + k)] = w;
    }
    std::vector<TensorType> types;
    for (int j = 0; j < states + (scanOut > 0 ? scanOut + 1 : 0); ++j)
      types.push_back(operands[static_cast<size_t>(2 + j)]->type());
    Node *node = outerGraph->addNode(Op::Loop, operands, types, {}, ctx.loc());
    node->body = std::move(g);
    for (int j = 0; j < states; ++j)
      if (j < n.output_size() && !n.output(j).empty())
        env_.values[n.output(j)] = node->result(static_cast<size_t>(j));
    if (scanOut > 0)
      sliceScanStacks(ctx, n, *node, states, scanOut, scanBound);
  }

  // Empty constants are fine while they are folded away (Resize's empty roi, the shape of a
  // scalar); an empty value that stays in the graph would reach code generation, which has no
  // empty tensors: refuse it, naming where it comes from.
  void checkNoEmptyValues(const Graph &graph) {
    auto where = [](const Value *v) {
      std::string name = v->name().empty() ? "" : cat(" '", v->name(), "'");
      return cat(name, " ", v->type().str());
    };
    // (An input no node reads may be empty: CastLike's type template, given as [0]. So may a
    // graph output: a constant holding no values, through an identity at most.)
    auto onlyOutput = [&](const Value *v) {
      for (const Node *u : graph.users(v))
        if (u->op() != Op::Identity || !graph.isOutput(u->result()) ||
            graph.users(u->result()).size() != 0)
          return false;
      return true;
    };
    for (const Value *in : graph.inputs())
      if (std::string p = emptyDimProblem(in->type()); !p.empty() && graph.hasUses(in))
        fail(cat("input '", in->name(), "' ", p,
                 ": an empty value is supported only where it folds to a constant"));
    // (Nor a side of a choose: the empty result of the branch that found nothing.)
    auto onlyChosen = [&](const Value *v) {
      const auto users = graph.users(v);
      return !users.empty() && std::all_of(users.begin(), users.end(),
                                           [](const Node *u) { return u->op() == Op::Choose; });
    };
    for (const Value *w : graph.weights())
      if (std::string p = emptyDimProblem(w->type());
          !p.empty() && !onlyOutput(w) && !onlyChosen(w))
        fail(cat(w->loc.empty() || w->loc.str() == w->name() ? std::string()
                                                             : cat("node '", w->loc.str(), "': "),
                 "constant", where(w), " ", p,
                 ": an empty value is supported only where it folds to a constant"));
    for (const Node *n : graph.nodes())
      for (const Value *r : n->results())
        if (std::string p = emptyDimProblem(r->type());
            !p.empty() && !(n->op() == Op::Identity && n->operand(0)->isWeight() && onlyOutput(r)))
          fail(cat("node '", n->loc.str(), "': result", where(r), " ", p,
                   ": an empty value is supported only where it folds to a constant"));
  }

  // A static type from ONNX's shape inference must agree with ours.
  void crossCheck(const ConvertCtx &ctx, const std::string &out) {
    const TensorType &ours = env_.values.at(out)->type();
    auto it = onnxTypes_.find(out);
    if (it != onnxTypes_.end() &&
        (it->second.dtype != ours.dtype || it->second.shape != ours.shape))
      ctx.fail(cat("result '", out, "' is ", ours.str(), " but ONNX shape inference gives ",
                   it->second.str()));
    auto alt = onnxTypesAlt_.find(out);
    if (alt == onnxTypesAlt_.end())
      return;
    std::vector<int64_t> there;
    for (size_t i = 0; i < ours.shape.size(); ++i)
      there.push_back(ours.symDim(i).eval(otherPoint_).value_or(-1));
    if (there != alt->second.shape) {
      std::string point;
      for (const auto &[name, v] : otherPoint_)
        point += cat(point.empty() ? "" : ", ", name, " = ", v);
      ctx.fail(cat("result '", out, "' is ", ours.str(), ", which is ", shapeStr(there), " at ",
                   point, ", but ONNX shape inference gives ", shapeStr(alt->second.shape),
                   " there: this conversion does not follow the symbolic dims (bind them with "
                   "--dim NAME=N)"));
    }
  }

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

} // namespace

std::unique_ptr<Graph> importOnnx(const std::string &path, const ImportOptions &options,
                                  std::map<std::string, TensorType> *constTypes) {
  Importer imp(path, options);
  std::unique_ptr<Graph> g = imp.run();
  if (constTypes)
    *constTypes = imp.constTypes();
  return g;
}

} // namespace aicf
