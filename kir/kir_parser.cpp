// The Kernel IR text parser (kir_parser.h); the printer, kir_printer.cpp, writes the same format.
// Its tokens come from ir/text_lexer.h, the lexer the Graph IR parser shares (the Kernel
// dialect), cut up front: block_reduce looks ahead at its field lines, and keywords are told
// from names by the token after them.
//
// Grammar (whitespace and newlines are not significant; `//` starts a comment to end of line and
// is skipped; `#` starts a Comment statement, kept in the kernel):
//   kernel   := 'kernel' '@' NAME ['recipe' '(' NAME ')'] 'grid' '(' [axis {',' axis}] ')'
//               'block' '(' NAME ':' INT ')' ['knobs' '{' [knob {',' knob}] '}']
//               '(' [param {',' param}] ')' '{' {alloc} {stmt} '}'
//   axis     := NAME ':' INT            knob := NAME '=' INT
//   param    := NAME ':' SCOPE type ROLE       SCOPE := global | shared | local
//   alloc    := SCOPE NAME ':' type            ROLE  := in | out | temp
//   type     := DTYPE '[' [INT {',' INT}] ']'
//   stmt     := '{' {stmt} '}'
//             | 'for' range ['unroll' | 'vectorize'] '{' {stmt} '}'
//             | 'region' NAME '{' {stmt} '}'
//             | 'if' expr '{' {stmt} '}' ['else' '{' {stmt} '}']
//             | 'reduce' range '{' 'init' '{' {stmt} '}' 'update' '{' {stmt} '}' '}'
//             | 'var' NAME ':' DTYPE '=' expr  |  NAME '=' expr  |  NAME '[' [exprs] ']' '=' expr
//             | 'barrier'  |  '#' text to end of line
//             | 'block_reduce' NAME '(' NAMES ')' '->' '(' NAMES ')' '{' {combine} '}'
//             | 'mma_tile' NAME '+=' NAME [aview] 'x' NAME [bview]
//                 '(' 'm' '=' INT ',' 'n' '=' INT ',' 'k' '=' INT ',' 'tm' '=' INT ',' 'tn' '=' INT
//                 [',' 'rows' '=' expr ',' 'cols' '=' expr ',' 'depth' '=' expr] ')'
//                 (the views and the valid extents: all or none)
//                 ['fused' 'first' '=' expr ',' 'last' '=' expr
//                  '{' 'init' '{' {stmt} '}' 'epilogue' '{' {stmt} '}' '}']
//                 (views only; t, i, jo and jl bound in both bodies)
//   aview    := '[' 'at' '=' expr ',' 'ld' '=' INT
//               [',' 'blocks' '=' '[' INT ',' INT ',' INT ',' INT ',' INT ',' INT ']' ','
//                'first' '=' expr [',' 'groups' '=' '[' INT ',' INT ']']] ']'
//   bview    := '[' 'at' '=' expr ',' ('ld' '=' INT | 'panels' '=' INT ',' 'panel_stride' '=' INT
//               [',' 'first' '=' expr]) ']'
//   range    := NAME 'in' expr '..' expr ['step' INT]      (begin .. begin + extent)
//   combine  := 'let' NAME '=' expr  |  FIELD ':' DTYPE '=' expr   (field i's merged value)
//   expr     := binary expressions with C precedence: || && (== !=) (< <= > >=) (+ -) (* / %),
//               unary - and !, primaries: INT, FLOAT (inf, nan), NAME, NAME '[' [exprs] ']',
//               FN '(' exprs ')' for FN in abs exp log sqrt rsqrt tanh erf sigmoid floor ceil
//               round sin cos sign neg not min max pow select, DTYPE '(' expr ')' (a cast; a
//               float literal inside makes a constant of that dtype: f16(0.5)), '(' expr ')'.
// Keywords are keywords only where a statement starts and the next token is not '=' or '[', so
// a scalar may still be named like one.
//
// Types come from declarations, as the builders (kir.cpp) compute them: grid axes, the thread
// var and loop vars are i64, a `var` has its declared dtype, a combiner sees a_FIELD and b_FIELD
// with the field's dtype and its lets; a load widens f16/bf16 to f32. A name is looked up in the
// scopes the verifier uses (a loop's var in its body, a region's scalars in the region, an init's
// declarations after the reduce...), so a name used out of scope is an error at its position.
// A loop's end prints as begin + extent; the parser takes the extent back from that sum (the
// right operand when the end is `begin + X`, else end - begin), so the loop keeps its meaning
// and prints back as it was written.
//
// Bounded: nesting deeper than kMaxDepth (statements and expressions together) is an error,
// every token consumes input, and numbers are range-checked.
#include "kir/kir_parser.h"

