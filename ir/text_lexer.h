// The one tokenizer of aicf's two text formats: the Graph IR (ir/parser.cpp) and the Kernel IR
// (kir/kir_parser.cpp). Both share the lexical basics: whitespace and newlines are not
// significant, `//` starts a comment to end of line, names are [A-Za-z_][A-Za-z0-9_]*, `@name`
// is a global, numbers are digits with an optional fraction and exponent, and every error is a
// ParseError "FILE:LINE:COL: message" at the offending byte. What differs is the dialect:
//
//   Graph:  `%name` values, `.` inside names (ln_1.weight), "strings" with escapes, `?`, and a
//           `-` right before a digit signs the number; `1.` is a float.
//   Kernel: C operators (== != < <= > >= ! && || += / %), `..` ranges and `#` comments (kept as
//           tokens: the kernel keeps them); `.` is a decimal point only before a digit, so
//           `0..4` is a range; a number never has a sign (the parser folds a leading `-`).
//
// TokenCursor is the parsers' shared view of the token stream: the current token, lookahead,
// and the expect/accept helpers whose messages both formats share ("expected X, got Y").
#pragma once

#include "ir/parser.h"

#include <deque>
#include <string>
#include <string_view>

namespace aicf::text {

enum class LexDialect { Graph, Kernel };

enum class Tok {
  Eof,
  Ident,   // graph, weight, f32, layer_norm, inf, ...
  Value,   // %name (Graph; text: the name)
  Global,  // @name (text: the name)
  Int,     // 12; -12 in the Graph dialect
  Float,   // 1.5e-3
  String,  // "..." (Graph; text: decoded)
  Comment, // # text (Kernel; text: after "# ")
  LParen,
  RParen,
  LBracket,
  RBracket,
  LBrace,
  RBrace,
  Comma,
  Colon,
  Equal,
  Arrow,
  Question, // Graph
  Minus,
  Star,
  Plus,
  // Kernel only:
  DotDot,
  PlusEq,
  Slash,
  Percent,
  Lt,
  Le,
  Gt,
  Ge,
  EqEq,
  Ne,
  AndAnd,
  OrOr,
  Bang,
};

struct Token {
  Tok kind = Tok::Eof;
  std::string text;
  int line = 0;
  int col = 0;
};

inline bool isDigit(char c) {
  return c >= '0' && c <= '9';
}
inline bool isIdentStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

// Printable form of a piece of input for messages: short, ASCII, escapes for anything else.
std::string excerpt(std::string_view s);

// A token as messages name it: "end of file", "'%x'", "string \"...\"", "'('".
std::string describe(const Token &t);

class Lexer {
public:
  Lexer(std::string_view src, const std::string &file, int firstLine, LexDialect dialect)
      : src_(src), file_(file), line_(firstLine), graph_(dialect == LexDialect::Graph) {}

  // The next token; Eof (again and again) at the end.
  Token next();

  [[noreturn]] void fail(const Token &at, const std::string &msg) const;

private:
  bool isIdentChar(char c) const { return isIdentStart(c) || isDigit(c) || (graph_ && c == '.'); }
  bool peekIs(size_t ahead, char c) const {
    return i_ + ahead < src_.size() && src_[i_ + ahead] == c;
  }
  void advance();
  void skipBlanks();
  Token &lexName(Token &t, Tok kind); // %name, @name
  Token &lexNumber(Token &t);
  Token &lexString(Token &t);
  Token &lexComment(Token &t);

  std::string_view src_;
  const std::string &file_;
  size_t i_ = 0;
  int line_;
  int col_ = 1;
  bool graph_;
};

// The parsers' cursor over the tokens. Streaming (the Graph parser: a token is cut when the
// parser reaches it, so a bad byte late in the text never hides an earlier syntax error) or
// ahead (the Kernel parser: the whole text is cut up front, for its lookahead).
class TokenCursor {
public:
  enum class Mode { Streaming, Ahead };
  TokenCursor(std::string_view src, const std::string &file, int firstLine, LexDialect dialect,
              Mode mode);

  const Token &tok() const { return buf_.front(); }
  const Token &peek(size_t n); // n tokens past the current one (Eof past the end)
  void consume();
  bool at(Tok k) const { return tok().kind == k; }
  bool atIdent(std::string_view kw) const { return at(Tok::Ident) && tok().text == kw; }
  SourcePos posOf(const Token &t) const { return SourcePos{file_, t.line, t.col}; }
  [[noreturn]] void failAt(const Token &t, const std::string &msg) const { lex_.fail(t, msg); }
  [[noreturn]] void failHere(const std::string &msg) const { failAt(tok(), msg); }
  [[noreturn]] void failExpected(const std::string &what) const;
  Token expect(Tok k, const char *what);
  void expectIdent(std::string_view kw);
  bool accept(Tok k);

protected:
  const std::string &file_;

private:
  Lexer lex_;
  std::deque<Token> buf_; // the current token first; never empty
};

} // namespace aicf::text
