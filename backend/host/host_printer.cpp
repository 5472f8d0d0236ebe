// The host C++ printer (printHostSource, docs/architecture.md): spells verified Kernel IR as C++17
// for g++ -O3 -fopenmp-simd -march=native, adding no logic of its own:
//   * each kernel is   extern "C" void NAME(void *const *args, int64_t lo, int64_t hi),   which
//     calls the always-inlined NAME_body with args[i] cast to a typed __restrict pointer
//     parameter for params[i] (const for `in` params);
//   * grid axes -> one loop over the blocks [lo, hi) of the flattened grid (row-major over the
//     axes), each axis unflattened from the block index: the runtime's thread pool hands out
//     the chunks of a step (runtime/thread_pool.h), the kernel owns no threads;
//   * shared / local buffers -> alignas(64) stack arrays (local ones [threads][...] flattened),
//     or, above 64 KiB (or once 256 KiB of stack is used), a 64-byte aligned heap buffer per
//     call (one chunk of blocks), freed at its end;
//   * a region -> a loop over thread ids; a barrier -> a comment (regions already run in order);
//     block_reduce -> a sequential merge of src[0..threads) with the combiner; mma_tile -> the
//     register-blocked GCC-vector micro-kernel in the prelude when the thread tile allows
//     (f32 operands, tn a multiple of 16), else plain loops;
//   * f16/bf16 loads widen to float and stores narrow (round to nearest even); float exp / tanh /
//     erf -> the prelude's branch-free aicf_expf / aicf_tanhf / aicf_erff (vectorisable, <= 2.5e-7
//     relative error), sigmoid -> 1/(1+exp(-x)), rsqrt -> 1/sqrt, round -> std::nearbyint (half to
//     even), min/max propagate NaN (as the reference interpreter does), int Div/Mod are C's;
//   * a load gathering across a vectorised loop's lanes indexes with a 32-bit offset
//     (cexpr::Dialect::narrowGathers: g++ 12 emulates no gather of 16 floats from 64-bit ones).
// The output is a pure function of the kernels (same kernels -> same bytes) and compiles
// warning-free with -Wall -Wextra.
#include "backend/host/host_printer.h"
#include "backend/host/host_mma_prelude.h"

#include "backend/c/c_expr.h"
#include "backend/c/c_stmt.h"
#include "kir/version_lane_guards.h"
#include "support/diagnostics.h"
#include "support/half.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace aicf {
namespace {

using namespace kir;

// Buffers above this many bytes (or beyond kStackBudget in total) live on the heap.
constexpr int64_t kStackLimit = 64 * 1024;
constexpr int64_t kStackBudget = 256 * 1024;

// ---- expressions: the shared C-family printer (backend/c/c_expr.h), host dialect -------------

// f32: the call takes and returns float (exp/tanh/erf then use the vectorisable prelude
// versions); otherwise it is made in double.
const char *hostMath(UnOp op, bool f32) {
  switch (op) {
  case UnOp::Exp: return f32 ? "aicf_expf" : "std::exp";
  case UnOp::Log: return "std::log";
  case UnOp::Sqrt: return "std::sqrt";
  case UnOp::Tanh: return f32 ? "aicf_tanhf" : "std::tanh";
  case UnOp::Erf: return f32 ? "aicf_erff" : "std::erf";
  case UnOp::Floor: return "std::floor";
  case UnOp::Ceil: return "std::ceil";
  case UnOp::Round: return "std::nearbyint";
  case UnOp::Sin: return "std::sin";
  case UnOp::Cos: return "std::cos";
  default: return nullptr;
  }
}

// 16-bit floats are stored as uint16_t bits, converted by the prelude's aicf_* functions;
// local buffers are [threads][...] arrays indexed in full.
const cexpr::Dialect kHost = {"host printer",
                              "uint16_t",
                              "uint16_t",
                              "__builtin_nanf(\"\")",
                              "__builtin_inff()",
                              "-__builtin_inff()",
                              "aicf_h2f",
                              "aicf_bf2f",
                              "aicf_f2h",
                              "aicf_f2bf",
                              "aicf_rh",
                              "aicf_rbf",
                              /*localPerThread=*/false,
                              hostMath,
                              "std::abs",
                              "std::abs",
                              /*absOtherTemplated=*/false,
                              "std::pow",
                              "std::pow",
                              "std::fmod",
                              "std::fmod",
                              "aicf_sigmoid",
                              /*joinIndexDigits=*/true,
                              /*narrowSigned=*/nullptr,
                              /*narrowGathers=*/true};

const char *valueType(DType t) {
  return cexpr::valueType(t);
}
const char *storageType(DType t) {
  return cexpr::storageType(kHost, t);
}
std::string intLiteral(int64_t v) {
  return cexpr::intLiteral(v);
}

// ---- kernels: the shared C-family statement printer (backend/c/c_stmt.h), host hooks -----

class KernelPrinter : public cstmt::StmtPrinter {
public:
  KernelPrinter(const Kernel &k, std::ostringstream &os, HostVectorUnit unit)
      : StmtPrinter(kHost, k, os), unit_(unit) {}

