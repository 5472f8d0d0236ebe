// The Graph IR text parser (the printer, ir/printer.cpp, writes the same format). Its tokens
// come from ir/text_lexer.h, the lexer the Kernel IR parser shares (the Graph dialect).
//
// The format ("MCIR" text), by example (the printer writes one node per line; the parser does
// not care about line breaks):
//
//   graph @block(%x: f32[2,64,256], %mask: bool[64,64] loc("attention_mask"))
//       -> (%y: f32[2,64,256]) {
//     %ln_w = weight f32[256] loc("ln_1.weight")
//     %eps = weight f32[] = [1e-05]
//     %0 = layer_norm(%x, %ln_w) {axis = -1, epsilon = 1e-05} : f32[2,64,256]
//         props [online_reducible_norm] loc(fused["/ln_1/ReduceMean", "/ln_1/Add_1"])
//     %1, %2 = split(%0) {axis = 2, sizes = [128, 128]} : f32[2,64,128], f32[2,64,128]
//     %y = add(%1, %x) : f32[2,64,256]
//     return %y
//   }
//
// Grammar (whitespace and newlines are not significant; `//` starts a comment to end of line):
//   graph     := 'graph' '@' NAME [dims] '(' [param {',' param}] ')' '->' '(' [param {',' param}]
//                ')' '{' {weight | node} 'return' [value {',' value}] '}'
//   dims      := 'dims' '(' [IDENT '=' '[' MIN ',' MAX ',' OPT ']' {',' ...}] ')'    symbolic dims
//   param     := value ':' type [loc]             inputs; outputs name the values `return` lists
//   weight    := value '=' 'weight' type ['=' (literal | 'elided')] [loc]
//   node      := value {',' value} '=' OP '(' [value {',' value}] ')' [attrs] [':' type {',' type}]
//                ['props' '[' [PROPERTY {',' PROPERTY}] ']'] [loc]    (props, loc: any order)
//   type      := DTYPE '[' [dim {',' dim}] ']'    dim := INT | '?' [IDENT] | SYMEXPR
//                e.g. f32[?batch,64]; f32[3*seq,64] (a polynomial in the graph's dims)
//   attrs     := '{' [IDENT '=' attr {',' IDENT '=' attr}] '}'
//   attr      := INT | FLOAT | STRING | '[' [scalar {',' scalar}] ']' | '[:f]' | '[:s]'
//   loc       := 'loc' '(' STRING ')' | 'loc' '(' 'fused' '[' STRING {',' STRING} ']' ')'
//   literal   := '[' [number {',' number}] ']'     row-major; exactly numel() numbers
//
// Values: %NAME. Graph inputs, weights and named results use identifiers [A-Za-z_][A-Za-z0-9_.]*;
// all-digit names (%0, %17) are anonymous results (the printer numbers results in node order).
// Numbers: INT is [-]digits, FLOAT has a '.' or an exponent, and `inf`, `-inf`, `nan` are floats;
// floats are read with std::from_chars, so the printer's shortest form reads back bit-exactly.
// Strings are double-quoted with escapes \" \\ \n \t \r \xHH. An empty list `[]` is an int list
// (or the schema's list kind); `[:f]` and `[:s]` are empty float and string lists. An int given
// for a float attribute (or an int list for a float list) is converted.
//
// Weights: the text carries no bulk data. A weight with a literal gets exactly that data
// (f32/f16/bf16 elements are read as float, then rounded to the dtype; bool elements are 0 or 1);
// a weight without one (hand-written tests) is zero-filled (at most kMaxZeroFilledBytes). The
// printer writes the literal for weights of at most 16 elements, so small constants (epsilons,
// shapes) round-trip, and `= elided` for larger ones: such a weight has no data
// (Value::dataElided), and anything that reads its values (the interpreter, constant folding)
// refuses with an error naming it instead of computing with zeros.
//
// Result types after ':' are optional when writing IR by hand: when left out they are inferred
// (operands must then be defined earlier). When written they are checked by the verifier
// against inference ("result type f32[3] does not match inferred f32[2]"), and a node with
// written types may use a value defined later in the text, which the verifier then reports as a
// use before definition. `return` must list the outputs the signature declares, in order.
//
// Several graphs may share a file, separated by lines "// -----" (parseGraphs, aicf-opt
// --split-input-file). Errors are ParseErrors "FILE:LINE:COL: message" with the file's line
// numbers; the parser never recurses on nesting, bounds every number and size, and consumes at
// least one byte per step, so any input ends in a graph or a ParseError.
#include "ir/parser.h"
#include "ir/infer_sym.h"

