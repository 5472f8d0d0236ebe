// Symbolic dims through the importer and the graph passes (issue 21): the exported BERT layer
// and GPT-2 block (torch exports whose reshapes are computed from Shape / Gather / Concat chains,
// GPT-2's causal mask sliced from a constant buffer to the sequence length) imported with
// --dim batch=1..4@3 --dim seq=1..64@24 keep batch and seq symbolic: every reshape gets its
// sym_shape from the shape chain, the mask is a slice with a symbolic end, and the pipeline
// detects the same attention and layer_norm ops as for a static compile. The symbolic graph,
// made static at a point (ir/instantiate.h), computes what a static import at that point does
// and what PyTorch computed. Small models built here check the refusals: a shape computation
// that cannot be exact for every value of the dims fails at its node, naming why.
#include "driver/pipeline.h"
#include "frontend/onnx_importer.h"
#include "interp/interpreter.h"
#include "ir/instantiate.h"
#include "ir/npy.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "model_dirs.h"
#include "passes/pass.h"
#include "support/diagnostics.h"

#include <doctest/doctest.h>

#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace fs = std::filesystem;
using namespace aicf;

namespace {

fs::path modelPath(const std::string &name) {
  return fs::path(AICF_TESTDATA) / "models" / name / "model.onnx";
}

ImportOptions ranged(std::vector<DimRange> dims) {
  ImportOptions o;
  o.dimRanges = std::move(dims);
  return o;
}

ImportOptions fixed(int64_t batch, int64_t seq) {
  ImportOptions o;
  o.dimParams = {{"batch", batch}, {"seq", seq}};
  return o;
}

void runPipeline(Graph &g) {
  PassManager pm;
  buildDefaultPipeline(pm);
  PassContext ctx;
  pm.run(g, ctx);
}

// choose-attention without a cost callback: every attention materialised where exact (the
// causal mask then a cut of a constant band with symbolic dims).
void materializeAttention(Graph &g) {
  PassManager pm;
  pm.add(createPass("choose-attention"));
  PassContext ctx;
  pm.run(g, ctx);
}

std::vector<Node *> nodesOf(const Graph &g, Op op) {
  std::vector<Node *> out;
  for (Node *n : g.nodes())
    if (n->op() == op)
      out.push_back(n);
  return out;
}

Node *nodeAt(const Graph &g, const std::string &origin) {
  for (Node *n : g.nodes())
    if (std::find(n->loc.origins.begin(), n->loc.origins.end(), origin) != n->loc.origins.end())
      return n;
  return nullptr;
}

std::string importError(const std::string &path, const ImportOptions &opts) {
  try {
    importOnnx(path, opts);
  } catch (const UserError &e) {
    return e.what();
  }
  return "";
}

// The worst |a - b| - (1e-5 + 1e-4 |b|) over the elements; <= 0 when all are within tolerance.
double excess(const Tensor &a, const Tensor &b) {
  REQUIRE(a.shape() == b.shape());
  double worst = -1;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = a.getDouble(i), y = b.getDouble(i);
    worst = std::max(worst, std::fabs(x - y) - (1e-5 + 1e-4 * std::fabs(y)));
  }
  return worst;
}

// Inputs for `g` (static) at a seed, shared by the two graphs compared.
std::vector<Tensor> inputsFor(const Graph &g) {
  return randomInputs(g, 7);
}

// ---- a small ModelProto builder for the refusal cases ------------------------------------------

