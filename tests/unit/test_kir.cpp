// Tests of the Kernel IR (kir/kir.h) and its host target: the verifier's structural and
// SIMT-rule checks (one negative test per rule, exact messages), the text printer against an
// expected string, and host-printed kernels compiled with the system compiler (-Wall -Wextra
// -Werror, so the generated code is warning-free), loaded and checked numerically against
// direct computations: elementwise math with f16/bf16 stores, a Welford layer norm built on
// regions + local state + a 3-field block_reduce, shared-memory staging with barriers (stack and
// heap-sized buffers), and mma_tile GEMMs on both the vector micro-kernel and the generic path.
#include "backend/host/host_build.h"
#include "backend/host/host_printer.h"
#include "kir/kir.h"

#include "support/diagnostics.h"
#include "support/half.h"
#include "tests/unit/test_files.h"

#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>

using namespace aicf;
using namespace aicf::kir;
namespace fs = std::filesystem;

namespace {

BufferP mkBuf(const std::string &name, DType dt, std::vector<int64_t> shape, Scope scope,
              Role role = Role::Temp) {
  auto b = std::make_shared<Buffer>();
  b->name = name;
  b->dtype = dt;
  b->shape = std::move(shape);
  b->scope = scope;
  b->role = role;
  return b;
}

std::string joined(const std::vector<std::string> &v) {
  std::string s;
  for (const std::string &x : v)
    s += (s.empty() ? "" : "\n") + x;
  return s;
}

Combiner sumCombiner(const std::string &name = "sum") {
  Combiner c;
  c.name = name;
  c.fields = {{"s", DType::F32}};
  c.merged = {var("a_s", DType::F32) + var("b_s", DType::F32)};
  return c;
}

// ---- verifier ----------------------------------------------------------------------------------

struct Fixture {
  BufferP X = mkBuf("X", DType::F32, {2, 4}, Scope::Global, Role::In);
  BufferP Y = mkBuf("Y", DType::F32, {2, 4}, Scope::Global, Role::Out);
  BufferP st = mkBuf("st", DType::F32, {4}, Scope::Local);
  BufferP sh = mkBuf("sh", DType::F32, {4}, Scope::Shared);
  BufferP one = mkBuf("one", DType::F32, {1}, Scope::Shared);
  BufferP As = mkBuf("As", DType::F32, {8, 4}, Scope::Shared);
  BufferP Bs = mkBuf("Bs", DType::F32, {4, 8}, Scope::Shared);
  BufferP Cl = mkBuf("Cl", DType::F32, {4, 4, 4}, Scope::Local);
  BufferP Cl1 = mkBuf("Cl1", DType::F32, {4, 8, 8}, Scope::Local);
  BufferP Cl3 = mkBuf("Cl3", DType::F32, {4, 3, 4}, Scope::Local);
  E t = var("t"), g = var("g");

