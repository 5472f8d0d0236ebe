// pack-weights: a host plan's constant GEMM operands laid out as the micro-kernel streams them.
// The host micro-kernel (backend/host/host_printer.cpp) multiplies row blocks of A by column
// panels of B, NR = 32 or 64 floats wide; a [K, N] weight read row-major makes every tile copy
// its B panel out of rows N floats apart, once per tile and k step. Packing at compile time, as
// ORT's MLAS does when a session starts, moves those bytes once: the weight W becomes
// Wp [P, K, NR] (P = ceil(N / NR) panels, the last zero-padded), and the contraction reads
//   B = slice(reshape(transpose(Wp, [1, 0, 2]), [K, NR P]), N columns)
// which is W again. The three layout ops fold into the contraction's B read (lower/fusion.cpp,
// rule 0); the tiled_contraction recipe recognises the panel map and hands the panels to the
// micro-kernel where they lie (kir.h, mma_tile views). The interpreter, the verifier and every
// other reader see ordinary ops, so the rewrite is checked like any other.
//
// Which contractions: matmul, gemm and dense blocked_conv (any input) whose B is an f32 rank-2
// weight with at least 32 columns (narrower ones would be mostly padding). gemm's transB is applied
// while packing. Panel width: 64 for a blocked conv whose N is a multiple of 64 (its micro-kernel
// then holds a 7 x 64 accumulator block, 28 of the 32 vector registers, and streams each panel half
// as often as 8 x 32 blocks do: resnet18's 64-channel 3 x 3 convs 2.14 -> 2.03 ms on one AMD EPYC
// core, ORT 2.04), else 48 for one whose N is a multiple of 48 (96, 144, 240, 480, 672
// channels: 8 x 48 blocks, 24 accumulators, a third fewer passes over A than 8 x 32), else 32
// (8 x 32 blocks: matmul / gemm read A as contiguous rows, a path whose row blocks are sized
// for 2-vector panels; wider panels there are untried).
// A weight read by several contractions is packed once. Only the compile driver runs this pass, for
// host plans (driver/compile.cpp, stage pack-weights); GPU kernels stage B tiles through shared
// memory.
// A bf16 weight (a product assign-precision marked bf16 on a host plan) is packed in pairs of k
// rows, the layout a bf16 dot-product instruction reads (vdpbf16ps: lane j multiplies the pair
// (B[2p][j], B[2p+1][j]) by A's pair (A[i][2p], A[i][2p+1])): Wp [P, ceil(K / 2), NR, 2], the
// odd K's last pair padded with a zero row, and the view
//   B = slice(reshape(transpose(Wp, [1, 3, 0, 2]), [2 ceil(K / 2), NR P]), K rows, N columns).
// A pair row holds NR pairs, the bytes of one f32 row: panel offsets in elements keep the f32
// form (k0 NR, (n0 / NR) stride) at even k0.
// An int8 weight (precision int8) is packed the same way in quads of k rows, the layout
// vpdpbusd reads (lane j: the 4 bytes B[4q..4q + 3][j]): Wp [P, ceil(K / 4), NR, 4], a quad
// row again the bytes of one f32 row, the view's perm the pairs' one. In general: g = 4 /
// sizeof(element) k rows per group (1 for f32).
#include "passes/pack_weights.h"
#include "passes/passes.h"

#include "ir/graph.h"

#include <cstring>
#include <map>

namespace aicf {

namespace {

constexpr int64_t kPanel = 32;     // floats per panel: the micro-kernel's 2 x 16-float vectors
constexpr int64_t kWidePanel = 64; // 4 vectors, for blocked convs (see above)
constexpr int64_t kMidPanel = 48;  // 3 vectors, for blocked convs whose N 64 does not divide

class PackWeights : public NamedPass<PassId::PackWeights> {
public:
  bool run(Graph &g, PassContext &) override {
    std::map<std::pair<const Value *, bool>, Value *> packed; // (weight, transposed) -> view
    bool changed = false;
    for (Node *n : g.nodes()) {
      if (!packedWeightProduct(*n))
        continue;
      Value *w = n->operand(1);
      bool trans = n->op() == Op::Gemm && n->i("transB") != 0;
      if (w->type().dtype != DType::F32 && w->type().dtype != DType::BF16 &&
          w->type().dtype != DType::I8)
        continue;
      Value *&view = packed[{w, trans}];
      if (!view)
        view = pack(g, *n, w, trans, panelWidth(g, *w, trans));
      n->setOperand(1, view);
      if (trans)
        n->attrs["transB"] = int64_t(0);
      changed = true;
    }
    if (changed)
      g.removeDeadCode();
    return changed;
  }

private:
  // When every contraction reading w is a blocked conv: 64 if N is a multiple of 64, else 48
  // if it is one of 48; else 32.
  static int64_t panelWidth(const Graph &g, const Value &w, bool trans) {
    int64_t N = trans ? w.type().shape[0] : w.type().shape[1];
    if (N % kWidePanel != 0 && N % kMidPanel != 0)
      return kPanel;
    for (const Node *u : g.users(&w))
      if (u->op() != Op::BlockedConv)
        return kPanel;
    return N % kWidePanel == 0 ? kWidePanel : kMidPanel;
  }