struct Onnx {
  onnx::ModelProto m;
  explicit Onnx(int opset = 17) {
    m.set_ir_version(8);
    auto *o = m.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    m.mutable_graph()->set_name("sym");
  }
  // A value's type: dims are numbers, dim_param names, or "?" (unknown).
  static void setType(onnx::ValueInfoProto *v, const std::string &name, int elemType,
                      const std::vector<std::string> *dims) {
    v->set_name(name);
    auto *t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(elemType);
    if (!dims)
      return;
    auto *shape = t->mutable_shape();
    for (const std::string &d : *dims) {
      auto *dim = shape->add_dim();
      if (std::isdigit(static_cast<unsigned char>(d[0])))
        dim->set_dim_value(std::stoll(d));
      else if (d != "?")
        dim->set_dim_param(d);
    }
  }
  Onnx &input(const std::string &name, int elemType, const std::vector<std::string> &dims) {
    setType(m.mutable_graph()->add_input(), name, elemType, &dims);
    return *this;
  }
  // An output of ONNX's inferred shape, or of `dims` when that infers none.
  Onnx &output(const std::string &name, int elemType, const std::vector<std::string> &dims = {}) {
    setType(m.mutable_graph()->add_output(), name, elemType, dims.empty() ? nullptr : &dims);
    return *this;
  }
  Onnx &ints(const std::string &name, std::vector<int64_t> vals, std::vector<int64_t> dims) {
    auto *t = m.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : dims)
      t->add_dims(d);
    for (int64_t v : vals)
      t->add_int64_data(v);
    return *this;
  }
  Onnx &bools(const std::string &name, std::vector<int64_t> dims, bool lowerTriangular) {
    auto *t = m.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::BOOL);
    for (int64_t d : dims)
      t->add_dims(d);
    int64_t rows = dims[dims.size() - 2], cols = dims.back();
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        t->add_int32_data(!lowerTriangular || j <= i);
    return *this;
  }
  onnx::NodeProto &node(const std::string &op, std::vector<std::string> ins,
                        std::vector<std::string> outs, const std::string &name) {
    onnx::NodeProto *n = m.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (auto &i : ins)
      n->add_input(i);
    for (auto &o : outs)
      n->add_output(o);
    return *n;
  }
  // The outputs get ONNX's inferred shapes (the checker wants one).
  std::string save(const std::string &file) const {
    onnx::ModelProto out = m, inferred = m;
    try {
      onnx::shape_inference::InferShapes(inferred);
    } catch (const std::exception &) {
    }
    for (int i = 0; i < out.graph().output_size(); ++i)
      if (!out.graph().output(i).type().tensor_type().has_shape())
        *out.mutable_graph()->mutable_output(i)->mutable_type() = inferred.graph().output(i).type();
    fs::path dir = fs::temp_directory_path() / cat("aicf_symbolic_import_", ::getpid());
    fs::create_directories(dir);
    fs::path p = dir / file;
    std::ofstream f(p, std::ios::binary);
    out.SerializeToOstream(&f);
    return p.string();
  }
};

void setInt(onnx::NodeProto &n, const std::string &name, int64_t v) {
  auto *a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

const std::vector<DimRange> kBatchSeq = {{"batch", 1, 4, 3}, {"seq", 1, 64, 24}};

} // namespace

TEST_CASE("symbolic import: BERT and GPT-2 blocks keep batch and seq symbolic through the passes") {
  struct Case {
    const char *model;
    int64_t layerNorms;
    bool causal;
  };
  for (const Case &c :
       {Case{"bert_layer_dyn_op13", 2, false}, Case{"gpt2_block_dyn_op17", 2, true}})
    for (int64_t opt : {2, 24, 40, 64}) {
      std::string model = c.model;
      CAPTURE(model);
      CAPTURE(opt);
      auto g = importOnnx(modelPath(c.model).string(),
                          ranged({{"batch", 1, 4, opt % 4 + 1}, {"seq", 1, 64, opt}}));
      runPipeline(*g);
      CHECK(verifyGraphDiagnostics(*g).empty());
      REQUIRE(g->outputs().size() == 1);
      CHECK(g->outputs()[0]->type().str() == "f32[batch,seq,128]");
      CHECK(g->outputs()[0]->type().shape == std::vector<int64_t>{opt % 4 + 1, opt, 128});
      CHECK(static_cast<int64_t>(nodesOf(*g, Op::LayerNorm).size()) == c.layerNorms);
      CHECK(nodesOf(*g, Op::Softmax).empty());
      auto attn = nodesOf(*g, Op::Attention);
      REQUIRE(attn.size() == 1);
      CHECK(attn[0]->result()->type().str() == "f32[batch,4,seq,32]");
      CHECK(attn[0]->i("causal") == (c.causal ? 1 : 0));
      if (c.causal) { // the mask slices are gone with the where
        CHECK(attn[0]->numOperands() == 3);
        CHECK(nodesOf(*g, Op::Slice).empty());
      } else { // BERT's additive mask from attention_mask [batch, seq]
        REQUIRE(attn[0]->numOperands() == 4);
        CHECK(attn[0]->operand(3)->type().str() == "f32[batch,1,1,seq]");
      }
    }
}

