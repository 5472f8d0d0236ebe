// The shared tokenizer of the Graph IR and Kernel IR texts (ir/text_lexer.h): each dialect's
// tokens, and the cursor's two modes (streaming for the Graph parser, ahead for the Kernel's).
#include "ir/text_lexer.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace aicf;
using namespace aicf::text;

namespace {

// "Kind:text" per token up to end of file, or the ParseError's message.
std::string lexAll(const std::string &src, LexDialect d) {
  const std::string file = "t.txt";
  std::string out;
  try {
    Lexer lex(src, file, 1, d);
    for (Token t = lex.next(); t.kind != Tok::Eof; t = lex.next())
      out += (out.empty() ? "" : " ") + std::to_string(int(t.kind)) + ":" + t.text;
  } catch (const ParseError &e) {
    return e.what();
  }
  return out;
}

std::string kinds(const std::string &src, LexDialect d) {
  const std::string file = "t.txt";
  Lexer lex(src, file, 1, d);
  std::string out;
  for (Token t = lex.next(); t.kind != Tok::Eof; t = lex.next())
    out += (out.empty() ? "" : " ") + describe(t);
  return out;
}

} // namespace

TEST_CASE("text lexer: the Graph dialect's values, strings, signed numbers and dotted names") {
  CHECK(kinds("%ln_1.weight = weight f32[-3, ?b] loc(\"a\\x41\") // note", LexDialect::Graph) ==
        "'%ln_1.weight' '=' 'weight' 'f32' '[' '-3' ',' '?' 'b' ']' 'loc' '(' string \"aA\" ')'");
  CHECK(kinds("1. 2e3 - x -> @g", LexDialect::Graph) == "'1.' '2e3' '-' 'x' '->' '@g'");
  CHECK(kinds("a == b", LexDialect::Graph) == "'a' '=' '=' 'b'");
  CHECK(lexAll("a < b", LexDialect::Graph) == "t.txt:1:3: unexpected character '<'");
  CHECK(lexAll("\n  @", LexDialect::Graph) == "t.txt:2:3: expected a name after '@'");
  CHECK(lexAll("\"ab", LexDialect::Graph) == "t.txt:1:1: unterminated string");
}

TEST_CASE("text lexer: the Kernel dialect's operators, ranges and comments") {
  CHECK(kinds("for i in 0..4 { x[i] += a <= b && !c || d % 2 != 1.5 } # a note",
              LexDialect::Kernel) ==
        "'for' 'i' 'in' '0' '..' '4' '{' 'x' '[' 'i' ']' '+=' 'a' '<=' 'b' '&&' '!' 'c' '||' "
        "'d' '%' '2' '!=' '1.5' '}' a '#' comment");
  CHECK(lexAll("a.b", LexDialect::Kernel) == "t.txt:1:2: unexpected character '.'");
  CHECK(lexAll("\"s\"", LexDialect::Kernel) == "t.txt:1:1: unexpected character '\"'");
  CHECK(lexAll("@ x", LexDialect::Kernel) == "t.txt:1:1: expected a kernel name after '@'");
  CHECK(kinds("-3", LexDialect::Kernel) == "'-' '3'");
}

TEST_CASE("text lexer: a streaming cursor cuts a token when the parser reaches it") {
  const std::string file = "t.txt";
  const std::string src = "graph ) \x01";
  TokenCursor streaming(src, file, 1, LexDialect::Graph, TokenCursor::Mode::Streaming);
  CHECK(streaming.atIdent("graph"));
  streaming.consume();
  CHECK(streaming.at(Tok::RParen));
  CHECK_THROWS_WITH(streaming.expect(Tok::LParen, "'('"), "t.txt:1:7: expected '(', got ')'");
  CHECK_THROWS_WITH(streaming.consume(), "t.txt:1:9: unexpected byte 0x01");
  // Ahead: the whole text is cut up front, so the bad byte is the first error.
  CHECK_THROWS_WITH(TokenCursor(src, file, 1, LexDialect::Kernel, TokenCursor::Mode::Ahead),
                    "t.txt:1:9: unexpected byte 0x01");
  TokenCursor ahead("a b", file, 1, LexDialect::Kernel, TokenCursor::Mode::Ahead);
  CHECK(ahead.peek(1).text == "b");
  CHECK(ahead.peek(5).kind == Tok::Eof);
  ahead.consume();
  ahead.consume();
  ahead.consume(); // stays at the end
  CHECK(ahead.at(Tok::Eof));
}