#include "ir/text_lexer.h"
#include "support/diagnostics.h"

#include <charconv>
#include <limits>
#include <map>
#include <optional>
#include <set>

namespace aicf::kir {

namespace {

using namespace ::aicf::text;

constexpr int kMaxDepth = 200;

std::optional<UnOp> unOpByName(const std::string &s) {
  static const std::map<std::string, UnOp> ops = {
      {"neg", UnOp::Neg},     {"abs", UnOp::Abs},   {"exp", UnOp::Exp},
      {"log", UnOp::Log},     {"sqrt", UnOp::Sqrt}, {"rsqrt", UnOp::Rsqrt},
      {"tanh", UnOp::Tanh},   {"erf", UnOp::Erf},   {"sigmoid", UnOp::Sigmoid},
      {"floor", UnOp::Floor}, {"ceil", UnOp::Ceil}, {"round", UnOp::Round},
      {"sin", UnOp::Sin},     {"cos", UnOp::Cos},   {"not", UnOp::Not},
      {"sign", UnOp::Sign}};
  auto it = ops.find(s);
  return it == ops.end() ? std::nullopt : std::optional<UnOp>(it->second);
}

// Binary operators by token, with the printer's precedence levels (kir_printer.cpp).
struct BinInfo {
  BinOp op;
  int prec;
};
std::optional<BinInfo> binOpOf(Tok k) {
  switch (k) {
  case Tok::OrOr: return BinInfo{BinOp::Or, 1};
  case Tok::AndAnd: return BinInfo{BinOp::And, 2};
  case Tok::EqEq: return BinInfo{BinOp::Eq, 3};
  case Tok::Ne: return BinInfo{BinOp::Ne, 3};
  case Tok::Lt: return BinInfo{BinOp::Lt, 4};
  case Tok::Le: return BinInfo{BinOp::Le, 4};
  case Tok::Gt: return BinInfo{BinOp::Gt, 4};
  case Tok::Ge: return BinInfo{BinOp::Ge, 4};
  case Tok::Plus: return BinInfo{BinOp::Add, 5};
  case Tok::Minus: return BinInfo{BinOp::Sub, 5};
  case Tok::Star: return BinInfo{BinOp::Mul, 6};
  case Tok::Slash: return BinInfo{BinOp::Div, 6};
  case Tok::Percent: return BinInfo{BinOp::Mod, 6};
  default: return std::nullopt;
  }
}

class Parser : TokenCursor {
public:
  Parser(std::string_view src, const std::string &file, int firstLine)
      : TokenCursor(src, file, firstLine, LexDialect::Kernel, Mode::Ahead) {}

  std::vector<Kernel> parseAll(bool verify) {
    std::vector<Kernel> out;
    do {
      Token head = tok();
      out.push_back(parseKernel());
      if (verify) {
        std::vector<std::string> errs = verifyKernel(out.back());
        if (!errs.empty())
          failAt(head, errs.front());
      }
    } while (!at(Tok::Eof));
    return out;
  }

private:
  std::string name(const char *what) { return expect(Tok::Ident, what).text; }

  // Nesting guard: statements and expressions recurse; the depth is bounded.
  struct Deeper {
    Parser &p;
    explicit Deeper(Parser &parser) : p(parser) {
      if (++p.depth_ > kMaxDepth)
        p.failHere(cat("nesting deeper than ", kMaxDepth, " levels"));
    }
    ~Deeper() { --p.depth_; }
    Deeper(const Deeper &) = delete;
    Deeper &operator=(const Deeper &) = delete;
  };

  // ---- numbers and types -----------------------------------------------------------------------
  int64_t parseInt(const char *what) {
    bool neg = accept(Tok::Minus);
    if (!at(Tok::Int))
      failExpected(what);
    std::string text = (neg ? "-" : "") + tok().text;
    int64_t v = 0;
    auto res = std::from_chars(text.data(), text.data() + text.size(), v);
    if (res.ec != std::errc() || res.ptr != text.data() + text.size())
      failHere(cat("integer ", excerpt(text), " is out of range"));
    consume();
    return v;
  }

  DType parseDTypeName() {
    if (!at(Tok::Ident))
      failExpected("a dtype such as f32");
    std::optional<DType> dt = parseDType(tok().text);
    if (!dt)
      failHere(cat("unknown dtype '", excerpt(tok().text), "'"));
    consume();
    return *dt;
  }