TEST_CASE("symbolic import: Shape chains fold into sym_shape and symbolic slice bounds") {
  auto g = importOnnx(modelPath("gpt2_block_dyn_op17").string(), ranged(kBatchSeq));
  CHECK(verifyGraphDiagnostics(*g).empty());
  auto symShape = [&](const std::string &origin) {
    Node *n = nodeAt(*g, origin);
    REQUIRE_MESSAGE(n, origin);
    REQUIRE(n->op() == Op::Reshape);
    return n->strs("sym_shape");
  };
  using S = std::vector<std::string>;
  // Reshape(x, Concat(-1, Unsqueeze(Squeeze(Slice(Shape(x), -1))))): -1 resolved symbolically.
  CHECK(symShape("/attn/c_attn/Reshape") == S{"batch*seq", "128"});
  CHECK(nodeAt(*g, "/attn/c_attn/Reshape")->ints("shape") == std::vector<int64_t>{72, 128});
  // Reshape(y, Concat(Unsqueeze(Gather(Shape(x), 0)), Unsqueeze(Gather(Shape(x), 1)), 384)).
  CHECK(symShape("/attn/c_attn/Reshape_1") == S{"batch", "seq", "384"});
  CHECK(symShape("/attn/Reshape") == S{"batch", "seq", "4", "32"});
  // The causal buffer cut to [seq - seq, seq) x [0, seq): slices with symbolic ends, not a
  // constant of the planning size.
  Node *rows = nodeAt(*g, "/attn/Slice_3"), *cols = nodeAt(*g, "/attn/Slice_4");
  REQUIRE((rows && cols));
  CHECK(rows->op() == Op::Slice);
  CHECK(rows->operand(0)->isWeight());
  CHECK(rows->strs("sym_starts") == S{"0"});
  CHECK(rows->strs("sym_ends") == S{"seq"});
  CHECK(cols->strs("sym_ends") == S{"seq"});
  CHECK(cols->result()->type().str() == "bool[1,1,seq,seq]");
  // No weight holds a shape: the Shape results were all consumed as shapes.
  for (const Value *w : g->weights())
    CHECK_MESSAGE(w->loc.str().find("Shape") == std::string::npos, w->name());
  // BERT's Unsqueeze of attention_mask: a reshape carrying both dims.
  auto bert = importOnnx(modelPath("bert_layer_dyn_op13").string(), ranged(kBatchSeq));
  Node *u = nodeAt(*bert, "/Unsqueeze_1");
  REQUIRE(u);
  CHECK(u->result()->type().str() == "i64[batch,1,1,seq]");
}

TEST_CASE("symbolic import: the symbolic graph round-trips through IR text") {
  for (std::string model : {"bert_layer_dyn_op13", "gpt2_block_dyn_op17"}) {
    CAPTURE(model);
    auto g = importOnnx(modelPath(model).string(), ranged(kBatchSeq));
    for (bool passes : {false, true}) {
      if (passes)
        runPipeline(*g);
      std::string text = printGraph(*g);
      CHECK(text.find("dims(batch = [1, 4, 3], seq = [1, 64, 24])") != std::string::npos);
      auto parsed = parseGraph(text, "sym.mcir");
      CHECK(verifyGraphDiagnostics(*parsed).empty());
      CHECK(printGraph(*parsed) == text);
    }
  }
}

