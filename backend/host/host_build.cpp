// Building and loading generated host code (host_build.h): the source is written to a file,
// compiled by the system C++ compiler into a shared object (posix_spawnp, no shell, so paths
// and flags need no quoting; stdout and stderr captured through one pipe), and loaded with
// dlopen(RTLD_NOW | RTLD_LOCAL). Failures are UserErrors carrying the command and the
// compiler's or the loader's message.
#include "backend/host/host_build.h"

#include "runtime/isa_features.h"
#include "support/build_cache.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <exception>
#include <fcntl.h>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <spawn.h>
#include <sstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

extern char **environ;

namespace aicf {

namespace {

// The parts a generated source asks to be compiled in (host_printer.cpp: `#define AICF_PARTS P`
// near its top); 1 for any other source.
int sourceParts(const std::string &source) {
  const std::string key = "\n#define AICF_PARTS ";
  size_t at = source.find(key);
  if (at == std::string::npos || at > 4096)
    return 1;
  int p = std::atoi(source.c_str() + at + key.size());
  return std::clamp(p, 1, 64);
}

// The macros `compiler -march=cpuArch` predefines (`-dM -E`), asked once per arch and compiler:
// the ISA extensions it may use and which compiler it is. UserError (exit 1) if the compiler
// rejects the -march.
const std::set<std::string> &predefinedMacros(const std::string &cpuArch,
                                              const std::string &compiler) {
  static std::mutex mu;
  static std::map<std::pair<std::string, std::string>, std::set<std::string>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_pair(cpuArch, compiler);
  if (auto it = cache.find(key); it != cache.end())
    return it->second;
  std::vector<std::string> argv = {compiler, "-march=" + cpuArch, "-dM", "-E", "-x",
                                   "c++",    "/dev/null"};
  std::string output;
  if (runCapture(argv, output) != 0)
    throw UserError(cat("--cpu-arch ", cpuArch, ": ", compiler, " does not accept -march=", cpuArch,
                        "\n", output),
                    1);
  std::set<std::string> macros; // "#define __AVX2__ 1" -> __AVX2__
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string define, name;
    if (words >> define >> name && define == "#define")
      macros.insert(name);
  }
  return cache.emplace(key, std::move(macros)).first->second;
}

// Compiles the source at cppPath with `argv` (hostCompileFlags) into the library soPath: in
// one command, or as `parts` objects built in parallel and linked.
std::string compileLibrary(std::vector<std::string> argv, const std::string &cppPath,
                           const std::string &soPath, int parts, const HostBuildOptions &opts) {
  if (parts <= 1) {
    argv.insert(argv.end(), {"-shared", "-o", soPath, cppPath});
    return runOrThrow(argv, "host compile");
  }
  // A parallel build: each part (-DAICF_PART=p) to an object file beside the library, as many
  // at once as the machine has hardware threads, then one link in part order (so the library's
  // bytes do not depend on which part finished first). The objects are removed either way.
  std::vector<std::string> objs, outputs(static_cast<size_t>(parts));
  for (int p = 0; p < parts; ++p)
    objs.push_back(cat(soPath, ".part", p, ".o"));
  struct RemoveObjects {
    const std::vector<std::string> &objs;
    ~RemoveObjects() {
      for (const std::string &o : objs)
        std::remove(o.c_str());
    }
  } removeObjects{objs};
  std::vector<std::exception_ptr> errors(static_cast<size_t>(parts));
  std::atomic<int> next{0};
  auto worker = [&] {
    for (int p; (p = next++) < parts;) {
      std::vector<std::string> a = argv;
      a.insert(a.end(), {"-c", cat("-DAICF_PART=", p), "-o", objs[size_t(p)], cppPath});
      try {
        outputs[size_t(p)] = runOrThrow(a, cat("host compile (part ", p, " of ", parts, ")"));
      } catch (...) {
        errors[size_t(p)] = std::current_exception();
      }
    }
  };
  int jobs = std::clamp(int(std::thread::hardware_concurrency()), 1, parts);
  std::vector<std::thread> threads;
  for (int j = 1; j < jobs; ++j)
    threads.emplace_back(worker);
  worker();
  for (std::thread &t : threads)
    t.join();
  for (const std::exception_ptr &e : errors)
    if (e)
      std::rethrow_exception(e);
  std::vector<std::string> link = {opts.compiler, "-shared"};
  std::istringstream linkExtra(opts.extraFlags);
  for (std::string flag; linkExtra >> flag;)
    link.push_back(flag);
  link.insert(link.end(), {"-o", soPath});
  link.insert(link.end(), objs.begin(), objs.end());
  std::string all;
  for (const std::string &o : outputs)
    all += o;
  return all + runOrThrow(link, "host link");
}

} // namespace

