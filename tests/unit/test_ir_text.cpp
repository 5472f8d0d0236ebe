// The IR text format: parse(print(g)) prints identically on every file under testdata/ir,
// floats and weight data round-trip bit-exactly, names are sanitised deterministically, the
// malformed corpus (testdata/ir/bad) gives its expected FILE:LINE:COL errors, and random bytes,
// truncations and mutations of valid files only ever give a UserError.
#include "ir/parser.h"
#include "ir/printer.h"
#include "support/half.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

using namespace aicf;
namespace fs = std::filesystem;

namespace {

std::string readFile(const fs::path &p) {
  std::ifstream f(p, std::ios::binary);
  REQUIRE_MESSAGE(f, "cannot open ", p.string());
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<fs::path> mcirFiles(const fs::path &dir) {
  std::vector<fs::path> out;
  for (const auto &e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".mcir")
      out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// parse(print(g)) must print identically; returns the printed text.
std::string checkRoundTrip(const Graph &g, const std::string &what) {
  std::string once = printGraph(g);
  std::unique_ptr<Graph> again;
  try {
    again = parseGraph(once, "printed");
  } catch (const UserError &e) {
    FAIL("printed IR of ", what, " does not parse: ", e.what(), "\n", once);
    return once;
  }
  CHECK_MESSAGE(printGraph(*again) == once, "round trip changed the IR of ", what);
  return once;
}

// Parses arbitrary bytes: anything but a graph or a UserError is a failure.
void parseMustNotCrash(const std::string &text) {
  try {
    parseGraphs(text, "fuzz.mcir");
  } catch (const UserError &) {
  } catch (const std::exception &e) {
    FAIL("non-user error on fuzz input: ", e.what(), "\ninput: ", text);
  }
}

} // namespace

TEST_CASE("ir text: parse(print(g)) prints identically for every testdata/ir file") {
  int files = 0, graphs = 0;
  for (const fs::path &p : mcirFiles(AICF_TESTDATA "/ir")) {
    ++files;
    std::string text = readFile(p);
    for (const SourceChunk &chunk : splitInputChunks(text)) {
      std::unique_ptr<Graph> g;
      try {
        g = parseGraphChunk(chunk, p.string());
      } catch (const UserError &) {
        continue; // the malformed corpus and the verifier tests
      }
      checkRoundTrip(*g, p.string() + ":" + std::to_string(chunk.firstLine));
      ++graphs;
    }
  }
  CHECK(files >= 40);
  CHECK(graphs >= 10);
}

TEST_CASE("ir text: the printed form of the design example") {
  const char *text = R"(graph @gpt2_block(%x: f32[2,64,256]) -> (%y: f32[2,64,256]) {
  %ln_w = weight f32[256] = elided loc("ln_1.weight")
  %ln_b = weight f32[256] = elided
  %0 = layer_norm(%x, %ln_w, %ln_b) {axis = -1, epsilon = 1e-05} : f32[2,64,256] props [online_reducible_norm] loc(fused["/ln_1/ReduceMean", "/ln_1/Add_1"])
  %1, %2 = split(%0) {axis = 2, sizes = [128, 128]} : f32[2,64,128], f32[2,64,128] loc("/Split")
  %3 = concat(%1, %2) {axis = 2} : f32[2,64,256]
  %y = add(%3, %x) : f32[2,64,256]
  return %y
}
)";
  std::unique_ptr<Graph> g = parseGraph(text, "example.mcir");
  CHECK(printGraph(*g) == text);
  REQUIRE(g->numNodes() == 4);
  Node *ln = g->nodes()[0];
  CHECK(ln->op() == Op::LayerNorm);
  CHECK(ln->props.has(MemProperty::OnlineReducibleNorm));
  CHECK(ln->loc.origins == std::vector<std::string>{"/ln_1/ReduceMean", "/ln_1/Add_1"});
  CHECK(ln->pos.str() == "example.mcir:4:3");
  CHECK(g->weights()[0]->loc.str() == "ln_1.weight");
  CHECK(g->outputs()[0]->name() == "y");
  CHECK(g->nodes()[1]->numResults() == 2);
}

