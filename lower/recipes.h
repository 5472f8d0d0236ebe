// The lowering recipes (see lower.h for the list): each one's Recipe object (lower/recipe.h),
// typed knobs and typed problem description. Each recipe builds the whole kernel for a group:
// params are group.inputs then group.outputs (global buffers named p0, p1, ... or after the
// values), grid/threads from the knobs, body from the recipe.
#pragma once

#include "ir/precision.h"
#include "lower/lower.h"
#include "lower/recipe.h"

#include <array>
#include <optional>
#include <string>

namespace aicf {

// The recipe objects, one per file lower/recipe_<name>.cpp (the registry lists them).
const Recipe &pointwiseRecipe();
const Recipe &reductionRecipe();
const Recipe &poolingRecipe();
const Recipe &dataMovementRecipe();
const Recipe &scatterRecipe();
const Recipe &topKRecipe();
const Recipe &nonZeroRecipe(); // recipe_non_zero.cpp, with setDimRecipe
const Recipe &setDimRecipe();
const Recipe &nmsRecipe();
const Recipe &uniqueRecipe();
const Recipe &chooseRecipe();
const Recipe &onlineNormRecipe();
const Recipe &streamingAttentionRecipe();
const Recipe &tiledContractionRecipe();
const Recipe &chainedContractionRecipe();
const Recipe &directConvRecipe();
const Recipe &convChainRecipe();

// A blocked_conv the direct_conv recipe lowers (its taps unrolled per 16-lane pixel vector):
// depthwise, or dense on a plain input with at most kMaxDirectBlockedTaps taps per output.
// More taps take the tiled contraction's band form, whose micro-kernel reuses each weight
// vector over 8 pixels: the image's 3 x 3 x 3 first conv ran 7-12% faster there (the bundled
// cnn 25.7 -> 22.7 us, mobilenet_v2 0.354 -> 0.330 ms, EfficientNet-B0 0.54 -> 0.50 ms;
// mobilenet_v3_small's within noise), its bias and activation on the micro-kernel's registers.
constexpr int64_t kMaxDirectBlockedTaps = 16;
bool directBlockedConv(const Node &n);

// The build functions the objects call.
kir::Kernel recipePointwise(const KernelGroup &g, const std::string &name, const Knobs &k);
kir::Kernel recipeReduction(const KernelGroup &g, const std::string &name, const Knobs &k);
kir::Kernel recipePooling(const KernelGroup &g, const std::string &name, const Knobs &k);
kir::Kernel recipeDataMovement(const KernelGroup &g, const std::string &name, const Knobs &k);
kir::Kernel recipeOnlineNorm(const KernelGroup &g, const std::string &name, const Knobs &k);
kir::Kernel recipeStreamingAttention(const KernelGroup &g, const std::string &name, const Knobs &k);
kir::Kernel recipeTiledContraction(const KernelGroup &g, const std::string &name, const Knobs &k);
kir::Kernel recipeChainedContraction(const KernelGroup &g, const std::string &name, const Knobs &k);
kir::Kernel recipeDirectConv(const KernelGroup &g, const std::string &name, const Knobs &k);
kir::Kernel recipeConvChain(const KernelGroup &g, const std::string &name, const Knobs &k);

// Shared by recipes: the kernel's param buffers for the group (inputs then outputs), created
// with the values' dtypes and shapes, roles In/Out, and a name -> buffer map.
std::vector<kir::BufferP> groupParams(const KernelGroup &g,
                                      std::map<const Value *, kir::BufferP> &byValue);
// The start every recipe's kernel shares: named, labelled with `recipe`, its params from
// groupParams (filling `byValue`).
kir::Kernel startKernel(const KernelGroup &g, const std::string &name, const std::string &recipe,
                        std::map<const Value *, kir::BufferP> &byValue);

// --- typed knobs: one struct per recipe; absent fields take the recipe's defaults for the
// plan target (computed by its build from the problem). knobsToMap / knobsFromMap convert to
// and from Kernel::knobs' name -> int map (plan.yaml, printing) with the names unchanged.
template <class K>
struct KnobField {
  const char *name;
  std::optional<int64_t> K::*member;
};
template <class K>
KnobSet knobsToMap(const K &k) {
  KnobSet m;
  for (const KnobField<K> &f : K::fields())
    if (k.*f.member)
      m[f.name] = *(k.*f.member);
  return m;
}
template <class K>
K knobsFromMap(const KnobSet &m) {
  K k;
  for (const KnobField<K> &f : K::fields())
    if (auto it = m.find(f.name); it != m.end())
      k.*f.member = it->second;
  return k;
}

// A knob of a built kernel (Kernel::knobs) read through its recipe's typed struct, `dflt` when
// the kernel does not record it: knobOf(k, &ChainKnobs::BM, 1). The member names the knob, so
// a reader cannot ask for a knob its recipe does not have.
template <class K>
int64_t knobOf(const kir::Kernel &k, std::optional<int64_t> K::*member, int64_t dflt = 0) {
  for (const KnobField<K> &f : K::fields())
    if (f.member == member) {
      auto it = k.knobs.find(f.name);
      return it == k.knobs.end() ? dflt : it->second;
    }
  return dflt;
}

// pointwise, data_movement, pooling: one flat loop, threads x vec elements per block.
struct FlatLoopKnobs {
  std::optional<int64_t> threads, vec;
  static std::array<KnobField<FlatLoopKnobs>, 2> fields() {
    return {{{"threads", &FlatLoopKnobs::threads}, {"vec", &FlatLoopKnobs::vec}}};
  }
};
// pooling: the flat loop's knobs (GPU plans); rows: output rows per block (the host's row form).
// plane (0/1): the host's phase-plane form of a 2-D max_pool.
struct PoolingKnobs {
  std::optional<int64_t> threads, vec, rows, plane;
  static std::array<KnobField<PoolingKnobs>, 4> fields() {
    return {{{"threads", &PoolingKnobs::threads},
             {"vec", &PoolingKnobs::vec},
             {"rows", &PoolingKnobs::rows},
             {"plane", &PoolingKnobs::plane}}};
  }
};
// direct_conv: threads over output pixels (GPU plans, conv_transpose); rows: output rows per
// block (the host's row form).
// plane (0/1): the host's padded-plane form for narrow 2-D convs.
struct DirectConvKnobs {
  std::optional<int64_t> threads, rows, plane;
  static std::array<KnobField<DirectConvKnobs>, 3> fields() {
    return {{{"threads", &DirectConvKnobs::threads},
             {"rows", &DirectConvKnobs::rows},
             {"plane", &DirectConvKnobs::plane}}};
  }
};
// reduction: threads per block.
struct ThreadsKnobs {
  std::optional<int64_t> threads;
  static std::array<KnobField<ThreadsKnobs>, 1> fields() {
    return {{{"threads", &ThreadsKnobs::threads}}};
  }
};
// online_norm: threads per row, vec consecutive elements per step, cache_row (0/1).
struct NormKnobs {
  std::optional<int64_t> threads, vec, cacheRow, lanes;
  static std::array<KnobField<NormKnobs>, 4> fields() {
    return {{{"threads", &NormKnobs::threads},
             {"vec", &NormKnobs::vec},
             {"cache_row", &NormKnobs::cacheRow},
             {"lanes", &NormKnobs::lanes}}};
  }
};
// streaming_attention: query tile BR, key tile BC, threads.
struct AttentionKnobs {
  std::optional<int64_t> BR, BC, threads;
  static std::array<KnobField<AttentionKnobs>, 3> fields() {
    return {{{"BR", &AttentionKnobs::BR},
             {"BC", &AttentionKnobs::BC},
             {"threads", &AttentionKnobs::threads}}};
  }
};
// tiled_contraction: block tile BM x BN, k step BK, thread tile TM x TN (threads follows).
struct ContractionKnobs {
  // tiles: host bf16 products on AMX tiles (1) or vdpbf16ps (0); set only where the planned
  // hardware and the folder's -march have AMX-BF16.
  std::optional<int64_t> BM, BN, BK, TM, TN, threads, tiles;
  static std::array<KnobField<ContractionKnobs>, 7> fields() {
    return {{{"BM", &ContractionKnobs::BM},
             {"BN", &ContractionKnobs::BN},
             {"BK", &ContractionKnobs::BK},
             {"TM", &ContractionKnobs::TM},
             {"TN", &ContractionKnobs::TN},
             {"threads", &ContractionKnobs::threads},
             {"tiles", &ContractionKnobs::tiles}}};
  }
};

// chained_contraction: row tile BM, hidden tile BH, the first product's k step BK, thread
// tile TM x TN of the hidden tile (threads follows; the output's thread tile is TM x N2 TN / BH).
struct ChainKnobs {
  std::optional<int64_t> BM, BH, BK, TM, TN, threads;
  static std::array<KnobField<ChainKnobs>, 6> fields() {
    return {{{"BM", &ChainKnobs::BM},
             {"BH", &ChainKnobs::BH},
             {"BK", &ChainKnobs::BK},
             {"TM", &ChainKnobs::TM},
             {"TN", &ChainKnobs::TN},
             {"threads", &ChainKnobs::threads}}};
  }
};

// conv_chain: output rows per block, output rows per projection step (G), the projection's k
// step (BK).
struct ConvChainKnobs {
  std::optional<int64_t> rows, G, BK;
  static std::array<KnobField<ConvChainKnobs>, 3> fields() {
    return {
        {{"rows", &ConvChainKnobs::rows}, {"G", &ConvChainKnobs::G}, {"BK", &ConvChainKnobs::BK}}};
  }
};

// --- typed problem descriptions (Kernel::problem), set by each build ---
struct FlatLoopProblem : kir::ProblemFacts {
  int64_t n = 1;                 // elements of the flat loop
  int64_t taps = 0;              // pooling: window taps per output element
  int64_t rows = 0;              // pooling, host row form: output rows (elements / the last dim)
  int64_t stride = 1;            // pooling: the last dim's stride
  int64_t plane = 0, padded = 0; // max_pool plane form: output grid, floats per phase plane,
  int64_t planeRows = 0;         // and output rows per plane
  bool blocked = false;          // pooling on channel blocks: one 16-lane vector per pixel
  int64_t lineWork = 0;          // serial lines (flatloop::buildLines): steps each line walks
  bool planes = false;           // flatloop::buildPlanes: padded to any vector width
};
struct ReductionProblem : kir::ProblemFacts {
  int64_t rows = 1, len = 1; // output elements; reduced elements per output
  bool columns = false;      // host column form: 16 outputs per block, one vector state
  bool perThread = false;    // GPU thread form: one output per thread, a serial fold
};
struct NormProblem : kir::ProblemFacts {
  int64_t rows = 1, len = 1; // rows; elements one state summarises
  int64_t inner = 1;         // product of the dims after the normalised ones (1: contiguous rows)
  NormAlgebra algebra = NormAlgebra::Softmax; // the NormSpec's state algebra
};
struct AttentionProblem : kir::ProblemFacts {
  int64_t batch = 1, Sq = 1, Sk = 1, D = 1, Dv = 1;
  bool causal = false;
  // GPU plans in reduced precision: both products' tensor-core instruction and the precision
  // the tiles are staged in (ContractionProblem's).
  kir::MmaFrag frag = kir::MmaFrag::None;
  Precision precision = Precision::F32;
};
struct ContractionProblem : kir::ProblemFacts {
  int64_t M = 1, N = 1, K = 1, batch = 1;
  // Host tiles reading an operand where it lies (mma_tile views): A's rows in place, B in the
  // column panels of a packed weight. No tile copy is made for such an operand.
  bool aInPlace = false, bPanels = false, bInPlace = false;
  int64_t bPanelWidth = 0; // B's packed panel width (32 or 64 floats), whatever the tile; 0: none
  bool bStreamed = false;  // B's panels streamed into L2 a slice ahead (mma_tile bPrefetch)
  int64_t kAlign = 8;      // K steps a multiple of this (16: A in blocks of 16 lanes)
  bool band = false;       // a k x k blocked conv reading A from the band its block fills
  // The band's row-group form: tiles of whole output rows of `rowGroup` pixels (BM a multiple),
  // `rowGroups` output rows per image; the band a tile of R rows fills holds bandBytes0 + (R -
  // 1) bandRowBytes; the weight (B) holds bBytes.
  int64_t rowGroup = 0, rowGroups = 0, bandBytes0 = 0, bandRowBytes = 0, bBytes = 0;
  // A blocked input's band: the k of one input channel block, all its taps (KH KW 16).
  int64_t channelBlockK = 0;
  // The share of the products the micro-kernel computes: the band's kernel rows that read only
  // padding for a whole tile are skipped (Contraction::bandTapRows).
  double liveShare = 1.0;
  // A row norm folded into A (lower/fusion.h rule 7): each block computes its tile rows'
  // statistics over K first and stages A normalised.
  bool normRows = false;
  // A row norm applied to the output rows (rule 9): tiles of whole rows (BN = N, one thread).
  bool normEpilogue = false;
  // The tile's init and epilogue ride on the micro-kernel (FuseMmaTileEpilogue will fuse
  // them): a single K step never stores the C tile.
  bool fusedTile = false;
  // Host cycles per output element of the epilogue's transcendental steps (blocked convs).
  double epilogueCycles = 0;
  // Host cycles per 16-lane vector of a fused prologue the band fill applies (a band form).
  double bandPrologueCycles = 0;
  // GPU plans of a reduced-precision node (ir/precision.h): the tensor-core instruction the
  // tile runs on and the precision its operands are staged in; None / fp32: SIMT f32.
  kir::MmaFrag frag = kir::MmaFrag::None;
  Precision precision = Precision::F32;
  // Host plans: the micro-kernel's arithmetic, from B's packed panels (bf16 pairs, int8 quads).
  Precision hostProducts = Precision::F32;
  // Host plans: B's stored products (a bf16 or int8 weight: BF16 / I8), whatever the tile reads
  // it as (its products may run on AMX tiles where B is read as its pair / quad panels).
  Precision bStored = Precision::F32;
};
// Y = epi2(epi1(X W1) W2): X [batch, M, K1], W1 [K1, H], W2 [H, N2].
struct ChainProblem : kir::ProblemFacts {
  int64_t M = 1, K1 = 1, H = 1, N2 = 1, batch = 1;
  int64_t firsts = 1;        // first contractions over X (a gated pair: 2)
  bool normEpilogue = false; // a row norm over the output rows (rule 9)
  int64_t w1Bytes = 0, w2Bytes = 0, xBytes = 0;
  // The batch entries each operand holds (split-chains' slices: W1 and W2 hold one per slice,
  // X one per batch entry of its own, broadcast over the slices).
  int64_t w1Entries = 1, w2Entries = 1, xEntries = 1;
  bool normRows = false; // a row norm folded into X (rule 7): statistics per block, X staged
  bool aInPlace = false; // host: X's rows read where they lie
  bool b1Views = false;  // host: W1 read in place (packed panels or rows)
  bool b2Views = false;  // host: W2 read in place
  bool b1Rows = false, b2Rows = false; // ... as rows (the micro-kernel packs them as it goes)
};
// An inverted residual (conv_chain): input [batch, K1 / 16, H, W, 16] expanded to Hp channels
// (K1 = 0: no expansion), a depthwise window of `taps` spanning `span` input rows at `stride`
// to [OH, OW], projected to N2 channels.
struct ConvChainProblem : kir::ProblemFacts {
  int64_t batch = 1, H = 1, W = 1, OH = 1, OW = 1, K1 = 0, Hp = 16, N2 = 16;
  int64_t taps = 1, span = 1, stride = 1;
  // Transcendental steps of each conv's epilogue (its attribute and the activation nodes after it).
  double expandEpilogue = 0, dwEpilogue = 0, outEpilogue = 0;
};
struct DirectConvProblem : kir::ProblemFacts {
  int64_t pixels = 1, taps = 1;  // output pixels per (n, oc); taps per output element
  int64_t width = 0;             // host row form: output pixels per row (0: pixel per thread)
  int64_t plane = 0, padded = 0; // host plane form: grid positions, padded-plane floats
  bool planeLegal = false;       // a 2-D conv with equal strides (the plane form applies)
  int64_t kernelTaps = 1;        // taps per input channel
  int64_t stride = 1;            // the last dim's stride
  int64_t inputRows = 1, inputWidth = 1; // an input plane's rows (outer dims) and width
  bool blocked = false;                  // a depthwise blocked_conv: one 16-lane vector per pixel
};

} // namespace aicf
