// The tiled contraction's parts that more than one recipe builds from (internal to lower/): a
// contraction as the recipes see it (D[b, row, col] = sum_k A[b, row, k] B[b, k, col] with its
// operand reads, epilogue and output index), the specs of matmul and gemm, tile copies, the
// in-place operand views of the host micro-kernel and the folded row norm's prologue. Defined
// in contraction_specs.cpp, contraction_conv_specs.cpp, contraction_views.cpp,
// contraction_row_norm.cpp and recipe_tiled_contraction.cpp (tileCopy); the chained
// contraction (recipe_chained_contraction.cpp) builds its two products from them.
#pragma once

#include "lower/recipe_support.h"

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace aicf::contraction {

using kir::E;
using kir::StmtP;
using Index = std::vector<E>;

E f32(double v);
E fvar(const std::string &name);
E ivar(const std::string &name);

// One contraction as the recipe sees it.
struct Contraction {
  std::string what;           // for the kernel's comment
  std::vector<int64_t> batch; // output batch dims (flattened into grid axis b)
  int64_t M = 1, N = 1, K = 1;
  // The rows when they depend on symbolic dims (issue 21): M is then their planning value,
  // and the kernel's row grid, guards and valid rows read Me() instead.
  std::optional<SymExpr> Msym;
  // The output's dims as expressions (symShapeOf(result type)); epilogue operands broadcast to
  // these, so that a symbolic dim of 1 at the planning point is not taken for a broadcast one.
  std::vector<SymExpr> outSym;
  std::vector<SymExpr> outDims() const {
    if (!outSym.empty())
      return outSym;
    return std::vector<SymExpr>(outShape.begin(), outShape.end());
  }
  E Me() const { return Msym ? kir::symE(*Msym) : E(M); }
  // Whether a tile of `tile` rows can be ragged: some row tile holds fewer valid rows.
  bool mRagged(int64_t tile) const { return Msym || M % tile != 0; }
  std::function<E(const Index &b, E row, E k)> aAt; // A element, row < M and k < K
  // Optional scalars the A load needs per k (host copies walk k outside the rows for it).
  std::function<std::vector<StmtP>(E k)> aKDecls;
  // Optional: scalars the A load needs per row (declared once per tile row), and whether the
  // element exists (a blocked conv's padding reads as zero).
  std::function<std::vector<StmtP>(E row)> aRowDecls;
  std::function<E(const Index &b, E row, E k)> aValid;
  std::function<E(const Index &b, E k, E col)> bAt;    // B element, k < K and col < N
  std::function<E(const Index &b, E k, E col)> bValid; // optional: the element exists (conv)
  // Optional scalars the B gather needs, declared once per k (per tile row) and once per col:
  // the host copy walks rows outside columns, so per-k index arithmetic leaves the inner loop.
  std::function<std::vector<StmtP>(E k)> bRowDecls;
  std::function<std::vector<StmtP>(E col)> bColDecls;
  // Optional: the whole B tile copy for one thread (host plans), given the batch index, k0, n0
  // and the tile; replaces the element-wise copy when the operand has a cheaper walk.
  std::function<StmtP(const Index &b, E k0, E n0, const kir::BufferP &Bs)> bHostCopy;
  // An int8 product (precision int8, a quantized conv on the integers): A's integers plus
  // aShift lie in [0, 255] (the node's x_offset); the int8 micro-kernel reads them so beside
  // the weight's quad panels (PanelView::aShift, mma_tile's aShift).
  int64_t aShift = 0;
  std::function<Index(const Index &b, E row, E col)> outIndex;
  // Optional (host): the output index of row `row` and column 16 q + l, for a column walk in
  // groups of 16 lanes whose stores are contiguous (a blocked conv's channel blocks).
  std::function<Index(const Index &b, E row, E q, E l)> outLanes;
  // Optional (host, a k x k blocked conv): A read in place from a band the block fills first,
  // zero-padded so that every tap of every row of the tile lies inside it: `bandFill(b, band)`
  // fills the shared buffer of shape `band`; A (row, k) is then at row * bandLd + the offset of
  // k's block of 16 (kir.h mma_tile aBlocks = bandBlocks) + k % 16.
  int64_t kAlign = 8; // host K steps a multiple of this (16: A read in blocks of 16 lanes)
  std::vector<int64_t> band, bandBlocks;
  // Optional: whether tile row `row` is an output (the band form's padded grid computes a few
  // that are not); the final region stores only those.
  std::function<E(const Index &b, E row)> rowValid;
  int64_t bandLd = 0;
  // The band form's row groups (kir.h mma_tile aGroups): a tile's rows are whole output rows of
  // bandGroups[0] pixels, each bandGroups[1] floats on in the band; BM a multiple of the row
  // (defaultBM the recipe's default). Without groups the band serves one batch entry.
  std::vector<int64_t> bandGroups;
  int64_t defaultBM = 0;
  int64_t bandBytes0 = 0, bandRowBytes = 0; // the band of a one-row tile, and per extra row
  // Fills the band for the tile starting at row m0.
  std::function<StmtP(const Index &b, E m0, const kir::BufferP &band)> bandFill;
  // Optional (the band form; kir.h mma_tile aTaps = bandTaps {d, H, s, c0, cs, cd, W}): the
  // input row kernel row 0 reads for the first and the last output row of the tile starting at
  // m0, so that the micro-kernel skips the blocks that read only the band's zeros. Set only
  // where the weight is finite (a skipped product w * 0 is then 0).
  std::function<std::pair<E, E>(const Index &b, E m0)> bandTapRows;
  std::vector<int64_t> bandTaps;
  double bandLiveShare = 1.0; // the share of the products the tiles do not skip
  double alpha = 1.0;
  std::vector<std::function<E(const Index &out)>> addTerms;  // leading additive epilogue terms
  std::vector<std::pair<EpilogueStep, const Value *>> steps; // the rest of the epilogue
  std::vector<int64_t> outShape;
};

struct Tiles {
  int64_t BM, BN, BK, TM, TN, threads;
};

// A seen in place: element (row, k) at base + row * lda + k of a kernel parameter.
struct RowView {
  kir::BufferP buf;
  E base; // at row 0, k 0
  int64_t ld = 0;
};

// B in the column panels of a packed weight (passes/pack_weights.cpp): element (k, col) at
// base + (col / NR) * stride + k * NR + col % NR of a [P, K, NR] parameter.
struct PanelView {
  kir::BufferP buf;
  E base;
  int64_t panel = 0, stride = 0, cols = 0; // cols: P * NR, the padded width
  // k rows per group: 1 (f32), 2 (bf16 in k pairs) or 4 (int8 in k quads;
  // passes/pack_weights.cpp): base and stride count elements of the weight's type; a k row
  // still starts k * panel elements into its panel (at k a multiple of the group).
  int64_t group = 1;
  int64_t aShift = 0; // int8 quads: the contraction's aShift, for A beside them
};

// Convolution geometry shared by the implicit GEMM and the direct recipe.
struct ConvGeom {
  int64_t N = 0, C = 0, M = 0, G = 1;
  std::vector<int64_t> I, Kd, O, strides, pads, dil;
  size_t S = 0;
};
ConvGeom convGeom(const Node &n);
// A conv whose groups are wide enough to be contractions of their own (group 1, or at least 8
// input and 8 output channels per group); narrower groups (depthwise) are direct convs.
bool denseGroups(const Node &n);
// A conv (dense groups) as an implicit GEMM: rows the output channels, columns the output
// pixels, k over (input channel, kernel tap).
Contraction convSpec(const Node &n, const GroupExpr &gx);
// A blocked_conv (dense) as a contraction: rows the output pixels, columns the output channels,
// k over (input block, kh, kw, lane); `host` selects the band form for k x k convs.
Contraction blockedConvSpec(const Node &n, const GroupExpr &gx, bool host, const Knobs &knobs);
// Splits a node's `epilogue` attribute into c's leading additive terms (while `additive`) and
// its remaining steps; the steps' extra operands start at operand `firstExtra`.
void splitEpilogue(const Node &n, size_t firstExtra, const GroupExpr &gx, bool additive,
                   Contraction &c);

// `flattenBelow`: on the host, a batch over an unbatched B is folded into the rows when A has
// fewer rows than this per batch entry.
Contraction matmulSpec(const Node &n, const GroupExpr &gx, bool host, int64_t flattenBelow = 32);
Contraction gemmSpec(const Node &n, const GroupExpr &gx);

// Applies the remaining epilogue steps to `cur` (renamed as each step is declared), one scalar
// per step, at output index `out`.
// The scalars are named <prefix>1, <prefix>2, ...
std::vector<StmtP> applySteps(const Contraction &c, const GroupExpr &gx, const Index &out,
                              std::string &cur, const std::string &prefix = "e");

// A tile copy dst[r, c] = src(r, c) (zero where `valid` fails) by all threads: element
// e = t, t + threads, ... of the row-major tile; one thread walks rows and columns directly.
// `rowDecls(r)` / `colDecls(c)` (optional) declare scalars src and valid use, once per row and
// once per element (with `colOuter`, one thread walks columns outside rows and declares the
// column scalars once per column).
StmtP tileCopy(const kir::BufferP &dst, int64_t rows, int64_t cols, int64_t threads,
               const std::string &t, const std::string &tag, const std::function<E(E r, E c)> &src,
               const std::function<E(E r, E c)> &valid,
               const std::function<std::vector<StmtP>(E r)> &rowDecls = nullptr,
               const std::function<std::vector<StmtP>(E c)> &colDecls = nullptr,
               bool colOuter = false);

// A read in place (element (row, k) at base + row * lda + k of a param), or nullopt.
// `singleRow`: a one-row A whose row index folded away (a 1 x 1 feature map) reads in place too,
// with lda = K (only row 0 is read); the conv chain's expansion, which has no staged form.
std::optional<RowView> aRowView(const Contraction &c, const Index &bi, bool singleRow = false);
// A seen in place in k blocks of 16 (a channel-blocked conv input): element (row, k) at base +
// row * ld + (k / 16) * block + k % 16, or nullopt.
struct BlockView {
  kir::BufferP buf;
  E base;
  int64_t ld = 0, block = 0;
};
std::optional<BlockView> aBlockView(const Contraction &c, const Index &bi, bool singleRow = false);
// B read in place (element (k, col) at base + k * ld + col of a param, N a multiple of 16).
std::optional<RowView> bRowView(const Contraction &c, const Index &bi);
// B in the column panels of a packed weight (passes/pack_weights.cpp), or nullopt.
std::optional<PanelView> bPanelView(const Contraction &c, const Index &bi);

// Whether a k step of bk rows of a panel `cols` wide, beside the A of a block of `rows` rows,
// fits in L1.
bool l1Slice(int64_t bk, int64_t cols, int64_t rows, const Hardware &hw);
// Whether a host tile reading B's panels streams the next panel slice ahead (mma_tile's
// bPrefetch): the weight is wider than half of L2.
bool streamsWeight(const PanelView &pv, const Knobs &knobs);

// The row norm folded into the group's A read (lower/fusion.h rule 7), or null.
const Node *foldedRowNorm(const KernelGroup &g);
// The folded row norm's prologue: the statistics of the BM tile rows starting at m0, and A of
// `c` redirected to read the normalised rows (declares per-row scalars through c.aRowDecls).
std::vector<StmtP> rowNormPrologue(const Node &norm, GroupExpr &gx, Contraction &c, const Tiles &tl,
                                   const Index &bi, E m0, const std::string &t,
                                   std::vector<kir::BufferP> &allocs);

// A row norm epilogue (lower/fusion.h rule 9) over an accumulator tile C [threads, TM, TN] whose
// thread tiles hold whole rows of N columns: `fin` (the per-element statements that computed
// the anchor's value `cur`) followed by storing the norm's input into C, the rows' statistics,
// and the normalised rows through the group's stores; `overTile` wraps per-element statements
// in the tile's (guarded) region. Returns the three regions.
std::vector<StmtP> normEpilogueRegions(const Node &norm, const KernelGroup &g, GroupExpr &gx,
                                       const Value *result, const std::string &cur,
                                       std::vector<StmtP> fin, const kir::BufferP &C, E tv,
                                       int64_t TM, int64_t N, const Index &out,
                                       const std::string &t,
                                       const std::function<StmtP(std::vector<StmtP>)> &overTile,
                                       std::vector<kir::BufferP> &allocs);

} // namespace aicf::contraction