  void print() {
    kernelComment();
    // The body is a function of typed __restrict parameters, inlined into the entry point: g++
    // honours restrict on parameters but not on locals cast from args[] (it then checked every
    // pair of a store and a load at run time, and gave up past ten pairs: a QDQ epilogue reading
    // 13 scalars stayed scalar, 13x its prediction). Distinct params never overlap; the one
    // exception, a pointwise step writing over its dying input, reads each element before it
    // stores it at the same index.
    std::vector<std::string> typed;
    for (const BufferP &b : k_.params)
      typed.push_back(std::string(b->role == Role::In ? "const " : "") + storageType(b->dtype));
    os_ << "static inline __attribute__((always_inline)) void " << k_.name << "_body(";
    for (size_t i = 0; i < k_.params.size(); ++i)
      os_ << maybeUnused(k_.params[i]) << typed[i] << " *__restrict " << k_.params[i]->name << ", ";
    if (!k_.dims.empty())
      os_ << "const int64_t *aicf_dims, ";
    os_ << "[[maybe_unused]] int64_t lo, [[maybe_unused]] int64_t hi) {\n";
    // Symbolic dims (issue 21): their values follow the params, one int64 array for all.
    if (!k_.dims.empty()) {
      for (size_t i = 0; i < k_.dims.size(); ++i)
        line(1, "[[maybe_unused]] const int64_t " + kir::dimVar(k_.dims[i]) + " = aicf_dims[" +
                    std::to_string(i) + "];");
    }
    // Split on-chip buffers between the stack (per block) and the heap (per call).
    std::vector<BufferP> onStack, onHeap;
    int64_t stackBytes = 0;
    for (const BufferP &b : k_.allocs) {
      int64_t bytes = b->numel() * static_cast<int64_t>(dtypeSize(b->dtype));
      if (bytes <= kStackLimit && stackBytes + bytes <= kStackBudget) {
        onStack.push_back(b);
        stackBytes += bytes;
      } else {
        onHeap.push_back(b);
      }
    }
    int ind = 1;
    bool parallel = !k_.grid.empty();
    line(ind, "{");
    ++ind;
    for (const BufferP &b : onHeap) {
      std::string T = storageType(b->dtype);
      line(ind, maybeUnused(b) + T + " *__restrict " + b->name + " = static_cast<" + T +
                    " *>(aicf_alloc(" + std::to_string(b->numel()) + " * sizeof(" + T + ")));");
    }
    if (parallel && !k_.symGrid.empty()) {
      // A symbolic grid: the extents from the dims, the blocks unflattened by division.
      std::vector<std::string> ext;
      for (size_t i = 0; i < k_.grid.size(); ++i) {
        ext.push_back("aicf_g" + std::to_string(i));
        line(ind, "const int64_t " + ext.back() + " = " +
                      cexpr::str(kHost, kir::symE(k_.symGrid[i]).get()) + ";");
      }
      std::string total;
      for (const std::string &e : ext)
        total += (total.empty() ? "" : " * ") + e;
      line(ind, "const int64_t aicf_n = " + total + ";");
      line(ind, "const int64_t aicf_end = hi < aicf_n ? hi : aicf_n;");
      line(ind, "for (int64_t aicf_blk = lo < 0L ? 0L : lo; aicf_blk < aicf_end; ++aicf_blk) {");
      ++ind;
      std::string stride;
      for (size_t i = k_.grid.size(); i-- > 0;) {
        std::string e = stride.empty() ? "aicf_blk" : "aicf_blk / (" + stride + ")";
        if (i > 0)
          e = "(" + e + ") % " + ext[i];
        line(ind, maybeUnusedVar(k_.grid[i].first) + "const int64_t " + k_.grid[i].first + " = " +
                      e + ";");
        stride += (stride.empty() ? "" : " * ") + ext[i];
      }
    } else if (parallel) {
      int64_t stride = 1;
      for (const auto &[axis, extent] : k_.grid)
        stride *= extent;
      line(ind, "const int64_t aicf_end = hi < " + intLiteral(stride) +
                    " ? hi : " + intLiteral(stride) + ";");
      line(ind, "for (int64_t aicf_blk = lo < 0L ? 0L : lo; aicf_blk < aicf_end; ++aicf_blk) {");
      ++ind;
      for (size_t i = 0; i < k_.grid.size(); ++i) {
        const auto &[axis, extent] = k_.grid[i];
        stride /= extent;
        std::string e = "aicf_blk";
        if (stride > 1)
          e = e + " / " + intLiteral(stride);
        if (i > 0)
          e = "(" + e + ") % " + intLiteral(extent);
        line(ind, maybeUnusedVar(axis) + "const int64_t " + axis + " = " + e + ";");
      }
    }
    // A stack buffer is used through a restrict pointer, as the heap ones are: g++ scalarised
    // a fused mma_tile epilogue storing into a stack array its lambda captures (the conv
    // chain's ring: 16 vmovss per vector; 0.29 -> 0.11 ms on a MobileNet-V3 block).
    for (const BufferP &b : onStack) {
      std::string T = storageType(b->dtype);
      line(ind,
           "alignas(64) " + T + " aicf_s_" + b->name + "[" + std::to_string(b->numel()) + "];");
      line(ind, maybeUnused(b) + T + " *__restrict " + b->name + " = aicf_s_" + b->name + ";");
    }
    block(ind, k_.body);
    if (parallel) {
      --ind;
      line(ind, "}");
    }
    for (const BufferP &b : onHeap)
      line(ind, "aicf_release(" + b->name + ");");
    --ind;
    line(ind, "}");
    os_ << "}\n";
    os_ << "extern \"C\" void " << k_.name
        << "(void *const *args, [[maybe_unused]] int64_t lo, [[maybe_unused]] int64_t hi) {\n";
    if (k_.params.empty() && k_.dims.empty())
      line(1, "(void)args;");
    std::string call = k_.name + "_body(";
    for (size_t i = 0; i < k_.params.size(); ++i)
      call += "static_cast<" + typed[i] + " *>(args[" + std::to_string(i) + "]), ";
    if (!k_.dims.empty())
      call += "static_cast<const int64_t *>(args[" + std::to_string(k_.params.size()) + "]), ";
    line(1, call + "lo, hi);");
    os_ << "}\n";
  }

private:
  HostVectorUnit unit_; // the micro-kernel's registers (rowBlockHeights)

