#include "ir/graph.h"

#include "ir/infer_sym.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <filesystem>
#include <unordered_map>
#include <unordered_set>

namespace aicf {

// ---- Location / SourcePos -------------------------------------------------------------------

std::string Location::str() const {
  if (origins.empty())
    return "";
  if (origins.size() == 1)
    return origins[0];
  std::string s = "fused[";
  for (size_t i = 0; i < origins.size(); ++i)
    s += (i ? ", " : "") + origins[i];
  return s + "]";
}

Location Location::fuse(const std::vector<const Location *> &locs) {
  Location out;
  for (const Location *l : locs)
    for (const std::string &o : l->origins)
      if (std::find(out.origins.begin(), out.origins.end(), o) == out.origins.end())
        out.origins.push_back(o);
  return out;
}

std::string SourcePos::str() const {
  if (line == 0)
    return file;
  return cat(file, ":", line, ":", col);
}

// ---- Node -------------------------------------------------------------------------------------

int64_t Node::i(std::string_view n) const {
  return std::get<int64_t>(attrOrDefault(info(), attrs, n, AttrKind::Int));
}
double Node::f(std::string_view n) const {
  return std::get<double>(attrOrDefault(info(), attrs, n, AttrKind::Float));
}
const std::string &Node::s(std::string_view n) const {
  return std::get<std::string>(attrOrDefault(info(), attrs, n, AttrKind::String));
}
const std::vector<int64_t> &Node::ints(std::string_view n) const {
  return std::get<std::vector<int64_t>>(attrOrDefault(info(), attrs, n, AttrKind::Ints));
}
const std::vector<double> &Node::floats(std::string_view n) const {
  return std::get<std::vector<double>>(attrOrDefault(info(), attrs, n, AttrKind::Floats));
}
const std::vector<std::string> &Node::strs(std::string_view n) const {
  return std::get<std::vector<std::string>>(attrOrDefault(info(), attrs, n, AttrKind::Strings));
}

std::string Node::where() const {
  if (!loc.empty())
    return loc.str();
  if (pos.line)
    return pos.str();
  return cat("node ", name());
}

// ---- Graph ------------------------------------------------------------------------------------

std::string Graph::uniqueName(const std::string &want) {
  std::string base = want.empty() ? "v" : want;
  std::string name = base;
  for (int k = 1; takenNames_.count(name); ++k)
    name = cat(base, "_", k);
  takenNames_.insert(name);
  return name;
}

Value *Graph::newValue(const std::string &name, TensorType type, ValueKind kind) {
  auto v = std::make_unique<Value>();
  v->id_ = nextValueId_++;
  v->name_ = name.empty() ? "" : uniqueName(name);
  v->type_ = std::move(type);
  v->kind_ = kind;
  v->slot_ = values_.size();
  values_.push_back(std::move(v));
  return values_.back().get();
}

// Frees v and its name in O(1): the last value takes its slot (values_ is only ownership and
// findValue's by-name search, whose names are unique, so its order does not matter).
void Graph::dropValue(Value *v) {
  size_t s = v->slot_;
  AICF_CHECK(s < values_.size() && values_[s].get() == v, "value not owned by the graph");
  if (!v->name_.empty())
    takenNames_.erase(v->name_);
  if (s + 1 != values_.size()) {
    std::swap(values_[s], values_.back());
    values_[s]->slot_ = s;
  }
  values_.pop_back();
}

std::vector<SymExpr> symShapeOf(const TensorType &t) {
  std::vector<SymExpr> s;
  for (size_t i = 0; i < t.shape.size(); ++i)
    s.push_back(t.symDim(i));
  return s;
}

AttrMap reshapeAttrs(const Graph &g, const std::vector<SymExpr> &target) {
  std::vector<int64_t> shape;
  std::vector<std::string> sym;
  bool symbolic = false;
  auto planning = g.planningDims();
  for (const SymExpr &e : target) {
    auto v = e.eval(planning);
    AICF_CHECK(v, "reshape target dim ", e.str(), " has no value at the planning point");
    shape.push_back(*v);
    sym.push_back(e.str());
    symbolic = symbolic || !e.isConstant();
  }
  AttrMap a{{"shape", shape}};
  if (symbolic)
    a["sym_shape"] = sym;
  return a;
}

AttrMap reshapeAttrs(const Graph &g, const Value &from, const std::vector<int64_t> &target) {
  std::vector<SymExpr> sym;
  for (int64_t d : target)
    sym.emplace_back(d);
  const TensorType &t = from.type();
  if (!target.empty() && !t.shape.empty() && !t.symDim(0).isConstant() && target[0] == t.shape[0])
    sym[0] = t.symDim(0);
  return reshapeAttrs(g, sym);
}

const DimRange *Graph::findDim(std::string_view name) const {
  for (const DimRange &d : dims_)
    if (d.name == name)
      return &d;
  return nullptr;
}

const Node *Graph::dataDimSetter(std::string_view name) const {
  for (const Node *n : nodes())
    if (n->info().has(SETS_DIM) && n->s("dim") == name)
      return n;
  return nullptr;
}

std::map<std::string, int64_t> Graph::planningDims() const {
  std::map<std::string, int64_t> m;
  for (const DimRange &d : dims_)
    m[d.name] = d.opt;
  return m;
}

std::unique_ptr<Graph> Graph::clone() const {
  auto c = std::make_unique<Graph>(name_);
  c->dims_ = dims_;
  std::unordered_map<const Value *, Value *> map;
  for (const Value *in : inputs_) {
    Value *v = c->addInput(in->name(), in->type());
    v->loc = in->loc;
    map[in] = v;
  }
  for (const Value *w : weights_) {
    Value *v = w->dataElided() ? c->addElidedWeight(w->name(), w->type())
                               : c->addWeight(w->name(), w->data());
    if (w->dataElided())
      v->pos = w->pos; // its "has no data" error names the file
    v->loc = w->loc;
    map[w] = v;
  }
  for (const auto &n : nodes_) {
    std::vector<Value *> ops;
    for (const Value *o : n->operands())
      ops.push_back(map.at(o));
    std::vector<TensorType> types;
    for (const Value *r : n->results())
      types.push_back(r->type());
    Node *m = c->addNode(n->op(), std::move(ops), std::move(types), n->attrs, n->loc);
    m->props = n->props;
    if (n->body)
      m->body = n->body->clone();
    for (size_t i = 0; i < n->results().size(); ++i) {
      const Value *r = n->results()[i];
      if (!r->name().empty())
        c->renameValue(m->results()[i], r->name());
      m->results()[i]->loc = r->loc;
      map[r] = m->results()[i];
    }
  }
  for (const Value *o : outputs_)
    c->addOutput(map.at(o));
  return c;
}

Value *Graph::addInput(const std::string &name, TensorType type) {
  Value *v = newValue(name, std::move(type), ValueKind::Input);
  inputs_.push_back(v);
  return v;
}

Value *Graph::addWeight(const std::string &name, TensorPtr data) {
  AICF_CHECK(data != nullptr, "weight ", name, " without data");
  Value *v = newValue(name, data->type(), ValueKind::Weight);
  v->data_ = std::move(data);
  weights_.push_back(v);
  return v;
}

Value *Graph::addElidedWeight(const std::string &name, const TensorType &t) {
  Value *v = newValue(name, t, ValueKind::Weight);
  v->elided_ = true;
  weights_.push_back(v);
  return v;
}

void Value::throwDataElided() const {
  // Where the text came from: graph.mcir inside a compiled folder has the real weights next
  // to it (weights.bin), which aicf-run runs directly.
  std::string file = pos.file.empty() ? std::string("the IR text") : pos.file;
  std::string name = loc.empty() ? name_ : loc.origins.front();
  std::string hint = "run the original model or its compiled folder instead";
  if (!pos.file.empty()) {
    std::filesystem::path dir = std::filesystem::path(pos.file).parent_path();
    std::error_code ec;
    if (std::filesystem::exists(dir / "plan.yaml", ec))
      hint = cat("run the compiled folder ", dir.empty() ? "." : dir.string(), " instead");
  }
  throw UserError(cat(file, ": weight '", name, "' has no data (the printer elides weights over ",
                      "16 elements); ", hint));
}

Node *Graph::addNode(Op op, std::vector<Value *> operands, std::vector<TensorType> resultTypes,
                     AttrMap attrs, Location loc, Node *before) {
  auto n = std::make_unique<Node>();
  n->op_ = op;
  n->operands_ = std::move(operands);
  n->addUses();
  n->attrs = std::move(attrs);
  n->loc = std::move(loc);
  for (size_t i = 0; i < resultTypes.size(); ++i) {
    Value *r = newValue("", std::move(resultTypes[i]), ValueKind::Result);
    r->def_ = n.get();
    r->resultIndex_ = static_cast<int>(i);
    n->results_.push_back(r);
  }
  Node *raw = n.get();
  if (before) {
    int idx = nodeIndex(before);
    AICF_CHECK(idx >= 0, "insertion anchor not in graph");
    nodes_.insert(nodes_.begin() + idx, std::move(n));
    posValid_ = false; // positions from idx on shifted
  } else {
    raw->pos_ = static_cast<int>(nodes_.size());
    nodes_.push_back(std::move(n));
  }
  nodeSet_.insert(raw);
  return raw;
}

Node *Graph::createNode(Op op, std::vector<Value *> operands, AttrMap attrs, Location loc,
                        Node *before, int numResults) {
  const OpInfo &info = opInfo(op);
  std::string bad = checkAttrs(info, attrs);
  if (!bad.empty())
    throw UserError(cat(loc.empty() ? std::string(info.name) : loc.str(), ": ", bad));
  std::vector<TensorType> types;
  for (Value *v : operands)
    types.push_back(v->type());
  int nres = info.numResults >= 0 ? info.numResults : numResults;
  InferCtx ctx(info, types, attrs, nres);
  std::vector<TensorType> resultTypes;
  try {
    resultTypes = runInfer(info, ctx);
  } catch (const InferError &e) {
    throw UserError(cat(loc.empty() ? std::string(info.name) : loc.str(), ": ", e.message));
  }
  std::string tooBig = resultTypesProblem(types, resultTypes);
  if (!tooBig.empty())
    throw UserError(cat(loc.empty() ? std::string(info.name) : loc.str(), ": ", tooBig));
  return addNode(op, std::move(operands), std::move(resultTypes), std::move(attrs), std::move(loc),
                 before);
}

std::vector<Node *> Graph::nodes() const {
  std::vector<Node *> out;
  out.reserve(nodes_.size());
  for (const auto &n : nodes_)
    out.push_back(n.get());
  return out;
}

std::vector<Node *> Graph::users(const Value *v) const {
  std::vector<Node *> out = v->uses_;
  std::sort(out.begin(), out.end(),
            [&](const Node *a, const Node *b) { return nodeIndex(a) < nodeIndex(b); });
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

bool Graph::isOutput(const Value *v) const {
  return std::find(outputs_.begin(), outputs_.end(), v) != outputs_.end();
}

bool Graph::hasUses(const Value *v) const {
  return !v->uses_.empty() || isOutput(v);
}

Value *Graph::findValue(std::string_view name) const {
  if (name.empty())
    return nullptr; // unnamed values are not found by name (values_ has no fixed order)
  for (const auto &v : values_)
    if (v->name_ == name)
      return v.get();
  return nullptr;
}

bool Graph::canReplaceKeepingNames(const Value *from, const Value *to) const {
  if (!isOutput(from))
    return true;
  return to->kind() == ValueKind::Result && to->name().empty() && !isOutput(to);
}

void Graph::renameValue(Value *v, const std::string &name) {
  if (v->name_ == name)
    return;
  if (!v->name_.empty())
    takenNames_.erase(v->name_);
  v->name_ = name.empty() ? "" : uniqueName(name);
}

void Graph::replaceAllUsesWith(Value *from, Value *to) {
  if (from == to)
    return;
  if (isOutput(from) && to->kind() == ValueKind::Result && to->name_.empty() && !isOutput(to)) {
    std::string name = from->name_;
    renameValue(from, "");
    renameValue(to, name);
  }
  std::vector<Node *> readers = std::move(from->uses_);
  from->uses_.clear();
  for (Node *n : readers) // a node reading `from` twice is listed twice: the second finds none
    for (Value *&o : n->operands_)
      if (o == from) {
        o = to;
        to->uses_.push_back(n);
      }
  for (Value *&o : outputs_)
    if (o == from)
      o = to;
}

int Graph::nodeIndex(const Node *n) const {
  if (!nodeSet_.count(n))
    return -1;
  if (!posValid_) {
    for (size_t i = 0; i < nodes_.size(); ++i)
      nodes_[i]->pos_ = static_cast<int>(i);
    posValid_ = true;
  }
  return n->pos_;
}

void Node::addUses() {
  for (Value *o : operands_)
    if (o)
      o->uses_.push_back(this);
}

void Node::dropUses() {
  for (Value *o : operands_)
    if (o) {
      auto it = std::find(o->uses_.rbegin(), o->uses_.rend(), this);
      if (it != o->uses_.rend())
        o->uses_.erase(std::next(it).base());
    }
}

void Node::setOperand(size_t i, Value *v) {
  Value *&slot = operands_.at(i);
  if (slot) {
    auto it = std::find(slot->uses_.rbegin(), slot->uses_.rend(), this);
    if (it != slot->uses_.rend())
      slot->uses_.erase(std::next(it).base());
  }
  slot = v;
  if (v)
    v->uses_.push_back(this);
}

void Node::setOperands(std::vector<Value *> vs) {
  dropUses();
  operands_ = std::move(vs);
  addUses();
}

void Graph::eraseNode(Node *n) {
  for (Value *r : n->results_)
    AICF_CHECK(!hasUses(r), "erasing ", n->where(), " whose result is still used");
  int idx = nodeIndex(n);
  AICF_CHECK(idx >= 0, "erasing a node not in the graph");
  n->dropUses();
  for (Value *r : n->results_)
    dropValue(r);
  nodes_.erase(nodes_.begin() + idx);
  nodeSet_.erase(n);
  posValid_ = false;
}

void Graph::eraseWeight(Value *w) {
  AICF_CHECK(w->isWeight() && !hasUses(w), "erasing weight ", w->name(), " that is still used");
  std::erase(weights_, w);
  dropValue(w);
}

void Graph::eraseInput(Value *in) {
  AICF_CHECK(in->isInput() && !hasUses(in), "erasing input ", in->name(), " that is still used");
  std::erase(inputs_, in);
  dropValue(in);
}

void Graph::moveBefore(Node *n, Node *anchor) {
  int from = nodeIndex(n);
  AICF_CHECK(from >= 0, "moving a node not in the graph");
  std::unique_ptr<Node> owned = std::move(nodes_[from]);
  nodes_.erase(nodes_.begin() + from);
  posValid_ = false;
  int to = nodeIndex(anchor);
  AICF_CHECK(to >= 0, "move anchor not in the graph");
  nodes_.insert(nodes_.begin() + to, std::move(owned));
  posValid_ = false;
}

void Graph::sortTopologically() {
  // Kahn's algorithm, always taking the earliest ready node in the current order: stable.
  std::unordered_map<const Node *, size_t> pos;
  for (size_t i = 0; i < nodes_.size(); ++i)
    pos[nodes_[i].get()] = i;
  std::vector<int> pending(nodes_.size(), 0);
  std::vector<std::vector<size_t>> succ(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    std::unordered_set<const Node *> seen;
    for (Value *o : nodes_[i]->operands_)
      if (o && o->def_ && seen.insert(o->def_).second) {
        auto it = pos.find(o->def_);
        AICF_CHECK(it != pos.end(), "operand defined by a node outside the graph");
        succ[it->second].push_back(i);
        ++pending[i];
      }
  }
  std::set<size_t> ready;
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (pending[i] == 0)
      ready.insert(i);
  std::vector<std::unique_ptr<Node>> order;
  order.reserve(nodes_.size());
  while (!ready.empty()) {
    size_t i = *ready.begin();
    ready.erase(ready.begin());
    for (size_t s : succ[i])
      if (--pending[s] == 0)
        ready.insert(s);
    order.push_back(std::move(nodes_[i]));
  }
  AICF_CHECK(order.size() == nodes_.size(), "cycle in graph ", name_);
  nodes_ = std::move(order);
  posValid_ = false;
}

int Graph::removeDeadCode() {
  // Use counts once, then one backward sweep (a chain of dead nodes goes in it) and one bulk
  // erase: linear, where erasing node by node rescans the graph for each.
  std::unordered_map<const Value *, int> uses;
  for (const auto &n : nodes_)
    for (const Value *o : n->operands_)
      ++uses[o];
  for (const Value *o : outputs_)
    ++uses[o];
  std::unordered_set<const Node *> deadNodes;
  std::unordered_set<const Value *> deadValues;
  // A node setting a data dim lives while a live value's type uses the dim (a slice to a
  // run-time length reads it through the dims, not an operand).
  std::unordered_set<std::string> liveDims;
  auto noteDims = [&](const Value *v) {
    for (const SymExpr &e : v->type().sym)
      for (const std::string &s : e.symbols())
        liveDims.insert(s);
  };
  for (const Value *o : outputs_)
    noteDims(o);
  for (size_t k = nodes_.size(); k-- > 0;) {
    Node *n = nodes_[k].get();
    bool used =
        !n->info().has(PURE) || (n->info().has(SETS_DIM) && liveDims.count(n->s("dim")) > 0);
    for (const Value *r : n->results_)
      used = used || uses[r] > 0;
    if (used) {
      for (const Value *v : n->results_)
        noteDims(v);
      for (const Value *v : n->operands_)
        noteDims(v);
      continue;
    }
    deadNodes.insert(n);
    deadValues.insert(n->results_.begin(), n->results_.end());
    for (const Value *o : n->operands_)
      --uses[o];
  }
  int removed = static_cast<int>(deadNodes.size());
  for (const auto &n : nodes_)
    if (deadNodes.count(n.get()))
      n->dropUses();
  for (const Value *w : weights_)
    if (uses[w] == 0) {
      deadValues.insert(w);
      ++removed;
    }
  if (removed == 0)
    return 0;
  std::erase_if(nodes_, [&](const std::unique_ptr<Node> &n) { return deadNodes.count(n.get()); });
  for (const Node *n : deadNodes)
    nodeSet_.erase(n);
  posValid_ = false;
  std::erase_if(weights_, [&](const Value *w) { return deadValues.count(w) > 0; });
  std::erase_if(values_, [&](const std::unique_ptr<Value> &v) {
    if (!deadValues.count(v.get()))
      return false;
    if (!v->name_.empty())
      takenNames_.erase(v->name_);
    return true;
  });
  for (size_t i = 0; i < values_.size(); ++i)
    values_[i]->slot_ = i;
  return removed;
}

} // namespace aicf