  Kernel kernel(std::vector<StmtP> body) const {
    Kernel k;
    k.name = "bad";
    k.grid = {{"g", 2}};
    k.threads = 4;
    k.params = {X, Y};
    k.allocs = {st, sh, one, As, Bs, Cl, Cl1, Cl3};
    k.body = std::move(body);
    return k;
  }
  std::string errors(std::vector<StmtP> body) const { return joined(verifyKernel(kernel(body))); }
};

TEST_CASE("kir verifier: a well-formed kernel has no errors") {
  Fixture f;
  Combiner c = sumCombiner();
  auto k = f.kernel({
      region("t", {decl("x", DType::F32, load(f.X, {f.g, f.t})),
                   store(f.st, {f.t}, var("x", DType::F32))}),
      blockReduce(c, {f.st}, {f.one}),
      mmaTile(f.Cl, f.As, f.Bs, 8, 8, 4, 4, 4),
      barrier(),
      forLoop("i", 0, f.g + 1,
              {region("t", {store(f.Y, {f.g, f.t}, load(f.one, {0}) + load(f.sh, {f.t}))})}),
  });
  CHECK(joined(verifyKernel(k)) == "");
}

TEST_CASE("kir verifier: SIMT-rule violations") {
  Fixture f;
  E t = f.t, g = f.g;
  auto x = var("x", DType::F32);
  struct Case {
    std::vector<StmtP> body;
    std::string msg;
  };
  std::vector<Case> cases = {
      {{region("t", {barrier()})}, "barrier inside region t"},
      {{region("t", {blockReduce(sumCombiner(), {f.st}, {f.one})})},
       "block_reduce inside region t"},
      {{region("t", {mmaTile(f.Cl, f.As, f.Bs, 8, 8, 4, 4, 4)})}, "mma_tile inside region t"},
      {{region("t", {region("t", {})})}, "region nested inside region t"},
      {{forLoop("i", 0, t, {})}, "bound of block-level loop i depends on thread var t"},
      {{region("t", {decl("n", DType::I64, t)}), reduce("k", 0, var("n"), {}, {})},
       "bound of block-level reduce k depends on region-local scalar n"},
      {{ifThen(t == 0, {})}, "condition of block-level if depends on thread var t"},
      {{region("t", {decl("x", DType::F32, load(f.X, {g, t}))}),
        region("t", {store(f.Y, {g, t}, x)})},
       "scalar x declared in a region is not visible outside it"},
      {{decl("n", DType::I64, t)}, "thread var t used outside a region"},
      {{decl("x", DType::F32, load(f.st, {0}))}, "local buffer st accessed outside a region"},
      {{region("t", {store(f.st, {0}, fconst(1))})},
       "local buffer st must be indexed by thread var t as its first index"},
      {{store(f.Y, {g, 0}, fconst(1))}, "store to Y outside a region"},
      {{region("t", {store(f.X, {g, t}, fconst(1))})}, "store to input param X"},
      {{decl("s", DType::F32, fconst(0)), region("t", {assign("s", load(f.X, {g, t}))})},
       "region assigns block-level scalar s"},
  };
  for (const Case &c : cases) {
    CAPTURE(c.msg);
    CHECK(f.errors(c.body) == "kernel bad: " + c.msg);
  }
}

TEST_CASE("kir verifier: structural violations") {
  Fixture f;
  E t = f.t, g = f.g;
  StmtP shortStore = store(f.Y, {g, t}, fconst(1));
  shortStore->indices.pop_back(); // the builder checks the rank; a pass might not
  BufferP Z = mkBuf("Z", DType::F32, {4}, Scope::Global, Role::Out);
  Combiner unknown = sumCombiner("bad_sum");
  unknown.merged = {var("a_s", DType::F32) + var("c_s", DType::F32)};
  Combiner twoFields = sumCombiner();
  twoFields.fields.push_back({"q", DType::F32});
  struct Case {
    std::vector<StmtP> body;
    std::string msg;
  };
  std::vector<Case> cases = {
      {{region("t", {shortStore})}, "Y indexed with 1 indices, rank is 2"},
      {{region("t", {store(f.Y, {g, fconst(1)}, fconst(1))})},
       "index 1 of Y has type f32, expected an integer"},
      {{region("t", {store(Z, {t}, fconst(1))})},
       "buffer Z is not a param or allocation of this kernel"},
      {{region("t", {store(f.Y, {g, t}, var("z", DType::F32))})}, "var z used before definition"},
      {{region("t", {decl("x", DType::F32, fconst(0)), decl("y", DType::I64, var("x"))})},
       "var x used as i64 but declared f32"},
      {{region("t", {forLoop("i", 0, 4, {assign("i", 1)})})}, "assignment to loop variable i"},
      {{region("t", {assign("g", 1)})}, "assignment to grid axis g"},
      {{region("t", {assign("t", 1)})}, "assignment to thread var t"},
      {{region("t", {assign("q", 1)})}, "assignment to undeclared scalar q"},
      {{region("t", {decl("x", DType::F32, 1)})}, "decl x: f32 initialised with an i64 value"},
      {{region("t", {decl("x", DType::F32, fconst(0)), assign("x", t)})},
       "assign x: f32 scalar assigned an i64 value"},
      {{region("t", {store(f.Y, {g, t}, t)})}, "store to Y: value has type i64, buffer is f32"},
      {{region("t", {decl("x", DType::F32, fconst(0)), decl("x", DType::F32, fconst(1))})},
       "x is already defined"},
      {{region("t", {decl("aicf_x", DType::F32, fconst(0))})},
       "name aicf_x uses the reserved prefix aicf_"},
      {{region("t", {ifThen(t, {})})}, "if condition has type i64, expected bool"},
      {{forLoop("i", 0, 4, {}, 0)}, "loop i: step must be positive, got 0"},
      {{blockReduce(sumCombiner(), {f.sh}, {f.one})},
       "block_reduce sum: src sh: shared f32[4] must be a local buffer of shape [4]"},
      {{blockReduce(sumCombiner(), {f.st}, {f.sh})},
       "block_reduce sum: dst sh: shared f32[4] must be a shared buffer of shape [1]"},
      {{blockReduce(unknown, {f.st}, {f.one})},
       "block_reduce bad_sum: combiner uses unknown var c_s"},
      {{blockReduce(twoFields, {f.st, f.st}, {f.one, f.one})},
       "block_reduce sum: 2 fields but 1 merged expressions"},
      {{mmaTile(f.Cl, f.Bs, f.Bs, 8, 8, 4, 4, 4)},
       "mma_tile: A must be a shared float buffer of shape [8,4], got Bs: shared f32[4,8]"},
      {{mmaTile(f.Cl, f.As, f.As, 8, 8, 4, 4, 4)},
       "mma_tile: B must be a shared float buffer of shape [4,8], got As: shared f32[8,4]"},
      {{mmaTile(f.Cl, f.As, f.Bs, 8, 8, 4, 2, 8)},
       "mma_tile: C must be a local f32 buffer of shape [4,2,8], got Cl: local f32[4,4,4]"},
      {{mmaTile(f.Cl1, f.As, f.Bs, 8, 8, 4, 8, 8)},
       "mma_tile: (m/tm)*(n/tn) = 1 thread tiles for 4 threads"},
      {{mmaTile(f.Cl3, f.As, f.Bs, 8, 8, 4, 3, 4)}, "mma_tile: tm 3 does not divide m 8"},
  };
  for (const Case &c : cases) {
    CAPTURE(c.msg);
    CHECK(f.errors(c.body) == "kernel bad: " + c.msg);
  }

  // Kernel-level structure.
  Kernel k = f.kernel({});
  k.allocs.push_back(mkBuf("l3", DType::F32, {3}, Scope::Local));
  CHECK(joined(verifyKernel(k)) == "kernel bad: local buffer l3: first dimension must be the "
                                   "thread count 4");
  k = f.kernel({});
  k.params.push_back(mkBuf("T", DType::F32, {4}, Scope::Global, Role::Temp));
  k.allocs.push_back(mkBuf("X", DType::F32, {4}, Scope::Shared));
  CHECK(joined(verifyKernel(k)) == "kernel bad: param T must have role in or out\n"
                                   "kernel bad: name X is defined twice");
  k = f.kernel({});
  k.threads = 0;
  k.grid = {{"g", 0}};
  k.allocs.clear();
  CHECK(joined(verifyKernel(k)) == "kernel bad: threads must be positive, got 0\n"
                                   "kernel bad: grid axis g has extent 0");
}

// ---- text printer ------------------------------------------------------------------------------

TEST_CASE("kir: a vectorised loop's reductions") {
  BufferP X = mkBuf("X", DType::F32, {8}, Scope::Global, Role::In);
  E j = var("j"), x = load(X, {j});
  E sum = var("s", DType::F32), mx = var("m", DType::F32);
  auto loop = [&](std::vector<StmtP> body) {
    return forLoop("j", E(int64_t(0)), E(int64_t(8)), std::move(body), 1,
                   Stmt::LoopKind::Vectorized);
  };
  // A sum and a max of outer scalars, through a loop-local scalar (not a reduction itself).
  auto reds =
      loopReductions(*loop({decl("v", DType::F32, x * x), assign("v", var("v", DType::F32) + x),
                            assign("s", sum + var("v", DType::F32)),
                            ifThen(x > fconst(0.0), {assign("m", max(mx, x))})}));
  REQUIRE(reds.has_value());
  REQUIRE(reds->size() == 2);
  CHECK((*reds)[0].var == "s");
  CHECK((*reds)[0].op == BinOp::Add);
  CHECK((*reds)[1].var == "m");
  CHECK((*reds)[1].op == BinOp::Max);
  CHECK(loopReductions(*loop({store(X, {j}, x)}))->empty());
  // Not reductions: an outer scalar overwritten, read on both sides, or combined two ways.
  CHECK_FALSE(loopReductions(*loop({assign("s", x)})).has_value());
  CHECK_FALSE(loopReductions(*loop({assign("s", sum + sum * x)})).has_value());
  CHECK_FALSE(loopReductions(*loop({assign("s", sum + x), assign("s", max(sum, x))})).has_value());
}

TEST_CASE("kir printer: text form") {
  BufferP X = mkBuf("X", DType::F32, {4, 64}, Scope::Global, Role::In);
  BufferP Y = mkBuf("Y", DType::F16, {4, 64}, Scope::Global, Role::Out);
  BufferP part = mkBuf("part", DType::F32, {8}, Scope::Local);
  BufferP tot = mkBuf("tot", DType::F32, {1}, Scope::Shared);
  E t = var("t"), row = var("row"), i = var("i");
  auto acc = var("acc", DType::F32), xv = var("x", DType::F32);
  Kernel k;
  k.name = "rowsum";
  k.recipe = "reduction";
  k.grid = {{"row", 4}};
  k.threads = 8;
  k.knobs = {{"threads", 8}, {"vec", 1}};
  k.params = {X, Y};
  k.allocs = {part, tot};
  k.body = {
      comment("per-thread partial sums"),
      region("t", {reduce("i", t * 8, 8, {decl("acc", DType::F32, fconst(0))},
                          {assign("acc", acc + load(X, {row, i}))}),
                   store(part, {t}, acc)}),
      blockReduce(sumCombiner(), {part}, {tot}),
      barrier(),
      region("t", {forLoop("i", t, 64 - t,
                           {decl("x", DType::F32, load(X, {row, i}) - load(tot, {0})),
                            ifThen(xv > fconst(0.5) && i < 32,
                                   {store(Y, {row, i}, (xv + fconst(1)) * xv - (xv - xv * 2))},
                                   {store(Y, {row, i},
                                          unary(UnOp::Neg, unary(UnOp::Neg, xv)) +
                                              max(unary(UnOp::Exp, xv), fconst(-1.5)) +
                                              cast(select(i % 2 == 0, fconst(1, DType::F16),
                                                          cast(i / 3, DType::F16)),
                                                   DType::F32))})},
                           8, Stmt::LoopKind::Unrolled)}),
  };
  const char *expected =
      R"(kernel @rowsum recipe(reduction) grid(row: 4) block(t: 8) knobs {threads = 8, vec = 1}
    (X: global f32[4,64] in, Y: global f16[4,64] out) {
  local part: f32[8]
  shared tot: f32[1]
  # per-thread partial sums
  region t {
    reduce i in t * 8 .. t * 8 + 8 {
      init {
        var acc: f32 = 0.0
      }
      update {
        acc = acc + X[row, i]
      }
    }
    part[t] = acc
  }
  block_reduce sum(part) -> (tot) {
    s: f32 = a_s + b_s
  }
  barrier
  region t {
    for i in t .. 64 step 8 unroll {
      var x: f32 = X[row, i] - tot[0]
      if x > 0.5 && i < 32 {
        Y[row, i] = (x + 1.0) * x - (x - x * 2)
      } else {
        Y[row, i] = -(-x) + max(exp(x), -1.5) + f32(select(i % 2 == 0, f16(1.0), f16(i / 3)))
      }
    }
  }
}
)";
  CHECK(printKernel(k) == expected);
  CHECK(joined(verifyKernel(k)) == "");
}

