// block-channels: a host plan's convolution chains on the channel-blocked layout
// [N, C/16, H, W, 16] (issue 18), the layout ONNX Runtime's MLAS and oneDNN run CNNs in.
//
// Why: in NCHW a pointwise conv over a 7x7 map is a GEMM with 49 columns, a depthwise conv
// vectorises over a 7- or 14-wide row, and either leaves most of a 16-lane vector idle. With 16
// channels in the innermost dim every conv vectorises across channels whatever the spatial size:
// a dense conv is a GEMM with pixels as rows and channels as 16-wide columns (the input's lanes
// are A's k), a depthwise conv and a global pool are 16-lane vector loops.
//
// The rewrite, in graph order (ORT's NCHWc transformer has the same shape):
//   * a 2-D f32 conv with constant weights, group 1, depthwise or grouped as below, becomes
//     blocked_conv (its weight re-laid at compile time, zero rows and columns for the padded
//     lanes; the bias, the epilogue and its operands carried over, per-channel constants
//     re-laid to [1, CB, 1, 1, 16]);
//     its input is the blocked form of x when there is one, x itself for a dense conv with at
//     most 8 channels (the image: padding 3 channels to 16 would waste 5x the work; the conv
//     reads its plain rows, lower/contraction_conv_specs.cpp), else x reordered (to_blocked) when
//     its channels are a multiple of 16 (otherwise the conv stays NCHW: the pad kernel the reorder
//     would need costs more than the layout saves, ShuffleNet's branches after each shuffle);
//     a grouped conv (1 < group < C, group width gw = C / group) runs as a grouped blocked_conv
//     on a blocked input: groups of whole blocks (gw and M / group multiples of 16: RegNetX,
//     ResNeXt's wider stages) as its groups, exactly; groups of 8 or 4 channels (RegNetY,
//     ResNeXt-50's first stage) as one group per block whose 16 x 16 weight is block-diagonal
//     (16 / gw times the multiply-adds, vectorised; kMaxGroupWaste); other widths stay NCHW;
//   * an elementwise op whose operands are blocked values, scalars or per-channel constants
//     runs on the blocked values, when the op keeps finite values finite (the padded lanes stay
//     finite, which the zero weights of the next conv need: 0 * inf is NaN); a channels-last
//     value permuted back to NCHW counts as blocked (its blocked view reads 16 contiguous
//     channels), and alone makes the op a candidate when every reader of the result runs on
//     blocks (ConvNeXt's layer scale and residual add before the next depthwise conv);
//   * a max / average pool of a blocked value pools its blocks (blocked = 1); a global average
//     / max pool is a reduce_mean / reduce_max over the spatial axes, and a reduce_mean / sum /
//     max / min over axes [2, 3] reduces the blocks too (its result read back); a channel
//     concat of blocked values whose channels are multiples of 16 is a concat of the blocks;
//   * a nearest or linear resize of a blocked value over H and W resizes the blocks;
//   * a depth-to-space in DCR order (reshape, transpose [0, 3, 4, 1, 5, 2], reshape: ONNX's DCR
//     mode, and conv-transpose-as-conv's pixel shuffle) with 16-channel multiples per phase
//     shuffles whole blocks, and a unit-step slice over H and W (a transposed conv's crop)
//     takes the same window of the blocks, so a decoder stays blocked between its phase convs.
// Every other reader of a converted value reads it back through from_blocked (a transpose,
// reshape and slice: layout ops that fold into the reader, lower/fusion.cpp rule 0); the
// original nodes are then dead. Reorders into the layout (to_blocked: pad, reshape, transpose)
// are written once by their producer or a data-movement kernel.
//
// The interpreter runs blocked_conv by its definition, so the rewritten graph is checked like
// any other (tests/unit/test_block_channels.cpp compares it with the original). Only the
// compile driver runs this pass, for host plans (driver/compile.cpp, stage block-channels);
// aicfc --no-block-channels turns it off.
#include "passes/explain.h"
#include "passes/passes.h"
#include "support/diagnostics.h"

#include "ir/epilogue.h"
#include "ir/graph.h"
#include "support/int_math.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace aicf {

