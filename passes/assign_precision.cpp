// assign-precision (aicfc --precision tf32 | fp16 | bf16; ir/precision.h): marks the products a
// GPU plan runs on tensor cores and stores their weights in the precision's type.
//   * matmul, gemm, conv with one group (the tiled contraction's implicit GEMM) and attention
//     get precision = p: their recipes stage the operands in p and accumulate in f32;
//   * their f32 constant B operands (matmul's and gemm's B, conv's w) become weights of p's
//     storage type (f16 / bf16), rounded to nearest even once, here: weights.bin holds half the
//     bytes, and the kernels read exactly what they would have rounded (tf32 keeps f32 weights:
//     its rounding happens as the fragments are loaded);
//   * everything else stays f32: norm statistics, softmax, reductions, elementwise ops, and a
//     contraction's bias and epilogue operands (added to the f32 accumulator). Grouped and
//     depthwise convs (the direct recipe, no matrix product to give the tensor cores) too.
// Why a pass and an attribute: the choice is per node and visible in the IR (--print-ir-after);
// the interpreter computes a marked node as written (its operands widened); recipes read it.
// Host plans (bf16 only): the products whose weight pack-weights packs in column panels
// (passes/pack_weights.h) - matmul, gemm, and dense convs on the channel-blocked layout - the
// weight stored in bf16 and packed in k pairs for the bf16 micro-kernel (vdpbf16ps). Their A
// is rounded to bf16 as the micro-kernel reads it; everything else stays f32, as on GPUs (a
// grouped or depthwise conv, a conv on a plain input with K under 64, a product with an
// activation as B).
// Under fp32 on a host whose -march has AVX512-BF16 (PassContext::hostBf16): the packed-weight
// products marked integer_operands (a quantized model's convs on the integers,
// frontend/onnx_ops_quant.cpp) whose weight holds integers of magnitude <= 256, checked here:
// bf16 holds both operands exactly and every product is exact in f32, so the results are the
// fp32 plan's, at the bf16 micro-kernel's rate. On a host whose -march has AVX512-VNNI
// (PassContext::hostVnni, under fp32 or bf16), such a product whose x_offset is known and whose
// weight holds integers in [-128, 127] goes on the int8 micro-kernel instead (precision int8,
// the weight stored as int8: vpdpbusd multiplies x + x_offset as uint8 by it and sums in i32,
// exactly, at twice the bf16 kernel's products per instruction); its K is bounded so that no
// i32 sum can overflow.
// Only the compile driver runs it (stage assign-precision, driver/compile.cpp), after the graph
// rewrites that build new contractions from old ones (merge-siblings, split-chains); the later
// ones (choose-attention, split-k) carry the attribute over.
#include "passes/passes.h"

#include "ir/graph.h"
#include "ir/precision.h"
#include "passes/pack_weights.h"

#include <cmath>
#include <map>

