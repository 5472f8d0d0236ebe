// The verifier, one rule at a time on graphs built through the Graph API (the text-level forms
// are in testdata/ir/verifier): each rule has a graph that breaks it and the exact diagnostic,
// including how the location is written (ONNX origin, file:line:col, or node #i (op)).
#include "ir/verifier.h"

#include "ir/parser.h"
#include "support/diagnostics.h"

#include <doctest/doctest.h>

using namespace aicf;

namespace {

TensorType f32(std::vector<int64_t> shape) {
  return TensorType(DType::F32, std::move(shape));
}

std::vector<std::string> problems(const Graph &g) {
  return verifyGraphDiagnostics(g);
}

} // namespace

TEST_CASE("verifier: a well-formed graph has no diagnostics") {
  Graph g("ok");
  Value *x = g.addInput("x", f32({2, 3}));
  Value *w = g.addWeight("w", std::make_shared<Tensor>(f32({3, 4})));
  Node *mm = g.createNode(Op::MatMul, {x, w});
  Node *sp =
      g.createNode(Op::Split, {mm->result()},
                   {{"axis", int64_t(1)}, {"sizes", std::vector<int64_t>{1, 3}}}, {}, nullptr, 2);
  g.setOutputs({sp->result(1), x});
  CHECK(problems(g).empty());
  CHECK_NOTHROW(verifyGraph(g));
}

TEST_CASE("verifier: operands are defined before use") {
  Graph g("order");
  Value *x = g.addInput("x", f32({2}));
  Node *a = g.createNode(Op::Relu, {x});
  Node *b = g.createNode(Op::Neg, {a->result()});
  g.addOutput(b->result());
  g.moveBefore(b, a);
  CHECK(problems(g) == std::vector<std::string>{
                           "node #0 (neg): operand #0 (the result of a relu node) of neg is used "
                           "before its definition"});
}

TEST_CASE("verifier: operands belong to the graph and are not null") {
  Graph g("foreign"), other("other");
  Value *f = other.addInput("f", f32({2}));
  g.addNode(Op::Relu, {f}, {f32({2})});
  g.addNode(Op::Relu, {nullptr}, {f32({2})});
  CHECK(problems(g) == std::vector<std::string>{
                           "node #0 (relu): operand #0 (%f) of relu is not defined in the graph",
                           "node #1 (relu): operand #0 of relu is null"});
}

TEST_CASE("verifier: value names of inputs and weights are defined once") {
  Graph g("names");
  Value *x = g.addInput("x", f32({2}));
  Value *y = g.addInput("y", f32({2}));
  Value *w = g.addWeight("w", std::make_shared<Tensor>(f32({2})));
  y->setName("x");
  w->setName("x");
  g.setOutputs({x});
  CHECK(problems(g) == std::vector<std::string>{"graph @names: value name %x is defined twice",
                                                "graph @names: value name %x is defined twice"});
}

TEST_CASE("verifier: operand count within the op's arity") {
  Graph g("arity");
  Value *x = g.addInput("x", f32({2}));
  g.addNode(Op::Relu, {x, x}, {f32({2})});
  g.addNode(Op::LayerNorm, {x, x, x, x}, {f32({2})});
  g.addNode(Op::MatMul, {x}, {f32({2})});
  CHECK(problems(g) ==
        std::vector<std::string>{"node #0 (relu): relu takes 1 operand, got 2",
                                 "node #1 (layer_norm): layer_norm takes 1 to 3 operands, got 4",
                                 "node #2 (matmul): matmul takes at least 2 operands, got 1"});
}

TEST_CASE("verifier: attributes match the schema") {
  Graph g("attrs");
  Value *x = g.addInput("x", f32({2, 3}));
  g.addNode(Op::Relu, {x}, {f32({2, 3})}, {{"bogus", int64_t(1)}});
  g.addNode(Op::Softmax, {x}, {f32({2, 3})}, {{"axis", 1.5}});
  g.addNode(Op::Transpose, {x}, {f32({3, 2})});
  CHECK(problems(g) ==
        std::vector<std::string>{
            "node #0 (relu): op 'relu' has no attribute 'bogus'",
            "node #1 (softmax): attribute 'axis' of 'softmax' must be int, got float",
            "node #2 (transpose): op 'transpose' requires attribute 'perm'"});

  // An empty int list stands for any empty list kind (the text `[]`).
  Graph h("empty_list");
  Value *s = h.addInput("s", f32({}));
  Node *r = h.addNode(Op::Resize, {s}, {f32({})},
                      {{"sizes", std::vector<int64_t>{}}, {"scales", std::vector<int64_t>{}}});
  h.addOutput(r->result());
  CHECK(problems(h).empty());
  CHECK(r->floats("scales").empty());
}