namespace {

constexpr int64_t kLanes = 16;
// Groups narrower than a block run block-diagonal, 16 / width times their multiply-adds, when
// that is at most this (widths 8 and 4: RegNetY's 8-channel groups, ResNeXt-50's first stage).
// The NCHW form they replace ran 2-4x slower than the cost model's rate and needs conversions
// on both sides; width 2 (8x the work) stays NCHW.
constexpr int64_t kMaxGroupWaste = 4;

// Elementwise ops that map finite values to finite values (so padded lanes stay harmless).
bool keepsFinite(Op op) {
  switch (op) {
  case Op::Identity:
  case Op::Neg:
  case Op::Abs:
  case Op::Relu:
  case Op::Clip:
  case Op::Round: // (a quantized model's fake-quantize steps: round, add, clip, sub, mul)
  case Op::Floor:
  case Op::Ceil:
  case Op::Sigmoid:
  case Op::HardSigmoid:
  case Op::HardSwish:
  case Op::Silu:
  case Op::Gelu:
  case Op::Tanh:
  case Op::LeakyRelu:
  case Op::Elu:
  case Op::Add:
  case Op::Sub:
  case Op::Mul:
  case Op::Min:
  case Op::Max: return true;
  default: return false;
  }
}

class BlockChannels : public NamedPass<PassId::BlockChannels> {
public:
  bool run(Graph &g, PassContext &ctx) override {
    g_ = &g;
    ctx_ = &ctx;
    blocked_.clear();
    reordered_.clear();
    order_.clear();
    replaced_.clear();
    bool changed = false;
    for (Node *n : g.nodes()) {
      Value *b = nullptr;
      why_.clear();
      if (n->op() == Op::Conv)
        b = convertConv(*n);
      else if (n->op() == Op::GlobalAvgPool || n->op() == Op::GlobalMaxPool)
        b = convertGlobalPool(*n);
      else if (n->op() == Op::MaxPool || n->op() == Op::AvgPool)
        b = convertPool(*n);
      else if (n->op() == Op::Resize)
        b = convertResize(*n);
      else if (spatialReduction(*n)) {
        replaceSpatialReduction(*n);
        replaced_.insert(n);
        changed = true;
      } else if (n->op() == Op::Concat)
        b = convertConcat(*n);
      else if (n->op() == Op::Reshape)
        b = convertDepthToSpace(*n);
      else if (n->op() == Op::Slice)
        b = convertSpatialSlice(*n);
      else if (n->info().has(EW) && n->numResults() == 1)
        b = convertElementwise(*n);
      recordLayout(*n, b);
      if (!b)
        continue;
      replaced_.insert(n);
      blocked_[n->result()] = {b, n->result()->type().shape[1]};
      order_.push_back(n->result());
      changed = true;
    }
    if (!changed)
      return false;
    // Readers left on the plain layout (and graph outputs) read the blocked values back; the
    // converted nodes then have no readers.
    for (Value *v : order_)
      if (g.hasUses(v)) {
        recordConversion(v, blocked_[v]);
        g.replaceAllUsesWith(v,
                             fromBlocked(blocked_[v].value, blocked_[v].channels, v->def()->loc));
      }
    g.sortTopologically();
    g.removeDeadCode();
    return true;
  }

private:
  struct Blocked {
    Value *value = nullptr; // [N, CB, H, W, 16]
    int64_t channels = 0;   // C of the plain value
  };
  Graph *g_ = nullptr;
  std::map<Value *, Blocked> blocked_;
  std::vector<Value *> order_; // the keys of blocked_ in graph order (deterministic output)
  std::map<Value *, Value *> reordered_; // plain value -> its to_blocked
  std::set<const Node *> replaced_;      // the nodes rewritten onto blocks (dead once read back)
  PassContext *ctx_ = nullptr;
  std::string why_; // why the last convert* left its node on the plain layout ("": not a candidate)

  Value *reject(const char *why) {
    why_ = why;
    return nullptr;
  }

  // Why a converted node runs on blocks (plan.yaml's `layouts`).
  std::string blockedReason(const Node &n, const Value *blocked) const {
    const Node *d = blocked->def();
    if (d && d->op() == Op::BlockedConv) {
      if (d->i("blocked_input") == 0)
        return "reads its plain input's rows (at most 8 channels: the image)";
      return blocked_.count(n.operand(0)) ? "its input is blocked"
                                          : "its input reordered into blocks (to_blocked)";
    }
    if (n.op() == Op::Concat)
      return "its inputs are blocked, whole blocks each";
    if (n.info().has(EW))
      return "its operands are blocked, scalars or per-channel constants";
    return "its input is blocked";
  }

