// The Graph IR verifier. One walk over the graph in node order checks, and reports with the
// node's location:
//   - every value is defined once (inputs, weights and results; input/weight names unique),
//   - weights carry data of exactly their (static) type,
//   - every operand is defined in this graph before its use (the node list is an execution order),
//   - operand count within the op's arity, attributes conform to the schema (checkAttrs),
//   - result count and types equal what the registry's inference computes,
//   - graph outputs are defined in the graph.
// Checks that need well-formed input (inference) are skipped for a node whose operands or
// attributes are already reported, so one mistake gives one diagnostic.
#include "ir/verifier.h"
#include "ir/infer_sym.h"

#include "ir/op_registry.h"
#include "support/diagnostics.h"

#include <unordered_map>
#include <unordered_set>

namespace aicf {

namespace {

class Verifier {
public:
  explicit Verifier(const Graph &g) : g_(g) {}

  std::vector<VerifierDiagnostic> run() {
    for (const Value *v : g_.inputs())
      checkInput(v);
    for (const Value *w : g_.weights())
      checkWeight(w);
    std::vector<Node *> nodes = g_.nodes();
    // Results of every node, so a use before the definition reads differently from a foreign value.
    for (const Node *n : nodes)
      for (const Value *r : n->results())
        if (r)
          laterResults_.insert(r);
    for (size_t i = 0; i < nodes.size(); ++i)
      checkNode(*nodes[i], i);
    for (size_t i = 0; i < g_.outputs().size(); ++i) {
      const Value *v = g_.outputs()[i];
      if (!v)
        report(graphWhere(), {}, cat("graph output #", i, " is null"));
      else if (!defined_.count(v))
        report(graphWhere(), {},
               cat("graph output #", i, " (", describe(v), ") is not defined in the graph"));
    }
    return std::move(diags_);
  }

private:
  void report(std::string where, SourcePos pos, std::string message) {
    diags_.push_back({std::move(where), std::move(message), std::move(pos)});
  }

  std::string graphWhere() const { return cat("graph @", g_.name()); }

  std::string valueWhere(const Value *v) const {
    if (!v->loc.empty())
      return v->loc.str();
    if (v->pos.line)
      return v->pos.str();
    return graphWhere();
  }

  static std::string nodeWhere(const Node &n, size_t index) {
    if (!n.loc.empty())
      return n.loc.str();
    if (n.pos.line)
      return n.pos.str();
    return cat("node #", index, " (", n.name(), ")");
  }

  // "%x", or for an unnamed result "the result of neg at f.mcir:4:3".
  static std::string describe(const Value *v) {
    if (!v->name().empty())
      return "%" + v->name();
    if (v->def()) {
      const Node &d = *v->def();
      std::string which = d.numResults() > 1 ? cat("result #", v->resultIndex()) : "the result";
      if (!d.loc.empty() || d.pos.line)
        return cat(which, " of ", d.name(), " at ", d.loc.empty() ? d.pos.str() : d.loc.str());
      return cat(which, " of a ", d.name(), " node");
    }
    return "an unnamed value";
  }

  // Records a definition; false (after reporting) when the value was already defined.
  bool define(const Value *v, const std::string &where, const SourcePos &pos) {
    if (!defined_.insert(v).second) {
      report(where, pos, cat("value ", describe(v), " is defined twice"));
      return false;
    }
    return true;
  }

  void defineName(const Value *v) {
    if (v->name().empty())
      return;
    auto [it, fresh] = names_.emplace(v->name(), v);
    if (!fresh && it->second != v)
      report(valueWhere(v), v->pos, cat("value name %", v->name(), " is defined twice"));
  }

  void checkInput(const Value *v) {
    if (!v) {
      report(graphWhere(), {}, "a graph input is null");
      return;
    }
    if (!define(v, valueWhere(v), v->pos))
      return;
    if (!v->isInput())
      report(valueWhere(v), v->pos, cat("graph input ", describe(v), " is not an input value"));
    if (std::string p = tensorSizeProblem(v->type()); !p.empty())
      report(valueWhere(v), v->pos, cat("graph input ", describe(v), ": ", p));
    checkSym(v->type(), valueWhere(v), v->pos, cat("graph input ", describe(v)));
    defineName(v);
  }