  // Unrolled loops -> GCC's unroll pragma; vectorised loops -> an OpenMP simd loop (with the
  // reductions of kir::loopReductions: g++ reassociates a float sum only when told). Not ivdep:
  // g++ 12 unrolled a 16-lane ivdep loop to scalar code before vectorising (an SE gate: 47 us).
  std::string loopPragma(const Stmt &s, int64_t unroll) const override {
    if (s.loop == Stmt::LoopKind::Unrolled)
      return "#pragma GCC unroll " + std::to_string(unroll);
    std::optional<std::vector<LoopReduction>> reds = loopReductions(s);
    if (!reds)
      return "";
    if (reds->empty())
      return "#pragma omp simd";
    std::string p = "#pragma omp simd";
    for (const LoopReduction &r : *reds)
      p += cat(" reduction(",
               r.op == BinOp::Add   ? "+"
               : r.op == BinOp::Max ? "max"
                                    : "min",
               ":", r.var, ")");
    return p;
  }

  // A region is a loop over the thread ids (regions run in order, so barriers need no code).
  void region(int ind, const Stmt &s) override {
    line(ind, "for (int64_t " + s.var + " = 0; " + s.var + " < " + intLiteral(k_.threads) + "; ++" +
                  s.var + ") { // region");
    block(ind + 1, s.body);
    line(ind, "}");
  }

  std::string barrier() const override { return "// barrier"; }

  bool declUsed(const Stmt &s) const override { return uses_.vars.count(s.var) > 0; }

  void blockReduce(int ind, const Stmt &s) override {
    const Combiner &c = s.combiner;
    size_t nf = c.fields.size();
    auto acc = [](size_t i) { return "aicf_r" + std::to_string(i); };
    auto elem = [](const BufferP &b, const std::string &i) {
      std::string ref = b->name + "[" + i + "]";
      if (b->dtype == DType::F16)
        return "aicf_h2f(" + ref + ")";
      if (b->dtype == DType::BF16)
        return "aicf_bf2f(" + ref + ")";
      if (b->dtype == DType::Bool)
        return "(" + ref + " != 0)";
      return ref;
    };
    line(ind, "{ // block_reduce " + c.name);
    for (size_t i = 0; i < nf; ++i)
      line(ind + 1, std::string(valueType(c.fields[i].second)) + " " + acc(i) + " = " +
                        elem(s.src[i], "0") + ";");
    line(ind + 1, "for (int64_t aicf_i = 1; aicf_i < " + intLiteral(k_.threads) + "; ++aicf_i) {");
    for (size_t i = 0; i < nf; ++i) {
      const auto &[field, dt] = c.fields[i];
      std::string T = valueType(dt);
      line(ind + 2, "[[maybe_unused]] const " + T + " a_" + field + " = " + acc(i) + ";");
      line(ind + 2,
           "[[maybe_unused]] const " + T + " b_" + field + " = " + elem(s.src[i], "aicf_i") + ";");
    }
    combinerMerge(ind + 2, c);
    line(ind + 1, "}");
    for (size_t i = 0; i < nf; ++i) {
      const BufferP &d = s.dst[i];
      std::string v = acc(i);
      if (d->dtype == DType::F16)
        v = "aicf_f2h(" + v + ")";
      else if (d->dtype == DType::BF16)
        v = "aicf_f2bf(" + v + ")";
      else if (d->dtype == DType::Bool)
        v = "static_cast<uint8_t>(" + v + ")";
      line(ind + 1, d->name + "[0] = " + v + ";");
    }
    line(ind, "}");
  }

  // aicf_taps's arguments after the blocks: the tile's rows (lo, hi) and the rule (kir.h aTaps).
  std::string tapArgs(const Stmt &s) {
    std::string a = ", " + ex(s.indices[6]) + ", " + ex(s.indices[7]);
    for (int64_t t : s.aTaps)
      a += ", " + std::to_string(t) + "L";
    return a + ")";
  }

  // aicf_mma_f32_panels's template arguments: the panel's vectors, the prefetch, for an int8 B
  // A's shift, and for B on AMX tiles the tiles.
  static std::string panelArgs(const Stmt &s) {
    std::string args = std::to_string(s.bPanel / 16);
    if (s.b->dtype == DType::I8)
      return args + (s.bPrefetch ? ", true, " : ", false, ") + std::to_string(s.aShift) +
             (s.bTiles ? ", true" : "");
    if (s.bTiles)
      return args + (s.bPrefetch ? ", true" : ", false") + ", 0, true";
    return args + (s.bPrefetch ? ", true" : "");
  }