  // The layout chosen for a candidate's result, and why: plan.yaml's `layouts` and --explain.
  void recordLayout(const Node &n, const Value *blocked) {
    if (!ctx_ || (!blocked && why_.empty()))
      return;
    if (ctx_->layouts)
      ctx_->layouts->push_back(LayoutChoice{n.where(), n.name(), blocked ? "blocked" : "nchw",
                                            (blocked ? blocked : n.result())->type().str(),
                                            blocked ? blockedReason(n, blocked) : why_, 0});
    if (!ctx_->explain)
      return;
    RewriteRecord rec;
    rec.pass = name();
    rec.pattern = cat("layout of ", n.name(), " ", n.result()->type().str());
    rec.origins = n.loc.origins;
    rec.applied = blocked != nullptr;
    if (blocked)
      rec.result = cat("blocked ", blocked->type().str());
    else
      rec.note = cat("plain NCHW: ", why_);
    ctx_->explain->add(std::move(rec));
  }
  // A blocked value read back on the plain layout, by whom, at what price: plan.yaml's
  // `layouts` and --explain.
  void recordConversion(const Value *plain, const Blocked &b) {
    if (!ctx_ || (!ctx_->explain && !ctx_->layouts))
      return;
    std::string readers; // the readers that stay (a converted node is dead code by now)
    for (const Node *u : g_->users(plain))
      if (!replaced_.count(u))
        readers += cat(readers.empty() ? "" : ", ", u->name());
    if (g_->isOutput(plain))
      readers += cat(readers.empty() ? "" : ", ", "the graph output");
    if (readers.empty())
      return;
    int64_t bytes = b.value->type().numel() * 4 + plain->type().numel() * 4;
    std::string readWhy =
        cat(readers, ", which read", readers.find(',') == std::string::npos ? "s" : "",
            " the plain layout");
    if (ctx_->layouts)
      ctx_->layouts->push_back(LayoutChoice{plain->def() ? plain->def()->where() : plain->name(),
                                            plain->def() ? plain->def()->name() : "value",
                                            "nchw (converted)", plain->type().str(),
                                            cat("for ", readWhy), bytes});
    if (!ctx_->explain)
      return;
    RewriteRecord rec;
    rec.pass = name();
    rec.pattern = cat("conversion of ", plain->def() ? plain->def()->name() : "value", " ",
                      plain->type().str(), " back to NCHW");
    rec.origins = plain->def() ? plain->def()->loc.origins : std::vector<std::string>{};
    rec.applied = true;
    rec.result = cat("from_blocked (", bytes, " bytes moved) for ", readWhy);
    ctx_->explain->add(std::move(rec));
  }

  static bool plain4d(const Value *v) {
    return v->type().dtype == DType::F32 && v->type().isStatic() && v->type().rank() == 4;
  }
  static int64_t blocks(int64_t c) { return ceilDiv(c, kLanes); }

  // The blocked_conv groups of an ONNX conv of C -> M channels in G groups (not depthwise): 1
  // for a dense conv; G when every group is whole blocks (C / G and M / G multiples of 16: an
  // exact split, RegNetX's and ResNeXt's wider groups); one per block when 16 / (C / G) groups
  // of equal widths fill each block (the weights block-diagonal: kMaxGroupWaste limits the work
  // that adds, 16 / width times the conv's); 0 otherwise (the conv stays NCHW).
  static int64_t blockGroups(int64_t C, int64_t M, int64_t G) {
    if (G == 1)
      return 1;
    int64_t gw = C / G;
    if (gw % kLanes == 0 && (M / G) % kLanes == 0)
      return G;
    if (M == C && kLanes % gw == 0 && kLanes / gw <= kMaxGroupWaste)
      return blocks(C);
    return 0;
  }

  Value *addWeight(const Value *like, const std::string &suffix, TensorType t,
                   const std::function<void(float *)> &fill) {
    auto data = std::make_shared<Tensor>(std::move(t));
    float *d = data->data<float>();
    std::fill(d, d + data->type().numel(), 0.0f);
    fill(d);
    Value *w = g_->addWeight(like->name() + suffix, data);
    w->loc = like->loc;
    return w;
  }

  // x [N, C, H, W] as [N, CB, H, W, 16], padded lanes zero.
  Value *toBlocked(Value *x, const Location &loc) {
    if (auto it = blocked_.find(x); it != blocked_.end())
      return it->second.value;
    Value *&r = reordered_[x];
    if (r)
      return r;
    const std::vector<int64_t> &s = x->type().shape;
    int64_t cb = blocks(s[1]);
    Value *v = x;
    if (s[1] % kLanes != 0)
      v = g_->createNode(Op::Pad, {v},
                         {{"pads", std::vector<int64_t>{0, 0, 0, 0, 0, cb * kLanes - s[1], 0, 0}}},
                         loc)
              ->result();
    v = g_->createNode(Op::Reshape, {v},
                       reshapeAttrs(*g_, *v, std::vector<int64_t>{s[0], cb, kLanes, s[2], s[3]}),
                       loc)
            ->result();
    r = g_->createNode(Op::Transpose, {v}, {{"perm", std::vector<int64_t>{0, 1, 3, 4, 2}}}, loc)
            ->result();
    return r;
  }

