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
#include "frontend/onnx_importer_impl.h"

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

namespace aicf {

namespace onnx_import {

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

} // namespace

// A node's inputs and, for If (or any node with graph attributes), the outer values its
// subgraphs read: names used there and defined by none of their nodes, initializers or
// inputs (ONNX's implicit inputs), which order the node after their producers.
std::vector<std::string> Importer::nodeInputs(const onnx::NodeProto &n) {
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

void Importer::load() {
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

void Importer::checkOpset() {
  opset_ = -1;
  for (const auto &imp : model_.opset_import())
    if (isDefaultDomain(imp.domain()))
      opset_ = static_cast<int>(imp.version());
  if (opset_ < 0) {
    checkOps(); // a model of another domain only (training ops): its ops say more
    fail("the model imports no opset of the default ONNX domain");
  }
  if (opset_ < kMinOpset || opset_ > kMaxOpset)
    fail(
        cat("opset ", opset_, " is not supported (supported: ", kMinOpset, " to ", kMaxOpset, ")"));
  newerThanLib_ = opset_ > kOnnxLibMaxOpset || model_.ir_version() > onnx::IR_VERSION;
}

// Unknown domains and unsupported ops, each listed in full: "3 unsupported ops: NonMaxSuppression
// (1: 'nms_0'), TopK (2: 'topk_1', 'topk_2')".
void Importer::checkOps() {
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
    fail(cat(numDomain, numDomain == 1 ? " op is" : " ops are",
             " in an unknown domain (only the default ONNX domain is supported): ", list(domains)));
  if (numUnsupported)
    fail(cat(numUnsupported, " unsupported op", numUnsupported == 1 ? "" : "s", ": ",
             list(unsupported)));
}

// Every node input must be defined; nodes are put in a topological order (stable: the file's
// order where it is already valid), and a cycle is reported with the nodes on it.
void Importer::sortNodes() {
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

[[noreturn]] void Importer::reportCycle(const std::vector<int> &pending,
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

void Importer::collectUses() {
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

void Importer::loadInitializers() {
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

// libonnx 1.12's convPoolShapeInference divides by each stride without checking it (a zero
// stride is SIGFPE) and trusts the lengths of kernel_shape, strides, dilations and pads. Check
// them for every op that uses it (and ConvTranspose's inference) before libonnx sees them.
void Importer::checkWindowAttributes() {
  static const std::set<std::string> windowOps = {"Conv", "ConvTranspose", "MaxPool", "AveragePool",
                                                  "LpPool"};
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

void Importer::runChecker() {
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

// ONNX's inference on the bound model; its static results cross-check ours in build().
void Importer::inferShapes() {
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
void Importer::inferShapesAtOtherPoint() {
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

void Importer::build() {
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
    bool isSeq =
        o.type().has_sequence_type() ||
        (o.type().has_optional_type() && o.type().optional_type().elem_type().has_sequence_type());
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
void Importer::convertNode(const onnx::NodeProto &n, int index) {
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
  {
    QuantGridScope grid(ctx); // a QDQ model's data movement on the integers (onnx_quant_grid.cpp)
    entry->convert(ctx);
    grid.finish(ctx);
  }
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

// Empty constants are fine while they are folded away (Resize's empty roi, the shape of a
// scalar); an empty value that stays in the graph would reach code generation, which has no
// empty tensors: refuse it, naming where it comes from.
void Importer::checkNoEmptyValues(const Graph &graph) {
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
    if (std::string p = emptyDimProblem(w->type()); !p.empty() && !onlyOutput(w) && !onlyChosen(w))
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
void Importer::crossCheck(const ConvertCtx &ctx, const std::string &out) {
  const TensorType &ours = env_.values.at(out)->type();
  auto it = onnxTypes_.find(out);
  if (it != onnxTypes_.end() && (it->second.dtype != ours.dtype || it->second.shape != ours.shape))
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

} // namespace onnx_import

std::unique_ptr<Graph> importOnnx(const std::string &path, const ImportOptions &options,
                                  std::map<std::string, TensorType> *constTypes) {
  onnx_import::Importer imp(path, options);
  std::unique_ptr<Graph> g = imp.run();
  if (constTypes)
    *constTypes = imp.constTypes();
  return g;
}

} // namespace aicf
