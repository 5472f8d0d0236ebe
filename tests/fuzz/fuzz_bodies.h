// The bodies of the libFuzzer harnesses (tests/fuzz/fuzz_*.cpp), shared with the replay test
// (tests/unit/test_fuzz_replay.cpp) so that every input saved under testdata/fuzz/ is checked by
// the normal g++ build and under build-asan, not only where clang is present.
//
// Each body feeds the bytes to one entry point the way a tool does and returns the outcome:
// "ok" when the input was accepted, else the UserError message the tool would print. Anything
// else (InternalError, std::exception, an unknown exception) is `internal`: a bug, which the
// libFuzzer entry turns into a crash. Temporary paths in messages are replaced by "<dir>".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace aicf::fuzz {

struct Outcome {
  bool internal = false;
  std::string message; // "ok", the user error, or the internal error's text
};

// The ONNX importer; for a model that imports, the graph pipeline and buildModel up to the
// kernel source (no g++), plus the weights packing.
Outcome onnx(const uint8_t *data, size_t size);

// The Graph IR parser and verifier (parseGraphs); a graph that parses is printed and parsed
// again, which must succeed.
Outcome ir(const uint8_t *data, size_t size);

// The .npy reader; an array that reads is written and read back, which must give the same
// array.
Outcome npy(const uint8_t *data, size_t size);

// The runtime's folder loader: the input is plan.yaml, then the line kWeightsSeparator, then
// weights.bin, written next to a fixed valid libmodel.so (compiled once per process from a
// small graph, kRuntimeModel). A folder that opens is run once on zero inputs and closed.
Outcome runtime(const uint8_t *data, size_t size);
inline constexpr const char *kWeightsSeparator = "\n#--weights.bin--\n";

// The valid input for `runtime`: the compiled folder's plan.yaml + separator + weights.bin.
std::string runtimeSeed();

// Harness name ("onnx", "ir", "npy", "runtime") -> body; null for an unknown name.
using Body = Outcome (*)(const uint8_t *, size_t);
Body bodyByName(const std::string &name);

// Seeds for `onnx` from every ONNX model under `testdata` (models, loops, bad models, ...),
// written to `dir` small enough to mutate: each initializer (and Constant node) of more than 256
// elements becomes a graph input of its type (the structure is what the fuzzer should mutate,
// not weight bytes; the transformer blocks shrink from 3 MB to a few KB), each named dynamic dim
// of an input becomes 2, nodes lose their names and docs, and values get short names where no
// subgraph reads them. A seed still over kOnnxSeedMaxBytes (scripts/fuzz.sh's max_len) is not
// written. Returns how many were written.
inline constexpr size_t kOnnxSeedMaxBytes = 80000;
int writeOnnxSeeds(const std::string &testdata, const std::string &dir);

// Sets AICF_HOST_HARDWARE to testdata/targets/ci-host.yaml when unset, so plans (and so the
// messages) do not depend on the machine; with AICF_FUZZ_RUNTIME_SEED=FILE, writes runtimeSeed()
// to FILE; with AICF_FUZZ_ONNX_SEEDS=DIR, writes writeOnnxSeeds(testdata, DIR).
void init(const std::string &testdata);

} // namespace aicf::fuzz