  // The plain [N, C, H, W] value of blocked `b`.
  Value *fromBlocked(Value *b, int64_t channels, const Location &loc) {
    const std::vector<int64_t> &s = b->type().shape;
    Value *v =
        g_->createNode(Op::Transpose, {b}, {{"perm", std::vector<int64_t>{0, 1, 4, 2, 3}}}, loc)
            ->result();
    v = g_->createNode(Op::Reshape, {v},
                       reshapeAttrs(*g_, *v, std::vector<int64_t>{s[0], s[1] * kLanes, s[2], s[3]}),
                       loc)
            ->result();
    if (channels != s[1] * kLanes)
      v = g_->createNode(Op::Slice, {v},
                         {{"starts", std::vector<int64_t>{0}},
                          {"ends", std::vector<int64_t>{channels}},
                          {"axes", std::vector<int64_t>{1}},
                          {"steps", std::vector<int64_t>{1}}},
                         loc)
              ->result();
    return v;
  }

  // A channels-last value seen as NCHW: transpose(y, perm [0, 3, 1, 2]) of y [N, H, W, C] with
  // C a multiple of 16 (a ConvNeXt block's permute back after its Linear layers, a residual
  // kept NHWC by an exporter from a channels-last framework). Its blocked form reads y's 16
  // contiguous channels per pixel, a vector load per lane group and no padding, so it is as
  // good as a blocked value to an elementwise op (the transpose folds into the reads, rule 0).
  static bool channelsLast(const Value *v) {
    const Node *d = v->def();
    if (!d || d->op() != Op::Transpose || d->ints("perm") != std::vector<int64_t>{0, 3, 1, 2})
      return false;
    const Value *y = d->operand(0);
    return plain4d(y) && y->type().shape[3] % kLanes == 0;
  }

  // How an operand of an op on blocked values whose result is `out` ([N, C, H, W]) is read:
  // as its blocked form, as a channels-last value's blocked view, as itself (a scalar), as a
  // per-channel constant re-laid, or not at all.
  enum class Operand { None, Blocked, ChannelsLast, Scalar, PerChannel };
  Operand operandKind(const Value *v, const std::vector<int64_t> &out) const {
    if (auto it = blocked_.find(const_cast<Value *>(v)); it != blocked_.end())
      return it->second.channels == out[1] ? Operand::Blocked : Operand::None;
    if (channelsLast(v))
      return v->type().shape[1] == out[1] ? Operand::ChannelsLast : Operand::None;
    const TensorType &t = v->type();
    if (!t.isStatic() || t.dtype != DType::F32)
      return Operand::None;
    if (t.numel() == 1 && t.rank() <= 4)
      return Operand::Scalar;
    // Per channel: [C, 1, 1] or [1, C, 1, 1] (any leading ones), a constant.
    std::vector<int64_t> s = t.shape;
    while (s.size() < 4)
      s.insert(s.begin(), 1);
    if (!v->isWeight() || !v->hasData() || t.rank() < 3 ||
        s != std::vector<int64_t>{1, out[1], 1, 1})
      return Operand::None;
    return Operand::PerChannel;
  }
  // That operand (operandKind must not be None).
  Value *blockedOperand(Value *v, const std::vector<int64_t> &out) {
    Operand kind = operandKind(v, out);
    if (kind == Operand::Blocked)
      return blocked_.at(v).value;
    if (kind == Operand::ChannelsLast)
      return toBlocked(v, v->def()->loc);
    if (kind == Operand::Scalar)
      return v;
    int64_t cb = blocks(out[1]);
    const float *src = v->data()->data<float>();
    return addWeight(v, ".blocked", TensorType(DType::F32, {1, cb, 1, 1, kLanes}),
                     [&](float *d) { std::copy(src, src + out[1], d); });
  }

