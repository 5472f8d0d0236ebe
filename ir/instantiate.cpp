#include "ir/instantiate.h"

#include "ir/infer_sym.h"
#include "support/diagnostics.h"

namespace aicf {

std::optional<SymBounds> symBounds(const SymExpr &e, const std::vector<DimRange> &dims) {
  __int128 lo = 0, hi = 0;
  constexpr __int128 kMax = INT64_MAX, kMin = INT64_MIN;
  for (const auto &[mono, coef] : e.terms()) {
    __int128 tlo = coef, thi = coef;
    for (const std::string &s : mono) {
      const DimRange *r = nullptr;
      for (const DimRange &d : dims)
        if (d.name == s)
          r = &d;
      if (!r)
        return std::nullopt;
      tlo *= r->min;
      thi *= r->max;
      if (tlo > kMax || tlo < kMin || thi > kMax || thi < kMin)
        return std::nullopt;
    }
    if (tlo > thi) // a negative coefficient: the term is smallest at the ranges' maxima
      std::swap(tlo, thi);
    lo += tlo;
    hi += thi;
    if (lo > kMax || lo < kMin || hi > kMax || hi < kMin)
      return std::nullopt;
  }
  return SymBounds{static_cast<int64_t>(lo), static_cast<int64_t>(hi)};
}

namespace {

std::vector<int64_t> evalAll(const std::vector<std::string> &texts,
                             const std::map<std::string, int64_t> &point, const Node &n,
                             const char *attr) {
  std::vector<int64_t> out;
  for (const std::string &t : texts) {
    auto e = SymExpr::parse(t);
    auto v = e ? e->eval(point) : std::nullopt;
    if (!v)
      throw UserError(cat(n.where(), ": ", attr, " entry '", t, "' has no value at this point"));
    out.push_back(*v);
  }
  return out;
}

// The symbolic attributes and the plain attributes they give the values of.
constexpr std::pair<const char *, const char *> kSymAttrs[] = {
    {"sym_shape", "shape"}, {"sym_starts", "starts"}, {"sym_ends", "ends"}, {"sym_k", "k"}};

} // namespace

std::optional<AttrMap> boundAttrs(const Node &n, const std::map<std::string, int64_t> &point) {
  if (n.op() == Op::Fail) // its sym_shape only describes the type it stands for
    return std::nullopt;
  std::optional<AttrMap> out;
  for (const auto &[symAttr, attr] : kSymAttrs) {
    auto it = n.attrs.find(symAttr);
    if (it == n.attrs.end())
      continue;
    const auto &texts = std::get<std::vector<std::string>>(it->second);
    if (texts.empty())
      continue;
    bool known = true;
    for (const std::string &t : texts) {
      auto e = SymExpr::parse(t);
      for (const std::string &sym : e ? e->symbols() : std::vector<std::string>{})
        known = known && point.count(sym);
    }
    if (!known)
      continue;
    if (!out)
      out = n.attrs;
    std::vector<int64_t> values = evalAll(texts, point, n, symAttr);
    if (std::string_view(attr) == "k")
      (*out)[attr] = values.at(0);
    else
      (*out)[attr] = values;
    out->erase(symAttr);
  }
  return out;
}

void instantiate(Graph &g, const std::map<std::string, int64_t> &point) {
  for (const DimRange &d : g.dims()) {
    auto it = point.find(d.name);
    if (it == point.end())
      throw UserError(cat("instantiate: no value for dim '", d.name, "'"));
    if (it->second < d.min || it->second > d.max)
      throw UserError(cat("instantiate: ", d.name, " = ", it->second, " is outside its range ",
                          d.min, "..", d.max));
  }
  auto staticType = [&](const TensorType &t, const std::string &what) {
    TensorType s = t;
    for (size_t i = 0; i < t.sym.size(); ++i) {
      auto v = t.sym[i].eval(point);
      if (!v)
        throw UserError(cat("instantiate: ", what, " dim ", t.sym[i].str(), " has no value"));
      s.shape[i] = *v;
    }
    s.sym.clear();
    return s;
  };
  for (Value *in : g.inputs())
    in->setType(staticType(in->type(), "input " + in->name()));
  for (Node *n : g.nodes()) {
    if (auto a = boundAttrs(*n, point))
      n->attrs = std::move(*a);
    std::vector<TensorType> operands;
    for (Value *o : n->operands())
      operands.push_back(o->type());
    InferCtx ctx(n->info(), operands, n->attrs, static_cast<int>(n->numResults()));
    std::vector<TensorType> types;
    try {
      types = runInfer(n->info(), ctx);
    } catch (const InferError &e) {
      throw UserError(cat(n->where(), ": ", e.message));
    }
    for (size_t r = 0; r < n->numResults(); ++r) {
      TensorType want = staticType(n->result(r)->type(), n->where());
      if (types[r] != want)
        throw UserError(cat("instantiate: ", n->where(), " result ", r, " is ", types[r].str(),
                            " at this point, but its symbolic type ", n->result(r)->type().str(),
                            " gives ", want.str()));
      n->result(r)->setType(types[r]);
    }
  }
  g.setDims({});
}

} // namespace aicf