  // A shape; a param's dims may be expressions in the kernel's dims ("batch*seq"), which go
  // into `sym` (the planning values in the shape are then 1 per symbol).
  std::vector<int64_t> parseShape(std::vector<SymExpr> *sym = nullptr) {
    expect(Tok::LBracket, "'[' after the dtype");
    std::vector<int64_t> shape;
    std::vector<SymExpr> syms;
    if (accept(Tok::RBracket))
      return shape;
    while (true) {
      Token at = tok();
      if (sym && at.kind == Tok::Ident) {
        std::string text;
        while (!this->at(Tok::Comma) && !this->at(Tok::RBracket) && !this->at(Tok::Eof)) {
          text += tok().text;
          consume();
        }
        std::string why;
        auto e = SymExpr::parse(text, &why);
        if (!e)
          failAt(at, cat("bad symbolic dim '", text, "': ", why));
        std::map<std::string, int64_t> ones;
        for (const std::string &d : e->symbols()) {
          if (!dims_.count(dimVar(d)))
            failAt(at, cat("dim '", d, "' is not one of the kernel's dims"));
          ones[d] = 1;
        }
        while (syms.size() < shape.size())
          syms.emplace_back(shape[syms.size()]);
        syms.push_back(*e);
        shape.push_back(std::max<int64_t>(1, e->eval(ones).value_or(1)));
      } else {
        int64_t d = parseInt("a dimension");
        if (d < 0)
          failAt(at, cat("dimension ", d, " is negative"));
        shape.push_back(d);
        if (!syms.empty())
          syms.emplace_back(d);
      }
      if (accept(Tok::RBracket)) {
        if (sym && !syms.empty())
          *sym = std::move(syms);
        return shape;
      }
      expect(Tok::Comma, "',' or ']' in the shape");
    }
  }

  std::optional<Scope> scopeOf(const Token &t) const {
    if (t.kind != Tok::Ident)
      return std::nullopt;
    if (t.text == "global")
      return Scope::Global;
    if (t.text == "shared")
      return Scope::Shared;
    if (t.text == "local")
      return Scope::Local;
    return std::nullopt;
  }