#include "ir/op_registry.h"
#include "ir/text_lexer.h"
#include "ir/verifier.h"
#include "support/half.h"

#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

namespace aicf {

namespace {

using namespace text;

// Largest weight the parser zero-fills when the text gives no literal (1 GiB).
constexpr int64_t kMaxZeroFilledBytes = int64_t(1) << 30;

bool isIdentifier(const std::string &s) {
  return !s.empty() && isIdentStart(s[0]);
}
bool isAllDigits(const std::string &s) {
  if (s.empty())
    return false;
  for (char c : s)
    if (!isDigit(c))
      return false;
  return true;
}

// A name used as an operand before it was defined (allowed only with written result types).
struct ForwardRef {
  Node *node;
  size_t index;
  Token tok;
};

class Parser : TokenCursor {
public:
  Parser(std::string_view src, const std::string &file, int firstLine)
      : TokenCursor(src, file, firstLine, LexDialect::Graph, Mode::Streaming) {}

  std::unique_ptr<Graph> parseOneGraph() {
    auto g = parseGraphBody();
    if (tok().kind != Tok::Eof)
      failHere(cat("expected end of input after the graph, got ", describe(tok()),
                   " (separate graphs with a line '// -----')"));
    return g;
  }

private:
  // ---- numbers ---------------------------------------------------------------------------------
  int64_t parseIntText(const Token &t) const {
    int64_t v = 0;
    auto res = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (res.ec != std::errc() || res.ptr != t.text.data() + t.text.size())
      failAt(t, cat("integer ", excerpt(t.text), " is out of range"));
    return v;
  }

  template <typename F>
  F parseFloatText(const Token &t) const {
    F v = 0;
    auto res = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (res.ec != std::errc() || res.ptr != t.text.data() + t.text.size())
      failAt(t, cat("number ", excerpt(t.text), " is out of range"));
    return v;
  }

  // A floating-point scalar: INT, FLOAT, inf, -inf, nan. Returns false (consuming nothing) when
  // the token does not start one.
  template <typename F>
  bool parseFloatScalar(F &out) {
    if (at(Tok::Int) || at(Tok::Float)) {
      out = parseFloatText<F>(tok());
      consume();
      return true;
    }
    if (atIdent("inf") || atIdent("nan")) {
      out =
          atIdent("inf") ? std::numeric_limits<F>::infinity() : std::numeric_limits<F>::quiet_NaN();
      consume();
      return true;
    }
    if (at(Tok::Minus)) {
      consume();
      if (!atIdent("inf"))
        failExpected("'inf' after '-'");
      consume();
      out = -std::numeric_limits<F>::infinity();
      return true;
    }
    return false;
  }

