// The CUDA runtime API as the aicf runtime uses it, resolved from libcudart with dlopen at run
// time: the runtime links neither the toolkit nor the driver, so it builds and runs cpu plans on
// machines without CUDA and reports a missing library or device as an error, never a crash.
// Only the entry points the CUDA backend calls are listed; their C types are spelled here (as
// ints and opaque pointers, ABI-identical to cuda_runtime_api.h) so no CUDA header is needed.
#ifndef AICF_RUNTIME_CUDART_H
#define AICF_RUNTIME_CUDART_H

#include <cstddef>
#include <string>

namespace aicf::rt {

using CudaError = int;        // cudaError_t; 0 is cudaSuccess
using CudaStream = void *;    // cudaStream_t
using CudaGraph = void *;     // cudaGraph_t
using CudaGraphExec = void *; // cudaGraphExec_t

enum : int { kMemcpyHostToDevice = 1, kMemcpyDeviceToHost = 2, kMemcpyDeviceToDevice = 3 };
enum : int { kStreamCaptureModeRelaxed = 2 };

struct Cudart {
  CudaError (*getDeviceCount)(int *count);
  CudaError (*setDevice)(int device);
  CudaError (*malloc)(void **ptr, size_t bytes);
  CudaError (*free)(void *ptr);
  CudaError (*memcpyAsync)(void *dst, const void *src, size_t bytes, int kind, CudaStream s);
  CudaError (*streamCreate)(CudaStream *s);
  CudaError (*streamDestroy)(CudaStream s);
  CudaError (*streamSynchronize)(CudaStream s);
  CudaError (*streamBeginCapture)(CudaStream s, int mode);
  CudaError (*streamEndCapture)(CudaStream s, CudaGraph *graph);
  CudaError (*graphInstantiate)(CudaGraphExec *exec, CudaGraph graph, unsigned long long flags);
  CudaError (*graphLaunch)(CudaGraphExec exec, CudaStream s);
  CudaError (*graphDestroy)(CudaGraph graph);
  CudaError (*graphExecDestroy)(CudaGraphExec exec);
  const char *(*getErrorName)(CudaError e);
  const char *(*getErrorString)(CudaError e);

  // "cudaErrorX (description)" for e.
  std::string describe(CudaError e) const;
};

// The process-wide table, loaded on first use from libcudart.so, then libcudart.so.13, then
// libcudart.so.12 (kept loaded for the process's lifetime). Null when no library loads or one
// lacks an entry point; *error then says which.
const Cudart *loadCudart(std::string *error);

} // namespace aicf::rt

#endif // AICF_RUNTIME_CUDART_H