  // ---- kernel ----------------------------------------------------------------------------------
  Kernel parseKernel() {
    Kernel k;
    expectIdent("kernel");
    k.name = expect(Tok::Global, "'@' and the kernel name").text;
    if (atIdent("recipe")) {
      consume();
      expect(Tok::LParen, "'(' after 'recipe'");
      k.recipe = name("the recipe name");
      expect(Tok::RParen, "')' after the recipe name");
    }
    if (atIdent("dims")) {
      consume();
      expect(Tok::LParen, "'(' after 'dims'");
      while (!accept(Tok::RParen)) {
        if (!k.dims.empty())
          expect(Tok::Comma, "',' or ')' in the dims");
        Token at = tok();
        std::string d = name("a dim name");
        if (!isSymbolName(d) || std::count(k.dims.begin(), k.dims.end(), d))
          failAt(at, cat("bad or repeated dim '", d, "'"));
        k.dims.push_back(d);
        dims_.insert(dimVar(d));
      }
    }
    expectIdent("grid");
    expect(Tok::LParen, "'(' after 'grid'");
    if (!accept(Tok::RParen)) {
      while (true) {
        std::string axis = name("a grid axis name");
        expect(Tok::Colon, "':' after the grid axis");
        if (at(Tok::Ident)) {
          // A symbolic extent, EXPR or ceil(EXPR/INT) over the kernel's dims; its planning
          // value is not part of the text (1 here).
          Token t = tok();
          std::string text;
          for (int depth = 0; !at(Tok::Eof);) {
            if (depth == 0 && (at(Tok::Comma) || at(Tok::RParen)))
              break;
            depth += at(Tok::LParen) ? 1 : at(Tok::RParen) ? -1 : 0;
            text += tok().text;
            consume();
          }
          std::string why;
          auto e = SymExtent::parse(text, &why);
          if (!e)
            failAt(t, cat("bad grid extent '", text, "': ", why));
          for (const std::string &sym : e->num.symbols())
            if (!std::count(k.dims.begin(), k.dims.end(), sym))
              failAt(t, cat("grid extent uses '", sym, "', not one of the kernel's dims"));
          while (k.symGrid.size() < k.grid.size())
            k.symGrid.push_back(SymExtent{SymExpr(k.grid[k.symGrid.size()].second), 1});
          k.symGrid.push_back(*e);
          k.grid.emplace_back(axis, 1);
        } else {
          k.grid.emplace_back(axis, parseInt("the grid axis extent"));
          if (!k.symGrid.empty())
            k.symGrid.push_back(SymExtent{SymExpr(k.grid.back().second), 1});
        }
        if (accept(Tok::RParen))
          break;
        expect(Tok::Comma, "',' or ')' in the grid");
      }
    }
    expectIdent("block");
    expect(Tok::LParen, "'(' after 'block'");
    k.threadVar = name("the thread var");
    expect(Tok::Colon, "':' after the thread var");
    k.threads = parseInt("the thread count");
    expect(Tok::RParen, "')' after the thread count");
    if (atIdent("knobs")) {
      consume();
      expect(Tok::LBrace, "'{' after 'knobs'");
      if (!accept(Tok::RBrace)) {
        while (true) {
          Token at = tok();
          std::string knob = name("a knob name");
          expect(Tok::Equal, "'=' after the knob name");
          if (!k.knobs.emplace(knob, parseInt("the knob's value")).second)
            failAt(at, cat("knob ", knob, " is given twice"));
          if (accept(Tok::RBrace))
            break;
          expect(Tok::Comma, "',' or '}' in the knobs");
        }
      }
    }
    buffers_.clear();
    expect(Tok::LParen, "'(' before the parameters");
    if (!accept(Tok::RParen)) {
      while (true) {
        Token at = tok();
        auto b = std::make_shared<Buffer>();
        b->name = name("a parameter name");
        expect(Tok::Colon, "':' after the parameter name");
        std::optional<Scope> scope = scopeOf(tok());
        if (!scope)
          failExpected("a memory scope (global, shared or local)");
        consume();
        b->scope = *scope;
        b->dtype = parseDTypeName();
        b->shape = parseShape(&b->sym);
        if (atIdent("in") || atIdent("out") || atIdent("temp")) {
          b->role = atIdent("in") ? Role::In : atIdent("out") ? Role::Out : Role::Temp;
          consume();
        } else {
          failExpected("a role (in, out or temp)");
        }
        addBuffer(at, b);
        k.params.push_back(b);
        if (accept(Tok::RParen))
          break;
        expect(Tok::Comma, "',' or ')' in the parameters");
      }
    }
    expect(Tok::LBrace, "'{' before the kernel body");
    // Allocations: SCOPE NAME ':' type, before the statements.
    while (scopeOf(tok()) && peek(1).kind == Tok::Ident) {
      Token at = peek(1);
      auto b = std::make_shared<Buffer>();
      b->scope = *scopeOf(tok());
      consume();
      b->name = name("the allocation's name");
      expect(Tok::Colon, "':' after the allocation's name");
      b->dtype = parseDTypeName();
      b->shape = parseShape();
      addBuffer(at, b);
      k.allocs.push_back(b);
    }
    threadVar_ = k.threadVar;
    grid_.clear();
    for (const auto &[axis, extent] : k.grid)
      grid_.insert(axis);
    scopes_.assign(1, {});
    k.body = parseStmts();
    expect(Tok::RBrace, "'}' at the end of the kernel");
    return k;
  }

  void addBuffer(const Token &at, const BufferP &b) {
    if (!buffers_.emplace(b->name, b).second)
      failAt(at, cat("buffer ", b->name, " is defined twice"));
  }

  BufferP buffer(const Token &t) {
    auto it = buffers_.find(t.text);
    if (it == buffers_.end())
      failAt(t, cat("unknown buffer '", excerpt(t.text), "'"));
    return it->second;
  }

  // ---- variables -------------------------------------------------------------------------------
  using VarScope = std::map<std::string, DType>;

  DType varType(const Token &t) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(t.text);
      if (f != it->end())
        return f->second;
    }
    if (combiner_)
      failAt(t, cat("unknown variable '", excerpt(t.text),
                    "' (a combiner sees only a_FIELD, b_FIELD and its lets)"));
    // The thread var and grid axes are i64 everywhere; the verifier says where they may be used.
    if (t.text == threadVar_ || grid_.count(t.text) || dims_.count(t.text))
      return DType::I64;
    failAt(t, cat("unknown variable '", excerpt(t.text), "'"));
  }

  void define(const std::string &v, DType t) { scopes_.back()[v] = t; }

  // ---- statements ------------------------------------------------------------------------------
  std::vector<StmtP> parseStmts() {
    std::vector<StmtP> out;
    while (!at(Tok::RBrace) && !at(Tok::Eof))
      out.push_back(parseStmt());
    return out;
  }

