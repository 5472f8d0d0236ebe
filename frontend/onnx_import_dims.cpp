// Importer step 5 (onnx_importer.cpp): the model's inputs bound - sequence inputs expanded to
// their elements, dynamic dims bound by --shape / --dim (a ranged dim at its planning value),
// inputs fixed by --const - within the limits of ir/types.h.
#include "frontend/onnx_importer_impl.h"

#include "ir/npy.h"
#include "ir/verifier.h"
#include "support/checked_math.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

namespace aicf::onnx_import {

namespace {

std::string shapeFlag(const std::vector<int64_t> &shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "x" : "") + (shape[i] < 0 ? std::string("N") : std::to_string(shape[i]));
  return s;
}

} // namespace

// Sequence inputs (--seq NAME=COUNT) become the tensor inputs NAME.0 ... of the sequence's
// element type (and shape, when it gives one: else --shape NAME.K=...); build() gathers them
// into the sequence NAME. An optional input is refused.
void Importer::expandSequenceInputs() {
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

// Step 5: the inputs bound. --const inputs become constants, the rest get their dims from --dim
// and --shape (every dynamic dim bound, or an error naming the flag for each), within the size
// limits; the bound shapes are written back into the model for ONNX's inference.
void Importer::bindDims() {
  declareInputs();
  BoundDims b = namedDims();
  resolveInputs(b);
  checkInputSizes();
  writeBoundShapes(b.params);
}

// The graph's inputs as declared (inputs_), those --const binds made constants (constInputs_);
// a --const naming no input and an output of a type we cannot represent are errors.
void Importer::declareInputs() {
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
}

// Named dims: --dim first, then what --shape implies for the inputs it binds. A dim
// compiled for a range is bound to its planning value here (ONNX's inference and the
// folding of shape computations see that), and stays a symbol in the inputs' types.
Importer::BoundDims Importer::namedDims() {
  std::map<std::string, int64_t> dimFlags = opts_.dimParams;
  BoundDims b;
  std::map<std::string, const DimRange *> &ranged = b.ranged;
  for (const DimRange &r : opts_.dimRanges) {
    dimFlags[r.name] = r.opt;
    ranged[r.name] = &r;
  }
  std::map<std::string, int64_t> &params = b.params;
  params = dimFlags;
  std::map<std::string, std::string> paramSource;
  std::set<std::string> known;
  for (const InputDecl &d : inputs_)
    for (const std::string &n : d.type.dimNames)
      if (!n.empty())
        known.insert(n);
  for (const auto &[p, v] : dimFlags) {
    std::string flag = ranged.count(p) ? cat("--dim ", p, "=", ranged[p]->min, "..", ranged[p]->max,
                                             "@", ranged[p]->opt)
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
  return b;
}

// Resolve every input; collect what stays unbound, grouped by name.
void Importer::resolveInputs(const BoundDims &b) {
  const std::map<std::string, int64_t> &params = b.params;
  const std::map<std::string, const DimRange *> &ranged = b.ranged;
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
}

// Every bound input within the size limits, checked before ONNX's inference computes with
// these dims. An empty input (a 0 dim) is refused after conversion (checkNoEmptyValues), so
// that one used where a constant is needed gets that error first; ONNX's inference does not
// see it (its Reshape inference divides by dims).
void Importer::checkInputSizes() {
  for (const InputDecl &d : inputs_) {
    auto flagShape = opts_.inputShapes.find(d.name);
    std::string how = flagShape != opts_.inputShapes.end()
                          ? cat(" (--shape ", d.name, "=", shapeFlag(flagShape->second), ")")
                          : "";
    if (std::string p = tensorSizeProblem(d.type); !p.empty())
      fail(cat("input '", d.name, "' ", p, how));
    hasEmptyInput_ = hasEmptyInput_ || !emptyDimProblem(d.type).empty();
  }
}

// Write the bound shapes back so ONNX shape inference sees them; named dims elsewhere in the
// model (outputs, value_info) get their values too.
void Importer::writeBoundShapes(const std::map<std::string, int64_t> &params) {
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

// The value --const binds to input `d`: a .npy file of the input's dtype whose shape fits the
// declared one (its dynamic dims take the file's), or one number for an input of one element.
Tensor Importer::constInput(const ConstFlag &f, const InputDecl &d) const {
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
void Importer::checkDataDimMax() const {
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

} // namespace aicf::onnx_import