  // Symbolic dims: every symbol one of the graph's dims, and the expressions giving the type's
  // planning-point shape (what the passes and the cost model reason about).
  void checkSym(const TensorType &t, const std::string &where, const SourcePos &pos,
                const std::string &what) {
    if (t.sym.empty())
      return;
    if (t.sym.size() != t.shape.size()) {
      report(where, pos, cat(what, " has ", t.sym.size(), " symbolic dims for rank ", t.rank()));
      return;
    }
    auto planning = g_.planningDims();
    for (size_t i = 0; i < t.sym.size(); ++i) {
      for (const std::string &s : t.sym[i].symbols())
        if (!g_.findDim(s))
          report(where, pos, cat(what, " dim ", i, " uses '", s, "', not a dim of the graph"));
      auto v = t.sym[i].eval(planning);
      if (v && *v != t.shape[i])
        report(where, pos,
               cat(what, " dim ", i, " is ", t.sym[i].str(), " = ", *v,
                   " at the planning point, not ", t.shape[i]));
    }
  }

  void checkWeight(const Value *w) {
    if (!w) {
      report(graphWhere(), {}, "a weight is null");
      return;
    }
    if (!define(w, valueWhere(w), w->pos))
      return;
    defineName(w);
    if (!w->isWeight())
      report(valueWhere(w), w->pos, cat(describe(w), " is listed as a weight but is not one"));
    const TensorType &t = w->type();
    if (t.isSymbolic())
      report(valueWhere(w), w->pos, cat(describe(w), " is a weight with symbolic dims ", t.str()));
    if (w->dataElided()) { // parsed from `= elided`: only the type is known
      if (!t.isStatic())
        report(valueWhere(w), w->pos, cat("weight ", describe(w), " has a dynamic type ", t.str()));
      return;
    }
    if (!w->data()) {
      report(valueWhere(w), w->pos, cat("weight ", describe(w), " has no data"));
      return;
    }
    if (!t.isStatic())
      report(valueWhere(w), w->pos, cat("weight ", describe(w), " has a dynamic type ", t.str()));
    else if (w->data()->type() != t || static_cast<int64_t>(w->data()->byteSize()) != t.bytes())
      report(valueWhere(w), w->pos,
             cat("weight ", describe(w), " holds ", w->data()->type().str(), " data (",
                 w->data()->byteSize(), " bytes) but has type ", t.str()));
  }

  void checkNode(const Node &n, size_t index) {
    const OpInfo &info = n.info();
    std::string where = nodeWhere(n, index);
    bool operandsOk = true;
    for (size_t k = 0; k < n.numOperands(); ++k) {
      const Value *o = n.operand(k);
      if (!o) {
        report(where, n.pos, cat("operand #", k, " of ", info.name, " is null"));
        operandsOk = false;
      } else if (!defined_.count(o)) {
        if (laterResults_.count(o))
          report(where, n.pos,
                 cat("operand #", k, " (", describe(o), ") of ", info.name,
                     " is used before its definition"));
        else
          report(where, n.pos,
                 cat("operand #", k, " (", describe(o), ") of ", info.name,
                     " is not defined in the graph"));
        operandsOk = false;
      }
    }
    int nops = static_cast<int>(n.numOperands());
    if (nops < info.minOperands || (info.maxOperands >= 0 && nops > info.maxOperands)) {
      report(where, n.pos, cat(info.name, " takes ", arityText(info), ", got ", nops));
      operandsOk = false;
    }
    std::string badAttr = checkAttrs(info, n.attrs);
    if (!badAttr.empty())
      report(where, n.pos, badAttr);

    bool resultsOk = true;
    for (size_t i = 0; i < n.numResults(); ++i) {
      const Value *r = n.result(i);
      if (!r || r->def() != &n || r->resultIndex() != static_cast<int>(i) ||
          r->kind() != ValueKind::Result) {
        report(where, n.pos, cat("result #", i, " of ", info.name, " is not owned by it"));
        resultsOk = false;
      } else if (!define(r, where, n.pos)) {
        resultsOk = false;
      } else {
        checkSym(r->type(), where, n.pos, cat("result #", i));
      }
    }
    int nres = static_cast<int>(n.numResults());
    if (info.numResults >= 0 && nres != info.numResults) {
      report(where, n.pos,
             cat(info.name, " has ", info.numResults, " result", info.numResults == 1 ? "" : "s",
                 ", got ", nres));
      resultsOk = false;
    }
    if (!operandsOk || !resultsOk || !badAttr.empty())
      return;

    std::vector<TensorType> types;
    for (const Value *o : n.operands())
      types.push_back(o->type());
    InferCtx ctx(info, types, n.attrs, nres);
    std::vector<TensorType> inferred;
    try {
      inferred = runInfer(info, ctx);
    } catch (const InferError &e) {
      report(where, n.pos, e.message);
      return;
    }
    if (std::string p = resultTypesProblem(types, inferred); !p.empty()) {
      report(where, n.pos, p);
      return;
    }
    if (inferred.size() != n.numResults()) {
      report(where, n.pos,
             cat(info.name, " infers ", inferred.size(), " results, got ", n.numResults()));
      return;
    }
    for (size_t i = 0; i < inferred.size(); ++i)
      if (n.result(i)->type() != inferred[i])
        report(where, n.pos,
               cat(n.numResults() > 1 ? cat("result #", i, " type ") : std::string("result type "),
                   n.result(i)->type().str(), " does not match inferred ", inferred[i].str()));
    checkBody(n, where, types);
  }

