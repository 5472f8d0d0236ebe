// An emulated CUDA runtime library for the runtime's device-choice tests
// (tests/unit/test_device_choice.cpp): the entry points runtime/cudart.h resolves, over host
// memory, with FAKE_CUDA_DEVICES devices (default 2). Loaded through AICF_CUDART_LIBRARY. It
// records every cudaSetDevice and the device current at every cudaMalloc, cudaMemcpyAsync and
// cudaFree, which the tests read through fake_cudart_log(). Kernels cannot run here: graph
// capture and launch report cudaErrorNotSupported.
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

int current = 0;
std::string events;

int devices() {
  const char *env = std::getenv("FAKE_CUDA_DEVICES");
  return env && *env ? std::atoi(env) : 2;
}

void note(const std::string &what) {
  events += what + "@" + std::to_string(current) + " ";
}

constexpr int kInvalidDevice = 101, kNotSupported = 801;

} // namespace

extern "C" {

const char *fake_cudart_log() {
  return events.c_str();
}
void fake_cudart_clear() {
  events.clear();
}

int cudaGetDeviceCount(int *count) {
  *count = devices();
  return 0;
}
int cudaSetDevice(int device) {
  if (device < 0 || device >= devices())
    return kInvalidDevice;
  current = device;
  events += "set" + std::to_string(device) + " ";
  return 0;
}
int cudaMalloc(void **p, size_t bytes) {
  note("malloc");
  *p = std::malloc(bytes ? bytes : 1);
  return 0;
}
int cudaFree(void *p) {
  note("free");
  std::free(p);
  return 0;
}
int cudaMemcpyAsync(void *dst, const void *src, size_t bytes, int, void *) {
  note("copy");
  std::memcpy(dst, src, bytes);
  return 0;
}
int cudaStreamCreate(void **s) {
  static int stream;
  *s = &stream;
  return 0;
}
int cudaStreamDestroy(void *) {
  return 0;
}
int cudaStreamSynchronize(void *) {
  return 0;
}
int cudaStreamBeginCapture(void *, int) {
  return kNotSupported;
}
int cudaStreamEndCapture(void *, void **) {
  return kNotSupported;
}
int cudaGraphInstantiate(void **, void *, unsigned long long) {
  return kNotSupported;
}
int cudaGraphLaunch(void *, void *) {
  return kNotSupported;
}
int cudaGraphDestroy(void *) {
  return 0;
}
int cudaGraphExecDestroy(void *) {
  return 0;
}
const char *cudaGetErrorName(int e) {
  return e == kInvalidDevice  ? "cudaErrorInvalidDevice"
         : e == kNotSupported ? "cudaErrorNotSupported"
                              : "cudaErrorUnknown";
}
const char *cudaGetErrorString(int e) {
  return e == kInvalidDevice ? "invalid device ordinal" : "emulated";
}

} // extern "C"