TEST_CASE("verifier: result count and types equal inference") {
  Graph g("results");
  Value *x = g.addInput("x", f32({4}));
  g.addNode(Op::Relu, {x}, {f32({4}), f32({4})});
  g.addNode(Op::Relu, {x}, {f32({3})});
  g.addNode(Op::Relu, {x}, {TensorType(DType::F16, {4})});
  g.addNode(Op::Split, {x}, {f32({3}), f32({3})},
            {{"axis", int64_t(0)}, {"sizes", std::vector<int64_t>{3, 1}}});
  g.addNode(Op::Split, {x}, {f32({2}), f32({2}), f32({2})},
            {{"axis", int64_t(0)}, {"sizes", std::vector<int64_t>{2, 2}}});
  CHECK(problems(g) == std::vector<std::string>{
                           "node #0 (relu): relu has 1 result, got 2",
                           "node #1 (relu): result type f32[3] does not match inferred f32[4]",
                           "node #2 (relu): result type f16[4] does not match inferred f32[4]",
                           "node #3 (split): result #1 type f32[3] does not match inferred f32[1]",
                           "node #4 (split): split has 3 results but 2 sizes"});
}

TEST_CASE("verifier: inference failures carry the node's location") {
  Graph g("attn");
  Value *q = g.addInput("q", f32({2, 4, 64, 64}));
  Value *k = g.addInput("k", f32({2, 4, 32, 64}));
  Node *mm = g.addNode(Op::MatMul, {q, k}, {f32({2, 4, 64, 64})}, {}, Location("/attn/MatMul_1"));
  Node *fused = g.addNode(Op::Add, {q, k}, {f32({2, 4, 64, 64})});
  fused->loc = Location::fuse({&mm->loc, &mm->loc});
  fused->loc.origins.push_back("/attn/Add");
  Node *located = g.addNode(Op::Sub, {q, k}, {f32({2, 4, 64, 64})});
  located->pos = SourcePos{"m.mcir", 3, 5};
  g.addOutput(mm->result());
  CHECK(
      problems(g) ==
      std::vector<std::string>{
          "/attn/MatMul_1: matmul operand shapes f32[2,4,64,64] and f32[2,4,32,64] do not contract",
          "fused[/attn/MatMul_1, /attn/Add]: add operand shapes f32[2,4,64,64] and "
          "f32[2,4,32,64] do not broadcast",
          "m.mcir:3:5: sub operand shapes f32[2,4,64,64] and f32[2,4,32,64] do not broadcast"});
  std::vector<VerifierDiagnostic> detailed = verifyGraphDetailed(g);
  REQUIRE(detailed.size() == 3);
  CHECK(detailed[2].pos.line == 3);
  CHECK(detailed[2].where == "m.mcir:3:5");
  try {
    verifyGraph(g);
    FAIL("expected a UserError");
  } catch (const UserError &e) {
    CHECK(std::string(e.what()) == "/attn/MatMul_1: matmul operand shapes f32[2,4,64,64] and "
                                   "f32[2,4,32,64] do not contract");
  }
}

TEST_CASE("verifier: rank-0 operands are reported, not indexed out of bounds") {
  Graph g("scalars");
  Value *s = g.addInput("s", f32({}));
  Value *i = g.addInput("i", TensorType(DType::I64, {}));
  g.addNode(Op::Split, {s}, {f32({})}, {{"axis", int64_t(0)}, {"sizes", std::vector<int64_t>{1}}});
  g.addNode(Op::Concat, {s, s}, {f32({})}, {{"axis", int64_t(0)}});
  g.addNode(Op::Gather, {s, i}, {f32({})});
  CHECK(problems(g) ==
        std::vector<std::string>{"node #0 (split): split operand must have rank >= 1, got f32[]",
                                 "node #1 (concat): concat operands must have rank >= 1, got f32[]",
                                 "node #2 (gather): gather data must have rank >= 1, got f32[]"});
}

TEST_CASE("verifier: graph outputs are defined in the graph") {
  Graph g("outputs"), other("other");
  Value *x = g.addInput("x", f32({2}));
  Value *f = other.addInput("f", f32({2}));
  g.setOutputs({x, f, nullptr});
  CHECK(problems(g) ==
        std::vector<std::string>{"graph @outputs: graph output #1 (%f) is not defined in the graph",
                                 "graph @outputs: graph output #2 is null"});
}

TEST_CASE("verifier: weights hold data of exactly their type") {
  Graph g("weights");
  Value *w = g.addWeight("w", std::make_shared<Tensor>(f32({3})));
  Value *v = g.addWeight("v", std::make_shared<Tensor>(f32({3})));
  Value *d = g.addWeight("d", std::make_shared<Tensor>(f32({3})));
  w->setType(f32({4}));
  v->setData(nullptr);
  d->setType(TensorType(DType::F32, {kDynamicDim}));
  d->loc = Location("model.d");
  CHECK(problems(g) ==
        std::vector<std::string>{
            "graph @weights: weight %w holds f32[3] data (12 bytes) but has type f32[4]",
            "graph @weights: weight %v has no data",
            "model.d: weight %d has a dynamic type f32[?]"});
}

TEST_CASE("verifier: text positions are used when there is no loc") {
  std::unique_ptr<Graph> g = parseGraph("graph @g(%x: f32[2]) -> (%x: f32[2]) {\n"
                                        "  %0 = relu(%x, %x) : f32[2]\n"
                                        "  return %x\n}\n",
                                        "v.mcir", /*verify=*/false);
  CHECK(problems(*g) == std::vector<std::string>{"v.mcir:2:3: relu takes 1 operand, got 2"});
}
