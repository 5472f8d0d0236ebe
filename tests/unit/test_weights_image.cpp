// How the runtime holds weights.bin (runtime/host_memory.h, issue 55): mapped read-only by
// default, so the page cache's one copy serves every process and model object that opens the
// folder; copied into private memory with AICF_WEIGHTS=copy; any other value refused with the
// exact message. Both give bit-identical results.
#include "backend/host/host_build.h"
#include "driver/compile.h"
#include "model_dirs.h"
#include "runtime/aicf_runtime.h"
#include "tests/unit/test_files.h"

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace aicf;

namespace {

// The mlp_op13 folder (compiled once).
const fs::path &folder() {
  static fs::path out = [] {
    fs::path p = test_files::scratchDir("aicf_weights_image_") / "mlp";
    std::unique_ptr<Graph> g =
        testing::pipelineGraph(fs::path(AICF_TESTDATA) / "models" / "mlp_op13");
    CompileOptions opts;
    writeArtifacts(*g, buildModel(*g, opts), opts, p.string());
    return p;
  }();
  return out;
}

// AICF_WEIGHTS set (or unset) for one scope.
struct WeightsEnv {
  std::optional<std::string> saved;
  explicit WeightsEnv(const char *value) {
    if (const char *s = std::getenv("AICF_WEIGHTS"))
      saved = s;
    if (value)
      setenv("AICF_WEIGHTS", value, 1);
    else
      unsetenv("AICF_WEIGHTS");
  }
  ~WeightsEnv() {
    if (saved)
      setenv("AICF_WEIGHTS", saved->c_str(), 1);
    else
      unsetenv("AICF_WEIGHTS");
  }
};

// How many mappings of `file` this process holds (/proc/self/maps names the mapped file).
int mappingsOf(const fs::path &file) {
  std::ifstream maps("/proc/self/maps");
  std::string line, want = fs::canonical(file).string();
  int n = 0;
  while (std::getline(maps, line))
    n += line.size() >= want.size() &&
         line.compare(line.size() - want.size(), want.size(), want) == 0;
  return n;
}

// The model's outputs on inputs of ones, as bytes.
std::vector<std::string> runOnce(aicf_model *m) {
  std::vector<std::vector<char>> ins, outs;
  std::vector<const void *> ip;
  std::vector<void *> op;
  for (int i = 0; i < aicf_num_inputs(m); ++i) {
    aicf_tensor_info t{};
    REQUIRE(aicf_input_info(m, i, &t) == 0);
    std::vector<char> b(t.bytes);
    for (size_t k = 0; k + 4 <= b.size(); k += 4) {
      float one = 1.0f;
      std::memcpy(&b[k], &one, 4);
    }
    ins.push_back(std::move(b));
  }
  for (int i = 0; i < aicf_num_outputs(m); ++i) {
    aicf_tensor_info t{};
    REQUIRE(aicf_output_info(m, i, &t) == 0);
    outs.emplace_back(t.bytes);
  }
  for (auto &b : ins)
    ip.push_back(b.data());
  for (auto &b : outs)
    op.push_back(b.data());
  REQUIRE(aicf_run(m, ip.data(), op.data()) == 0);
  std::vector<std::string> r;
  for (auto &b : outs)
    r.emplace_back(b.begin(), b.end());
  return r;
}

} // namespace

TEST_CASE("weights image: mapped by default, one mapping per open model, results as copied") {
  fs::path w = folder() / "weights.bin";
  std::vector<std::string> mapped, copied;
  {
    WeightsEnv env(nullptr);
    aicf_model *a = aicf_open(folder().string().c_str());
    REQUIRE_MESSAGE(a, aicf_last_error());
    CHECK(mappingsOf(w) == 1);
    aicf_model *b = aicf_open(folder().string().c_str());
    REQUIRE_MESSAGE(b, aicf_last_error());
    CHECK(mappingsOf(w) == 2); // the same page-cache pages, twice
    mapped = runOnce(a);
    CHECK(runOnce(b) == mapped);
    aicf_close(a);
    aicf_close(b);
    CHECK(mappingsOf(w) == 0);
  }
  {
    WeightsEnv env("copy");
    aicf_model *c = aicf_open(folder().string().c_str());
    REQUIRE_MESSAGE(c, aicf_last_error());
    CHECK(mappingsOf(w) == 0);
    copied = runOnce(c);
    aicf_close(c);
  }
  CHECK(copied == mapped);
  {
    WeightsEnv env("map");
    aicf_model *d = aicf_open(folder().string().c_str());
    REQUIRE_MESSAGE(d, aicf_last_error());
    CHECK(mappingsOf(w) == 1);
    aicf_close(d);
  }
}

TEST_CASE("weights image: AICF_WEIGHTS takes map or copy") {
  WeightsEnv env("huge");
  aicf_model *m = aicf_open(folder().string().c_str());
  CHECK(m == nullptr);
  aicf_close(m);
  CHECK(std::string(aicf_last_error()) ==
        "AICF_WEIGHTS='huge': expected map (weights.bin mapped read-only, shared between "
        "processes) or copy (read into private huge pages)");
}
