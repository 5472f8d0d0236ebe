// The shared tokenizer of the Graph IR and Kernel IR text formats (text_lexer.h).
#include "ir/text_lexer.h"

#include <algorithm>

namespace aicf::text {

std::string excerpt(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i == 40) {
      out += "...";
      break;
    }
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      static const char *hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0xf];
    }
  }
  return out;
}

std::string describe(const Token &t) {
  switch (t.kind) {
  case Tok::Eof: return "end of file";
  case Tok::Value: return "'%" + excerpt(t.text) + "'";
  case Tok::Global: return "'@" + excerpt(t.text) + "'";
  case Tok::String: return "string \"" + excerpt(t.text) + "\"";
  case Tok::Comment: return "a '#' comment";
  default: return "'" + excerpt(t.text) + "'";
  }
}

void Lexer::fail(const Token &at, const std::string &msg) const {
  throw ParseError(SourcePos{file_, at.line, at.col}, msg);
}

void Lexer::advance() {
  if (src_[i_] == '\n') {
    ++line_;
    col_ = 1;
  } else {
    ++col_;
  }
  ++i_;
}

void Lexer::skipBlanks() {
  while (i_ < src_.size()) {
    char c = src_[i_];
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v') {
      advance();
    } else if (c == '/' && peekIs(1, '/')) {
      while (i_ < src_.size() && src_[i_] != '\n')
        advance();
    } else {
      return;
    }
  }
}

Token Lexer::next() {
  skipBlanks();
  Token t;
  t.line = line_;
  t.col = col_;
  if (i_ >= src_.size())
    return t;
  size_t start = i_;
  auto take = [&](Tok k, size_t n) {
    for (size_t j = 0; j < n; ++j)
      advance();
    t.kind = k;
    t.text = std::string(src_.substr(start, n));
    return t;
  };
  const bool kernel = !graph_;
  char c = src_[i_];
  switch (c) {
  case '(': return take(Tok::LParen, 1);
  case ')': return take(Tok::RParen, 1);
  case '[': return take(Tok::LBracket, 1);
  case ']': return take(Tok::RBracket, 1);
  case '{': return take(Tok::LBrace, 1);
  case '}': return take(Tok::RBrace, 1);
  case ',': return take(Tok::Comma, 1);
  case ':': return take(Tok::Colon, 1);
  case '*': return take(Tok::Star, 1);
  case '@': return lexName(t, Tok::Global);
  case '=': return kernel && peekIs(1, '=') ? take(Tok::EqEq, 2) : take(Tok::Equal, 1);
  case '+': return kernel && peekIs(1, '=') ? take(Tok::PlusEq, 2) : take(Tok::Plus, 1);
  case '-':
    if (peekIs(1, '>'))
      return take(Tok::Arrow, 2);
    if (graph_ && i_ + 1 < src_.size() && isDigit(src_[i_ + 1]))
      return lexNumber(t);
    return take(Tok::Minus, 1);
  case '%': return graph_ ? lexName(t, Tok::Value) : take(Tok::Percent, 1);
  default: break;
  }
  if (graph_) {
    if (c == '?')
      return take(Tok::Question, 1);
    if (c == '"')
      return lexString(t);
  } else {
    switch (c) {
    case '/': return take(Tok::Slash, 1);
    case '<': return peekIs(1, '=') ? take(Tok::Le, 2) : take(Tok::Lt, 1);
    case '>': return peekIs(1, '=') ? take(Tok::Ge, 2) : take(Tok::Gt, 1);
    case '!': return peekIs(1, '=') ? take(Tok::Ne, 2) : take(Tok::Bang, 1);
    case '.':
      if (peekIs(1, '.'))
        return take(Tok::DotDot, 2);
      break;
    case '&':
      if (peekIs(1, '&'))
        return take(Tok::AndAnd, 2);
      break;
    case '|':
      if (peekIs(1, '|'))
        return take(Tok::OrOr, 2);
      break;
    case '#': return lexComment(t);
    default: break;
    }
  }
  if (isDigit(c))
    return lexNumber(t);
  if (isIdentStart(c)) {
    while (i_ < src_.size() && isIdentChar(src_[i_]))
      advance();
    t.kind = Tok::Ident;
    t.text = std::string(src_.substr(start, i_ - start));
    return t;
  }
  unsigned char u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f)
    fail(t, cat("unexpected character '", c, "'"));
  fail(t, cat("unexpected byte 0x", excerpt(std::string_view(&c, 1)).substr(2)));
}

Token &Lexer::lexName(Token &t, Tok kind) {
  char sigil = src_[i_];
  advance();
  size_t from = i_;
  while (i_ < src_.size() && isIdentChar(src_[i_]))
    advance();
  if (i_ == from)
    fail(t, graph_ ? cat("expected a name after '", sigil, "'")
                   : std::string("expected a kernel name after '@'"));
  t.kind = kind;
  t.text = std::string(src_.substr(from, i_ - from));
  return t;
}

