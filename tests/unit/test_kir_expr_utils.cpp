// Kernel IR expression utilities shared by the printer and Kernel IR passes (kir/kir.h):
// exprStr (the text form, optionally quoting f32 constants as their f32 values), exprEqual
// (structural) and rewriteExpr (rename variables, redirect loads, share unchanged subtrees).
#include "kir/kir.h"

#include <doctest/doctest.h>

#include <cmath>

using namespace aicf;
using namespace aicf::kir;

TEST_CASE("kir expr utils: exprStr is the kernel text form; diagnostics quote f32 values") {
  auto C = std::make_shared<Buffer>(Buffer{"C", DType::F32, {4, 8}, Scope::Local, Role::Temp, {}});
  E e = fconst(0.25) * load(C, {var("t"), E(3)}) +
        fconst(static_cast<float>(0.35)) * var("x", DType::F32);
  CHECK(exprStr(e) == "0.25 * C[t, 3] + 0.3499999940395355 * x");
  CHECK(exprStr(e, /*f32Values=*/true) == "0.25 * C[t, 3] + 0.35 * x");
  CHECK(exprStr(var("a") - (var("b") - var("c"))) == "a - (b - c)");
  CHECK(exprStr(E()) == "<null>");
}

TEST_CASE("kir expr utils: exprEqual is structural, NaN equals NaN") {
  auto A = std::make_shared<Buffer>(Buffer{"A", DType::F32, {4}, Scope::Global, Role::In, {}});
  auto B = std::make_shared<Buffer>(Buffer{"B", DType::F32, {4}, Scope::Global, Role::In, {}});
  CHECK(exprEqual((var("i") * E(4) + E(1)).get(), (var("i") * E(4) + E(1)).get()));
  CHECK(!exprEqual((var("i") * E(4)).get(), (var("j") * E(4)).get()));
  CHECK(!exprEqual(load(A, {var("i")}).get(), load(B, {var("i")}).get()));
  CHECK(exprEqual(fconst(NAN).get(), fconst(NAN).get()));
  CHECK(!exprEqual(fconst(1.0).get(), fconst(1.0, DType::F16).get()));
}

TEST_CASE("kir expr utils: rewriteExpr renames variables and redirects loads") {
  auto A = std::make_shared<Buffer>(Buffer{"A", DType::F32, {4}, Scope::Global, Role::In, {}});
  auto B = std::make_shared<Buffer>(Buffer{"B", DType::F32, {4}, Scope::Global, Role::In, {}});
  E e = load(A, {var("q")}) + load(B, {var("k")});
  E r = rewriteExpr(e, {{"q", "r"}});
  CHECK(exprStr(r) == "A[r] + B[k]");
  CHECK(exprStr(rewriteExpr(e, {}, A, B)) == "B[q] + B[k]");
  // Untouched subtrees are shared, an unchanged expression is returned as is.
  CHECK(r->args[1] == e->args[1]);
  CHECK(rewriteExpr(e, {{"z", "w"}}).get() == e.get());
}

TEST_CASE("kir expr: the digits of a flat index re-join while the sum is built") {
  E i = var("i");
  // A [2, 2, 64, 64] tensor read at its own flat position, flattened outermost digit first.
  E flat =
      i / E(8192) * E(8192) + i / E(4096) % E(2) * E(4096) + i / E(64) % E(64) * E(64) + i % E(64);
  CHECK(exprStr(flat) == "i");
  // Broadcast over the second axis: its digit drops out, the inner two re-join into a modulo.
  E bcast = i / E(8192) * E(4096) + i / E(64) % E(64) * E(64) + i % E(64);
  CHECK(exprStr(bcast) == "i / 8192 * 4096 + i % 4096");
  // Only when the constants fit and the dividend is the same expression.
  CHECK(exprStr(i / E(8192) * E(8192) + i / E(64) % E(64) * E(64)) ==
        "i / 8192 * 8192 + i / 64 % 64 * 64");
  CHECK(exprStr(i / E(64) * E(64) + var("j") % E(64)) == "i / 64 * 64 + j % 64");
  CHECK(exprStr(i / E(64) % E(64) * E(64) + i % E(32)) == "i / 64 % 64 * 64 + i % 32");
  // The identities hold for C's truncating division, negative dividends included.
  for (int64_t x = -20000; x <= 20000; x += 37) {
    CAPTURE(x);
    CHECK(x / 8192 * 8192 + x / 4096 % 2 * 4096 == x / 4096 * 4096);
    CHECK(x / 64 % 64 * 64 + x % 64 == x % 4096);
    CHECK(x / 64 * 64 + x % 64 == x);
  }
}
