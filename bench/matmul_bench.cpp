// aicf-bench-matmul: how fast is a GEMM written in Kernel IR once the host printer spells it?
// By default the kernel is what the compiler itself produces: a graph `matmul(a, b)` lowered by
// the tiled_contraction recipe with its host-plan defaults. With --hand it is a tiled GEMM
// built by hand, for tuning the micro-kernel and tile sizes: a grid over BMxBN output tiles, one
// "thread" per block owning the whole tile, a K loop staging A and B tiles into shared memory
// through a region copy, barrier, mma_tile, barrier, and an epilogue region storing C. The kernel
// is printed, compiled with the system compiler (as the runtime does), checked against a
// double-precision reference and timed: median GFLOP/s over --reps runs with 1 and with 2 OpenMP
// threads.
//
//   aicf-bench-matmul [--m 256 --n 1024 --k 1024] [--reps 9] [--emit] [--keep DIR]
//                     [--hand [--bm 256 --bn 256 --bk 256] [--mr 8 --nv 2 --pack 8192]]
#include "backend/host/host_build.h"
#include "backend/host/host_printer.h"
#include "ir/graph.h"
#include "kir/kir.h"
#include "lower/fusion.h"
#include "lower/lower.h"
#include "runtime/thread_pool.h"
#include "support/cli_util.h"
#include "support/diagnostics.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <unistd.h>

using namespace aicf;
using namespace aicf::kir;
namespace fs = std::filesystem;

namespace {

struct Flags {
  int64_t m = 256, n = 1024, k = 1024;
  int64_t bm = 256, bn = 256, bk = 256;
  int reps = 9;
  int mr = 8, nv = 2, pack = 8192; // micro-kernel shape (printer macros)
  bool emit = false;
  bool hand = false;
  std::string keep;
};

// The compiler's own kernel for matmul(a [M,K], b [K,N]) on the host plan.
Kernel recipeKernel(const Flags &f) {
  Graph g("bench");
  Value *a = g.addInput("a", TensorType(DType::F32, {f.m, f.k}));
  Value *b = g.addInput("b", TensorType(DType::F32, {f.k, f.n}));
  g.setOutputs({g.createNode(Op::MatMul, {a, b})->result()});
  Partition part = partitionGraph(g);
  if (part.groups.size() != 1)
    throw UserError(cat("expected one kernel group, got ", part.groups.size()));
  Knobs knobs; // the cpu plan
  return lowerGroup(part.groups[0], "gemm", knobs);
}

BufferP mkBuf(const std::string &name, std::vector<int64_t> shape, Scope scope,
              Role role = Role::Temp) {
  auto b = std::make_shared<Buffer>();
  b->name = name;
  b->dtype = DType::F32;
  b->shape = std::move(shape);
  b->scope = scope;
  b->role = role;
  return b;
}

Kernel gemmKernel(const Flags &f) {
  const int64_t M = f.m, N = f.n, K = f.k, BM = f.bm, BN = f.bn, BK = f.bk;
  BufferP A = mkBuf("A", {M, K}, Scope::Global, Role::In);
  BufferP B = mkBuf("B", {K, N}, Scope::Global, Role::In);
  BufferP C = mkBuf("C", {M, N}, Scope::Global, Role::Out);
  BufferP As = mkBuf("As", {BM, BK}, Scope::Shared);
  BufferP Bs = mkBuf("Bs", {BK, BN}, Scope::Shared);
  BufferP acc = mkBuf("acc", {1, BM, BN}, Scope::Local);
  E t = var("t"), bm = var("bm"), bn = var("bn"), k0 = var("k0"), i = var("i"), j = var("j"),
    kk = var("kk");
  auto vec = Stmt::LoopKind::Vectorized;
  Kernel k;
  k.name = "gemm";
  k.recipe = "tiled_contraction";
  k.grid = {{"bm", M / BM}, {"bn", N / BN}};
  k.threads = 1;
  k.knobs = {{"BM", BM}, {"BN", BN}, {"BK", BK}, {"TM", BM}, {"TN", BN}, {"threads", 1}};
  k.params = {A, B, C};
  k.allocs = {As, Bs, acc};
  k.body = {
      region("t", {forLoop("i", 0, BM,
                           {forLoop("j", 0, BN, {store(acc, {t, i, j}, fconst(0))}, 1, vec)})}),
      forLoop(
          "k0", 0, K,
          {region(
               "t",
               {forLoop("i", 0, BM,
                        {forLoop("kk", 0, BK, {store(As, {i, kk}, load(A, {bm * BM + i, k0 + kk}))},
                                 1, vec)}),
                forLoop("kk", 0, BK,
                        {forLoop("j", 0, BN, {store(Bs, {kk, j}, load(B, {k0 + kk, bn * BN + j}))},
                                 1, vec)})}),
           barrier(), mmaTile(acc, As, Bs, BM, BN, BK, BM, BN), barrier()},
          BK),
      region("t", {forLoop("i", 0, BM,
                           {forLoop("j", 0, BN,
                                    {store(C, {bm * BM + i, bn * BN + j}, load(acc, {t, i, j}))}, 1,
                                    vec)})}),
  };
  return k;
}

std::vector<float> pseudoRandom(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (float &x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) / 8388608.0f - 1.0f;
  }
  return v;
}

