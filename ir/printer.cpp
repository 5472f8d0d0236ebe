// The Graph IR text printer. The format is described at the top of ir/parser.cpp, which reads
// it back. Output is deterministic: graph inputs, weights and graph outputs print by their
// (sanitised, de-duplicated) names, other results are numbered %0, %1, ... in node order,
// attributes come sorted, floats in their shortest round-trip form, and weights with at most
// kMaxLiteralElements elements print their data so small constants survive a round trip;
// larger ones print `= elided` (the parser reads that as a weight without data).
//
// The printer never throws on malformed graphs: the pass manager prints IR right after a pass
// that may have broken it, so a null or foreign operand prints as %<null> / %<undefined>.
#include "ir/printer.h"

#include "ir/attributes.h"

#include <charconv>
#include <cmath>
#include <set>
#include <sstream>
#include <unordered_map>

namespace aicf {

namespace {

// Weights with at most this many elements print their data inline (parser.cpp reads it back).
constexpr int64_t kMaxLiteralElements = 16;

bool isIdentStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool isIdentChar(char c) {
  return isIdentStart(c) || (c >= '0' && c <= '9') || c == '.';
}

// "onnx::Add_1:0" -> "onnx__Add_1_0"; "" -> `fallback`; "0x" -> "_0x".
std::string sanitize(const std::string &name, const std::string &fallback) {
  if (name.empty())
    return fallback;
  std::string s;
  for (char c : name)
    s += isIdentChar(c) ? c : '_';
  if (!isIdentStart(s[0]))
    s = "_" + s;
  return s;
}

// f32 (and f16/bf16 widened to f32) elements print in float's shortest round-trip form, so
// std::from_chars<float> gives the same bits back.
std::string formatFloat32(float v) {
  if (std::isnan(v))
    return "nan";
  if (std::isinf(v))
    return v > 0 ? "inf" : "-inf";
  char buf[48];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".eE") == std::string::npos)
    s += ".0";
  return s;
}

std::string quoted(const std::string &s) {
  return formatAttr(AttrValue{s});
}

std::string formatLoc(const Location &loc) {
  if (loc.origins.size() == 1)
    return "loc(" + quoted(loc.origins[0]) + ")";
  std::string s = "loc(fused[";
  for (size_t i = 0; i < loc.origins.size(); ++i)
    s += (i ? ", " : "") + quoted(loc.origins[i]);
  return s + "])";
}

std::string formatElement(const Tensor &t, int64_t i) {
  switch (t.dtype()) {
  case DType::F64: return formatFloat(t.data<double>()[i]); // shortest round trip (attributes.h)
  case DType::F32:
  case DType::F16:
  case DType::BF16: return formatFloat32(static_cast<float>(t.getDouble(i)));
  case DType::U64: return std::to_string(t.data<uint64_t>()[i]);
  case DType::I64:
  case DType::I32:
  case DType::I16:
  case DType::I8:
  case DType::U32:
  case DType::U16:
  case DType::U8:
  case DType::Bool: return std::to_string(t.getInt(i));
  }
  return "?";
}

class Printer {
public:
  Printer(std::ostream &os, const Graph &g) : os_(os), g_(g) {}

  void print() {
    nameValues();
    os_ << "graph @" << sanitize(g_.name(), "main");
    if (!g_.dims().empty()) {
      os_ << " dims(";
      for (size_t i = 0; i < g_.dims().size(); ++i) {
        const DimRange &d = g_.dims()[i];
        os_ << (i ? ", " : "") << d.name << " = [" << d.min << ", " << d.max << ", " << d.opt
            << "]";
      }
      os_ << ")";
    }
    os_ << "(";
    for (size_t i = 0; i < g_.inputs().size(); ++i) {
      const Value *v = g_.inputs()[i];
      os_ << (i ? ", " : "") << ref(v) << ": " << v->type().str();
      printValueLoc(v);
    }
    os_ << ") -> (";
    for (size_t i = 0; i < g_.outputs().size(); ++i) {
      const Value *v = g_.outputs()[i];
      os_ << (i ? ", " : "") << ref(v) << ": " << (v ? v->type().str() : "?");
    }
    os_ << ") {\n";
    for (const Value *w : g_.weights())
      printWeight(w);
    for (const Node *n : g_.nodes())
      printNode(n);
    os_ << "  return";
    for (size_t i = 0; i < g_.outputs().size(); ++i)
      os_ << (i ? ", " : " ") << ref(g_.outputs()[i]);
    os_ << "\n}\n";
  }

private:
  // Names: inputs, then weights, then graph outputs by name; all other results by number.
  void nameValues() {
    for (const Value *v : g_.inputs())
      byName(v, sanitize(v->name(), "input"));
    for (const Value *w : g_.weights())
      byName(w, sanitize(w->name(), "w"));
    for (size_t i = 0; i < g_.outputs().size(); ++i) {
      const Value *v = g_.outputs()[i];
      if (v && !names_.count(v))
        byName(v, sanitize(v->name(), "out" + std::to_string(i)));
    }
    int next = 0;
    for (const Node *n : g_.nodes())
      for (const Value *r : n->results())
        if (r && !names_.count(r))
          names_[r] = std::to_string(next++);
  }

