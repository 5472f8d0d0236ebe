// The Kernel IR text parser (kir/kir_parser.cpp): exact errors with file:line:col, the meaning
// it gives what it reads (types, loop extents, typed constants), and the round trip on every
// kernel the recipes build for the test models: the parsed kernel prints the same Kernel IR and
// the same host C++ (so the parser rebuilt the types the printers use, not only the text), under
// the host plan and the sm_90 plan (block_reduce, mma_tile, shared staging). Every prefix of a
// valid kernel fails with a ParseError, never a crash.
#include "backend/host/host_printer.h"
#include "driver/compile.h"
#include "kir/kir_parser.h"
#include "kir/kir_pass.h"
#include "model_dirs.h"
#include "support/diagnostics.h"
#include "target/target.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace aicf;
using namespace aicf::kir;

namespace {

std::string parseError(const std::string &text) {
  try {
    parseKernels(text, "t.kir");
  } catch (const ParseError &e) {
    CHECK(e.exitCode() == 2);
    return e.what();
  }
  return "(no error)";
}

// A kernel body inside a fixed header; the body starts on line 3.
std::string inKernel(const std::string &body) {
  return "kernel @k grid(row: 2) block(t: 4)\n"
         "    (A: global f32[2,4] in, H: global f16[4] in, B: global f32[2,4] out) {\n" +
         body + "}\n";
}

std::string readFile(const std::filesystem::path &p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const Stmt &onlyStmt(const std::vector<StmtP> &body) {
  REQUIRE(body.size() == 1);
  return *body[0];
}

} // namespace

TEST_CASE("Kernel IR parser: errors name file:line:col and the problem") {
  struct Case {
    std::string text, error;
  };
  const Case cases[] = {
      {"", "t.kir:1:1: expected 'kernel', got end of file"},
      {"kernel k", "t.kir:1:8: expected '@' and the kernel name, got 'k'"},
      {"kernel @", "t.kir:1:8: expected a kernel name after '@'"},
      {"kernel @k grid() block(t: 1) () { $ }", "t.kir:1:35: unexpected character '$'"},
      {"kernel @k grid() block(t: 1) () { \x01 }", "t.kir:1:35: unexpected byte 0x01"},
      {"kernel @k grid(a: 1, a: 2) block(t: 1) () {}",
       "t.kir:1:1: kernel k: name a is defined twice"},
      {"kernel @k grid() block(t: 1) knobs {v = 1, v = 2} () {}",
       "t.kir:1:44: knob v is given twice"},
      {"kernel @k grid() block(t: 1) (A: global f32[2] in, A: global f32[2] out) {}",
       "t.kir:1:52: buffer A is defined twice"},
      {"kernel @k grid() block(t: 1) (A: global f32[-2] in) {}",
       "t.kir:1:45: dimension -2 is negative"},
      {"kernel @k grid() block(t: 1) (A: global f32[2] inout) {}",
       "t.kir:1:48: expected a role (in, out or temp), got 'inout'"},
      {"kernel @k grid() block(t: 1) (A: device f32[2] in) {}",
       "t.kir:1:34: expected a memory scope (global, shared or local), got 'device'"},
      {"kernel @k grid() block(t: 1) (A: global q8[2] in) {}", "t.kir:1:41: unknown dtype 'q8'"},
      {"kernel @k grid() block(t: 99999999999999999999) () {}",
       "t.kir:1:27: integer 99999999999999999999 is out of range"},
      {inKernel("  region t {\n    B[row, t] = A[row, t] + q\n  }\n"),
       "t.kir:4:29: unknown variable 'q'"},
      {inKernel("  region t {\n    B[row, t] = C[row, t]\n  }\n"),
       "t.kir:4:17: unknown buffer 'C'"},
      {inKernel("  region t {\n    B[row] = 0.0\n  }\n"),
       "t.kir:4:5: B has rank 2, indexed with 1 index"},
      {inKernel("  region t {\n    B[row, t] = gelu(A[row, t])\n  }\n"),
       "t.kir:4:17: unknown function 'gelu'"},
      {inKernel("  region t {\n    B[row, t] = select(A[row, t] > 0.0, 1.0)\n  }\n"),
       "t.kir:4:17: select takes 3 operands, got 2"},
      {inKernel("  region t {\n    B[row, t] = 1e999\n  }\n"),
       "t.kir:4:17: number 1e999 is out of range"},
      {inKernel("  region t {\n    B[row, t] = A[row, t] +\n  }\n"),
       "t.kir:5:3: expected an expression, got '}'"},
      {inKernel("  for i in 0 .. 4 step {\n  }\n"), "t.kir:3:24: expected the loop step, got '{'"},
      {inKernel("  for i in 0 to 4 {\n  }\n"),
       "t.kir:3:14: expected '..' between the loop bounds, got 'to'"},
      {inKernel("  reduce i in 0 .. 4 {\n    update {\n    }\n  }\n"),
       "t.kir:4:5: expected 'init', got 'update'"},
      {inKernel("  barrier\n  shared s: f32[4]\n"),
       "t.kir:4:3: allocations come before the kernel's statements"},
      {inKernel("  region t {\n    var x: f32 = A[row, t]\n  }\n  region t {\n    B[row, t] = x\n"
                "  }\n"),
       "t.kir:7:17: unknown variable 'x'"},
      // A reduce's loop var is not visible in its init; the init's declarations are after it.
      {inKernel(
           "  region t {\n    reduce i in 0 .. 4 {\n      init {\n        var s: f32 = A[row, i]\n"
           "      }\n      update {\n      }\n    }\n  }\n"),
       "t.kir:6:29: unknown variable 'i'"},
      {inKernel("  mma_tile B += A x A (m = 1, n = 1, k = 1, tm = 1)\n"),
       "t.kir:3:51: expected ',', got ')'"},
      {inKernel("  block_reduce sum(A) -> (B) {\n    let m = a_s + row\n    s: f32 = m\n  }\n"),
       "t.kir:4:19: unknown variable 'row' (a combiner sees only a_FIELD, b_FIELD and its lets)"},
      {inKernel("  block_reduce sum(A) -> (B, B) {\n    s: f32 = a_s + b_s\n  }\n"),
       "t.kir:3:3: block_reduce sum: 1 fields but 1 source and 2 destination buffers"},
      // Verifier findings (the SIMT rule) are reported at the kernel.
      {inKernel("  B[row, 0] = 0.0\n"), "t.kir:1:1: kernel k: store to B outside a region"},
      {inKernel("  region t {\n    barrier\n  }\n"),
       "t.kir:1:1: kernel k: barrier inside region t"},
      {inKernel("  region t {\n    B[row, t] = 1.0\n  }\n") + "kernel",
       "t.kir:7:7: expected '@' and the kernel name, got end of file"},
  };
  for (const Case &c : cases) {
    CAPTURE(c.text);
    CHECK(parseError(c.text) == c.error);
  }
  // Nesting is bounded (no stack overflow on deep input).
  std::string deep = inKernel("  region t {\n    B[row, t] = " + std::string(5000, '(') + "1.0" +
                              std::string(5000, ')') + "\n  }\n");
  CHECK(parseError(deep) == "t.kir:4:116: nesting deeper than 200 levels");
  // parseKernel wants exactly one kernel.
  std::string one = inKernel("  region t {\n    B[row, t] = 1.0\n  }\n");
  CHECK_THROWS_WITH_AS(parseKernel(one + one, "two.kir"), "two.kir: holds 2 kernels; expected one",
                       UserError);
}

TEST_CASE("Kernel IR parser: types, extents and constants as the builders make them") {
  Kernel k = parseKernel(inKernel("  region t {\n"
                                  "    var h: f16 = f16(0.5)\n"
                                  "    var n: i32 = i32(t)\n"
                                  "    for i in t .. 3 {\n"
                                  "      B[row, i] = f32(h) + H[i] * 2.0 - f32(n)\n"
                                  "    }\n"
                                  "    for j in t * 2 .. t * 2 + 2 step 2 unroll {\n"
                                  "      # one\n"
                                  "    }\n"
                                  "  }\n"),
                         "t.kir");
  CHECK(k.threadVar == "t");
  CHECK(k.threads == 4);
  REQUIRE(k.grid.size() == 1);
  CHECK(k.grid[0] == std::make_pair(std::string("row"), int64_t(2)));
  REQUIRE(k.params.size() == 3);
  CHECK(k.params[1]->dtype == DType::F16);
  CHECK(k.params[2]->role == Role::Out);
  const Stmt &region = onlyStmt(k.body);
  REQUIRE(region.body.size() == 4);
  const Stmt &h = *region.body[0];
  CHECK(h.dtype == DType::F16);
  CHECK(h.value->kind == Expr::Kind::Float); // f16(0.5) is a constant of that dtype
  CHECK(h.value->type == DType::F16);
  CHECK(region.body[1]->value->kind == Expr::Kind::Cast);
  // `for i in t .. 3`: the extent is 3 - t, so the loop keeps its bounds.
  const Stmt &fi = *region.body[2];
  CHECK(printExpr(fi.begin) == "t");
  CHECK(printExpr(fi.extent) == "3 - t");
  const Stmt &store = onlyStmt(fi.body);
  // f32(h) + H[i] * 2.0 - f32(n): h is a declared f16 scalar, H[i] widens to f32.
  CHECK(store.value->type == DType::F32);
  const Expr &sum = *store.value->args[0];
  CHECK(sum.args[0]->kind == Expr::Kind::Cast);
  CHECK(sum.args[0]->args[0]->kind == Expr::Kind::Var);
  CHECK(sum.args[0]->args[0]->type == DType::F16);
  CHECK(sum.args[1]->args[0]->kind == Expr::Kind::Load);
  CHECK(sum.args[1]->args[0]->type == DType::F32);
  // `t * 2 .. t * 2 + 2`: the end is begin + 2, so the extent is 2.
  const Stmt &fj = *region.body[3];
  CHECK(printExpr(fj.extent) == "2");
  CHECK(fj.step == 2);
  CHECK(fj.loop == Stmt::LoopKind::Unrolled);
  CHECK(onlyStmt(fj.body).kind == Stmt::Kind::Comment);
  CHECK(onlyStmt(fj.body).text == "one");
  CHECK(printKernel(parseKernel(printKernel(k), "again.kir")) == printKernel(k));
}

TEST_CASE("Kernel IR parser: a comment of several lines prints back the same") {
  Kernel k;
  k.name = "c";
  k.body = {comment("first\nsecond"), comment("")};
  std::string text = printKernel(k);
  CHECK(text == "kernel @c grid() block(t: 1)\n    () {\n  # first\n  # second\n  #\n}\n");
  Kernel back = parseKernel(text, "c.kir");
  CHECK(back.body.size() == 3); // one comment per line
  CHECK(printKernel(back) == text);
}

TEST_CASE("Kernel IR parser: every kernel of the models round-trips, text and host C++") {
  // The kernels as aicfc builds them, under the host plan and the sm_90 plan (printed by the
  // host printer, as test_recipes.cpp runs GPU plans on the host).
  for (const std::filesystem::path &dir : testing::modelDirs()) {
    std::unique_ptr<Graph> g = testing::pipelineGraph(dir);
    for (const char *planFor : {"cpu", "cuda:sm_90"}) {
      CAPTURE(dir.filename().string());
      CAPTURE(planFor);
      CompileOptions opts;
      opts.planFor = Target::parseSpec(planFor);
      std::vector<Kernel> built = buildModel(*g, opts).kernels;
      REQUIRE(!built.empty());
      std::string text;
      for (const Kernel &k : built)
        text += printKernel(k) + "\n";
      std::vector<Kernel> parsed = parseKernels(text, "model.kir");
      REQUIRE(parsed.size() == built.size());
      std::string again;
      for (const Kernel &k : parsed)
        again += printKernel(k) + "\n";
      CHECK(again == text);
      CHECK(printHostSource(parsed) == printHostSource(built));
    }
  }
}

TEST_CASE("Kernel IR parser: a truncated kernel is a ParseError at every cut") {
  std::string text = readFile(std::filesystem::path(AICF_TESTDATA) / "kir" / "roundtrip" /
                              "every_statement.golden");
  REQUIRE(text.size() > 1000);
  REQUIRE(printKernel(parseKernel(text, "full.kir")) == text);
  int errors = 0;
  for (size_t cut = 0; cut + 1 < text.size(); ++cut) {
    try {
      parseKernels(std::string_view(text).substr(0, cut), "cut.kir");
    } catch (const ParseError &) {
      ++errors;
    }
  }
  CHECK(errors == int(text.size()) - 1); // the last '}' (or the newline after it) is needed
}

TEST_CASE("Kernel IR parser: a parsed kernel runs through the Kernel IR pass manager") {
  std::filesystem::path dir = std::filesystem::path(AICF_TESTDATA) / "kir";
  std::string golden = readFile(dir / "fuse_reduction_epilogue" / "bias.kir");
  std::string before = golden.substr(golden.find("// ---- before\n") + 15);
  std::string after = before.substr(before.find("// ---- after\n") + 14);
  before = before.substr(0, before.find("// ---- after\n"));
  Kernel k = parseKernel(before, "bias.kir");
  KernelPassManager pm;
  pm.add(createKernelPass("fuse-reduction-epilogue"));
  std::vector<std::string> notes;
  CHECK(pm.run(k, &notes));
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].rfind("FuseReductionEpilogue(acc): applied: init acc[t, r] = Cb[r, t]", 0) == 0);
  CHECK(printKernel(k) == after);
}