// ---- host target -------------------------------------------------------------------------------

// A fresh directory under the system temp dir, removed at scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    auto tick = std::chrono::steady_clock::now().time_since_epoch().count();
    path = fs::temp_directory_path() / cat("aicf_test_kir_", tick);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string &name) const { return (path / name).string(); }
};

// Elementwise math and conversions, one element per (i, t).
Kernel elementwiseKernel() {
  auto in = [](const char *n, DType dt) { return mkBuf(n, dt, {8, 32}, Scope::Global, Role::In); };
  auto out = [](const char *n, DType dt) {
    return mkBuf(n, dt, {8, 32}, Scope::Global, Role::Out);
  };
  BufferP X = in("X", DType::F32), Y = out("Y", DType::F32), S = out("S", DType::F32),
          H = out("H", DType::F16), BF = out("BF", DType::BF16), Q = out("Q", DType::I64),
          R = out("R", DType::I64), N = out("N", DType::F32);
  E i = var("i"), t = var("t");
  auto x = var("x", DType::F32);
  E n = var("n");
  Kernel k;
  k.name = "ew";
  k.grid = {{"i", 8}};
  k.threads = 32;
  k.params = {X, Y, S, H, BF, Q, R, N};
  k.body = {region(
      "t",
      {decl("x", DType::F32, load(X, {i, t})),
       store(Y, {i, t},
             max(x, fconst(0)) * fconst(2) +
                 unary(UnOp::Exp, unary(UnOp::Neg, unary(UnOp::Abs, x)))),
       store(S, {i, t},
             unary(UnOp::Sigmoid, x) + unary(UnOp::Erf, x) + unary(UnOp::Rsqrt, x * x + fconst(1))),
       store(H, {i, t}, x * fconst(3)), store(BF, {i, t}, x * fconst(3)),
       decl("n", DType::I64, i * 32 + t - 100), store(Q, {i, t}, n / 7), store(R, {i, t}, n % 7),
       store(N, {i, t}, unary(UnOp::Round, x * fconst(4)))})};
  return k;
}

