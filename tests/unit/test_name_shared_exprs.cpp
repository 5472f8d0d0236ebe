// name-shared-exprs (kir/name_shared_exprs.h): a large subexpression a statement reads more than
// once is declared once before it; small shared operands, and ones read only inside a select's
// branches, stay inline; the printed text of a chain stops growing geometrically.
#include "kir/kir.h"
#include "kir/kir_pass.h"
#include "kir/name_shared_exprs.h"

#include <doctest/doctest.h>

#include <string>

using namespace aicf;
using namespace aicf::kir;

namespace {

// clip(x, 0, 255) as the lowering spells it: NaN-propagating max then min, x read three times.
E clip255(E x) {
  E lo = select((x > fconst(0)) && (x == x), x, fconst(0));
  return select((lo < fconst(255)) && (lo == lo), lo, fconst(255));
}

// A fake-quantize step repeated `depth` times over X[i] into Y[i], inside a region.
Kernel chainKernel(int depth, BufferP &x, BufferP &y) {
  x = std::make_shared<Buffer>(Buffer{"X", DType::F32, {64}, Scope::Global, Role::In, {}});
  y = std::make_shared<Buffer>(Buffer{"Y", DType::F32, {64}, Scope::Global, Role::Out, {}});
  E v = load(x, {var("t")});
  for (int d = 0; d < depth; ++d)
    v = clip255(unary(UnOp::Round, v * fconst(10.0))) * fconst(0.1);
  Kernel k;
  k.name = "chain";
  k.threads = 64;
  k.params = {x, y};
  k.body = {region("t", {store(y, {var("t")}, v)})};
  return k;
}

} // namespace

TEST_CASE("name-shared-exprs: a fake-quantize chain prints each step once") {
  // Four steps print ~1.2 MB inline (each step reads the one before ~16 times; six printed
  // 491 MB and took 11 minutes under the sanitizers).
  const int depth = 4;
  BufferP x, y;
  Kernel k = chainKernel(depth, x, y);
  size_t before = printKernel(k).size();
  std::vector<std::string> notes;
  REQUIRE(nameSharedExprs(k, notes));
  std::string text = printKernel(k);
  MESSAGE("printed ", before, " bytes before, ", text.size(), " after");
  CHECK(text.size() * 50 < before);
  CHECK(text.find("var cse0: f32 = ") != std::string::npos);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].find("name-shared-exprs: ") == 0);
  // The names come first, in order (each reads only the ones before it), then the store: at
  // least one per step (its clip's inner max, read three times by the min).
  const Stmt &r = *k.body[0];
  REQUIRE(r.body.size() >= size_t(depth) + 1);
  for (size_t i = 0; i + 1 < r.body.size(); ++i) {
    CHECK(r.body[i]->kind == Stmt::Kind::Decl);
    CHECK(r.body[i]->var == "cse" + std::to_string(i));
  }
  CHECK(r.body.back()->kind == Stmt::Kind::Store);
  // The pass manager's verifier accepts the result.
  CHECK(verifyKernel(k).empty());
  // A second run has nothing left to name.
  CHECK_FALSE(nameSharedExprs(k, notes));
}

TEST_CASE("name-shared-exprs: small operands and operands only a branch reads stay inline") {
  BufferP x, y;
  Kernel small = chainKernel(0, x, y);
  E e = load(x, {var("t")}) + fconst(1.0); // read twice, but a few nodes: the C++ compiler's CSE
  small.body = {region("t", {store(y, {var("t")}, e * e)})};
  std::vector<std::string> notes;
  std::string before = printKernel(small);
  CHECK_FALSE(nameSharedExprs(small, notes));
  CHECK(printKernel(small) == before);

  // A large value read twice, but only in a select's branches: it may be a guarded read.
  Kernel guarded = chainKernel(0, x, y);
  E big = load(x, {var("t")});
  for (int i = 0; i < 20; ++i)
    big = big * fconst(1.5) + fconst(1.0);
  E v = select(var("t") < E(int64_t(32)), big * big, fconst(0));
  guarded.body = {region("t", {store(y, {var("t")}, v)})};
  before = printKernel(guarded);
  CHECK_FALSE(nameSharedExprs(guarded, notes));
  CHECK(printKernel(guarded) == before);

  // The same value read twice where it is always evaluated is named.
  Kernel always = chainKernel(0, x, y);
  always.body = {region("t", {store(y, {var("t")}, big * big)})};
  CHECK(nameSharedExprs(always, notes));
  CHECK(printKernel(always).find("cse0 * cse0") != std::string::npos);
}