  // ---- types -----------------------------------------------------------------------------------
  TensorType parseType() {
    if (!at(Tok::Ident))
      failExpected("a type such as f32[2,3]");
    Token dt = tok();
    auto dtype = parseDType(dt.text);
    if (!dtype)
      failAt(dt, cat("unknown dtype '", excerpt(dt.text), "'"));
    consume();
    TensorType t;
    t.dtype = *dtype;
    expect(Tok::LBracket, "'[' after the dtype");
    bool named = false;
    std::vector<std::string> names;
    std::vector<SymExpr> syms; // once a dim is symbolic: every dim so far
    if (!at(Tok::RBracket)) {
      while (true) {
        // An integer followed by an operator starts a symbolic dim ("2*seq+1", as printed).
        Token first = tok();
        std::string text;
        bool plain = false; // a plain integer dim, done
        if (at(Tok::Int)) {
          int64_t d = parseIntText(tok());
          consume();
          bool more = at(Tok::Star) || at(Tok::Plus) || at(Tok::Minus) ||
                      (at(Tok::Int) && !tok().text.empty() && tok().text[0] == '-');
          if (more) {
            text = first.text;
          } else {
            if (d < 0)
              failAt(first, cat("dimension ", d, " is negative"));
            t.shape.push_back(d);
            names.emplace_back();
            plain = true;
          }
        }
        if (plain) {
          // (done above)
        } else if (!text.empty() || at(Tok::Ident)) {
          // A symbolic dim: an expression in the graph's dims ("batch", "3*seq", "seq+1").
          if (text.empty())
            first = tok();
          while (at(Tok::Ident) || at(Tok::Int) || at(Tok::Star) || at(Tok::Plus) ||
                 at(Tok::Minus)) {
            text += tok().text;
            consume();
          }
          std::string why;
          auto e = SymExpr::parse(text, &why);
          if (!e)
            failAt(first, cat("bad symbolic dim '", excerpt(text), "': ", why));
          for (const std::string &sym : e->symbols())
            if (!g_ || !g_->findDim(sym))
              failAt(first,
                     cat("unknown dim '", excerpt(sym), "' (declare it in the graph's dims(...))"));
          auto v = e->eval(g_->planningDims());
          if (!v || *v < 0)
            failAt(first, cat("symbolic dim '", excerpt(text), "' is ",
                              v ? "negative" : "out of range", " at the planning point"));
          while (syms.size() < t.shape.size())
            syms.emplace_back(t.shape[syms.size()]);
          syms.push_back(*e);
          t.shape.push_back(*v);
          names.emplace_back();
        } else if (accept(Tok::Question)) {
          t.shape.push_back(kDynamicDim);
          names.emplace_back();
          if (at(Tok::Ident)) {
            names.back() = tok().text;
            named = true;
            consume();
          }
        } else {
          failExpected("a dimension");
        }
        if (accept(Tok::RBracket))
          break;
        expect(Tok::Comma, "',' or ']' in the shape");
      }
    } else {
      consume();
    }
    if (named)
      t.dimNames = std::move(names);
    if (!syms.empty()) {
      while (syms.size() < t.shape.size())
        syms.emplace_back(t.shape[syms.size()]);
      t.sym = std::move(syms);
    }
    if (std::string p = tensorSizeProblem(t); !p.empty())
      failAt(dt, cat("type ", p));
    return t;
  }

  // ---- attributes ------------------------------------------------------------------------------
  AttrValue parseAttrValue() {
    if (at(Tok::String)) {
      std::string s = tok().text;
      consume();
      return s;
    }
    if (at(Tok::Int)) {
      int64_t v = parseIntText(tok());
      consume();
      return v;
    }
    double d;
    if (parseFloatScalar(d))
      return d;
    if (!at(Tok::LBracket))
      failExpected("an attribute value");
    consume();
    if (accept(Tok::Colon)) { // [:f] [:s] [:i]
      if (!at(Tok::Ident) || (tok().text != "f" && tok().text != "s" && tok().text != "i"))
        failExpected("'f', 's' or 'i' in a typed empty list");
      char kind = tok().text[0];
      consume();
      expect(Tok::RBracket, "']'");
      if (kind == 'f')
        return std::vector<double>{};
      if (kind == 's')
        return std::vector<std::string>{};
      return std::vector<int64_t>{};
    }
    std::vector<int64_t> ints;
    std::vector<double> floats;
    std::vector<std::string> strs;
    bool anyFloat = false, anyString = false, anyNumber = false;
    if (!accept(Tok::RBracket)) {
      while (true) {
        if (at(Tok::LBracket))
          failHere("nested lists are not supported");
        if (at(Tok::String)) {
          anyString = true;
          strs.push_back(tok().text);
          consume();
        } else if (at(Tok::Int)) {
          anyNumber = true;
          int64_t v = parseIntText(tok());
          ints.push_back(v);
          floats.push_back(static_cast<double>(v));
          consume();
        } else if (parseFloatScalar(d)) {
          anyNumber = anyFloat = true;
          floats.push_back(d);
        } else {
          failExpected("a list element");
        }
        if (anyString && anyNumber)
          failHere("a list mixes strings and numbers");
        if (accept(Tok::RBracket))
          break;
        expect(Tok::Comma, "',' or ']' in the list");
      }
    }
    if (anyString)
      return strs;
    if (anyFloat)
      return floats;
    return ints;
  }

  // Converts what the text cannot say unambiguously to the schema's kind: [] to an empty
  // float/string list, an int to a float, an int list to a float list.
  static void coerceToSchema(const OpInfo &info, AttrMap &attrs) {
    for (auto &[name, value] : attrs) {
      const AttrSpec *spec = info.findAttr(name);
      if (!spec || attrKindOf(value) == spec->kind)
        continue;
      AttrKind got = attrKindOf(value);
      if (got == AttrKind::Int && spec->kind == AttrKind::Float) {
        value = static_cast<double>(std::get<int64_t>(value));
      } else if (got == AttrKind::Ints && spec->kind == AttrKind::Floats) {
        std::vector<double> fs;
        for (int64_t v : std::get<std::vector<int64_t>>(value))
          fs.push_back(static_cast<double>(v));
        value = fs;
      } else if (got == AttrKind::Ints && spec->kind == AttrKind::Strings &&
                 std::get<std::vector<int64_t>>(value).empty()) {
        value = std::vector<std::string>{};
      }
    }
  }