// One-pass layer norm: per-thread Welford state in local buffers, merged by a 3-field
// block_reduce, then normalisation in a second region.
Kernel layerNormKernel(int64_t rows, int64_t cols, int64_t threads) {
  BufferP X = mkBuf("X", DType::F32, {rows, cols}, Scope::Global, Role::In);
  BufferP Y = mkBuf("Y", DType::F32, {rows, cols}, Scope::Global, Role::Out);
  BufferP Stat = mkBuf("Stat", DType::F32, {rows, 2}, Scope::Global, Role::Out);
  auto f32 = [](const char *n) { return var(n, DType::F32); };
  auto local = [&](const char *n) { return mkBuf(n, DType::F32, {threads}, Scope::Local); };
  auto shared = [](const char *n) { return mkBuf(n, DType::F32, {1}, Scope::Shared); };
  BufferP ln = local("ln"), lmean = local("lmean"), lm2 = local("lm2");
  BufferP sn = shared("sn"), smean = shared("smean"), sm2 = shared("sm2");
  E t = var("t"), row = var("row"), i = var("i");
  Combiner w;
  w.name = "welford";
  w.fields = {{"n", DType::F32}, {"mean", DType::F32}, {"m2", DType::F32}};
  w.lets = {{"nn", f32("a_n") + f32("b_n")},
            {"delta", f32("b_mean") - f32("a_mean")},
            {"w", select(f32("nn") > fconst(0), f32("b_n") / f32("nn"), fconst(0))}};
  w.merged = {f32("nn"), f32("a_mean") + f32("delta") * f32("w"),
              f32("a_m2") + f32("b_m2") + f32("delta") * f32("delta") * f32("a_n") * f32("w")};
  Kernel k;
  k.name = "lnorm";
  k.recipe = "online_norm";
  k.grid = {{"row", rows}};
  k.threads = threads;
  k.params = {X, Y, Stat};
  k.allocs = {ln, lmean, lm2, sn, smean, sm2};
  k.body = {
      region("t",
             {decl("n", DType::F32, fconst(0)), decl("mean", DType::F32, fconst(0)),
              decl("m2", DType::F32, fconst(0)),
              forLoop("i", t, cols - t,
                      {decl("x", DType::F32, load(X, {row, i})), assign("n", f32("n") + fconst(1)),
                       decl("d", DType::F32, f32("x") - f32("mean")),
                       assign("mean", f32("mean") + f32("d") / f32("n")),
                       assign("m2", f32("m2") + f32("d") * (f32("x") - f32("mean")))},
                      threads),
              store(ln, {t}, f32("n")), store(lmean, {t}, f32("mean")),
              store(lm2, {t}, f32("m2"))}),
      blockReduce(w, {ln, lmean, lm2}, {sn, smean, sm2}),
      barrier(),
      region(
          "t",
          {decl("mu", DType::F32, load(smean, {0})),
           decl("var", DType::F32, load(sm2, {0}) / load(sn, {0})),
           decl("rstd", DType::F32, unary(UnOp::Rsqrt, f32("var") + fconst(1e-5))),
           forLoop("i", t, cols - t,
                   {store(Y, {row, i}, (load(X, {row, i}) - f32("mu")) * f32("rstd"))}, threads),
           ifThen(t == 0, {store(Stat, {row, 0}, f32("mu")), store(Stat, {row, 1}, f32("var"))})}),
  };
  return k;
}

// A 32x32 transpose staged through an 8x9 shared tile (two regions and a barrier).
Kernel stagedTransposeKernel() {
  BufferP X = mkBuf("X", DType::F32, {32, 32}, Scope::Global, Role::In);
  BufferP Y = mkBuf("Y", DType::F32, {32, 32}, Scope::Global, Role::Out);
  BufferP tile = mkBuf("tile", DType::F32, {8, 9}, Scope::Shared);
  E t = var("t"), j = var("j"), bi = var("bi"), bj = var("bj");
  Kernel k;
  k.name = "staged";
  k.grid = {{"bi", 4}, {"bj", 4}};
  k.threads = 8;
  k.params = {X, Y};
  k.allocs = {tile};
  k.body = {
      region("t", {forLoop("j", 0, 8, {store(tile, {t, j}, load(X, {bi * 8 + t, bj * 8 + j}))})}),
      barrier(),
      region("t", {forLoop("j", 0, 8, {store(Y, {bj * 8 + t, bi * 8 + j}, load(tile, {j, t}))})}),
  };
  return k;
}

// A shared buffer above the stack limit (80 KB): staged reversal of each row.
Kernel bigStageKernel() {
  const int64_t n = 20000;
  BufferP X = mkBuf("X", DType::F32, {3, n}, Scope::Global, Role::In);
  BufferP Y = mkBuf("Y", DType::F32, {3, n}, Scope::Global, Role::Out);
  BufferP big = mkBuf("big", DType::F32, {n}, Scope::Shared);
  E t = var("t"), i = var("i"), b = var("b");
  Kernel k;
  k.name = "bigstage";
  k.grid = {{"b", 3}};
  k.threads = 4;
  k.params = {X, Y};
  k.allocs = {big};
  k.body = {
      region("t", {forLoop("i", t, n - t, {store(big, {i}, load(X, {b, i}) * fconst(2))}, 4)}),
      barrier(),
      region("t", {forLoop("i", t, n - t, {store(Y, {b, i}, load(big, {n - 1 - i}))}, 4)}),
  };
  return k;
}