TEST_CASE("symbolic import: instantiated at a point, the graph computes the static import's "
          "values") {
  struct Point {
    const char *model;
    int64_t batch, seq;
  };
  for (const Point &p : {Point{"bert_layer_dyn_op13", 2, 7}, Point{"bert_layer_dyn_op13", 1, 64},
                         Point{"gpt2_block_dyn_op17", 2, 7}, Point{"gpt2_block_dyn_op17", 1, 64},
                         Point{"gpt2_block_dyn_op17", 4, 1}}) {
    std::string model = p.model;
    CAPTURE(model);
    CAPTURE(p.batch);
    CAPTURE(p.seq);
    auto want = importOnnx(modelPath(p.model).string(), fixed(p.batch, p.seq));
    std::vector<Tensor> inputs = inputsFor(*want);
    std::vector<Tensor> ref = interpret(*want, inputs);
    for (int stage : {0, 1, 2}) { // imported, after the pipeline, attention materialised
      CAPTURE(stage);
      auto g = importOnnx(modelPath(p.model).string(), ranged(kBatchSeq));
      if (stage >= 1)
        runPipeline(*g);
      if (stage == 2) { // (BERT's mask is not a constant: its attention stays streaming)
        materializeAttention(*g);
        CHECK(nodesOf(*g, Op::Attention).empty() ==
              (std::string(p.model) == "gpt2_block_dyn_op17"));
      }
      instantiate(*g, {{"batch", p.batch}, {"seq", p.seq}});
      CHECK(g->dims().empty());
      CHECK(verifyGraphDiagnostics(*g).empty());
      std::vector<Tensor> got = interpret(*g, inputs);
      REQUIRE(got.size() == ref.size());
      CHECK(excess(got[0], ref[0]) <= 0);
    }
  }
}

TEST_CASE("symbolic import: instantiated at the stored inputs' shape, it matches PyTorch") {
  for (std::string model : {"bert_layer_dyn_op13", "gpt2_block_dyn_op17"}) {
    CAPTURE(model);
    fs::path dir = modelPath(model).parent_path();
    ImportOptions stat = testing::modelImportOptions(dir);
    auto g = importOnnx(modelPath(model).string(), ranged(kBatchSeq));
    runPipeline(*g);
    instantiate(*g, stat.dimParams);
    std::vector<Tensor> inputs;
    for (Value *in : g->inputs())
      inputs.push_back(readNpy((dir / "inputs" / (in->name() + ".npy")).string()));
    std::vector<Tensor> got = interpret(*g, inputs);
    Tensor want = readNpy((dir / "outputs" / (g->outputs()[0]->name() + ".npy")).string());
    CHECK(excess(got[0], want) <= 0);
  }
}

TEST_CASE("symbolic import: instantiate checks the point") {
  auto g = importOnnx(modelPath("gpt2_block_dyn_op17").string(), ranged(kBatchSeq));
  CHECK_THROWS_WITH(instantiate(*g, {{"batch", 2}}), "instantiate: no value for dim 'seq'");
  CHECK_THROWS_WITH(instantiate(*g, {{"batch", 2}, {"seq", 65}}),
                    "instantiate: seq = 65 is outside its range 1..64");
}

TEST_CASE("symbolic import: symBounds over the dims' ranges") {
  auto P = [](const char *t) { return *SymExpr::parse(t); };
  auto b = symBounds(P("3*batch*seq+1"), kBatchSeq);
  REQUIRE(b);
  CHECK((b->lo == 4 && b->hi == 3 * 4 * 64 + 1));
  b = symBounds(P("128-seq"), kBatchSeq);
  REQUIRE(b);
  CHECK((b->lo == 64 && b->hi == 127));
  CHECK(!symBounds(P("heads"), kBatchSeq));
}

