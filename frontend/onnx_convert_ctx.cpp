// ConvertCtx (onnx_ops.h): what an op converter sees of its ONNX node, and how it adds nodes.
// Every node it creates carries the ONNX node's name as its location, and nodes whose operands
// are all constants are evaluated with the reference interpreter on the spot, so that
// Shape -> Gather -> Concat -> Reshape chains reach Reshape as plain constants. With symbolic
// dims the same chains carry each element as an expression beside the planning-point data
// (onnx_sym_values.h), and nothing reads such a value as data.
#include "frontend/onnx_ops.h"

#include "frontend/onnx_tensor.h"
#include "interp/interpreter.h"
#include "support/diagnostics.h"

namespace aicf {

using onnx::AttributeProto;

namespace {

// Results up to this many elements are folded when all operands are constants. Shape
// computations are tiny; integer and bool results (index tensors, masks built from Range and
// comparisons) may be larger and are still folded, float results are left to the passes.
constexpr int64_t kFoldLimit = int64_t(1) << 16;
constexpr int64_t kFoldLimitIntegral = int64_t(1) << 22;

const char *attrTypeName(int type) {
  switch (type) {
  case AttributeProto::FLOAT: return "a float";
  case AttributeProto::INT: return "an int";
  case AttributeProto::STRING: return "a string";
  case AttributeProto::TENSOR: return "a tensor";
  case AttributeProto::GRAPH: return "a graph";
  case AttributeProto::FLOATS: return "floats";
  case AttributeProto::INTS: return "ints";
  case AttributeProto::STRINGS: return "strings";
  case AttributeProto::SPARSE_TENSOR: return "a sparse tensor";
  default: return "an attribute of another kind";
  }
}

} // namespace

ConvertCtx::ConvertCtx(ImportEnv &env, const onnx::NodeProto &node, int index, int opset)
    : env_(env), node_(node), index_(index), opset_(opset),
      loc_(!node.name().empty() ? node.name()
           : node.output_size() ? node.output(0)
                                : cat("#", index)),
      outputs_(static_cast<size_t>(node.output_size()), nullptr) {}

std::string ConvertCtx::label() const {
  if (!node_.name().empty())
    return cat("node '", node_.name(), "' (", node_.op_type(), ")");
  if (node_.output_size() && !node_.output(0).empty())
    return cat("node #", index_, " (", node_.op_type(), ", output '", node_.output(0), "')");
  return cat("node #", index_, " (", node_.op_type(), ")");
}

void ConvertCtx::fail(const std::string &msg) const {
  throw UserError(cat(env_.file, ": ", label(), ": ", msg), 2);
}

// ---- inputs -----------------------------------------------------------------------------------

bool ConvertCtx::hasInput(size_t i) const {
  return i < numInputs() && !node_.input(static_cast<int>(i)).empty();
}

const std::string &ConvertCtx::inputName(size_t i) const {
  static const std::string none;
  return i < numInputs() ? node_.input(static_cast<int>(i)) : none;
}

Value *ConvertCtx::input(size_t i) const {
  if (!hasInput(i))
    fail(cat("input ", i, " is required"));
  const std::string &name = node_.input(static_cast<int>(i));
  auto it = env_.values.find(name);
  if (it != env_.values.end())
    return it->second;
  if (env_.capture)
    if (Value *v = env_.capture(name))
      return v;
  fail(cat("input '", name, "' is not defined"));
}

const Tensor *ConvertCtx::constInput(size_t i) const {
  if (!hasInput(i))
    return nullptr;
  Value *v = input(i);
  return v->isWeight() && !symValue(v) ? v->data().get() : nullptr;
}

const SymElems *ConvertCtx::symValue(const Value *v) const {
  auto it = env_.symValues.find(v);
  return it == env_.symValues.end() ? nullptr : &it->second;
}

const Tensor &ConvertCtx::requireConst(size_t i, const std::string &what) const {
  const Tensor *t = constInput(i);
  if (!t) {
    if (const SymElems *e = hasInput(i) ? symValue(input(i)) : nullptr)
      fail(cat(what, " input '", inputName(i), "' is ", symElemsStr(*e),
               ", computed from the symbolic dims: this use of a shape computation is not "
               "supported (bind the dims with --dim NAME=N)"));
    // A graph input read as a constant: the user can bind it (--const).
    const Value *v = hasInput(i) ? input(i) : nullptr;
    fail(cat(what, " input '", inputName(i), "' is not a compile-time constant",
             v && v->isInput()
                 ? cat(" (a graph input: bind it with --const ", inputName(i), "=FILE.npy)")
                 : ""));
  }
  return *t;
}

std::vector<int64_t> ConvertCtx::constInts(size_t i, const std::string &what) const {
  const Tensor &t = requireConst(i, what);
  if (!isInteger(t.dtype()))
    fail(cat(what, " input '", inputName(i), "' must be an integer tensor, got ", t.type().str()));
  return t.toInts();
}

SymElems ConvertCtx::symInts(size_t i, const std::string &what) const {
  if (hasInput(i))
    if (const SymElems *e = symValue(input(i)))
      return *e;
  SymElems out;
  for (int64_t v : constInts(i, what))
    out.emplace_back(v);
  return out;
}

std::vector<double> ConvertCtx::constDoubles(size_t i, const std::string &what) const {
  return requireConst(i, what).toDoubles();
}

// ---- outputs ----------------------------------------------------------------------------------

bool ConvertCtx::outputUsed(size_t i) const {
  return i < numOutputs() && !node_.output(static_cast<int>(i)).empty() &&
         env_.used.count(node_.output(static_cast<int>(i))) != 0;
}

void ConvertCtx::setOutput(size_t i, Value *v) {
  AICF_CHECK(i < outputs_.size() && v, "bad output ", i, " of ", label());
  outputs_[i] = v;
  if (!node_.output(static_cast<int>(i)).empty())
    env_.values[node_.output(static_cast<int>(i))] = v;
}

Value *ConvertCtx::output(size_t i) const {
  return i < outputs_.size() ? outputs_[i] : nullptr;
}

bool ConvertCtx::outputSet(size_t i) const {
  return i < outputs_.size() && outputs_[i];
}

// ---- attributes -------------------------------------------------------------------------------

const AttributeProto *ConvertCtx::findAttr(std::string_view name) const {
  for (const AttributeProto &a : node_.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

const AttributeProto &ConvertCtx::attrOfType(std::string_view name, int type) const {
  const AttributeProto *a = findAttr(name);
  AICF_CHECK(a, "attribute ", name, " looked up without checking it exists");
  if (a->type() != type && a->type() != AttributeProto::UNDEFINED)
    fail(cat("attribute '", name, "' must be ", attrTypeName(type), ", got ",
             attrTypeName(a->type())));
  return *a;
}

int64_t ConvertCtx::attrInt(std::string_view name, int64_t def) const {
  return hasAttr(name) ? attrOfType(name, AttributeProto::INT).i() : def;
}

int64_t ConvertCtx::attrIntReq(std::string_view name) const {
  if (!hasAttr(name))
    fail(cat("attribute '", name, "' is required"));
  return attrOfType(name, AttributeProto::INT).i();
}

// ONNX float attributes are fp32: defaults are rounded the same way, so an absent epsilon and
// an exported 1e-5 give the same attribute value.
double ConvertCtx::attrFloat(std::string_view name, double def) const {
  return hasAttr(name) ? attrOfType(name, AttributeProto::FLOAT).f() : static_cast<float>(def);
}

std::string ConvertCtx::attrStr(std::string_view name, const std::string &def) const {
  return hasAttr(name) ? attrOfType(name, AttributeProto::STRING).s() : def;
}

std::vector<int64_t> ConvertCtx::attrInts(std::string_view name) const {
  return attrIntsOpt(name).value_or(std::vector<int64_t>{});
}

std::optional<std::vector<int64_t>> ConvertCtx::attrIntsOpt(std::string_view name) const {
  if (!hasAttr(name))
    return std::nullopt;
  const AttributeProto &a = attrOfType(name, AttributeProto::INTS);
  return std::vector<int64_t>(a.ints().begin(), a.ints().end());
}

std::vector<double> ConvertCtx::attrFloats(std::string_view name) const {
  if (!hasAttr(name))
    return {};
  const AttributeProto &a = attrOfType(name, AttributeProto::FLOATS);
  return std::vector<double>(a.floats().begin(), a.floats().end());
}

std::optional<Tensor> ConvertCtx::attrTensor(std::string_view name) const {
  if (!hasAttr(name))
    return std::nullopt;
  const AttributeProto &a = attrOfType(name, AttributeProto::TENSOR);
  try {
    return tensorFromOnnx(a.t(), env_.modelDir);
  } catch (const UserError &e) {
    fail(cat("attribute '", name, "' ", e.what()));
  }
}

void ConvertCtx::requireAttrDefault(std::string_view name, int64_t allowed,
                                    const std::string &why) const {
  if (hasAttr(name) && attrInt(name, allowed) != allowed)
    fail(cat("attribute ", name, " = ", attrInt(name, allowed), " is not supported (", why, ")"));
}

// ---- building ---------------------------------------------------------------------------------

// Folded constants are named after the ONNX value they replace; graph output names stay free
// for the output values themselves.
std::string ConvertCtx::weightName() const {
  for (const std::string &o : node_.output())
    if (!o.empty())
      return env_.graphOutputs.count(o) ? o + ".const" : o;
  return loc_.str();
}

std::vector<Value *> ConvertCtx::emitMulti(Op op, std::vector<Value *> operands, AttrMap attrs,
                                           int numResults) {
  Node *n = nullptr;
  try {
    n = env_.graph->createNode(op, std::move(operands), std::move(attrs), loc_, nullptr,
                               numResults);
  } catch (const UserError &e) {
    std::string msg = e.what();
    std::string prefix = loc_.str() + ": ";
    if (msg.rfind(prefix, 0) == 0)
      msg = msg.substr(prefix.size());
    fail(msg);
  }
  // Empty results (a 0 dim) hold no values: constants, whatever the operands, unless one is a
  // branch that fails the run when taken (a fail node: folding it away would hide the failure).
  bool empty = n->numResults() > 0;
  for (const Value *o : n->operands())
    empty = empty && !(o->def() && o->def()->op() == Op::Fail);
  for (Value *r : n->results())
    empty = empty && r->type().isStatic() && !r->type().isSymbolic() && r->type().numel() == 0;
  if (empty) {
    std::vector<Value *> out;
    for (Value *r : n->results())
      out.push_back(constant(Tensor(r->type())));
    env_.graph->eraseNode(n);
    return out;
  }
  // Fold when every operand is constant and the results are small. A result with symbolic dims
  // is never folded: a weight would fix its size at the planning point.
  bool fold = n->info().has(PURE);
  std::vector<const SymElems *> syms;
  bool symbolic = false;
  for (Value *o : n->operands()) {
    fold = fold && o->isWeight();
    syms.push_back(symValue(o));
    symbolic = symbolic || syms.back();
  }
  for (Value *r : n->results())
    fold = fold && ConvertCtx::foldable(r->type()) && !r->type().isSymbolic();
  // A shape value of data dims read as data (or in arithmetic the expressions cannot hold: a
  // min of a count and a constant that goes either way within the bound) is computed at run
  // time from the counts instead.
  auto materialize = [&] {
    for (size_t k = 0; k < syms.size(); ++k)
      if (syms[k]) {
        Value *m = materializeDataShape(env_, n->operand(k), loc_, n);
        if (!m)
          return false;
        n->setOperand(k, m);
        syms[k] = nullptr;
      }
    return true;
  };
  if (fold && symbolic) {
    bool expressible = true;
    try {
      evalSymbolic(*n, syms, env_.dims);
    } catch (const UserError &) {
      expressible = false;
    }
    if (!expressible && materialize())
      return n->results();
  }
  if (!fold && materialize())
    return n->results();
  if (!fold) {
    // A shape value read as data would compute with its planning-point value.
    for (size_t k = 0; k < syms.size(); ++k)
      if (syms[k])
        fail(cat(n->name(), " reads ", describeSym(n->operand(k), *syms[k]),
                 " as data: values computed from the symbolic dims are supported only as "
                 "shapes (Reshape, Expand, ConstantOfShape, Slice bounds, Range limit)"));
    return n->results();
  }
  int64_t resultBytes = 0;
  for (Value *r : n->results())
    resultBytes += r->type().bytes();
  checkComputeBudget(resultBytes); // before the interpreter allocates them
  std::vector<const Tensor *> args;
  for (Value *o : n->operands())
    args.push_back(o->data().get());
  std::vector<Tensor> vals;
  std::vector<SymElems> elems;
  try {
    vals = evalNode(*n, args);
    if (symbolic)
      elems = evalSymbolic(*n, syms, env_.dims);
  } catch (const UserError &e) {
    fail(e.what());
  }
  AICF_CHECK(vals.size() == n->numResults(), "evalNode returned ", vals.size(), " results for ",
             n->name());
  std::vector<Value *> out;
  for (size_t k = 0; k < vals.size(); ++k)
    out.push_back(symbolic ? symConstant(std::move(vals[k]), std::move(elems[k]))
                           : constant(std::move(vals[k])));
  env_.graph->eraseNode(n);
  return out;
}

std::string ConvertCtx::describeSym(const Value *v, const SymElems &e) const {
  std::string from = v->loc.empty() ? v->name() : v->loc.str();
  return cat("the shape value ", symElemsStr(e), " (computed by '", from, "')");
}

bool ConvertCtx::foldable(const TensorType &t) {
  return t.isStatic() && t.numel() <= (isFloat(t.dtype) ? kFoldLimit : kFoldLimitIntegral);
}

// The name of a new data dim sized by output `output`: the output's ONNX name as an
// identifier, made unique among the dims; and that ONNX name.
std::pair<std::string, std::string> ConvertCtx::dataDimName(size_t output) const {
  std::string onnxName =
      output < numOutputs() ? node_.output(static_cast<int>(output)) : node_.name();
  std::string base;
  for (char ch : onnxName) {
    bool word = std::isalnum(static_cast<unsigned char>(ch)) != 0;
    if (word || ch == '_')
      base += ch;
    else if (!base.empty() && base.back() != '_')
      base += '_';
  }
  while (!base.empty() && base.back() == '_')
    base.pop_back();
  while (!base.empty() && base.front() == '_')
    base.erase(base.begin());
  if (base.empty() || std::isdigit(static_cast<unsigned char>(base[0])))
    base = "len_" + base;
  auto taken = [&](const std::string &name) {
    for (const DimRange &d : env_.dims)
      if (d.name == name)
        return true;
    return false;
  };
  std::string name = base;
  for (int k = 2; taken(name); ++k)
    name = cat(base, "_", k);
  return {name, onnxName};
}

std::optional<std::pair<std::string, int64_t>> ConvertCtx::dataDimMaxEntry(size_t output) const {
  if (!env_.dataDimMax)
    return std::nullopt;
  auto [name, onnxName] = dataDimName(output);
  for (const std::string &key : {name, onnxName})
    if (auto it = env_.dataDimMax->find(key); it != env_.dataDimMax->end())
      return std::make_pair(key, it->second);
  return std::nullopt;
}

std::vector<Value *> ConvertCtx::emitDataDim(Op op, std::vector<Value *> operands, AttrMap attrs,
                                             int numResults, int64_t bound, size_t output) {
  bool constant = true;
  for (Value *o : operands)
    constant = constant && o->isWeight() && !symValue(o);
  if (constant) { // evaluated now: its results' lengths are known
    attrs["dim"] = std::string("folded");
    attrs["bound"] = bound;
    Node *n = nullptr;
    try {
      n = env_.graph->createNode(op, operands, std::move(attrs), loc_, nullptr, numResults);
    } catch (const UserError &e) {
      fail(e.what());
    }
    std::vector<const Tensor *> args;
    for (Value *o : operands)
      args.push_back(o->data().get());
    std::vector<Tensor> vals;
    try {
      vals = evalNode(*n, args);
    } catch (const UserError &e) {
      fail(e.what());
    }
    std::vector<Value *> out;
    for (Tensor &t : vals)
      out.push_back(this->constant(std::move(t)));
    env_.graph->eraseNode(n);
    return out;
  }
  if (env_.capture)
    fail("a result length known only at run time inside a loop kept at run time is not "
         "supported");
  auto [name, onnxName] = dataDimName(output);
  if (auto most = dataDimMaxEntry(output)) {
    bound = std::min(bound, most->second);
    env_.dataDimsBounded[name] = most->first;
  }
  env_.dims.push_back(DimRange{name, 0, bound, bound});
  std::vector<DimRange> graphDims = env_.graph->dims();
  graphDims.push_back(env_.dims.back());
  env_.graph->setDims(graphDims);
  attrs["dim"] = name;
  attrs["bound"] = bound;
  std::vector<Value *> out = emitMulti(op, std::move(operands), std::move(attrs), numResults);
  env_.dataDimCounts[name] = out.back();
  return out;
}

Value *materializeDataExpr(ImportEnv &env, const SymExpr &e, const Location &loc, Node *before) {
  for (const std::string &s : e.symbols())
    if (!env.dataDimCounts.count(s))
      return nullptr;
  Graph &g = *env.graph;
  auto node = [&](Op op, std::vector<Value *> operands, AttrMap attrs = {}) {
    return g.createNode(op, std::move(operands), std::move(attrs), loc, before)->result();
  };
  auto constant = [&](int64_t v) {
    Value *c = g.addWeight(cat("len.c", v, ".", g.weights().size()),
                           std::make_shared<const Tensor>(Tensor::fromI64({v}, {})));
    c->loc = loc;
    return c;
  };
  Value *acc = nullptr;
  for (const auto &[mono, coef] : e.terms()) {
    Value *t = mono.empty() || coef != 1 ? constant(coef) : nullptr;
    for (const std::string &s : mono)
      t = t ? node(Op::Mul, {t, env.dataDimCounts.at(s)}) : env.dataDimCounts.at(s);
    acc = acc ? node(Op::Add, {acc, t}) : t;
  }
  return acc ? acc : constant(0);
}

Value *materializeDataShape(ImportEnv &env, const Value *w, const Location &loc, Node *before) {
  auto it = env.symValues.find(w);
  if (it == env.symValues.end())
    return nullptr;
  for (const SymExpr &e : it->second)
    for (const std::string &s : e.symbols())
      if (!env.dataDimCounts.count(s))
        return nullptr;
  Graph &g = *env.graph;
  auto node = [&](Op op, std::vector<Value *> operands, AttrMap attrs = {}) {
    return g.createNode(op, std::move(operands), std::move(attrs), loc, before)->result();
  };
  std::vector<Value *> elems;
  for (const SymExpr &e : it->second)
    elems.push_back(node(Op::Reshape, {materializeDataExpr(env, e, loc, before)},
                         {{"shape", std::vector<int64_t>{1}}}));
  Value *v = elems.size() == 1 ? elems[0] : node(Op::Concat, elems, {{"axis", int64_t(0)}});
  v = node(Op::Reshape, {v}, {{"shape", w->type().shape}});
  if (w->type().dtype != DType::I64)
    v = node(Op::Cast, {v}, {{"to", std::string(dtypeName(w->type().dtype))}});
  return v;
}

Value *ConvertCtx::emit(Op op, std::vector<Value *> operands, AttrMap attrs) {
  return emitMulti(op, std::move(operands), std::move(attrs), 1)[0];
}

void ConvertCtx::checkComputeBudget(int64_t bytes) const {
  if (bytes > env_.computedBudget - env_.computedBytes)
    fail(cat("computing this constant (", bytes, " bytes) would take the constants computed at ",
             "import to ", env_.computedBytes + bytes, " bytes, above the budget of ",
             env_.computedBudget, " bytes"));
}

Value *ConvertCtx::constant(Tensor t) {
  int64_t bytes = t.type().bytes();
  checkComputeBudget(bytes);
  env_.computedBytes += bytes;
  return modelConstant(std::move(t));
}

Value *ConvertCtx::modelConstant(Tensor t) {
  Value *w = env_.graph->addWeight(weightName(), std::make_shared<const Tensor>(std::move(t)));
  w->loc = loc_;
  return w;
}

Value *ConvertCtx::scalar(DType dtype, double v) {
  Tensor t(TensorType(dtype, {}));
  t.setDouble(0, v);
  return constant(std::move(t));
}

Value *ConvertCtx::reshape(Value *v, std::vector<int64_t> shape) {
  if (v->type().shape == shape)
    return v;
  return emit(Op::Reshape, {v}, {{"shape", std::move(shape)}});
}

Value *ConvertCtx::symConstant(Tensor t, SymElems elems) {
  AICF_CHECK(static_cast<int64_t>(elems.size()) == t.numel(), "shape value of ", elems.size(),
             " expressions for ", t.type().str());
  for (size_t i = 0; i < elems.size(); ++i) {
    // The data is the expressions' value at the planning point: ONNX's inference and the
    // folding saw the same.
    auto v = elems[i].eval(planningDims());
    AICF_CHECK(v && *v == t.getInt(static_cast<int64_t>(i)), "shape value element ", elems[i].str(),
               " is not ", t.getInt(static_cast<int64_t>(i)), " at the planning point");
  }
  Value *w = constant(std::move(t));
  bool symbolic = false;
  for (const SymExpr &e : elems)
    symbolic = symbolic || !e.isConstant();
  if (symbolic)
    env_.symValues[w] = std::move(elems);
  return w;
}

std::map<std::string, int64_t> ConvertCtx::planningDims() const {
  std::map<std::string, int64_t> m;
  for (const DimRange &d : env_.dims)
    m[d.name] = d.opt;
  return m;
}

int64_t ConvertCtx::planning(const SymExpr &e) const {
  auto v = e.eval(planningDims());
  if (!v)
    fail(cat(e.str(), " has no value at the planning point"));
  return *v;
}

SymBounds ConvertCtx::bounds(const SymExpr &e, const std::string &what) const {
  auto b = symBounds(e, env_.dims);
  if (!b)
    fail(cat(what, " ", e.str(), " has no bounds within the dims' ranges (it overflows)"));
  return *b;
}

std::string ConvertCtx::rangesOf(const SymExpr &e) const {
  std::string s;
  for (const std::string &name : e.symbols())
    for (const DimRange &d : env_.dims)
      if (d.name == name)
        s += cat(s.empty() ? " (" : ", ", name, " in ", d.min, "..", d.max);
  return s.empty() ? s : s + ")";
}

bool ConvertCtx::provablyLe(const SymExpr &a, const SymExpr &b) const {
  auto d = SymExpr::sub(b, a);
  auto bd = d ? symBounds(*d, env_.dims) : std::nullopt;
  return bd && bd->lo >= 0;
}

Value *ConvertCtx::reshapeSym(Value *v, const SymElems &shape) {
  if (symShapeOf(v->type()) == shape)
    return v;
  std::vector<int64_t> planned;
  std::vector<std::string> texts;
  bool symbolic = false;
  for (const SymExpr &e : shape) {
    planned.push_back(planning(e));
    texts.push_back(e.str());
    symbolic = symbolic || !e.isConstant();
  }
  AttrMap attrs{{"shape", planned}};
  if (symbolic)
    attrs["sym_shape"] = texts;
  return emit(Op::Reshape, {v}, std::move(attrs));
}

Value *ConvertCtx::castTo(Value *v, DType dtype) {
  if (v->type().dtype == dtype)
    return v;
  return emit(Op::Cast, {v}, {{"to", std::string(dtypeName(dtype))}});
}

int64_t normAxis(const ConvertCtx &ctx, int64_t axis, int64_t rank, const char *what) {
  if (axis < -rank || axis >= rank)
    ctx.fail(cat(what, " ", axis, " is out of range for rank ", rank));
  return axis < 0 ? axis + rank : axis;
}

} // namespace aicf
