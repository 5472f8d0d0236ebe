// The aicf runtime (runtime/aicf_runtime.h): loads plan.yaml, weights.bin and libmodel.so,
// validates every fact the kernels rely on, then runs the steps in plan order over one arena.
// Two backends share the loader and validation: cpu plans call the kernels directly on host
// memory; cuda plans (target.kind: cuda) reach libcudart through runtime/cudart.h, keep weights,
// arena and input/output staging in one device allocation, launch the steps through the
// aicf_launch_<kind_id> launchers on a stream, and replay them as a CUDA Graph after the first run.
#include "runtime/aicf_runtime.h"
#include "runtime/cpu_features.h"
#include "runtime/cuda_state.h"
#include "runtime/cudart.h"
#include "runtime/host_memory.h"
#include "runtime/plan_read.h"
#include "runtime/thread_pool.h"
#include "support/buffer_kind.h"
#include "support/plan_schema.h"
#include "support/plan_yaml.h"
#include "support/sym_expr.h"

#include <yaml-cpp/yaml.h>

#include <dlfcn.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <string>
#include <sys/mman.h>
#include <thread>
#include <vector>

namespace {

thread_local std::string lastError;

using aicf::rt::cat;
using aicf::rt::CudaState;
using aicf::rt::Error;
using aicf::rt::MachineError;

struct Buffer {
  std::string id, value, dtype;
  aicf::BufferKind kind = aicf::BufferKind::Arena;
  std::vector<int64_t> shape;     // a symbolic buffer: its current shape (set per run)
  std::vector<aicf::SymExpr> sym; // symbolic dims (plan.yaml shape entries that are text)
  int64_t bytes = 0, offset = 0;  // a symbolic buffer: bytes at the dims' maxima (reserved)
  int64_t curBytes = 0;           // the bytes the current shape holds (= bytes when static)
  std::string aliasOf;
  int index = -1;
  int storage = -1; // buffer whose memory this one uses (itself unless an alias)
};

// Host kernel ABI 2 (aicf_host_abi): the blocks [lo, hi) of the kernel's flattened grid.
using KernelFn = void (*)(void *const *, int64_t, int64_t);
using LaunchFn = int (*)(void *const *, aicf::rt::CudaStream); // returns a cudaError_t

struct Step {
  std::string kind, symbol;
  KernelFn fn = nullptr; // cpu plans
  int64_t blocks = 1;    // cpu plans: the grid's blocks (launch.grid)
  int64_t chunks = 1;    // cpu plans: how many pieces the thread pool runs them in
  // Symbolic dims: the kernel reads their values (one more argument), and a symbolic grid's
  // extents; blocks and chunks are then set per run, chunks keeping the planned blocks per
  // chunk (chunkBlocks).
  bool dims = false;
  std::vector<aicf::SymExtent> symGrid;
  int64_t chunkBlocks = 1;
  int group = -1;            // cpu plans: launch.group, the first step of its dispatch group
  size_t groupEnd = 0;       // on a group's first step: one past its last step
  LaunchFn launch = nullptr; // cuda plans; neither for a built-in copy step
  std::vector<int> args;     // buffer indices: inputs then outputs
  size_t numInputs = 0;
  int guard = -1; // cpu plans: runs only when this one-byte bool buffer is guardWhen
  bool guardWhen = true;
  // A loop step (cpu plans, plan.yaml `loop`): the next bodySteps steps are its body, run once
  // per iteration; state: the body's iteration number, condition and carried values (written
  // here), next: its outputs (the next condition and carried values). -1: no loop step.
  int64_t bodySteps = -1;
  std::vector<int> state, next;
  // A fail step (cpu plans, plan.yaml `fail`; always guarded): running it fails the run with
  // this message (a branch of an If that cannot run at the shapes the plan was compiled for).
  bool fails = false;
  std::string failMessage;
  // The data dims this step sets (indices into aicf_model::dims): read from their set_by
  // buffers once it has run.
  std::vector<size_t> setsDims;
};

} // namespace

struct aicf_model {
  std::string dir;
  int device = 0;    // aicf_open_device: the CUDA device a cuda plan runs on
  bool cuda = false; // target.kind: cuda
  // Symbolic dims (plan.yaml `dims`): their ranges, current values (derived from the input
  // shapes set with aicf_set_input_shape; the opt values until then) and the shapes set.
  std::vector<aicf::DimRange> dims;
  std::vector<int64_t> dimValues;
  // Per dim: the buffer a data dim (plan.yaml set_by, a length known only at run time) is read
  // from after the step writing it, else -1. Each run starts with them at their bounds.
  std::vector<int> dimSetBy;
  std::vector<std::string> dimSetByIds;          // as plan.yaml names them ("" for an input's dim)
  std::vector<std::vector<int64_t>> inputShapes; // per input: the shape of the next run
  bool shapesApplied = true;                     // buffers and steps reflect inputShapes
  std::unique_ptr<CudaState> dev;
  std::vector<Buffer> buffers;
  std::vector<Step> steps;
  std::vector<int> inputs, outputs; // buffer index per io position
  std::unique_ptr<aicf::rt::WeightsImage> weights;
  std::unique_ptr<aicf::rt::Aligned> arena;
  int64_t weightsBytes = 0, arenaBytes = 0;
  void *so = nullptr;
  // cpu plans: the thread count (aicf_set_num_threads; default: the hardware threads) and the
  // pool, made on the first run after the count is set.
  int threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  bool pinThreads = false;     // aicf_set_thread_affinity
  bool adaptiveThreads = true; // aicf_set_adaptive_threads
  std::unique_ptr<aicf::rt::ThreadPool> pool;
  std::vector<void *> ptrs; // per buffer, filled per run
  ~aicf_model() {
    pool.reset(); // the workers stop before the kernels' library goes
    dev.reset();  // device memory and graphs go before the kernels' library
    if (so)
      dlclose(so);
  }
};