  // '{' stmts '}' in a new scope (or the current one, with `vars` defined first).
  std::vector<StmtP> parseBlock(const char *what, bool newScope = true,
                                const std::vector<std::string> &vars = {}) {
    expect(Tok::LBrace, what);
    if (newScope)
      scopes_.emplace_back();
    for (const std::string &v : vars)
      define(v, DType::I64);
    std::vector<StmtP> body = parseStmts();
    if (newScope)
      scopes_.pop_back();
    expect(Tok::RBrace, "'}' or a statement");
    return body;
  }

  bool atKeyword(std::string_view kw) {
    return atIdent(kw) && peek(1).kind != Tok::Equal && peek(1).kind != Tok::LBracket;
  }

  StmtP parseStmt() {
    Deeper guard(*this);
    if (at(Tok::Comment)) {
      StmtP s = comment(tok().text);
      consume();
      return s;
    }
    if (at(Tok::LBrace))
      return seq(parseBlock("'{'"));
    if (!at(Tok::Ident))
      failExpected("a statement");
    if (atKeyword("for") || atKeyword("reduce"))
      return parseLoop(tok().text == "reduce");
    if (atKeyword("region")) {
      consume();
      std::string v = name("the region's thread var");
      return region(v, parseBlock("'{' after the region's thread var", true, {v}));
    }
    if (atKeyword("if")) {
      consume();
      E cond = parseExpr();
      std::vector<StmtP> then = parseBlock("'{' after the if condition");
      std::vector<StmtP> otherwise;
      if (atKeyword("else")) {
        consume();
        otherwise = parseBlock("'{' after 'else'");
      }
      return ifThen(cond, std::move(then), std::move(otherwise));
    }
    if (atKeyword("var")) {
      consume();
      std::string v = name("the scalar's name");
      expect(Tok::Colon, "':' after the scalar's name");
      DType t = parseDTypeName();
      expect(Tok::Equal, "'=' and the scalar's initial value");
      E value = parseExpr();
      define(v, t);
      return decl(v, t, value);
    }
    if (atKeyword("barrier")) {
      consume();
      return barrier();
    }
    if (atKeyword("block_reduce"))
      return parseBlockReduce();
    if (atKeyword("mma_tile"))
      return parseMmaTile();
    if (scopeOf(tok()) && peek(1).kind == Tok::Ident)
      failHere("allocations come before the kernel's statements");
    Token target = tok();
    consume();
    if (accept(Tok::Equal))
      return assign(target.text, parseExpr());
    if (at(Tok::LBracket)) {
      BufferP b = buffer(target);
      std::vector<E> idx = parseIndices(b, target);
      expect(Tok::Equal, "'=' after the store's indices");
      return store(b, std::move(idx), parseExpr());
    }
    failAt(target, cat("expected a statement, got ", describe(target)));
  }

  // for / reduce: NAME 'in' begin '..' end ['step' INT] ...
  StmtP parseLoop(bool isReduce) {
    consume();
    std::string v = name("the loop variable");
    expectIdent("in");
    E begin = parseExpr();
    expect(Tok::DotDot, "'..' between the loop bounds");
    E end = parseExpr();
    E extent = extentOf(begin, end);
    int64_t step = 1;
    if (atIdent("step")) {
      consume();
      step = parseInt("the loop step");
    }
    if (isReduce) {
      expect(Tok::LBrace, "'{' after the reduce range");
      expectIdent("init");
      std::vector<StmtP> init = parseBlock("'{' after 'init'", /*newScope=*/false);
      expectIdent("update");
      std::vector<StmtP> update = parseBlock("'{' after 'update'", true, {v});
      expect(Tok::RBrace, "'}' at the end of the reduce");
      return reduce(v, begin, extent, std::move(init), std::move(update), step);
    }
    Stmt::LoopKind kind = Stmt::LoopKind::Serial;
    if (atIdent("unroll") || atIdent("vectorize")) {
      kind = atIdent("unroll") ? Stmt::LoopKind::Unrolled : Stmt::LoopKind::Vectorized;
      consume();
    }
    std::vector<StmtP> body = parseBlock("'{' after the loop range", true, {v});
    return forLoop(v, begin, extent, std::move(body), step, kind);
  }

  // The printer writes a loop's end as begin + extent (folded by E's operator+).
  static E extentOf(const E &begin, const E &end) {
    if (end->kind == Expr::Kind::Binary && end->bop == BinOp::Add &&
        printExpr(end->args[0]) == printExpr(begin))
      return end->args[1];
    return end - begin;
  }

  std::vector<E> parseIndices(const BufferP &b, const Token &at) {
    expect(Tok::LBracket, "'['");
    std::vector<E> idx;
    if (!accept(Tok::RBracket)) {
      while (true) {
        idx.push_back(parseExpr());
        if (accept(Tok::RBracket))
          break;
        expect(Tok::Comma, "',' or ']' in the indices");
      }
    }
    if (idx.size() != b->shape.size())
      failAt(at, cat(b->name, " has rank ", b->shape.size(), ", indexed with ", idx.size(),
                     idx.size() == 1 ? " index" : " indices"));
    return idx;
  }

