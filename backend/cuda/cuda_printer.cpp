// The CUDA printer (printCudaSource, docs/architecture.md): spells verified Kernel IR as CUDA C++17
// for nvcc, following the host printer's traversal statement by statement and adding no logic:
//   * each kernel is   extern "C" __global__ void __launch_bounds__(threads) NAME(params...)
//     (threads, 1 for a tensor-core kernel: the whole register file is its budget)
//     with one typed __restrict__ pointer per param (const for `in` params);
//   * grid axes -> blockIdx: the innermost axis on x, then y, z; with more than 3 axes, or an
//     outer axis above CUDA's 65535 limit for y / z, all axes are folded into x and unflattened
//     (the same row-major order the host's collapsed loop uses);
//   * a region -> a block in which the thread var is threadIdx.x (no guard: blocks are exactly
//     `threads` wide); a barrier -> __syncthreads();
//   * shared buffers -> __shared__ arrays (static up to 48 KB in total, else one dynamic
//     extern __shared__ array with 16-byte aligned offsets; the launcher raises the kernel's
//     cudaFuncAttributeMaxDynamicSharedMemorySize once); local [threads, ...] buffers -> a
//     per-thread register array of the remaining dims (the thread index is dropped);
//   * block_reduce -> __shfl_down_sync over the combiner's fields within each warp, one
//     shared-memory exchange across warps, the result written by thread 0 to the dst shared
//     buffers and broadcast by a final __syncthreads();
//   * mma_tile -> a per-thread loop over the thread's tm x tn sub-tile (kir.h's mapping) reading
//     the shared A and B tiles into registers per k step;
//   * f16/bf16 storage is __half / __nv_bfloat16 (loads widen with __half2float /
//     __bfloat162float, stores narrow with round-to-nearest-even); math as the host printer:
//     expf/logf/…, rsqrt -> 1/sqrtf, round -> rintf (half to even), min/max propagate NaN, int
//     Div/Mod are C's.
// Plus, per kernel, the host launcher  extern "C" int aicf_launch_NAME(void *const *args,
// cudaStream_t stream)  that returns the launch's cudaError_t. The output is a pure function of
// the kernels and compiles warning-free with nvcc.
#include "backend/cuda/cuda_printer.h"

#include "backend/c/c_expr.h"
#include "backend/c/c_stmt.h"
#include "plan/memory_plan.h"
#include "support/diagnostics.h"
#include "support/half.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>
#include <sstream>

namespace aicf {
namespace {

using namespace kir;

constexpr int64_t kMaxGridYZ = 65535;
constexpr int64_t kMaxGridX = 2147483647;

const char *const kPrelude = R"(#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace {

// min/max propagate NaN; sign(NaN) is NaN (as the reference interpreter and the host target).
template <class T>
__device__ __forceinline__ T aicf_min(T a, T b) {
  return (b < a || b != b) ? b : a;
}
template <class T>
__device__ __forceinline__ T aicf_max(T a, T b) {
  return (a < b || b != b) ? b : a;
}
template <class T>
__device__ __forceinline__ T aicf_sign(T x) {
  return x != x ? x : static_cast<T>((T(0) < x) - (x < T(0)));
}
template <class T>
__device__ __forceinline__ T aicf_abs(T x) {
  return x < T(0) ? static_cast<T>(-x) : x;
}
template <class T>
__device__ __forceinline__ T aicf_sigmoid(T x) {
  return 1.0f / (1.0f + expf(-x));
}
template <class T>
__device__ __forceinline__ float aicf_rh(T x) {
  return __half2float(__float2half_rn(x));
}
template <class T>
__device__ __forceinline__ float aicf_rbf(T x) {
  return __bfloat162float(__float2bfloat16_rn(x));
}
// A wider integer narrowed to an 8- or 16-bit signed one, wrapping. The empty asm hides where
// the value came from: NVVM otherwise folds i16(abs(i64(x))) of an int16 x into PTX's abs.s16,
// and on an H200 (CUDA 13.0) abs.s16 of -32768 read back as +32768, not ONNX's -32768.
template <class T>
__device__ __forceinline__ T aicf_wrap(long long v) {
  asm("" : "+l"(v));
  return static_cast<T>(v);
}
// Warp shuffle of one combiner field (bool and int8 travel as int).
template <class T>
__device__ __forceinline__ T aicf_shfl_down(T v, int off, unsigned mask) {
  if constexpr (sizeof(T) < 4)
    return static_cast<T>(__shfl_down_sync(mask, static_cast<int>(v), off));
  else
    return __shfl_down_sync(mask, v, off);
}

} // namespace
)";

// ---- expressions: the shared C-family printer (backend/c/c_expr.h), CUDA dialect -------------

