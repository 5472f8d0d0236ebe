// Numerical tests of the reference interpreter (interp/): every op family against hand-computed
// values or a naive reference written here, with stated tolerances. The interpreter is the
// project's ground truth, so these tests pin ONNX semantics (broadcasting, rounding, padding,
// pooling, resize coordinate modes, masking) rather than just "it runs".
#include "interp/interpreter.h"
#include "interp/kernels.h"
#include "support/diagnostics.h"
#include "support/half.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <set>

using namespace aicf;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

AttrValue I(int64_t v) {
  return AttrValue{v};
}
AttrValue F(double v) {
  return AttrValue{v};
}
AttrValue S(const char *v) {
  return AttrValue{std::string(v)};
}
AttrValue Is(std::vector<int64_t> v) {
  return AttrValue{std::move(v)};
}
AttrValue Fs(std::vector<double> v) {
  return AttrValue{std::move(v)};
}
AttrValue Ss(std::vector<std::string> v) {
  return AttrValue{std::move(v)};
}

Tensor f32(std::vector<float> v, std::vector<int64_t> shape) {
  return Tensor::fromF32(v, std::move(shape));
}
Tensor i64(std::vector<int64_t> v, std::vector<int64_t> shape) {
  return Tensor::fromI64(v, std::move(shape));
}
Tensor typed(DType dt, const std::vector<double> &v, std::vector<int64_t> shape) {
  Tensor t(TensorType(dt, std::move(shape)));
  REQUIRE(t.numel() == static_cast<int64_t>(v.size()));
  for (size_t i = 0; i < v.size(); ++i)
    t.setDouble(static_cast<int64_t>(i), v[i]);
  return t;
}
Tensor boolT(std::vector<int> v, std::vector<int64_t> shape) {
  Tensor t(TensorType(DType::Bool, std::move(shape)));
  for (size_t i = 0; i < v.size(); ++i)
    t.setInt(static_cast<int64_t>(i), v[i]);
  return t;
}

// Deterministic test data in [-1, 1).
std::vector<float> randomFloats(size_t n, uint32_t seed) {
  std::mt19937 gen(seed); // the raw engine output is specified by the standard
  std::vector<float> v(n);
  for (float &x : v)
    x = static_cast<float>(gen() >> 8) / 8388608.0f - 1.0f;
  return v;
}

// A one-node graph over `operands` (all graph inputs), run by the interpreter.
std::vector<Tensor> runOp(Op op, const std::vector<Tensor> &operands, AttrMap attrs = {},
                          int numResults = 1) {
  Graph g("test");
  std::vector<Value *> vals;
  for (size_t i = 0; i < operands.size(); ++i)
    vals.push_back(g.addInput(cat("x", i), operands[i].type()));
  Node *n = g.createNode(op, vals, std::move(attrs), Location("test_node"), nullptr, numResults);
  for (Value *r : n->results())
    g.addOutput(r);
  return interpret(g, operands);
}
Tensor run1(Op op, const std::vector<Tensor> &operands, AttrMap attrs = {}) {
  return runOp(op, operands, std::move(attrs)).at(0);
}

// Element-wise comparison with an absolute + relative tolerance; NaN matches NaN, inf matches
// the same inf.
void expectNear(const Tensor &t, const std::vector<double> &want, double tol = 1e-6) {
  REQUIRE(t.numel() == static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    double got = t.getDouble(static_cast<int64_t>(i)), w = want[i];
    INFO("element " << i << ": got " << got << ", want " << w);
    if (std::isnan(w))
      CHECK(std::isnan(got));
    else if (std::isinf(w))
      CHECK(got == w);
    else
      CHECK(std::fabs(got - w) <= tol * (1.0 + std::fabs(w)));
  }
}
void expectInts(const Tensor &t, const std::vector<int64_t> &want) {
  REQUIRE(t.numel() == static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("element " << i);
    CHECK(t.getInt(static_cast<int64_t>(i)) == want[i]);
  }
}

// Naive row-major index helpers for the references.
int64_t idx4(const std::vector<int64_t> &s, int64_t a, int64_t b, int64_t c, int64_t d) {
  return ((a * s[1] + b) * s[2] + c) * s[3] + d;
}

} // namespace

TEST_CASE("interp: every op has a kernel") {
  for (int k = 0; k < kNumOps; ++k)
    CHECK((interp::kernelFor(static_cast<Op>(k)) != nullptr));
}

// ---- elementwise unary ------------------------------------------------------------------------

TEST_CASE("interp: float unary ops match their formulas") {
  std::vector<float> xs = {-2.5f, -1.0f, -0.25f, 0.0f, 0.3f, 1.0f, 2.75f};
  std::vector<float> pos = {0.01f, 0.5f, 1.0f, 2.0f, 10.0f};
  struct Case {
    Op op;
    AttrMap attrs;
    bool positive;
    std::function<double(double)> ref;
  };
  const double s2pi = std::sqrt(2.0 / 3.141592653589793);
  std::vector<Case> cases = {
      {Op::Identity, {}, false, [](double x) { return x; }},
      {Op::Neg, {}, false, [](double x) { return -x; }},
      {Op::Abs, {}, false, [](double x) { return std::fabs(x); }},
      {Op::Sqrt, {}, true, [](double x) { return std::sqrt(x); }},
      {Op::Reciprocal, {}, true, [](double x) { return 1 / x; }},
      {Op::Exp, {}, false, [](double x) { return std::exp(x); }},
      {Op::Log, {}, true, [](double x) { return std::log(x); }},
      {Op::Erf, {}, false, [](double x) { return std::erf(x); }},
      {Op::Tanh, {}, false, [](double x) { return std::tanh(x); }},
      {Op::Sigmoid, {}, false, [](double x) { return 1 / (1 + std::exp(-x)); }},
      {Op::Relu, {}, false, [](double x) { return x > 0 ? x : 0; }},
      {Op::Softplus, {}, false, [](double x) { return std::log(1 + std::exp(x)); }},
      {Op::Floor, {}, false, [](double x) { return std::floor(x); }},
      {Op::Ceil, {}, false, [](double x) { return std::ceil(x); }},
      {Op::Sign, {}, false, [](double x) { return double((x > 0) - (x < 0)); }},
      {Op::Sin, {}, false, [](double x) { return std::sin(x); }},
      {Op::Cos, {}, false, [](double x) { return std::cos(x); }},
      {Op::LeakyRelu, {{"alpha", F(0.1)}}, false, [](double x) { return x < 0 ? 0.1 * x : x; }},
      {Op::Elu,
       {{"alpha", F(0.5)}},
       false,
       [](double x) { return x < 0 ? 0.5 * (std::exp(x) - 1) : x; }},
      {Op::HardSigmoid,
       {{"alpha", F(0.3)}, {"beta", F(0.4)}},
       false,
       [](double x) { return std::clamp(0.3 * x + 0.4, 0.0, 1.0); }},
      {Op::HardSwish, {}, false, [](double x) { return x * std::clamp(x / 6 + 0.5, 0.0, 1.0); }},
      {Op::Clip,
       {{"min", F(-1.0)}, {"max", F(0.5)}},
       false,
       [](double x) { return std::clamp(x, -1.0, 0.5); }},
      {Op::Gelu, {}, false, [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }},
      {Op::Gelu,
       {{"approximate", S("tanh")}},
       false,
       [=](double x) { return 0.5 * x * (1 + std::tanh(s2pi * (x + 0.044715 * x * x * x))); }},
      {Op::Silu, {}, false, [](double x) { return x / (1 + std::exp(-x)); }},
  };
  for (const Case &c : cases) {
    const std::vector<float> &in = c.positive ? pos : xs;
    INFO("op " << opName(c.op));
    Tensor y = run1(c.op, {f32(in, {static_cast<int64_t>(in.size())})}, c.attrs);
    std::vector<double> want;
    for (float x : in)
      want.push_back(static_cast<float>(c.ref(x))); // rounded to fp32 like the interpreter
    expectNear(y, want, 1e-7);
  }
  // Hand values: gelu(1) = 0.8413447, gelu_tanh(1) = 0.8411920, silu(1) = 0.7310586.
  expectNear(run1(Op::Gelu, {f32({1.0f}, {1})}), {0.8413447}, 1e-6);
  expectNear(run1(Op::Gelu, {f32({1.0f}, {1})}, {{"approximate", S("tanh")}}), {0.8411920}, 1e-6);
  expectNear(run1(Op::Silu, {f32({1.0f}, {1})}), {0.7310586}, 1e-6);
  // softplus stays finite and exact for large |x|.
  expectNear(run1(Op::Softplus, {f32({100.0f, -100.0f}, {2})}), {100.0, 3.720075976e-44}, 1e-6);
  CHECK_THROWS_WITH_AS(run1(Op::Gelu, {f32({1.0f}, {1})}, {{"approximate", S("fast")}}),
                       doctest::Contains("approximate"), UserError);
}