  std::vector<BufferP> parseBufferList(const char *what) {
    expect(Tok::LParen, what);
    std::vector<BufferP> out;
    if (accept(Tok::RParen))
      return out;
    while (true) {
      out.push_back(buffer(expect(Tok::Ident, "a buffer name")));
      if (accept(Tok::RParen))
        return out;
      expect(Tok::Comma, "',' or ')' in the buffer list");
    }
  }

  // block_reduce NAME(src...) -> (dst...) { let ...  FIELD: DTYPE = merged ... }
  StmtP parseBlockReduce() {
    Token head = tok();
    consume();
    Combiner c;
    c.name = name("the combiner's name");
    std::vector<BufferP> src = parseBufferList("'(' and the source buffers");
    expect(Tok::Arrow, "'->' after the source buffers");
    std::vector<BufferP> dst = parseBufferList("'(' and the destination buffers");
    expect(Tok::LBrace, "'{' and the combiner");
    // The lets come first and may use a_FIELD / b_FIELD: read the field lines' types ahead.
    VarScope vars;
    int depth = 0;
    for (size_t i = 0; peek(i).kind != Tok::Eof; ++i) {
      Tok k = peek(i).kind;
      if (k == Tok::LBrace || k == Tok::LParen || k == Tok::LBracket)
        ++depth;
      else if (k == Tok::RBrace && depth == 0)
        break;
      else if (k == Tok::RBrace || k == Tok::RParen || k == Tok::RBracket)
        --depth;
      else if (k == Tok::Colon && depth == 0 && i > 0 && peek(i - 1).kind == Tok::Ident &&
               peek(i + 1).kind == Tok::Ident)
        if (std::optional<DType> dt = parseDType(peek(i + 1).text)) {
          vars["a_" + peek(i - 1).text] = *dt;
          vars["b_" + peek(i - 1).text] = *dt;
        }
    }
    std::vector<VarScope> saved = std::move(scopes_);
    scopes_.assign(1, vars);
    combiner_ = true;
    while (!accept(Tok::RBrace)) {
      if (atIdent("let") && peek(1).kind == Tok::Ident && peek(2).kind == Tok::Equal) {
        consume();
        std::string v = name("the let's name");
        expect(Tok::Equal, "'='");
        E e = parseExpr();
        define(v, e->type);
        c.lets.emplace_back(v, e);
        continue;
      }
      std::string field = name("'let' or a field name");
      expect(Tok::Colon, "':' after the field name");
      DType t = parseDTypeName();
      expect(Tok::Equal, "'=' and the field's merged value");
      c.fields.emplace_back(field, t);
      c.merged.push_back(parseExpr());
    }
    combiner_ = false;
    scopes_ = std::move(saved);
    if (src.size() != c.fields.size() || dst.size() != c.fields.size())
      failAt(head, cat("block_reduce ", c.name, ": ", c.fields.size(), " fields but ", src.size(),
                       " source and ", dst.size(), " destination buffers"));
    return blockReduce(std::move(c), std::move(src), std::move(dst));
  }