  Value *convertConv(Node &n) {
    Value *x = n.operand(0), *w = n.operand(1);
    if (!plain4d(x) || !plain4d(n.result()) || !w->isWeight() || !w->hasData() ||
        w->type().dtype != DType::F32)
      return reject("not a 2-D f32 conv with a constant weight");
    const std::vector<int64_t> &xs = x->type().shape, &ws = w->type().shape,
                               &os = n.result()->type().shape;
    int64_t C = xs[1], M = os[1], G = n.i("group"), KH = ws[2], KW = ws[3];
    bool depthwise = G > 1 && G == C && M == C;
    // A grouped conv (1 < G < C): groups of whole channel blocks run as blocked_conv groups;
    // groups narrower than a block, as one group per block with block-diagonal weights.
    int64_t groups = blockGroups(C, M, G);
    if (G != 1 && !depthwise && groups == 0)
      return reject(
          "a grouped conv whose groups are neither whole channel blocks nor 8 or 4 channels "
          "of equal width in and out (block-diagonal: at most 4x the work)");
    std::vector<std::string> epi = n.strs("epilogue");
    for (const EpilogueStep &s : epilogueSteps(epi))
      if (!keepsFinite(s.op))
        return reject("its epilogue has a step that may make a padded lane non-finite");
    size_t firstExtra = n.numOperands() - static_cast<size_t>(epilogueOperandCount(epi));
    bool hasBias = firstExtra == 3;
    if (hasBias && (!n.operand(2)->isWeight() || !n.operand(2)->hasData()))
      return reject("its bias is computed at run time");
    // A plain value enters the layout through to_blocked; one whose channels are no multiple
    // of 16 would need a pad kernel there (ShuffleNet's 58- and 116-channel branches after
    // each channel shuffle: 1.1x ORT in NCHW, 1.24x blocked), so such a conv stays NCHW --
    // unless its products are 8-bit integers on a host with VNNI (a QDQ model's conv on the
    // integers, integer_operands with a known x_offset): only the blocked orientation (pixels
    // as rows, the packed weight as B) runs on the int8 micro-kernel, at about 2.8x the f32
    // rate, and that pays for the pad kernel (ShuffleNet's QDQ model: its narrow 1 x 1 convs
    // were f32 NCHW products, 3.8 of its 5.9 ms).
    bool int8Products = ctx_->hostVnni && n.i("integer_operands") == 1 && n.i("x_offset") >= 0;
    auto reorderable = [&](const Value *v) {
      return blocked_.count(const_cast<Value *>(v)) || v->type().shape[1] % kLanes == 0 ||
             int8Products;
    };
    for (size_t i = firstExtra; i < n.numOperands(); ++i) {
      const Value *e = n.operand(i);
      if (operandKind(e, os) == Operand::None &&
          !(plain4d(e) && e->type().shape == os && reorderable(e)))
        return reject("an epilogue operand has no blocked form");
    }
    bool blockedIn = depthwise || groups > 1 || blocked_.count(x) || C > 8;
    if (blockedIn && !reorderable(x))
      return reject("its plain input has channels that are no multiple of 16 (a pad kernel would "
                    "cost more than the layout saves)");
    // Decided: from here on the graph changes.
    std::vector<Value *> extras;
    for (size_t i = firstExtra; i < n.numOperands(); ++i) {
      Value *e = n.operand(i);
      extras.push_back(operandKind(e, os) != Operand::None ? blockedOperand(e, os)
                                                           : toBlocked(e, n.loc));
    }
    Value *xin = blockedIn ? toBlocked(x, n.loc) : x;
    int64_t CB = blocks(C), OB = blocks(M);
    const float *src = w->data()->data<float>();
    Value *wb;
    if (depthwise) // w [C, 1, KH, KW] -> [CB, KH, KW, 16]
      wb = addWeight(w, ".blocked", TensorType(DType::F32, {CB, KH, KW, kLanes}), [&](float *d) {
        for (int64_t c = 0; c < C; ++c)
          for (int64_t t = 0; t < KH * KW; ++t)
            d[((c / kLanes) * KH * KW + t) * kLanes + c % kLanes] = src[c * KH * KW + t];
      });
    else {
      // w [M, C / G, KH, KW] -> [K, 16 OB], k over (block, kh, kw, lane) or (c, kh, kw); grouped,
      // [groups Kg, 16 OB / groups], output channel m's group q = m / (16 OB / groups) reading
      // rows q Kg + k, k over its own input blocks (ir/ops.def). The rows and columns of the
      // padded lanes, and of channels in different ONNX groups, stay zero.
      int64_t rows = (blockedIn ? CB * kLanes : C) * KH * KW, cols = OB * kLanes / groups;
      int64_t Kg = rows / groups, CBg = CB / groups, Cg = C / G, Mg = M / G, T = KH * KW;
      wb = addWeight(w, ".blocked", TensorType(DType::F32, {rows, cols}), [&](float *d) {
        for (int64_t m = 0; m < M; ++m) {
          int64_t q = m / cols, col = m % cols;
          for (int64_t ci = 0; ci < Cg; ++ci)
            for (int64_t t = 0; t < T; ++t) {
              int64_t c = (m / Mg) * Cg + ci;
              int64_t k =
                  blockedIn ? ((c / kLanes - q * CBg) * T + t) * kLanes + c % kLanes : c * T + t;
              d[(q * Kg + k) * cols + col] = src[(m * Cg + ci) * T + t];
            }
        }
      });
    }
    std::vector<Value *> ops = {xin, wb};
    if (hasBias) {
      Value *b = n.operand(2);
      const float *bs = b->data()->data<float>();
      ops.push_back(addWeight(b, ".blocked", TensorType(DType::F32, {OB * kLanes}),
                              [&](float *d) { std::copy(bs, bs + M, d); }));
    }
    ops.insert(ops.end(), extras.begin(), extras.end());
    AttrMap attrs = {{"kernel_shape", std::vector<int64_t>{KH, KW}},
                     {"strides", n.ints("strides")},
                     {"pads", n.ints("pads")},
                     {"dilations", n.ints("dilations")},
                     {"depthwise", int64_t(depthwise ? 1 : 0)},
                     {"blocked_input", int64_t(blockedIn ? 1 : 0)},
                     {"epilogue", epi}};
    if (groups > 1)
      attrs["group"] = groups;
    if (n.i("integer_operands") != 0) {
      attrs["integer_operands"] = int64_t(1);
      attrs["x_offset"] = n.i("x_offset");
    }
    Node *bc = g_->createNode(Op::BlockedConv, ops, attrs, n.loc);
    bc->props = n.props;
    bc->certificates = n.certificates;
    return bc->result();
  }

