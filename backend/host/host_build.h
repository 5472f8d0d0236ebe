// Compiles generated host C++ into a shared object with the system C++ compiler and loads it
// (dlopen), so tests and the runtime can call kernels: c++ -O3 -fopenmp -fPIC -shared
// -march=<cpu-arch>. Errors (compiler failure, missing symbol) are UserErrors with the compiler's
// output.
#pragma once

#include "support/process.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace aicf {

struct HostBuildOptions {
  std::string cpuArch = "native"; // -march value
  std::string compiler = "c++";
  std::string extraFlags;
};

// The compiler and its flags for generated host C++, before the inputs and outputs: -O3, the
// -march, the vector width and the GCC-only parameters it needs, then `extraFlags`.
std::vector<std::string> hostCompileFlags(const HostBuildOptions &opts);

// Writes `source` to `cppPath` and compiles it to `soPath`. Returns the compiler's output. A
// generated source that declares parts (`#define AICF_PARTS P`, host_printer.cpp) is compiled
// as P translation units at once (-DAICF_PART=p, one thread per hardware thread) and linked.
std::string compileHostSource(const std::string &source, const std::string &cppPath,
                              const std::string &soPath, const HostBuildOptions &opts = {});

// The instruction-set extensions (runtime/isa_features.h names, in that order) that code compiled
// with `compiler -march=cpuArch` may use: those whose predefined macro the compiler sets for that
// -march (asked once per arch and compiler, `-dM -E`). Deterministic for a named -march; for
// "native" it describes this machine. UserError (exit 1) if the compiler rejects the -march.
const std::vector<std::string> &hostIsaFeatures(const std::string &cpuArch,
                                                const std::string &compiler = "c++");

// A loaded shared object whose symbols are host kernels (kernel ABI 2, host_printer.cpp):
// `void NAME(void *const *args, int64_t lo, int64_t hi)` runs blocks [lo, hi) of its grid, hi
// clamped to the grid's size.
class LoadedLibrary {
public:
  explicit LoadedLibrary(const std::string &soPath); // UserError if it cannot be loaded
  ~LoadedLibrary();
  LoadedLibrary(const LoadedLibrary &) = delete;
  LoadedLibrary &operator=(const LoadedLibrary &) = delete;
  // A kernel called on its whole grid, on the calling thread (the runtime's pool splits a step
  // into block ranges; tests and tools run kernels whole).
  struct KernelFn {
    void (*fn)(void *const *args, int64_t lo, int64_t hi) = nullptr;
    void operator()(void *const *args) const { fn(args, 0, INT64_MAX); }
  };
  KernelFn kernel(const std::string &name) const; // UserError if missing

private:
  void *handle_ = nullptr;
  std::string path_;
};

} // namespace aicf