namespace {

namespace pk = aicf::plan_key; // plan.yaml's keys (support/plan_schema.def)

// plan.yaml is read through runtime/plan_read.h's range-checked accessors.
using aicf::rt::dtypeBytes;
using aicf::rt::inside;
using aicf::rt::kInt64Max;
using aicf::rt::kMaxDim;
using aicf::rt::kMaxIoIndex;
using aicf::rt::need;
using aicf::rt::needSequence;
using aicf::rt::readInt;
using aicf::rt::readShape;
using aicf::rt::readString;
using aicf::rt::shapeText;
using aicf::rt::toInt;

// target.isa: the extensions the host code of libmodel.so may use (aicfc derives them from its
// -march). Checked before libmodel.so is loaded, since even its initialisers may use them. A
// plan without the key (written before aicfc recorded it) is accepted unchecked.
void checkIsa(const YAML::Node &target, const std::string &dir) {
  if (!target || !target.IsMap() || !target[pk::target::isa])
    return;
  YAML::Node isa = needSequence(target[pk::target::isa], "target.isa");
  std::string missing;
  for (const YAML::Node &n : isa) {
    if (!n.IsScalar())
      throw Error("target.isa must be a list of names");
    const std::string &name = n.Scalar();
    if (!aicf::rt::knownIsa(name))
      throw Error(cat("target.isa: unknown instruction-set extension '", name, "'"));
    if (!aicf::rt::cpuHas(name))
      missing += (missing.empty() ? "" : ", ") + name;
  }
  if (missing.empty())
    return;
  std::string arch = target[pk::target::cpu_arch] && target[pk::target::cpu_arch].IsScalar()
                         ? target[pk::target::cpu_arch].Scalar()
                         : std::string("?");
  throw MachineError(cat("folder ", dir, " needs ", missing,
                         ", which this CPU lacks (compiled with --cpu-arch ", arch,
                         "; recompile it with a --cpu-arch this CPU supports, e.g. x86-64-v2)"));
}

int64_t align64(int64_t n) {
  return (n + 63) / 64 * 64;
}

// Throws what for a failed CUDA call.
void check(const aicf::rt::Cudart &rt, aicf::rt::CudaError e, const char *what) {
  if (e != 0)
    throw Error(cat(what, ": ", rt.describe(e)));
}

// Picks the model's device, allocates [weights | arena | staging] with one cudaMalloc and uploads
// the weights once; the host copy of weights.bin is dropped afterwards.
void openDevice(aicf_model &m) {
  CudaState &d = *m.dev;
  const aicf::rt::Cudart &rt = *d.rt;
  int count = 0;
  aicf::rt::CudaError e = rt.getDeviceCount(&count);
  if (e != 0)
    throw MachineError(cat("no CUDA device available (", rt.getErrorName(e), ")"));
  if (count < 1)
    throw MachineError("no CUDA device available (0 devices)");
  if (m.device >= count)
    throw MachineError(cat("CUDA device ", m.device, " requested; this machine has ", count,
                           count == 1 ? " (device 0)" : cat(" (devices 0-", count - 1, ")")));
  d.device = m.device;
  check(rt, rt.setDevice(d.device), cat("cudaSetDevice(", d.device, ")").c_str());
  check(rt, rt.streamCreate(&d.stream), "cudaStreamCreate");
  // [weights | arena | staging], each part 64-byte aligned; sizes come from plan.yaml, so the sum
  // is overflow-checked.
  int64_t total = 0;
  auto append = [&](int64_t bytes) {
    int64_t at = total;
    if (__builtin_add_overflow(bytes, int64_t(63), &bytes) ||
        __builtin_add_overflow(total, bytes / 64 * 64, &total))
      throw Error("the plan's device memory size overflows");
    return at;
  };
  append(m.weightsBytes);
  append(m.arenaBytes);
  d.stagingOffset.assign(m.buffers.size(), -1);
  for (const std::vector<int> *list : {&m.inputs, &m.outputs})
    for (int b : *list)
      d.stagingOffset[b] = append(m.buffers[b].bytes);
  void *base = nullptr;
  e = rt.malloc(&base, static_cast<size_t>(std::max<int64_t>(total, 64)));
  if (e != 0)
    throw MachineError(cat("cannot allocate ", total, " bytes of device memory: ", rt.describe(e)));
  d.base = static_cast<char *>(base);
  if (m.weightsBytes > 0) {
    check(rt,
          rt.memcpyAsync(d.base, m.weights->data(), static_cast<size_t>(m.weightsBytes),
                         aicf::rt::kMemcpyHostToDevice, d.stream),
          "uploading weights.bin");
    check(rt, rt.streamSynchronize(d.stream), "uploading weights.bin");
  }
  m.weights.reset();
}

// Dispatch groups (launch.group, plan/dispatch_groups.h): consecutive kernel steps, each
// naming the group's first step, that share no memory one writes (their chunks run together,
// in any order, with no join between them). Sets groupEnd on each group's first step.
void checkGroups(aicf_model &m) {
  // Whether steps a and b touch common memory that one of them writes.
  auto conflict = [&](const Step &a, const Step &b) {
    auto overlaps = [&](int x, int y) {
      const Buffer &p = m.buffers[m.buffers[x].storage], &q = m.buffers[m.buffers[y].storage];
      if (p.kind == aicf::BufferKind::Weight || q.kind == aicf::BufferKind::Weight)
        return false; // read-only
      if (p.kind == aicf::BufferKind::Arena && q.kind == aicf::BufferKind::Arena)
        return p.offset < q.offset + q.bytes && q.offset < p.offset + p.bytes;
      return &p == &q;
    };
    for (const auto &[w, o] : {std::pair{&a, &b}, std::pair{&b, &a}})
      for (size_t i = w->numInputs; i < w->args.size(); ++i)
        for (int other : o->args)
          if (overlaps(w->args[i], other))
            return true;
    return false;
  };
  for (size_t i = 0; i < m.steps.size(); ++i) {
    Step &st = m.steps[i];
    if (st.group < 0)
      continue;
    std::string what = "step " + st.symbol;
    if (st.guard >= 0)
      throw Error(cat(what, ": a guarded step cannot be part of a dispatch group"));
    size_t first = static_cast<size_t>(st.group);
    if (first > i || m.steps[first].group != st.group ||
        (i > first && m.steps[i - 1].group != st.group))
      throw Error(cat(what, ": launch.group ", st.group,
                      " does not name the first of consecutive steps of its group"));
    for (size_t j = first; j < i; ++j)
      if (conflict(m.steps[j], st))
        throw Error(cat(what, ": launch.group ", st.group, ": it shares memory with step ",
                        m.steps[j].symbol, " of its group, which one of them writes"));
    m.steps[first].groupEnd = i + 1;
  }
  for (const Step &st : m.steps)
    if (st.group >= 0 && m.steps[size_t(st.group)].groupEnd == size_t(st.group) + 1)
      throw Error(cat("step ", st.symbol, ": launch.group ", st.group, " has one step"));
}

// Loop steps: the body lies inside the steps (and inside any enclosing body), no dispatch group
// crosses its ends, and the buffers the runtime copies between have matching sizes: operands
// (trip count, condition, initial carried values, outer values), state (iteration number,
// condition, carried values), next (condition, carried values) and results (carried values).
void checkLoops(aicf_model &m) {
  std::vector<size_t> ends = {m.steps.size()}; // the enclosing bodies' ends
  for (size_t i = 0; i < m.steps.size(); ++i) {
    while (i >= ends.back())
      ends.pop_back();
    const Step &st = m.steps[i];
    if (st.bodySteps < 0)
      continue;
    std::string what = cat("loop step ", i);
    if (st.bodySteps > static_cast<int64_t>(ends.back() - i - 1))
      throw Error(cat(what, ": its ", st.bodySteps, " body steps run past ",
                      ends.size() > 1 ? "the enclosing loop's body" : "the last step"));
    size_t end = i + 1 + static_cast<size_t>(st.bodySteps);
    for (size_t j = i + 1; j < end; ++j) {
      const Step &b = m.steps[j];
      if (b.group >= 0 && (static_cast<size_t>(b.group) <= i || m.steps[b.group].groupEnd > end))
        throw Error(cat(what, ": a dispatch group crosses the end of its body"));
    }
    size_t carried = st.args.size() - st.numInputs;
    if (st.numInputs < 2 + carried || st.state.size() != 2 + carried ||
        st.next.size() != 1 + carried)
      throw Error(cat(what, ": ", st.numInputs, " inputs, ", carried, " outputs, ", st.state.size(),
                      " state and ", st.next.size(), " next buffers do not fit together"));
    auto bytes = [&](int b) { return m.buffers[b].bytes; };
    auto dtype = [&](int b) { return m.buffers[b].dtype; };
    if (dtype(st.args[0]) != "i64" || bytes(st.args[0]) != 8 || dtype(st.state[0]) != "i64" ||
        bytes(st.state[0]) != 8)
      throw Error(cat(what, ": the trip count and iteration number are not one i64"));
    for (int b : {st.args[1], st.state[1], st.next[0]})
      if (dtype(b) != "bool" || bytes(b) != 1)
        throw Error(cat(what, ": a condition buffer is not one bool"));
    for (size_t j = 0; j < carried; ++j) {
      int64_t n = bytes(st.args[2 + j]);
      if (bytes(st.state[2 + j]) != n || bytes(st.next[1 + j]) != n ||
          bytes(st.args[st.numInputs + j]) != n)
        throw Error(cat(what, ": carried value ", j, " has buffers of different sizes"));
    }
    for (int b : st.state)
      if (m.buffers[m.buffers[b].storage].kind != aicf::BufferKind::Arena)
        throw Error(cat(what, ": state buffer ", m.buffers[b].id, " is not in the arena"));
    ends.push_back(end);
  }
}

// --- Symbolic dims ------------------------------------------------------------------------------
// A plan compiled for ranges of dims (aicfc --dim NAME=MIN..MAX@OPT) runs any shapes in them:
// the caller sets each input's shape (aicf_set_input_shape), the dims are derived from the
// inputs' plain symbolic dims and checked against their ranges and against every other dim of
// every input, and only then do the buffers' shapes, the copies' sizes and the kernels' grids
// follow. The memory was reserved at open for the dims' maxima, so no run allocates.

std::map<std::string, int64_t> dimMap(const aicf_model &m, const std::vector<int64_t> &values) {
  std::map<std::string, int64_t> d;
  for (size_t i = 0; i < m.dims.size(); ++i)
    d[m.dims[i].name] = values[i];
  return d;
}

std::string shapeOf(const Buffer &b) {
  if (b.sym.empty())
    return shapeText(b.shape);
  std::string s = "[";
  for (size_t i = 0; i < b.sym.size(); ++i)
    s += (i ? ", " : "") + b.sym[i].str();
  return s + "]";
}

// The dims the inputs' shapes give; throws an Error naming the input and dim on any conflict.
std::vector<int64_t> deriveDims(const aicf_model &m) {
  std::vector<int64_t> values(m.dims.size(), -1);
  std::vector<std::string> from(m.dims.size());
  auto index = [&](const std::string &name) {
    for (size_t i = 0; i < m.dims.size(); ++i)
      if (m.dims[i].name == name)
        return i;
    return m.dims.size();
  };
  for (size_t k = 0; k < m.inputs.size(); ++k) {
    const Buffer &b = m.buffers[m.inputs[k]];
    const std::vector<int64_t> &shape = m.inputShapes[k];
    for (size_t d = 0; d < b.sym.size(); ++d) {
      auto name = b.sym[d].asSymbol();
      if (!name)
        continue;
      size_t i = index(*name);
      if (m.dimSetBy[i] >= 0)
        throw Error(
            cat("input ", b.value, " dim ", d, " is data dim ", *name, ", which a step sets"));
      const aicf::DimRange &r = m.dims[i];
      std::string where = cat("input ", b.value, " dim ", d, " (", r.name, ")");
      if (shape[d] < r.min || shape[d] > r.max)
        throw Error(cat(where, " is ", shape[d], ", outside ", r.name, "'s range ", r.min, "..",
                        r.max, " (the folder was compiled for it)"));
      if (values[i] >= 0 && values[i] != shape[d])
        throw Error(
            cat(where, " is ", shape[d], ", but ", from[i], " makes ", r.name, " ", values[i]));
      values[i] = shape[d];
      from[i] = cat("input ", m.buffers[m.inputs[k]].value, " dim ", d);
    }
  }
  for (size_t i = 0; i < m.dims.size(); ++i) {
    if (m.dimSetBy[i] >= 0) // a data dim: at its bound until the step setting it runs
      values[i] = m.dims[i].max;
    else if (values[i] < 0)
      throw Error(cat("dim ", m.dims[i].name, " is no input's dim: it cannot be derived"));
  }
  auto dims = dimMap(m, values);
  for (size_t k = 0; k < m.inputs.size(); ++k) {
    const Buffer &b = m.buffers[m.inputs[k]];
    for (size_t d = 0; d < b.sym.size(); ++d) {
      auto want = b.sym[d].eval(dims);
      if (!want || *want != m.inputShapes[k][d])
        throw Error(cat("input ", b.value, " has shape ", shapeText(m.inputShapes[k]), ", but ",
                        shapeOf(b), " with the dims it gives is ",
                        want ? std::to_string(*want) : std::string("undefined"), " in dim ", d));
    }
  }
  return values;
}

// Buffers' shapes and the steps' grids for dim values `values`.
void resize(aicf_model &m, const std::vector<int64_t> &values) {
  auto dims = dimMap(m, values);
  for (Buffer &b : m.buffers) {
    if (b.sym.empty())
      continue;
    int64_t n = dtypeBytes(b.dtype);
    for (size_t d = 0; d < b.sym.size(); ++d) {
      auto v = b.sym[d].eval(dims);
      if (!v || *v < 0)
        throw Error(cat("buffer ", b.id, " dim ", d, " (", b.sym[d].str(), ") is undefined"));
      b.shape[d] = *v;
      n *= *v; // within bytes, the size at the maxima (monotone, checked at open)
    }
    b.curBytes = n;
    if (b.curBytes > b.bytes)
      throw Error(
          cat("buffer ", b.id, " needs ", b.curBytes, " bytes, above the ", b.bytes, " reserved"));
  }
  for (Step &st : m.steps) {
    if (st.symGrid.empty())
      continue;
    st.blocks = 1;
    for (const aicf::SymExtent &e : st.symGrid)
      st.blocks *= std::max<int64_t>(*e.eval(dims), 0);
    st.chunks = std::clamp<int64_t>(
        (st.blocks + st.chunkBlocks - 1) / st.chunkBlocks, 1,
        std::max<int64_t>(1, std::min<int64_t>(st.blocks, aicf::rt::ThreadPool::kMaxChunks)));
  }
  m.dimValues = values;
}

// Buffers, copies and grids for the current input shapes (deriveDims first), with the data
// dims at their bounds.
void applyShapes(aicf_model &m) {
  if (m.shapesApplied)
    return;
  resize(m, deriveDims(m));
  m.shapesApplied = true;
}

// A run starts with the data dims at their bounds (a previous run left its lengths).
void resetDataDims(aicf_model &m) {
  std::vector<int64_t> values = m.dimValues;
  bool changed = false;
  for (size_t i = 0; i < m.dims.size(); ++i)
    if (m.dimSetBy[i] >= 0 && values[i] != m.dims[i].max) {
      values[i] = m.dims[i].max;
      changed = true;
    }
  if (changed)
    resize(m, values);
}

// After step st: the data dims it sets, from their buffers, each checked against its bound (a
// larger count would have the later steps read and write past the memory reserved), and the
// buffers and grids that follow from them.
void setDataDims(aicf_model &m, const Step &st) {
  std::vector<int64_t> values = m.dimValues;
  for (size_t i : st.setsDims) {
    int64_t v = 0;
    std::memcpy(&v, m.ptrs[m.dimSetBy[i]], sizeof v);
    const aicf::DimRange &d = m.dims[i];
    if (v < 0)
      throw Error(cat("step ", st.symbol, ": length ", d.name, " is ", v, ", negative"));
    if (v > d.max)
      throw Error(cat("step ", st.symbol, ": length ", d.name, " is ", v, ", above its bound ",
                      d.max, " (the folder reserved memory for ", d.max,
                      "; compile with aicfc --max ", d.name, "=N for a larger bound, up to what ",
                      "the model allows)"));
    values[i] = v;
  }
  resize(m, values);
}

// At open: every input's shape at the opt point, each dim derivable from the inputs, and no
// runtime loop over symbolic buffers (its state copies are sized for one shape).
void initShapes(aicf_model &m) {
  m.inputShapes.clear();
  auto opt = dimMap(m, m.dimValues);
  for (int i : m.inputs) {
    const Buffer &b = m.buffers[i];
    std::vector<int64_t> shape = b.shape;
    for (size_t d = 0; d < b.sym.size(); ++d)
      shape[d] = *b.sym[d].eval(opt);
    m.inputShapes.push_back(shape);
  }
  if (m.dims.empty())
    return;
  for (const Step &st : m.steps)
    if (st.bodySteps >= 0)
      for (const std::vector<int> *list : {&st.args, &st.state, &st.next})
        for (int b : *list)
          if (!m.buffers[b].sym.empty())
            throw Error(cat("a runtime loop over buffer ", m.buffers[b].id, ", which has symbolic ",
                            "dims (its copies are sized for one shape)"));
  for (Step &st : m.steps)
    if (st.fn && !st.dims)
      for (int a : st.args)
        if (!m.buffers[a].sym.empty())
          throw Error(cat("step ", st.symbol, " reads symbolic buffer ", m.buffers[a].id,
                          " but not the dims"));
  m.shapesApplied = false;
  applyShapes(m);
}

// Data dims (plan.yaml dims with set_by): each read from an i64 scalar buffer that exactly one
// step writes, outside any loop body and any dispatch group; no step before it touches a buffer
// sized by the dim (it would run at a length not yet known).
void checkDataDims(aicf_model &m, const std::map<std::string, int> &byId) {
  m.dimSetBy.assign(m.dims.size(), -1);
  std::vector<std::pair<size_t, size_t>> bodies; // the loop bodies' [start, end)
  for (size_t s = 0; s < m.steps.size(); ++s)
    if (m.steps[s].bodySteps >= 0)
      bodies.emplace_back(s + 1, s + 1 + static_cast<size_t>(m.steps[s].bodySteps));
  for (size_t i = 0; i < m.dims.size(); ++i) {
    const aicf::DimRange &d = m.dims[i];
    if (m.dimSetByIds[i].empty())
      continue;
    std::string what = "dim " + d.name;
    auto it = byId.find(m.dimSetByIds[i]);
    if (it == byId.end())
      throw Error(cat(what, ": set_by names unknown buffer ", m.dimSetByIds[i]));
    const Buffer &b = m.buffers[it->second];
    if (b.dtype != "i64" || b.bytes != 8 || !b.sym.empty() || b.kind == aicf::BufferKind::Input ||
        b.kind == aicf::BufferKind::Weight)
      throw Error(cat(what, ": set_by buffer ", b.id, " is not an i64 scalar a step writes"));
    m.dimSetBy[i] = it->second;
    size_t writer = m.steps.size();
    for (size_t s = 0; s < m.steps.size(); ++s)
      for (size_t a = m.steps[s].numInputs; a < m.steps[s].args.size(); ++a)
        if (m.buffers[m.steps[s].args[a]].storage == b.storage) {
          if (writer != m.steps.size())
            throw Error(cat(what, ": set_by buffer ", b.id, " is written by two steps"));
          writer = s;
        }
    if (writer == m.steps.size() || !m.steps[writer].fn)
      throw Error(cat(what, ": no kernel step writes set_by buffer ", b.id));
    Step &st = m.steps[writer];
    if (st.group >= 0)
      throw Error(cat(what, ": step ", st.symbol, " sets it inside a dispatch group"));
    for (const auto &[from, to] : bodies)
      if (writer >= from && writer < to)
        throw Error(cat(what, ": step ", st.symbol, " sets it inside a loop body"));
    for (size_t s = 0; s < writer; ++s)
      for (int a : m.steps[s].args)
        for (const aicf::SymExpr &e : m.buffers[a].sym)
          for (const std::string &sym : e.symbols())
            if (sym == d.name)
              throw Error(cat(what, ": step ", m.steps[s].symbol, " uses buffer ", m.buffers[a].id,
                              " sized by it before step ", st.symbol, " sets it"));
    st.setsDims.push_back(i);
  }
}

// target, weights and arena: the backend, the CPU's extensions, and the two blocks' sizes.
void loadTarget(aicf_model &m, const YAML::Node &plan) {
  YAML::Node target = plan[pk::plan::target];
  std::string kind = target ? readString(target, pk::target::kind, "target") : std::string("cpu");
  if (kind != "cpu" && kind != "cuda")
    throw Error(cat("unknown target kind '", kind, "' (cpu, cuda)"));
  m.cuda = kind == "cuda";
  if (!m.cuda)
    checkIsa(target, m.dir);
  m.weightsBytes =
      readInt(need(plan, pk::plan::weights, "plan"), pk::weights::bytes, "weights", 0, kInt64Max);
  m.arenaBytes =
      readInt(need(plan, pk::plan::arena, "plan"), pk::arena::bytes, "arena", 0, kInt64Max);
}

void loadDims(aicf_model &m, const YAML::Node &plan) {
  const YAML::Node dims = plan[pk::plan::dims];
  if (!dims)
    return;
  for (const YAML::Node &d : needSequence(dims, "dims")) {
    aicf::DimRange r;
    r.name = readString(d, pk::dim::name, "a dim");
    std::string what = "dim " + r.name;
    if (!aicf::isSymbolName(r.name))
      throw Error(cat(what, ": not an identifier"));
    for (const aicf::DimRange &o : m.dims)
      if (o.name == r.name)
        throw Error(cat(what, " defined twice"));
    std::string setBy = d[pk::dim::set_by] ? readString(d, pk::dim::set_by, what) : std::string();
    r.min = readInt(d, pk::dim::min, what, setBy.empty() ? 1 : 0, kMaxDim);
    r.max = readInt(d, pk::dim::max, what, r.min, kMaxDim);
    r.opt = readInt(d, pk::dim::opt, what, r.min, r.max);
    if (!setBy.empty() && r.min != 0)
      throw Error(cat(what, ": a data dim (set_by) has min 0"));
    if (!setBy.empty() && m.cuda)
      throw Error(cat(what, ": a data dim (set_by) on a cuda plan (they are for cpu plans)"));
    m.dims.push_back(r);
    m.dimSetByIds.push_back(setBy);
    m.dimValues.push_back(r.opt);
  }
}

// One entry of `buffers`, its bytes checked against its shape and dtype.
Buffer readBuffer(const aicf_model &m, const YAML::Node &b) {
  Buffer buf;
  buf.id = readString(b, pk::buffer::id, "a buffer");
  std::string what = "buffer " + buf.id;
  buf.value = readString(b, pk::buffer::value, what);
  std::string kind = readString(b, pk::buffer::kind, what);
  std::optional<aicf::BufferKind> k = aicf::parseEnum<aicf::BufferKind>(kind);
  if (!k)
    throw Error(cat(what, ": unknown kind '", kind, "'"));
  buf.kind = *k;
  buf.dtype = readString(b, pk::buffer::dtype, what);
  buf.shape = readShape(b, what, &m.dims, &buf.sym);
  if (!buf.sym.empty() && buf.kind == aicf::BufferKind::Weight)
    throw Error(cat(what, ": a weight with symbolic dims"));
  buf.bytes = readInt(b, pk::buffer::bytes, what, 0, kInt64Max);
  if (b[pk::buffer::offset])
    buf.offset = readInt(b, pk::buffer::offset, what, 0, kInt64Max);
  if (b[pk::buffer::alias_of])
    buf.aliasOf = readString(b, pk::buffer::alias_of, what);
  if (b[pk::buffer::index])
    buf.index = static_cast<int>(readInt(b, pk::buffer::index, what, 0, kMaxIoIndex));
  int64_t elem = dtypeBytes(buf.dtype);
  if (elem < 0)
    throw Error(cat(what, ": unknown dtype '", buf.dtype, "'"));
  int64_t count = 1, bytes = 0;
  for (int64_t d : buf.shape)
    if (__builtin_mul_overflow(count, d, &count))
      throw Error(cat(what, ": shape ", shapeText(buf.shape), " has too many elements"));
  if (__builtin_mul_overflow(count, elem, &bytes))
    throw Error(cat(what, ": shape ", shapeText(buf.shape), " has too many bytes"));
  if (bytes != buf.bytes)
    throw Error(cat(what, ": ", buf.bytes, " bytes do not match its shape ", shapeText(buf.shape),
                    " of ", buf.dtype, " (", bytes, " bytes)"));
  buf.curBytes = buf.bytes;
  return buf;
}

void loadBuffers(aicf_model &m, const YAML::Node &plan, std::map<std::string, int> &byId) {
  for (const YAML::Node &b : needSequence(plan[pk::plan::buffers], "buffers")) {
    Buffer buf = readBuffer(m, b);
    if (byId.count(buf.id))
      throw Error(cat("buffer ", buf.id, " defined twice"));
    byId[buf.id] = static_cast<int>(m.buffers.size());
    m.buffers.push_back(buf);
  }
}

// Where each buffer lives. Arena and weight buffers start on 64-byte boundaries (aicfc places
// them so; the kernels may rely on the alignment) and lie wholly inside their block.
void placeBuffers(aicf_model &m, const std::map<std::string, int> &byId) {
  int64_t arenaUsed = 0; // end of the last arena buffer, rounded up as aicfc rounds it
  for (size_t i = 0; i < m.buffers.size(); ++i) {
    Buffer &b = m.buffers[i];
    std::string what = "buffer " + b.id;
    b.storage = static_cast<int>(i);
    if (!b.aliasOf.empty()) {
      auto it = byId.find(b.aliasOf);
      if (it == byId.end())
        throw Error(cat(what, " aliases unknown buffer ", b.aliasOf));
      const Buffer &src = m.buffers[it->second];
      if (!src.aliasOf.empty() || src.bytes != b.bytes)
        throw Error(cat(what, ": bad alias of ", b.aliasOf));
      b.storage = it->second;
      continue;
    }
    if (b.kind == aicf::BufferKind::Arena || b.kind == aicf::BufferKind::Weight) {
      if (b.kind == aicf::BufferKind::Arena && !inside(b.offset, b.bytes, m.arenaBytes))
        throw Error(cat(what, " lies outside the arena"));
      if (b.kind == aicf::BufferKind::Weight && !inside(b.offset, b.bytes, m.weightsBytes))
        throw Error(cat(what, " lies outside weights.bin"));
      if (b.offset % 64 != 0)
        throw Error(cat(what, ": offset ", b.offset, " is not a multiple of 64"));
      if (b.kind == aicf::BufferKind::Arena) {
        int64_t end = 0, rounded = std::max<int64_t>(b.bytes, 1);
        rounded = rounded + (64 - rounded % 64) % 64; // bytes <= arena: cannot overflow
        if (__builtin_add_overflow(b.offset, rounded, &end))
          throw Error(cat(what, " lies outside the arena"));
        arenaUsed = std::max(arenaUsed, end);
      }
    } else {
      auto &list = b.kind == aicf::BufferKind::Input ? m.inputs : m.outputs;
      if (b.index < 0)
        throw Error(cat(what, ": bad ", aicf::enumName(b.kind), " index"));
      if (list.size() <= static_cast<size_t>(b.index))
        list.resize(static_cast<size_t>(b.index) + 1, -1);
      if (list[b.index] >= 0)
        throw Error(cat(aicf::enumName(b.kind), " ", b.index, " defined twice"));
      list[b.index] = static_cast<int>(i);
    }
  }
  // The arena is allocated (and zeroed) at open: a size beyond what its buffers use would only
  // let an edited plan.yaml request arbitrary memory.
  if (m.arenaBytes > arenaUsed)
    throw Error(
        cat("arena: bytes ", m.arenaBytes, " exceed the ", arenaUsed, " bytes its buffers use"));
  for (int i : m.inputs)
    if (i < 0)
      throw Error("an input index is missing");
  for (int i : m.outputs)
    if (i < 0)
      throw Error("an output index is missing");
}

// The kernels' library (a cuda one needs libcudart: loaded first, to say so if it is missing);
// returns its aicf_layout.
const char *openLibrary(aicf_model &m, const std::string &soPath) {
  if (m.cuda) {
    m.dev = std::make_unique<CudaState>();
    std::string why;
    m.dev->rt = aicf::rt::loadCudart(&why);
    if (!m.dev->rt)
      throw MachineError(why);
  }
  m.so = dlopen(soPath.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!m.so)
    throw Error(cat("cannot load ", soPath, ": ", dlerror()));
  auto layoutFn = reinterpret_cast<const char *(*)()>(dlsym(m.so, "aicf_layout"));
  if (!layoutFn)
    throw Error(cat(soPath, " is not an aicf model library"));
  if (!m.cuda) {
    auto abi = reinterpret_cast<int (*)()>(dlsym(m.so, "aicf_host_abi"));
    if (!abi || abi() != 2)
      throw Error(cat(soPath, " was built for another host kernel interface (",
                      abi ? cat("ABI ", abi()) : std::string("no aicf_host_abi"),
                      ", this runtime runs ABI 2): compile the model again with this aicfc"));
  }
  return layoutFn();
}

// A step's inputs then outputs, as buffer indices; inputs are the caller's const memory, which
// no step may write.
void readStepArgs(const aicf_model &m, const YAML::Node &s, const std::map<std::string, int> &byId,
                  const std::string &what, Step &st) {
  for (const char *key : {pk::step::inputs, pk::step::outputs}) {
    bool outputs = key == pk::step::outputs;
    for (const YAML::Node &id : needSequence(need(s, key, what), cat(what, ": ", key))) {
      auto it = id.IsScalar() ? byId.find(id.Scalar()) : byId.end();
      if (it == byId.end())
        throw Error(cat(what, " uses unknown buffer ", id.IsScalar() ? id.Scalar() : "?"));
      if (outputs && m.buffers[m.buffers[it->second].storage].kind == aicf::BufferKind::Input)
        throw Error(cat(what, " writes input buffer ", id.Scalar()));
      st.args.push_back(it->second);
    }
    if (!outputs)
      st.numInputs = st.args.size();
  }
}

// The built-ins' fields: a guard (a branch chosen at run time), a loop kept at run time and a
// fail step (a branch that cannot run at these shapes), all for host plans.
void readControl(const aicf_model &m, const YAML::Node &s, const std::map<std::string, int> &byId,
                 const std::string &what, Step &st) {
  if (const YAML::Node g = s[pk::step::guard]) {
    if (m.cuda)
      throw Error(cat(what, ": a guard on a cuda plan (guards are for cpu plans)"));
    YAML::Node id = need(g, pk::guard::buffer, what + ": guard");
    auto it = id.IsScalar() ? byId.find(id.Scalar()) : byId.end();
    if (it == byId.end() || m.buffers[it->second].dtype != "bool" ||
        m.buffers[it->second].bytes != 1)
      throw Error(cat(what, ": guard buffer ", id.IsScalar() ? id.Scalar() : "?",
                      " is not a one-element bool buffer"));
    st.guard = it->second;
    try {
      st.guardWhen = need(g, pk::guard::when, what + ": guard").as<bool>();
    } catch (const YAML::Exception &) {
      throw Error(cat(what, ": guard.when is not true or false"));
    }
  }
  if (const YAML::Node l = s[pk::step::loop]) {
    if (m.cuda)
      throw Error(cat(what, ": a loop on a cuda plan (loops are for cpu plans)"));
    if (st.kind != "loop" || !st.symbol.empty())
      throw Error(cat(what, ": only a built-in loop step has a loop"));
    st.bodySteps = readInt(l, pk::loop::body_steps, what + ": loop", 0, kInt64Max);
    for (const char *key : {pk::loop::state, pk::loop::next})
      for (const YAML::Node &id :
           needSequence(need(l, key, what + ": loop"), cat(what, ": loop.", key))) {
        auto it = id.IsScalar() ? byId.find(id.Scalar()) : byId.end();
        if (it == byId.end())
          throw Error(cat(what, ": loop.", key, " names unknown buffer ",
                          id.IsScalar() ? id.Scalar() : "?"));
        (key == pk::loop::state ? st.state : st.next).push_back(it->second);
      }
  }
  if (const YAML::Node f = s[pk::step::fail]) {
    if (m.cuda)
      throw Error(cat(what, ": a fail step on a cuda plan (fail steps are for cpu plans)"));
    if (st.kind != "fail" || !st.symbol.empty())
      throw Error(cat(what, ": only a built-in fail step has a fail"));
    st.fails = true;
    st.failMessage = readString(f, pk::fail::message, what + ": fail");
  }
}

// launch.dims: the kernel takes the dims' values as its last argument (a host kernel its array,
// a CUDA launcher the array it reads them from to pass by value).
void readLaunchDims(const aicf_model &m, const YAML::Node &launch, const std::string &what,
                    Step &st) {
  if (!launch[pk::launch::dims])
    return;
  if (m.dims.empty())
    throw Error(cat(what, ": launch.dims without plan dims"));
  st.dims = true;
}

// A host kernel step's launch: the grid's blocks (a kernel without grid axes is one block), the
// pool's chunks, the dims argument and the dispatch group.
void readHostLaunch(const aicf_model &m, const YAML::Node &s, const std::string &what, Step &st) {
  YAML::Node launch = need(s, pk::step::launch, what);
  std::map<std::string, int64_t> opt, top;
  for (const aicf::DimRange &r : m.dims) {
    opt[r.name] = r.opt;
    top[r.name] = r.max;
  }
  bool symbolic = false;
  std::vector<aicf::SymExtent> ext;
  for (const YAML::Node &e :
       needSequence(need(launch, pk::launch::grid, what + ": launch"), what + ": launch.grid")) {
    int64_t v = 0;
    if (!m.dims.empty() && e.IsScalar() && !YAML::convert<int64_t>::decode(e, v)) {
      std::string why;
      auto x = aicf::SymExtent::parse(e.Scalar(), &why);
      auto hi = x ? x->eval(top) : std::nullopt;
      if (!x || !hi || !x->num.monotone() || *hi > kMaxDim)
        throw Error(cat(what, ": launch.grid extent '", e.Scalar(),
                        "': ", x ? "names an unknown dim or has no bound" : why));
      ext.push_back(*x);
      symbolic = true;
      v = *x->eval(opt);
    } else {
      v = toInt(e, what + ": launch.grid extent", 1, kMaxDim);
      ext.push_back(aicf::SymExtent{aicf::SymExpr(v), 1});
    }
    if (__builtin_mul_overflow(st.blocks, v, &st.blocks))
      throw Error(cat(what, ": launch.grid overflows"));
  }
  // A symbolic grid's blocks at the opt point (what chunks was planned for).
  st.chunks =
      readInt(launch, pk::launch::chunks, what + ": launch", 1,
              std::max<int64_t>(1, std::min<int64_t>(st.blocks, aicf::rt::ThreadPool::kMaxChunks)));
  if (symbolic) {
    st.symGrid = std::move(ext);
    st.chunkBlocks = std::max<int64_t>(1, (st.blocks + st.chunks - 1) / st.chunks);
  }
  readLaunchDims(m, launch, what, st);
  if (launch[pk::launch::group])
    st.group = static_cast<int>(readInt(launch, pk::launch::group, what + ": launch", 0,
                                        static_cast<int64_t>(m.steps.size())));
}

// One entry of `steps`, its kernel looked up in libmodel.so.
Step readStep(const aicf_model &m, const YAML::Node &s, const std::map<std::string, int> &byId,
              const std::string &soPath) {
  Step st;
  st.kind = readString(s, pk::step::kind, "a step");
  st.symbol = readString(s, pk::step::kind_id, "a step");
  std::string what = "step " + (st.symbol.empty() ? st.kind : st.symbol);
  readStepArgs(m, s, byId, what, st);
  readControl(m, s, byId, what, st);
  if (st.bodySteps >= 0) {
    // checked with the other steps in checkLoops
  } else if (st.fails) {
    // It would fail every run unless its branch is skipped.
    if (st.guard < 0 || st.numInputs != 0)
      throw Error(cat(what, ": a fail step needs a guard and no inputs"));
  } else if (st.kind == "copy" && st.symbol.empty()) {
    if (st.args.size() != 2 || st.numInputs != 1 ||
        m.buffers[st.args[0]].bytes != m.buffers[st.args[1]].bytes)
      throw Error("a copy step needs one input and one output of equal size");
  } else if (m.cuda) {
    std::string launcher = "aicf_launch_" + st.symbol;
    st.launch = reinterpret_cast<LaunchFn>(dlsym(m.so, launcher.c_str()));
    if (!st.launch)
      throw Error(cat("launcher ", launcher, " is missing from ", soPath));
    readLaunchDims(m, need(s, pk::step::launch, what), what, st);
  } else {
    st.fn = reinterpret_cast<KernelFn>(dlsym(m.so, st.symbol.c_str()));
    if (!st.fn)
      throw Error(cat("kernel ", st.symbol, " is missing from ", soPath));
    readHostLaunch(m, s, what, st);
  }
  return st;
}

// The first kernel call (`symbol:bytes,...;`) where the plan's layout and the library's differ.
std::string firstDifference(const std::string &plan, const std::string &library) {
  size_t at = 0;
  while (at < plan.size() && at < library.size() && plan[at] == library[at])
    ++at;
  auto entry = [&](const std::string &s) {
    size_t from = s.rfind(';', at == 0 ? 0 : at - 1);
    from = (from == std::string::npos || at == 0) ? 0 : from + 1;
    size_t to = s.find(';', from);
    std::string e = s.substr(from, to == std::string::npos ? std::string::npos : to - from);
    return e.empty() ? std::string("(none)") : e;
  };
  return cat("plan.yaml calls ", entry(plan), ", the library expects ", entry(library));
}

// Reads and validates plan.yaml (everything except the weights file), then loads libmodel.so and
// checks its kernels against the steps.
void loadPlan(aicf_model &m, const YAML::Node &plan) {
  if (!plan.IsMap() || !plan[pk::plan::schema] || !plan[pk::plan::schema].IsScalar() ||
      plan[pk::plan::schema].Scalar() != aicf::kPlanSchema)
    throw Error(cat("unsupported schema (expected ", aicf::kPlanSchema, ")"));
  loadTarget(m, plan);
  loadDims(m, plan);
  std::map<std::string, int> byId;
  loadBuffers(m, plan, byId);
  placeBuffers(m, byId);
  std::string soPath = m.dir + "/libmodel.so";
  std::string expected = openLibrary(m, soPath);
  std::string layout;
  for (const YAML::Node &s : needSequence(plan[pk::plan::steps], "steps")) {
    Step st = readStep(m, s, byId, soPath);
    if (st.fn || st.launch) {
      layout += st.symbol + ":";
      for (size_t a = 0; a < st.args.size(); ++a)
        layout += (a ? "," : "") + std::to_string(m.buffers[st.args[a]].bytes);
      if (st.dims)
        layout += ",dims";
      layout += ";";
    }
    m.steps.push_back(st);
  }
  checkGroups(m);
  checkLoops(m);
  checkDataDims(m, byId);
  initShapes(m);
  // The argument count and byte size of every kernel call, as libmodel.so was compiled for.
  if (layout != expected)
    throw Error(cat("the steps of plan.yaml do not match the kernels in ", soPath,
                    " (was the plan edited?): ", firstDifference(layout, expected)));
  // Every key is one of the schema's (support/plan_schema.def), a misspelt one refused; checked
  // last, so that a malformed field the runtime reads is reported as such first.
  if (std::string why = aicf::checkPlanKeys(plan); !why.empty())
    throw Error(cat(why, " (not a field of ", aicf::kPlanSchema, ")"));
}

void load(aicf_model &m) {
  std::string planPath = m.dir + "/plan.yaml";
  YAML::Node plan;
  try {
    plan = YAML::LoadFile(planPath);
  } catch (const YAML::BadFile &) {
    throw Error(cat("cannot open ", planPath));
  } catch (const YAML::Exception &e) {
    throw Error(cat(planPath, ": not valid YAML: ", e.what()));
  }
  try {
    loadPlan(m, plan);
  } catch (const MachineError &) {
    throw;
  } catch (const YAML::Exception &e) {
    throw Error(cat(planPath, ": ", e.what()));
  } catch (const Error &e) {
    throw Error(cat(planPath, ": ", e.what()));
  }

  if (!m.cuda && m.device != 0)
    throw Error(cat(m.dir, " is a cpu plan: it runs on the host, not on device ", m.device));

  // Weights: weights.bin mapped read-only (shared through the page cache by every process that
  // opens the folder) or copied, by AICF_WEIGHTS; the file must be exactly the size the plan's
  // offsets were checked against.
  m.weights = std::make_unique<aicf::rt::WeightsImage>(m.dir + "/weights.bin", m.weightsBytes,
                                                       aicf::rt::weightsModeFromEnv());
  m.ptrs.assign(m.buffers.size(), nullptr);
  if (m.cuda)
    openDevice(m);
  else
    m.arena = std::make_unique<aicf::rt::Aligned>(static_cast<size_t>(m.arenaBytes));
}

int fail(const std::string &msg) {
  lastError = msg;
  return 1;
}

// Points m.ptrs at every buffer's memory: inputs and outputs at the caller's pointers, weight
// and arena buffers inside weightBase / arenaBase; an alias shares its storage's pointer.
void bindPointers(aicf_model &m, const char *api, const void *const *inputs, void *const *outputs,
                  char *weightBase, char *arenaBase) {
  for (size_t i = 0; i < m.buffers.size(); ++i) {
    const Buffer &b = m.buffers[i];
    if (b.storage != static_cast<int>(i))
      continue;
    if (b.kind == aicf::BufferKind::Input)
      m.ptrs[i] = const_cast<void *>(inputs[b.index]);
    else if (b.kind == aicf::BufferKind::Output)
      m.ptrs[i] = outputs[b.index];
    else if (b.kind == aicf::BufferKind::Weight)
      m.ptrs[i] = weightBase + b.offset;
    else
      m.ptrs[i] = arenaBase + b.offset;
    if (!m.ptrs[i] && b.bytes > 0) // (an empty input no step reads may be null)
      throw Error(cat(api, ": ", aicf::enumName(b.kind), " '", b.value, "' is a null pointer"));
  }
  for (size_t i = 0; i < m.buffers.size(); ++i)
    m.ptrs[i] = m.ptrs[m.buffers[i].storage];
}

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One step's call for the pool: the blocks in `chunks` runs differing by at most one block, the
// first blocks % chunks of them one longer (no product that could overflow for any grid).
struct StepCall {
  KernelFn fn;
  void *const *args;
  int64_t blocks, chunks;
  int64_t start(int64_t c) const { return c * (blocks / chunks) + std::min(c, blocks % chunks); }
  static void run(void *self, int64_t c) {
    const StepCall &s = *static_cast<const StepCall *>(self);
    s.fn(s.args, s.start(c), s.start(c + 1));
  }
};

// A dispatch group's call: chunk c of the group is chunk c - firstChunk[i] of its step i.
struct GroupCall {
  const StepCall *calls;
  const int64_t *firstChunk; // per step, then the total
  static void run(void *self, int64_t c) {
    const GroupCall &g = *static_cast<const GroupCall *>(self);
    size_t i = 0;
    while (c >= g.firstChunk[i + 1])
      ++i;
    StepCall::run(const_cast<StepCall *>(&g.calls[i]), c - g.firstChunk[i]);
  }
};

// The scratch of a host run's step calls, reused across steps (and loop iterations).
struct HostCalls {
  std::vector<void *> args;
  std::vector<StepCall> calls;
  std::vector<int64_t> firstChunk;
};

void runHostSteps(aicf_model &m, size_t begin, size_t end, HostCalls &hc, double *times);

// Loop step `s`: the body's steps once per iteration while the iteration number is below the
// trip count and the condition holds, the body's outputs copied back into its state between
// iterations; then the carried values into the step's outputs.
void runHostLoop(aicf_model &m, size_t s, HostCalls &hc, double *times) {
  const Step &st = m.steps[s];
  auto copy = [&](int to, int from) {
    if (m.ptrs[to] != m.ptrs[from])
      std::memmove(m.ptrs[to], m.ptrs[from], static_cast<size_t>(m.buffers[from].bytes));
  };
  const size_t carried = st.args.size() - st.numInputs;
  int64_t trip = 0;
  std::memcpy(&trip, m.ptrs[st.args[0]], sizeof trip);
  for (size_t k = 1; k < 2 + carried; ++k) // the condition and the initial carried values
    copy(st.state[k], st.args[k]);
  auto *cond = static_cast<const uint8_t *>(m.ptrs[st.state[1]]);
  for (int64_t it = 0; it < trip && *cond != 0; ++it) {
    std::memcpy(m.ptrs[st.state[0]], &it, sizeof it);
    runHostSteps(m, s + 1, s + 1 + static_cast<size_t>(st.bodySteps), hc, times);
    for (size_t k = 0; k < 1 + carried; ++k)
      copy(st.state[1 + k], st.next[k]);
  }
  for (size_t k = 0; k < carried; ++k)
    copy(st.args[st.numInputs + k], st.state[2 + k]);
}

void runHost(aicf_model &m, const void *const *inputs, void *const *outputs, double *times) {
  applyShapes(m); // refuses inconsistent shapes before anything runs
  resetDataDims(m);
  bindPointers(m, "aicf_run", inputs, outputs, const_cast<char *>(m.weights->data()),
               static_cast<char *>(m.arena->ptr));
  if (!m.pool || m.pool->threads() != m.threads || m.pool->pinned() != m.pinThreads ||
      m.pool->adaptive() != m.adaptiveThreads) {
    m.pool.reset();
    m.pool = std::make_unique<aicf::rt::ThreadPool>(m.threads, m.pinThreads, m.adaptiveThreads);
  }
  if (times) // loop bodies add up their iterations
    std::fill(times, times + m.steps.size(), 0.0);
  m.pool->beginRun();
  HostCalls hc;
  try {
    runHostSteps(m, 0, m.steps.size(), hc, times);
  } catch (...) {
    m.pool->endRun();
    throw;
  }
  m.pool->endRun();
}

// Steps [begin, end) in order (a loop step runs its body and resumes after it).
void runHostSteps(aicf_model &m, size_t begin, size_t end, HostCalls &hc, double *times) {
  std::vector<void *> &args = hc.args;
  std::vector<StepCall> &calls = hc.calls;
  std::vector<int64_t> &firstChunk = hc.firstChunk;
  for (size_t s = begin; s < end; ++s) {
    const Step &st = m.steps[s];
    // The side of a runtime branch not taken: skipped (its condition was written by an
    // earlier step, or is an input).
    if (st.guard >= 0 && (*static_cast<const uint8_t *>(m.ptrs[st.guard]) != 0) != st.guardWhen)
      continue;
    if (st.fails) // the side taken cannot run at these shapes
      throw Error(st.failMessage);
    if (st.bodySteps >= 0) {
      // Profiled, the loop step's own time is its copies: the body's steps count their own.
      double *body = times ? times + s + 1 : nullptr, *bodyEnd = body ? body + st.bodySteps : body;
      double before = times ? std::accumulate(body, bodyEnd, 0.0) : 0.0;
      auto t0 = std::chrono::steady_clock::now();
      runHostLoop(m, s, hc, times);
      if (times)
        times[s] += secondsSince(t0) - (std::accumulate(body, bodyEnd, 0.0) - before);
      s += static_cast<size_t>(st.bodySteps);
      continue;
    }
    // A dispatch group's steps in one pool run; a profiled run times each step on its own.
    if (st.groupEnd > s + 1 && !times) {
      size_t end = st.groupEnd, numArgs = 0;
      for (size_t i = s; i < end; ++i)
        numArgs += m.steps[i].args.size() + (m.steps[i].dims ? 1 : 0);
      args.resize(numArgs); // filled in place below: the calls keep pointers into it
      calls.clear();
      firstChunk.assign(1, 0);
      void **a = args.data();
      for (size_t i = s; i < end; ++i) {
        const Step &g = m.steps[i];
        for (size_t k = 0; k < g.args.size(); ++k)
          a[k] = m.ptrs[g.args[k]];
        if (g.dims)
          a[g.args.size()] = m.dimValues.data();
        calls.push_back(StepCall{g.fn, a, g.blocks, g.chunks});
        firstChunk.push_back(firstChunk.back() + g.chunks);
        a += g.args.size() + (g.dims ? 1 : 0);
      }
      GroupCall call{calls.data(), firstChunk.data()};
      m.pool->run(firstChunk.back(), &GroupCall::run, &call);
      s = end - 1;
      continue;
    }
    auto t0 = std::chrono::steady_clock::now();
    if (!st.fn) {
      if (m.buffers[st.args[0]].curBytes > 0) // (an empty buffer's pointer may be null)
        std::memmove(m.ptrs[st.args[1]], m.ptrs[st.args[0]],
                     static_cast<size_t>(m.buffers[st.args[0]].curBytes));
    } else {
      args.clear();
      for (int a : st.args)
        args.push_back(m.ptrs[a]);
      if (st.dims)
        args.push_back(m.dimValues.data());
      StepCall call{st.fn, args.data(), st.blocks, st.chunks};
      m.pool->run(st.chunks, &StepCall::run, &call);
    }
    if (!st.setsDims.empty())
      setDataDims(m, st);
    if (times)
      times[s] += secondsSince(t0);
  }
}

// Enqueues the steps on stream s in plan order; with times, waits for each step and records its
// wall time (launch included).
void launchSteps(aicf_model &m, aicf::rt::CudaStream s, double *times) {
  const aicf::rt::Cudart &rt = *m.dev->rt;
  std::vector<void *> args;
  for (size_t i = 0; i < m.steps.size(); ++i) {
    const Step &st = m.steps[i];
    auto t0 = std::chrono::steady_clock::now();
    if (!st.launch) {
      check(rt,
            rt.memcpyAsync(m.ptrs[st.args[1]], m.ptrs[st.args[0]],
                           static_cast<size_t>(m.buffers[st.args[0]].curBytes),
                           aicf::rt::kMemcpyDeviceToDevice, s),
            "copy step");
    } else {
      args.clear();
      for (int a : st.args)
        args.push_back(m.ptrs[a]);
      if (st.dims) // host memory: the launcher reads the values and passes them by value
        args.push_back(m.dimValues.data());
      int e = st.launch(args.data(), s);
      if (e != 0)
        throw Error(cat("launching ", st.symbol, ": ", rt.describe(e)));
    }
    if (times) {
      check(rt, rt.streamSynchronize(s), st.launch ? st.symbol.c_str() : "copy step");
      times[i] = secondsSince(t0);
    }
  }
}

// Runs the bound steps on stream s: replays the CUDA Graph if it was captured for the current
// pointers, else captures one first (on the model's own stream, so any stream can launch it);
// with the graph disabled, or when profiling, launches the steps one by one.
void enqueue(aicf_model &m, aicf::rt::CudaStream s, double *times) {
  CudaState &d = *m.dev;
  const aicf::rt::Cudart &rt = *d.rt;
  // The current device is per host thread: another model may have made its own current.
  check(rt, rt.setDevice(d.device), "cudaSetDevice");
  if (!d.useGraph || times) {
    launchSteps(m, s, times);
    return;
  }
  if (d.exec && d.graphPtrs == m.ptrs && d.graphDims != m.dimValues) {
    // Another shape with the same buffers: swap in its graph if captured, else keep this one
    // aside and capture the new shape's.
    auto it = d.shapeGraphs.find(m.dimValues);
    CudaState::Captured current{d.graph, d.exec};
    if (it != d.shapeGraphs.end()) {
      d.graph = it->second.graph;
      d.exec = it->second.exec;
      d.shapeGraphs.erase(it);
    } else {
      d.graph = nullptr;
      d.exec = nullptr;
    }
    if (d.shapeGraphs.size() >= CudaState::kShapeGraphs) { // the oldest key goes
      rt.graphExecDestroy(d.shapeGraphs.begin()->second.exec);
      rt.graphDestroy(d.shapeGraphs.begin()->second.graph);
      d.shapeGraphs.erase(d.shapeGraphs.begin());
    }
    d.shapeGraphs[d.graphDims] = current;
    d.graphDims = m.dimValues;
  }
  if (!d.exec || d.graphPtrs != m.ptrs) {
    if (d.graphPtrs != m.ptrs)
      d.dropGraph();
    check(rt, rt.streamBeginCapture(d.stream, aicf::rt::kStreamCaptureModeRelaxed),
          "cudaStreamBeginCapture");
    try {
      launchSteps(m, d.stream, nullptr);
    } catch (...) {
      aicf::rt::CudaGraph partial = nullptr;
      if (rt.streamEndCapture(d.stream, &partial) == 0 && partial)
        rt.graphDestroy(partial);
      throw;
    }
    check(rt, rt.streamEndCapture(d.stream, &d.graph), "cudaStreamEndCapture");
    check(rt, rt.graphInstantiate(&d.exec, d.graph, 0), "cudaGraphInstantiate");
    d.graphPtrs = m.ptrs;
    d.graphDims = m.dimValues;
  }
  check(rt, rt.graphLaunch(d.exec, s), "cudaGraphLaunch");
}

char *deviceArena(const aicf_model &m) {
  return m.dev->base + align64(m.weightsBytes);
}

// aicf_run on a cuda plan: inputs to their device staging, the steps, outputs back, then waits.
void runCudaHost(aicf_model &m, const void *const *inputs, void *const *outputs, double *times) {
  applyShapes(m); // refuses inconsistent shapes before anything is copied or launched
  CudaState &d = *m.dev;
  const aicf::rt::Cudart &rt = *d.rt;
  std::vector<const void *> dIn(m.inputs.size());
  std::vector<void *> dOut(m.outputs.size());
  for (size_t i = 0; i < m.outputs.size(); ++i) {
    const Buffer &b = m.buffers[m.outputs[i]];
    if (!outputs[i])
      throw Error(cat("aicf_run: output '", b.value, "' is a null pointer"));
    dOut[i] = d.base + d.stagingOffset[m.outputs[i]];
  }
  for (size_t i = 0; i < m.inputs.size(); ++i) {
    const Buffer &b = m.buffers[m.inputs[i]];
    if (!inputs[i] && b.bytes > 0)
      throw Error(cat("aicf_run: input '", b.value, "' is a null pointer"));
    dIn[i] = d.base + d.stagingOffset[m.inputs[i]];
    if (b.curBytes == 0)
      continue;
    check(rt,
          rt.memcpyAsync(const_cast<void *>(dIn[i]), inputs[i], static_cast<size_t>(b.curBytes),
                         aicf::rt::kMemcpyHostToDevice, d.stream),
          "copying an input to the device");
  }
  bindPointers(m, "aicf_run", dIn.data(), dOut.data(), d.base, deviceArena(m));
  enqueue(m, d.stream, times);
  for (size_t i = 0; i < m.outputs.size(); ++i)
    check(rt,
          rt.memcpyAsync(outputs[i], dOut[i], static_cast<size_t>(m.buffers[m.outputs[i]].curBytes),
                         aicf::rt::kMemcpyDeviceToHost, d.stream),
          "copying an output to the host");
  check(rt, rt.streamSynchronize(d.stream), "running the plan");
}

// Runs f, turning an exception into aicf_last_error and status 1. After a failed cuda run the
// model's stream is drained, so no copy still refers to the caller's buffers.
template <typename F>
int guarded(aicf_model &m, F &&f) {
  try {
    f();
  } catch (const std::exception &e) {
    if (m.dev && m.dev->stream)
      m.dev->rt->streamSynchronize(m.dev->stream);
    return fail(e.what());
  }
  lastError.clear();
  return 0;
}

int runImpl(aicf_model *m, const void *const *inputs, void *const *outputs, double *times) {
  if (!m)
    return fail("aicf_run: null model");
  if ((!inputs && !m->inputs.empty()) || (!outputs && !m->outputs.empty()))
    return fail("aicf_run: null input or output array");
  return guarded(*m, [&] {
    if (m->cuda)
      runCudaHost(*m, inputs, outputs, times);
    else
      runHost(*m, inputs, outputs, times);
  });
}

int info(const aicf_model *m, const std::vector<int> &list, int i, aicf_tensor_info *out) {
  if (!m || !out || i < 0 || i >= static_cast<int>(list.size()))
    return fail(cat("tensor index ", i, " out of range"));
  const Buffer &b = m->buffers[list[i]];
  // An input's shape is the one set for the next run; an output's follows from the inputs'.
  const std::vector<int64_t> &shape = &list == &m->inputs ? m->inputShapes[i] : b.shape;
  out->name = b.value.c_str();
  out->dtype = b.dtype.c_str();
  out->rank = static_cast<int>(shape.size());
  int64_t bytes = dtypeBytes(b.dtype);
  for (int d = 0; d < AICF_MAX_RANK; ++d) {
    out->shape[d] = d < out->rank ? shape[d] : 0;
    bytes *= d < out->rank ? shape[d] : 1;
  }
  out->bytes = static_cast<size_t>(b.sym.empty() ? b.bytes : bytes);
  return 0;
}

} // namespace