std::vector<std::string> hostCompileFlags(const HostBuildOptions &opts) {
  // -fopenmp-simd: the `omp simd` loop pragmas only; the kernels own no threads (the runtime's
  // pool runs them), so libmodel.so needs no OpenMP runtime. -fno-trapping-math: the kernels
  // never read the floating-point exception flags, and with them g++ may not if-convert a
  // float comparison (it could raise "invalid" on a NaN), so no loop with a NaN-aware min / max,
  // a clip or a select on floats was vectorised. Values are unchanged (not -ffast-math: no
  // reassociation, NaN and signed zeros kept).
  std::vector<std::string> argv = {opts.compiler,           "-std=c++17",         "-O3",
                                   "-fopenmp-simd",         "-fno-trapping-math", "-fPIC",
                                   "-march=" + opts.cpuArch};
  // On AVX-512 parts the vectorised loops use 512-bit registers, like the micro-kernel (GCC's
  // default for Intel's is 256 bits): the epilogues' exp / erf loops run 16 lanes at a time
  // (ViT's block ~3-5% faster at one thread on this project's Xeon).
  const std::vector<std::string> &isa = hostIsaFeatures(opts.cpuArch, opts.compiler);
  if (std::find(isa.begin(), isa.end(), "avx512f") != isa.end())
    argv.push_back("-mprefer-vector-width=512");
  // GCC leaves a loop with more than 250 address uses (iv-max-considered-uses) out of its
  // induction-variable optimisation: the vectoriser's pointer per memory reference then stays a
  // variable of its own, and a depthwise step of 8 pixels x 81 taps (a 9 x 9 window) or 49 (7 x 7)
  // kept ~700 of them, spilled and reloaded around every FMA (2x the step's time on a Zen 3 core,
  // bench/models_wide/large_kernel_dw's 9 x 9 conv). Every generated loop fits the raised bound.
  const std::set<std::string> &macros = predefinedMacros(opts.cpuArch, opts.compiler);
  if (macros.count("__GNUC__") && !macros.count("__clang__"))
    argv.push_back("--param=iv-max-considered-uses=4000");
  std::istringstream extra(opts.extraFlags);
  for (std::string flag; extra >> flag;)
    argv.push_back(flag);
  return argv;
}

std::string compileHostSource(const std::string &source, const std::string &cppPath,
                              const std::string &soPath, const HostBuildOptions &opts) {
  {
    std::ofstream f(cppPath, std::ios::binary | std::ios::trunc);
    if (!f)
      throw UserError(cat(cppPath, ": cannot open for writing"));
    f << source;
    f.close();
    if (!f)
      throw UserError(cat(cppPath, ": write failed"));
  }
  std::vector<std::string> argv = hostCompileFlags(opts);
  // The same source and command line give the same library: reused from AICF_BUILD_CACHE.
  return cachedBuild(argv, source, soPath, [&] {
    return compileLibrary(argv, cppPath, soPath, sourceParts(source), opts);
  });
}

const std::vector<std::string> &hostIsaFeatures(const std::string &cpuArch,
                                                const std::string &compiler) {
  static std::mutex mu;
  static std::map<std::pair<std::string, std::string>, std::vector<std::string>> cache;
  const std::set<std::string> &macros = predefinedMacros(cpuArch, compiler);
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_pair(cpuArch, compiler);
  if (auto it = cache.find(key); it != cache.end())
    return it->second;
  std::vector<std::string> isa;
#define AICF_ISA_IF_DEFINED(name, macro, ...)                                                      \
  if (macros.count(macro))                                                                         \
    isa.push_back(name);
  AICF_ISA_FEATURES(AICF_ISA_IF_DEFINED)
#undef AICF_ISA_IF_DEFINED
  return cache.emplace(key, std::move(isa)).first->second;
}

LoadedLibrary::LoadedLibrary(const std::string &soPath) : path_(soPath) {
  handle_ = dlopen(soPath.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle_) {
    const char *msg = dlerror();
    throw UserError(cat("cannot load ", soPath, ": ", msg ? msg : "unknown error"));
  }
}

LoadedLibrary::~LoadedLibrary() {
  if (handle_)
    dlclose(handle_);
}

LoadedLibrary::KernelFn LoadedLibrary::kernel(const std::string &name) const {
  dlerror(); // clear any stale error
  void *sym = dlsym(handle_, name.c_str());
  if (!sym) {
    const char *msg = dlerror();
    throw UserError(cat(path_, ": no kernel symbol ", name, msg ? std::string(": ") + msg : ""));
  }
  return KernelFn{reinterpret_cast<void (*)(void *const *, int64_t, int64_t)>(sym)};
}

} // namespace aicf