TEST_CASE("ir text: float attributes round-trip bit-exactly") {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> values = {0.1,
                                1.0 / 3,
                                1e-300,
                                5e-324,
                                -0.0,
                                1.7976931348623157e308,
                                2.2250738585072014e-308,
                                123456789.0,
                                -1e22,
                                0.30000000000000004,
                                inf,
                                -inf,
                                1.0,
                                -2.5e-7};
  std::mt19937_64 rng(7);
  for (int k = 0; k < 200; ++k) {
    double d = std::bit_cast<double>(rng());
    if (!std::isnan(d))
      values.push_back(d);
  }
  Graph g("floats");
  Value *v = g.addInput("x", TensorType(DType::F32, {2}));
  for (double d : values)
    v = g.createNode(Op::LeakyRelu, {v}, {{"alpha", d}})->result();
  // resize wants one scale per axis: the graph is not verified, only the text round trip matters
  g.addNode(Op::Resize, {v}, {TensorType(DType::F32, {4})},
            {{"sizes", std::vector<int64_t>{4}}, {"scales", values}});
  g.addOutput(g.nodes().back()->result());
  std::string text = printGraph(g);
  std::unique_ptr<Graph> back = parseGraph(text, "floats.mcir", /*verify=*/false);
  std::vector<Node *> nodes = back->nodes();
  REQUIRE(nodes.size() == values.size() + 1);
  for (size_t i = 0; i < values.size(); ++i)
    CHECK(std::bit_cast<uint64_t>(nodes[i]->f("alpha")) == std::bit_cast<uint64_t>(values[i]));
  const std::vector<double> &scales = nodes.back()->floats("scales");
  REQUIRE(scales.size() == values.size());
  for (size_t i = 0; i < values.size(); ++i)
    CHECK(std::bit_cast<uint64_t>(scales[i]) == std::bit_cast<uint64_t>(values[i]));
  CHECK(printGraph(*back) == text);

  std::unique_ptr<Graph> nan = parseGraph(
      "graph @n(%x: f32[2]) -> (%y: f32[2]) {\n %y = leaky_relu(%x) {alpha = nan}\n return %y\n}",
      "nan.mcir");
  CHECK(std::isnan(nan->nodes()[0]->f("alpha")));
}

TEST_CASE("ir text: weight literals round-trip every f16 and bf16 value and exact integers") {
  Graph g("literals");
  auto addChunks = [&](DType dt, const std::vector<uint16_t> &bits) {
    for (size_t start = 0; start < bits.size(); start += 16) {
      Tensor t(TensorType(dt, {16}));
      for (size_t k = 0; k < 16; ++k)
        t.data<uint16_t>()[k] = bits[(start + k) % bits.size()];
      g.addWeight((dt == DType::F16 ? "h" : "b") + std::to_string(start),
                  std::make_shared<Tensor>(std::move(t)));
    }
  };
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i)
    all[i] = static_cast<uint16_t>(i);
  addChunks(DType::F16, all);
  addChunks(DType::BF16, all);
  std::mt19937 rng(11);
  for (int k = 0; k < 64; ++k) {
    Tensor t(TensorType(DType::F32, {4, 4}));
    for (int i = 0; i < 16; ++i)
      t.data<uint32_t>()[i] = rng();
    g.addWeight("f" + std::to_string(k), std::make_shared<Tensor>(std::move(t)));
  }
  g.addWeight("i64",
              std::make_shared<Tensor>(Tensor::fromI64(
                  {std::numeric_limits<int64_t>::min(), -1, 0, std::numeric_limits<int64_t>::max()},
                  {2, 2})));
  Tensor i8(TensorType(DType::I8, {3}));
  i8.setInt(0, -128);
  i8.setInt(1, 127);
  g.addWeight("i8", std::make_shared<Tensor>(std::move(i8)));
  Tensor flags(TensorType(DType::Bool, {2}));
  flags.setInt(0, 1);
  g.addWeight("flags", std::make_shared<Tensor>(std::move(flags)));
  g.addWeight("scalar", std::make_shared<Tensor>(Tensor::scalarF32(0.5f)));
  g.addWeight("empty", std::make_shared<Tensor>(TensorType(DType::F32, {0, 3})));

  std::string text = checkRoundTrip(g, "literal weights");
  std::unique_ptr<Graph> back = parseGraph(text, "literals.mcir");
  REQUIRE(back->weights().size() == g.weights().size());
  for (size_t w = 0; w < g.weights().size(); ++w) {
    const Tensor &a = *g.weights()[w]->data(), &b = *back->weights()[w]->data();
    REQUIRE(a.type() == b.type());
    for (int64_t i = 0; i < a.numel(); ++i) {
      if (isFloat(a.dtype()) && std::isnan(a.getDouble(i))) {
        CHECK(std::isnan(b.getDouble(i))); // NaN payloads are not kept
        continue;
      }
      size_t n = dtypeSize(a.dtype());
      CHECK_MESSAGE(std::memcmp(a.raw() + i * n, b.raw() + i * n, n) == 0, "weight ", w,
                    " element ", i, " of ", a.type().str());
    }
  }
  CHECK(text.find("%scalar = weight f32[] = [0.5]") != std::string::npos);
  CHECK(text.find("%empty = weight f32[0,3] = []") != std::string::npos);
}