// f32 and f64 spellings of the math functions (CUDA's device math library).
const char *cudaMath(UnOp op, bool f32) {
  switch (op) {
  case UnOp::Exp: return f32 ? "expf" : "exp";
  case UnOp::Log: return f32 ? "logf" : "log";
  case UnOp::Sqrt: return f32 ? "sqrtf" : "sqrt";
  case UnOp::Tanh: return f32 ? "tanhf" : "tanh";
  case UnOp::Erf: return f32 ? "erff" : "erf";
  case UnOp::Floor: return f32 ? "floorf" : "floor";
  case UnOp::Ceil: return f32 ? "ceilf" : "ceil";
  case UnOp::Round: return f32 ? "rintf" : "rint";
  case UnOp::Sin: return f32 ? "sinf" : "sin";
  case UnOp::Cos: return f32 ? "cosf" : "cos";
  default: return nullptr;
  }
}

// 16-bit floats are __half / __nv_bfloat16 with the cuda_fp16 / cuda_bf16 conversions; a local
// buffer is the thread's own register array, so its first (thread) index is not printed.
const cexpr::Dialect kCuda = {"CUDA printer",
                              "__half",
                              "__nv_bfloat16",
                              "__int_as_float(0x7fc00000)",
                              "__int_as_float(0x7f800000)",
                              "__int_as_float(-8388608)",
                              "__half2float",
                              "__bfloat162float",
                              "__float2half_rn",
                              "__float2bfloat16_rn",
                              "aicf_rh<float>",
                              "aicf_rbf<float>",
                              /*localPerThread=*/true,
                              cudaMath,
                              "fabsf",
                              "aicf_abs",
                              /*absOtherTemplated=*/true,
                              "powf",
                              "pow",
                              "fmodf",
                              "fmod",
                              "aicf_sigmoid<float>",
                              /*joinIndexDigits=*/false,
                              /*narrowSigned=*/"aicf_wrap",
                              /*narrowGathers=*/false};

const char *valueType(DType t) {
  return cexpr::valueType(t);
}
const char *storageType(DType t) {
  return cexpr::storageType(kCuda, t);
}
std::string intLiteral(int64_t v) {
  return cexpr::intLiteral(v);
}
std::string num(int64_t v) {
  return std::to_string(v);
}
std::string widen(DType t, const std::string &ref) {
  return cexpr::widen(kCuda, t, ref);
}
std::string narrowStr(DType t, DType vt, const std::string &s) {
  return cexpr::narrowStr(kCuda, t, vt, s);
}
struct Uses : cexpr::Uses {
  Uses() : cexpr::Uses(kCuda) {}
};

// ---- launch geometry ---------------------------------------------------------------------------

struct GridMap {
  std::vector<std::string> axisExpr; // per grid axis, its value from blockIdx
  int64_t dims[3] = {1, 1, 1};       // gridDim x, y, z
};

GridMap mapGrid(const Kernel &k) {
  GridMap g;
  size_t n = k.grid.size();
  if (!k.symGrid.empty()) {
    // A symbolic grid (issue 21): flattened on x, its extents computed from the dims in the
    // kernel (aicf_g<i>, as the launcher computes the block count); dims[0] unused.
    std::string stride;
    g.axisExpr.resize(n);
    for (size_t i = n; i-- > 0;) {
      std::string e = "static_cast<int64_t>(blockIdx.x)";
      if (!stride.empty())
        e = "(" + e + " / (" + stride + "))";
      if (i > 0)
        e = "(" + e + " % aicf_g" + std::to_string(i) + ")";
      g.axisExpr[i] = e;
      stride += (stride.empty() ? "" : " * ") + std::string("aicf_g") + std::to_string(i);
    }
    return g;
  }
  bool direct = n <= 3;
  for (size_t i = 0; i + 1 < n && direct; ++i) // axes mapped to y and z
    direct = k.grid[i].second <= kMaxGridYZ;
  if (direct) {
    static const char *const comps[] = {"x", "y", "z"};
    for (size_t i = 0; i < n; ++i) {
      size_t c = n - 1 - i;
      g.dims[c] = k.grid[i].second;
      g.axisExpr.push_back(std::string("static_cast<int64_t>(blockIdx.") + comps[c] + ")");
    }
    return g;
  }
  int64_t total = 1;
  for (const auto &[axis, extent] : k.grid)
    total *= extent;
  AICF_CHECK(total <= kMaxGridX, "CUDA printer: kernel ", k.name, " has ", total,
             " blocks, above CUDA's grid limit");
  g.dims[0] = total;
  int64_t stride = total;
  for (size_t i = 0; i < n; ++i) {
    stride /= k.grid[i].second;
    std::string e = "static_cast<int64_t>(blockIdx.x)";
    if (stride > 1)
      e = "(" + e + " / " + intLiteral(stride) + ")";
    if (i > 0)
      e = "(" + e + " % " + intLiteral(k.grid[i].second) + ")";
    g.axisExpr.push_back(e);
  }
  return g;
}

