// Symbolic dims (issue 21): one folder compiled for a range of a dim (aicfc --dim
// NAME=MIN..MAX@OPT) runs every shape in the range. Covered here: the expressions
// (support/sym_expr.h), the --dim range flags, symbolic types in IR text and the verifier, and
// the bundled mlp_dyn_op13 compiled once for batch 1..64 and run through aicf-run and the C API
// at the range's ends and between, against the interpreter on a static import of each shape
// (the same 1e-4 + 1e-4 |ref| tolerance as every compiled-versus-interpreter check: the
// symbolic kernels run the same micro-kernels in the same order as the static ones).
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "runtime/aicf_runtime.h"
#include "support/cli_util.h"
#include "support/diagnostics.h"
#include "support/sym_expr.h"
#include "tests/unit/test_files.h"

#include <doctest/doctest.h>

#include <array>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace aicf;

namespace {

SymExpr P(const std::string &text) {
  auto e = SymExpr::parse(text);
  REQUIRE_MESSAGE(e, text);
  return *e;
}

using test_files::sh;

std::string userError(const std::function<void()> &fn) {
  try {
    fn();
  } catch (const UserError &e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST_CASE("symbolic: expressions are canonical polynomials") {
  CHECK(P("seq*batch*3 + seq + 1").str() == "3*batch*seq+seq+1");
  CHECK(P("2*seq - seq").str() == "seq");
  CHECK(P("seq - seq").str() == "0");
  CHECK(P("-seq + 4").str() == "-seq+4");
  CHECK(P("seq*seq").str() == "seq*seq");
  CHECK(P("12").isConstant());
  CHECK(P("12").constant() == 12);
  CHECK(P("batch").asSymbol() == "batch");
  CHECK(!P("2*batch").asSymbol());
  CHECK(P("3*batch*seq+seq").symbols() == std::vector<std::string>{"batch", "seq"});
  CHECK(*SymExpr::mul(P("batch+1"), P("seq")) == P("batch*seq+seq"));
  CHECK(*SymExpr::divExact(P("6*seq+12"), 3) == P("2*seq+4"));
  CHECK(!SymExpr::divExact(P("6*seq+1"), 3));
  CHECK(P("3*batch*seq+1").eval({{"batch", 2}, {"seq", 5}}) == 31);
  CHECK(!P("seq").eval({{"batch", 2}}));                   // unbound
  CHECK(!P("9223372036854775807*seq").eval({{"seq", 2}})); // overflow
  CHECK(P("3*seq+1").monotone());
  CHECK(!P("4-seq").monotone());
  std::string why;
  CHECK(!SymExpr::parse("seq/2", &why));
  CHECK(why == "unexpected '/'");
  CHECK(!SymExpr::parse("seq*", &why));
  CHECK(why == "missing a number or symbol at the end");
  // Grid extents: ceil(num / div).
  auto x = SymExtent::parse("ceil(3*seq/8)");
  REQUIRE(x);
  CHECK(x->str() == "ceil(3*seq/8)");
  CHECK(x->eval({{"seq", 8}}) == 3);
  CHECK(x->eval({{"seq", 1}}) == 1);
  CHECK(!SymExtent::parse("ceil(seq/0)"));
  CHECK(SymExtent::parse("batch")->div == 1);
}

TEST_CASE("symbolic: --dim ranges") {
  std::map<std::string, int64_t> fixed;
  std::vector<DimRange> ranges;
  parseDimRangeFlags({"batch=3", "seq=1..512@128", "heads=2..8"}, fixed, ranges);
  CHECK(fixed == std::map<std::string, int64_t>{{"batch", 3}});
  REQUIRE(ranges.size() == 2);
  CHECK((ranges[0].name == "seq" && ranges[0].min == 1 && ranges[0].max == 512 &&
         ranges[0].opt == 128));
  CHECK((ranges[1].name == "heads" && ranges[1].opt == 8)); // OPT defaults to MAX
  auto bad = [](std::vector<std::string> flags) {
    std::map<std::string, int64_t> f;
    std::vector<DimRange> r;
    return userError([&] { parseDimRangeFlags(flags, f, r); });
  };
  CHECK(bad({"seq=8..4"}) == "bad --dim 'seq=8..4': the minimum 8 is above the maximum 4");
  CHECK(bad({"seq=1..4@9"}) == "bad --dim 'seq=1..4@9': the value to optimise for 9 is outside "
                               "1..4");
  CHECK(bad({"seq=1..64", "seq=2"}) == "--dim seq given twice (give each dim once)");
  CHECK(bad({"seq len=1..64"}).find("needs a name of letters, digits and '_'") !=
        std::string::npos);
  CHECK(bad({"seq=0..64"}).rfind("bad --dim 'seq=0..64': the minimum '0' ", 0) == 0);
  CHECK(bad({"h=32..1024%32@640"}) ==
        "bad --dim 'h=32..1024%32@640': a range with a step ('%32') is not supported yet: a dim "
        "that strided windows divide (an image's height or width through convs and pools) needs "
        "symbolic spatial extents, which the conv family does not have; compile a folder per "
        "size");
}

TEST_CASE("symbolic: IR text round-trips symbolic types and the verifier checks them") {
  const std::string text = "graph @g dims(batch = [1, 64, 8], seq = [1, 512, 128])(%x: "
                           "f32[batch,seq,64]) -> (%y: f32[batch*seq,64]) {\n"
                           "  %y = reshape(%x) {shape = [1024, 64], sym_shape = [\"batch*seq\", "
                           "\"64\"]} : f32[batch*seq,64]\n"
                           "  return %y\n"
                           "}\n";
  auto g = parseGraph(text, "sym.mcir");
  CHECK(verifyGraphDiagnostics(*g).empty());
  CHECK(g->inputs()[0]->type().shape == std::vector<int64_t>{8, 128, 64});
  CHECK(g->outputs()[0]->type().str() == "f32[batch*seq,64]");
  CHECK(printGraph(*parseGraph(printGraph(*g), "again.mcir")) == printGraph(*g));
  // A dim printed with a leading coefficient reads back (2*n, as the printer writes n + n).
  auto cg = parseGraph("graph @c dims(n = [1, 40, 16])(%x: f32[n,8]) -> (%z: f32[2*n,8]) {\n"
                       "  %z = concat(%x, %x) {axis = 0} : f32[2*n,8]\n  return %z\n}\n",
                       "c.mcir");
  CHECK(cg->outputs()[0]->type().shape == std::vector<int64_t>{32, 8});
  CHECK(printGraph(*parseGraph(printGraph(*cg), "c2.mcir")) == printGraph(*cg));
  // An unknown dim, and a reshape whose element count holds at one point only.
  CHECK_THROWS_WITH(
      parseGraph("graph @g(%x: f32[n,4]) -> (%x: f32[n,4]) {\n  return %x\n}\n", "u.mcir"),
      "u.mcir:1:18: unknown dim 'n' (declare it in the graph's dims(...))");
  std::string wrong = text;
  wrong.replace(wrong.find("\"batch*seq\", \"64\""), 17, "\"8*seq\", \"64\"");
  std::string msg;
  try {
    parseGraph(wrong, "w.mcir");
  } catch (const std::exception &e) {
    msg = e.what();
  }
  CHECK(msg.find("changes the element count for some values of the symbolic dims") !=
        std::string::npos);
}

TEST_CASE("symbolic: mlp_dyn compiled once for batch 1..64 runs every batch in range") {
  aicf::test_files::Tools tools = aicf::test_files::builtTools();
  if (!tools)
    return;
  fs::path model = fs::path(AICF_TESTDATA) / "models" / "mlp_dyn_op13" / "model.onnx";
  fs::path scratch = fs::temp_directory_path() / cat("aicf_symbolic_test_", ::getpid());
  fs::remove_all(scratch);
  fs::create_directories(scratch);
  std::string aicfc = tools.aicfc, run = tools.run;
  fs::path out = scratch / "mlp";
  std::string log;
  REQUIRE_MESSAGE(
      sh(cat(aicfc, " '", model.string(), "' --dim batch=1..64@8 -o '", out.string(), "'"), &log) ==
          0,
      log);
  // plan.yaml records the dims and the symbolic shapes; the kernels read the dim.
  std::ifstream planFile(out / "plan.yaml");
  std::string plan((std::istreambuf_iterator<char>(planFile)), std::istreambuf_iterator<char>());
  CHECK(plan.find("  - {name: batch, min: 1, max: 64, opt: 8}") != std::string::npos);
  CHECK(plan.find("{name: x, dtype: f32, shape: [batch, 64], buffer: b0}") != std::string::npos);
  CHECK(plan.find("grid: [ceil(batch/8)]") != std::string::npos);
  std::ifstream src(out / "kernels.cpp");
  std::string kernels((std::istreambuf_iterator<char>(src)), std::istreambuf_iterator<char>());
  CHECK(kernels.find("const int64_t sym_batch = aicf_dims[0];") != std::string::npos);
  // Full row tiles run a copy of the body without the ragged tile's guards
  // (kir/version_full_tiles.h).
  CHECK(kernels.find("if (mt * 8L + 8L <= sym_batch) {") != std::string::npos);

  // The sm_90 plan too, emulated on the host (its kernels: blocks of many threads).
  fs::path emulated = scratch / "mlp_sm90";
  REQUIRE_MESSAGE(sh(cat(aicfc, " '", model.string(),
                         "' --dim batch=1..64@8 --plan-for "
                         "cuda:sm_90 -o '",
                         emulated.string(), "'"),
                     &log) == 0,
                  log);

  // One folder, five shapes: the range's ends, the planned value and two others, each against
  // the interpreter on the model imported at that shape (--random: the same seeded values).
  for (int batch : {1, 3, 8, 17, 64}) {
    CAPTURE(batch);
    fs::path ref = scratch / cat("ref", batch);
    REQUIRE_MESSAGE(sh(cat(run, " '", model.string(), "' --shape x=", batch,
                           "x64 --random --output-dir '", ref.string(), "'"),
                       &log) == 0,
                    log);
    for (const fs::path &folder : {out, emulated}) {
      CAPTURE(folder);
      CHECK_MESSAGE(sh(cat(run, " '", folder.string(), "' --shape x=", batch,
                           "x64 --random --reference '", ref.string(), "'"),
                       &log) == 0,
                    log);
    }
  }
  // Out of range, and a static dim that differs: refused before anything runs, naming both.
  CHECK(sh(cat(run, " '", out.string(), "' --shape x=65x64 --random"), &log) != 0);
  CHECK(log.find("error: aicf_output_info: input x dim 0 (batch) is 65, outside batch's range "
                 "1..64 (the folder was compiled for it)") != std::string::npos);
  CHECK(sh(cat(run, " '", out.string(), "' --shape x=4x63 --random"), &log) != 0);
  CHECK(log.find("error: aicf_set_input_shape: input x dim 1 is 63, but it is 64 in every shape "
                 "the folder runs") != std::string::npos);

  // The C API: dims, shapes set per run, outputs following them, errors leaving outputs alone.
  aicf_model *m = aicf_open(out.string().c_str());
  REQUIRE_MESSAGE(m != nullptr, aicf_last_error());
  REQUIRE(aicf_num_dims(m) == 1);
  aicf_dim_desc d;
  REQUIRE(aicf_dim_info(m, 0, &d) == 0);
  CHECK(
      (std::string(d.name) == "batch" && d.min == 1 && d.max == 64 && d.opt == 8 && d.value == 8));
  int64_t shape[2] = {5, 64};
  REQUIRE(aicf_set_input_shape(m, 0, 2, shape) == 0);
  aicf_tensor_info in, outInfo;
  REQUIRE(aicf_input_info(m, 0, &in) == 0);
  CHECK((in.shape[0] == 5 && in.bytes == 5 * 64 * 4));
  REQUIRE(aicf_output_info(m, 0, &outInfo) == 0);
  CHECK((outInfo.rank == 2 && outInfo.shape[0] == 5 && outInfo.shape[1] == 10 &&
         outInfo.bytes == 5 * 10 * 4));
  REQUIRE(aicf_dim_info(m, 0, &d) == 0);
  CHECK(d.value == 5);
  std::vector<float> x(5 * 64, 0.5f), y(5 * 10, -7.0f);
  const void *ins[] = {x.data()};
  void *outs[] = {y.data()};
  CHECK(aicf_run(m, ins, outs) == 0);
  CHECK(y[0] != -7.0f);
  int64_t tooBig[2] = {100, 64};
  REQUIRE(aicf_set_input_shape(m, 0, 2, tooBig) == 0); // checked with the other inputs, at run
  std::fill(y.begin(), y.end(), -7.0f);
  CHECK(aicf_run(m, ins, outs) != 0);
  CHECK(std::string(aicf_last_error()) ==
        "input x dim 0 (batch) is 100, outside batch's range 1..64 (the folder was compiled for "
        "it)");
  CHECK(y[0] == -7.0f); // nothing ran
  CHECK(aicf_set_input_shape(m, 0, 3, tooBig) != 0);
  CHECK(std::string(aicf_last_error()) == "aicf_set_input_shape: input x has rank 2, got 3");
  aicf_close(m);
  fs::remove_all(scratch);
}

namespace {

// The graph inputs of an ONNX model with their dims (a dim_param name, or "" and the value).
std::vector<std::pair<std::string, std::vector<std::pair<std::string, int64_t>>>>
inputDims(const fs::path &model, const std::string &aicfc) {
  // aicfc --emit graph with the model's ranges prints each input's symbolic type.
  std::string out;
  std::ifstream r(model.parent_path() / "ranges.txt");
  std::string ranges((std::istreambuf_iterator<char>(r)), std::istreambuf_iterator<char>());
  while (!ranges.empty() && std::isspace(static_cast<unsigned char>(ranges.back())))
    ranges.pop_back();
  REQUIRE(sh(cat(aicfc, " '", model.string(), "' ", ranges, " --emit graph"), &out) == 0);
  std::string head = out.substr(0, out.find(") -> ("));
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, int64_t>>>> ins;
  for (size_t at = head.find("%"); at != std::string::npos; at = head.find("%", at + 1)) {
    size_t colon = head.find(':', at), open = head.find('[', colon), close = head.find(']', open);
    std::vector<std::pair<std::string, int64_t>> dims;
    std::string list = head.substr(open + 1, close - open - 1);
    for (size_t b = 0; b <= list.size();) {
      size_t e = list.find(',', b);
      std::string d = list.substr(b, e == std::string::npos ? std::string::npos : e - b);
      if (std::isdigit(static_cast<unsigned char>(d[0])))
        dims.emplace_back("", std::stoll(d));
      else
        dims.emplace_back(d, 0);
      if (e == std::string::npos)
        break;
      b = e + 1;
    }
    ins.emplace_back(head.substr(at + 1, colon - at - 1), dims);
    at = close;
  }
  return ins;
}

} // namespace

TEST_CASE("symbolic: each *_dyn model compiled once for its ranges runs at >= 3 shapes") {
  // Host plans and sm_90 plans (emulated): a ranged BERT layer's GPU plan once stopped at its
  // projections ("symbolic batch dims of a batched product are not supported yet").
  aicf::test_files::Tools tools = aicf::test_files::builtTools();
  if (!tools)
    return;
  std::string aicfc = tools.aicfc, run = tools.run;
  fs::path scratch = fs::temp_directory_path() / cat("aicf_symbolic_dyn_", ::getpid());
  fs::remove_all(scratch);
  int models = 0;
  for (const auto &e : fs::directory_iterator(fs::path(AICF_TESTDATA) / "models")) {
    fs::path ranges = e.path() / "ranges.txt";
    if (!fs::exists(ranges))
      continue;
    ++models;
    fs::path model = e.path() / "model.onnx";
    std::string name = e.path().filename().string();
    CAPTURE(name);
    std::ifstream rf(ranges);
    std::vector<std::string> flags{std::istream_iterator<std::string>(rf),
                                   std::istream_iterator<std::string>()};
    // dim -> {min, opt, max} from the --dim NAME=MIN..MAX@OPT flags.
    std::map<std::string, std::array<int64_t, 3>> dims;
    std::string joined;
    for (size_t i = 0; i + 1 < flags.size(); i += 2) {
      std::map<std::string, int64_t> fixed;
      std::vector<DimRange> r;
      parseDimRangeFlags({flags[i + 1]}, fixed, r);
      REQUIRE(r.size() == 1);
      dims[r[0].name] = {r[0].min, r[0].opt, r[0].max};
      joined += " --dim " + flags[i + 1];
    }
    fs::path out = scratch / name, gpu = scratch / cat(name, "_sm90");
    std::string log;
    REQUIRE_MESSAGE(
        sh(cat(aicfc, " '", model.string(), "'", joined, " -o '", out.string(), "'"), &log) == 0,
        log);
    // The GPU plan of the same ranges, run here through the host printer.
    REQUIRE_MESSAGE(sh(cat(aicfc, " '", model.string(), "'", joined,
                           " --target cpu --plan-for cuda:sm_90 -o '", gpu.string(), "'"),
                       &log) == 0,
                    log);
    auto inputs = inputDims(model, aicfc);
    // The ranges' minima, the planned values, a ragged value between, the maxima.
    for (int which = 0; which < 4; ++which) {
      std::map<std::string, int64_t> point;
      for (const auto &[d, v] : dims)
        point[d] = which == 0   ? v[0]
                   : which == 1 ? v[1]
                   : which == 3 ? v[2]
                                : (v[1] + v[2]) / 2 + 1;
      std::string shapes, where;
      for (const auto &[in, ds] : inputs) {
        shapes += " --shape " + in + "=";
        for (size_t k = 0; k < ds.size(); ++k)
          shapes += (k ? "x" : "") +
                    std::to_string(ds[k].first.empty() ? ds[k].second : point.at(ds[k].first));
      }
      for (const auto &[d, v] : point)
        where += cat(d, "=", v, " ");
      CAPTURE(where);
      fs::path ref = scratch / cat(name, "_ref", which);
      REQUIRE_MESSAGE(sh(cat(run, " '", model.string(), "'", shapes, " --random --output-dir '",
                             ref.string(), "'"),
                         &log) == 0,
                      log);
      for (const fs::path &folder : {out, gpu})
        CHECK_MESSAGE(sh(cat(run, " '", folder.string(), "'", shapes, " --random --reference '",
                             ref.string(), "'"),
                         &log) == 0,
                      log);
    }
  }
  CHECK(models >= 3);
  // Two inputs disagreeing on a dim: refused naming both, before anything runs.
  std::string log;
  CHECK(sh(cat(run, " '", (scratch / "bert_layer_dyn_op13").string(),
               "' --shape hidden=3x24x128 --shape attention_mask=3x25 --random"),
           &log) != 0);
  CHECK(log.find("error: aicf_output_info: input attention_mask dim 1 (seq) is 25, but input "
                 "hidden dim 1 makes seq 24") != std::string::npos);
  fs::remove_all(scratch);
}
