// Candidate knobs per recipe (see search_space.h). One function per recipe; the knob meanings
// are documented in the recipe files (lower/recipe_*.cpp).
#include "lower/search_space.h"
#include "support/int_math.h"

#include <algorithm>
#include <set>

namespace aicf {

namespace {

int64_t extent(const kir::Kernel &k, const char *name, int64_t dflt = 1) {
  auto it = k.extents.find(name);
  return it == k.extents.end() ? dflt : it->second;
}
// Tile of at most `maxTile` that splits `d` into equal tiles, rounded up to `align` (132 rows
// with maxTile 128: two tiles of 72, not 128 + 4).
int64_t balanced(int64_t d, int64_t maxTile, int64_t align) {
  d = std::max<int64_t>(d, 1);
  return roundUp(ceilDiv(d, ceilDiv(d, maxTile)), align);
}

std::vector<KnobSet> contraction(const kir::Kernel &k, const Hardware &hw) {
  int64_t M = extent(k, "M"), N = extent(k, "N"), K = extent(k, "K");
  std::vector<KnobSet> out;
  if (!hw.gpu) {
    // One thread owns a tile; the micro-kernel packs B panels. Tiles from balanced splits of
    // each dimension: the A block (BM x BK) should live in L2, the B panel in L1 / L2.
    std::set<int64_t> bms, bns, bks;
    for (int64_t t : {32, 64, 128, 256})
      bms.insert(balanced(M, t, 8));
    for (int64_t t : {64, 128, 256, 512})
      bns.insert(balanced(N, t, 16));
    for (int64_t t : {64, 128, 256})
      bks.insert(balanced(K, t, 8));
    for (int64_t bm : bms)
      for (int64_t bn : bns)
        for (int64_t bk : bks)
          out.push_back({{"BM", bm}, {"BN", bn}, {"BK", bk}, {"TM", bm}, {"TN", bn}});
    return out;
  }
  // GPU: block tiles of 32..128 (no larger than the padded problem), a register tile TM x TN
  // per thread, 64..256 threads per block.
  auto tiles = [](int64_t d) {
    std::vector<int64_t> t;
    for (int64_t v : {32, 64, 128})
      if (v == 32 || v / 2 < d)
        t.push_back(v);
    return t;
  };
  for (int64_t bm : tiles(M))
    for (int64_t bn : tiles(N))
      for (int64_t bk : {16, 32})
        for (int64_t tm : {2, 4, 8})
          for (int64_t tn : {2, 4, 8}) {
            if (bk > std::max<int64_t>(16, roundUp(K, 16)) || bm % tm || bn % tn)
              continue;
            int64_t threads = (bm / tm) * (bn / tn);
            if (threads < 64 || threads > 256)
              continue;
            out.push_back({{"BM", bm}, {"BN", bn}, {"BK", bk}, {"TM", tm}, {"TN", tn}});
          }
  return out;
}

std::vector<KnobSet> attention(const kir::Kernel &k, const Hardware &hw) {
  int64_t Sq = extent(k, "Sq"), Sk = extent(k, "Sk");
  std::vector<KnobSet> out;
  for (int64_t br : {16, 32, 64, 128}) {
    if (br / 2 >= std::max<int64_t>(Sq, 16))
      continue; // a query tile mostly padding
    for (int64_t bc : {16, 32, 64, 128}) {
      if (bc / 2 >= std::max<int64_t>(Sk, 16))
        continue;
      if (!hw.gpu) {
        out.push_back({{"BR", br}, {"BC", bc}, {"threads", 1}});
        continue;
      }
      for (int64_t rowsPerThread : {1, 2})
        if (br / rowsPerThread >= 32) // whole warps
          out.push_back({{"BR", br}, {"BC", bc}, {"threads", br / rowsPerThread}});
    }
  }
  return out;
}

std::vector<KnobSet> onlineNorm(const kir::Kernel &k, const Hardware &hw) {
  int64_t len = extent(k, "len"), inner = extent(k, "inner");
  std::vector<KnobSet> out;
  std::vector<int64_t> vecs;
  for (int64_t v : {1, 2, 4, 8, 16})
    if ((v == 1 || (inner == 1 && len % v == 0)) && v <= (hw.gpu ? 4 : hw.vectorLanesF32()))
      vecs.push_back(v);
  if (hw.gpu) {
    for (int64_t t : {32, 64, 128, 256, 512})
      for (int64_t v : vecs) {
        if (t > 32 && t * v / 2 >= len)
          continue; // half the threads would idle
        for (int64_t cache : {0, 1})
          out.push_back({{"threads", t}, {"vec", v}, {"cache_row", cache}});
      }
    return out;
  }
  // Host: the vector width does not split a Welford chain (measured slower at few threads),
  // so layer norms vary only the number of chains.
  if (extent(k, "welford", 0))
    vecs = {1};
  for (int64_t t : {1, 4, 8, 16, 32})
    for (int64_t v : vecs)
      if (t == 1 || t * v <= len)
        out.push_back({{"threads", t}, {"vec", v}, {"cache_row", 0}});
  return out;
}

std::vector<KnobSet> reduction(const kir::Kernel &k, const Hardware &hw) {
  int64_t len = extent(k, "len");
  std::vector<KnobSet> out;
  for (int64_t t :
       hw.gpu ? std::vector<int64_t>{32, 64, 128, 256, 512} : std::vector<int64_t>{1, 4, 8, 16})
    if (t == (hw.gpu ? 32 : 1) || t / 2 < len)
      out.push_back({{"threads", t}});
  return out;
}

std::vector<KnobSet> directConv(const kir::Kernel &k, const Hardware &hw) {
  int64_t pixels = extent(k, "pixels");
  std::vector<KnobSet> out;
  for (int64_t t : hw.gpu ? std::vector<int64_t>{32, 64, 128, 256} : std::vector<int64_t>{1, 4})
    if (t == (hw.gpu ? 32 : 1) || t / 2 < pixels)
      out.push_back({{"threads", t}});
  return out;
}

// Pointwise, data movement and pooling: one flat loop of n elements, threads x vec per block.
std::vector<KnobSet> flatLoop(const kir::Kernel &k, const Hardware &hw, int64_t maxVec) {
  int64_t n = extent(k, "n");
  std::vector<KnobSet> out;
  for (int64_t t :
       hw.gpu ? std::vector<int64_t>{64, 128, 256, 512} : std::vector<int64_t>{1, 4, 16})
    for (int64_t v : {1, 2, 4, 8, 16}) {
      if (v > maxVec || (v > 1 && n % v != 0) || (hw.gpu && v > 4))
        continue;
      if (t * v > 16 && t * v / 2 >= n)
        continue; // one mostly idle block
      out.push_back({{"threads", t}, {"vec", v}});
    }
  return out;
}

} // namespace

std::vector<KnobSet> candidateKnobs(const kir::Kernel &dflt, const Hardware &hw) {
  const std::string &r = dflt.recipe;
  if (r == "tiled_contraction")
    return contraction(dflt, hw);
  if (r == "streaming_attention")
    return attention(dflt, hw);
  if (r == "online_norm")
    return onlineNorm(dflt, hw);
  if (r == "reduction")
    return reduction(dflt, hw);
  if (r == "direct_conv")
    return directConv(dflt, hw);
  if (r == "pooling")
    return flatLoop(dflt, hw, 4);
  if (r == "pointwise" || r == "data_movement")
    return flatLoop(dflt, hw, 16);
  return {};
}

} // namespace aicf