  // A fused mma_tile (kir.h): its init and epilogue as lambdas over one accumulator vector (the
  // tile's row i, columns j .. j + 15 as aicf_v[jl]), which the micro-kernel calls on its
  // registers (the prelude's aicf_fuse); `at` and `sizes` are the unfused call's arguments.
  void fusedMmaTile(int ind, const Stmt &s, const std::string &at, std::string sizes) {
    auto n = [](int64_t v) { return std::to_string(v) + "L"; };
    sizes.resize(sizes.size() - 2);        // the unfused call's ");"
    if (s.aBlocks.empty() && !s.bFirstCol) // (with bFirstCol the unfused call passes them)
      sizes += ", aicf_kblocks{0, 0, 0, 0, 0, 0, 16}";
    if (s.bPanel && !s.bFirstCol)
      sizes += ", 0";
    auto v = std::make_shared<Buffer>();
    v->name = "aicf_v";
    v->shape = {16};
    line(ind, "{");
    lambda(ind + 1, "aicf_init", s, s.init, v);
    lambda(ind + 1, "aicf_epi", s, s.body, v);
    // The block widths: the panel's (the micro-kernel's default 2 vectors for B rows), and
    // single vectors where a tile starts or ends inside a panel.
    int64_t nv = s.bPanel ? s.bPanel / 16 : 2;
    std::string heights;
    for (int64_t h : rowBlockHeights(s, nv))
      heights += (heights.empty() ? "" : ", ") + std::to_string(h);
    bool tails = s.bFirstCol || s.tn % (16 * nv) != 0;
    std::string x = "aicf_fuse<" + std::to_string((1 << nv) | (tails ? 2 : 0)) + ", " +
                    (transcendental(s.init) || transcendental(s.body) ? "true" : "false") + ", " +
                    heights + ">(" + ex(s.first) + ", " + ex(s.last) + ", aicf_init, aicf_epi));";
    if (s.bPanel)
      line(ind + 1, "aicf_mma_f32_panels<" + panelArgs(s) + ">(" + s.c->name + ", " + n(s.tn) +
                        ", " + at + n(s.bPanelStride) + ", " + sizes + ", " + x);
    else
      line(ind + 1, "aicf_mma_f32(" + s.c->name + ", " + n(s.tn) + ", " + at + n(s.ldb) + ", " +
                        sizes + ", " + x);
    line(ind, "}");
  }

  // The row-block heights the prelude's aicf_mma_rows gives the tile's valid rows over the
  // grid (runs of G rows with row groups): hostRowBlocks (the fewest blocks up to the register
  // block's rows, 8, 7 when nv = 4 on AVX-512 or on AVX2, there 6 where that takes at most a
  // quarter more blocks; heights within one of each other) for a blocked A or a register block
  // under 8 rows, else 8s, then 4, 2 and 1 (the default AICF_MMA_MR); those that hold at least
  // an eighth of the rows (the rest, a ragged tile's last block, take the shared
  // micro-kernel), tallest first.
  std::vector<int64_t> rowBlockHeights(const Stmt &s, int64_t nv) const {
    std::map<int64_t, int64_t> rowsOf; // height -> rows it covers
    const HostRegisterBlock rb = hostRegisterBlock(nv, unit_);
    const int64_t mb = rb.rows; // the prelude's aicf_kb_rows
    auto blocks = [&](int64_t r, int64_t times) {
      if (!s.aBlocks.empty() || mb < 8) {
        HostRowBlocks b = hostRowBlocks(r, mb, std::min(mb, rb.registerRows));
        if (b.taller)
          rowsOf[b.base + 1] += times * b.taller * (b.base + 1);
        if (b.base)
          rowsOf[b.base] += times * (b.count - b.taller) * b.base;
        return;
      }
      int64_t i = 0;
      for (; i + 8 <= r; i += 8)
        rowsOf[8] += times * 8;
      for (; i + 4 <= r; i += 4)
        rowsOf[4] += times * 4;
      if (r - i >= 2) {
        rowsOf[2] += times * 2;
        i += 2;
      }
      if (r - i >= 1)
        rowsOf[1] += times;
    };
    for (const auto &[rows, tiles] : validRows(s)) {
      if (s.aGroups.size() != 2) {
        blocks(rows, tiles);
        continue;
      }
      int64_t g = s.aGroups[0];
      blocks(std::min(rows, g), tiles * std::max<int64_t>(1, rows / g));
      if (rows > g && rows % g != 0)
        blocks(rows % g, tiles);
    }
    int64_t total = 0;
    for (const auto &[h, rows] : rowsOf)
      total += rows;
    std::vector<int64_t> out;
    for (auto it = rowsOf.rbegin(); it != rowsOf.rend(); ++it)
      if (it->second * 8 >= total)
        out.push_back(it->first);
    return out;
  }

  // Calls visit() at every point of the grid axes that `reads` read (env holding the point;
  // the others stay unset), until it returns false; whether it never did.
  bool sweepGrid(const std::vector<ExprP> &reads, std::map<std::string, int64_t> &env,
                 const std::function<bool()> &visit) const {
    if (!k_.symGrid.empty()) // a symbolic grid has no points to enumerate at compile time
      return false;
    std::function<bool(size_t)> sweep = [&](size_t axis) {
      if (axis == k_.grid.size())
        return visit();
      const std::string &name = k_.grid[axis].first; // (clang: no lambda capture of a binding)
      const int64_t extent = k_.grid[axis].second;
      bool used = std::any_of(reads.begin(), reads.end(),
                              [&](const ExprP &e) { return readsVar(e, name); });
      for (int64_t i = 0; i < (used ? extent : 1); ++i) {
        if (used)
          env[name] = i;
        if (!sweep(axis + 1))
          return false;
      }
      return true;
    };
    return sweep(0);
  }

  // Every value the tile's valid rows (indices[2]) take over the grid (a ragged last tile's
  // min(BM, M - m0)), with how many tiles take it; {tm: 1} when the expression needs more than
  // the grid axes.
  std::map<int64_t, int64_t> validRows(const Stmt &s) const {
    std::map<std::string, int64_t> env;
    std::map<int64_t, int64_t> out;
    bool all = sweepGrid({s.indices[2].get()}, env, [&] {
      std::optional<int64_t> v = evalInt(s.indices[2].get(), env);
      if (!v || *v < 1 || *v > s.tm)
        return false;
      ++out[*v];
      return true;
    });
    if (!all)
      return {{s.tm, 1}};
    return out;
  }