Token &Lexer::lexComment(Token &t) {
  // The printer writes "# " + text; the one space after '#' is not part of the text.
  advance();
  if (peekIs(0, ' '))
    advance();
  size_t from = i_;
  while (i_ < src_.size() && src_[i_] != '\n')
    advance();
  t.kind = Tok::Comment;
  t.text = std::string(src_.substr(from, i_ - from));
  return t;
}

Token &Lexer::lexNumber(Token &t) {
  size_t start = i_;
  if (src_[i_] == '-')
    advance();
  while (i_ < src_.size() && isDigit(src_[i_]))
    advance();
  bool isFloat = false;
  // Kernel: "0 .. 4" and "0..4": a '.' is a decimal point only before a digit.
  if (peekIs(0, '.') && (graph_ || (i_ + 1 < src_.size() && isDigit(src_[i_ + 1])))) {
    isFloat = true;
    advance();
    while (i_ < src_.size() && isDigit(src_[i_]))
      advance();
  }
  if (i_ < src_.size() && (src_[i_] == 'e' || src_[i_] == 'E')) {
    size_t j = i_ + 1;
    if (j < src_.size() && (src_[j] == '+' || src_[j] == '-'))
      ++j;
    if (j < src_.size() && isDigit(src_[j])) {
      isFloat = true;
      while (i_ < j)
        advance();
      while (i_ < src_.size() && isDigit(src_[i_]))
        advance();
    }
  }
  t.kind = isFloat ? Tok::Float : Tok::Int;
  t.text = std::string(src_.substr(start, i_ - start));
  return t;
}

Token &Lexer::lexString(Token &t) {
  advance(); // opening quote
  std::string s;
  while (true) {
    if (i_ >= src_.size() || src_[i_] == '\n')
      fail(t, "unterminated string");
    char c = src_[i_];
    if (c == '"') {
      advance();
      break;
    }
    if (static_cast<unsigned char>(c) < 0x20) {
      Token at{Tok::String, "", line_, col_};
      fail(at, "control character in string (write it as \\xHH)");
    }
    if (c != '\\') {
      s += c;
      advance();
      continue;
    }
    Token at{Tok::String, "", line_, col_};
    advance();
    if (i_ >= src_.size())
      fail(t, "unterminated string");
    char e = src_[i_];
    advance();
    switch (e) {
    case '"': s += '"'; break;
    case '\\': s += '\\'; break;
    case 'n': s += '\n'; break;
    case 't': s += '\t'; break;
    case 'r': s += '\r'; break;
    case 'x': {
      int v = 0;
      for (int k = 0; k < 2; ++k) {
        char h = i_ < src_.size() ? src_[i_] : '\0';
        int d = isDigit(h)               ? h - '0'
                : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                         : -1;
        if (d < 0)
          fail(at, "\\x in a string needs two hex digits");
        v = v * 16 + d;
        advance();
      }
      s += static_cast<char>(v);
      break;
    }
    default: fail(at, cat("unknown escape '\\", excerpt(std::string_view(&e, 1)), "' in string"));
    }
  }
  t.kind = Tok::String;
  t.text = std::move(s);
  return t;
}

TokenCursor::TokenCursor(std::string_view src, const std::string &file, int firstLine,
                         LexDialect dialect, Mode mode)
    : file_(file), lex_(src, file, firstLine, dialect) {
  buf_.push_back(lex_.next());
  if (mode == Mode::Ahead)
    while (buf_.back().kind != Tok::Eof)
      buf_.push_back(lex_.next());
}

const Token &TokenCursor::peek(size_t n) {
  while (buf_.size() <= n && buf_.back().kind != Tok::Eof)
    buf_.push_back(lex_.next());
  return buf_[std::min(n, buf_.size() - 1)];
}

void TokenCursor::consume() {
  if (buf_.size() > 1)
    buf_.pop_front();
  else if (buf_.front().kind != Tok::Eof)
    buf_.front() = lex_.next();
}

void TokenCursor::failExpected(const std::string &what) const {
  failHere(cat("expected ", what, ", got ", describe(tok())));
}

Token TokenCursor::expect(Tok k, const char *what) {
  if (!at(k))
    failExpected(what);
  Token t = tok();
  consume();
  return t;
}

void TokenCursor::expectIdent(std::string_view kw) {
  if (!atIdent(kw))
    failExpected(cat("'", kw, "'"));
  consume();
}

bool TokenCursor::accept(Tok k) {
  if (!at(k))
    return false;
  consume();
  return true;
}

} // namespace aicf::text