int run(const Flags &f) {
  if (f.reps < 1 || f.m < 1 || f.n < 1 || f.k < 1 || f.bm < 1 || f.bn < 1 || f.bk < 1)
    throw UserError("sizes, tile sizes and --reps must be positive");
  if (f.hand && (f.m % f.bm || f.n % f.bn || f.k % f.bk))
    throw UserError(cat("--bm/--bn/--bk must divide --m/--n/--k (", f.m, "x", f.n, "x", f.k, ")"));
  Kernel kernel = f.hand ? gemmKernel(f) : recipeKernel(f);
  if (std::vector<std::string> errs = verifyKernel(kernel); !errs.empty())
    throw UserError(errs.front());
  if (f.emit)
    std::printf("%s", printKernel(kernel).c_str());

  fs::path dir =
      f.keep.empty() ? fs::temp_directory_path() / cat("aicf_bench_", getpid()) : fs::path(f.keep);
  fs::create_directories(dir);
  HostBuildOptions opts;
  opts.extraFlags =
      cat("-DAICF_MMA_MR=", f.mr, " -DAICF_MMA_NV=", f.nv, " -DAICF_MMA_PACK=", f.pack);
  compileHostSource(printHostSource({kernel}), (dir / "gemm.cpp").string(),
                    (dir / "gemm.so").string(), opts);
  double gflopsByThreads[2] = {0, 0};
  {
    LoadedLibrary lib((dir / "gemm.so").string());
    LoadedLibrary::KernelFn fn = lib.kernel("gemm");
    std::vector<float> A = pseudoRandom(f.m * f.k, 1), B = pseudoRandom(f.k * f.n, 2);
    std::vector<float> C(f.m * f.n);
    void *args[] = {A.data(), B.data(), C.data()};

    fn(args);
    // Check every 7th row against a double reference (|A|, |B| < 1, f32 accumulation).
    double maxErr = 0;
    std::vector<double> row(f.n);
    for (int64_t i = 0; i < f.m; i += 7) {
      std::fill(row.begin(), row.end(), 0.0);
      for (int64_t kk = 0; kk < f.k; ++kk)
        for (int64_t j = 0; j < f.n; ++j)
          row[j] += static_cast<double>(A[i * f.k + kk]) * B[kk * f.n + j];
      for (int64_t j = 0; j < f.n; ++j)
        maxErr = std::max(maxErr, std::fabs(C[i * f.n + j] - row[j]));
    }
    if (!(maxErr < 1e-3 * std::sqrt(static_cast<double>(f.k))))
      throw UserError(cat("wrong result: max abs error ", maxErr));

    const double flops = 2.0 * f.m * f.n * f.k;
    // As the runtime runs a step: the grid's blocks in chunks on a pool of `threads`.
    int64_t blocks = 1;
    for (const auto &[axis, extent] : kernel.grid)
      blocks *= extent;
    struct Call {
      LoadedLibrary::KernelFn fn;
      void *const *args;
      int64_t blocks;
      static void chunk(void *self, int64_t c) {
        const Call &k = *static_cast<const Call *>(self);
        k.fn.fn(k.args, c, c + 1);
      }
    } call{fn, args, blocks};
    for (int threads : {1, 2}) {
      aicf::rt::ThreadPool pool(threads);
      auto run = [&] { pool.run(blocks, &Call::chunk, &call); };
      run(); // warm-up
      std::vector<double> secs;
      for (int r = 0; r < f.reps; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        run();
        secs.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      std::sort(secs.begin(), secs.end());
      double med = secs[secs.size() / 2];
      gflopsByThreads[threads - 1] = flops / med / 1e9;
      std::printf("threads %d: median %.3f ms  %.1f GFLOP/s  (min %.3f ms, %d runs)\n", threads,
                  med * 1e3, flops / med / 1e9, secs.front() * 1e3, f.reps);
    }
    std::string knobs;
    for (const auto &[name, value] : kernel.knobs)
      knobs += cat(knobs.empty() ? "" : " ", name, "=", value);
    std::printf("gemm %lldx%lldx%lld (%s kernel)  %s  MR=%d NV=%d pack=%d  max err %.2e\n",
                static_cast<long long>(f.m), static_cast<long long>(f.n),
                static_cast<long long>(f.k), f.hand ? "hand-built" : "tiled_contraction recipe",
                knobs.c_str(), f.mr, f.nv, f.pack, maxErr);
  }
  if (f.keep.empty()) {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  return gflopsByThreads[0] > 0 ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"aicf-bench-matmul: GFLOP/s of a Kernel-IR tiled GEMM through the host printer"};
  Flags f;
  app.add_option("--m", f.m, "rows of A and C")->capture_default_str();
  app.add_option("--n", f.n, "columns of B and C")->capture_default_str();
  app.add_option("--k", f.k, "the contraction size")->capture_default_str();
  app.add_option("--bm", f.bm, "block tile rows (BM = TM: one thread per block)")
      ->capture_default_str();
  app.add_option("--bn", f.bn, "block tile columns (BN = TN)")->capture_default_str();
  app.add_option("--bk", f.bk, "K step staged through shared memory")->capture_default_str();
  app.add_option("--reps", f.reps, "timed runs per thread count")->capture_default_str();
  app.add_option("--mr", f.mr, "micro-kernel rows (AICF_MMA_MR)")->capture_default_str();
  app.add_option("--nv", f.nv, "micro-kernel 16-float vectors per row (AICF_MMA_NV)")
      ->capture_default_str();
  app.add_option("--pack", f.pack, "B panel pack buffer in floats, 0 = no packing")
      ->capture_default_str();
  app.add_flag("--emit", f.emit, "print the kernel's Kernel IR");
  app.add_flag("--hand", f.hand,
               "time the hand-built GEMM (--bm/--bn/--bk) instead of the recipe's");
  app.add_option("--keep", f.keep, "keep gemm.cpp / gemm.so in DIR");
  CLI11_PARSE(app, argc, argv);
  return runTool([&] { return run(f); });
}