TEST_CASE("interp: round is half to even; sign, relu keep NaN rules") {
  expectNear(run1(Op::Round, {f32({0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 2.4f, -2.6f}, {8})}),
             {0, 2, 2, -0.0, -2, -2, 2, -3});
  expectNear(run1(Op::Sign, {f32({-3.0f, 0.0f, 2.0f, float(kNaN)}, {4})}), {-1, 0, 1, kNaN});
}

TEST_CASE("interp: integer unary ops and clip on integers") {
  Tensor x = typed(DType::I32, {-5, -1, 0, 3, 7}, {5});
  CHECK(run1(Op::Neg, {x}).dtype() == DType::I32);
  expectInts(run1(Op::Neg, {x}), {5, 1, 0, -3, -7});
  expectInts(run1(Op::Abs, {x}), {5, 1, 0, 3, 7});
  expectInts(run1(Op::Relu, {x}), {0, 0, 0, 3, 7});
  expectInts(run1(Op::Sign, {x}), {-1, -1, 0, 1, 1});
  expectInts(run1(Op::Clip, {x}, {{"min", F(-2.0)}, {"max", F(4.0)}}), {-2, -1, 0, 3, 4});
  expectInts(run1(Op::Not, {boolT({1, 0, 1}, {3})}), {0, 1, 0});
}

TEST_CASE("interp: cast between dtypes") {
  Tensor x = f32({2.7f, -2.7f, 0.0f, 300.5f}, {4});
  expectInts(run1(Op::Cast, {x}, {{"to", S("i32")}}), {2, -2, 0, 300});
  expectInts(run1(Op::Cast, {x}, {{"to", S("i8")}}), {2, -2, 0, 44}); // 300 wraps to 44
  expectInts(run1(Op::Cast, {x}, {{"to", S("bool")}}), {1, 1, 0, 1});
  expectNear(run1(Op::Cast, {i64({-3, 1LL << 40}, {2})}, {{"to", S("f32")}}),
             {-3, 1099511627776.0});
  expectNear(run1(Op::Cast, {boolT({1, 0}, {2})}, {{"to", S("f16")}}), {1, 0});
  Tensor h = run1(Op::Cast, {f32({1.0f / 3.0f, 65520.0f, 1e-8f}, {3})}, {{"to", S("f16")}});
  CHECK(h.data<uint16_t>()[0] == 0x3555); // 1/3 to nearest f16
  CHECK(h.data<uint16_t>()[1] == 0x7c00); // overflows to +inf
  CHECK(h.data<uint16_t>()[2] == 0x0000); // underflows to zero
  // bf16 ties go to even: 1 + 2^-8 -> 1.0, 1 + 3*2^-8 -> 1 + 2^-6.
  Tensor b = run1(Op::Cast, {f32({1.00390625f, 1.01171875f}, {2})}, {{"to", S("bf16")}});
  expectNear(b, {1.0, 1.015625}, 0);
  // and back to f32 exactly
  expectNear(run1(Op::Cast, {b}, {{"to", S("f32")}}), {1.0, 1.015625}, 0);
}

TEST_CASE("interp: f16 arithmetic rounds once, to nearest even") {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: even -> 1. (1 + 2^-10) + 2^-11 is halfway
  // between 1 + 2^-10 (odd) and 1 + 2^-9 (even) -> 1 + 2^-9.
  Tensor a = typed(DType::F16, {1.0, 1.0 + 1.0 / 1024}, {2});
  Tensor b = typed(DType::F16, {1.0 / 2048, 1.0 / 2048}, {2});
  Tensor y = run1(Op::Add, {a, b});
  CHECK(y.dtype() == DType::F16);
  expectNear(y, {1.0, 1.0 + 1.0 / 512}, 0);
  // exp in f16: e = 2.71828 -> nearest f16 2.71875
  expectNear(run1(Op::Exp, {typed(DType::F16, {1.0}, {1})}), {2.71875}, 0);
  // bf16 multiply
  expectNear(run1(Op::Mul, {typed(DType::BF16, {3.0}, {1}), typed(DType::BF16, {1.0 / 3}, {1})}),
             {1.0}, 0);
}

// ---- broadcasting binary ops -----------------------------------------------------------------

TEST_CASE("interp: numpy broadcasting of binary ops") {
  // [4,1,3] op [2,1] -> [4,2,3]
  std::vector<float> a = randomFloats(12, 1), b = {0.5f, -2.0f};
  Tensor ta = f32(a, {4, 1, 3}), tb = f32(b, {2, 1});
  struct Case {
    Op op;
    std::function<double(float, float)> f;
  };
  std::vector<Case> cases = {
      {Op::Add, [](float x, float y) { return float(x + y); }},
      {Op::Sub, [](float x, float y) { return float(x - y); }},
      {Op::Mul, [](float x, float y) { return float(x * y); }},
      {Op::Div, [](float x, float y) { return float(x / y); }},
  };
  for (const Case &c : cases) {
    INFO("op " << opName(c.op));
    Tensor y = run1(c.op, {ta, tb});
    CHECK(y.shape() == std::vector<int64_t>{4, 2, 3});
    std::vector<double> want;
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 2; ++j)
        for (int k = 0; k < 3; ++k)
          want.push_back(c.f(a[i * 3 + k], b[j]));
    expectNear(y, want, 0);
  }
  // scalar with matrix, and [2,1] * [1,3]
  expectNear(run1(Op::Mul, {f32({2.0f}, {}), f32({1, 2, 3}, {3})}), {2, 4, 6}, 0);
  expectNear(run1(Op::Add, {f32({10, 20}, {2, 1}), f32({1, 2, 3}, {1, 3})}),
             {11, 12, 13, 21, 22, 23}, 0);
}

TEST_CASE("interp: integer arithmetic, truncating division, division by zero") {
  Tensor a = i64({-7, 7, -7, 7, 9}, {5}), b = i64({2, -2, -2, 2, 3}, {5});
  expectInts(run1(Op::Div, {a, b}), {-3, -3, 3, 3, 3});
  expectInts(run1(Op::Add, {a, b}), {-5, 5, -9, 9, 12});
  expectInts(run1(Op::Mul, {a, b}), {-14, -14, 14, 14, 27});
  // i8 results wrap after the int64 computation
  expectInts(run1(Op::Mul, {typed(DType::I8, {100}, {1}), typed(DType::I8, {3}, {1})}), {44});
  CHECK_THROWS_WITH_AS(run1(Op::Div, {i64({1, 2}, {2}), i64({1, 0}, {2})}),
                       doctest::Contains("test_node"), UserError);
}

TEST_CASE("interp: pow with float and integer exponents") {
  expectNear(run1(Op::Pow, {f32({2.0f, 4.0f, -2.0f}, {3}), f32({3.0f, 0.5f, 2.0f}, {3})}),
             {8, 2, 4}, 1e-7);
  expectNear(run1(Op::Pow, {f32({1.5f, -2.0f}, {2}), i64({2, 3}, {2})}), {2.25, -8}, 1e-7);
  expectInts(run1(Op::Pow, {i64({3, -2, 5}, {3}), i64({4, 3, 0}, {3})}), {81, -8, 1});
  expectInts(run1(Op::Pow, {i64({4, 9}, {2}), f32({0.5f, 0.5f}, {2})}), {2, 3});
}

TEST_CASE("interp: variadic min/max with broadcasting and NaN") {
  Tensor a = f32({1, 5, float(kNaN)}, {3}), b = f32({3}, {1}), c = f32({0, 9, 2, 4, 4, 4}, {2, 3});
  expectNear(run1(Op::Max, {a, b, c}), {3, 9, kNaN, 4, 5, kNaN}, 0);
  expectNear(run1(Op::Min, {a, b, c}), {0, 3, kNaN, 1, 3, kNaN}, 0);
  expectNear(run1(Op::Max, {a}), {1, 5, kNaN}, 0);
  expectInts(run1(Op::Min, {i64({4, -1}, {2}), i64({2}, {1})}), {2, -1});
}

