// Loops kept at run time through aicfc and aicf-run (issue 20; plan/loop_bodies.h): the
// testdata model testdata/loops/loop_runtime_op17 (scripts/gen_loop_model.py) runs a recurrence
// for a trip count given at run time while a tolerance test computed in the body holds, with a
// nested loop in its body. Its three cases (the trip count ends it, the tolerance ends it after
// 48 iterations, no iteration at all) must match ONNX Runtime's outputs, compiled for the host
// and as the sm_90 plan emulated on the host; a GPU target is refused, and a tampered loop step
// is refused when the folder is opened.
#include "support/diagnostics.h"
#include "tests/unit/test_files.h"

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace aicf;

namespace {

const fs::path kModel = fs::path(AICF_TESTDATA) / "loops" / "loop_runtime_op17";

using test_files::sh;

std::string runArgs(const std::string &kase) {
  std::string args;
  for (const char *in : {"inp", "h0", "acc0", "steps", "tol"})
    args += cat(" --input ", in, "='", (kModel / kase / "inputs" / cat(in, ".npy")).string(), "'");
  return args;
}

} // namespace

TEST_CASE("loops: a loop kept at run time through aicfc and aicf-run matches ONNX Runtime") {
  aicf::test_files::Tools tools = aicf::test_files::builtTools();
  if (!tools)
    return;
  fs::path scratch = fs::temp_directory_path() / cat("aicf_loops_test_", ::getpid());
  fs::create_directories(scratch);
  std::string aicfc = tools.aicfc, run = tools.run;
  std::string model = (kModel / "model.onnx").string();
  for (const char *planFor : {"", "--plan-for cuda:sm_90"}) {
    CAPTURE(planFor);
    fs::path out = scratch / (*planFor ? "emulated" : "host");
    std::string log;
    REQUIRE(sh(cat("'", aicfc, "' '", model, "' ", planFor, " --explain -o '", out.string(), "'"),
               &log) == 0);
    // The outer loop runs the body's steps, the nested one inside them.
    CHECK(log.find("(runtime loop)") != std::string::npos);
    CHECK(log.find("per iteration while") != std::string::npos);
    std::ifstream pf(out / "plan.yaml");
    std::string plan((std::istreambuf_iterator<char>(pf)), std::istreambuf_iterator<char>());
    CHECK(plan.find("loop: {body_steps: ") != std::string::npos);
    for (const char *kase : {"trips", "converges", "none"}) {
      CAPTURE(kase);
      std::string res;
      int rc = sh(cat("'", run, "' '", out.string(), "'", runArgs(kase), " --threads 2",
                      " --reference '", (kModel / kase / "outputs").string(), "'"),
                  &res);
      CHECK_MESSAGE(rc == 0, res);
    }
  }

  // A GPU target: refused, naming the loop and the way to unroll it.
  std::string err;
  CHECK(sh(cat("'", aicfc, "' '", model, "' --target cuda:sm_90 --emit plan"), &err) == 2);
  CHECK(err.find("h_final: a loop kept at run time runs on cpu targets only (bind its trip count "
                 "and condition with --const to unroll it)") != std::string::npos);

  // A tampered loop step is refused when the folder is opened.
  fs::path host = scratch / "host";
  std::ifstream pf(host / "plan.yaml");
  const std::string plan((std::istreambuf_iterator<char>(pf)), std::istreambuf_iterator<char>());
  auto tampered = [&](const std::string &from, const std::string &to, const std::string &want) {
    CAPTURE(from);
    size_t at = plan.find(from);
    REQUIRE(at != std::string::npos);
    std::string edited = plan;
    edited.replace(at, from.size(), to);
    std::ofstream(host / "plan.yaml", std::ios::trunc) << edited;
    std::string res;
    CHECK(sh(cat("'", run, "' '", host.string(), "'", runArgs("trips")), &res) == 2);
    CHECK_MESSAGE(res.find(want) != std::string::npos, res);
  };
  tampered("body_steps: 8", "body_steps: 80", "body steps run past the last step");
  tampered("body_steps: 2", "body_steps: 4", "body steps run past the enclosing loop's body");
  tampered("next: [b", "next: [b0, b", "do not fit together");
  std::ofstream(host / "plan.yaml", std::ios::trunc) << plan;
  fs::remove_all(scratch);
}
