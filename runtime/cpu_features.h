// The instruction-set extensions the running CPU has, by the names of runtime/isa_features.h:
// the CPUID bit and, for AVX / AVX-512 / AMX extensions, the register state the OS saves (XCR0),
// since a CPU whose OS does not save those registers faults on their instructions all the same.
// The runtime refuses at aicf_open a folder whose target.isa names one this CPU lacks.
#ifndef AICF_RUNTIME_CPU_FEATURES_H
#define AICF_RUNTIME_CPU_FEATURES_H

#include <string>

namespace aicf::rt {

bool cpuHas(const std::string &name);   // false for a name this CPU lacks, or no x86 CPU
bool knownIsa(const std::string &name); // one of runtime/isa_features.h's names

} // namespace aicf::rt

#endif /* AICF_RUNTIME_CPU_FEATURES_H */