  void byName(const Value *v, const std::string &base) {
    if (names_.count(v))
      return;
    std::string name = base;
    for (int k = 1; taken_.count(name); ++k)
      name = base + "_" + std::to_string(k);
    taken_.insert(name);
    names_[v] = name;
  }

  std::string ref(const Value *v) const {
    if (!v)
      return "%<null>";
    auto it = names_.find(v);
    return it == names_.end() ? "%<undefined>" : "%" + it->second;
  }

  // Inputs and weights keep their original name in `loc` when sanitising changed it.
  void printValueLoc(const Value *v) {
    if (!v->loc.empty())
      os_ << " " << formatLoc(v->loc);
    else if (!v->name().empty() && names_[v] != v->name())
      os_ << " " << formatLoc(Location(v->name()));
  }

  // Small weights print their data; larger ones print `= elided`, so reading the text back
  // gives a weight that knows it has no data instead of one silently full of zeros.
  void printWeight(const Value *w) {
    os_ << "  " << ref(w) << " = weight " << w->type().str();
    const TensorPtr *data = w->hasData() ? &w->data() : nullptr;
    if (data && (*data)->type().isStatic() && (*data)->numel() <= kMaxLiteralElements &&
        static_cast<int64_t>((*data)->byteSize()) == (*data)->type().bytes()) {
      os_ << " = [";
      for (int64_t i = 0; i < (*data)->numel(); ++i)
        os_ << (i ? ", " : "") << formatElement(**data, i);
      os_ << "]";
    } else if (data || w->dataElided()) {
      os_ << " = elided";
    }
    printValueLoc(w);
    os_ << "\n";
  }

  void printNode(const Node *n) {
    os_ << "  ";
    for (size_t i = 0; i < n->numResults(); ++i)
      os_ << (i ? ", " : "") << ref(n->result(i));
    os_ << " = " << n->name() << "(";
    for (size_t i = 0; i < n->numOperands(); ++i)
      os_ << (i ? ", " : "") << ref(n->operand(i));
    os_ << ")";
    if (!n->attrs.empty()) {
      os_ << " {";
      bool first = true;
      for (const auto &[name, value] : n->attrs) {
        os_ << (first ? "" : ", ") << name << " = " << formatAttr(value);
        first = false;
      }
      os_ << "}";
    }
    if (n->numResults()) {
      os_ << " : ";
      for (size_t i = 0; i < n->numResults(); ++i)
        os_ << (i ? ", " : "") << (n->result(i) ? n->result(i)->type().str() : "?");
    }
    if (!n->props.empty()) {
      os_ << " props [";
      bool first = true;
      for (MemProperty p : n->props.list()) {
        os_ << (first ? "" : ", ") << propertyName(p);
        first = false;
      }
      os_ << "]";
    }
    if (!n->loc.empty())
      os_ << " " << formatLoc(n->loc);
    os_ << "\n";
    if (n->body) { // a loop's body graph, nested under the node and indented
      std::istringstream lines(printGraph(*n->body));
      for (std::string line; std::getline(lines, line);)
        os_ << (line.empty() ? "" : "    ") << line << "\n";
    }
  }

  std::ostream &os_;
  const Graph &g_;
  std::unordered_map<const Value *, std::string> names_;
  std::set<std::string> taken_;
};

} // namespace

void printGraph(std::ostream &os, const Graph &g) {
  Printer(os, g).print();
}

std::string printGraph(const Graph &g) {
  std::ostringstream os;
  printGraph(os, g);
  return os.str();
}

} // namespace aicf