  AttrMap parseAttrDict() {
    AttrMap attrs;
    consume(); // '{'
    if (accept(Tok::RBrace))
      return attrs;
    while (true) {
      if (!at(Tok::Ident))
        failExpected("an attribute name");
      Token key = tok();
      consume();
      expect(Tok::Equal, "'=' after the attribute name");
      AttrValue v = parseAttrValue();
      if (!attrs.emplace(key.text, std::move(v)).second)
        failAt(key, cat("duplicate attribute '", key.text, "'"));
      if (accept(Tok::RBrace))
        break;
      expect(Tok::Comma, "',' or '}' in the attributes");
    }
    return attrs;
  }

  // ---- locations and properties -----------------------------------------------------------------
  Location parseLoc() {
    consume(); // 'loc'
    expect(Tok::LParen, "'(' after 'loc'");
    Location loc;
    if (at(Tok::String)) {
      loc.origins.push_back(tok().text);
      consume();
    } else if (atIdent("fused")) {
      consume();
      expect(Tok::LBracket, "'[' after 'fused'");
      while (true) {
        loc.origins.push_back(expect(Tok::String, "a quoted location").text);
        if (accept(Tok::RBracket))
          break;
        expect(Tok::Comma, "',' or ']' in the fused location");
      }
    } else {
      failExpected("a quoted location or fused[...]");
    }
    expect(Tok::RParen, "')' after the location");
    return loc;
  }

  PropertySet parseProps() {
    consume(); // 'props'
    PropertySet props;
    expect(Tok::LBracket, "'[' after 'props'");
    if (accept(Tok::RBracket))
      return props;
    while (true) {
      if (!at(Tok::Ident))
        failExpected("a property name");
      auto p = parseProperty(tok().text);
      if (!p)
        failHere(cat("unknown property '", excerpt(tok().text), "'"));
      props.add(*p);
      consume();
      if (accept(Tok::RBracket))
        break;
      expect(Tok::Comma, "',' or ']' in the properties");
    }
    return props;
  }

  // ---- values ----------------------------------------------------------------------------------
  void define(const Token &nameTok, Value *v) {
    if (!values_.emplace(nameTok.text, v).second)
      failAt(nameTok, cat("redefinition of value %", excerpt(nameTok.text)));
  }

  void checkFreshIdentifier(const Token &nameTok, const char *what) {
    if (!isIdentifier(nameTok.text))
      failAt(nameTok,
             cat(what, " name %", excerpt(nameTok.text), " must start with a letter or '_'"));
    if (values_.count(nameTok.text))
      failAt(nameTok, cat("redefinition of value %", excerpt(nameTok.text)));
  }

  // dims(batch = [1, 64, 8], seq = [1, 512, 128]): each symbol's [min, max, opt].
  std::vector<DimRange> parseDims() {
    consume();
    expect(Tok::LParen, "'(' after 'dims'");
    std::vector<DimRange> dims;
    while (!accept(Tok::RParen)) {
      if (!dims.empty())
        expect(Tok::Comma, "',' or ')' in dims(...)");
      Token n = expect(Tok::Ident, "a dim name");
      if (!isSymbolName(n.text))
        failAt(n, cat("dim name '", excerpt(n.text), "' is not an identifier"));
      for (const DimRange &d : dims)
        if (d.name == n.text)
          failAt(n, cat("dim '", excerpt(n.text), "' declared twice"));
      expect(Tok::Equal, "'=' after the dim name");
      expect(Tok::LBracket, "'[' before the dim's [min, max, opt]");
      int64_t v[3];
      for (int k = 0; k < 3; ++k) {
        if (k)
          expect(Tok::Comma, "',' in the dim's [min, max, opt]");
        if (!at(Tok::Int))
          failExpected("an integer in the dim's [min, max, opt]");
        v[k] = parseIntText(tok());
        consume();
      }
      expect(Tok::RBracket, "']' after the dim's [min, max, opt]");
      if (v[0] < 0 || v[0] > v[1] || v[2] < v[0] || v[2] > v[1])
        failAt(n, cat("dim '", n.text, "' needs 0 <= min <= opt <= max, got [", v[0], ", ", v[1],
                      ", ", v[2], "]"));
      dims.push_back(DimRange{n.text, v[0], v[1], v[2]});
    }
    return dims;
  }