  static std::optional<int64_t> evalInt(const ExprP &e, const std::map<std::string, int64_t> &env) {
    if (!e)
      return std::nullopt;
    if (e->kind == Expr::Kind::Int)
      return e->ival;
    if (e->kind == Expr::Kind::Var) {
      auto it = env.find(e->var);
      return it == env.end() ? std::nullopt : std::optional<int64_t>(it->second);
    }
    if (e->kind != Expr::Kind::Binary)
      return std::nullopt;
    std::optional<int64_t> a = evalInt(e->args[0], env), b = evalInt(e->args[1], env);
    if (!a || !b)
      return std::nullopt;
    switch (e->bop) {
    case BinOp::Add: return *a + *b;
    case BinOp::Sub: return *a - *b;
    case BinOp::Mul: return *a * *b;
    case BinOp::Div: return *b ? std::optional<int64_t>(*a / *b) : std::nullopt;
    case BinOp::Mod: return *b ? std::optional<int64_t>(*a % *b) : std::nullopt;
    case BinOp::Min: return std::min(*a, *b);
    case BinOp::Max: return std::max(*a, *b);
    case BinOp::Lt: return *a < *b;
    case BinOp::Le: return *a <= *b;
    case BinOp::Gt: return *a > *b;
    case BinOp::Ge: return *a >= *b;
    case BinOp::Eq: return *a == *b;
    case BinOp::Ne: return *a != *b;
    case BinOp::And: return *a && *b;
    case BinOp::Or: return *a || *b;
    default: return std::nullopt;
    }
  }

  // Whether a fused tile's element guard `cond` (not reading the lane) holds on every row the
  // micro-kernel runs it on: for every grid point and every valid row i (i < indices[2]), with
  // the thread var 0. A ragged tile's `m0 + i < M` does: the micro-kernel already runs only the
  // valid rows. A guard reading anything else (a loop variable) is kept.
  bool holdsOnValidRows(const Stmt &s, const kir::E &cond) const {
    std::map<std::string, int64_t> env = {{k_.threadVar, 0}};
    return sweepGrid({s.indices[2].get(), cond.get()}, env, [&] {
      std::optional<int64_t> rows = evalInt(s.indices[2].get(), env);
      if (!rows || *rows > s.tm)
        return false;
      for (int64_t i = 0; i < *rows; ++i) {
        env["i"] = i;
        std::optional<int64_t> v = evalInt(cond.get(), env);
        if (!v || !*v)
          return false;
      }
      return true;
    });
  }

  void lambda(int ind, const std::string &name, const Stmt &mma, const std::vector<StmtP> &body,
              const BufferP &v) {
    std::vector<StmtP> elem = elementBody(body, mma.c, v);
    line(ind, "auto " + name +
                  " = [&]([[maybe_unused]] int64_t i, int64_t aicf_j, float *__restrict aicf_v) {");
    line(ind + 1, "[[maybe_unused]] const int64_t " + k_.threadVar + " = 0;");
    line(ind + 1, "const int64_t jo = aicf_j / 16;");
    // A guard that does not depend on the lane (a ragged tile's row < M) is tested once per
    // vector, outside the lane loop: inside, GCC 12 vectorised the loop into gathers and
    // scatters. One that holds on every row the micro-kernel runs (holdsOnValidRows) is
    // dropped: inlined into the micro-kernel's row loop, g++ if-converted the guarded lanes
    // into masked loads it could not vectorise and stored them one float at a time
    // (squeezenet's 16 -> 64 expansions, 0.19 -> 0.11 ms).
    size_t d = !elem.empty() && elem[0]->kind == Stmt::Kind::Decl && elem[0]->var == "j";
    auto lanes = [&](int in, const std::vector<StmtP> &body) {
      std::vector<StmtP> b(elem.begin(), elem.begin() + static_cast<std::ptrdiff_t>(d));
      b.insert(b.end(), body.begin(), body.end());
      laneLoop(in, b);
    };
    if (elem.size() == d + 1 && elem[d]->kind == Stmt::Kind::If &&
        !readsVar(elem[d]->cond.get(), "jl") && !readsVar(elem[d]->cond.get(), "j")) {
      const Stmt &g = *elem[d];
      if (holdsOnValidRows(mma, g.cond)) {
        lanes(ind + 1, g.body);
      } else {
        line(ind + 1, "if (" + ex(g.cond) + ") {");
        lanes(ind + 2, g.body);
        if (!g.elseBody.empty()) {
          line(ind + 1, "} else {");
          lanes(ind + 2, g.elseBody);
        }
        line(ind + 1, "}");
      }
    } else if (std::optional<std::pair<E, std::vector<StmtP>>> v = laneGuardEnds(elem, d)) {
      // Guards on the lane (a ragged column tile's n0 + j < N) that hold on all 16 lanes or
      // none: tested at both ends, the lanes then run unguarded (kir/version_lane_guards.h).
      line(ind + 1, "if (" + ex(v->first) + ") {");
      lanes(ind + 2, v->second);
      line(ind + 1, "} else {");
      laneLoop(ind + 2, elem);
      line(ind + 1, "}");
    } else {
      laneLoop(ind + 1, elem);
    }
    line(ind, "};");
  }

