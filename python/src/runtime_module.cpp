// aicf._runtime: the Python binding of the aicf runtime (runtime/aicf_runtime.h). A Model owns
// one aicf_model; run() takes numpy arrays by name and returns new ones, reading inputs in
// place when they are C-contiguous arrays of the input's dtype (otherwise one converting copy)
// and letting the runtime write straight into the output arrays. The GIL is released while the
// model runs, and a per-model lock serialises runs of one model from several Python threads
// (the C runtime runs one model object from one thread at a time); different models run in
// parallel. read_yaml() turns plan.yaml / explain.yaml into dicts and lists with yaml-cpp.
#include <aicf_runtime.h>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace py = pybind11;

namespace {

struct AicfError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(int status) {
  if (status != 0)
    throw AicfError(aicf_last_error());
}

// The numpy dtype of an aicf dtype; bf16 has none in numpy: its values travel as uint16 bits.
py::dtype numpyDtype(const std::string &t) {
  static const std::map<std::string, const char *> names = {
      {"f64", "float64"}, {"f32", "float32"}, {"f16", "float16"}, {"bf16", "uint16"},
      {"i64", "int64"},   {"i32", "int32"},   {"i16", "int16"},   {"i8", "int8"},
      {"u64", "uint64"},  {"u32", "uint32"},  {"u16", "uint16"},  {"u8", "uint8"},
      {"bool", "bool"}};
  auto it = names.find(t);
  if (it == names.end())
    throw AicfError("unsupported dtype " + t);
  return py::dtype(it->second);
}

py::dict tensorDict(const aicf_tensor_info &t) {
  py::dict d;
  d["name"] = t.name;
  d["dtype"] = t.dtype;
  d["shape"] = py::tuple(py::cast(std::vector<int64_t>(t.shape, t.shape + t.rank)));
  d["bytes"] = t.bytes;
  return d;
}

class Model {
public:
  Model(const std::string &dir, int device) : m_(aicf_open_device(dir.c_str(), device)) {
    if (!m_)
      throw AicfError(aicf_last_error());
  }
  ~Model() { close(); }
  // The model's lock, taken with the GIL released: a thread holding it may be waiting for the
  // GIL (to build the result arrays after a run), so waiting for it with the GIL held would
  // deadlock.
  std::unique_lock<std::mutex> lock() const {
    std::unique_lock<std::mutex> l(mu_, std::defer_lock);
    py::gil_scoped_release release;
    l.lock();
    return l;
  }
  void close() {
    auto held = lock();
    if (m_)
      aicf_close(m_);
    m_ = nullptr;
  }
  aicf_model *get() const {
    if (!m_)
      throw AicfError("the model is closed");
    return m_;
  }
  std::vector<aicf_tensor_info> infos(bool inputs) const {
    int n = inputs ? aicf_num_inputs(get()) : aicf_num_outputs(get());
    std::vector<aicf_tensor_info> v(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i)
      check(inputs ? aicf_input_info(get(), i, &v[i]) : aicf_output_info(get(), i, &v[i]));
    return v;
  }
  py::list describe(bool inputs) const {
    auto held = lock();
    py::list l;
    for (const aicf_tensor_info &t : infos(inputs))
      l.append(tensorDict(t));
    return l;
  }
  py::list dims() const {
    auto held = lock();
    py::list l;
    for (int i = 0; i < aicf_num_dims(get()); ++i) {
      aicf_dim_desc d;
      check(aicf_dim_info(get(), i, &d));
      py::dict e;
      e["name"] = d.name;
      e["min"] = d.min;
      e["max"] = d.max;
      e["opt"] = d.opt;
      l.append(e);
    }
    return l;
  }
  void setThreads(int n) {
    auto held = lock();
    check(aicf_set_num_threads(get(), n));
  }
  py::list steps() const {
    py::list l;
    for (int s = 0; s < aicf_num_steps(get()); ++s) {
      py::dict d;
      d["kind"] = aicf_step_kind(get(), s);
      const char *sym = aicf_step_symbol(get(), s);
      d["symbol"] = sym ? sym : "";
      l.append(d);
    }
    return l;
  }