  Value *lookup(const Token &nameTok) {
    auto it = values_.find(nameTok.text);
    return it == values_.end() ? nullptr : it->second;
  }

  // ---- graph -----------------------------------------------------------------------------------
  struct Declared {
    Token name;
    TensorType type;
  };

  std::unique_ptr<Graph> parseGraphBody() {
    expectIdent("graph");
    Token name = expect(Tok::Global, "'@name' after 'graph'");
    auto g = std::make_unique<Graph>(name.text);
    g_ = g.get();
    if (atIdent("dims"))
      g->setDims(parseDims());

    expect(Tok::LParen, "'(' before the graph inputs");
    if (!accept(Tok::RParen)) {
      while (true) {
        Token v = expect(Tok::Value, "an input '%name'");
        checkFreshIdentifier(v, "input");
        expect(Tok::Colon, "':' after the input name");
        TensorType t = parseType();
        Value *in = g->addInput(v.text, std::move(t));
        in->pos = posOf(v);
        if (atIdent("loc"))
          in->loc = parseLoc();
        define(v, in);
        if (accept(Tok::RParen))
          break;
        expect(Tok::Comma, "',' or ')' after an input");
      }
    }
    expect(Tok::Arrow, "'->' after the inputs");
    expect(Tok::LParen, "'(' before the graph outputs");
    std::vector<Declared> outputs;
    if (!accept(Tok::RParen)) {
      while (true) {
        Token v = expect(Tok::Value, "an output '%name'");
        expect(Tok::Colon, "':' after the output name");
        outputs.push_back({v, parseType()});
        if (accept(Tok::RParen))
          break;
        expect(Tok::Comma, "',' or ')' after an output");
      }
    }
    expect(Tok::LBrace, "'{' to open the graph body");

    while (!atIdent("return")) {
      if (!at(Tok::Value))
        failExpected("a statement ('%name = ...' or 'return')");
      parseStatement();
    }
    Token ret = tok();
    consume();
    std::vector<Token> returned;
    if (at(Tok::Value)) {
      while (true) {
        returned.push_back(expect(Tok::Value, "a value"));
        if (!accept(Tok::Comma))
          break;
      }
    }
    expect(Tok::RBrace, "'}' after the return");

    for (const ForwardRef &f : forwardRefs_) {
      Value *v = lookup(f.tok);
      if (!v)
        failAt(f.tok, cat("undefined value %", excerpt(f.tok.text)));
      f.node->setOperand(f.index, v);
    }
    if (returned.size() != outputs.size())
      failAt(ret, cat("return lists ", returned.size(), " value", returned.size() == 1 ? "" : "s",
                      ", the signature declares ", outputs.size()));
    for (size_t i = 0; i < returned.size(); ++i) {
      const Declared &d = outputs[i];
      if (returned[i].text != d.name.text)
        failAt(returned[i], cat("return value %", excerpt(returned[i].text),
                                " does not match the signature's output %", excerpt(d.name.text)));
      Value *v = lookup(returned[i]);
      if (!v)
        failAt(returned[i], cat("undefined value %", excerpt(returned[i].text)));
      if (v->type() != d.type)
        failAt(d.name, cat("output %", excerpt(d.name.text), " is declared ", d.type.str(),
                           " but defined as ", v->type().str()));
      g->addOutput(v);
    }
    g_ = nullptr;
    return g;
  }

  void parseStatement() {
    std::vector<Token> results;
    while (true) {
      results.push_back(expect(Tok::Value, "a result '%name'"));
      if (!accept(Tok::Comma))
        break;
    }
    expect(Tok::Equal, "'=' after the results");
    if (atIdent("weight")) {
      parseWeight(results);
      return;
    }
    if (!at(Tok::Ident))
      failExpected("an op name or 'weight'");
    Token opTok = tok();
    auto op = opByName(opTok.text);
    if (!op)
      failHere(cat("unknown op '", excerpt(opTok.text), "'"));
    consume();
    parseNode(*op, opTok, results);
  }

