// Values on a quantization grid (issue 54): a QDQ model (ONNX Runtime's static quantizer, and
// the exporters that write fake-quantized graphs) wraps every op in dequantize -> op ->
// quantize, the ops that only move values too: the Reshape / Transpose / Slice of a channel
// shuffle, a MaxPool, the heads' reshapes of an attention block, a Concat of equally scaled
// inputs. Such an op's result lies on its input's grid (integers times one scale), so the
// quantize -> dequantize after it, with that scale and zero point, gives back what it was given.
//
// Why here, at import: the dequantized record (ImportEnv::dequantized) is what lets a Conv or a
// MatMul compute on the integers; an op that moves values on a grid is converted on the integers
// (its data inputs rebound to their records' integers), its results scaled after and recorded
// in turn, and a quantize onto the grid its input already lies on is recorded (ImportEnv::onGrid)
// so the dequantize reading it returns that input. The pair then costs nothing (each was a
// fake-quantize kernel over the whole tensor), the layout ops between fold into their readers as
// in an fp32 model, and the product after them still reads integers.
//
// Exact, bit for bit: moving the integers and scaling after gives the scaled integers moved (a
// positive scale keeps the order, so max, min and ReLU commute with it), and an f32 n*s divided
// by s rounds back to n for |n| <= 255, so the pair returns the very f32 value it was given.
#include "frontend/onnx_ops_internal.h"

#include "support/diagnostics.h"

#include <optional>
#include <set>

namespace aicf {

namespace {

// Input i's value when it is a one-element constant; nullopt otherwise.
std::optional<double> constScalar(const ConvertCtx &c, size_t i) {
  const Tensor *t = c.hasInput(i) ? c.constInput(i) : nullptr;
  if (!t || t->numel() != 1)
    return std::nullopt;
  return t->getDouble(0);
}

// A zero point's value: 0 when absent, nullopt when not a one-element constant.
std::optional<double> zeroPointValue(const ConvertCtx &c, size_t i) {
  return c.hasInput(i) ? constScalar(c, i) : std::optional<double>(0.0);
}

// The inputs of node `c` that carry its data, when it only moves values (or takes a max, min
// or ReLU of them) so that values on a grid stay on it; empty otherwise.
std::vector<size_t> gridDataInputs(const ConvertCtx &c) {
  const std::string &op = c.opType();
  if (op == "Concat") {
    std::vector<size_t> all;
    for (size_t i = 0; i < c.numInputs(); ++i)
      if (c.hasInput(i))
        all.push_back(i);
    return all;
  }
  static const std::set<std::string, std::less<>> kMoves = {
      "DepthToSpace", "Expand",    "Flatten", "Gather",    "GlobalMaxPool", "Identity",
      "ReduceMax",    "ReduceMin", "Relu",    "Reshape",   "Slice",         "SpaceToDepth",
      "Split",        "Squeeze",   "Tile",    "Transpose", "Unsqueeze"};
  if (kMoves.count(op))
    return {0};
  // Max pooling pads with -inf, not a value of the grid; its indices are no values at all.
  if (op == "MaxPool")
    return c.numOutputs() > 1 && c.outputUsed(1) ? std::vector<size_t>{} : std::vector<size_t>{0};
  // Nearest-neighbour resizing copies values; the other modes interpolate.
  if (op == "Resize" || op == "Upsample")
    return c.attrStr("mode", "nearest") == "nearest" ? std::vector<size_t>{0}
                                                     : std::vector<size_t>{};
  // Constant padding with 0 (zero is on every grid: the zero point's integer).
  if (op == "Pad") {
    if (c.attrStr("mode", "constant") != "constant")
      return {};
    std::optional<double> value =
        c.opset() < 11 ? std::optional<double>(c.attrFloat("value", 0.0))
                       : (c.hasInput(2) ? constScalar(c, 2) : std::optional<double>(0.0));
    return value && *value == 0.0 ? std::vector<size_t>{0} : std::vector<size_t>{};
  }
  return {};
}

} // namespace

QuantGridScope::QuantGridScope(ConvertCtx &c) : env_(c.env()) {
  std::vector<size_t> data = gridDataInputs(c);
  if (data.empty())
    return;
  const ImportEnv::Dequantized *first = nullptr;
  for (size_t i : data) {
    auto it = env_.dequantized.find(c.input(i));
    if (it == env_.dequantized.end())
      return;
    const ImportEnv::Dequantized &d = it->second;
    if (d.axis != -1 || d.offset < 0 || !(d.scaleValue > 0) || c.type(i).dtype != DType::F32)
      return;
    if (first && (d.scaleValue != first->scaleValue || d.offset != first->offset))
      return;
    first = &d;
  }
  grid_ = *first;
  for (size_t i : data) {
    const std::string &name = c.inputName(i);
    if (rebound_.count(name))
      continue; // a Concat of one value twice
    rebound_[name] = c.input(i);
    env_.values[name] = env_.dequantized.at(c.input(i)).integers;
  }
}

QuantGridScope::~QuantGridScope() {
  for (const auto &[name, v] : rebound_)
    env_.values[name] = v;
}

void QuantGridScope::finish(ConvertCtx &c) {
  if (rebound_.empty())
    return;
  for (size_t k = 0; k < c.numOutputs(); ++k) {
    if (!c.outputSet(k))
      continue;
    Value *ints = c.output(k);
    if (ints->type().dtype != DType::F32)
      continue;
    Value *y = c.emit(Op::Mul, {ints, grid_.scale});
    c.setOutput(k, y);
    ImportEnv::Dequantized d = grid_;
    d.integers = ints;
    env_.dequantized[y] = d;
  }
}

} // namespace aicf