// Issue 15: a printed graph used to read back with zero-filled weights, and aicf-run on it
// computed wrong outputs silently. An elided weight now has no data and says so when read.
TEST_CASE("ir text: large weights print as elided and read back without data") {
  Graph g("big");
  Tensor t(TensorType(DType::F32, {17}));
  t.setDouble(3, 1.5);
  g.addWeight("w", std::make_shared<Tensor>(std::move(t)));
  std::string text = printGraph(g);
  CHECK(text.find("%w = weight f32[17] = elided\n") != std::string::npos);
  std::unique_ptr<Graph> back = parseGraph(text, "big.mcir");
  Value *w = back->weights()[0];
  CHECK(w->dataElided());
  CHECK_FALSE(w->hasData());
  CHECK(w->type().str() == "f32[17]");
  CHECK_THROWS_WITH_AS(w->data(),
                       "big.mcir: weight 'w' has no data (the printer elides weights over 16 "
                       "elements); run the original model or its compiled folder instead",
                       UserError);
  // It prints elided again, survives clone(), and a pass-free round trip is stable.
  CHECK(printGraph(*back) == text);
  CHECK(back->clone()->weights()[0]->dataElided());
  // Hand-written IR without a literal still means zeros (tests rely on it).
  std::unique_ptr<Graph> zeros =
      parseGraph("graph @z(%x: f32[17]) -> (%y: f32[17]) {\n  %w = weight f32[17]\n"
                 "  %y = add(%x, %w) : f32[17]\n  return %y\n}\n",
                 "z.mcir");
  REQUIRE(zeros->weights()[0]->hasData());
  CHECK(zeros->weights()[0]->data()->getDouble(3) == 0.0);
}

TEST_CASE("ir text: names are sanitised and de-duplicated deterministically") {
  Graph g("my model!");
  TensorType t(DType::F32, {2});
  Value *a = g.addInput("onnx::x:0", t);
  Value *b = g.addInput("onnx__x_0", t);
  Value *c = g.addInput("9lives", t);
  Value *w = g.addWeight("", std::make_shared<Tensor>(t));
  Node *n = g.createNode(Op::Add, {a, b});
  Node *m = g.createNode(Op::Add, {n->result(), c});
  Node *k = g.createNode(Op::Mul, {m->result(), w});
  g.renameValue(k->result(), "logits/0");
  g.addOutput(k->result());
  g.addOutput(m->result());
  std::string text = printGraph(g);
  CHECK(text.find("graph @my_model_(%onnx__x_0: f32[2] loc(\"onnx::x:0\"), %onnx__x_0_1: f32[2] "
                  "loc(\"onnx__x_0\"), %_9lives: f32[2] loc(\"9lives\")) -> (%logits_0: f32[2], "
                  "%out1: f32[2]) {") != std::string::npos);
  CHECK(text.find("%w = weight f32[2]") != std::string::npos);
  CHECK(text.find("%0 = add(%onnx__x_0, %onnx__x_0_1)") != std::string::npos);
  CHECK(text.find("%out1 = add(%0, %_9lives)") != std::string::npos);
  CHECK(text.find("return %logits_0, %out1") != std::string::npos);
  CHECK(printGraph(g) == text); // deterministic
  checkRoundTrip(g, "sanitised names");
}

