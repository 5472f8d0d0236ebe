// Replays every input the fuzzers saved (testdata/fuzz/<harness>/<name>) through the harness'
// body (tests/fuzz/fuzz_bodies.h), in the normal build and under build-asan: no internal error,
// and exactly the message in <name>.expected ("ok" for an accepted input). A missing .expected
// fails, showing the message now given; AICF_UPDATE_GOLDENS=1 writes it instead. Also checks
// that each body accepts a valid input, so a harness that rejects everything cannot pass.
#include "tests/fuzz/fuzz_bodies.h"

#include "support/diagnostics.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include <unistd.h>

using namespace aicf;
namespace fs = std::filesystem;

namespace {

std::string readFile(const fs::path &p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

fuzz::Outcome runBody(const std::string &harness, const std::string &bytes) {
  fuzz::init(AICF_TESTDATA);
  fuzz::Body body = fuzz::bodyByName(harness);
  REQUIRE_MESSAGE(static_cast<bool>(body), "unknown harness ", harness);
  return body(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
}

} // namespace

TEST_CASE("fuzz regressions: saved inputs give their expected message") {
  fs::path root = fs::path(AICF_TESTDATA) / "fuzz";
  bool update = std::getenv("AICF_UPDATE_GOLDENS") && *std::getenv("AICF_UPDATE_GOLDENS") == '1';
  int replayed = 0;
  for (const char *harness : {"onnx", "ir", "npy", "runtime"}) {
    if (!fs::is_directory(root / harness))
      continue;
    std::vector<fs::path> inputs;
    for (const auto &e : fs::directory_iterator(root / harness))
      if (e.is_regular_file() && e.path().extension() != ".expected")
        inputs.push_back(e.path());
    std::sort(inputs.begin(), inputs.end());
    for (const fs::path &input : inputs) {
      CAPTURE(input.string());
      fuzz::Outcome o = runBody(harness, readFile(input));
      CHECK_MESSAGE(!o.internal, "internal error: ", o.message);
      fs::path expectedPath = input;
      expectedPath += ".expected";
      if (update) {
        std::ofstream(expectedPath, std::ios::binary) << o.message << "\n";
      } else if (!fs::exists(expectedPath)) {
        FAIL_CHECK("no ", expectedPath.filename().string(), "; the outcome now is: ", o.message);
      } else {
        std::string expected = readFile(expectedPath);
        while (!expected.empty() && expected.back() == '\n')
          expected.pop_back();
        CHECK(o.message == expected);
      }
      ++replayed;
    }
  }
  MESSAGE("replayed ", replayed, " saved fuzz inputs");
}

TEST_CASE("fuzz bodies accept valid inputs") {
  fs::path td = AICF_TESTDATA;
  CHECK(runBody("onnx", readFile(td / "models/cnn_op17/model.onnx")).message == "ok");
  CHECK(runBody("ir", readFile(td / "ir/roundtrip/basic.mcir")).message == "ok");
  CHECK(runBody("npy", readFile(td / "models/mlp_op17/inputs/x.npy")).message == "ok");
  CHECK(runBody("runtime", fuzz::runtimeSeed()).message == "ok");
  // A separator-less input is a plan.yaml with an empty weights.bin.
  fuzz::Outcome noWeights = runBody("runtime", "schema_version: 1\n");
  CHECK_FALSE(noWeights.internal);
  CHECK(noWeights.message != "ok");
  CHECK(runBody("onnx", "").message.find("<dir>/model.onnx") != std::string::npos);
}

TEST_CASE("fuzz seeds: every testdata model, shrunk, goes through the onnx body") {
  // scripts/fuzz.sh seeds the onnx harness with these; each must reach the body's end or a
  // user error, never an internal one. The transformer blocks keep their structure at a few KB.
  fs::path dir = fs::temp_directory_path() / cat("aicf_fuzz_seeds_", ::getpid());
  int written = fuzz::writeOnnxSeeds(AICF_TESTDATA, dir.string());
  CHECK(written >= 60);
  int accepted = 0;
  for (const auto &e : fs::directory_iterator(dir)) {
    CAPTURE(e.path().filename().string());
    std::string bytes = readFile(e.path());
    CHECK(bytes.size() <= fuzz::kOnnxSeedMaxBytes); // scripts/fuzz.sh: max_len
    fuzz::Outcome o = runBody("onnx", bytes);
    CHECK_MESSAGE(!o.internal, o.message);
    accepted += o.message == "ok";
  }
  MESSAGE(written, " seeds, ", accepted, " accepted whole");
  CHECK(accepted >= 10);
  std::error_code ec;
  fs::remove_all(dir, ec);
}
