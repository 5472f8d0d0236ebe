// The runtime's per-model CUDA state (runtime/runtime.cpp's CUDA backend): the device, its one
// allocation, the stream and the CUDA Graphs captured, released on the model's own device.
#pragma once

#include "runtime/cudart.h"

#include <cstdint>
#include <map>
#include <vector>

namespace aicf::rt {

// The CUDA backend's state: one device allocation [weights | arena | input and output staging],
// a stream, and the CUDA Graph captured for one set of buffer pointers.
struct CudaState {
  const Cudart *rt = nullptr;
  int device = 0; // aicf_open_device's index: made current before every call that needs it
  char *base = nullptr;
  CudaStream stream = nullptr;
  std::vector<int64_t> stagingOffset; // per buffer (inputs and outputs), else -1
  bool useGraph = true;
  CudaGraph graph = nullptr;
  CudaGraphExec exec = nullptr;
  std::vector<void *> graphPtrs; // the buffer pointers the graph was captured with
  // Symbolic dims: the graph above is for graphDims; graphs of other shapes captured with the
  // same pointers are kept here (at most kShapeGraphs), so alternating shapes replay too.
  std::vector<int64_t> graphDims;
  struct Captured {
    CudaGraph graph = nullptr;
    CudaGraphExec exec = nullptr;
  };
  std::map<std::vector<int64_t>, Captured> shapeGraphs;
  static constexpr size_t kShapeGraphs = 16;

  void dropGraph() {
    if (exec)
      rt->graphExecDestroy(exec);
    if (graph)
      rt->graphDestroy(graph);
    for (auto &[dims, c] : shapeGraphs) {
      rt->graphExecDestroy(c.exec);
      rt->graphDestroy(c.graph);
    }
    shapeGraphs.clear();
    exec = nullptr;
    graph = nullptr;
    graphPtrs.clear();
    graphDims.clear();
  }
  ~CudaState() {
    if (!rt)
      return;
    rt->setDevice(device);
    if (stream)
      rt->streamSynchronize(stream);
    dropGraph();
    if (base)
      rt->free(base);
    if (stream)
      rt->streamDestroy(stream);
  }
};

} // namespace aicf::rt