TEST_CASE("interp: comparisons, logical ops and where") {
  Tensor a = f32({1, 2, 3}, {3}), b = f32({2}, {1});
  expectInts(run1(Op::Equal, {a, b}), {0, 1, 0});
  expectInts(run1(Op::Less, {a, b}), {1, 0, 0});
  expectInts(run1(Op::LessEqual, {a, b}), {1, 1, 0});
  expectInts(run1(Op::Greater, {a, b}), {0, 0, 1});
  expectInts(run1(Op::GreaterEqual, {a, b}), {0, 1, 1});
  CHECK(run1(Op::Equal, {a, b}).dtype() == DType::Bool);
  expectInts(run1(Op::Less, {i64({-1, 5}, {2}), i64({0, 5}, {2})}), {1, 0});
  Tensor p = boolT({1, 1, 0, 0}, {2, 2}), q = boolT({1, 0}, {2});
  expectInts(run1(Op::And, {p, q}), {1, 0, 0, 0});
  expectInts(run1(Op::Or, {p, q}), {1, 1, 1, 0});
  expectInts(run1(Op::Xor, {p, q}), {0, 1, 1, 0});
  // where: cond [2,1], a [3], b scalar -> [2,3]
  Tensor w = run1(Op::Where, {boolT({1, 0}, {2, 1}), f32({1, 2, 3}, {3}), f32({-1}, {})});
  CHECK(w.shape() == std::vector<int64_t>{2, 3});
  expectNear(w, {1, 2, 3, -1, -1, -1}, 0);
  expectInts(run1(Op::Where, {boolT({0, 1}, {2}), i64({1, 2}, {2}), i64({7, 8}, {2})}), {7, 2});
}

// ---- contractions ----------------------------------------------------------------------------

namespace {
// C = A B in double for [M,K] x [K,N].
std::vector<double> naiveMatMul(const std::vector<float> &a, const std::vector<float> &b, int64_t M,
                                int64_t K, int64_t N) {
  std::vector<double> c(static_cast<size_t>(M * N), 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      for (int64_t k = 0; k < K; ++k)
        c[i * N + j] += double(a[i * K + k]) * b[k * N + j];
  return c;
}
} // namespace

TEST_CASE("interp: matmul against a naive reference") {
  SUBCASE("large 2-d, odd sizes (blocking edges)") {
    int64_t M = 37, K = 300, N = 261;
    auto a = randomFloats(M * K, 2), b = randomFloats(K * N, 3);
    // double accumulation: within an fp32 rounding of the exact result
    expectNear(run1(Op::MatMul, {f32(a, {M, K}), f32(b, {K, N})}), naiveMatMul(a, b, M, K, N),
               1e-7);
  }
  SUBCASE("batched with broadcasting: [2,1,3,4] x [3,4,5]") {
    auto a = randomFloats(2 * 3 * 4, 4), b = randomFloats(3 * 4 * 5, 5);
    Tensor y = run1(Op::MatMul, {f32(a, {2, 1, 3, 4}), f32(b, {3, 4, 5})});
    CHECK(y.shape() == std::vector<int64_t>{2, 3, 3, 5});
    std::vector<double> want;
    for (int p = 0; p < 2; ++p)
      for (int q = 0; q < 3; ++q) {
        std::vector<float> ap(a.begin() + p * 12, a.begin() + p * 12 + 12);
        std::vector<float> bq(b.begin() + q * 20, b.begin() + q * 20 + 20);
        auto c = naiveMatMul(ap, bq, 3, 4, 5);
        want.insert(want.end(), c.begin(), c.end());
      }
    expectNear(y, want, 1e-7);
  }
  SUBCASE("vector operands") {
    Tensor m = f32({1, 2, 3, 4, 5, 6}, {2, 3});
    expectNear(run1(Op::MatMul, {f32({1, 1}, {2}), m}), {5, 7, 9}, 0);
    expectNear(run1(Op::MatMul, {m, f32({1, 0, -1}, {3})}), {-2, -2}, 0);
    CHECK(run1(Op::MatMul, {f32({1, 2, 3}, {3}), f32({4, 5, 6}, {3})}).shape().empty());
  }
  SUBCASE("epilogue: add bias, gelu, mul") {
    Tensor a = f32({1, 2, 3, 4}, {2, 2}), b = f32({1, 0, 0, 1}, {2, 2});
    Tensor y = run1(Op::MatMul, {a, b, f32({1, -10}, {2}), f32({2}, {})},
                    {{"epilogue", Ss({"add", "relu", "mul"})}});
    expectNear(y, {4, 0, 8, 0}, 0);
    Tensor g = run1(Op::MatMul, {a, b}, {{"epilogue", Ss({"gelu_tanh"})}});
    auto gt = [](double x) {
      return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    };
    expectNear(g, {gt(1), gt(2), gt(3), gt(4)}, 1e-6);
  }
}

TEST_CASE("interp: gemm with transposes, alpha, beta, C and epilogue") {
  auto a = randomFloats(4 * 3, 6), b = randomFloats(5 * 4, 7), c = randomFloats(5, 8);
  // A is stored [K=4, M=3] (transA), B is stored [N=5, K=4] (transB).
  Tensor y = run1(Op::Gemm, {f32(a, {4, 3}), f32(b, {5, 4}), f32(c, {5})},
                  {{"transA", I(1)}, {"transB", I(1)}, {"alpha", F(0.5)}, {"beta", F(2.0)}});
  std::vector<double> want;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j) {
      double s = 0;
      for (int k = 0; k < 4; ++k)
        s += double(a[k * 3 + i]) * b[j * 4 + k];
      want.push_back(0.5 * s + 2.0 * c[j]);
    }
  expectNear(y, want, 1e-6);
  // no C, epilogue add + sigmoid
  Tensor z = run1(Op::Gemm, {f32({1, 2}, {1, 2}), f32({3, 4}, {2, 1}), f32({-11}, {1, 1})},
                  {{"epilogue", Ss({"add", "sigmoid"})}});
  expectNear(z, {0.5}, 1e-7);
}

namespace {
struct ConvCfg {
  int64_t N, C, H, W, M, KH, KW, group, sh, sw, dh, dw, pt, pl, pb, pr;
};
// out[n,m,oh,ow] = bias[m] + sum_{c,kh,kw} x[n, g*Cg + c, ih, iw] * w[m, c, kh, kw]
std::vector<double> naiveConv2d(const ConvCfg &k, const std::vector<float> &x,
                                const std::vector<float> &w, const std::vector<float> &bias,
                                int64_t OH, int64_t OW) {
  int64_t Cg = k.C / k.group, Mg = k.M / k.group;
  std::vector<double> out;
  for (int64_t n = 0; n < k.N; ++n)
    for (int64_t m = 0; m < k.M; ++m)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double s = bias.empty() ? 0.0 : bias[m];
          int64_t g = m / Mg;
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t kh = 0; kh < k.KH; ++kh)
              for (int64_t kw = 0; kw < k.KW; ++kw) {
                int64_t ih = oh * k.sh - k.pt + kh * k.dh, iw = ow * k.sw - k.pl + kw * k.dw;
                if (ih < 0 || ih >= k.H || iw < 0 || iw >= k.W)
                  continue;
                s += double(x[idx4({k.N, k.C, k.H, k.W}, n, g * Cg + c, ih, iw)]) *
                     w[idx4({k.M, Cg, k.KH, k.KW}, m, c, kh, kw)];
              }
          out.push_back(s);
        }
  return out;
}
} // namespace