  void parseWeight(const std::vector<Token> &results) {
    consume(); // 'weight'
    if (results.size() != 1)
      failAt(results[1], "a weight defines exactly one value");
    const Token &name = results[0];
    checkFreshIdentifier(name, "weight");
    Token typeTok = tok();
    TensorType t = parseType();
    if (!t.isStatic())
      failAt(typeTok, cat("weight type ", t.str(), " must be static"));
    auto data = std::make_shared<Tensor>();
    bool elided = false;
    if (accept(Tok::Equal)) {
      if (atIdent("elided")) {
        consume(); // the printer left the data out: a weight that refuses to be read
        elided = true;
      } else {
        data = parseLiteral(t);
      }
    } else {
      int64_t bytes = 0;
      if (__builtin_mul_overflow(t.numel(), static_cast<int64_t>(dtypeSize(t.dtype)), &bytes) ||
          bytes > kMaxZeroFilledBytes)
        failAt(typeTok, cat("weight ", t.str(), " is too large to zero-fill (limit ",
                            kMaxZeroFilledBytes, " bytes)"));
      data = std::make_shared<Tensor>(t);
    }
    Value *w =
        elided ? g_->addElidedWeight(name.text, t) : g_->addWeight(name.text, std::move(data));
    w->pos = posOf(name);
    if (atIdent("loc"))
      w->loc = parseLoc();
    define(name, w);
  }

  std::shared_ptr<Tensor> parseLiteral(const TensorType &t) {
    Token open = expect(Tok::LBracket, "'[' to start the weight's values");
    const int64_t numel = t.numel();
    std::vector<double> floats; // float elements (f16/bf16/f32 read as float, f64 as double)
    std::vector<int64_t> ints;  // integer and bool elements (u64 as its bits)
    int64_t count = 0;
    if (!accept(Tok::RBracket)) {
      while (true) {
        if (count == numel)
          failHere(cat("too many values for a weight of type ", t.str()));
        if (t.dtype == DType::F64) {
          double d;
          if (!parseFloatScalar(d))
            failExpected("a number");
          floats.push_back(d);
        } else if (isFloat(t.dtype)) {
          float f;
          if (!parseFloatScalar(f))
            failExpected("a number");
          floats.push_back(f);
        } else {
          if (!at(Tok::Int))
            failExpected(cat("an integer for ", dtypeName(t.dtype)));
          ints.push_back(parseElementInt(t.dtype));
          consume();
        }
        ++count;
        if (accept(Tok::RBracket))
          break;
        expect(Tok::Comma, "',' or ']' in the values");
      }
    }
    if (count != numel)
      failAt(open, cat("weight of type ", t.str(), " needs ", numel, " value",
                       numel == 1 ? "" : "s", ", got ", count));
    auto data = std::make_shared<Tensor>(t);
    for (int64_t i = 0; i < numel; ++i) {
      if (isFloat(t.dtype))
        data->setDouble(i, floats[static_cast<size_t>(i)]);
      else
        data->setInt(i, ints[static_cast<size_t>(i)]);
    }
    return data;
  }

  // An integer literal of a weight of dtype `t`, range-checked (u64: up to 2^64 - 1, returned
  // as its bits).
  int64_t parseElementInt(DType t) const {
    if (t == DType::U64) {
      uint64_t u = 0;
      auto res = std::from_chars(tok().text.data(), tok().text.data() + tok().text.size(), u);
      if (res.ec != std::errc() || res.ptr != tok().text.data() + tok().text.size())
        failHere(cat("value ", excerpt(tok().text), " does not fit u64"));
      return static_cast<int64_t>(u);
    }
    int64_t v = parseIntText(tok());
    auto in = [v](int64_t lo, int64_t hi) { return v >= lo && v <= hi; };
    bool fits = t == DType::I64 || (t == DType::I32 && in(INT32_MIN, INT32_MAX)) ||
                (t == DType::I16 && in(INT16_MIN, INT16_MAX)) ||
                (t == DType::I8 && in(INT8_MIN, INT8_MAX)) ||
                (t == DType::U32 && in(0, UINT32_MAX)) || (t == DType::U16 && in(0, UINT16_MAX)) ||
                (t == DType::U8 && in(0, UINT8_MAX)) || (t == DType::Bool && in(0, 1));
    if (!fits)
      failHere(cat("value ", v, " does not fit ", dtypeName(t)));
    return v;
  }