int64_t sharedTotal(const Kernel &k, std::vector<int64_t> *offsets) {
  int64_t total = 0;
  for (const BufferP &b : k.allocs) {
    if (b->scope != Scope::Shared)
      continue;
    total = alignUp(total, 16);
    if (offsets)
      offsets->push_back(total);
    total += b->numel() * static_cast<int64_t>(dtypeSize(b->dtype));
  }
  return total;
}

// ---- kernels: the shared C-family statement printer (backend/c/c_stmt.h), CUDA hooks -----

class KernelPrinter : public cstmt::StmtPrinter {
public:
  KernelPrinter(const Kernel &k, std::ostringstream &os, int64_t staticSharedMax)
      : StmtPrinter(kCuda, k, os), staticSharedMax_(staticSharedMax) {}

  void print() {
    GridMap gm = mapGrid(k_);
    std::vector<int64_t> offsets;
    int64_t shared = sharedTotal(k_, &offsets);
    int64_t dynamic = shared > staticSharedMax_ ? alignUp(shared, 16) : 0;

    kernelComment();
    // Tensor-core kernels state one block per SM as the minimum: without it ptxas aims at a
    // register count of its own and spills address registers around the fragment loads
    // (gpt2's 32 x 32 bf16 tiles on sm_80: 48 registers, 8-16 bytes of spills; with it, 72, none).
    os_ << "extern \"C\" __global__ void __launch_bounds__(" << k_.threads
        << (kir::kernelPrecision(k_) != Precision::F32 ? ", 1" : "") << ") " << k_.name << "(";
    for (size_t i = 0; i < k_.params.size(); ++i)
      os_ << (i ? ",\n    " : "") << paramType(k_.params[i]) << " *__restrict__ "
          << k_.params[i]->name;
    // Symbolic dims: their values by value (a CUDA Graph captures them, one per shape).
    for (size_t i = 0; i < k_.dims.size(); ++i)
      os_ << (i || !k_.params.empty() ? ",\n    " : "") << "const int64_t "
          << kir::dimVar(k_.dims[i]);
    os_ << ") {\n";
    for (size_t i = 0; i < k_.symGrid.size(); ++i)
      line(1, "[[maybe_unused]] const int64_t aicf_g" + std::to_string(i) + " = " +
                  cexpr::str(kCuda, kir::symE(k_.symGrid[i]).get()) + ";");
    for (size_t i = 0; i < k_.grid.size(); ++i)
      line(1, maybeUnusedVar(k_.grid[i].first) + "const int64_t " + k_.grid[i].first + " = " +
                  gm.axisExpr[i] + ";");
    if (dynamic)
      line(1, "extern __shared__ __align__(16) unsigned char aicf_smem[];");
    size_t si = 0;
    for (const BufferP &b : k_.allocs) {
      std::string T = storageType(b->dtype);
      if (b->scope == Scope::Shared) {
        if (dynamic)
          line(1, maybeUnused(b) + T + " *const " + b->name + " = reinterpret_cast<" + T +
                      " *>(aicf_smem + " + num(offsets[si]) + ");");
        else
          line(1, maybeUnused(b) + "__shared__ __align__(16) " + T + " " + b->name + "[" +
                      num(b->numel()) + "];");
        ++si;
      } else if (b->scope == Scope::Local) {
        int64_t per = b->shape.empty() || b->shape[0] == 0 ? 0 : b->numel() / b->shape[0];
        line(1, maybeUnused(b) + T + " " + b->name + "[" + num(std::max<int64_t>(per, 1)) +
                    "]; // registers: " + b->name + "[" + k_.threadVar + "] of local " +
                    shapeText(b->shape));
      }
    }
    block(1, k_.body);
    os_ << "}\n";
    printLauncher(gm, dynamic);
  }

private:
  int64_t staticSharedMax_; // above it, the shared buffers go to dynamic shared memory

  static std::string shapeText(const std::vector<int64_t> &s) {
    std::string r = "[";
    for (size_t i = 0; i < s.size(); ++i)
      r += (i ? ", " : "") + num(s[i]);
    return r + "]";
  }

  static std::string paramType(const BufferP &b) {
    return std::string(b->role == Role::In ? "const " : "") + storageType(b->dtype);
  }