  // An element body [var j = jo * 16 + jl (when d), then guards: if (c) .. or { if (c) .. }]
  // whose every c is convex in the lane (guardAtEnds) or does not read it: the c at jl = 0 and
  // jl = 15, all of them, and the statements without their guards; or none.
  static std::optional<std::pair<E, std::vector<StmtP>>>
  laneGuardEnds(const std::vector<StmtP> &elem, size_t d) {
    std::map<std::string, ExprP> defs;
    if (d)
      defs["j"] = elem[0]->value.get();
    E all;
    std::vector<StmtP> unguarded;
    for (size_t k = d; k < elem.size(); ++k) {
      const Stmt &s = *elem[k];
      const bool scoped = s.kind == Stmt::Kind::Seq && s.body.size() == 1;
      const Stmt &g = scoped ? *s.body[0] : s;
      if (g.kind != Stmt::Kind::If || !g.elseBody.empty())
        return std::nullopt;
      // (A guard not on the lane is its own test.)
      std::optional<E> ends = !readsVar(g.cond.get(), "jl") && !(d && readsVar(g.cond.get(), "j"))
                                  ? std::optional<E>(g.cond)
                                  : guardAtEnds(g.cond, "jl", defs, E(int64_t(0)), E(int64_t(15)));
      if (!ends)
        return std::nullopt;
      all = all ? all && *ends : *ends;
      unguarded.push_back(seq(g.body)); // (its own scope, as the guarded body had)
    }
    if (!all)
      return std::nullopt;
    return std::make_pair(all, unguarded);
  }

  void laneLoop(int ind, const std::vector<StmtP> &body) {
    line(0, "#pragma GCC ivdep");
    line(ind, "for (int64_t jl = 0L; jl < 16L; ++jl) {");
    block(ind + 1, body);
    line(ind, "}");
  }

  // The element body with C[t, i, j] read and written as v[jl], and `var j` dropped when
  // nothing else reads j.
  static std::vector<StmtP> elementBody(const std::vector<StmtP> &body, const BufferP &c,
                                        const BufferP &v) {
    std::function<ExprP(const ExprP &)> sub = [&](const ExprP &e) -> ExprP {
      if (!e)
        return e;
      if (e->kind == Expr::Kind::Load && e->buf == c)
        return load(v, {var("jl")}).get();
      std::vector<ExprP> args;
      bool changed = false;
      for (const ExprP &a : e->args) {
        args.push_back(sub(a));
        changed |= args.back() != a;
      }
      if (!changed)
        return e;
      auto x = std::make_shared<Expr>(*e);
      x->args = std::move(args);
      return x;
    };
    bool usesJ = false;
    std::function<std::vector<StmtP>(const std::vector<StmtP> &)> clone =
        [&](const std::vector<StmtP> &l) {
          std::vector<StmtP> out;
          for (const StmtP &s : l) {
            auto x = std::make_shared<Stmt>(*s);
            for (E *e : {&x->begin, &x->extent, &x->value, &x->cond})
              *e = sub(e->get());
            for (E &e : x->indices)
              e = sub(e.get());
            if (x->kind == Stmt::Kind::Store && x->buf == c) {
              x->buf = v;
              x->indices = {var("jl")};
            }
            x->body = clone(s->body);
            x->elseBody = clone(s->elseBody);
            for (const E *e : {&x->begin, &x->extent, &x->value, &x->cond})
              usesJ |= readsVar(e->get(), "j");
            for (const E &e : x->indices)
              usesJ |= readsVar(e.get(), "j");
            out.push_back(x);
          }
          return out;
        };
    std::vector<StmtP> out = clone(body);
    if (!usesJ && !out.empty() && out.front()->kind == Stmt::Kind::Decl && out.front()->var == "j")
      out.erase(out.begin());
    return out;
  }

  // Whether the statements compute an exp, log, tanh, erf, sigmoid, sin, cos or pow.
  static bool transcendental(const std::vector<StmtP> &body) {
    std::function<bool(const ExprP &)> in = [&](const ExprP &e) {
      if (!e)
        return false;
      if (e->kind == Expr::Kind::Unary &&
          (e->uop == UnOp::Exp || e->uop == UnOp::Log || e->uop == UnOp::Tanh ||
           e->uop == UnOp::Erf || e->uop == UnOp::Sigmoid || e->uop == UnOp::Sin ||
           e->uop == UnOp::Cos))
        return true;
      if (e->kind == Expr::Kind::Binary && e->bop == BinOp::Pow)
        return true;
      return std::any_of(e->args.begin(), e->args.end(), in);
    };
    for (const StmtP &s : body) {
      for (const E *e : {&s->begin, &s->extent, &s->value, &s->cond})
        if (in(e->get()))
          return true;
      if (transcendental(s->body) || transcendental(s->elseBody))
        return true;
    }
    return false;
  }