  void parseNode(Op op, const Token &opTok, const std::vector<Token> &results) {
    const OpInfo &info = opInfo(op);
    expect(Tok::LParen, "'(' after the op name");
    std::vector<Token> operandToks;
    if (!accept(Tok::RParen)) {
      while (true) {
        operandToks.push_back(expect(Tok::Value, "an operand '%name'"));
        if (accept(Tok::RParen))
          break;
        expect(Tok::Comma, "',' or ')' after an operand");
      }
    }
    AttrMap attrs;
    if (at(Tok::LBrace))
      attrs = parseAttrDict();
    coerceToSchema(info, attrs);
    std::vector<TensorType> types;
    bool typed = accept(Tok::Colon);
    if (typed) {
      while (true) {
        types.push_back(parseType());
        if (!accept(Tok::Comma))
          break;
      }
      if (types.size() != results.size())
        failAt(results[0], cat(results.size(), " result", results.size() == 1 ? "" : "s", " but ",
                               types.size(), " type", types.size() == 1 ? "" : "s"));
    }
    PropertySet props;
    Location loc;
    for (bool seenProps = false, seenLoc = false;;) { // either order, each at most once
      if (atIdent("props") && !seenProps) {
        props = parseProps();
        seenProps = true;
      } else if (atIdent("loc") && !seenLoc) {
        loc = parseLoc();
        seenLoc = true;
      } else {
        break;
      }
    }

    // Resolve operands; a not-yet-defined name is a forward reference when types are written.
    std::vector<Value *> operands;
    std::vector<size_t> forward;
    for (size_t k = 0; k < operandToks.size(); ++k) {
      Value *v = lookup(operandToks[k]);
      if (!v && !typed)
        failAt(operandToks[k], cat("undefined value %", excerpt(operandToks[k].text)));
      if (!v)
        forward.push_back(k);
      operands.push_back(v);
    }
    for (const Token &r : results)
      if (values_.count(r.text))
        failAt(r, cat("redefinition of value %", excerpt(r.text)));
    if (!typed)
      types = inferTypes(info, opTok, results, operands, attrs, loc);

    // A loop's body graph follows the node, parsed with names of its own.
    std::shared_ptr<Graph> body;
    if (op == Op::Loop) {
      if (!atIdent("graph"))
        failExpected("the loop's body 'graph @name(...) -> (...) { ... }'");
      Graph *outer = g_;
      std::map<std::string, Value *> outerValues;
      std::vector<ForwardRef> outerRefs;
      std::swap(values_, outerValues);
      std::swap(forwardRefs_, outerRefs);
      body = parseGraphBody();
      std::swap(values_, outerValues);
      std::swap(forwardRefs_, outerRefs);
      g_ = outer;
    }
    Node *n =
        g_->addNode(op, std::move(operands), std::move(types), std::move(attrs), std::move(loc));
    n->body = std::move(body);
    n->pos = posOf(results[0]);
    n->props = props;
    for (size_t k : forward)
      forwardRefs_.push_back({n, k, operandToks[k]});
    for (size_t i = 0; i < results.size(); ++i) {
      Value *r = n->result(i);
      r->pos = posOf(results[i]);
      if (!isAllDigits(results[i].text))
        g_->renameValue(r, results[i].text);
      define(results[i], r);
    }
  }

  // Result types of a node written without them: the registry's inference, with the checks it
  // needs first (arity, attributes), each reported at the node.
  std::vector<TensorType> inferTypes(const OpInfo &info, const Token &opTok,
                                     const std::vector<Token> &results,
                                     const std::vector<Value *> &operands, const AttrMap &attrs,
                                     const Location &loc) const {
    auto fail = [&](const std::string &msg) {
      failAt(results[0], loc.empty() ? msg : loc.str() + ": " + msg);
    };
    int nops = static_cast<int>(operands.size());
    if (nops < info.minOperands || (info.maxOperands >= 0 && nops > info.maxOperands))
      fail(cat(info.name, " cannot take ", nops, " operand", nops == 1 ? "" : "s"));
    int nres = static_cast<int>(results.size());
    if (info.numResults >= 0 && nres != info.numResults)
      fail(cat(info.name, " has ", info.numResults, " result", info.numResults == 1 ? "" : "s",
               ", got ", nres));
    std::string bad = checkAttrs(info, attrs);
    if (!bad.empty())
      fail(bad);
    std::vector<TensorType> operandTypes;
    for (const Value *v : operands)
      operandTypes.push_back(v->type());
    InferCtx ctx(info, operandTypes, attrs, nres);
    std::vector<TensorType> types;
    try {
      types = runInfer(info, ctx);
    } catch (const InferError &e) {
      fail(e.message);
    }
    if (std::string p = resultTypesProblem(operandTypes, types); !p.empty())
      fail(p);
    if (types.size() != results.size())
      failAt(opTok, cat(info.name, " infers ", types.size(), " results, got ", results.size()));
    return types;
  }