TEST_CASE("interp: conv with groups, dilations, pads and strides vs a naive reference") {
  std::vector<ConvCfg> cfgs = {
      {1, 3, 7, 7, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},
      {2, 4, 9, 8, 6, 3, 2, 2, 2, 1, 1, 2, 0, 1, 2, 0},
      {1, 6, 10, 11, 6, 3, 3, 6, 2, 3, 2, 1, 2, 1, 0, 3}, // depthwise
      {1, 2, 5, 5, 3, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
  };
  for (size_t ci = 0; ci < cfgs.size(); ++ci) {
    const ConvCfg &k = cfgs[ci];
    INFO("config " << ci);
    auto x = randomFloats(k.N * k.C * k.H * k.W, 10 + ci);
    auto w = randomFloats(k.M * (k.C / k.group) * k.KH * k.KW, 20 + ci);
    auto bias = randomFloats(k.M, 30 + ci);
    int64_t OH = (k.H + k.pt + k.pb - (k.dh * (k.KH - 1) + 1)) / k.sh + 1;
    int64_t OW = (k.W + k.pl + k.pr - (k.dw * (k.KW - 1) + 1)) / k.sw + 1;
    AttrMap attrs = {{"strides", Is({k.sh, k.sw})},
                     {"pads", Is({k.pt, k.pl, k.pb, k.pr})},
                     {"dilations", Is({k.dh, k.dw})},
                     {"group", I(k.group)}};
    Tensor y = run1(
        Op::Conv,
        {f32(x, {k.N, k.C, k.H, k.W}), f32(w, {k.M, k.C / k.group, k.KH, k.KW}), f32(bias, {k.M})},
        attrs);
    CHECK(y.shape() == std::vector<int64_t>{k.N, k.M, OH, OW});
    expectNear(y, naiveConv2d(k, x, w, bias, OH, OW), 1e-7);
  }
  SUBCASE("1-d conv, no bias, epilogue add + relu") {
    // x = [1,2,3,4,5], w = [1,0,-1], pads 1: y[i] = x[i-1] - x[i+1]
    AttrMap attrs = {{"strides", Is({1})},
                     {"pads", Is({1, 1})},
                     {"dilations", Is({1})},
                     {"epilogue", Ss({"add", "relu"})}};
    Tensor y = run1(
        Op::Conv,
        {f32({1, 2, 3, 4, 5}, {1, 1, 5}), f32({1, 0, -1}, {1, 1, 3}), f32({1}, {1, 1, 1})}, attrs);
    expectNear(y, {0, 0, 0, 0, 5}, 0); // -2+1, -2+1, -2+1, -2+1, 4+1
  }
  SUBCASE("3-d conv equals the sum of 2-d slices") {
    // kernel depth 2 over input depth 2, no padding: one output slice = conv2d(x0,w0)+conv2d(x1,w1)
    auto x = randomFloats(2 * 4 * 4, 40), w = randomFloats(2 * 3 * 3, 41);
    AttrMap a3 = {
        {"strides", Is({1, 1, 1})}, {"pads", Is({0, 0, 0, 0, 0, 0})}, {"dilations", Is({1, 1, 1})}};
    Tensor y = run1(Op::Conv, {f32(x, {1, 1, 2, 4, 4}), f32(w, {1, 1, 2, 3, 3})}, a3);
    CHECK(y.shape() == std::vector<int64_t>{1, 1, 1, 2, 2});
    ConvCfg k = {1, 1, 4, 4, 1, 3, 3, 1, 1, 1, 1, 1, 0, 0, 0, 0};
    std::vector<float> x0(x.begin(), x.begin() + 16), x1(x.begin() + 16, x.end());
    std::vector<float> w0(w.begin(), w.begin() + 9), w1(w.begin() + 9, w.end());
    auto r0 = naiveConv2d(k, x0, w0, {}, 2, 2), r1 = naiveConv2d(k, x1, w1, {}, 2, 2);
    expectNear(y, {r0[0] + r1[0], r0[1] + r1[1], r0[2] + r1[2], r0[3] + r1[3]}, 1e-6);
  }
}

TEST_CASE("interp: conv_transpose vs a naive scatter reference") {
  // x [1, 4, 3, 4], w [4, 3, 3, 2] (C=4, M/group=3), group 2 -> M = 6
  int64_t N = 1, C = 4, H = 3, W = 4, Mg = 3, G = 2, KH = 3, KW = 2;
  int64_t sh = 2, sw = 1, dh = 1, dw = 2, pt = 1, pl = 0, pb = 0, pr = 1, oph = 1, opw = 0;
  auto x = randomFloats(N * C * H * W, 50), w = randomFloats(C * Mg * KH * KW, 51);
  auto bias = randomFloats(Mg * G, 52);
  int64_t OH = sh * (H - 1) + oph + (KH - 1) * dh + 1 - pt - pb;
  int64_t OW = sw * (W - 1) + opw + (KW - 1) * dw + 1 - pl - pr;
  int64_t M = Mg * G, Cg = C / G;
  std::vector<double> want(static_cast<size_t>(N * M * OH * OW), 0.0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t i = 0; i < OH * OW; ++i)
      want[m * OH * OW + i] = bias[m];
  for (int64_t c = 0; c < C; ++c)
    for (int64_t ih = 0; ih < H; ++ih)
      for (int64_t iw = 0; iw < W; ++iw)
        for (int64_t m = 0; m < Mg; ++m)
          for (int64_t kh = 0; kh < KH; ++kh)
            for (int64_t kw = 0; kw < KW; ++kw) {
              int64_t oh = ih * sh - pt + kh * dh, ow = iw * sw - pl + kw * dw;
              if (oh < 0 || oh >= OH || ow < 0 || ow >= OW)
                continue;
              int64_t oc = (c / Cg) * Mg + m;
              want[(oc * OH + oh) * OW + ow] +=
                  double(x[(c * H + ih) * W + iw]) * w[((c * Mg + m) * KH + kh) * KW + kw];
            }
  Tensor y =
      run1(Op::ConvTranspose, {f32(x, {N, C, H, W}), f32(w, {C, Mg, KH, KW}), f32(bias, {M})},
           {{"strides", Is({sh, sw})},
            {"pads", Is({pt, pl, pb, pr})},
            {"dilations", Is({dh, dw})},
            {"group", I(G)},
            {"output_padding", Is({oph, opw})}});
  CHECK(y.shape() == std::vector<int64_t>{N, M, OH, OW});
  expectNear(y, want, 1e-7);
}

// ---- attention ---------------------------------------------------------------------------------

namespace {
// softmax(scale q k^T + mask) v for one [Sq, D] x [Sk, D] x [Sk, Dv] head; keep(i, j) false masks;
// add(i, j) is the additive mask. A row with every key masked gives zeros.
std::vector<double> naiveAttention(const float *q, const float *k, const float *v, int64_t Sq,
                                   int64_t Sk, int64_t D, int64_t Dv, double scale,
                                   const std::function<bool(int64_t, int64_t)> &keep,
                                   const std::function<double(int64_t, int64_t)> &add) {
  std::vector<double> out(static_cast<size_t>(Sq * Dv), 0.0);
  for (int64_t i = 0; i < Sq; ++i) {
    std::vector<double> s(static_cast<size_t>(Sk));
    double mx = -kInf;
    for (int64_t j = 0; j < Sk; ++j) {
      double d = 0;
      for (int64_t t = 0; t < D; ++t)
        d += double(q[i * D + t]) * k[j * D + t];
      s[j] = keep(i, j) ? d * scale + add(i, j) : -kInf;
      mx = std::max(mx, s[j]);
    }
    if (mx == -kInf)
      continue;
    double sum = 0;
    for (double &e : s)
      sum += (e = std::exp(e - mx));
    for (int64_t j = 0; j < Sk; ++j)
      for (int64_t t = 0; t < Dv; ++t)
        out[i * Dv + t] += s[j] / sum * v[j * Dv + t];
  }
  return out;
}
} // namespace

TEST_CASE("interp: attention vs explicit softmax(QK^T)V") {
  int64_t B = 2, H = 3, Sq = 5, Sk = 7, D = 4, Dv = 6;
  auto q = randomFloats(B * H * Sq * D, 60), k = randomFloats(B * H * Sk * D, 61),
       v = randomFloats(B * H * Sk * Dv, 62);
  Tensor tq = f32(q, {B, H, Sq, D}), tk = f32(k, {B, H, Sk, D}), tv = f32(v, {B, H, Sk, Dv});
  double scale = 0.5;
  auto always = [](int64_t, int64_t) { return true; };
  auto none = [](int64_t, int64_t) { return 0.0; };
  auto expectAll = [&](const Tensor &y, const std::function<bool(int64_t, int64_t, int64_t)> &keep,
                       const std::function<double(int64_t, int64_t, int64_t)> &add) {
    std::vector<double> want;
    for (int64_t bh = 0; bh < B * H; ++bh) {
      auto o = naiveAttention(
          q.data() + bh * Sq * D, k.data() + bh * Sk * D, v.data() + bh * Sk * Dv, Sq, Sk, D, Dv,
          scale, [&](int64_t i, int64_t j) { return keep(bh, i, j); },
          [&](int64_t i, int64_t j) { return add(bh, i, j); });
      want.insert(want.end(), o.begin(), o.end());
    }
    expectNear(y, want, 3e-7);
  };
  SUBCASE("plain") {
    Tensor y = run1(Op::Attention, {tq, tk, tv}, {{"scale", F(scale)}});
    CHECK(y.shape() == std::vector<int64_t>{B, H, Sq, Dv});
    expectAll(
        y, [&](int64_t, int64_t i, int64_t j) { return always(i, j); },
        [&](int64_t, int64_t i, int64_t j) { return none(i, j); });
  }
  SUBCASE("causal with Sk > Sq: key j masked when j > i + (Sk - Sq)") {
    Tensor y = run1(Op::Attention, {tq, tk, tv}, {{"scale", F(scale)}, {"causal", I(1)}});
    expectAll(
        y, [&](int64_t, int64_t i, int64_t j) { return j <= i + (Sk - Sq); },
        [&](int64_t, int64_t i, int64_t j) { return none(i, j); });
  }
  SUBCASE("bool mask [B,1,1,Sk] (padding mask), true = keep") {
    std::vector<int> m = {1, 1, 1, 1, 0, 0, 1, /*b1*/ 1, 0, 1, 0, 1, 0, 1};
    Tensor y = run1(Op::Attention, {tq, tk, tv, boolT(m, {B, 1, 1, Sk})}, {{"scale", F(scale)}});
    expectAll(
        y, [&](int64_t bh, int64_t, int64_t j) { return m[(bh / H) * Sk + j] != 0; },
        [&](int64_t, int64_t i, int64_t j) { return none(i, j); });
  }
  SUBCASE("float additive mask [Sq,Sk] plus causal") {
    auto am = randomFloats(Sq * Sk, 63);
    Tensor y = run1(Op::Attention, {tq, tk, tv, f32(am, {Sq, Sk})},
                    {{"scale", F(scale)}, {"causal", I(1)}});
    expectAll(
        y, [&](int64_t, int64_t i, int64_t j) { return j <= i + (Sk - Sq); },
        [&](int64_t, int64_t i, int64_t j) { return double(am[i * Sk + j]); });
  }
  SUBCASE("fully masked rows give zeros, not NaN") {
    std::vector<float> am(static_cast<size_t>(Sq * Sk), 0.0f);
    for (int64_t j = 0; j < Sk; ++j)
      am[2 * Sk + j] = -std::numeric_limits<float>::infinity(); // row 2: all keys masked
    std::vector<int> bm(static_cast<size_t>(Sq * Sk), 1);
    for (int64_t j = 0; j < Sk; ++j)
      bm[4 * Sk + j] = 0; // row 4 masked by a bool mask
    Tensor y = run1(Op::Attention, {tq, tk, tv, f32(am, {Sq, Sk})}, {{"scale", F(scale)}});
    Tensor z = run1(Op::Attention, {tq, tk, tv, boolT(bm, {Sq, Sk})}, {{"scale", F(scale)}});
    for (int64_t bh = 0; bh < B * H; ++bh)
      for (int64_t t = 0; t < Dv; ++t) {
        CHECK(y.getDouble((bh * Sq + 2) * Dv + t) == 0.0);
        CHECK(z.getDouble((bh * Sq + 4) * Dv + t) == 0.0);
        CHECK(std::isfinite(y.getDouble((bh * Sq + 1) * Dv + t)));
      }
  }
}

// ---- reductions --------------------------------------------------------------------------------

TEST_CASE("interp: reductions over axes, keepdims, all axes") {
  // x [2,3]: [[1, -2, 3], [4, 5, -6]]
  Tensor x = f32({1, -2, 3, 4, 5, -6}, {2, 3});
  struct Case {
    Op op;
    std::vector<double> axis1, all;
  };
  std::vector<Case> cases = {
      {Op::ReduceSum, {2, 3}, {5}},
      {Op::ReduceMean, {2.0 / 3, 1}, {5.0 / 6}},
      {Op::ReduceMax, {3, 5}, {5}},
      {Op::ReduceMin, {-2, -6}, {-6}},
      {Op::ReduceProd, {-6, -120}, {720}},
      {Op::ReduceL1, {6, 15}, {21}},
      {Op::ReduceL2, {std::sqrt(14.0), std::sqrt(77.0)}, {std::sqrt(91.0)}},
      {Op::ReduceSumSquare, {14, 77}, {91}},
      {Op::ReduceLogSumExp,
       {std::log(std::exp(1.0) + std::exp(-2.0) + std::exp(3.0)),
        std::log(std::exp(4.0) + std::exp(5.0) + std::exp(-6.0))},
       {std::log(std::exp(1.0) + std::exp(-2.0) + std::exp(3.0) + std::exp(4.0) + std::exp(5.0) +
                 std::exp(-6.0))}},
  };
  for (const Case &c : cases) {
    INFO("op " << opName(c.op));
    Tensor k = run1(c.op, {x}, {{"axes", Is({1})}});
    CHECK(k.shape() == std::vector<int64_t>{2, 1});
    expectNear(k, c.axis1, 1e-6);
    Tensor d = run1(c.op, {x}, {{"axes", Is({1})}, {"keepdims", I(0)}});
    CHECK(d.shape() == std::vector<int64_t>{2});
    Tensor a = run1(c.op, {x}, {{"keepdims", I(0)}});
    CHECK(a.shape().empty());
    expectNear(a, c.all, 1e-6);
  }
  // axis 0 of a 3-d tensor with a middle axis kept
  Tensor y =
      run1(Op::ReduceSum, {f32({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2})}, {{"axes", Is({0, 2})}});
  CHECK(y.shape() == std::vector<int64_t>{1, 2, 1});
  expectNear(y, {1 + 2 + 5 + 6, 3 + 4 + 7 + 8}, 0);
  // log_sum_exp stays finite for large inputs; integer sums are exact
  expectNear(run1(Op::ReduceLogSumExp, {f32({1000, 1000}, {2})}), {1000 + std::log(2.0)}, 1e-7);
  expectInts(run1(Op::ReduceSum, {i64({1LL << 60, 1, 2}, {3})}, {{"keepdims", I(0)}}),
             {(1LL << 60) + 3});
  expectInts(run1(Op::ReduceMean, {i64({1, 2, 4}, {3})}), {2}); // 7/3 truncated
  expectNear(run1(Op::ReduceMax, {f32({1, float(kNaN), 3}, {3})}), {kNaN}, 0);
}

TEST_CASE("interp: arg_max / arg_min with ties and select_last_index") {
  Tensor x = f32({1, 3, 3, 0, 2, 0, 5, 5}, {2, 4});
  expectInts(run1(Op::ArgMax, {x}, {{"axis", I(1)}}), {1, 2});
  expectInts(run1(Op::ArgMax, {x}, {{"axis", I(-1)}, {"select_last_index", I(1)}}), {2, 3});
  expectInts(run1(Op::ArgMin, {x}, {{"axis", I(1)}, {"keepdims", I(0)}}), {3, 1});
  expectInts(run1(Op::ArgMin, {x}, {{"axis", I(1)}, {"select_last_index", I(1)}}), {3, 1});
  Tensor a0 = run1(Op::ArgMax, {x}, {{"axis", I(0)}});
  CHECK(a0.shape() == std::vector<int64_t>{1, 4});
  CHECK(a0.dtype() == DType::I64);
  expectInts(a0, {1, 0, 1, 1});
}

// ---- normalisations -----------------------------------------------------------------------------

TEST_CASE("interp: softmax is stable for large inputs and follows ONNX for -inf rows") {
  Tensor y = run1(Op::Softmax, {f32({1000, 1001, 1002, 0, 1, 2}, {2, 3})});
  double e0 = 1 / (1 + std::exp(1.0) + std::exp(2.0));
  std::vector<double> row = {e0, e0 * std::exp(1.0), e0 * std::exp(2.0)};
  expectNear(y, {row[0], row[1], row[2], row[0], row[1], row[2]}, 1e-7);
  float ninf = -std::numeric_limits<float>::infinity();
  expectNear(run1(Op::Softmax, {f32({ninf, ninf, 0, ninf}, {2, 2})}), {kNaN, kNaN, 1, 0}, 0);
  // axis 0
  expectNear(run1(Op::Softmax, {f32({0, 5, 0, 5}, {2, 2})}, {{"axis", I(0)}}), {0.5, 0.5, 0.5, 0.5},
             1e-7);
  Tensor l = run1(Op::LogSoftmax, {f32({1000, 1001, 1002}, {3})});
  expectNear(l, {std::log(row[0]), std::log(row[1]), std::log(row[2])}, 1e-6);
}

TEST_CASE("interp: layer_norm and rms_norm vs the two-pass formulas") {
  int64_t R = 3, Cn = 64;
  auto x = randomFloats(R * Cn, 70), g = randomFloats(Cn, 71), b = randomFloats(Cn, 72);
  for (float &v : x)
    v = 1000.0f + v; // a large mean: the naive E[x^2] - E[x]^2 would lose digits here
  Tensor y =
      run1(Op::LayerNorm, {f32(x, {R, Cn}), f32(g, {Cn}), f32(b, {Cn})}, {{"epsilon", F(1e-5)}});
  Tensor r = run1(Op::RmsNorm, {f32(x, {R, Cn}), f32(g, {Cn})}, {{"epsilon", F(1e-6)}});
  std::vector<double> want, wantR;
  for (int64_t i = 0; i < R; ++i) {
    double mean = 0, var = 0, ss = 0;
    for (int64_t j = 0; j < Cn; ++j)
      mean += x[i * Cn + j];
    mean /= Cn;
    for (int64_t j = 0; j < Cn; ++j) {
      var += (x[i * Cn + j] - mean) * (x[i * Cn + j] - mean);
      ss += double(x[i * Cn + j]) * x[i * Cn + j];
    }
    var /= Cn;
    for (int64_t j = 0; j < Cn; ++j) {
      want.push_back((x[i * Cn + j] - mean) / std::sqrt(var + 1e-5) * g[j] + b[j]);
      wantR.push_back(x[i * Cn + j] / std::sqrt(ss / Cn + 1e-6) * g[j]);
    }
  }
  expectNear(y, want, 1e-5);
  expectNear(r, wantR, 1e-6);
  // axis = -2 normalises the last two axes together; no gamma / beta
  Tensor z = run1(Op::LayerNorm, {f32({1, 2, 3, 4, 10, 10, 10, 10}, {2, 2, 2})},
                  {{"axis", I(-2)}, {"epsilon", F(1e-12)}});
  double s = std::sqrt(1.25);
  expectNear(z, {-1.5 / s, -0.5 / s, 0.5 / s, 1.5 / s, 0, 0, 0, 0}, 1e-6);
}

TEST_CASE("interp: batch_norm and instance_norm") {
  // x [1, 2, 2]: channel 0 = [1, 3], channel 1 = [2, 6]
  Tensor x = f32({1, 3, 2, 6}, {1, 2, 2});
  Tensor bn = run1(Op::BatchNorm,
                   {x, f32({2, 1}, {2}), f32({0, 1}, {2}), f32({1, 2}, {2}), f32({4, 1}, {2})},
                   {{"epsilon", F(0.0)}});
  expectNear(bn, {0, 2, 1, 5}, 1e-7); // (x-1)/2*2+0 ; (x-2)/1*1+1
  Tensor in =
      run1(Op::InstanceNorm, {x, f32({1, 2}, {2}), f32({0, 10}, {2})}, {{"epsilon", F(0.0)}});
  expectNear(in, {-1, 1, 8, 12}, 1e-7);
}

// ---- pooling ------------------------------------------------------------------------------------

namespace {
AttrMap poolAttrs(std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> p,
                  std::vector<int64_t> d, int64_t ceil) {
  return {{"kernel_shape", Is(std::move(k))},
          {"strides", Is(std::move(s))},
          {"pads", Is(std::move(p))},
          {"dilations", Is(std::move(d))},
          {"ceil_mode", I(ceil)}};
}
Tensor iota4x4() {
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i)
    v[i] = float(i + 1);
  return f32(v, {1, 1, 4, 4});
}
} // namespace

