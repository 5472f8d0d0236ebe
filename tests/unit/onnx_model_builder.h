// ModelBuilder: small ONNX ModelProtos built one call at a time for the importer tests
// (tests/unit/test_importer*.cpp), written to a scratch folder and imported; with the helpers
// those tests share (attribute setters, the op names of a graph, f32 tensors).
#pragma once

#include "frontend/onnx_importer.h"
#include "frontend/onnx_inference.h"
#include "ir/graph.h"
#include "ir/printer.h"
#include "ir/types.h"
#include "support/diagnostics.h"

#include <doctest/doctest.h>

#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include <unistd.h>

namespace aicf::onnx_model_builder {

namespace fs = std::filesystem;
using onnx::TensorProto;

// A dim of a declared input / output: a value, a dim_param name, or unknown (Dim()).
struct Dim {
  std::variant<std::monostate, int64_t, std::string> v;
  Dim() = default;
  Dim(int d) : v(int64_t(d)) {}
  Dim(const char *p) : v(std::string(p)) {}
};

// A scratch folder for the models the tests write, removed when the test binary exits.
inline fs::path scratchDir() {
  struct Scratch {
    fs::path dir = fs::temp_directory_path() / cat("aicf_importer_test_", ::getpid());
    ~Scratch() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  };
  static Scratch scratch;
  fs::create_directories(scratch.dir);
  return scratch.dir;
}

// Builds a ModelProto one call at a time and writes it to a scratch file.
class ModelBuilder {
public:
  explicit ModelBuilder(int opset, int irVersion = 8) {
    m_.set_ir_version(irVersion);
    m_.set_producer_name("test_importer");
    auto *o = m_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    m_.mutable_graph()->set_name("test");
  }

  ModelBuilder &input(const std::string &name, int elemType, std::vector<Dim> dims) {
    setType(m_.mutable_graph()->add_input(), name, elemType, &dims);
    return *this;
  }
  // An input whose rank is unknown (no shape at all).
  ModelBuilder &inputNoShape(const std::string &name, int elemType) {
    setType(m_.mutable_graph()->add_input(), name, elemType, nullptr);
    return *this;
  }
  ModelBuilder &output(const std::string &name, int elemType = TensorProto::FLOAT) {
    setType(m_.mutable_graph()->add_output(), name, elemType, nullptr);
    return *this;
  }
  ModelBuilder &output(const std::string &name, int elemType, std::vector<Dim> dims) {
    setType(m_.mutable_graph()->add_output(), name, elemType, &dims);
    return *this;
  }

  ModelBuilder &initI64(const std::string &name, std::vector<int64_t> vals,
                        std::vector<int64_t> dims) {
    TensorProto *t = m_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(TensorProto::INT64);
    for (int64_t d : dims)
      t->add_dims(d);
    for (int64_t v : vals)
      t->add_int64_data(v);
    return *this;
  }
  ModelBuilder &initI64(const std::string &name, std::vector<int64_t> vals) {
    return initI64(name, vals, {static_cast<int64_t>(vals.size())});
  }
  ModelBuilder &initF32(const std::string &name, std::vector<float> vals,
                        std::vector<int64_t> dims) {
    TensorProto *t = m_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(TensorProto::FLOAT);
    for (int64_t d : dims)
      t->add_dims(d);
    for (float v : vals)
      t->add_float_data(v);
    return *this;
  }
  TensorProto &initializer() { return *m_.mutable_graph()->add_initializer(); }

  onnx::NodeProto &node(const std::string &op, std::vector<std::string> ins,
                        std::vector<std::string> outs, const std::string &name = "") {
    onnx::NodeProto *n = m_.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? cat(op, "_", m_.graph().node_size() - 1) : name);
    for (auto &i : ins)
      n->add_input(i);
    for (auto &o : outs)
      n->add_output(o);
    return *n;
  }

  onnx::ModelProto &proto() { return m_; }