  // mma_tile C += A x B (m = 8, n = 64, k = 64, tm = 8, tn = 64[, frag = m16n8k16])
  StmtP parseMmaTile() {
    consume();
    BufferP c = buffer(expect(Tok::Ident, "the accumulator buffer"));
    expect(Tok::PlusEq, "'+='");
    BufferP a = buffer(expect(Tok::Ident, "the A tile buffer"));
    MmaViews views;
    auto field = [&](const char *name) {
      expectIdent(name);
      expect(Tok::Equal, "'='");
    };
    bool hasViews = accept(Tok::LBracket);
    if (hasViews) {
      field("at");
      views.aOffset = parseExpr();
      expect(Tok::Comma, "','");
      field("ld");
      views.lda = parseInt("an integer");
      bool more = accept(Tok::Comma);
      if (more && atIdent("shift")) {
        field("shift");
        views.aShift = parseInt("an integer");
        more = accept(Tok::Comma);
      }
      if (more) {
        field("blocks");
        expect(Tok::LBracket, "'[' and the block strides");
        for (int i = 0; i < 6; ++i) {
          if (i)
            expect(Tok::Comma, "','");
          views.aBlocks.push_back(parseInt("an integer"));
        }
        expect(Tok::RBracket, "']' after the block strides");
        expect(Tok::Comma, "','");
        field("first");
        views.firstBlock = parseExpr();
        more = accept(Tok::Comma);
        if (more && atIdent("groups")) {
          field("groups");
          expect(Tok::LBracket, "'[' and the row group size and stride");
          views.aGroups.push_back(parseInt("an integer"));
          expect(Tok::Comma, "','");
          views.aGroups.push_back(parseInt("an integer"));
          expect(Tok::RBracket, "']' after the row groups");
          more = accept(Tok::Comma);
        }
        if (more) {
          field("taps");
          expect(Tok::LBracket, "'[' and the taps' lo, hi, d, H, s, c0, cs, cd and W");
          views.tapLo = parseExpr();
          expect(Tok::Comma, "','");
          views.tapHi = parseExpr();
          for (int i = 0; i < 7; ++i) {
            expect(Tok::Comma, "','");
            views.aTaps.push_back(parseInt("an integer"));
          }
          expect(Tok::RBracket, "']' after the taps");
        }
      }
      expect(Tok::RBracket, "']' after A's view");
    }
    expectIdent("x");
    BufferP b = buffer(expect(Tok::Ident, "the B tile buffer"));
    if (hasViews) {
      expect(Tok::LBracket, "'[' and B's view");
      field("at");
      views.bOffset = parseExpr();
      expect(Tok::Comma, "','");
      if (atIdent("panels")) {
        field("panels");
        views.bPanel = parseInt("an integer");
        expect(Tok::Comma, "','");
        field("panel_stride");
        views.bPanelStride = parseInt("an integer");
        if (accept(Tok::Comma) && !atIdent("prefetch") && !atIdent("tiles")) {
          field("first");
          views.bFirstCol = parseExpr();
          accept(Tok::Comma);
        }
        if (atIdent("prefetch")) {
          expectIdent("prefetch");
          views.bPrefetch = true;
          accept(Tok::Comma);
        }
        if (atIdent("tiles")) {
          expectIdent("tiles");
          views.bTiles = true;
        }
      } else {
        field("ld");
        views.ldb = parseInt("an integer");
      }
      expect(Tok::RBracket, "']' after B's view");
    }
    expect(Tok::LParen, "'(' and the tile sizes");
    int64_t v[5];
    const char *names[5] = {"m", "n", "k", "tm", "tn"};
    for (int i = 0; i < 5; ++i) {
      if (i)
        expect(Tok::Comma, "','");
      field(names[i]);
      v[i] = parseInt("an integer");
    }
    MmaFrag frag = MmaFrag::None;
    if (!hasViews && accept(Tok::Comma)) {
      field("frag");
      Token f = expect(Tok::Ident, "a tensor-core shape (m16n8k16, m16n8k8)");
      std::optional<MmaFrag> parsed = mmaFragByName(f.text);
      if (!parsed || *parsed == MmaFrag::None)
        failAt(f, "unknown tensor-core shape '" + f.text + "' (m16n8k16, m16n8k8)");
      frag = *parsed;
    }
    if (hasViews) {
      expect(Tok::Comma, "','");
      field("rows");
      views.rows = parseExpr();
      expect(Tok::Comma, "','");
      field("cols");
      views.cols = parseExpr();
      expect(Tok::Comma, "','");
      field("depth");
      views.depth = parseExpr();
    }
    expect(Tok::RParen, "')' after the tile sizes");
    if (hasViews) {
      StmtP s = mmaTileViews(c, a, b, v[0], v[1], v[2], v[3], v[4], views);
      if (atKeyword("fused")) {
        // fused first = expr, last = expr { init { .. } epilogue { .. } }: t (the thread var),
        // i, jo and jl bound in both bodies (kir.h).
        consume();
        s->fused = true;
        field("first");
        s->first = parseExpr();
        expect(Tok::Comma, "','");
        field("last");
        s->last = parseExpr();
        expect(Tok::LBrace, "'{' and the fused init");
        const std::vector<std::string> vars = {threadVar_, "i", "jo", "jl"};
        expectIdent("init");
        s->init = parseBlock("'{' after 'init'", true, vars);
        expectIdent("epilogue");
        s->body = parseBlock("'{' after 'epilogue'", true, vars);
        expect(Tok::RBrace, "'}' after the fused epilogue");
      }
      return s;
    }
    StmtP s = mmaTile(c, a, b, v[0], v[1], v[2], v[3], v[4]);
    s->frag = frag;
    return s;
  }