  Graph *g_ = nullptr;
  std::map<std::string, Value *> values_;
  std::vector<ForwardRef> forwardRefs_;
};

bool isSeparatorLine(std::string_view line) {
  size_t b = line.find_first_not_of(" \t\r");
  size_t e = line.find_last_not_of(" \t\r");
  return b != std::string_view::npos && line.substr(b, e - b + 1) == "// -----";
}

// True when the text holds something besides blanks and `//` comments.
bool hasContent(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    size_t eol = text.find('\n', i);
    std::string_view line = text.substr(i, eol == std::string_view::npos ? eol : eol - i);
    size_t b = line.find_first_not_of(" \t\r\f\v");
    if (b != std::string_view::npos && line.substr(b, 2) != "//")
      return true;
    if (eol == std::string_view::npos)
      break;
    i = eol + 1;
  }
  return false;
}

// Verifies a freshly parsed graph; problems become ParseErrors at the offending line.
void verifyParsed(const Graph &g, const std::string &filename) {
  std::vector<VerifierDiagnostic> diags = verifyGraphDetailed(g);
  if (diags.empty())
    return;
  const VerifierDiagnostic &d = diags.front();
  if (d.pos.line == 0)
    throw UserError(cat(filename, ": ", d.str()));
  // Nodes with a loc are named by it; keep the text position in front as well.
  throw ParseError(d.pos, d.where == d.pos.str() ? d.message : d.str());
}

} // namespace

std::vector<SourceChunk> splitInputChunks(std::string_view text) {
  std::vector<SourceChunk> chunks;
  size_t start = 0, i = 0;
  int line = 1, startLine = 1;
  auto flush = [&](size_t end) {
    std::string_view part = text.substr(start, end - start);
    if (hasContent(part))
      chunks.push_back({part, startLine});
  };
  while (i <= text.size()) {
    size_t eol = text.find('\n', i);
    size_t end = eol == std::string_view::npos ? text.size() : eol;
    if (isSeparatorLine(text.substr(i, end - i))) {
      flush(i);
      start = eol == std::string_view::npos ? text.size() : eol + 1;
      startLine = line + 1;
    }
    if (eol == std::string_view::npos)
      break;
    i = eol + 1;
    ++line;
  }
  flush(text.size());
  return chunks;
}

std::unique_ptr<Graph> parseGraphChunk(const SourceChunk &chunk, const std::string &filename,
                                       bool verify) {
  std::unique_ptr<Graph> g = Parser(chunk.text, filename, chunk.firstLine).parseOneGraph();
  if (verify)
    verifyParsed(*g, filename);
  return g;
}

std::unique_ptr<Graph> parseGraph(std::string_view text, const std::string &filename, bool verify) {
  return parseGraphChunk(SourceChunk{text, 1}, filename, verify);
}

std::vector<std::unique_ptr<Graph>> parseGraphs(std::string_view text, const std::string &filename,
                                                bool verify) {
  std::vector<std::unique_ptr<Graph>> graphs;
  for (const SourceChunk &c : splitInputChunks(text))
    graphs.push_back(parseGraphChunk(c, filename, verify));
  if (graphs.empty()) // report "expected 'graph'" at the end of the text
    graphs.push_back(parseGraph(text, filename, verify));
  return graphs;
}

std::unique_ptr<Graph> parseGraphFile(const std::string &path, bool verify) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    throw UserError(cat("cannot open ", path), 1);
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad())
    throw UserError(cat("cannot read ", path), 1);
  std::string text = ss.str();
  std::vector<SourceChunk> chunks = splitInputChunks(text);
  if (chunks.size() > 1)
    throw UserError(
        cat(path, " holds ", chunks.size(), " graphs separated by '// -----'; expected one"));
  return chunks.empty() ? parseGraph(text, path, verify) : parseGraphChunk(chunks[0], path, verify);
}

} // namespace aicf