  // x / c with c a constant whose every value is finite and non-zero keeps finite values finite
  // as a multiply by 1 / c does (the hard-swish spelled x * clip(x + 3, 0, 6) / 6 ends in one).
  static bool divisionByConstant(const Node &n) {
    if (n.op() != Op::Div)
      return false;
    const Value *c = n.operand(1);
    if (!c->isWeight() || !c->hasData() || c->type().dtype != DType::F32)
      return false;
    const float *d = c->data()->data<float>();
    return std::all_of(d, d + c->type().numel(),
                       [](float v) { return std::isfinite(v) && v != 0.0f; });
  }

  // (A candidate, recorded for --explain, when it reads a blocked value, or a channels-last one
  // and every reader of its result runs on blocks: ConvNeXt's layer scale and residual add
  // between its permute back and the next depthwise conv.)
  Value *convertElementwise(Node &n) {
    bool readsBlocked = false, readsChannelsLast = false;
    for (const Value *v : n.operands()) {
      readsBlocked = readsBlocked || blocked_.count(const_cast<Value *>(v));
      readsChannelsLast = readsChannelsLast || channelsLast(v);
    }
    if (!readsBlocked && !(readsChannelsLast && readersKeepLayout(n.result())))
      return nullptr;
    if ((!keepsFinite(n.op()) && !divisionByConstant(n)) || !plain4d(n.result()))
      return reject("the op may make a padded lane non-finite, or its result is not 4-D f32");
    const std::vector<int64_t> &out = n.result()->type().shape;
    bool anyBlocked = false;
    for (const Value *v : n.operands()) {
      Operand kind = operandKind(v, out);
      // (A blocked operand has out's channels; it may broadcast over N, H and W, as the SE's
      // [N, C, 1, 1] scale does, which its blocked [N, CB, 1, 1, 16] form does the same way.)
      if (kind == Operand::None)
        return reject("an operand has no blocked form (not blocked, a scalar or a per-channel "
                      "constant)");
      anyBlocked = anyBlocked || kind == Operand::Blocked || kind == Operand::ChannelsLast;
    }
    if (!anyBlocked)
      return reject("its blocked operand has other channels than its result");
    std::vector<Value *> ops;
    for (Value *v : n.operands())
      ops.push_back(blockedOperand(v, out));
    return g_->createNode(n.op(), ops, n.attrs, n.loc)->result();
  }

