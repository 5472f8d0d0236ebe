// `aicf-run OUT --profile` (cmd/aicf_run.cpp): each step's time beside the plan's prediction, a
// step measured more than 3x its prediction marked `!`, and those steps' share of the run. The
// measured times vary; the predictions are the plan's, so the test edits plan.yaml's
// hints.predicted.time_us to put every step far below (all marked) or far above (none) its time.
#include "test_files.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <regex>
#include <string>

using namespace aicf::test_files;
namespace fs = std::filesystem;

namespace {

// plan.yaml with every step's predicted time (`key`: time_us, the plan's cores, or one_core_us)
// replaced by `us`.
void setPredictions(const fs::path &folder, const std::string &us,
                    const std::string &key = "time_us") {
  std::string yaml = readAll(folder / "plan.yaml");
  yaml = std::regex_replace(yaml, std::regex(" " + key + ": [0-9.e+-]+"), " " + key + ": " + us);
  writeAll(folder / "plan.yaml", yaml);
}

// cnn_op17 compiled by aicfc (the command prefixed by `env`) into a fresh folder under
// scratchDir(prefix).
fs::path compileCnn(const Tools &tools, const std::string &prefix, const std::string &env) {
  fs::path out = scratchDir(prefix) / "cnn";
  fs::remove_all(out);
  fs::path model = fs::path(AICF_TESTDATA) / "models" / "cnn_op17" / "model.onnx";
  std::string log;
  REQUIRE_MESSAGE(
      sh(env + tools.aicfc + " '" + model.string() + "' -o '" + out.string() + "'", &log) == 0,
      log);
  return out;
}

} // namespace

TEST_CASE("profile: steps far above their prediction are marked, with their share of the run") {
  Tools tools = builtTools();
  if (!tools)
    return;
  fs::path out = compileCnn(tools, "aicf_profile_test_", "");
  std::string profile = tools.run + " '" + out.string() + "' --random --profile --threads 1", log;

  REQUIRE_MESSAGE(sh(profile, &log) == 0, log);
  CHECK(log.find("x pred") != std::string::npos);
  CHECK(std::regex_search(log, std::regex("off the cost model \\(! : measured > 3x predicted\\): "
                                          "[0-9]+ steps, [0-9.]+% of the time")));

  // Predictions of a picosecond: every step is off the model, all of the time.
  setPredictions(out, "1e-06");
  setPredictions(out, "1e-06", "one_core_us");
  REQUIRE_MESSAGE(sh(profile, &log) == 0, log);
  std::smatch m;
  REQUIRE(std::regex_search(log, m, std::regex("predicted\\): ([0-9]+) steps, ([0-9.]+)% of")));
  CHECK(std::stoi(m[1]) > 0);
  CHECK(m[2] == "100.0");
  CHECK(log.find(" !\n") != std::string::npos);

  // Predictions of ten seconds: no step is off.
  setPredictions(out, "1e+07");
  setPredictions(out, "1e+07", "one_core_us");
  REQUIRE_MESSAGE(sh(profile, &log) == 0, log);
  CHECK(log.find("predicted): 0 steps, 0.0% of the time") != std::string::npos);
  CHECK(log.find(" !\n") == std::string::npos);
  fs::remove_all(out);
}

TEST_CASE("profile: at one thread a plan priced for several cores is measured against one core") {
  // Planned for two cores: every kernel step records its time on one core beside it, never
  // less (a serial step's two are equal).
  Tools tools = builtTools();
  if (!tools)
    return;
  fs::path out = compileCnn(tools, "aicf_profile_cores_", "AICF_HOST_CORES=2 ");
  std::string run = tools.run, log;
  std::string yaml = readAll(out / "plan.yaml");
  std::regex pair("time_us: ([0-9.e+-]+), one_core_us: ([0-9.e+-]+)");
  int kernels = 0, faster = 0;
  for (auto it = std::sregex_iterator(yaml.begin(), yaml.end(), pair); it != std::sregex_iterator();
       ++it) {
    double all = std::stod((*it)[1]), one = std::stod((*it)[2]);
    ++kernels;
    CHECK(one >= all * (1 - 1e-6));
    faster += one > all * 1.5;
  }
  std::regex stepTime("flops: [0-9]+, time_us: ");
  CHECK(kernels == std::distance(std::sregex_iterator(yaml.begin(), yaml.end(), stepTime),
                                 std::sregex_iterator()));
  CHECK(kernels > 0);
  CHECK(faster > 0); // some step spreads over both cores

  // Two cores' predictions of a picosecond, one core's of ten seconds: at one thread no step is
  // off the model; at two every step is.
  setPredictions(out, "1e-06");
  setPredictions(out, "1e+07", "one_core_us");
  REQUIRE_MESSAGE(sh(run + " '" + out.string() + "' --random --profile --threads 1", &log) == 0,
                  log);
  CHECK(log.find("predicted): 0 steps, 0.0% of the time") != std::string::npos);
  REQUIRE_MESSAGE(sh(run + " '" + out.string() + "' --random --profile --threads 2", &log) == 0,
                  log);
  CHECK(log.find("% of the time") != std::string::npos);
  CHECK(log.find("predicted): 0 steps") == std::string::npos);
  fs::remove_all(out);
}