extern "C" {

// The default thread count: AICF_NUM_THREADS when the environment sets it (bounded as
// aicf_set_num_threads bounds its argument: an absurd value is refused, not clamped, and not
// ignored either), else `hardware`.
static int defaultThreads(int hardware) {
  const char *env = std::getenv("AICF_NUM_THREADS");
  if (!env || !*env)
    return hardware;
  long v = 0;
  bool digits = true;
  for (const char *c = env; *c && digits; ++c) {
    digits = *c >= '0' && *c <= '9';
    v = std::min<long>(v * 10 + (*c - '0'), AICF_MAX_THREADS + 1L); // no overflow
  }
  if (!digits || v < 1 || v > AICF_MAX_THREADS)
    throw std::runtime_error(
        cat("AICF_NUM_THREADS='", env, "': expected a whole number from 1 to ", AICF_MAX_THREADS));
  return static_cast<int>(v);
}

aicf_model *aicf_open(const char *dir) {
  return aicf_open_device(dir, 0);
}

aicf_model *aicf_open_device(const char *dir, int device) {
  if (!dir) {
    lastError = "aicf_open: null path";
    return nullptr;
  }
  if (device < 0) {
    lastError = cat("aicf_open_device: device ", device, " (devices are numbered from 0)");
    return nullptr;
  }
  auto m = std::make_unique<aicf_model>();
  m->dir = dir;
  m->device = device;
  try {
    m->threads = defaultThreads(m->threads);
    load(*m);
  } catch (const std::exception &e) {
    lastError = e.what();
    return nullptr;
  }
  lastError.clear();
  return m.release();
}

void aicf_close(aicf_model *m) {
  delete m;
}
const char *aicf_last_error(void) {
  return lastError.c_str();
}
int aicf_num_inputs(const aicf_model *m) {
  return m ? static_cast<int>(m->inputs.size()) : 0;
}
int aicf_num_outputs(const aicf_model *m) {
  return m ? static_cast<int>(m->outputs.size()) : 0;
}
int aicf_input_info(const aicf_model *m, int i, aicf_tensor_info *out) {
  return m ? info(m, m->inputs, i, out) : fail("null model");
}
int aicf_output_info(const aicf_model *m, int i, aicf_tensor_info *out) {
  if (!m)
    return fail("null model");
  try {
    applyShapes(const_cast<aicf_model &>(*m)); // the outputs' shapes follow the inputs'
  } catch (const std::exception &e) {
    return fail(cat("aicf_output_info: ", e.what()));
  }
  return info(m, m->outputs, i, out);
}
int aicf_output_capacity(const aicf_model *m, int i, size_t *bytes) {
  if (!m || !bytes || i < 0 || i >= aicf_num_outputs(m))
    return fail(cat("aicf_output_capacity: output index ", i, " out of range"));
  return guarded(const_cast<aicf_model &>(*m), [&] {
    applyShapes(const_cast<aicf_model &>(*m));
    std::vector<int64_t> values = m->dimValues; // the data dims at their bounds
    for (size_t d = 0; d < m->dims.size(); ++d)
      if (m->dimSetBy[d] >= 0)
        values[d] = m->dims[d].max;
    auto dims = dimMap(*m, values);
    const Buffer &b = m->buffers[m->outputs[i]];
    int64_t n = dtypeBytes(b.dtype);
    for (size_t d = 0; d < b.sym.size(); ++d)
      n *= *b.sym[d].eval(dims); // defined and within b.bytes: resize checked these values
    *bytes = static_cast<size_t>(b.sym.empty() ? b.bytes : n);
  });
}
int aicf_num_dims(const aicf_model *m) {
  return m ? static_cast<int>(m->dims.size()) : 0;
}
int aicf_dim_info(const aicf_model *m, int i, aicf_dim_desc *out) {
  if (!m || !out || i < 0 || i >= aicf_num_dims(m))
    return fail(cat("dim index ", i, " out of range"));
  const aicf::DimRange &d = m->dims[i];
  out->name = d.name.c_str();
  out->min = d.min;
  out->max = d.max;
  out->opt = d.opt;
  out->value = m->dimValues[i];
  return 0;
}
int aicf_set_input_shape(aicf_model *m, int i, int rank, const int64_t *shape) {
  if (!m)
    return fail("aicf_set_input_shape: null model");
  if (i < 0 || i >= aicf_num_inputs(m))
    return fail(cat("aicf_set_input_shape: input index ", i, " out of range"));
  const Buffer &b = m->buffers[m->inputs[i]];
  if (rank != static_cast<int>(b.shape.size()) || (rank > 0 && !shape))
    return fail(
        cat("aicf_set_input_shape: input ", b.value, " has rank ", b.shape.size(), ", got ", rank));
  std::vector<int64_t> s(shape, shape + rank);
  for (int d = 0; d < rank; ++d) {
    bool fixed = b.sym.empty() || b.sym[d].isConstant();
    int64_t want = b.sym.empty() ? b.shape[d] : b.sym[d].constant();
    if (fixed && s[d] != want)
      return fail(cat("aicf_set_input_shape: input ", b.value, " dim ", d, " is ", s[d],
                      ", but it is ", want, " in every shape the folder runs"));
    if (s[d] < 0)
      return fail(cat("aicf_set_input_shape: input ", b.value, " dim ", d, " is negative"));
  }
  m->inputShapes[i] = std::move(s);
  m->shapesApplied = false;
  return 0;
}
int aicf_set_num_threads(aicf_model *m, int n) {
  if (!m)
    return fail("aicf_set_num_threads: null model");
  // Each thread beyond the caller is a pool worker the next run starts: an absurd count is
  // refused rather than clamped, so the caller knows. (Should the OS refuse a worker, that run
  // fails with the system's message and the model stays usable.)
  if (n < 1 || n > AICF_MAX_THREADS)
    return fail(cat("aicf_set_num_threads: ", n, " threads; expected 1 to ", AICF_MAX_THREADS));
  m->threads = n; // cpu plans: the next run uses a pool of n threads; no effect on cuda plans
  return 0;
}
int aicf_set_thread_affinity(aicf_model *m, int enabled) {
  if (!m)
    return fail("aicf_set_thread_affinity: null model");
  m->pinThreads = enabled != 0;
  return 0;
}
int aicf_set_adaptive_threads(aicf_model *m, int enabled) {
  if (!m)
    return fail("aicf_set_adaptive_threads: null model");
  m->adaptiveThreads = enabled != 0;
  return 0;
}
int aicf_set_cuda_graph(aicf_model *m, int enabled) {
  if (!m)
    return fail("aicf_set_cuda_graph: null model");
  if (m->cuda) {
    m->dev->useGraph = enabled != 0;
    if (!m->dev->useGraph) {
      m->dev->rt->streamSynchronize(m->dev->stream);
      m->dev->dropGraph();
    }
  }
  return 0;
}
int aicf_run_device(aicf_model *m, const void *const *d_inputs, void *const *d_outputs,
                    void *stream) {
  if (!m)
    return fail("aicf_run_device: null model");
  if (!m->cuda)
    return fail("aicf_run_device needs a cuda plan (this is a cpu plan: use aicf_run)");
  if ((!d_inputs && !m->inputs.empty()) || (!d_outputs && !m->outputs.empty()))
    return fail("aicf_run_device: null input or output array");
  return guarded(*m, [&] {
    applyShapes(*m);
    bindPointers(*m, "aicf_run_device", d_inputs, d_outputs, m->dev->base, deviceArena(*m));
    enqueue(*m, static_cast<aicf::rt::CudaStream>(stream), nullptr);
  });
}
int aicf_run(aicf_model *m, const void *const *inputs, void *const *outputs) {
  return runImpl(m, inputs, outputs, nullptr);
}
int aicf_num_steps(const aicf_model *m) {
  return m ? static_cast<int>(m->steps.size()) : 0;
}
const char *aicf_step_kind(const aicf_model *m, int s) {
  return m && s >= 0 && s < aicf_num_steps(m) ? m->steps[s].kind.c_str() : "";
}
const char *aicf_step_symbol(const aicf_model *m, int s) {
  return m && s >= 0 && s < aicf_num_steps(m) ? m->steps[s].symbol.c_str() : "";
}
int aicf_run_profiled(aicf_model *m, const void *const *inputs, void *const *outputs,
                      double *step_seconds) {
  return runImpl(m, inputs, outputs, step_seconds);
}

} // extern "C"