  // A loop's body: a graph of its own (verified the same way) whose inputs have the operands'
  // types and whose outputs are the condition and the carried values; no other node has one.
  void checkBody(const Node &n, const std::string &where, const std::vector<TensorType> &operands) {
    if (n.op() != Op::Loop) {
      if (n.body)
        report(where, n.pos, cat(n.name(), " has a body graph (only loop has one)"));
      return;
    }
    if (!n.body) {
      report(where, n.pos, "loop has no body graph");
      return;
    }
    const Graph &b = *n.body;
    if (b.inputs().size() != operands.size()) {
      report(where, n.pos,
             cat("loop body @", b.name(), " takes ", b.inputs().size(), " inputs for ",
                 operands.size(), " operands"));
      return;
    }
    for (size_t k = 0; k < operands.size(); ++k)
      if (b.inputs()[k]->type() != operands[k])
        report(where, n.pos,
               cat("loop body input #", k, " is ", b.inputs()[k]->type().str(), ", operand #", k,
                   " is ", operands[k].str()));
    std::vector<TensorType> want = {TensorType(DType::Bool, {})};
    for (const Value *r : n.results())
      want.push_back(r->type());
    if (b.outputs().size() != want.size()) {
      report(where, n.pos,
             cat("loop body @", b.name(), " returns ", b.outputs().size(), " values, want ",
                 want.size(), " (the condition and ", want.size() - 1, " carried values)"));
      return;
    }
    for (size_t k = 0; k < want.size(); ++k)
      if (b.outputs()[k] && b.outputs()[k]->type() != want[k])
        report(where, n.pos,
               cat("loop body output #", k, " is ", b.outputs()[k]->type().str(), ", want ",
                   want[k].str()));
    for (const VerifierDiagnostic &d : Verifier(b).run())
      report(cat(where, ": body @", b.name(), ": ", d.where), d.pos, d.message);
  }

  static std::string arityText(const OpInfo &info) {
    auto plural = [](int k) { return cat(k, k == 1 ? " operand" : " operands"); };
    if (info.maxOperands < 0)
      return "at least " + plural(info.minOperands);
    if (info.minOperands == info.maxOperands)
      return plural(info.minOperands);
    return cat(info.minOperands, " to ", info.maxOperands, " operands");
  }

  const Graph &g_;
  std::vector<VerifierDiagnostic> diags_;
  std::unordered_set<const Value *> defined_;
  std::unordered_set<const Value *> laterResults_;
  std::unordered_map<std::string, const Value *> names_;
};

} // namespace

std::vector<VerifierDiagnostic> verifyGraphDetailed(const Graph &g) {
  return Verifier(g).run();
}

std::vector<std::string> verifyGraphDiagnostics(const Graph &g) {
  std::vector<std::string> out;
  for (const VerifierDiagnostic &d : verifyGraphDetailed(g))
    out.push_back(d.str());
  return out;
}

void verifyGraph(const Graph &g) {
  std::vector<VerifierDiagnostic> diags = verifyGraphDetailed(g);
  if (!diags.empty())
    throw UserError(diags.front().str());
}

} // namespace aicf