// C[M,N] = A[M,K] x B[K,N]: one block per BMxBN tile, K staged through shared tiles by all
// threads, mma_tile into per-thread TMxTN accumulators, an epilogue region storing them.
Kernel gemmKernel(const std::string &name, int64_t M, int64_t N, int64_t K, int64_t BM, int64_t BN,
                  int64_t BK, int64_t TM, int64_t TN, DType opType) {
  int64_t T = (BM / TM) * (BN / TN);
  BufferP A = mkBuf("A", opType, {M, K}, Scope::Global, Role::In);
  BufferP B = mkBuf("B", opType, {K, N}, Scope::Global, Role::In);
  BufferP C = mkBuf("C", DType::F32, {M, N}, Scope::Global, Role::Out);
  BufferP As = mkBuf("As", opType, {BM, BK}, Scope::Shared);
  BufferP Bs = mkBuf("Bs", opType, {BK, BN}, Scope::Shared);
  BufferP acc = mkBuf("acc", DType::F32, {T, TM, TN}, Scope::Local);
  E t = var("t"), bm = var("bm"), bn = var("bn"), k0 = var("k0"), e = var("e"), i = var("i"),
    j = var("j");
  Kernel k;
  k.name = name;
  k.recipe = "tiled_contraction";
  k.grid = {{"bm", M / BM}, {"bn", N / BN}};
  k.threads = T;
  k.knobs = {{"BM", BM}, {"BN", BN}, {"BK", BK}, {"TM", TM}, {"TN", TN}};
  k.params = {A, B, C};
  k.allocs = {As, Bs, acc};
  k.body = {
      region("t", {forLoop("i", 0, TM, {forLoop("j", 0, TN, {store(acc, {t, i, j}, fconst(0))})})}),
      forLoop(
          "k0", 0, K,
          {region(
               "t",
               {forLoop("e", t, BM * BK - t,
                        {store(As, {e / BK, e % BK}, load(A, {bm * BM + e / BK, k0 + e % BK}))}, T),
                forLoop("e", t, BK * BN - t,
                        {store(Bs, {e / BN, e % BN}, load(B, {k0 + e / BN, bn * BN + e % BN}))},
                        T)}),
           barrier(), mmaTile(acc, As, Bs, BM, BN, BK, TM, TN), barrier()},
          BK),
      region("t", {decl("r0", DType::I64, t / (BN / TN) * TM),
                   decl("c0", DType::I64, t % (BN / TN) * TN),
                   forLoop("i", 0, TM,
                           {forLoop("j", 0, TN,
                                    {store(C, {bm * BM + var("r0") + i, bn * BN + var("c0") + j},
                                           load(acc, {t, i, j}))},
                                    1, Stmt::LoopKind::Vectorized)})}),
  };
  return k;
}

struct GemmCase {
  const char *name;
  int64_t M, N, K, BM, BN, BK, TM, TN;
  DType op;
};
// Vector micro-kernel: 13-row tiles (8 + 4 + 1 row blocks) x 48 columns (a 32-wide panel and a
// 16-wide one), packed B panels; then one thread per 16x32 tile with K*32 > the pack buffer
// (unpacked B). Generic loops: tn = 4 (f32) and f16 operands.
const GemmCase kGemms[] = {
    {"gemm_vec", 52, 192, 80, 26, 96, 16, 13, 48, DType::F32},
    {"gemm_vec_unpacked", 32, 64, 640, 16, 32, 320, 16, 32, DType::F32},
    {"gemm_generic", 32, 48, 24, 16, 16, 8, 4, 4, DType::F32},
    {"gemm_f16", 32, 32, 32, 16, 32, 16, 8, 16, DType::F16},
};

// No grid (a single block): a block_reduce over 4 threads, block-level scalars updated by a
// block-level reduce, Y[0] = 8 * sum(X^2).
Kernel gridlessKernel() {
  BufferP X = mkBuf("X", DType::F32, {4}, Scope::Global, Role::In);
  BufferP Y = mkBuf("Y", DType::F32, {1}, Scope::Global, Role::Out);
  BufferP st = mkBuf("st", DType::F32, {4}, Scope::Local);
  BufferP s = mkBuf("s", DType::F32, {1}, Scope::Shared);
  E t = var("t");
  auto scale = var("scale", DType::F32);
  Kernel k;
  k.name = "gridless";
  k.threads = 4;
  k.params = {X, Y};
  k.allocs = {st, s};
  k.body = {
      region("t", {store(st, {t}, load(X, {t}) * load(X, {t}))}),
      blockReduce(sumCombiner(), {st}, {s}),
      reduce("k", 0, 3, {decl("scale", DType::F32, fconst(1))},
             {assign("scale", scale * fconst(2))}),
      region("t", {ifThen(t == 0, {store(Y, {0}, load(s, {0}) * scale)})}),
  };
  return k;
}

std::vector<Kernel> gemmKernels() {
  std::vector<Kernel> ks;
  for (const GemmCase &g : kGemms)
    ks.push_back(gemmKernel(g.name, g.M, g.N, g.K, g.BM, g.BN, g.BK, g.TM, g.TN, g.op));
  return ks;
}

std::vector<Kernel> hostKernels() {
  std::vector<Kernel> ks = {elementwiseKernel(), layerNormKernel(6, 200, 16),
                            stagedTransposeKernel(), bigStageKernel(), gridlessKernel()};
  for (Kernel &k : gemmKernels())
    ks.push_back(std::move(k));
  return ks;
}