  Value *convertGlobalPool(Node &n) {
    auto it = blocked_.find(n.operand(0));
    if (it == blocked_.end())
      return reject("its input is not blocked");
    Op op = n.op() == Op::GlobalAvgPool ? Op::ReduceMean : Op::ReduceMax;
    return g_
        ->createNode(op, {it->second.value},
                     {{"axes", std::vector<int64_t>{2, 3}}, {"keepdims", int64_t(1)}}, n.loc)
        ->result();
  }

  Value *convertPool(Node &n) {
    auto it = blocked_.find(n.operand(0));
    if (it == blocked_.end() || !plain4d(n.result()))
      return reject("its input is not blocked");
    AttrMap attrs = n.attrs;
    attrs["blocked"] = int64_t(1);
    return g_->createNode(n.op(), {it->second.value}, attrs, n.loc)->result();
  }

  // A nearest or linear resize of a blocked value over H and W only (N and C kept) resizes the
  // blocks: the lane axis is one more identity axis, so every output pixel is 16 contiguous
  // lanes read from 16 contiguous lanes (a vector load per tap), where the NCHW form's 16
  // lanes were 16 pixels gathered with a stride (scalar code where the gather is not used).
  // The padded lanes stay zero. A segmentation decoder's upsampling then keeps the layout
  // between its convs.
  Value *convertResize(Node &n) {
    auto it = blocked_.find(n.operand(0));
    if (it == blocked_.end() || !plain4d(n.result()))
      return reject("its input is not blocked");
    const std::string &mode = n.s("mode");
    const std::vector<double> &scales = n.floats("scales");
    const std::vector<int64_t> &xs = n.operand(0)->type().shape, &os = n.result()->type().shape;
    if (!readersKeepLayout(n.result()) || (mode != "nearest" && mode != "linear") ||
        n.s("coordinate_transformation_mode") == "tf_crop_and_resize" || scales.size() != 4 ||
        scales[0] != 1.0 || scales[1] != 1.0 || os[0] != xs[0] || os[1] != xs[1])
      return reject("resize: not a nearest / linear resize over H and W, or its readers read the "
                    "plain layout (the conversion would run on the larger output)");
    std::vector<int64_t> sizes = it->second.value->type().shape;
    sizes[2] = os[2];
    sizes[3] = os[3];
    AttrMap attrs = n.attrs;
    attrs["sizes"] = sizes;
    attrs["scales"] = std::vector<double>{1.0, 1.0, scales[2], scales[3], 1.0};
    return g_->createNode(Op::Resize, {it->second.value}, attrs, n.loc)->result();
  }

  // Whether every reader of `v` is an op this pass runs on blocks, so that a blocked `v` needs
  // no conversion back. An upsampling's output is its input times the scale: read back on the
  // plain layout (a graph output, a reader the pass leaves alone), the conversion would run on
  // the larger tensor, so the resize then stays plain and its reads convert the smaller input.
  bool readersKeepLayout(const Value *v) const {
    if (g_->isOutput(v))
      return false;
    for (const Node *u : g_->users(v)) {
      bool blocks = u->op() == Op::Conv || u->op() == Op::Concat || u->op() == Op::MaxPool ||
                    u->op() == Op::AvgPool || u->op() == Op::GlobalAvgPool ||
                    u->op() == Op::GlobalMaxPool || u->op() == Op::Resize ||
                    (u->info().has(EW) && keepsFinite(u->op()));
      if (!blocks)
        return false;
    }
    return true;
  }

  // A reduce_mean / sum / max / min of a blocked value over its spatial axes (a global pool
  // spelled as a reduction, keepdims 0 or 1).
  bool spatialReduction(const Node &n) const {
    bool reduce = n.op() == Op::ReduceMean || n.op() == Op::ReduceSum || n.op() == Op::ReduceMax ||
                  n.op() == Op::ReduceMin;
    return reduce && blocked_.count(n.operand(0)) && n.ints("axes") == std::vector<int64_t>{2, 3};
  }
  // Reduces the blocks (the column form: 16 channels a vector) and reads the result back.
  void replaceSpatialReduction(Node &n) {
    const Blocked &b = blocked_.at(n.operand(0));
    Value *r =
        g_->createNode(n.op(), {b.value},
                       {{"axes", std::vector<int64_t>{2, 3}}, {"keepdims", int64_t(1)}}, n.loc)
            ->result();
    Value *v = fromBlocked(r, b.channels, n.loc);
    if (n.i("keepdims") == 0)
      v = g_->createNode(Op::Reshape, {v}, reshapeAttrs(*g_, symShapeOf(n.result()->type())), n.loc)
              ->result();
    g_->replaceAllUsesWith(n.result(), v);
  }

