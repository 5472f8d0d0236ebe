// Loads libcudart at run time (runtime/cudart.h): the aicf runtime must build and run cpu plans
// without the CUDA toolkit, so the CUDA backend reaches the runtime API through dlopen/dlsym
// instead of a link dependency, and reports a missing library as an ordinary error.
#include "runtime/cudart.h"

#include <dlfcn.h>

#include <cstdlib>

#include <mutex>

namespace aicf::rt {

std::string Cudart::describe(CudaError e) const {
  const char *name = getErrorName(e), *text = getErrorString(e);
  return std::string(name ? name : "cudaErrorUnknown") + " (" + (text ? text : "no description") +
         ")";
}

namespace {

struct Loaded {
  Cudart table{};
  bool ok = false;
  std::string error;
};

template <typename Fn>
bool resolve(void *lib, const char *name, Fn &fn, std::string &error) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!fn && error.empty())
    error = std::string("the CUDA runtime library lacks ") + name;
  return fn != nullptr;
}

Loaded load() {
  Loaded l;
  void *lib = nullptr;
  // AICF_CUDART_LIBRARY: one library by path instead of the search (an install outside the
  // loader's path; the tests' emulation).
  const char *given = std::getenv("AICF_CUDART_LIBRARY");
  if (given && *given) {
    if (!(lib = dlopen(given, RTLD_NOW | RTLD_LOCAL))) {
      l.error = std::string("AICF_CUDART_LIBRARY: cannot load ") + given;
      return l;
    }
  }
  for (const char *name : {"libcudart.so", "libcudart.so.13", "libcudart.so.12"})
    if (!lib && (lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)))
      break;
  if (!lib) {
    l.error = "no CUDA runtime library (libcudart.so) found";
    return l;
  }
  Cudart &t = l.table;
  std::string &e = l.error;
  resolve(lib, "cudaGetDeviceCount", t.getDeviceCount, e);
  resolve(lib, "cudaSetDevice", t.setDevice, e);
  resolve(lib, "cudaMalloc", t.malloc, e);
  resolve(lib, "cudaFree", t.free, e);
  resolve(lib, "cudaMemcpyAsync", t.memcpyAsync, e);
  resolve(lib, "cudaStreamCreate", t.streamCreate, e);
  resolve(lib, "cudaStreamDestroy", t.streamDestroy, e);
  resolve(lib, "cudaStreamSynchronize", t.streamSynchronize, e);
  resolve(lib, "cudaStreamBeginCapture", t.streamBeginCapture, e);
  resolve(lib, "cudaStreamEndCapture", t.streamEndCapture, e);
  resolve(lib, "cudaGraphInstantiate", t.graphInstantiate, e);
  resolve(lib, "cudaGraphLaunch", t.graphLaunch, e);
  resolve(lib, "cudaGraphDestroy", t.graphDestroy, e);
  resolve(lib, "cudaGraphExecDestroy", t.graphExecDestroy, e);
  resolve(lib, "cudaGetErrorName", t.getErrorName, e);
  resolve(lib, "cudaGetErrorString", t.getErrorString, e);
  l.ok = e.empty();
  return l; // the library stays loaded: kernels in libmodel.so share it
}

} // namespace

const Cudart *loadCudart(std::string *error) {
  static std::once_flag once;
  static Loaded loaded;
  std::call_once(once, [] { loaded = load(); });
  if (!loaded.ok && error)
    *error = loaded.error;
  return loaded.ok ? &loaded.table : nullptr;
}

} // namespace aicf::rt