// Kernels compiled once per process (with -Wall -Wextra -Werror: generated code is
// warning-free) and loaded.
struct HostLib {
  TempDir dir;
  std::unique_ptr<LoadedLibrary> lib;
  HostLib(const std::vector<Kernel> &kernels, const std::string &flags) {
    HostBuildOptions opts;
    opts.extraFlags = "-Wall -Wextra -Werror " + flags;
    compileHostSource(printHostSource(kernels), dir.file("k.cpp"), dir.file("k.so"), opts);
    lib = std::make_unique<LoadedLibrary>(dir.file("k.so"));
  }
  static const HostLib &get() {
    static HostLib h(hostKernels(), "");
    return h;
  }
  // The GEMMs again with another micro-kernel shape (14 rows: remainder blocks of 4 + 4 + 4 + 1
  // for 13-row tiles; 3-vector panels with 16-wide remainders) and no B packing.
  static const HostLib &gemmVariant() {
    static HostLib h(gemmKernels(), "-DAICF_MMA_MR=14 -DAICF_MMA_NV=3 -DAICF_MMA_PACK=0");
    return h;
  }
  LoadedLibrary::KernelFn fn(const char *name) const { return lib->kernel(name); }
};

// Deterministic values in [-1, 1).
std::vector<float> pseudoRandom(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (float &x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) / 8388608.0f - 1.0f;
  }
  return v;
}

TEST_CASE("host printer: deterministic, verified input") {
  CHECK(printHostSource(hostKernels()) == printHostSource(hostKernels()));
  Fixture f;
  CHECK_THROWS_AS(printHostSource({f.kernel({barrier(), region("t", {barrier()})})}),
                  InternalError);
}

TEST_CASE("host build: compiler and loader errors") {
  TempDir dir;
  try {
    compileHostSource("int main( {", dir.file("bad.cpp"), dir.file("bad.so"));
    FAIL("expected a UserError");
  } catch (const UserError &e) {
    std::string msg = e.what();
    CHECK(msg.find("host compile failed") != std::string::npos);
    CHECK(msg.find("bad.cpp") != std::string::npos);
    CHECK(msg.find("error") != std::string::npos);
  }
  CHECK_THROWS_AS(LoadedLibrary(dir.file("missing.so")), UserError);
  CHECK_THROWS_WITH_AS(HostLib::get().fn("no_such_kernel"),
                       doctest::Contains("no kernel symbol no_such_kernel"), UserError);
}

// A source that declares parts (`#define AICF_PARTS 3`, as the host printer writes for large
// models) is compiled as three translation units at once and linked: every part's kernel is in
// the library, the part objects are gone afterwards, and a part that fails names itself.
TEST_CASE("host build: a source in parts compiles in parallel into one library") {
  test_files::NoBuildCache uncached;
  TempDir dir;
  std::string src = "// parts\n#define AICF_PARTS 3\n#ifdef AICF_PART\n#define AICF_IN_PART(p) "
                    "(AICF_PART == (p))\n#else\n#define AICF_IN_PART(p) 1\n#endif\n";
  for (int p = 0; p < 3; ++p)
    src += cat("#if AICF_IN_PART(", p, ")\nextern \"C\" void k", p,
               "(void *const *a) { *static_cast<float *>(a[0]) = ", p + 1, ".0f; }\n#endif\n");
  compileHostSource(src, dir.file("parts.cpp"), dir.file("parts.so"));
  {
    LoadedLibrary lib(dir.file("parts.so"));
    for (int p = 0; p < 3; ++p) {
      float out = 0;
      void *args[] = {&out};
      lib.kernel(cat("k", p))(args);
      CHECK(out == float(p + 1));
    }
  }
  for (int p = 0; p < 3; ++p)
    CHECK_FALSE(std::filesystem::exists(dir.file(cat("parts.so.part", p, ".o"))));
  std::string bad = src;
  bad.replace(bad.find("2.0f"), 4, "2.0f +");
  try {
    compileHostSource(bad, dir.file("bad_parts.cpp"), dir.file("bad_parts.so"));
    FAIL("expected a UserError");
  } catch (const UserError &e) {
    CHECK(std::string(e.what()).find("host compile (part 1 of 3) failed") != std::string::npos);
  }
  for (int p = 0; p < 3; ++p)
    CHECK_FALSE(std::filesystem::exists(dir.file(cat("bad_parts.so.part", p, ".o"))));
}

TEST_CASE("host kernels: elementwise math, conversions, integer div/mod, round") {
  const int64_t n = 8 * 32;
  std::vector<float> X(n), Y(n), S(n), N(n);
  std::vector<uint16_t> H(n), BF(n);
  std::vector<int64_t> Q(n), R(n);
  for (int64_t i = 0; i < n; ++i)
    X[i] = static_cast<float>(i - 128) / 8.0f; // many exact halves once scaled by 4
  void *args[] = {X.data(), Y.data(), S.data(), H.data(), BF.data(), Q.data(), R.data(), N.data()};
  HostLib::get().fn("ew")(args);
  for (int64_t i = 0; i < n; ++i) {
    CAPTURE(i);
    float x = X[i];
    CHECK(Y[i] == doctest::Approx(std::max(x, 0.0f) * 2 + std::exp(-std::fabs(x))).epsilon(1e-6));
    float s = 1.0f / (1.0f + std::exp(-x)) + std::erf(x) + 1.0f / std::sqrt(x * x + 1.0f);
    CHECK(S[i] == doctest::Approx(s).epsilon(1e-6));
    CHECK(H[i] == floatToF16(x * 3.0f));
    CHECK(BF[i] == floatToBf16(x * 3.0f));
    int64_t v = i - 100;
    CHECK(Q[i] == v / 7); // truncating division, C remainder
    CHECK(R[i] == v % 7);
    CHECK(N[i] == std::nearbyint(x * 4.0f)); // half to even
  }
  CHECK(N[129] == 0.0f); // 1/8 * 4 = 0.5 -> 0
  CHECK(N[131] == 2.0f); // 1.5 -> 2
  CHECK(N[133] == 2.0f); // 2.5 -> 2
  CHECK(N[127] == 0.0f); // -0.5 -> -0
  CHECK(std::signbit(N[127]));
}