  // Tensor-core fragments (kir.h), emulated: each thread's accumulator elements where the m16n8
  // layout puts them, each adding the products of its row of A and column of B, as the
  // instruction reads them (f16 / bf16 widened exactly, f32 rounded to tf32), in k order in f32
  // (every product is exact in f32, so a fused multiply-add rounds as a multiply and an add).
  template <class Elem>
  void fragments(int ind, const Stmt &s, const Elem &elem) {
    auto n = [](int64_t v) { return std::to_string(v) + "L"; };
    bool tf32 = s.frag == kir::MmaFrag::M16N8K8;
    auto operand = [&](const BufferP &buf, const std::string &i) {
      std::string v = elem(buf, i);
      return tf32 ? "aicf_rtf32(" + v + ")" : v;
    };
    int64_t warpCols = s.n / (4 * s.tn);
    line(ind, "for (int64_t aicf_t = 0; aicf_t < " + n(k_.threads) + "; ++aicf_t) {");
    line(ind + 1, "const int64_t aicf_w = aicf_t / 32L, aicf_l = aicf_t % 32L;");
    line(ind + 1, "const int64_t aicf_r0 = aicf_w / " + n(warpCols) + " * " + n(8 * s.tm) +
                      " + aicf_l / 4L, aicf_c0 = aicf_w % " + n(warpCols) + " * " + n(4 * s.tn) +
                      " + aicf_l % 4L * 2L;");
    line(ind + 1,
         "float *__restrict aicf_c = " + s.c->name + " + aicf_t * " + n(s.tm * s.tn) + ";");
    line(ind + 1, "for (int64_t aicf_i = 0; aicf_i < " + n(s.tm) + "; ++aicf_i) {");
    line(ind + 2, "const int64_t aicf_r = aicf_r0 + aicf_i / 2L * 16L + aicf_i % 2L * 8L;");
    line(ind + 2, "for (int64_t aicf_j = 0; aicf_j < " + n(s.tn) + "; ++aicf_j) {");
    line(ind + 3, "const int64_t aicf_cc = aicf_c0 + aicf_j / 2L * 8L + aicf_j % 2L;");
    line(ind + 3, "float aicf_s = aicf_c[aicf_i * " + n(s.tn) + " + aicf_j];");
    line(ind + 3, "for (int64_t aicf_k = 0; aicf_k < " + n(s.k) + "; ++aicf_k)");
    line(ind + 4, "aicf_s += " + operand(s.a, "aicf_r * " + n(s.k) + " + aicf_k") + " * " +
                      operand(s.b, "aicf_k * " + n(s.n) + " + aicf_cc") + ";");
    line(ind + 3, "aicf_c[aicf_i * " + n(s.tn) + " + aicf_j] = aicf_s;");
    line(ind + 2, "}");
    line(ind + 1, "}");
    line(ind, "}");
  }

  void mmaTile(int ind, const Stmt &s) override {
    auto n = [](int64_t v) { return std::to_string(v) + "L"; };
    int64_t colTiles = s.n / s.tn;
    line(ind,
         "// mma_tile " + s.c->name + " += " + s.a->name + " x " + s.b->name + " (m = " +
             std::to_string(s.m) + ", n = " + std::to_string(s.n) + ", k = " + std::to_string(s.k) +
             ", tm = " + std::to_string(s.tm) + ", tn = " + std::to_string(s.tn) +
             (s.frag != kir::MmaFrag::None ? std::string(", frag = ") + kir::mmaFragName(s.frag)
                                           : std::string()) +
             (s.views && s.b->dtype == DType::BF16 ? ", b in bf16 k pairs" : "") +
             (s.views && s.b->dtype == DType::I8
                  ? ", b in int8 k quads, a + " + std::to_string(s.aShift) + " as uint8"
                  : "") +
             ")");
    std::string c = s.c->name, a = s.a->name, b = s.b->name;
    if (s.views) { // one thread, operands read where they lie (kir.h)
      std::string at = a + " + (" + ex(s.indices[0]) + "), " + n(s.lda) + ", " + b + " + (" +
                       ex(s.indices[1]) + "), ";
      std::string sizes =
          ex(s.indices[2]) + ", " + ex(s.indices[3]) + ", " + ex(s.indices[4]) +
          (s.aBlocks.empty()
               ? std::string()
               : ", " + std::string(s.aTaps.empty() ? "" : "aicf_taps(") + "aicf_kblocks{" +
                     ex(s.indices[5]) + ", " + n(s.aBlocks[0]) + ", " + n(s.aBlocks[1]) + ", " +
                     n(s.aBlocks[2]) + ", " + n(s.aBlocks[3]) + ", " + n(s.aBlocks[4]) + ", " +
                     n(s.aBlocks[5]) +
                     (s.aGroups.size() == 2 ? ", " + n(s.aGroups[0]) + ", " + n(s.aGroups[1])
                                            : std::string()) +
                     "}" + (s.aTaps.empty() ? std::string() : tapArgs(s))) +
          (s.bFirstCol ? (s.aBlocks.empty() ? ", aicf_kblocks{0, 0, 0, 0, 0, 0, 16}, " : ", ") +
                             ex(s.indices.back())
                       : std::string()) +
          ");";
      if (s.fused) {
        fusedMmaTile(ind, s, at, sizes);
        return;
      }
      if (s.bPanel)
        line(ind, "aicf_mma_f32_panels<" + panelArgs(s) + ">(" + c + ", " + n(s.tn) + ", " + at +
                      n(s.bPanelStride) + ", " + sizes);
      else
        line(ind, "aicf_mma_f32(" + c + ", " + n(s.tn) + ", " + at + n(s.ldb) + ", " + sizes);
      return;
    }
    auto elem = [](const BufferP &buf, const std::string &i) {
      std::string ref = buf->name + "[" + i + "]";
      if (buf->dtype == DType::F16)
        return "aicf_h2f(" + ref + ")";
      if (buf->dtype == DType::BF16)
        return "aicf_bf2f(" + ref + ")";
      return ref;
    };
    if (s.frag != kir::MmaFrag::None) {
      fragments(ind, s, elem);
      return;
    }
    bool vec = s.tn % 16 == 0 && s.a->dtype == DType::F32 && s.b->dtype == DType::F32;
    if (vec) {
      if (k_.threads == 1) {
        line(ind, "aicf_mma_f32(" + c + ", " + n(s.tn) + ", " + a + ", " + n(s.k) + ", " + b +
                      ", " + n(s.n) + ", " + n(s.tm) + ", " + n(s.tn) + ", " + n(s.k) + ");");
        return;
      }
      line(ind, "for (int64_t aicf_t = 0; aicf_t < " + n(k_.threads) + "; ++aicf_t)");
      line(ind + 1, "aicf_mma_f32(" + c + " + aicf_t * " + n(s.tm * s.tn) + ", " + n(s.tn) + ", " +
                        a + " + aicf_t / " + n(colTiles) + " * " + n(s.tm * s.k) + ", " + n(s.k) +
                        ", " + b + " + aicf_t % " + n(colTiles) + " * " + n(s.tn) + ", " + n(s.n) +
                        ", " + n(s.tm) + ", " + n(s.tn) + ", " + n(s.k) + ");");
      return;
    }
    // Generic loops (any tile shape, f16/bf16 operands widened): i-k-j order, j innermost.
    line(ind, "for (int64_t aicf_t = 0; aicf_t < " + n(k_.threads) + "; ++aicf_t) {");
    line(ind + 1, "const int64_t aicf_r0 = aicf_t / " + n(colTiles) + " * " + n(s.tm) +
                      ", aicf_c0 = aicf_t % " + n(colTiles) + " * " + n(s.tn) + ";");
    line(ind + 1, "float *__restrict aicf_c = " + c + " + aicf_t * " + n(s.tm * s.tn) + ";");
    line(ind + 1, "for (int64_t aicf_i = 0; aicf_i < " + n(s.tm) + "; ++aicf_i)");
    line(ind + 2, "for (int64_t aicf_k = 0; aicf_k < " + n(s.k) + "; ++aicf_k) {");
    line(ind + 3,
         "const float aicf_a = " + elem(s.a, "(aicf_r0 + aicf_i) * " + n(s.k) + " + aicf_k") + ";");
    line(ind + 3, "for (int64_t aicf_j = 0; aicf_j < " + n(s.tn) + "; ++aicf_j)");
    line(ind + 4, "aicf_c[aicf_i * " + n(s.tn) + " + aicf_j] += aicf_a * " +
                      elem(s.b, "aicf_k * " + n(s.n) + " + aicf_c0 + aicf_j") + ";");
    line(ind + 2, "}");
    line(ind, "}");
  }
};

} // namespace