  void printLauncher(const GridMap &gm, int64_t dynamic) {
    os_ << "extern \"C\" int aicf_launch_" << k_.name
        << "(void *const *args, cudaStream_t aicf_stream) {\n";
    if (k_.params.empty())
      line(1, "(void)args;");
    if (dynamic) {
      line(1, "static const cudaError_t aicf_attr = cudaFuncSetAttribute(" + k_.name +
                  ", cudaFuncAttributeMaxDynamicSharedMemorySize, " + num(dynamic) + ");");
      line(1, "if (aicf_attr != cudaSuccess)");
      line(2, "return static_cast<int>(aicf_attr);");
    }
    std::string grid =
        "dim3(" + num(gm.dims[0]) + ", " + num(gm.dims[1]) + ", " + num(gm.dims[2]) + ")";
    if (!k_.dims.empty()) {
      // The dims' values follow the buffers (host memory: read here, passed by value).
      line(1, "const int64_t *aicf_dims = static_cast<const int64_t *>(args[" +
                  num(static_cast<int64_t>(k_.params.size())) + "]);");
      for (size_t i = 0; i < k_.dims.size(); ++i)
        line(1, "[[maybe_unused]] const int64_t " + kir::dimVar(k_.dims[i]) + " = aicf_dims[" +
                    num(static_cast<int64_t>(i)) + "];");
    }
    if (!k_.symGrid.empty()) {
      std::string total;
      for (size_t i = 0; i < k_.symGrid.size(); ++i)
        total += (total.empty() ? "" : " * ") + std::string("(") +
                 cexpr::str(kCuda, kir::symE(k_.symGrid[i]).get()) + ")";
      line(1, "const int64_t aicf_blocks = " + total + ";");
      line(1, "if (aicf_blocks <= 0)");
      line(2, "return 0;");
      line(1, "if (aicf_blocks > " + num(kMaxGridX) + ")");
      line(2, "return static_cast<int>(cudaErrorInvalidConfiguration);");
      grid = "dim3(static_cast<unsigned>(aicf_blocks), 1, 1)";
    }
    std::string call = k_.name + "<<<" + grid + ", dim3(" + num(k_.threads) + "), " + num(dynamic) +
                       ", aicf_stream>>>(";
    for (size_t i = 0; i < k_.params.size(); ++i) {
      std::string T = paramType(k_.params[i]);
      call += (i ? ", " : "") + std::string("static_cast<") + T + " *>(args[" + num(i) + "])";
    }
    for (size_t i = 0; i < k_.dims.size(); ++i)
      call += (i || !k_.params.empty() ? ", " : "") + kir::dimVar(k_.dims[i]);
    line(1, call + ");");
    line(1, "return static_cast<int>(cudaGetLastError());");
    os_ << "}\n";
  }

  // A declaration is used when a later statement of its own block reads it.
  void block(int ind, const std::vector<StmtP> &body) override {
    for (size_t i = 0; i < body.size(); ++i) {
      if (body[i]->kind == Stmt::Kind::Decl) { // used by the statements after it in this block?
        Uses rest;
        rest.stmts(
            std::vector<StmtP>(body.begin() + static_cast<std::ptrdiff_t>(i) + 1, body.end()));
        declUsed_ = rest.vars.count(body[i]->var) > 0;
      }
      stmt(ind, *body[i]);
    }
  }
  bool declUsed_ = true;

  bool declUsed(const Stmt &) const override { return declUsed_; }

  // Unrolled and vectorised loops: unrolled by nvcc.
  std::string loopPragma(const Stmt &, int64_t unroll) const override {
    return "#pragma unroll " + std::to_string(unroll);
  }

  // A region is a block in which the thread var is threadIdx.x (blocks are `threads` wide).
  void region(int ind, const Stmt &s) override {
    Uses inRegion;
    inRegion.stmts(s.body);
    line(ind, "{ // region");
    line(ind + 1, std::string(inRegion.vars.count(s.var) ? "" : "[[maybe_unused]] ") +
                      "const int64_t " + s.var + " = static_cast<int64_t>(threadIdx.x);");
    block(ind + 1, s.body);
    line(ind, "}");
  }

  std::string barrier() const override { return "__syncthreads();"; }

