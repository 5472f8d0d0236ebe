// tile_compatible_compute (docs/architecture.md): the computation's dependency closure fits in a
// tile: an output tile needs only bounded input tiles, partial results accumulate (a sum over the
// contraction axis), and the tile's working set fits in on-chip memory of the target.
// Applies to contractions (matmul, gemm, conv: implicit GEMM) and attention (q tile + k/v tiles
// + score tile). The working set is checked for the largest of the standard tile edges
// {128, 64, 32, 16} that fits; the planner later chooses among the fitting ones by cost.
#include "passes/property_checks.h"
#include "support/diagnostics.h"

namespace aicf {

namespace {

constexpr int64_t kTileEdges[] = {128, 64, 32, 16};

// Contraction as GEMM dimensions (per batch): M x N outputs, reduction length K.
bool gemmDims(const Node &n, int64_t &m, int64_t &nn, int64_t &k) {
  const TensorType &a = n.operand(0)->type(), &b = n.operand(1)->type();
  const TensorType &out = n.result()->type();
  switch (n.op()) {
  case Op::MatMul:
    k = a.shape.back();
    m = a.rank() >= 2 ? a.shape[a.rank() - 2] : 1;
    nn = b.rank() >= 2 ? b.shape.back() : 1;
    return true;
  case Op::Gemm:
    m = out.shape[0];
    nn = out.shape[1];
    k = n.i("transA") ? a.shape[0] : a.shape[1];
    return true;
  case Op::Conv: { // implicit GEMM: M = output pixels, N = output channels, K = C/g * kernel
    m = 1;
    for (int64_t d = 2; d < out.rank(); ++d)
      m *= out.shape[d];
    nn = out.shape[1] / std::max<int64_t>(n.i("group"), 1);
    k = 1;
    for (int64_t d = 1; d < b.rank(); ++d)
      k *= b.shape[d];
    return true;
  }
  case Op::BlockedConv: // pixels x blocked channels, K = the weight's rows
    if (n.i("depthwise"))
      return false;
    m = out.shape[2] * out.shape[3];
    nn = out.shape[1] * out.shape[4] / n.i("group"); // grouped: per group
    k = b.shape[0] / n.i("group");
    return true;
  default: return false;
  }
}

} // namespace

std::optional<Certificate> checkTileCompatibleCompute(const Graph &, const Node &n,
                                                      const Target &target) {
  bool attention = n.op() == Op::Attention;
  if (!n.info().has(CONTRACT) && !attention)
    return std::nullopt;
  if (n.op() == Op::ConvTranspose)
    return std::nullopt;
  Certificate c;
  c.property = MemProperty::TileCompatibleCompute;
  c.rewrite = "naive loop nest -> tiled schedule with on-chip operand tiles";
  c.exactness = Exactness::Reassociated;
  int64_t elem = static_cast<int64_t>(dtypeSize(n.result()->type().dtype));
  int64_t chosen = 0, bytes = 0;
  if (attention) {
    const TensorType &q = n.operand(0)->type(), &v = n.operand(2)->type();
    int64_t d = q.shape.back(), dv = v.shape.back();
    c.conditions.push_back({"partial accumulation possible",
                            "output row = sum over key tiles of rescaled p*v (online softmax)",
                            true});
    for (int64_t t : kTileEdges) {
      // q tile (t x d), k and v tiles (t x d, t x dv), score tile (t x t), accumulator (t x dv)
      int64_t ws = (t * d + t * d + t * dv + t * t + t * dv) * elem;
      if (ws <= target.onChipBytes()) {
        chosen = t;
        bytes = ws;
        break;
      }
    }
    c.conditions.push_back(
        {cat("working set fits on chip (", target.name(), ")"),
         chosen ? cat(chosen, "x", chosen, " q/kv tiles with head size ", d, ": ", bytes,
                      " B <= ", target.onChipBytes(), " B ", target.onChipName())
                : cat("even 16x16 tiles with head size ", d, " exceed ", target.onChipBytes(),
                      " B ", target.onChipName()),
         chosen != 0});
    return c;
  }
  int64_t m = 0, nn = 0, k = 0;
  gemmDims(n, m, nn, k);
  c.conditions.push_back({"partial accumulation possible",
                          cat("reduction over K = ", k, " is a sum (associative)"), true});
  for (int64_t t : kTileEdges) {
    int64_t kt = std::min<int64_t>(t, k);
    int64_t ws = (t * kt + kt * t + t * t) * elem; // A tile, B tile, accumulator tile
    if (ws <= target.onChipBytes()) {
      chosen = t;
      bytes = ws;
      break;
    }
  }
  c.conditions.push_back({cat("working set fits on chip (", target.name(), ")"),
                          cat(chosen, "x", chosen, " output tile, K step ",
                              std::min<int64_t>(chosen, k), " (M=", m, ", N=", nn, ", K=", k, "): ",
                              bytes, " B <= ", target.onChipBytes(), " B ", target.onChipName()),
                          chosen != 0});
  return c;
}

} // namespace aicf
