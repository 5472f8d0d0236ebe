// Device choice for GPU plans (issue 55): aicf_open_device(dir, k) opens a cuda folder on CUDA
// device k, so that one process can hold models on several GPUs. Tested by emulation on every
// machine: AICF_CUDART_LIBRARY points the runtime at tests/fake_cudart (host memory, two
// devices, a log of the device current at each call), and the test checks that the model's
// memory is allocated, uploaded and freed on its own device even when another model made a
// different device current in between; that an index the machine lacks is refused with the
// exact message; and that a cpu plan takes device 0 only. Kernels do not run under the emulation
// (a GPU session runs tests/unit/test_runtime_cuda.cpp). Skipped with a MESSAGE where nvcc is
// absent (no cuda folder can be built).
#include "backend/cuda/cuda_build.h"
#include "driver/compile.h"
#include "model_dirs.h"
#include "runtime/aicf_runtime.h"
#include "tests/unit/test_files.h"

#include <doctest/doctest.h>

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace fs = std::filesystem;
using namespace aicf;

namespace {

fs::path compileFor(const std::string &target, const std::string &name) {
  fs::path out = test_files::scratchDir("aicf_device_choice_") / name;
  std::unique_ptr<Graph> g =
      testing::pipelineGraph(fs::path(AICF_TESTDATA) / "models" / "mlp_op13", target);
  CompileOptions opts;
  opts.target = Target::parseSpec(target);
  opts.planFor = opts.target;
  writeArtifacts(*g, buildModel(*g, opts), opts, out.string());
  return out;
}

// The emulation's log and reset, from the copy of the library the runtime loaded.
struct FakeLog {
  void *lib = dlopen(AICF_FAKE_CUDART, RTLD_NOW | RTLD_NOLOAD);
  std::string take() {
    REQUIRE(lib);
    auto log = reinterpret_cast<const char *(*)()>(dlsym(lib, "fake_cudart_log"));
    auto clear = reinterpret_cast<void (*)()>(dlsym(lib, "fake_cudart_clear"));
    std::string s = log();
    clear();
    return s;
  }
};

} // namespace

TEST_CASE("device choice: a cuda plan opens on the device asked for, its calls on that device") {
  if (nvccPath().empty()) {
    MESSAGE("skipped: nvcc not found (no cuda folder can be built here)");
    return;
  }
  // Before the runtime first loads a CUDA runtime library in this process (one per process).
  setenv("AICF_CUDART_LIBRARY", AICF_FAKE_CUDART, 1);
  fs::path out = compileFor("cuda:sm_90", "mlp_cuda");
  aicf_model *one = aicf_open_device(out.string().c_str(), 1);
  REQUIRE_MESSAGE(one, aicf_last_error());
  FakeLog fake;
  // Device 1 made current, then the one allocation and the weights' upload on it.
  CHECK(fake.take() == "set1 malloc@1 copy@1 ");
  aicf_model *zero = aicf_open(out.string().c_str()); // device 0: now the current one
  REQUIRE_MESSAGE(zero, aicf_last_error());
  CHECK(fake.take() == "set0 malloc@0 copy@0 ");
  aicf_close(one); // freed on its own device, though device 0 was current
  CHECK(fake.take() == "set1 free@1 ");
  aicf_close(zero);
  CHECK(fake.take() == "set0 free@0 ");

  CHECK(aicf_open_device(out.string().c_str(), 2) == nullptr);
  CHECK(std::string(aicf_last_error()) ==
        "CUDA device 2 requested; this machine has 2 (devices 0-1)");
  CHECK(aicf_open_device(out.string().c_str(), -1) == nullptr);
  CHECK(std::string(aicf_last_error()) ==
        "aicf_open_device: device -1 (devices are numbered from 0)");
  unsetenv("AICF_CUDART_LIBRARY");
}

TEST_CASE("device choice: a cpu plan takes device 0 only") {
  fs::path out = compileFor("cpu", "mlp_cpu");
  aicf_model *m = aicf_open_device(out.string().c_str(), 0);
  REQUIRE_MESSAGE(m, aicf_last_error());
  aicf_close(m);
  CHECK(aicf_open_device(out.string().c_str(), 1) == nullptr);
  CHECK(std::string(aicf_last_error()) ==
        out.string() + " is a cpu plan: it runs on the host, not on device 1");
}