namespace aicf {

namespace {

bool productNode(const Node &n) {
  switch (n.op()) {
  case Op::MatMul:
  case Op::Gemm:
  case Op::Attention: return true;
  case Op::Conv: return n.i("group") == 1;
  default: return false;
  }
}

// A product whose weight pack-weights packs and whose A the micro-kernel packs in bf16 pairs or
// int8 quads per K chunk. A conv over a plain input (a stem) reads A in blocks of a kernel row's
// taps, packed across blocks (aicf_pack_groups); with K under 64 the packing and the
// micro-kernel's calls outweigh the dot product's rate and it stays f32 (squeezenet's 3 x 3
// stem on 3 channels, K = 27: 0.57-0.61 ms in f32, 0.68-0.89 in bf16; resnet18's 7 x 7 one,
// K = 147: 2.5 -> 1.9 ms in bf16, -> 1.3-1.8 in int8; one AMD EPYC Zen 4 core). (The cost
// model does not price the packing yet; when it does, this becomes its choice.)
bool groupedProduct(const Node &n) {
  bool plainConv = n.op() == Op::BlockedConv && n.i("blocked_input") == 0;
  return packedWeightProduct(n) && !(plainConv && n.operand(1)->type().shape[0] < 64);
}

// A host plan's bf16 products: f32 A times a packed f32 weight.
bool hostProduct(const Node &n) {
  return groupedProduct(n) && n.operand(0)->type().dtype == DType::F32 &&
         n.operand(1)->type().dtype == DType::F32;
}

// A quantized model's product on the integers (the frontend's integer_operands) whose weight
// pack-weights packs: a blocked conv, a matmul or a gemm.
bool integerProduct(const Node &n) {
  return (n.op() == Op::BlockedConv || n.op() == Op::MatMul || n.op() == Op::Gemm) &&
         groupedProduct(n) && n.i("integer_operands") != 0;
}

// A product whose operands bf16 holds exactly: marked integer_operands (x integers of magnitude
// <= 256, the frontend's promise) and its weight integers of magnitude <= 256.
bool exactInBf16(const Node &n) {
  if (!integerProduct(n))
    return false;
  const Value *w = n.operand(1);
  if (!w->isWeight() || !w->hasData())
    return false;
  const Tensor &d = *w->data();
  for (int64_t i = 0; i < d.numel(); ++i) {
    double v = d.getDouble(i);
    if (v != std::nearbyint(v) || std::fabs(v) > 256)
      return false;
  }
  return true;
}

// A product the int8 micro-kernel computes exactly: marked integer_operands with x_offset in
// [0, 255] (x + x_offset fits uint8), its weight integers in [-128, 127], and K short enough
// that a sum of K products of 255 * 128 fits an i32.
bool exactInInt8(const Node &n) {
  if (!integerProduct(n) || n.i("x_offset") < 0 || n.i("x_offset") > 255)
    return false;
  const Value *w = n.operand(1);
  if (!w->isWeight() || !w->hasData() || w->type().rank() != 2)
    return false;
  // K: the weight's rows ([K, N]; a gemm's transposed B is [N, K]).
  int64_t K = n.op() == Op::Gemm && n.i("transB") != 0 ? w->type().shape[1] : w->type().shape[0];
  if (K > (int64_t(1) << 31) / (255 * 128))
    return false;
  const Tensor &d = *w->data();
  for (int64_t i = 0; i < d.numel(); ++i) {
    double v = d.getDouble(i);
    if (v != std::nearbyint(v) || v < -128 || v > 127)
      return false;
  }
  return true;
}

// The operand a weight of the node's own product sits at (its B), or none.
std::optional<size_t> weightOperand(const Node &n) {
  if (n.op() == Op::MatMul || n.op() == Op::Gemm || n.op() == Op::Conv || n.op() == Op::BlockedConv)
    return 1;
  return std::nullopt;
}

class AssignPrecision : public NamedPass<PassId::AssignPrecision> {
public:
  bool run(Graph &g, PassContext &ctx) override {
    const bool host = !ctx.target.gpu();
    // fp32 on an int8- or bf16-capable host: only the products exact there.
    const bool exactOnly = !tensorCores(ctx.precision);
    if (exactOnly && !(host && (ctx.hostBf16 || ctx.hostVnni)))
      return false;
    std::map<std::pair<const Value *, Precision>, Value *> converted;
    bool changed = false;
    for (Node *n : g.nodes()) {
      if (!(host ? hostProduct(*n) : productNode(*n)))
        continue;
      Precision p = ctx.precision;
      if (host && ctx.hostVnni && exactInInt8(*n))
        p = Precision::I8;
      else if (exactOnly && ctx.hostBf16 && exactInBf16(*n))
        p = Precision::BF16;
      else if (exactOnly)
        continue;
      if (nodePrecision(*n) == p)
        continue;
      const DType storage = precisionStorage(p);
      n->attrs["precision"] = std::string(precisionName(p));
      changed = true;
      std::optional<size_t> wi = weightOperand(*n);
      if (!wi || storage == DType::F32 || n->operand(0)->type().dtype != DType::F32)
        continue;
      Value *w = n->operand(*wi);
      if (!w->isWeight() || !w->hasData() || w->type().dtype != DType::F32)
        continue;
      auto it = converted.find({w, p});
      if (it == converted.end()) {
        const Tensor &d = *w->data();
        TensorType t = d.type();
        t.dtype = storage;
        auto data = std::make_shared<Tensor>(t);
        for (int64_t i = 0; i < d.numel(); ++i)
          data->setDouble(i, d.getDouble(i)); // rounds to nearest even
        Value *nw = g.addWeight(w->name() + "." + precisionName(p), data);
        nw->loc = w->loc;
        it = converted.emplace(std::make_pair(w, p), nw).first;
      }
      n->setOperand(*wi, it->second);
    }
    if (changed)
      g.removeDeadCode();
    return changed;
  }
};

} // namespace

std::unique_ptr<Pass> createAssignPrecisionPass() {
  return std::make_unique<AssignPrecision>();
}

} // namespace aicf