  // The shuffle tree: for off = 16, 8, 4, 2, 1, lanes below `width - off` merge the state of
  // lane + off into theirs (the combiner's lets and merged fields, as the host prints them).
  void shuffleTree(int ind, const Combiner &c, const std::string &mask, const std::string &width) {
    line(0, "#pragma unroll");
    line(ind, "for (int aicf_off = 16; aicf_off > 0; aicf_off /= 2) {");
    for (size_t i = 0; i < c.fields.size(); ++i) {
      const auto &[field, dt] = c.fields[i];
      line(ind + 1, "[[maybe_unused]] const " + std::string(valueType(dt)) + " b_" + field +
                        " = aicf_shfl_down<" + valueType(dt) + ">(aicf_r" + num(i) +
                        ", aicf_off, " + mask + ");");
    }
    line(ind + 1, "if (aicf_lane + aicf_off < " + width + ") {");
    for (size_t i = 0; i < c.fields.size(); ++i) {
      const auto &[field, dt] = c.fields[i];
      line(ind + 2, "[[maybe_unused]] const " + std::string(valueType(dt)) + " a_" + field +
                        " = aicf_r" + num(i) + ";");
    }
    combinerMerge(ind + 2, c);
    line(ind + 1, "}");
    line(ind, "}");
  }

  void blockReduce(int ind, const Stmt &s) override {
    const Combiner &c = s.combiner;
    size_t nf = c.fields.size();
    int64_t warps = (k_.threads + 31) / 32, rem = k_.threads % 32;
    line(ind, "{ // block_reduce " + c.name +
                  ": warp shuffles, one shared-memory exchange across warps");
    line(ind + 1, "const int aicf_lane = static_cast<int>(threadIdx.x) % 32;");
    line(ind + 1, std::string(warps > 1 || rem ? "" : "[[maybe_unused]] ") +
                      "const int aicf_warp = static_cast<int>(threadIdx.x) / 32;");
    for (size_t i = 0; i < nf; ++i)
      line(ind + 1, std::string(valueType(c.fields[i].second)) + " aicf_r" + num(i) + " = " +
                        widen(s.src[i]->dtype, s.src[i]->name + "[0]") + ";");
    // Lanes of this warp that hold a thread (the last warp is partial when threads % 32 != 0).
    std::string width = "32", mask = "0xffffffffu";
    if (rem) {
      std::string last = num(warps - 1), partial = num((uint64_t(1) << rem) - 1) + "u";
      width = warps == 1 ? num(rem) : "(aicf_warp == " + last + " ? " + num(rem) + " : 32)";
      mask = warps == 1 ? partial : "(aicf_warp == " + last + " ? " + partial + " : 0xffffffffu)";
      line(ind + 1, "const unsigned aicf_mask = " + mask + ";");
      line(ind + 1, "const int aicf_width = " + width + ";");
      mask = "aicf_mask";
      width = "aicf_width";
    }
    shuffleTree(ind + 1, c, mask, width);
    auto writeDst = [&](int in) {
      line(in, "if (aicf_lane == 0) {");
      for (size_t i = 0; i < nf; ++i)
        line(in + 1, s.dst[i]->name + "[0] = " +
                         narrowStr(s.dst[i]->dtype, c.fields[i].second, "aicf_r" + num(i)) + ";");
      line(in, "}");
    };
    if (warps == 1) {
      writeDst(ind + 1);
    } else {
      for (size_t i = 0; i < nf; ++i)
        line(ind + 1, "__shared__ " + std::string(valueType(c.fields[i].second)) + " aicf_w" +
                          num(i) + "[" + num(warps) + "];");
      line(ind + 1, "if (aicf_lane == 0) {");
      for (size_t i = 0; i < nf; ++i)
        line(ind + 2, "aicf_w" + num(i) + "[aicf_warp] = aicf_r" + num(i) + ";");
      line(ind + 1, "}");
      line(ind + 1, "__syncthreads();");
      line(ind + 1, "if (aicf_warp == 0) {");
      for (size_t i = 0; i < nf; ++i)
        line(ind + 2, "aicf_r" + num(i) + " = aicf_w" + num(i) + "[aicf_lane < " + num(warps) +
                          " ? aicf_lane : 0];");
      shuffleTree(ind + 2, c, "0xffffffffu", num(warps));
      writeDst(ind + 2);
      line(ind + 1, "}");
    }
    line(ind + 1, "__syncthreads();");
    line(ind, "}");
  }

