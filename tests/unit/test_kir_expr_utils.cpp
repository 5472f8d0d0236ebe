// Kernel IR expression utilities shared by the printer and Kernel IR passes (kir/kir.h):
// exprStr (the text form, optionally quoting f32 constants as their f32 values), exprEqual
// (structural) and rewriteExpr (rename variables, redirect loads, share unchanged subtrees).
#include "kir/kir.h"

#include <doctest/doctest.h>

#include <cmath>

using namespace aicf;
using namespace aicf::kir;

TEST_CASE("kir expr utils: exprStr is the kernel text form; diagnostics quote f32 values") {
  auto C = std::make_shared<Buffer>(Buffer{"C", DType::F32, {4, 8}, Scope::Local, Role::Temp});
  E e = fconst(0.25) * load(C, {var("t"), E(3)}) +
        fconst(static_cast<float>(0.35)) * var("x", DType::F32);
  CHECK(exprStr(e) == "0.25 * C[t, 3] + 0.3499999940395355 * x");
  CHECK(exprStr(e, /*f32Values=*/true) == "0.25 * C[t, 3] + 0.35 * x");
  CHECK(exprStr(var("a") - (var("b") - var("c"))) == "a - (b - c)");
  CHECK(exprStr(E()) == "<null>");
}

TEST_CASE("kir expr utils: exprEqual is structural, NaN equals NaN") {
  auto A = std::make_shared<Buffer>(Buffer{"A", DType::F32, {4}, Scope::Global, Role::In});
  auto B = std::make_shared<Buffer>(Buffer{"B", DType::F32, {4}, Scope::Global, Role::In});
  CHECK(exprEqual((var("i") * E(4) + E(1)).get(), (var("i") * E(4) + E(1)).get()));
  CHECK(!exprEqual((var("i") * E(4)).get(), (var("j") * E(4)).get()));
  CHECK(!exprEqual(load(A, {var("i")}).get(), load(B, {var("i")}).get()));
  CHECK(exprEqual(fconst(NAN).get(), fconst(NAN).get()));
  CHECK(!exprEqual(fconst(1.0).get(), fconst(1.0, DType::F16).get()));
}

TEST_CASE("kir expr utils: rewriteExpr renames variables and redirects loads") {
  auto A = std::make_shared<Buffer>(Buffer{"A", DType::F32, {4}, Scope::Global, Role::In});
  auto B = std::make_shared<Buffer>(Buffer{"B", DType::F32, {4}, Scope::Global, Role::In});
  E e = load(A, {var("q")}) + load(B, {var("k")});
  E r = rewriteExpr(e, {{"q", "r"}});
  CHECK(exprStr(r) == "A[r] + B[k]");
  CHECK(exprStr(rewriteExpr(e, {}, A, B)) == "B[q] + B[k]");
  // Untouched subtrees are shared, an unchanged expression is returned as is.
  CHECK(r->args[1] == e->args[1]);
  CHECK(rewriteExpr(e, {{"z", "w"}}).get() == e.get());
}