TEST_CASE("ir text: the printer survives invalid graphs") {
  Graph g("broken");
  Graph other("other");
  Value *foreign = other.addInput("f", TensorType(DType::F32, {2}));
  g.addNode(Op::Relu, {nullptr}, {TensorType(DType::F32, {2})});
  g.addNode(Op::Relu, {foreign}, {TensorType(DType::F32, {2})});
  std::string text = printGraph(g);
  CHECK(text.find("relu(%<null>)") != std::string::npos);
  CHECK(text.find("relu(%<undefined>)") != std::string::npos);
}

TEST_CASE("ir text: errors name FILE:LINE:COL") {
  auto errorOf = [](const std::string &text) -> std::string {
    try {
      parseGraph(text, "t.mcir");
    } catch (const ParseError &e) {
      CHECK(e.pos().file == "t.mcir");
      return e.what();
    } catch (const UserError &e) {
      return std::string("(not a ParseError) ") + e.what();
    }
    return "(parsed)";
  };
  const std::string head = "graph @g(%x: f32[2]) -> (%y: f32[2]) {\n";
  CHECK(errorOf(head + "  %y = foo(%x)\n") == "t.mcir:2:8: unknown op 'foo'");
  CHECK(errorOf(head + "  %y = relu(%7)\n  return %y\n}") == "t.mcir:2:13: undefined value %7");
  CHECK(errorOf(head + "  %y = relu(%x) : f32[3]\n  return %y\n}") ==
        "t.mcir:1:26: output %y is declared f32[2] but defined as f32[3]");
  CHECK(errorOf(head + "  %0 = relu(%x) : f32[3]\n  %y = relu(%x)\n  return %y\n}") ==
        "t.mcir:2:3: result type f32[3] does not match inferred f32[2]");
  CHECK(errorOf(head + "  %y = relu(%x) : f32[2] loc(\"/r\")\n  %z = relu(%x) {q = 1} : f32[2] "
                       "loc(\"/Relu_2\")\n  return %y\n}") ==
        "t.mcir:3:3: /Relu_2: op 'relu' has no attribute 'q'");
  CHECK(errorOf(head + "  %y = relu(%x") ==
        "t.mcir:2:15: expected ',' or ')' after an operand, got end of file");
  CHECK(errorOf("") == "t.mcir:1:1: expected 'graph', got end of file");
  CHECK(errorOf(std::string("graph \0", 7)) == "t.mcir:1:7: unexpected byte 0x00");

  // Several graphs: line numbers are the file's.
  std::string two = head + "  %y = relu(%x)\n  return %y\n}\n// -----\n" + head +
                    "  %y = relu(%x) : i64[2]\n  return %y\n}\n";
  CHECK(parseGraphs(head + "  %y = relu(%x)\n  return %y\n}\n", "t.mcir").size() == 1);
  try {
    parseGraphs(two, "t.mcir");
    FAIL("expected an error");
  } catch (const UserError &e) {
    CHECK(std::string(e.what()) ==
          "t.mcir:6:26: output %y is declared f32[2] but defined as i64[2]");
  }
  try {
    parseGraphFile("/nonexistent/x.mcir");
    FAIL("expected an error");
  } catch (const UserError &e) {
    CHECK(std::string(e.what()) == "cannot open /nonexistent/x.mcir");
    CHECK(e.exitCode() == 1);
  }
}

TEST_CASE("ir text: splitInputChunks keeps file line numbers and drops empty parts") {
  std::string text = "// RUN: x\n\n// -----\ngraph A\n  // -----  \ngraph B\n// -----\n// only a "
                     "comment\n// -----// IR after dce //----- //\n";
  std::vector<SourceChunk> chunks = splitInputChunks(text);
  REQUIRE(chunks.size() == 2);
  CHECK(chunks[0].firstLine == 4);
  CHECK(chunks[0].text == "graph A\n");
  CHECK(chunks[1].firstLine == 6);
  CHECK(chunks[1].text == "graph B\n");
}

