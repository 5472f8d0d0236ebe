// The x86 instruction-set extensions a host libmodel.so may need, as one list shared by the
// compiler and the runtime so the two cannot disagree on a name. aicfc records in plan.yaml
// (target.isa) each extension whose predefined macro the C++ compiler sets for the folder's
// -march (backend/host/host_build.cpp); the runtime refuses at aicf_open a folder that needs one
// the running CPU lacks (CPUID, and XGETBV for whether the OS saves the AVX and AVX-512 registers),
// instead of faulting with SIGILL in the middle of a run.
//
// X(name, macro, leaf, subleaf, reg, bit, state): the name as plan.yaml spells it; the macro
// `c++ -march=ARCH -dM -E` defines when ARCH may use it; where CPUID reports it (leaf, subleaf,
// register, bit); and the register state the OS must save for it (XCR0): 0 none beyond SSE,
// 1 AVX (YMM), 2 AVX-512 (YMM, opmask, ZMM), 3 AMX (the tile configuration and data; Linux
// also wants a process's request before its first tile instruction, which the kernels make). The
// runtime reads CPUID itself rather than asking
// __builtin_cpu_supports, whose accepted names differ between GCC and clang versions. The order
// is the order in plan.yaml. Baseline x86-64 (SSE, SSE2) is implied and not listed.
#ifndef AICF_RUNTIME_ISA_FEATURES_H
#define AICF_RUNTIME_ISA_FEATURES_H

#define AICF_ISA_FEATURES(X)                                                                       \
  X("sse3", "__SSE3__", 1, 0, ecx, 0, 0)                                                           \
  X("ssse3", "__SSSE3__", 1, 0, ecx, 9, 0)                                                         \
  X("sse4.1", "__SSE4_1__", 1, 0, ecx, 19, 0)                                                      \
  X("sse4.2", "__SSE4_2__", 1, 0, ecx, 20, 0)                                                      \
  X("sse4a", "__SSE4A__", 0x80000001, 0, ecx, 6, 0)                                                \
  X("popcnt", "__POPCNT__", 1, 0, ecx, 23, 0)                                                      \
  X("lzcnt", "__LZCNT__", 0x80000001, 0, ecx, 5, 0)                                                \
  X("movbe", "__MOVBE__", 1, 0, ecx, 22, 0)                                                        \
  X("bmi", "__BMI__", 7, 0, ebx, 3, 0)                                                             \
  X("bmi2", "__BMI2__", 7, 0, ebx, 8, 0)                                                           \
  X("aes", "__AES__", 1, 0, ecx, 25, 0)                                                            \
  X("pclmul", "__PCLMUL__", 1, 0, ecx, 1, 0)                                                       \
  X("sha", "__SHA__", 7, 0, ebx, 29, 0)                                                            \
  X("adx", "__ADX__", 7, 0, ebx, 19, 0)                                                            \
  X("avx", "__AVX__", 1, 0, ecx, 28, 1)                                                            \
  X("f16c", "__F16C__", 1, 0, ecx, 29, 1)                                                          \
  X("fma", "__FMA__", 1, 0, ecx, 12, 1)                                                            \
  X("fma4", "__FMA4__", 0x80000001, 0, ecx, 16, 1)                                                 \
  X("xop", "__XOP__", 0x80000001, 0, ecx, 11, 1)                                                   \
  X("avx2", "__AVX2__", 7, 0, ebx, 5, 1)                                                           \
  X("avxvnni", "__AVXVNNI__", 7, 1, eax, 4, 1)                                                     \
  X("gfni", "__GFNI__", 7, 0, ecx, 8, 0)                                                           \
  X("vaes", "__VAES__", 7, 0, ecx, 9, 1)                                                           \
  X("vpclmulqdq", "__VPCLMULQDQ__", 7, 0, ecx, 10, 1)                                              \
  X("avx512f", "__AVX512F__", 7, 0, ebx, 16, 2)                                                    \
  X("avx512cd", "__AVX512CD__", 7, 0, ebx, 28, 2)                                                  \
  X("avx512vl", "__AVX512VL__", 7, 0, ebx, 31, 2)                                                  \
  X("avx512bw", "__AVX512BW__", 7, 0, ebx, 30, 2)                                                  \
  X("avx512dq", "__AVX512DQ__", 7, 0, ebx, 17, 2)                                                  \
  X("avx512ifma", "__AVX512IFMA__", 7, 0, ebx, 21, 2)                                              \
  X("avx512vbmi", "__AVX512VBMI__", 7, 0, ecx, 1, 2)                                               \
  X("avx512vbmi2", "__AVX512VBMI2__", 7, 0, ecx, 6, 2)                                             \
  X("avx512vnni", "__AVX512VNNI__", 7, 0, ecx, 11, 2)                                              \
  X("avx512bitalg", "__AVX512BITALG__", 7, 0, ecx, 12, 2)                                          \
  X("avx512vpopcntdq", "__AVX512VPOPCNTDQ__", 7, 0, ecx, 14, 2)                                    \
  X("avx512bf16", "__AVX512BF16__", 7, 1, eax, 5, 2)                                               \
  X("avx512er", "__AVX512ER__", 7, 0, ebx, 27, 2)                                                  \
  X("avx512pf", "__AVX512PF__", 7, 0, ebx, 26, 2)                                                  \
  X("avx512fp16", "__AVX512FP16__", 7, 0, edx, 23, 2)                                              \
  X("amx-tile", "__AMX_TILE__", 7, 0, edx, 24, 3)                                                  \
  X("amx-bf16", "__AMX_BF16__", 7, 0, edx, 22, 3)                                                  \
  X("amx-int8", "__AMX_INT8__", 7, 0, edx, 25, 3)

#endif /* AICF_RUNTIME_ISA_FEATURES_H */
