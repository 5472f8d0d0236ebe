// The registry table, expanded from ir/ops.def.
#include "ir/op_registry.h"

#include "support/diagnostics.h"

#include <cmath>

namespace aicf {

// Inference functions named in ops.def (defined in ir/infer.cpp).
#define OP(id, name, minOps, maxOps, nres, flags, infer, ...)                                      \
  std::vector<TensorType> infer(InferCtx &ctx);
#include "ir/ops.def"
#undef OP

namespace {

#define INT(n, d) AttrSpec{#n, AttrKind::Int, false, AttrValue{int64_t(d)}},
#define FLOAT(n, d) AttrSpec{#n, AttrKind::Float, false, AttrValue{double(d)}},
#define STR(n, d) AttrSpec{#n, AttrKind::String, false, AttrValue{std::string(d)}},
#define INTS(n) AttrSpec{#n, AttrKind::Ints, false, AttrValue{std::vector<int64_t>{}}},
#define FLOATS(n) AttrSpec{#n, AttrKind::Floats, false, AttrValue{std::vector<double>{}}},
#define STRS(n) AttrSpec{#n, AttrKind::Strings, false, AttrValue{std::vector<std::string>{}}},
#define INT_REQ(n) AttrSpec{#n, AttrKind::Int, true, AttrValue{int64_t(0)}},
#define FLOAT_REQ(n) AttrSpec{#n, AttrKind::Float, true, AttrValue{0.0}},
#define STR_REQ(n) AttrSpec{#n, AttrKind::String, true, AttrValue{std::string()}},
#define INTS_REQ(n) AttrSpec{#n, AttrKind::Ints, true, AttrValue{std::vector<int64_t>{}}},
#define FLOATS_REQ(n) AttrSpec{#n, AttrKind::Floats, true, AttrValue{std::vector<double>{}}},

const std::vector<OpInfo> &table() {
  static const std::vector<OpInfo> ops = {
#define OP(id, name, minOps, maxOps, nres, flags, infer, summary, ...)                             \
  OpInfo{Op::id, name, minOps, maxOps, nres, flags, infer, summary, {__VA_ARGS__}},
#include "ir/ops.def"
#undef OP
  };
  return ops;
}

#undef INT
#undef FLOAT
#undef STR
#undef INTS
#undef FLOATS
#undef STRS
#undef INT_REQ
#undef FLOAT_REQ
#undef STR_REQ
#undef INTS_REQ
#undef FLOATS_REQ

} // namespace

const AttrSpec *OpInfo::findAttr(std::string_view n) const {
  for (const AttrSpec &a : attrs)
    if (n == a.name)
      return &a;
  return nullptr;
}

const OpInfo &opInfo(Op op) {
  return table()[static_cast<size_t>(op)];
}
const char *opName(Op op) {
  return opInfo(op).name;
}
bool isTranscendental(Op op) {
  switch (op) {
  case Op::Exp:
  case Op::Log:
  case Op::Tanh:
  case Op::Erf:
  case Op::Sigmoid:
  case Op::Gelu:
  case Op::Silu:
  case Op::Pow: return true;
  default: return false;
  }
}

std::optional<Op> opByName(std::string_view name) {
  for (const OpInfo &info : table())
    if (name == info.name)
      return info.op;
  return std::nullopt;
}

const AttrValue &attrOrDefault(const OpInfo &info, const AttrMap &attrs, std::string_view name,
                               AttrKind kind) {
  const AttrSpec *spec = info.findAttr(name);
  AICF_CHECK(spec != nullptr, "op ", info.name, " has no attribute '", name, "'");
  AICF_CHECK(spec->kind == kind, "attribute ", info.name, ".", name, " is ",
             attrKindName(spec->kind), ", read as ", attrKindName(kind));
  auto it = attrs.find(std::string(name));
  if (it != attrs.end()) {
    // checkAttrs accepts an empty int list for any list kind (the text `[]`): read it as empty.
    if (kind == AttrKind::Floats && attrKindOf(it->second) == AttrKind::Ints &&
        std::get<std::vector<int64_t>>(it->second).empty()) {
      static const AttrValue emptyFloats{std::vector<double>{}};
      return emptyFloats;
    }
    if (kind == AttrKind::Strings && attrKindOf(it->second) == AttrKind::Ints &&
        std::get<std::vector<int64_t>>(it->second).empty()) {
      static const AttrValue emptyStrings{std::vector<std::string>{}};
      return emptyStrings;
    }
    AICF_CHECK(attrKindOf(it->second) == kind, "attribute ", info.name, ".", name,
               " holds a value of the wrong kind");
    return it->second;
  }
  AICF_CHECK(!spec->required, "required attribute ", info.name, ".", name, " missing");
  return spec->defaultValue;
}

std::string checkAttrs(const OpInfo &info, const AttrMap &attrs) {
  for (const auto &[name, value] : attrs) {
    const AttrSpec *spec = info.findAttr(name);
    if (!spec)
      return cat("op '", info.name, "' has no attribute '", name, "'");
    AttrKind got = attrKindOf(value);
    // An empty list parses as ints; accept it for any list kind.
    bool emptyList = got == AttrKind::Ints && std::get<std::vector<int64_t>>(value).empty() &&
                     (spec->kind == AttrKind::Floats || spec->kind == AttrKind::Strings);
    if (got != spec->kind && !emptyList)
      return cat("attribute '", name, "' of '", info.name, "' must be ", attrKindName(spec->kind),
                 ", got ", attrKindName(got));
  }
  for (const AttrSpec &spec : info.attrs)
    if (spec.required && !attrs.count(spec.name))
      return cat("op '", info.name, "' requires attribute '", spec.name, "'");
  return "";
}

// ---- InferCtx ---------------------------------------------------------------------------------

const AttrValue &InferCtx::get(std::string_view name, AttrKind kind) const {
  return attrOrDefault(info_, attrs_, name, kind);
}
int64_t InferCtx::i(std::string_view n) const {
  return std::get<int64_t>(get(n, AttrKind::Int));
}
double InferCtx::f(std::string_view n) const {
  return std::get<double>(get(n, AttrKind::Float));
}
const std::string &InferCtx::s(std::string_view n) const {
  return std::get<std::string>(get(n, AttrKind::String));
}
const std::vector<int64_t> &InferCtx::ints(std::string_view n) const {
  return std::get<std::vector<int64_t>>(get(n, AttrKind::Ints));
}
const std::vector<double> &InferCtx::floats(std::string_view n) const {
  return std::get<std::vector<double>>(get(n, AttrKind::Floats));
}
const std::vector<std::string> &InferCtx::strs(std::string_view n) const {
  return std::get<std::vector<std::string>>(get(n, AttrKind::Strings));
}
void InferCtx::fail(const std::string &msg) const {
  throw InferError{msg};
}

// ---- helpers ----------------------------------------------------------------------------------

std::string resultTypesProblem(std::span<const TensorType> operands,
                               std::span<const TensorType> results) {
  bool staticOperands = true;
  for (const TensorType &t : operands)
    staticOperands = staticOperands && t.isStatic();
  for (size_t i = 0; i < results.size(); ++i) {
    std::string which = results.size() > 1 ? cat("result #", i, " ") : std::string("result ");
    if (staticOperands && !results[i].isStatic())
      return cat(which, shapeStr(results[i].shape), " has a negative dim");
    std::string p = tensorSizeProblem(results[i]);
    if (!p.empty())
      return which + p;
  }
  return "";
}

std::optional<std::vector<int64_t>> broadcastShapes(const std::vector<int64_t> &a,
                                                    const std::vector<int64_t> &b) {
  size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> out(r);
  for (size_t k = 0; k < r; ++k) {
    int64_t da = k < r - a.size() ? 1 : a[k - (r - a.size())];
    int64_t db = k < r - b.size() ? 1 : b[k - (r - b.size())];
    if (da == db || db == 1)
      out[k] = da;
    else if (da == 1)
      out[k] = db;
    else
      return std::nullopt;
  }
  return out;
}

} // namespace aicf