// exp / tanh / erf / sigmoid of every element of X (the prelude's vectorised float versions).
Kernel mathKernel(int64_t blocks) {
  auto buf = [&](const char *n, Role r) {
    return mkBuf(n, DType::F32, {blocks, 256}, Scope::Global, r);
  };
  BufferP X = buf("X", Role::In), Ex = buf("Ex", Role::Out), Th = buf("Th", Role::Out),
          Er = buf("Er", Role::Out), Sg = buf("Sg", Role::Out);
  E i = var("i"), t = var("t");
  auto x = var("x", DType::F32);
  Kernel k;
  k.name = "math";
  k.grid = {{"i", blocks}};
  k.threads = 256;
  k.params = {X, Ex, Th, Er, Sg};
  k.body = {
      region("t", {decl("x", DType::F32, load(X, {i, t})), store(Ex, {i, t}, unary(UnOp::Exp, x)),
                   store(Th, {i, t}, unary(UnOp::Tanh, x)), store(Er, {i, t}, unary(UnOp::Erf, x)),
                   store(Sg, {i, t}, unary(UnOp::Sigmoid, x))})};
  return k;
}

// A kernel with two on-chip buffers too large for the stack (the host prelude's per-thread
// scratch arena, aicf_alloc / aicf_release): Y = (2 X) + (2 X + 1) through both.
Kernel scratchKernel(const char *name, int64_t n1, int64_t n2) {
  BufferP X = mkBuf("X", DType::F32, {4096}, Scope::Global, Role::In);
  BufferP Y = mkBuf("Y", DType::F32, {4096}, Scope::Global, Role::Out);
  BufferP S1 = mkBuf("S1", DType::F32, {n1}, Scope::Shared, Role::Temp);
  BufferP S2 = mkBuf("S2", DType::F32, {n2}, Scope::Shared, Role::Temp);
  E e = var("e");
  Kernel k;
  k.name = name;
  k.grid = {{"b", 1}};
  k.threads = 1;
  k.params = {X, Y};
  k.allocs = {S1, S2};
  k.body = {region("t", {forLoop("e", E(int64_t(0)), E(int64_t(4096)),
                                 {store(S1, {e + E(n1 - 4096)}, fconst(2) * load(X, {e})),
                                  store(S2, {e}, load(S1, {e + E(n1 - 4096)}) + fconst(1)),
                                  store(Y, {e}, load(S2, {e}) + load(S1, {e + E(n1 - 4096)}))})})};
  return k;
}

// The arena: the first call sizes it for its first buffer, the second buffer then takes malloc;
// a larger kernel's buffers next; every later call takes both from the grown arena. Each result
// is checked, and an out-of-range or overlapping buffer would show in them.
TEST_CASE("host kernels: per-call scratch from the per-thread arena, grown and reused") {
  static HostLib lib({scratchKernel("small", 20000, 30000), scratchKernel("large", 70000, 90000)},
                     "");
  std::vector<float> x = pseudoRandom(4096, 11), y(4096);
  void *args[] = {x.data(), y.data()};
  for (const char *name : {"small", "large", "small", "large", "small"}) {
    CAPTURE(name);
    std::fill(y.begin(), y.end(), 0.0f);
    lib.fn(name)(args);
    int bad = 0;
    for (size_t i = 0; i < y.size(); ++i)
      bad += y[i] != 4.0f * x[i] + 1.0f;
    CHECK(bad == 0);
  }
  std::string src = printHostSource({scratchKernel("small", 20000, 30000)});
  CHECK(src.find("aicf_alloc(20000 * sizeof(float))") != std::string::npos);
  CHECK(src.find("aicf_release(S1);") != std::string::npos);
}

TEST_CASE("host kernels: vectorised exp/tanh/erf/sigmoid match std:: to <= 5e-7 relative") {
  // Dense sweeps over the useful ranges, magnitudes from subnormal to huge, and specials.
  std::vector<float> X;
  const int n = 1 << 18;
  for (int i = 0; i < n; ++i) {
    float u = static_cast<float>(i) / n;
    X.push_back(-104.0f + 194.0f * u); // exp: underflow .. overflow
    X.push_back(-8.0f + 16.0f * u);    // tanh / erf / sigmoid core
    X.push_back(std::ldexp(1.0f, -149 + static_cast<int>(u * 160)) * (1.0f + u)); // tiny..huge
    X.push_back(-X.back());
  }
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  const float maxf = std::numeric_limits<float>::max(),
              den = std::numeric_limits<float>::denorm_min();
  for (float v :
       {inf,     -inf,    nan,     0.0f,   -0.0f, maxf,  -maxf, den,  -den, 88.72f, 88.73f,
        -87.34f, -103.9f, -0.625f, 0.625f, 1.0f,  -1.0f, 3.9f,  4.0f, 4.1f, 9.0f,   -9.0f})
    X.push_back(v);
  while (X.size() % 256)
    X.push_back(0.5f);
  const int64_t blocks = static_cast<int64_t>(X.size() / 256);
  std::vector<float> Ex(X.size()), Th(X.size()), Er(X.size()), Sg(X.size());
  static HostLib lib({mathKernel(blocks)}, "");
  void *args[] = {X.data(), Ex.data(), Th.data(), Er.data(), Sg.data()};
  lib.fn("math")(args);

  auto check = [&](const char *what, const std::vector<float> &got, double (*ref)(double),
                   bool flushes = false) {
    double worst = 0;
    float worstX = 0;
    for (size_t i = 0; i < X.size(); ++i) {
      double r = ref(static_cast<double>(X[i])), g = got[i];
      if (std::isnan(r)) {
        if (!std::isnan(g))
          worst = 1, worstX = X[i];
        continue;
      }
      if (std::isinf(r) || r == 0) {
        if (g != r || std::signbit(g) != std::signbit(r))
          worst = 1, worstX = X[i];
        continue;
      }
      // Relative error, with subnormal results measured against the smallest normal; exp
      // flushes them to 0 (host_prelude.cpp: a subnormal costs an assist in each reader).
      double err = std::fabs(g - r) / std::max(std::fabs(r), 1.1754943508222875e-38);
      if (std::fabs(r) < 1.1754943508222875e-38)
        err = flushes ? (g == 0 ? 0.0 : 1.0)
                      : std::max(0.0, std::fabs(g - r) - 1.401298464324817e-45) /
                            1.1754943508222875e-38;
      if (err > worst)
        worst = err, worstX = X[i];
    }
    CAPTURE(what);
    CAPTURE(worstX);
    CHECK(worst <= 5e-7);
  };
  check(
      "exp", Ex, [](double v) { return static_cast<double>(static_cast<float>(std::exp(v))); },
      true);
  check("tanh", Th, [](double v) { return std::tanh(v); });
  check("erf", Er, [](double v) { return std::erf(v); });
  check("sigmoid", Sg, [](double v) { // as 1 / (1 + expf(-x)): 0 once expf(-x) overflows
    return static_cast<double>(1.0f / (1.0f + static_cast<float>(std::exp(-v))));
  });
}