TEST_CASE("symbolic import: shape computations over symbolic dims") {
  using T = onnx::TensorProto;
  SUBCASE("Range to a symbolic limit is a cut of a constant range") {
    Onnx m;
    m.input("x", T::FLOAT, {"seq", "8"}).ints("zero", {0}, {}).ints("one", {1}, {});
    m.node("Shape", {"x"}, {"s"}, "shape");
    m.node("Gather", {"s", "zero"}, {"n"}, "gather");
    m.node("Range", {"zero", "n", "one"}, {"ids"}, "range");
    m.output("ids", T::INT64);
    auto g = importOnnx(m.save("range.onnx"), ranged({{"seq", 1, 16, 5}}));
    REQUIRE(g->outputs().size() == 1);
    CHECK(g->outputs()[0]->type().str() == "i64[seq]");
    instantiate(*g, {{"seq", 11}});
    std::vector<Tensor> out = interpret(*g, {Tensor(TensorType(DType::F32, {11, 8}))});
    CHECK(out[0].toInts() == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  }
  SUBCASE("an index from the end of a symbolic axis is a slice") {
    Onnx m;
    m.input("x", T::FLOAT, {"seq", "8"}).ints("last", {-1}, {});
    m.node("Gather", {"x", "last"}, {"y"}, "gather");
    m.output("y", T::FLOAT);
    auto g = importOnnx(m.save("last.onnx"), ranged({{"seq", 1, 16, 5}}));
    CHECK(g->outputs()[0]->type().str() == "f32[8]");
    instantiate(*g, {{"seq", 3}});
    Tensor x(TensorType(DType::F32, {3, 8}));
    for (int64_t i = 0; i < x.numel(); ++i)
      x.setDouble(i, double(i));
    CHECK(interpret(*g, {x})[0].getDouble(0) == 16.0);
  }
  SUBCASE("a comparison of dims decided over the whole ranges folds") {
    // Where(Equal(Shape(x), -1), 1, Shape(x)): torch's Expand target; seq is never -1.
    Onnx m;
    m.input("x", T::FLOAT, {"seq", "1"}).ints("m1", {-1}, {}).ints("one", {1}, {});
    m.input("y", T::FLOAT, {"seq", "1"});
    m.node("Shape", {"x"}, {"s"}, "shape");
    m.node("Equal", {"s", "m1"}, {"e"}, "equal");
    m.node("Where", {"e", "one", "s"}, {"t"}, "where");
    m.node("Expand", {"y", "t"}, {"z"}, "expand");
    m.output("z", T::FLOAT);
    auto g = importOnnx(m.save("expand.onnx"), ranged({{"seq", 1, 16, 5}}));
    CHECK(g->outputs()[0]->type().str() == "f32[seq,1]");
  }
}

TEST_CASE("symbolic import: what cannot hold for every value of the dims is refused") {
  using T = onnx::TensorProto;
  auto dims = ranged({{"seq", 1, 16, 6}});
  SUBCASE("a floor division of a dim") {
    Onnx m;
    m.input("x", T::FLOAT, {"seq", "4"}).ints("zero", {0}, {}).ints("two", {2}, {});
    m.ints("eight", {8}, {1}).ints("axes", {0}, {1});
    m.node("Shape", {"x"}, {"s"}, "shape");
    m.node("Gather", {"s", "zero"}, {"n"}, "gather");
    m.node("Div", {"n", "two"}, {"h"}, "half");
    m.node("Unsqueeze", {"h", "axes"}, {"h1"}, "unsqueeze");
    setInt(m.node("Concat", {"h1", "eight"}, {"t"}, "concat"), "axis", 0);
    m.node("Reshape", {"x", "t"}, {"y"}, "reshape");
    m.output("y", T::FLOAT, {"?", "8"});
    std::string err = importError(m.save("div.onnx"), dims);
    CHECK_MESSAGE(
        err.find("node 'half' (Div): divides seq by 2, which is not exact for every value of "
                 "the symbolic dims") != std::string::npos,
        err);
  }
  SUBCASE("a shape value read as data") {
    Onnx m;
    m.input("x", T::INT64, {"seq"}).ints("zero", {0}, {});
    m.node("Shape", {"x"}, {"s"}, "shape");
    m.node("Gather", {"s", "zero"}, {"n"}, "gather");
    m.node("Add", {"x", "n"}, {"y"}, "add");
    m.output("y", T::INT64);
    std::string err = importError(m.save("data.onnx"), dims);
    CHECK_MESSAGE(
        err.find("node 'add' (Add): add reads the shape value [seq] (computed by 'gather') as "
                 "data") != std::string::npos,
        err);
  }
  SUBCASE("a floating-point value computed from a dim") {
    Onnx m;
    m.input("x", T::FLOAT, {"seq"}).ints("zero", {0}, {});
    m.node("Shape", {"x"}, {"s"}, "shape");
    m.node("Gather", {"s", "zero"}, {"n"}, "gather");
    setInt(m.node("Cast", {"n"}, {"f"}, "cast"), "to", T::FLOAT);
    m.node("Mul", {"x", "f"}, {"y"}, "mul");
    m.output("y", T::FLOAT);
    std::string err = importError(m.save("float.onnx"), dims);
    CHECK_MESSAGE(
        err.find("node 'cast' (Cast): computes a floating-point value from the symbolic dims "
                 "(seq)") != std::string::npos,
        err);
  }
  SUBCASE("a slice of a buffer the range outgrows") {
    Onnx m;
    m.input("x", T::FLOAT, {"seq", "seq"}).bools("mask", {8, 8}, true);
    m.ints("zero", {0}, {1}).ints("one", {1}, {1});
    m.node("Shape", {"x"}, {"s"}, "shape");
    m.node("Slice", {"s", "zero", "one"}, {"n"}, "first");
    m.node("Slice", {"mask", "zero", "n", "zero"}, {"rows"}, "cut");
    m.output("rows", T::BOOL, {"?", "8"});
    std::string err = importError(m.save("cut.onnx"), dims);
    CHECK_MESSAGE(
        err.find("node 'cut' (Slice): slice end seq of axis 0 of bool[8,8] is clamped to the "
                 "axis for some values of the dims only (seq in 1..16)") != std::string::npos,
        err);
    // Within the buffer it is a slice with a symbolic end.
    auto g = importOnnx(m.save("cut.onnx"), ranged({{"seq", 1, 8, 6}}));
    CHECK(g->outputs()[0]->type().str() == "bool[seq,8]");
  }
  SUBCASE("squeezing dims of size 1 when a symbolic dim can be 1") {
    Onnx m(11);
    m.input("x", T::FLOAT, {"seq", "1", "4"});
    m.node("Squeeze", {"x"}, {"y"}, "squeeze");
    m.output("y", T::FLOAT, {"?", "4"});
    std::string err = importError(m.save("squeeze.onnx"), dims);
    CHECK_MESSAGE(err.find("dim 0 (seq) is 1 for some values only (seq in 1..16): give the axes") !=
                      std::string::npos,
                  err);
    auto g = importOnnx(m.save("squeeze.onnx"), ranged({{"seq", 2, 16, 6}}));
    CHECK(g->outputs()[0]->type().str() == "f32[seq,4]");
  }
  SUBCASE("a conversion that fixes a symbolic dim is caught by ONNX's inference elsewhere") {
    // Hardmax builds its one-hot from a constant iota over the axis: at the planning size.
    Onnx m;
    m.input("x", T::FLOAT, {"4", "seq"});
    m.node("Hardmax", {"x"}, {"y"}, "hardmax");
    m.output("y", T::FLOAT);
    std::string err = importError(m.save("hardmax.onnx"), dims);
    CHECK_MESSAGE(err.find("node 'hardmax' (Hardmax): result 'y' is f32[4,6], which is [4,6] at "
                           "seq = 16, but ONNX shape inference gives [4,16] there: this "
                           "conversion does not follow the symbolic dims") != std::string::npos,
                  err);
  }
}
