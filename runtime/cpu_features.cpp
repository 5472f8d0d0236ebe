// What this CPU has, by the names of runtime/isa_features.h (see runtime/cpu_features.h).
#include "runtime/cpu_features.h"

#include "runtime/isa_features.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace aicf::rt {
namespace {

#if defined(__x86_64__) || defined(__i386__)
struct CpuidRegs {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

CpuidRegs cpuid(unsigned leaf, unsigned subleaf) {
  CpuidRegs r;
  unsigned maxLeaf = __get_cpuid_max(leaf & 0x80000000u, nullptr);
  if (maxLeaf < leaf)
    return r; // a leaf the CPU does not have: every bit reads as absent
  __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
  return r;
}

// XCR0 when the OS has enabled XSAVE (CPUID.1:ECX.OSXSAVE), else 0.
uint64_t osSavedState() {
  if (!(cpuid(1, 0).ecx & (1u << 27)))
    return 0;
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}
#endif

} // namespace

bool cpuHas(const std::string &name) {
#if defined(__x86_64__) || defined(__i386__)
  static const std::map<std::string, bool> has = [] {
    const uint64_t xcr0 = osSavedState();
    // By state: none; XMM + YMM; + opmask + ZMM; the tile configuration and data.
    const bool saved[] = {true, (xcr0 & 0x6) == 0x6, (xcr0 & 0xe6) == 0xe6,
                          (xcr0 & 0x60000) == 0x60000};
    std::map<std::string, bool> m;
#define AICF_ISA_PROBE(name, macro, leaf, subleaf, reg, bit, state)                                \
  m[name] = ((cpuid(leaf, subleaf).reg >> (bit)) & 1u) != 0 && saved[state];
    AICF_ISA_FEATURES(AICF_ISA_PROBE)
#undef AICF_ISA_PROBE
    return m;
  }();
  auto it = has.find(name);
  return it != has.end() && it->second;
#else
  (void)name;
  return false; // an x86 extension: never present on another architecture
#endif
}

bool knownIsa(const std::string &name) {
  static const char *const names[] = {
#define AICF_ISA_NAME(name, ...) name,
      AICF_ISA_FEATURES(AICF_ISA_NAME)
#undef AICF_ISA_NAME
  };
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

} // namespace aicf::rt