TEST_CASE("host kernels: Welford layer norm via regions, local state and block_reduce") {
  const int64_t rows = 6, cols = 200;
  std::vector<float> X = pseudoRandom(rows * cols, 7), Y(rows * cols), Stat(rows * 2);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      X[r * cols + c] = X[r * cols + c] * (r + 1) + static_cast<float>(r) * 3; // offset rows
  void *args[] = {X.data(), Y.data(), Stat.data()};
  HostLib::get().fn("lnorm")(args);
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < cols; ++c)
      mean += X[r * cols + c];
    mean /= cols;
    for (int64_t c = 0; c < cols; ++c)
      var += (X[r * cols + c] - mean) * (X[r * cols + c] - mean);
    var /= cols;
    CAPTURE(r);
    CHECK(Stat[r * 2] == doctest::Approx(mean).epsilon(1e-5));
    CHECK(Stat[r * 2 + 1] == doctest::Approx(var).epsilon(1e-4));
    for (int64_t c = 0; c < cols; ++c) {
      double y = (X[r * cols + c] - mean) / std::sqrt(var + 1e-5);
      CHECK(std::fabs(Y[r * cols + c] - y) < 1e-4);
    }
  }
}

TEST_CASE("host kernels: shared-memory staging with barriers") {
  std::vector<float> X = pseudoRandom(32 * 32, 3), Y(32 * 32, -1.0f);
  void *args[] = {X.data(), Y.data()};
  HostLib::get().fn("staged")(args);
  int bad = 0;
  for (int r = 0; r < 32; ++r)
    for (int c = 0; c < 32; ++c)
      bad += Y[r * 32 + c] != X[c * 32 + r];
  CHECK(bad == 0);

  const int64_t n = 20000; // 80 KB shared buffer: heap-allocated per OpenMP thread
  std::vector<float> BX = pseudoRandom(3 * n, 5), BY(3 * n);
  void *bargs[] = {BX.data(), BY.data()};
  HostLib::get().fn("bigstage")(bargs);
  bad = 0;
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t i = 0; i < n; ++i)
      bad += BY[b * n + i] != BX[b * n + n - 1 - i] * 2;
  CHECK(bad == 0);
}

TEST_CASE("host kernels: a single block (no grid), block-level reduce and scalars") {
  std::vector<float> X = {1, -2, 3, 0.5f}, Y = {0};
  void *args[] = {X.data(), Y.data()};
  HostLib::get().fn("gridless")(args);
  CHECK(Y[0] == 8 * (1 + 4 + 9 + 0.25f));
}

// Runs every GEMM of kGemms from `lib` against a naive triple loop in double.
void checkGemms(const HostLib &lib) {
  for (const GemmCase &g : kGemms) {
    std::string name = g.name;
    CAPTURE(name);
    std::vector<float> A = pseudoRandom(g.M * g.K, 11), B = pseudoRandom(g.K * g.N, 13);
    std::vector<float> C(g.M * g.N, -7.0f);
    std::vector<uint16_t> A16(A.size()), B16(B.size());
    if (g.op == DType::F16) { // the reference uses the f16-rounded values
      for (size_t i = 0; i < A.size(); ++i)
        A[i] = f16ToFloat(A16[i] = floatToF16(A[i]));
      for (size_t i = 0; i < B.size(); ++i)
        B[i] = f16ToFloat(B16[i] = floatToF16(B[i]));
    }
    void *args[] = {g.op == DType::F16 ? static_cast<void *>(A16.data()) : A.data(),
                    g.op == DType::F16 ? static_cast<void *>(B16.data()) : B.data(), C.data()};
    lib.fn(g.name)(args);
    // f32 accumulation (in another order) vs a double reference with |A|, |B| < 1 and K <= 640:
    // rounding stays far below 1e-3, while any indexing error is O(1).
    double maxErr = 0;
    for (int64_t i = 0; i < g.M; ++i)
      for (int64_t j = 0; j < g.N; ++j) {
        double ref = 0;
        for (int64_t kk = 0; kk < g.K; ++kk)
          ref += static_cast<double>(A[i * g.K + kk]) * B[kk * g.N + j];
        maxErr = std::max(maxErr, std::fabs(C[i * g.N + j] - ref));
      }
    CHECK(maxErr < 1e-3);
  }
}

TEST_CASE("host kernels: mma_tile GEMM (vector micro-kernel and generic paths)") {
  checkGemms(HostLib::get());
}

TEST_CASE("host kernels: mma_tile GEMM with another micro-kernel shape, unpacked") {
  checkGemms(HostLib::gemmVariant());
}

} // namespace