  // Each k step is a rank-1 update of the thread's tm x tn accumulators from a column of A's
  // tile and a row of B's. Shared-memory offsets are 32-bit (tiles are far below 2^31 floats)
  // and the k loop is unrolled by 4, so the address arithmetic folds into the loads. With f32
  // tiles whose k extent is a multiple of 4, four k steps share 128-bit loads: a float4 of A per
  // row (A's tile is row-major, [m, k]) and float4s of B's rows where tn is a multiple of 4 (the
  // thread's columns start at a multiple of tn). Same products, same k order per accumulator.
  // Tensor-core fragments (kir.h): each warp walks k in instruction steps; per step it loads
  // its A fragments (16 rows each) and B fragments (8 columns each) from the staged tiles and
  // issues one mma.sync per (16 x 8) accumulator, whose four floats are the thread's C
  // elements (2 mi + {0, 1}, 2 ni + {0, 1}). f16 / bf16 fragments come through ldmatrix (A
  // row-major, B transposed from its k-major rows); tf32 ones are loaded as floats and
  // rounded with cvt.rna.tf32.f32.
  void fragments(int ind, const Stmt &s) {
    const bool tf32 = s.frag == kir::MmaFrag::M16N8K8;
    const int64_t fk = kir::mmaFragK(s.frag), mt = s.tm / 2, nt = s.tn / 2;
    const int64_t warpCols = s.n / (4 * s.tn);
    const std::string a = s.a->name, b = s.b->name, c = s.c->name;
    line(ind, std::string("{ // mma_tile ") + c + " += " + a + " x " + b + " (m = " + num(s.m) +
                  ", n = " + num(s.n) + ", k = " + num(s.k) + ", tm = " + num(s.tm) +
                  ", tn = " + num(s.tn) + ", frag = " + kir::mmaFragName(s.frag) + ")");
    line(ind + 1, "const int aicf_w = static_cast<int>(threadIdx.x) / 32, aicf_l = "
                  "static_cast<int>(threadIdx.x) % 32;");
    line(ind + 1, "const int aicf_wr = aicf_w / " + num(warpCols) + " * " + num(8 * s.tm) +
                      ", aicf_wc = aicf_w % " + num(warpCols) + " * " + num(4 * s.tn) + ";");
    line(0, "#pragma unroll");
    line(ind + 1, "for (int aicf_k = 0; aicf_k < " + num(s.k) + "; aicf_k += " + num(fk) + ") {");
    line(ind + 2, "unsigned aicf_fa[" + num(mt) + "][4], aicf_fb[" + num(nt) + "][2];");
    if (tf32) {
      // m16n8k8 tf32: a0 (g, q), a1 (g + 8, q), a2 (g, q + 4), a3 (g + 8, q + 4); b0 (q, g),
      // b1 (q + 4, g); g = lane / 4, q = lane % 4.
      line(ind + 2, "const int aicf_g = aicf_l / 4, aicf_q = aicf_l % 4;");
      line(0, "#pragma unroll");
      line(ind + 2, "for (int aicf_mi = 0; aicf_mi < " + num(mt) + "; ++aicf_mi) {");
      line(ind + 3, "const float *aicf_p = &" + a + "[(aicf_wr + aicf_mi * 16 + aicf_g) * " +
                        num(s.k) + " + aicf_k + aicf_q];");
      for (int r = 0; r < 4; ++r)
        line(ind + 3, "asm(\"cvt.rna.tf32.f32 %0, %1;\\n\" : \"=r\"(aicf_fa[aicf_mi][" +
                          std::to_string(r) + "]) : \"f\"(aicf_p[" +
                          std::string(r == 0   ? "0"
                                      : r == 1 ? "8 * " + num(s.k)
                                      : r == 2 ? "4"
                                               : "8 * " + num(s.k) + " + 4") +
                          "]));");
      line(ind + 2, "}");
      line(0, "#pragma unroll");
      line(ind + 2, "for (int aicf_ni = 0; aicf_ni < " + num(nt) + "; ++aicf_ni) {");
      line(ind + 3, "const float *aicf_p = &" + b + "[(aicf_k + aicf_q) * " + num(s.n) +
                        " + aicf_wc + aicf_ni * 8 + aicf_g];");
      for (int r = 0; r < 2; ++r)
        line(ind + 3, "asm(\"cvt.rna.tf32.f32 %0, %1;\\n\" : \"=r\"(aicf_fb[aicf_ni][" +
                          std::to_string(r) + "]) : \"f\"(aicf_p[" +
                          std::string(r == 0 ? "0" : "4 * " + num(s.n)) + "]));");
      line(ind + 2, "}");
    } else {
      // ldmatrix.x4: lanes 0-15 give rows 0-15 of the 16 x 16 A block at column 0, lanes 16-31
      // the same rows at column 8: registers a0..a3 as mma.sync wants them. ldmatrix.x2.trans:
      // lanes 0-15 give B's k rows 0-15 at the fragment's 8 columns; transposed, each thread
      // holds (k = 2 (lane % 4) + {0, 1}, n = lane / 4) and the same 8 rows on: b0, b1.
      line(0, "#pragma unroll");
      line(ind + 2, "for (int aicf_mi = 0; aicf_mi < " + num(mt) + "; ++aicf_mi) {");
      line(ind + 3, "const unsigned aicf_p = static_cast<unsigned>(__cvta_generic_to_shared(&" + a +
                        "[(aicf_wr + aicf_mi * 16 + aicf_l % 16) * " + num(s.k) +
                        " + aicf_k + aicf_l / 16 * 8]));");
      line(ind + 3, "asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, "
                    "[%4];\\n\" : \"=r\"(aicf_fa[aicf_mi][0]), \"=r\"(aicf_fa[aicf_mi][1]), "
                    "\"=r\"(aicf_fa[aicf_mi][2]), \"=r\"(aicf_fa[aicf_mi][3]) : \"r\"(aicf_p));");
      line(ind + 2, "}");
      line(0, "#pragma unroll");
      line(ind + 2, "for (int aicf_ni = 0; aicf_ni < " + num(nt) + "; ++aicf_ni) {");
      line(ind + 3, "const unsigned aicf_p = static_cast<unsigned>(__cvta_generic_to_shared(&" + b +
                        "[(aicf_k + aicf_l % 16) * " + num(s.n) + " + aicf_wc + aicf_ni * 8]));");
      line(ind + 3, "asm volatile(\"ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, "
                    "[%2];\\n\" : \"=r\"(aicf_fb[aicf_ni][0]), \"=r\"(aicf_fb[aicf_ni][1]) : "
                    "\"r\"(aicf_p));");
      line(ind + 2, "}");
    }
    std::string type = tf32 ? "tf32.tf32" : s.a->dtype == DType::BF16 ? "bf16.bf16" : "f16.f16";
    std::string shape = tf32 ? "m16n8k8" : "m16n8k16";
    std::string aRegs = "{%4, %5, %6, %7}";
    line(0, "#pragma unroll");
    line(ind + 2, "for (int aicf_mi = 0; aicf_mi < " + num(mt) + "; ++aicf_mi)");
    line(0, "#pragma unroll");
    line(ind + 3, "for (int aicf_ni = 0; aicf_ni < " + num(nt) + "; ++aicf_ni) {");
    auto acc = [&](int r) {
      return c + "[(aicf_mi * 2 + " + std::to_string(r / 2) + ") * " + num(s.tn) +
             " + aicf_ni * 2 + " + std::to_string(r % 2) + "]";
    };
    line(ind + 4, "asm volatile(\"mma.sync.aligned." + shape + ".row.col.f32." + type +
                      ".f32 {%0, %1, %2, %3}, " + aRegs +
                      ", {%8, %9}, {%0, %1, %2, %3};\\n\" : \"+f\"(" + acc(0) + "), \"+f\"(" +
                      acc(1) + "), \"+f\"(" + acc(2) + "), \"+f\"(" + acc(3) +
                      ") : "
                      "\"r\"(aicf_fa[aicf_mi][0]), \"r\"(aicf_fa[aicf_mi][1]), "
                      "\"r\"(aicf_fa[aicf_mi][2]), \"r\"(aicf_fa[aicf_mi][3]), "
                      "\"r\"(aicf_fb[aicf_ni][0]), \"r\"(aicf_fb[aicf_ni][1]));");
    line(ind + 3, "}");
    line(ind + 1, "}");
    line(ind, "}");
  }