  // A depth-to-space with the phase before the channel (DCR: reshape [N, s1, s2, C, H, W],
  // transpose [0, 3, 4, 1, 5, 2], reshape [N, C, H s1, W s2]; ONNX's DepthToSpace in DCR mode,
  // and the pixel shuffle after conv-transpose-as-conv's phase convs) of a blocked value whose C
  // is a multiple of 16 shuffles the blocks: the lane axis rides along as one more identity
  // axis, so each output pixel is one phase pixel's 16 contiguous lanes. (CRD, the phase after
  // the channel, would move phases into the lanes.) n is the last reshape; a reshape that is no
  // such chain over a blocked value is no candidate.
  Value *convertDepthToSpace(Node &n) {
    const Node *t = n.operand(0)->def();
    const Node *r = t && t->op() == Op::Transpose ? t->operand(0)->def() : nullptr;
    if (!r || r->op() != Op::Reshape || !plain4d(n.result()))
      return nullptr;
    auto it = blocked_.find(r->operand(0));
    if (it == blocked_.end())
      return nullptr;
    const std::vector<int64_t> &xs = r->operand(0)->type().shape, &ps = r->result()->type().shape,
                               &os = n.result()->type().shape;
    const std::vector<int64_t> &perm = t->ints("perm");
    if (ps.size() != 6 || ps[0] != xs[0] || ps[4] != xs[2] || ps[5] != xs[3] ||
        os != std::vector<int64_t>{xs[0], ps[3], xs[2] * ps[1], xs[3] * ps[2]})
      return nullptr;
    if (perm != std::vector<int64_t>{0, 3, 4, 1, 5, 2})
      return reject("depth-to-space: not in DCR order (the phase after the channel would move "
                    "phases into the lanes)");
    if (ps[3] % kLanes != 0 || it->second.channels != xs[1])
      return reject("depth-to-space: its channels per phase are no multiple of 16");
    Value *v = it->second.value;
    const int64_t cb = ps[3] / kLanes;
    v = g_->createNode(
              Op::Reshape, {v},
              reshapeAttrs(*g_, *v,
                           std::vector<int64_t>{xs[0], ps[1], ps[2], cb, xs[2], xs[3], kLanes}),
              n.loc)
            ->result();
    v = g_->createNode(Op::Transpose, {v}, {{"perm", std::vector<int64_t>{0, 3, 4, 1, 5, 2, 6}}},
                       n.loc)
            ->result();
    return g_
        ->createNode(Op::Reshape, {v},
                     reshapeAttrs(*g_, *v, std::vector<int64_t>{os[0], cb, os[2], os[3], kLanes}),
                     n.loc)
        ->result();
  }

  // A unit-step slice of a blocked value over H and W only (the crop after a transposed conv's
  // pixel shuffle) takes the same window of the blocks.
  Value *convertSpatialSlice(Node &n) {
    auto it = blocked_.find(n.operand(0));
    if (it == blocked_.end() || n.numOperands() != 1)
      return nullptr;
    if (!plain4d(n.result()))
      return reject("slice: its result is not a static 4-D f32 value");
    std::vector<int64_t> axes = n.ints("axes");
    const std::vector<int64_t> &steps = n.ints("steps");
    for (int64_t &a : axes)
      if (a < 0)
        a += 4;
    bool spatial =
        std::all_of(axes.begin(), axes.end(), [](int64_t a) { return a == 2 || a == 3; });
    bool unit = std::all_of(steps.begin(), steps.end(), [](int64_t s) { return s == 1; });
    if (!spatial || !unit)
      return reject("slice: not a unit-step window over H and W");
    AttrMap attrs = n.attrs;
    attrs["axes"] = axes;
    return g_->createNode(Op::Slice, {it->second.value}, attrs, n.loc)->result();
  }

  Value *convertConcat(Node &n) {
    if (n.i("axis") != 1 || !plain4d(n.result()))
      return reject("not a 4-D concat along channels");
    std::vector<Value *> ops;
    for (Value *v : n.operands()) {
      auto it = blocked_.find(v);
      if (it == blocked_.end() || it->second.channels % kLanes != 0)
        return reject("an input is not blocked or has channels that are no multiple of 16");
      ops.push_back(it->second.value);
    }
    return g_->createNode(Op::Concat, ops, {{"axis", int64_t(1)}}, n.loc)->result();
  }
};

} // namespace

std::unique_ptr<Pass> createBlockChannelsPass() {
  return std::make_unique<BlockChannels>();
}

} // namespace aicf