  // Wp [L.., P, K, NR] from W ([L.., K, N], or [N, K] when `trans`), and the view of it as
  // [L.., K, N]: each batch entry's [K, N] packed on its own. A bf16 (int8) W: Wp [L.., P, Kg,
  // NR, G] in groups of G = 2 (4) k rows (Kg = ceil(K / G); see above).
  static Value *pack(Graph &g, Node &user, Value *w, bool trans, int64_t nr) {
    const Tensor &src = *w->data();
    const int64_t G = 4 / static_cast<int64_t>(dtypeSize(src.dtype()));
    const bool pairs = G > 1; // (pairs or quads)
    std::vector<int64_t> lead = src.shape();
    size_t r = lead.size();
    int64_t K = trans ? lead[1] : lead[r - 2], N = trans ? lead[0] : lead[r - 1];
    lead.resize(r - 2);
    int64_t L = 1;
    for (int64_t d : lead)
      L *= d;
    int64_t P = (N + nr - 1) / nr, Kp = (K + G - 1) / G * G;
    std::vector<int64_t> packed = lead;
    if (pairs)
      packed.insert(packed.end(), {P, Kp / G, nr, G});
    else
      packed.insert(packed.end(), {P, K, nr});
    auto out = std::make_shared<Tensor>(TensorType(src.dtype(), packed));
    const size_t es = dtypeSize(src.dtype());
    const uint8_t *s = src.raw();
    uint8_t *d = out->raw();
    // Element (k, col) of entry l: groups put k % G innermost, so the group row k / G holds
    // NR groups; f32 rows hold NR floats. Either way a k row starts k * NR elements in.
    for (int64_t l = 0; l < L; ++l)
      for (int64_t p = 0; p < P; ++p)
        for (int64_t k = 0; k < K; ++k)
          for (int64_t j = 0; j < nr && p * nr + j < N; ++j) {
            int64_t col = p * nr + j;
            int64_t at =
                (l * P + p) * Kp * nr + (pairs ? (k / G * nr + j) * G + k % G : k * nr + j);
            int64_t from = trans ? col * K + k : (l * K + k) * N + col;
            std::memcpy(d + size_t(at) * es, s + size_t(from) * es, es);
          }
    Value *wp = g.addWeight(w->name() + ".panels", out);
    wp->loc = w->loc;
    Location loc = w->loc;
    std::vector<int64_t> perm;
    for (size_t i = 0; i < lead.size(); ++i)
      perm.push_back(static_cast<int64_t>(i));
    int64_t b = static_cast<int64_t>(lead.size());
    if (pairs)
      perm.insert(perm.end(), {b + 1, b + 3, b, b + 2});
    else
      perm.insert(perm.end(), {b + 1, b, b + 2});
    std::vector<int64_t> viewShape = lead;
    viewShape.insert(viewShape.end(), {Kp, P * nr});
    Value *v = g.createNode(Op::Transpose, {wp}, {{"perm", perm}}, loc, &user)->result();
    v = g.createNode(Op::Reshape, {v}, {{"shape", viewShape}}, loc, &user)->result();
    std::vector<int64_t> ends, axes;
    if (Kp != K) {
      ends.push_back(K);
      axes.push_back(b);
    }
    if (P * nr != N) {
      ends.push_back(N);
      axes.push_back(b + 1);
    }
    if (!axes.empty())
      v = g.createNode(Op::Slice, {v},
                       {{"starts", std::vector<int64_t>(axes.size(), 0)},
                        {"ends", ends},
                        {"axes", axes},
                        {"steps", std::vector<int64_t>(axes.size(), 1)}},
                       loc, &user)
              ->result();
    return v;
  }
};

} // namespace

// A rank-2 weight, or for matmul a batched one ([L.., K, N]: split-chains' slices), packed
// per batch entry; of matmul, gemm or a dense blocked_conv (on a blocked input, or a plain one:
// a stem, whose micro-kernel reads A in blocks of a kernel row's taps; packed, its 96 columns
// run as 8 x 48 blocks rather than 8 x 32 ones, large_kernel_dw's 4 x 4 stem 0.224 -> 0.206 ms
// on one AMD EPYC core; in bf16 or int8 its A runs are packed in pairs or quads that may
// straddle two blocks, aicf_pack_groups). (A grouped
// blocked_conv's weight is its groups' [Kg, N / G] blocks one after another, each group's read
// in place.)
bool packedWeightProduct(const Node &n) {
  bool blockedConv = n.op() == Op::BlockedConv && n.i("depthwise") == 0 && n.i("group") == 1;
  if (n.op() != Op::MatMul && n.op() != Op::Gemm && !blockedConv)
    return false;
  const Value &w = *n.operand(1);
  if (!w.isWeight() || !w.hasData())
    return false;
  size_t rank = static_cast<size_t>(w.type().rank());
  if (rank != 2 && !(n.op() == Op::MatMul && rank > 2))
    return false;
  if (n.op() == Op::MatMul && n.operand(0)->type().rank() < 2)
    return false;
  const auto &shape = w.type().shape;
  int64_t cols = n.op() == Op::Gemm && n.i("transB") != 0 ? shape[0] : shape[rank - 1];
  return cols >= kPanel;
}

std::unique_ptr<Pass> createPackWeightsPass() {
  return std::make_unique<PackWeights>();
}

} // namespace aicf