TEST_CASE("ir text: the malformed corpus gives each file's expected error at its line") {
  int files = 0;
  for (const fs::path &p : mcirFiles(AICF_TESTDATA "/ir/bad")) {
    CAPTURE(p.string());
    ++files;
    std::string text = readFile(p);
    // The one `// expected-error@+N {{text}}` of the file.
    std::vector<std::pair<int, std::string>> expected;
    std::istringstream in(text);
    std::string line;
    for (int no = 1; std::getline(in, line); ++no) {
      size_t at = line.find("expected-error");
      if (at == std::string::npos)
        continue;
      int target = no;
      size_t i = at + 14;
      if (line.compare(i, 2, "@+") == 0 || line.compare(i, 2, "@-") == 0)
        target += (line[i + 1] == '-' ? -1 : 1) * std::stoi(line.substr(i + 2));
      size_t open = line.find("{{"), close = line.rfind("}}");
      REQUIRE(open != std::string::npos);
      REQUIRE(close != std::string::npos);
      expected.push_back({target, line.substr(open + 2, close - open - 2)});
    }
    REQUIRE_MESSAGE(expected.size() == 1, "each bad file holds exactly one expected error");
    try {
      parseGraphs(text, p.string());
      FAIL("malformed IR parsed without an error");
    } catch (const ParseError &e) {
      std::string msg = e.what();
      std::string where = p.string() + ":" + std::to_string(expected[0].first) + ":";
      CHECK_MESSAGE(msg.rfind(where, 0) == 0, msg, " does not start with ", where);
      CHECK_MESSAGE(msg.find(expected[0].second) != std::string::npos, msg, " lacks ",
                    expected[0].second);
      CHECK(e.pos().line == expected[0].first);
      CHECK(e.pos().col >= 1);
    }
  }
  CHECK(files >= 30);
}

TEST_CASE("ir text: random bytes, truncations and mutations give only UserErrors") {
  std::mt19937 rng(20240601);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };

  // Random bytes, and random sequences of the format's own tokens (which get much further).
  static const char *tokens[] = {
      "graph",  "@g",   "(",     ")",   "->",      "{",    "}",       "%x",     "%0",
      "%y",     ":",    "f32",   "[",   "]",       "2",    "-1",      ",",      "=",
      "weight", "relu", "split", "add", "return",  "loc",  "(\"a\")", "props",  "fused",
      "1.5e3",  "inf",  "-",     "?",   "\"s\\x4", "[:f]", "\n",      "// c\n", "\xff"};
  for (int k = 0; k < 2000; ++k) {
    std::string s;
    size_t len = pick(300);
    if (k % 2 == 0) {
      for (size_t i = 0; i < len; ++i)
        s += static_cast<char>(rng() & 0xff);
    } else {
      for (size_t i = 0; i < len / 4; ++i)
        s += std::string(tokens[pick(std::size(tokens))]) + (rng() % 3 ? " " : "");
    }
    parseMustNotCrash(s);
  }

  // Every prefix of valid files, and random byte mutations of them.
  std::vector<std::string> seeds;
  for (const fs::path &p : mcirFiles(AICF_TESTDATA "/ir/roundtrip"))
    seeds.push_back(readFile(p));
  REQUIRE(!seeds.empty());
  for (const std::string &seed : seeds)
    for (size_t n = 0; n <= seed.size(); ++n)
      parseMustNotCrash(seed.substr(0, n));
  static const char alphabet[] = "0123456789-+.,:;=()[]{}%@?\"\\ \n\tabcefxyz_\x00\x80\xff";
  for (int k = 0; k < 3000; ++k) {
    std::string s = seeds[pick(seeds.size())];
    for (int m = 1 + static_cast<int>(pick(3)); m > 0; --m) {
      size_t at = pick(s.size());
      switch (pick(3)) {
      case 0: s[at] = alphabet[pick(sizeof(alphabet) - 1)]; break;
      case 1: s.erase(at, 1 + pick(8)); break;
      default: s.insert(at, 1, alphabet[pick(sizeof(alphabet) - 1)]); break;
      }
    }
    parseMustNotCrash(s);
  }
}