TEST_CASE("interp: max/avg pooling with ceil_mode, pads, dilations") {
  // ONNX backend test cases (averagepool_2d_ceil, maxpool_2d_ceil, maxpool_2d_dilations).
  Tensor x = iota4x4();
  auto ceil = poolAttrs({3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1);
  Tensor mp = run1(Op::MaxPool, {x}, ceil);
  CHECK(mp.shape() == std::vector<int64_t>{1, 1, 2, 2});
  expectNear(mp, {11, 12, 15, 16}, 0);
  expectNear(run1(Op::AvgPool, {x}, ceil), {6, 7.5, 12, 13.5}, 1e-7);
  expectNear(run1(Op::MaxPool, {x}, poolAttrs({2, 2}, {1, 1}, {0, 0, 0, 0}, {2, 2}, 0)),
             {11, 12, 15, 16}, 0);
  // pads 1, kernel 3, stride 2 on 4x4 -> 2x2; corners see 4 real values of a 9-window.
  auto padded = poolAttrs({3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 0);
  expectNear(run1(Op::AvgPool, {x}, padded),
             {(1 + 2 + 5 + 6) / 4.0, (2 + 3 + 4 + 6 + 7 + 8) / 6.0,
              (5 + 6 + 9 + 10 + 13 + 14) / 6.0, (6 + 7 + 8 + 10 + 11 + 12 + 14 + 15 + 16) / 9.0},
             1e-7);
  padded["count_include_pad"] = I(1);
  expectNear(run1(Op::AvgPool, {x}, padded), {14 / 9.0, 30 / 9.0, 57 / 9.0, 99 / 9.0}, 1e-7);
  // ceil_mode with count_include_pad: the window part beyond the end padding is not counted.
  auto ceilPad = poolAttrs({3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1);
  ceilPad["count_include_pad"] = I(1);
  expectNear(run1(Op::AvgPool, {x}, ceilPad), {6, 7.5, 12, 13.5}, 1e-7);
  // max pool ignores pads even when all values are negative
  Tensor neg = f32({-5, -6, -7, -8}, {1, 1, 2, 2});
  expectNear(run1(Op::MaxPool, {neg}, poolAttrs({2, 2}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 0)),
             {-5, -5, -6, -5, -5, -6, -7, -7, -8}, 0);
  // 1-d pooling
  expectNear(
      run1(Op::MaxPool, {f32({1, 4, 2, 8, 3}, {1, 1, 5})}, poolAttrs({2}, {2}, {0, 0}, {1}, 1)),
      {4, 8, 3}, 0);
}

TEST_CASE("interp: global pools") {
  Tensor x = f32({1, 2, 3, 4, -1, -2, -3, -4}, {1, 2, 2, 2});
  Tensor a = run1(Op::GlobalAvgPool, {x});
  CHECK(a.shape() == std::vector<int64_t>{1, 2, 1, 1});
  expectNear(a, {2.5, -2.5}, 0);
  expectNear(run1(Op::GlobalMaxPool, {x}), {4, -1}, 0);
}

// ---- data movement -----------------------------------------------------------------------------

TEST_CASE("interp: reshape, transpose, concat, split") {
  Tensor x = f32({0, 1, 2, 3, 4, 5}, {2, 3});
  Tensor r = run1(Op::Reshape, {x}, {{"shape", Is({3, 1, 2})}});
  CHECK(r.shape() == std::vector<int64_t>{3, 1, 2});
  expectNear(r, {0, 1, 2, 3, 4, 5}, 0);
  // transpose [2,3,2] with perm [2,0,1]: out[k,i,j] = x[i,j,k]
  std::vector<float> v(12);
  for (int i = 0; i < 12; ++i)
    v[i] = float(i);
  Tensor t = run1(Op::Transpose, {f32(v, {2, 3, 2})}, {{"perm", Is({2, 0, 1})}});
  CHECK(t.shape() == std::vector<int64_t>{2, 2, 3});
  std::vector<double> want;
  for (int k = 0; k < 2; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        want.push_back(v[(i * 3 + j) * 2 + k]);
  expectNear(t, want, 0);
  Tensor c =
      run1(Op::Concat, {x, f32({9, 9}, {2, 1}), f32({7, 8, 7, 8}, {2, 2})}, {{"axis", I(1)}});
  CHECK(c.shape() == std::vector<int64_t>{2, 6});
  expectNear(c, {0, 1, 2, 9, 7, 8, 3, 4, 5, 9, 7, 8}, 0);
  expectInts(run1(Op::Concat, {i64({1}, {1}), i64({2, 3}, {2})}, {{"axis", I(-1)}}), {1, 2, 3});
  auto parts = runOp(Op::Split, {x}, {{"axis", I(1)}, {"sizes", Is({1, 0, 2})}}, 3);
  REQUIRE(parts.size() == 3);
  expectNear(parts[0], {0, 3}, 0);
  CHECK(parts[1].shape() == std::vector<int64_t>{2, 0});
  expectNear(parts[2], {1, 2, 4, 5}, 0);
}

TEST_CASE("interp: slice with positive and negative steps") {
  std::vector<float> v(20);
  for (int i = 0; i < 20; ++i)
    v[i] = float(i);
  Tensor x = f32(v, {4, 5});
  Tensor a = run1(
      Op::Slice, {x},
      {{"starts", Is({1, 0})}, {"ends", Is({3, 5})}, {"axes", Is({0, 1})}, {"steps", Is({1, 2})}});
  CHECK(a.shape() == std::vector<int64_t>{2, 3});
  expectNear(a, {5, 7, 9, 10, 12, 14}, 0);
  // reverse axis 1 entirely: starts 4, ends -1 (pre-normalised "to the front"), step -1
  Tensor b =
      run1(Op::Slice, {x},
           {{"starts", Is({4})}, {"ends", Is({-1})}, {"axes", Is({1})}, {"steps", Is({-1})}});
  CHECK(b.shape() == std::vector<int64_t>{4, 5});
  expectNear(b, {4, 3, 2, 1, 0, 9, 8, 7, 6, 5, 14, 13, 12, 11, 10, 19, 18, 17, 16, 15}, 0);
  Tensor c = run1(Op::Slice, {x},
                  {{"starts", Is({3})}, {"ends", Is({0})}, {"axes", Is({0})}, {"steps", Is({-2})}});
  CHECK(c.shape() == std::vector<int64_t>{2, 5});
  expectNear(c, {15, 16, 17, 18, 19, 5, 6, 7, 8, 9}, 0);
}

TEST_CASE("interp: gather wraps negative indices and rejects out-of-range ones") {
  Tensor x = f32({0, 1, 2, 3, 4, 5}, {3, 2});
  Tensor g = run1(Op::Gather, {x, i64({2, -3, -1, 1}, {2, 2})}, {{"axis", I(0)}});
  CHECK(g.shape() == std::vector<int64_t>{2, 2, 2});
  expectNear(g, {4, 5, 0, 1, 4, 5, 2, 3}, 0);
  Tensor h = run1(Op::Gather, {x, typed(DType::I32, {1}, {})}, {{"axis", I(1)}});
  CHECK(h.shape() == std::vector<int64_t>{3});
  expectNear(h, {1, 3, 5}, 0);
  CHECK_THROWS_WITH_AS(run1(Op::Gather, {x, i64({3}, {1})}, {{"axis", I(0)}}),
                       doctest::Contains("test_node"), UserError);
  CHECK_THROWS_WITH_AS(run1(Op::Gather, {x, i64({-4}, {1})}, {{"axis", I(0)}}),
                       doctest::Contains("index -4 is out of range"), UserError);
}

TEST_CASE("interp: gather_elements and gather_nd (batch_dims) wrap negative indices") {
  Tensor x = f32({0, 1, 2, 3, 4, 5}, {3, 2});
  Tensor e = run1(Op::GatherElements, {x, i64({2, -3, -1, 1}, {2, 2})}, {{"axis", I(0)}});
  CHECK(e.shape() == std::vector<int64_t>{2, 2});
  expectNear(e, {4, 1, 4, 3}, 0);
  Tensor e1 =
      run1(Op::GatherElements, {x, typed(DType::I32, {1, 0, -2}, {3, 1})}, {{"axis", I(-1)}});
  expectNear(e1, {1, 2, 4}, 0);
  CHECK_THROWS_WITH_AS(run1(Op::GatherElements, {x, i64({0, 2}, {1, 2})}, {{"axis", I(1)}}),
                       doctest::Contains("index 2 is out of range for axis 1 of size 2"),
                       UserError);
  // [2, 3, 2]: tuples of 2 select rows; batch_dims 1 gathers inside each batch.
  Tensor y = f32({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {2, 3, 2});
  Tensor n = run1(Op::GatherND, {y, i64({1, -1, 0, 0}, {2, 2})});
  CHECK(n.shape() == std::vector<int64_t>{2, 2});
  expectNear(n, {10, 11, 0, 1}, 0);
  Tensor b = run1(Op::GatherND, {y, i64({2, 0, -1, 1}, {2, 2, 1})}, {{"batch_dims", I(1)}});
  CHECK(b.shape() == std::vector<int64_t>{2, 2, 2});
  expectNear(b, {4, 5, 0, 1, 10, 11, 8, 9}, 0);
  Tensor full = run1(Op::GatherND, {y, i64({1, 2, 1}, {1, 3})});
  expectNear(full, {11}, 0);
  CHECK_THROWS_WITH_AS(run1(Op::GatherND, {y, i64({0, 3}, {1, 2})}),
                       doctest::Contains("index 3 is out of range for axis 1 of size 3"),
                       UserError);
}

TEST_CASE("interp: scatter_elements and scatter_nd apply updates in order, with reductions") {
  Tensor x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  // Duplicates: reduction none keeps the last update; add and mul accumulate in order.
  Tensor none = run1(Op::ScatterElements, {x, i64({2, 2, -3}, {1, 3}), f32({7, 8, 9}, {1, 3})},
                     {{"axis", I(1)}});
  expectNear(none, {9, 2, 8, 4, 5, 6}, 0);
  Tensor add = run1(Op::ScatterElements, {x, i64({1, 1}, {1, 2}), f32({10, 20}, {1, 2})},
                    {{"axis", I(1)}, {"reduction", S("add")}});
  expectNear(add, {1, 32, 3, 4, 5, 6}, 0);
  Tensor mx = run1(Op::ScatterElements, {x, i64({1, 0, 1}, {1, 3}), f32({0, 9, 7}, {1, 3})},
                   {{"axis", I(0)}, {"reduction", S("max")}});
  expectNear(mx, {1, 9, 3, 4, 5, 7}, 0);
  CHECK_THROWS_WITH_AS(
      run1(Op::ScatterElements, {x, i64({3}, {1, 1}), f32({1}, {1, 1})}, {{"axis", I(1)}}),
      doctest::Contains("index 3 is out of range for axis 1 of size 3"), UserError);
  // scatter_nd: rows (k = 1) and single elements (k = 2), duplicates in order.
  Tensor rows =
      run1(Op::ScatterND, {x, i64({-1, 0, 1}, {3, 1}), f32({7, 8, 9, 1, 1, 1, 2, 2, 2}, {3, 3})});
  expectNear(rows, {1, 1, 1, 2, 2, 2}, 0);
  Tensor mul = run1(Op::ScatterND, {x, i64({0, 1, 0, 1, 1, -1}, {3, 2}), f32({2, 3, 4}, {3})},
                    {{"reduction", S("mul")}});
  expectNear(mul, {1, 12, 3, 4, 5, 24}, 0);
  Tensor mn = run1(Op::ScatterND, {i64({5, 6}, {2}), i64({1, 1}, {2, 1}), i64({9, 2}, {2})},
                   {{"reduction", S("min")}});
  expectInts(mn, {5, 2});
  CHECK_THROWS_WITH_AS(run1(Op::ScatterND, {x, i64({0, -4}, {1, 2}), f32({1}, {1})}),
                       doctest::Contains("index -4 is out of range for axis 1 of size 3"),
                       UserError);
}

TEST_CASE("interp: expand and tile") {
  Tensor e = run1(Op::Expand, {f32({1, 2}, {2, 1})}, {{"shape", Is({2, 2, 3})}});
  CHECK(e.shape() == std::vector<int64_t>{2, 2, 3});
  expectNear(e, {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2}, 0);
  Tensor t = run1(Op::Tile, {i64({1, 2, 3, 4}, {2, 2})}, {{"repeats", Is({1, 2})}});
  CHECK(t.shape() == std::vector<int64_t>{2, 4});
  expectInts(t, {1, 2, 1, 2, 3, 4, 3, 4});
}

TEST_CASE("interp: pad constant, reflect, edge and negative pads") {
  Tensor x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor c = run1(Op::Pad, {x}, {{"pads", Is({1, 0, 0, 2})}, {"value", F(-1.0)}});
  CHECK(c.shape() == std::vector<int64_t>{3, 5});
  expectNear(c, {-1, -1, -1, -1, -1, 1, 2, 3, -1, -1, 4, 5, 6, -1, -1}, 0);
  Tensor r = run1(Op::Pad, {f32({1, 2, 3}, {3})}, {{"pads", Is({2, 3})}, {"mode", S("reflect")}});
  expectNear(r, {3, 2, 1, 2, 3, 2, 1, 2}, 0);
  Tensor e = run1(Op::Pad, {f32({1, 2, 3}, {3})}, {{"pads", Is({2, 1})}, {"mode", S("edge")}});
  expectNear(e, {1, 1, 1, 2, 3, 3}, 0);
  Tensor n = run1(Op::Pad, {x}, {{"pads", Is({0, -1, 0, 1})}}); // crop the first column, pad one
  expectNear(n, {2, 3, 0, 5, 6, 0}, 0);
  expectInts(run1(Op::Pad, {i64({7}, {1})}, {{"pads", Is({1, 1})}, {"value", F(3.0)}}), {3, 7, 3});
}

TEST_CASE("interp: resize nearest and linear with each coordinate mode") {
  Tensor x = f32({1, 2, 3, 4}, {1, 1, 2, 2});
  auto attrs = [](std::vector<int64_t> sizes, std::vector<double> scales, const char *mode,
                  const char *ctm, const char *nm = "round_prefer_floor") {
    return AttrMap{{"sizes", Is(std::move(sizes))},
                   {"scales", Fs(std::move(scales))},
                   {"mode", S(mode)},
                   {"coordinate_transformation_mode", S(ctm)},
                   {"nearest_mode", S(nm)}};
  };
  // ONNX resize_upsample_scales_nearest
  expectNear(run1(Op::Resize, {x}, attrs({1, 1, 4, 6}, {1, 1, 2, 3}, "nearest", "half_pixel")),
             {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4}, 0);
  // ONNX resize_upsample_scales_linear (half_pixel)
  expectNear(run1(Op::Resize, {x}, attrs({1, 1, 4, 4}, {1, 1, 2, 2}, "linear", "half_pixel")),
             {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4},
             1e-7);
  // ONNX resize_upsample_scales_linear_align_corners
  double t = 1.0 / 3;
  expectNear(run1(Op::Resize, {x}, attrs({1, 1, 4, 4}, {1, 1, 2, 2}, "linear", "align_corners")),
             {1, 1 + t, 1 + 2 * t, 2, 1 + 2 * t, 2, 2 + t, 2 + 2 * t, 2 + t, 2 + 2 * t, 3, 3 + t, 3,
              3 + t, 3 + 2 * t, 4},
             1e-6);
  // asymmetric linear: x_in = x_out / 2, clamped at the end
  expectNear(run1(Op::Resize, {f32({0, 10}, {2})}, attrs({4}, {2}, "linear", "asymmetric")),
             {0, 5, 10, 10}, 1e-7);
  // pytorch_half_pixel maps a length-1 output to coordinate 0
  expectNear(run1(Op::Resize, {f32({3, 7, 9}, {3})},
                  attrs({1}, {1.0 / 3}, "linear", "pytorch_half_pixel")),
             {3}, 0);
  expectNear(run1(Op::Resize, {f32({3, 7, 9}, {3})}, attrs({1}, {1.0 / 3}, "linear", "half_pixel")),
             {7}, 1e-6);
  // ONNX resize_downsample_scales_linear_align_corners: the resized length is 4 * 0.6 = 2.4, so
  // x_in = x_out * 3 / 1.4 (not x_out * 3 / 1 from the rounded output size 2)
  Tensor d = f32({1, 2, 3, 4, 5, 6, 7, 8}, {1, 1, 2, 4});
  expectNear(
      run1(Op::Resize, {d}, attrs({1, 1, 1, 2}, {1, 1, 0.6, 0.6}, "linear", "align_corners")),
      {1, 1 + 3 / 1.4}, 1e-6);
  // ONNX resize_downsample_scales_nearest
  expectNear(run1(Op::Resize, {d}, attrs({1, 1, 1, 2}, {1, 1, 0.6, 0.6}, "nearest", "half_pixel")),
             {1, 3}, 0);
  // nearest modes with asymmetric coordinates x_in = x_out / 4 (exact binary fractions):
  // 0, .25, .5, .75, 1, 1.25, 1.5, 1.75
  Tensor v = f32({10, 11, 12, 13}, {4});
  auto nm = [&](const char *mode) {
    return run1(Op::Resize, {v}, attrs({8}, {4.0}, "nearest", "asymmetric", mode));
  };
  expectNear(nm("round_prefer_floor"), {10, 10, 10, 11, 11, 11, 11, 12}, 0);
  expectNear(nm("round_prefer_ceil"), {10, 10, 11, 11, 11, 11, 12, 12}, 0);
  expectNear(nm("floor"), {10, 10, 10, 10, 11, 11, 11, 11}, 0);
  expectNear(nm("ceil"), {10, 11, 11, 11, 11, 12, 12, 12}, 0);
}

// ---- the graph walk -----------------------------------------------------------------------------

TEST_CASE("interp: a multi-node graph with weights, shared values and several outputs") {
  Graph g("chain");
  Value *x = g.addInput("x", TensorType(DType::F32, {2, 2}));
  Value *w = g.addWeight("w", std::make_shared<Tensor>(f32({1, 2, 3, 4}, {2, 2})));
  Value *m = g.createNode(Op::MatMul, {x, w})->result();
  Value *a = g.createNode(Op::Add, {m, x})->result();
  Value *r = g.createNode(Op::Relu, {a})->result();
  Value *s = g.createNode(Op::ReduceSum, {m}, {{"keepdims", I(0)}})->result();
  g.addOutput(r);
  g.addOutput(s);
  g.addOutput(x);
  auto outs = interpret(g, {f32({1, 0, 0, -1}, {2, 2})});
  REQUIRE(outs.size() == 3);
  // m = [[1,2],[-3,-4]], a = [[2,2],[-3,-5]]
  expectNear(outs[0], {2, 2, 0, 0}, 0);
  expectNear(outs[1], {-4}, 0);
  expectNear(outs[2], {1, 0, 0, -1}, 0);

  CHECK_THROWS_WITH_AS(interpret(g, {f32({1, 2}, {2})}),
                       doctest::Contains("input 'x': expected f32[2,2], got f32[2]"), UserError);
  CHECK_THROWS_AS(interpret(g, {}), UserError);
}

TEST_CASE("interp: randomInputs is deterministic and in range") {
  Graph g("rand");
  g.addInput("a", TensorType(DType::F32, {1000}));
  g.addInput("b", TensorType(DType::I64, {200}));
  g.addInput("c", TensorType(DType::Bool, {200}));
  g.addInput("d", TensorType(DType::F16, {10}));
  auto r1 = randomInputs(g, 7), r2 = randomInputs(g, 7), r3 = randomInputs(g, 8);
  REQUIRE(r1.size() == 4);
  for (size_t i = 0; i < r1.size(); ++i)
    CHECK(r1[i] == r2[i]);
  CHECK(!(r1[0] == r3[0]));
  double mn = 1, mx = -1, sum = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    double v = r1[0].getDouble(i);
    mn = std::min(mn, v);
    mx = std::max(mx, v);
    sum += v;
  }
  CHECK(mn >= -1.0);
  CHECK(mx < 1.0);
  CHECK(mn < -0.9);
  CHECK(mx > 0.9);
  CHECK(std::fabs(sum / 1000) < 0.1);
  std::set<int64_t> seen;
  for (int64_t i = 0; i < 200; ++i) {
    int64_t v = r1[1].getInt(i);
    CHECK(v >= 0);
    CHECK(v < 2);
    seen.insert(v);
  }
  CHECK(seen.size() == 2);
  int64_t trues = 0;
  for (int64_t i = 0; i < 200; ++i)
    trues += r1[2].getInt(i);
  CHECK(trues > 50);
  CHECK(trues < 150);
  // Pinned values (splitmix64 from seed 0, checked against an independent implementation): a
  // change of generator would silently change every --random run and stored comparison.
  Graph p("pin");
  p.addInput("a", TensorType(DType::F32, {3}));
  p.addInput("b", TensorType(DType::I64, {3}));
  auto pinned = randomInputs(p, 0);
  expectNear(pinned[0], {0.7666215896606445, -0.13694405555725098, -0.9471324682235718}, 0);
  expectInts(pinned[1], {1, 0, 0});
}

TEST_CASE("interp: evalNode re-infers result types from the operands it is given") {
  Graph g("eval");
  Value *x = g.addInput("x", TensorType(DType::F32, {2}));
  Node *n = g.createNode(Op::Add, {x, x}, {}, Location("/add"));
  Tensor a = f32({1, 2, 3}, {3});
  auto out = evalNode(*n, {&a, &a});
  CHECK(out.at(0).shape() == std::vector<int64_t>{3});
  expectNear(out[0], {2, 4, 6}, 0);
  Tensor b = f32({1, 2}, {2});
  CHECK_THROWS_WITH_AS(evalNode(*n, {&a, &b}), doctest::Contains("/add"), UserError);
}

TEST_CASE("interp: a BERT-like matmul + softmax + layer_norm chain runs quickly") {
  // 1x128x768: x W (768x768) -> softmax -> layer_norm. A smoke test of the fast paths: the
  // time bound is generous (the measured figure is far below it) so a loaded machine passes.
  Graph g("bert_chain");
  Value *x = g.addInput("x", TensorType(DType::F32, {1, 128, 768}));
  auto wv = randomFloats(768 * 768, 80);
  Value *w = g.addWeight("w", std::make_shared<Tensor>(f32(wv, {768, 768})));
  Value *m = g.createNode(Op::MatMul, {x, w})->result();
  Value *s = g.createNode(Op::Softmax, {m})->result();
  Value *l = g.createNode(Op::LayerNorm, {s}, {{"epsilon", F(1e-12)}})->result();
  g.addOutput(l);
  auto in = randomInputs(g, 1);
  auto t0 = std::chrono::steady_clock::now();
  auto out = interpret(g, in);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(secs < 5.0);
  // each layer_norm row has mean 0 and variance ~1
  double mean = 0, var = 0;
  for (int64_t j = 0; j < 768; ++j)
    mean += out[0].getDouble(j);
  mean /= 768;
  for (int64_t j = 0; j < 768; ++j)
    var += (out[0].getDouble(j) - mean) * (out[0].getDouble(j) - mean);
  CHECK(std::fabs(mean) < 1e-5);
  CHECK(var / 768 == doctest::Approx(1.0).epsilon(1e-3));
}