  void mmaTile(int ind, const Stmt &s) override {
    AICF_CHECK(!s.views, "cuda printer: mma_tile operand views are a host-plan form (", k_.name,
               ")");
    if (s.frag != kir::MmaFrag::None) {
      fragments(ind, s);
      return;
    }
    int64_t colTiles = s.n / s.tn;
    line(ind, "{ // mma_tile " + s.c->name + " += " + s.a->name + " x " + s.b->name +
                  " (m = " + num(s.m) + ", n = " + num(s.n) + ", k = " + num(s.k) +
                  ", tm = " + num(s.tm) + ", tn = " + num(s.tn) + ")");
    line(ind + 1, "const int aicf_r0 = static_cast<int>(threadIdx.x) / " + num(colTiles) + " * " +
                      num(s.tm) + ", aicf_c0 = static_cast<int>(threadIdx.x) % " + num(colTiles) +
                      " * " + num(s.tn) + ";");
    bool f32 = s.a->dtype == DType::F32 && s.b->dtype == DType::F32 &&
               s.a->scope == Scope::Shared && s.b->scope == Scope::Shared;
    if (f32 && s.k % 4 == 0) {
      bool bVec = s.tn % 4 == 0 && s.n % 4 == 0;
      line(ind + 1, "for (int aicf_k = 0; aicf_k < " + num(s.k) + "; aicf_k += 4) {");
      line(ind + 2, "float4 aicf_a[" + num(s.tm) + "];");
      line(0, "#pragma unroll");
      line(ind + 2, "for (int aicf_i = 0; aicf_i < " + num(s.tm) + "; ++aicf_i)");
      line(ind + 3, "aicf_a[aicf_i] = *reinterpret_cast<const float4 *>(&" + s.a->name +
                        "[(aicf_r0 + aicf_i) * " + num(s.k) + " + aicf_k]);");
      line(0, "#pragma unroll");
      line(ind + 2, "for (int aicf_q = 0; aicf_q < 4; ++aicf_q) {");
      line(ind + 3, "float aicf_b[" + num(s.tn) + "];");
      std::string row = "(aicf_k + aicf_q) * " + num(s.n) + " + aicf_c0";
      if (bVec) {
        line(0, "#pragma unroll");
        line(ind + 3, "for (int aicf_j = 0; aicf_j < " + num(s.tn) + "; aicf_j += 4)");
        line(ind + 4, "*reinterpret_cast<float4 *>(&aicf_b[aicf_j]) = "
                      "*reinterpret_cast<const float4 *>(&" +
                          s.b->name + "[" + row + " + aicf_j]);");
      } else {
        line(0, "#pragma unroll");
        line(ind + 3, "for (int aicf_j = 0; aicf_j < " + num(s.tn) + "; ++aicf_j)");
        line(ind + 4, "aicf_b[aicf_j] = " + s.b->name + "[" + row + " + aicf_j];");
      }
      line(0, "#pragma unroll");
      line(ind + 3, "for (int aicf_i = 0; aicf_i < " + num(s.tm) + "; ++aicf_i) {");
      line(ind + 4, "const float aicf_ai = aicf_q == 0 ? aicf_a[aicf_i].x : aicf_q == 1 ? "
                    "aicf_a[aicf_i].y : aicf_q == 2 ? aicf_a[aicf_i].z : aicf_a[aicf_i].w;");
      line(0, "#pragma unroll");
      line(ind + 4, "for (int aicf_j = 0; aicf_j < " + num(s.tn) + "; ++aicf_j)");
      line(ind + 5,
           s.c->name + "[aicf_i * " + num(s.tn) + " + aicf_j] += aicf_ai * aicf_b[aicf_j];");
      line(ind + 3, "}");
      line(ind + 2, "}");
      line(ind + 1, "}");
      line(ind, "}");
      return;
    }
    line(0, "#pragma unroll 4");
    line(ind + 1, "for (int aicf_k = 0; aicf_k < " + num(s.k) + "; ++aicf_k) {");
    line(ind + 2, "float aicf_a[" + num(s.tm) + "], aicf_b[" + num(s.tn) + "];");
    line(0, "#pragma unroll");
    line(ind + 2, "for (int aicf_i = 0; aicf_i < " + num(s.tm) + "; ++aicf_i)");
    line(ind + 3,
         "aicf_a[aicf_i] = " +
             widen(s.a->dtype, s.a->name + "[(aicf_r0 + aicf_i) * " + num(s.k) + " + aicf_k]") +
             ";");
    line(0, "#pragma unroll");
    line(ind + 2, "for (int aicf_j = 0; aicf_j < " + num(s.tn) + "; ++aicf_j)");
    line(ind + 3,
         "aicf_b[aicf_j] = " +
             widen(s.b->dtype, s.b->name + "[aicf_k * " + num(s.n) + " + aicf_c0 + aicf_j]") + ";");
    line(0, "#pragma unroll");
    line(ind + 2, "for (int aicf_i = 0; aicf_i < " + num(s.tm) + "; ++aicf_i)");
    line(0, "#pragma unroll");
    line(ind + 3, "for (int aicf_j = 0; aicf_j < " + num(s.tn) + "; ++aicf_j)");
    line(ind + 4,
         s.c->name + "[aicf_i * " + num(s.tn) + " + aicf_j] += aicf_a[aicf_i] * aicf_b[aicf_j];");
    line(ind + 1, "}");
    line(ind, "}");
  }
};

} // namespace

int64_t cudaDynamicSharedBytes(const kir::Kernel &k, const Hardware &hw) {
  int64_t shared = sharedTotal(k, nullptr);
  return shared > hw.smemStaticMax ? alignUp(shared, 16) : 0;
}

std::string printCudaSource(const std::vector<kir::Kernel> &kernels, const Target &target) {
  std::ostringstream os;
  os << "// Generated by aicf (CUDA target, " << target.arch << "): " << kernels.size()
     << " kernel(s). Do not edit.\n";
  os << kPrelude;
  for (const kir::Kernel &k : kernels) {
    if (std::string all = kir::verifyKernelText(k); !all.empty())
      throwInternal(__FILE__, __LINE__, "CUDA printer: invalid kernel" + all);
    os << "\n";
    KernelPrinter(k, os, target.hw.smemStaticMax).print();
  }
  return os.str();
}

} // namespace aicf