// A parallel build's parts: a kernel weighs its text plus kFusedWeight per fused tile (each
// instantiates micro-kernels with its init and epilogue inlined, what g++ spends most time on);
// a part holds at least kWeightPerPart, at most kMaxParts parts. Every part compiles the
// prelude's shared micro-kernels again (~1.5 s of g++), so small sources stay whole: resnet18
// took 5.3 s as one unit, 6.8 s as four on two cores. EfficientNet-B0 (410 KB of kernel text,
// 20 fused tiles) took 28 s as one, 11.5 s as eight; but eight small units ran its kernels ~3%
// slower (g++ inlines differently in small units), two or four within the noise.
constexpr size_t kFusedWeight = 25 * 1024;
constexpr size_t kWeightPerPart = 256 * 1024;
constexpr size_t kMaxParts = 4;

std::string printHostSource(const std::vector<kir::Kernel> &kernels, HostVectorUnit unit) {
  std::vector<std::string> texts;
  std::vector<size_t> weight;
  size_t total = 0;
  for (const kir::Kernel &k : kernels) {
    if (std::string all = kir::verifyKernelText(k); !all.empty())
      throwInternal(__FILE__, __LINE__, "host printer: invalid kernel" + all);
    std::ostringstream ks;
    KernelPrinter(k, ks, unit).print();
    texts.push_back(ks.str());
    size_t w = texts.back().size();
    for (size_t at = 0; (at = texts.back().find("aicf_fuse<", at)) != std::string::npos; ++at)
      w += kFusedWeight;
    weight.push_back(w);
    total += w;
  }
  // The parts: from the text alone (never the machine), so the source is the same everywhere;
  // kernels heaviest first, each to the part with the least weight so far (ties: the lower).
  size_t parts = std::clamp<size_t>(total / kWeightPerPart, 1, kMaxParts);
  std::vector<size_t> partOf(texts.size(), 0), load(parts, 0), order(texts.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return weight[a] > weight[b]; });
  for (size_t i : order) {
    size_t p = size_t(std::min_element(load.begin(), load.end()) - load.begin());
    partOf[i] = p;
    load[p] += weight[i];
  }
  std::ostringstream os;
  os << "// Generated by aicf (host C++ target): " << kernels.size()
     << " kernel(s). Do not edit.\n";
  // A parallel build (backend/host/host_build.h) compiles this file once per part with
  // -DAICF_PART=p; each translation unit keeps the prelude and the kernels of its part.
  os << "#define AICF_PARTS " << parts << "\n";
  os << "#ifdef AICF_PART\n#define AICF_IN_PART(p) (AICF_PART == (p))\n#else\n"
     << "#define AICF_IN_PART(p) 1\n#endif\n";
  // Micro-kernel shape: MR rows x NV vectors of C in registers; B panels packed up to
  // AICF_MMA_PACK floats. -D on the compiler command line overrides them (for tuning).
  os << "#ifndef AICF_MMA_MR\n#define AICF_MMA_MR 8\n#endif\n";
  os << "#ifndef AICF_MMA_NV\n#define AICF_MMA_NV 2\n#endif\n";
  os << "#ifndef AICF_MMA_PACK\n#define AICF_MMA_PACK 8192\n#endif\n";
  os << kHostPrelude << kHostMmaPrelude << kHostMmaBlocksPrelude << kHostAmxPrelude;
  for (size_t i = 0; i < texts.size(); ++i) {
    os << "\n";
    if (parts > 1)
      os << "#if AICF_IN_PART(" << partOf[i] << ")\n";
    os << texts[i];
    if (parts > 1)
      os << "#endif\n";
  }
  return os.str();
}

} // namespace aicf