  // Outputs declared without a shape get ONNX's inferred one (the checker wants a shape).
  std::string save(const std::string &file) const {
    onnx::ModelProto m = m_;
    if (IsolatedInference r = inferShapesIsolated(m); r.inferred) // some models crash libonnx
      *m.mutable_graph()->mutable_output() = r.inferred->output();
    for (int i = 0; i < m.graph().output_size(); ++i)
      if (!m_.graph().output(i).type().tensor_type().has_shape() &&
          !m.graph().output(i).type().tensor_type().has_shape())
        *m.mutable_graph()->mutable_output(i)->mutable_type() = m_.graph().output(i).type();
    fs::path p = scratchDir() / file;
    fs::create_directories(p.parent_path());
    std::ofstream f(p, std::ios::binary);
    REQUIRE(m.SerializeToOstream(&f));
    return p.string();
  }

  std::unique_ptr<Graph> import(const std::string &file, const ImportOptions &opts = {}) const {
    return importOnnx(save(file), opts);
  }

private:
  static void setType(onnx::ValueInfoProto *v, const std::string &name, int elemType,
                      const std::vector<Dim> *dims) {
    v->set_name(name);
    auto *tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elemType);
    if (!dims)
      return;
    auto *shape = tt->mutable_shape();
    for (const Dim &d : *dims) {
      auto *pd = shape->add_dim();
      if (auto *i = std::get_if<int64_t>(&d.v))
        pd->set_dim_value(*i);
      else if (auto *s = std::get_if<std::string>(&d.v))
        pd->set_dim_param(*s);
    }
  }

  onnx::ModelProto m_;
};

inline void attr(onnx::NodeProto &n, const std::string &name, int64_t v) {
  auto *a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
inline void attr(onnx::NodeProto &n, const std::string &name, double v) {
  auto *a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(static_cast<float>(v));
}
inline void attr(onnx::NodeProto &n, const std::string &name, const char *v) {
  auto *a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}
inline void attr(onnx::NodeProto &n, const std::string &name, std::vector<int64_t> v) {
  auto *a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v)
    a->add_ints(x);
}
// ConstantOfShape's `value`: a one-element float tensor.
inline void attrValue(onnx::NodeProto &n, float v) {
  auto *a = n.add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(TensorProto::FLOAT);
  a->mutable_t()->add_dims(1);
  a->mutable_t()->add_float_data(v);
}

inline void attrFloats(onnx::NodeProto &n, const std::string &name, std::vector<float> v) {
  auto *a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOATS);
  for (float x : v)
    a->add_floats(x);
}

// The graph's nodes' op names, in order.
inline std::vector<std::string> ops(const Graph &g) {
  std::vector<std::string> out;
  for (Node *n : g.nodes())
    out.push_back(n->name());
  return out;
}

using Ops = std::vector<std::string>;
using Ints = std::vector<int64_t>;

// Graphs imported for a single check stay alive until the test ends (nodes point into them).
inline const Graph &keep(std::unique_ptr<Graph> g) {
  static std::vector<std::unique_ptr<Graph>> kept;
  kept.push_back(std::move(g));
  return *kept.back();
}

inline Node *only(const Graph &g, const char *op) {
  Node *found = nullptr;
  for (Node *n : g.nodes())
    if (std::string(n->name()) == op) {
      REQUIRE_MESSAGE(!found, "more than one ", op);
      found = n;
    }
  REQUIRE_MESSAGE(found, "no ", op, " in\n", printGraph(g));
  return found;
}

inline std::string importError(const ModelBuilder &b, const std::string &file,
                               const ImportOptions &opts = {}) {
  try {
    b.import(file, opts);
  } catch (const UserError &e) {
    CHECK(e.exitCode() == 2);
    return e.what();
  }
  FAIL("import of ", file, " succeeded");
  return "";
}

inline Tensor f32Tensor(std::vector<float> v, std::vector<int64_t> shape) {
  return Tensor::fromF32(v, std::move(shape));
}

} // namespace aicf::onnx_model_builder
