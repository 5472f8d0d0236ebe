// The runtime's host memory: aligned blocks (the arena, and a private copy of the weights) and
// the weights image, which by default maps weights.bin read-only so that every process and
// every model object that opens one folder shares one copy of its weights through the page
// cache (issue 55: N serving processes of a 100 MB model held N copies when each read the file
// into its own buffer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace aicf::rt {

// 64-byte aligned, zeroed storage. A block of 2 MiB or more (the weights copy, the arena) is
// 2 MiB aligned and asked for transparent huge pages (Debian's default THP mode is `madvise`):
// the kernels stream tens of MB of weights per run, and on 4 KiB pages every 4 KiB of them
// costs a TLB miss (resnet18 at one thread on an AMD EPYC: 34.9-36.8 -> 33.2-34.8 ms,
// interleaved runs). Where the kernel refuses, the pages stay small.
struct Aligned {
  void *ptr = nullptr;
  explicit Aligned(size_t bytes);
  ~Aligned();
  Aligned(const Aligned &) = delete;
  Aligned &operator=(const Aligned &) = delete;
};

// How weights.bin reaches memory: Map (the default) maps the file read-only and shared, so the
// page cache holds one copy for every process; Copy reads it into private huge pages (fewer TLB
// misses on a large model, one copy per model object). Chosen by the environment variable
// AICF_WEIGHTS (`map` or `copy`).
enum class WeightsMode { Map, Copy };
// AICF_WEIGHTS's mode (Map when unset); throws std::runtime_error naming the variable and the
// values it takes for anything else.
WeightsMode weightsModeFromEnv();
const char *weightsModeName(WeightsMode m);

// weights.bin in memory, read-only for the kernels (the file's bytes at their offsets; the base
// is page-aligned when mapped, 64-byte aligned when copied). `bytes` is what plan.yaml says the
// file holds: a file of another size is refused. Throws std::runtime_error naming the file.
class WeightsImage {
public:
  WeightsImage(const std::string &path, int64_t bytes, WeightsMode mode);
  ~WeightsImage();
  WeightsImage(const WeightsImage &) = delete;
  WeightsImage &operator=(const WeightsImage &) = delete;

  const char *data() const { return data_; }
  int64_t bytes() const { return bytes_; }
  WeightsMode mode() const { return mode_; }

private:
  const char *data_ = nullptr;
  int64_t bytes_ = 0;
  WeightsMode mode_ = WeightsMode::Map;
  void *map_ = nullptr; // Map: the mapping
  std::unique_ptr<Aligned> copy_;
};

} // namespace aicf::rt
