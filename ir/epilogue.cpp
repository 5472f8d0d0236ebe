// Contraction epilogue steps (see epilogue.h): the one place that spells, decodes and checks
// the `epilogue` attribute; which ops qualify is read from the registry.
#include "ir/epilogue.h"
#include "ir/infer_sym.h"

#include "support/diagnostics.h"

#include <array>

namespace aicf {

namespace {

// Attribute variants with a spelling of their own.
struct Alias {
  const char *name;
  Op op;
  const char *attr;
  const char *value;
};
constexpr Alias kAliases[] = {{"gelu_tanh", Op::Gelu, "approximate", "tanh"}};

// The alias spelling a step with attributes, or null.
const Alias *aliasOf(const EpilogueStep &s) {
  for (const Alias &a : kAliases)
    if (a.op == s.op && s.attrs.size() == 1 && s.attrs.begin()->first == a.attr &&
        s.attrs.begin()->second == AttrValue(std::string(a.value)))
      return &a;
  return nullptr;
}

// 1 (unary), 2 (binary: acc and the extra operand) or 0 (neither) operands as a step.
int stepArity(const OpInfo &info) {
  if (info.minOperands <= 1 && info.maxOperands == 1)
    return 1;
  if (info.minOperands <= 2 && (info.maxOperands == -1 || info.maxOperands >= 2))
    return 2;
  return 0;
}

bool computeIsEpilogueOp(Op op) {
  const OpInfo &info = opInfo(op);
  int arity = stepArity(info);
  if (!info.has(EW) || !info.has(PURE) || info.numResults != 1 || arity == 0)
    return false;
  for (const AttrSpec &a : info.attrs)
    if (a.required)
      return false;
  // The op's own inference decides whether it maps f32 values to f32 values.
  std::vector<TensorType> operands(static_cast<size_t>(arity), TensorType(DType::F32, {2}));
  AttrMap none;
  try {
    InferCtx ctx(info, operands, none, 1);
    std::vector<TensorType> r = runInfer(info, ctx);
    return r.size() == 1 && r[0] == TensorType(DType::F32, {2});
  } catch (const InferError &) {
    return false;
  }
}

} // namespace

bool isEpilogueOp(Op op) {
  static const std::array<bool, kNumOps> table = [] {
    std::array<bool, kNumOps> t{};
    for (int i = 0; i < kNumOps; ++i)
      t[static_cast<size_t>(i)] = computeIsEpilogueOp(static_cast<Op>(i));
    return t;
  }();
  return table[static_cast<size_t>(op)];
}

bool EpilogueStep::takesOperand() const {
  return stepArity(opInfo(op)) == 2;
}

std::string EpilogueStep::str() const {
  if (attrs.empty())
    return opName(op);
  if (const Alias *a = aliasOf(*this))
    return a->name;
  throw InternalError(cat("epilogue step ", opName(op), " has attributes with no spelling"));
}

std::optional<EpilogueStep> parseEpilogueStep(std::string_view name) {
  for (const Alias &a : kAliases)
    if (name == a.name)
      return EpilogueStep{a.op, {{a.attr, std::string(a.value)}}};
  std::optional<Op> op = opByName(name);
  if (!op || !isEpilogueOp(*op))
    return std::nullopt;
  return EpilogueStep{*op, {}};
}

std::optional<EpilogueStep> epilogueStepOf(const Node &n) {
  if (!isEpilogueOp(n.op()))
    return std::nullopt;
  EpilogueStep step{n.op(), {}};
  for (const auto &[name, value] : n.attrs) {
    const AttrSpec *spec = n.info().findAttr(name);
    if (!spec || spec->required || spec->defaultValue != value)
      step.attrs[name] = value;
  }
  if (step.attrs.empty() || aliasOf(step))
    return step;
  return std::nullopt;
}

std::vector<EpilogueStep> epilogueSteps(const std::vector<std::string> &attr) {
  std::vector<EpilogueStep> steps;
  steps.reserve(attr.size());
  for (const std::string &s : attr) {
    std::optional<EpilogueStep> step = parseEpilogueStep(s);
    if (!step)
      throw InternalError(cat("unknown epilogue step '", s, "'"));
    steps.push_back(std::move(*step));
  }
  return steps;
}

std::vector<EpilogueStep> epilogueSteps(const Node &contraction) {
  return epilogueSteps(contraction.strs("epilogue"));
}

std::vector<std::string> epilogueAttr(const std::vector<EpilogueStep> &steps) {
  std::vector<std::string> out;
  out.reserve(steps.size());
  for (const EpilogueStep &s : steps)
    out.push_back(s.str());
  return out;
}

int epilogueOperandCount(const std::vector<std::string> &epilogue) {
  int n = 0;
  for (const std::string &s : epilogue) {
    std::optional<EpilogueStep> step = parseEpilogueStep(s);
    n += step && step->takesOperand() ? 1 : 0;
  }
  return n;
}

StepNode stepNode(const EpilogueStep &step, const std::vector<int64_t> &accShape,
                  const std::vector<int64_t> &operandShape) {
  StepNode sn;
  sn.graph = std::make_unique<Graph>("epilogue_step");
  std::vector<Value *> operands = {sn.graph->addInput("acc", TensorType(DType::F32, accShape))};
  if (step.takesOperand())
    operands.push_back(sn.graph->addInput("operand", TensorType(DType::F32, operandShape)));
  Node *n = sn.graph->createNode(step.op, std::move(operands), step.attrs,
                                 Location(cat("epilogue step ", step.str())));
  AICF_CHECK(n->result()->type() == TensorType(DType::F32, accShape), "epilogue step ", step.str(),
             " gives ", n->result()->type().str(), " for f32", shapeStr(accShape));
  sn.graph->setOutputs({n->result()});
  sn.node = n;
  return sn;
}

} // namespace aicf