  // ---- expressions -----------------------------------------------------------------------------
  E parseExpr(int minPrec = 1) {
    Deeper guard(*this);
    E lhs = parseUnary();
    while (std::optional<BinInfo> bi = binOpOf(tok().kind)) {
      if (bi->prec < minPrec)
        break;
      consume();
      E rhs = parseExpr(bi->prec + 1); // left-associative
      lhs = binary(bi->op, lhs, rhs);
    }
    return lhs;
  }

  E parseUnary() {
    Deeper guard(*this);
    if (at(Tok::Minus)) {
      // A minus right before a literal is the literal's sign: -3, -0.5, -inf.
      Tok next = peek(1).kind;
      if (next == Tok::Int)
        return E(parseInt("an integer"));
      if (next == Tok::Float || (next == Tok::Ident && peek(1).text == "inf")) {
        consume();
        return fconst(-parseFloatLiteral());
      }
      consume();
      return unary(UnOp::Neg, parseUnary());
    }
    if (accept(Tok::Bang))
      return unary(UnOp::Not, parseUnary());
    return parsePrimary();
  }

  double parseFloatLiteral() {
    if (atIdent("inf") || atIdent("nan")) {
      double v = atIdent("inf") ? std::numeric_limits<double>::infinity()
                                : std::numeric_limits<double>::quiet_NaN();
      consume();
      return v;
    }
    const std::string &text = tok().text;
    double v = 0;
    auto res = std::from_chars(text.data(), text.data() + text.size(), v);
    if (res.ec != std::errc() || res.ptr != text.data() + text.size())
      failHere(cat("number ", excerpt(text), " is out of range"));
    consume();
    return v;
  }

  std::vector<E> parseCallArgs(const Token &fn, size_t n) {
    expect(Tok::LParen, "'('");
    std::vector<E> args;
    if (!at(Tok::RParen)) {
      while (true) {
        args.push_back(parseExpr());
        if (!accept(Tok::Comma))
          break;
      }
    }
    expect(Tok::RParen, "',' or ')' in the call");
    if (args.size() != n)
      failAt(fn,
             cat(fn.text, " takes ", n, n == 1 ? " operand" : " operands", ", got ", args.size()));
    return args;
  }

  E parsePrimary() {
    if (at(Tok::Int))
      return E(parseInt("an integer"));
    if (at(Tok::Float) || atIdent("inf") || atIdent("nan"))
      return fconst(parseFloatLiteral());
    if (accept(Tok::LParen)) {
      E e = parseExpr();
      expect(Tok::RParen, "')'");
      return e;
    }
    if (!at(Tok::Ident))
      failExpected("an expression");
    Token id = tok();
    consume();
    if (at(Tok::LBracket)) {
      BufferP b = buffer(id);
      return load(b, parseIndices(b, id));
    }
    if (!at(Tok::LParen))
      return var(id.text, varType(id));
    if (std::optional<UnOp> op = unOpByName(id.text))
      return unary(*op, parseCallArgs(id, 1)[0]);
    if (id.text == "min" || id.text == "max" || id.text == "pow") {
      std::vector<E> a = parseCallArgs(id, 2);
      BinOp op = id.text == "min" ? BinOp::Min : id.text == "max" ? BinOp::Max : BinOp::Pow;
      return binary(op, a[0], a[1]);
    }
    if (id.text == "select") {
      std::vector<E> a = parseCallArgs(id, 3);
      return select(a[0], a[1], a[2]);
    }
    if (std::optional<DType> dt = parseDType(id.text)) {
      E a = parseCallArgs(id, 1)[0];
      // f16(0.5): a constant of that dtype (the printer's spelling of a non-f32 float).
      if (a->kind == Expr::Kind::Float && a->type == DType::F32)
        return fconst(a->fval, *dt);
      return cast(a, *dt);
    }
    failAt(id, cat("unknown function '", excerpt(id.text), "'"));
  }

  int depth_ = 0;
  std::map<std::string, BufferP> buffers_;
  std::vector<VarScope> scopes_;
  std::string threadVar_;
  std::set<std::string> grid_;
  std::set<std::string> dims_; // the dims' variables (dimVar)
  bool combiner_ = false;
};

} // namespace

std::vector<Kernel> parseKernels(std::string_view text, const std::string &filename, int firstLine,
                                 bool verify) {
  return Parser(text, filename, firstLine).parseAll(verify);
}

Kernel parseKernel(std::string_view text, const std::string &filename, bool verify) {
  std::vector<Kernel> ks = parseKernels(text, filename, 1, verify);
  if (ks.size() != 1)
    throw UserError(cat(filename, ": holds ", ks.size(), " kernels; expected one"));
  return std::move(ks.front());
}

} // namespace aicf::kir