  // feeds: {name: array}. Returns {name: array} in the folder's output order; with
  // step_seconds, also each step's wall time (aicf_run_profiled).
  py::dict run(const py::dict &feeds, py::list *stepSeconds) {
    auto held = lock();
    std::vector<aicf_tensor_info> ins = infos(true);
    std::vector<py::array> keep; // the arrays read, alive until the run ends
    std::vector<const void *> inPtrs;
    size_t used = 0;
    for (size_t i = 0; i < ins.size(); ++i) {
      py::str name(ins[i].name);
      if (!feeds.contains(name))
        throw py::key_error(std::string("input '") + ins[i].name + "' is missing");
      ++used;
      // No copy when the array already is C-contiguous; a dtype other than the input's is an
      // error (as in ONNX Runtime), not a silent conversion.
      py::array a = py::array::ensure(feeds[name]);
      if (!a)
        throw py::type_error(std::string("input '") + ins[i].name + "' is not an array");
      py::dtype want = numpyDtype(ins[i].dtype);
      if (!a.dtype().equal(want))
        throw py::type_error(std::string("input '") + ins[i].name + "' is " +
                             std::string(py::str(a.dtype())) + "; the model takes " + ins[i].dtype +
                             " (numpy " + std::string(py::str(want)) + ")");
      if (!(a.flags() & py::array::c_style))
        a = py::module_::import("numpy").attr("ascontiguousarray")(a);
      std::vector<int64_t> shape(a.shape(), a.shape() + a.ndim());
      if (a.ndim() > AICF_MAX_RANK)
        throw AicfError(std::string("input '") + ins[i].name + "': rank above 8");
      check(aicf_set_input_shape(get(), static_cast<int>(i), static_cast<int>(a.ndim()),
                                 shape.data()));
      inPtrs.push_back(a.data());
      keep.push_back(a);
    }
    if (used != feeds.size())
      for (auto item : feeds) {
        std::string n = py::str(item.first);
        bool known = false;
        for (const aicf_tensor_info &t : ins)
          known = known || n == t.name;
        if (!known)
          throw py::key_error("'" + n + "' is not an input of the model");
      }
    std::vector<aicf_tensor_info> outs = infos(false);
    py::dict result;
    std::vector<void *> outPtrs;
    // Each output's memory holds its capacity. An output whose length is known only at run time
    // gets its bound's size (flat when that is not the shape reported now), and is returned at
    // the shape the run produced: the buffer itself when that is its shape, else a copy.
    std::vector<py::array> buffers;
    for (int i = 0; i < static_cast<int>(outs.size()); ++i) {
      size_t capacity = 0;
      check(aicf_output_capacity(get(), i, &capacity));
      py::dtype dt = numpyDtype(outs[i].dtype);
      std::vector<py::ssize_t> shape(outs[i].shape, outs[i].shape + outs[i].rank);
      if (capacity != outs[i].bytes)
        shape = {static_cast<py::ssize_t>(capacity / static_cast<size_t>(dt.itemsize()))};
      py::array a(dt, shape);
      outPtrs.push_back(a.mutable_data());
      buffers.push_back(a);
    }
    std::vector<double> secs(static_cast<size_t>(aicf_num_steps(get())));
    int status;
    {
      py::gil_scoped_release release;
      status = stepSeconds ? aicf_run_profiled(get(), inPtrs.data(), outPtrs.data(), secs.data())
                           : aicf_run(get(), inPtrs.data(), outPtrs.data());
    }
    check(status);
    outs = infos(false);
    for (size_t i = 0; i < outs.size(); ++i) {
      const aicf_tensor_info &o = outs[i];
      std::vector<py::ssize_t> shape(o.shape, o.shape + o.rank);
      const py::array &b = buffers[i];
      if (static_cast<size_t>(b.ndim()) == shape.size() &&
          std::equal(shape.begin(), shape.end(), b.shape())) {
        result[py::str(o.name)] = b;
        continue;
      }
      py::array a(numpyDtype(o.dtype), shape);
      if (o.bytes > 0)
        std::memcpy(a.mutable_data(), b.data(), o.bytes);
      result[py::str(o.name)] = a;
    }
    if (stepSeconds)
      for (double s : secs)
        stepSeconds->append(s);
    return result;
  }

private:
  aicf_model *m_;
  mutable std::mutex mu_;
};

py::object yamlToPython(const YAML::Node &n) {
  switch (n.Type()) {
  case YAML::NodeType::Map: {
    py::dict d;
    for (const auto &kv : n)
      d[py::str(kv.first.as<std::string>())] = yamlToPython(kv.second);
    return std::move(d);
  }
  case YAML::NodeType::Sequence: {
    py::list l;
    for (const auto &e : n)
      l.append(yamlToPython(e));
    return std::move(l);
  }
  case YAML::NodeType::Scalar: {
    const std::string &s = n.Scalar();
    if (n.Tag() != "!") { // plain scalars: numbers and booleans as such; quoted ones stay text
      long long i;
      double f;
      bool b;
      if (YAML::convert<long long>::decode(n, i))
        return py::int_(i);
      if (YAML::convert<double>::decode(n, f))
        return py::float_(f);
      if (YAML::convert<bool>::decode(n, b))
        return py::bool_(b);
    }
    return py::str(s);
  }
  default: return py::none();
  }
}

} // namespace

PYBIND11_MODULE(_runtime, m) {
  m.doc() = "aicf runtime binding (see the aicf package)";
  static py::exception<AicfError> error(m, "Error", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p)
        std::rethrow_exception(p);
    } catch (const AicfError &e) {
      error(e.what());
    }
  });
  py::class_<Model>(m, "Model")
      .def(py::init<const std::string &, int>(), py::arg("folder"), py::arg("device") = 0)
      .def("inputs", [](const Model &md) { return md.describe(true); })
      .def("outputs", [](const Model &md) { return md.describe(false); })
      .def("dims", &Model::dims)
      .def("steps", &Model::steps)
      .def("set_threads", &Model::setThreads)
      .def("run", [](Model &md, const py::dict &feeds) { return md.run(feeds, nullptr); })
      .def("run_profiled",
           [](Model &md, const py::dict &feeds) {
             py::list secs;
             py::dict out = md.run(feeds, &secs);
             return py::make_tuple(out, secs);
           })
      .def("close", &Model::close);
  m.def(
      "read_yaml",
      [](const std::string &path) {
        try {
          return yamlToPython(YAML::LoadFile(path));
        } catch (const YAML::Exception &e) {
          throw AicfError(path + ": " + e.what());
        }
      },
      py::arg("path"));
}
