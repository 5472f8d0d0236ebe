// See plan_read.h.
#include "runtime/plan_read.h"

#include "runtime/aicf_runtime.h"
#include "support/plan_schema.h"

#include <map>

namespace aicf::rt {

int64_t dtypeBytes(const std::string &dt) {
  static const std::map<std::string, int64_t> sizes = {
      {"f64", 8}, {"f32", 4}, {"f16", 2}, {"bf16", 2}, {"i64", 8}, {"i32", 4}, {"i16", 2},
      {"i8", 1},  {"u64", 8}, {"u32", 4}, {"u16", 2},  {"u8", 1},  {"bool", 1}};
  auto it = sizes.find(dt);
  return it == sizes.end() ? -1 : it->second;
}

YAML::Node need(const YAML::Node &map, const char *key, const std::string &what) {
  if (!map.IsMap())
    throw Error(cat(what, " must be a map"));
  YAML::Node n = map[key];
  if (!n)
    throw Error(cat(what, ": missing '", key, "'"));
  return n;
}

std::string readString(const YAML::Node &map, const char *key, const std::string &what) {
  YAML::Node n = need(map, key, what);
  if (!n.IsScalar())
    throw Error(cat(what, ": '", key, "' must be a string"));
  return n.Scalar();
}

int64_t toInt(const YAML::Node &n, const std::string &what, int64_t lo, int64_t hi) {
  int64_t v = 0;
  if (!n.IsScalar() || !YAML::convert<int64_t>::decode(n, v))
    throw Error(cat(what, " must be a 64-bit integer"));
  if (v < lo)
    throw Error(cat(what, " ", v, " must be >= ", lo));
  if (v > hi)
    throw Error(cat(what, " ", v, " must be <= ", hi));
  return v;
}

int64_t readInt(const YAML::Node &map, const char *key, const std::string &what, int64_t lo,
                int64_t hi) {
  return toInt(need(map, key, what), cat(what, ": ", key), lo, hi);
}

YAML::Node needSequence(const YAML::Node &n, const std::string &what) {
  if (!n || !n.IsSequence())
    throw Error(cat(what, " must be a list"));
  return n;
}

bool inside(int64_t offset, int64_t bytes, int64_t total) {
  return offset >= 0 && bytes >= 0 && offset <= total && bytes <= total - offset;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::vector<int64_t> readShape(const YAML::Node &map, const std::string &what,
                               const std::vector<DimRange> *dims, std::vector<SymExpr> *sym) {
  YAML::Node n = needSequence(need(map, plan_key::buffer::shape, what), cat(what, ": shape"));
  if (n.size() > AICF_MAX_RANK)
    throw Error(cat(what, ": rank ", n.size(), " exceeds ", AICF_MAX_RANK));
  std::vector<int64_t> s;
  std::vector<aicf::SymExpr> syms;
  bool symbolic = false;
  for (const YAML::Node &d : n) {
    int64_t v = 0;
    if (dims && d.IsScalar() && !YAML::convert<int64_t>::decode(d, v)) {
      std::string why;
      auto e = aicf::SymExpr::parse(d.Scalar(), &why);
      if (!e)
        throw Error(cat(what, ": dimension '", d.Scalar(), "': ", why));
      std::map<std::string, int64_t> top;
      for (const aicf::DimRange &r : *dims)
        top[r.name] = r.max;
      auto at = e->eval(top);
      if (!at || !e->monotone() || *at < 0 || *at > kMaxDim)
        throw Error(cat(what, ": dimension '", d.Scalar(),
                        "' names an unknown dim or has no bound in the dims' ranges"));
      syms.push_back(*e);
      s.push_back(*at);
      symbolic = true;
      continue;
    }
    s.push_back(toInt(d, cat(what, ": dimension"), 0, kMaxDim));
    syms.emplace_back(s.back());
  }
  if (sym && symbolic)
    *sym = std::move(syms);
  return s;
}

} // namespace aicf::rt