namespace aicf::onnx_ops {

// A QuantizeLinear of x onto the grid x already lies on (x dequantized per tensor with this
// scale, and this zero point in an 8-bit type putting x's integers where they were): its
// integers are x's shifted by the zero point, computed without a division or rounding, and the
// DequantizeLinear reading them with the same scale and zero point returns x itself.
Value *quantizeOnGrid(ConvertCtx &c, Value *x, DType to) {
  auto it = c.env().dequantized.find(x);
  if (it == c.env().dequantized.end() || c.attrInt("block_size", 0) != 0)
    return nullptr;
  const ImportEnv::Dequantized &d = it->second;
  std::optional<double> scale = constScalar(c, 1), zp = zeroPointValue(c, 2);
  if (d.axis != -1 || d.offset < 0 || !(d.scaleValue > 0) || !scale || *scale != d.scaleValue ||
      !zp || x->type().dtype != DType::F32 || c.type(1).dtype != DType::F32)
    return nullptr;
  // 8-bit results only (the offset is defined for them): the zero point puts the integers
  // where x's record has them.
  if (to != DType::U8 && to != DType::I8)
    return nullptr;
  double lo = to == DType::U8 ? 0.0 : -128.0;
  if (*zp - lo != static_cast<double>(d.offset))
    return nullptr;
  Value *q = *zp == 0 ? d.integers : c.emit(Op::Add, {d.integers, c.scalar(DType::F32, *zp)});
  Value *out = c.castTo(q, to);
  c.env().quantizedAsF32[out] = q;
  c.env().onGrid[out] = {x, *scale, *zp};
  return out;
}

Value *dequantizeOnGrid(ConvertCtx &c) {
  auto it = c.env().onGrid.find(c.input(0));
  if (it == c.env().onGrid.end() || c.attrInt("block_size", 0) != 0 ||
      c.type(1).dtype != DType::F32 || c.hasAttr("output_dtype"))
    return nullptr;
  std::optional<double> scale = constScalar(c, 1), zp = zeroPointValue(c, 2);
  if (!scale || *scale != it->second.scale || !zp || *zp != it->second.zeroPoint)
    return nullptr;
  return it->second.source;
}

} // namespace aicf::onnx_ops
