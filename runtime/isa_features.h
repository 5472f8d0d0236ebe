// The x86 instruction-set extensions a host libmodel.so may need, as one list shared by the
// compiler and the runtime so the two cannot disagree on a name. aicfc records in plan.yaml
// (target.isa) each extension whose predefined macro the C++ compiler sets for the folder's
// -march (codegen/host_build.cpp); the runtime refuses at aicf_open a folder that needs one the
// running CPU lacks (__builtin_cpu_supports, which also checks that the OS saves the AVX and
// AVX-512 registers), instead of faulting with SIGILL in the middle of a run.
//
// X(name, macro): the name as plan.yaml and __builtin_cpu_supports spell it, and the macro
// `c++ -march=ARCH -dM -E` defines when ARCH may use it. The order is the order in plan.yaml.
// Baseline x86-64 (SSE, SSE2) is implied and not listed. Every name must be accepted by
// __builtin_cpu_supports of the compiler that builds the runtime (GCC 12 accepts them all).
#ifndef AICF_RUNTIME_ISA_FEATURES_H
#define AICF_RUNTIME_ISA_FEATURES_H

#define AICF_ISA_FEATURES(X)                                                                       \
  X("sse3", "__SSE3__")                                                                            \
  X("ssse3", "__SSSE3__")                                                                          \
  X("sse4.1", "__SSE4_1__")                                                                        \
  X("sse4.2", "__SSE4_2__")                                                                        \
  X("sse4a", "__SSE4A__")                                                                          \
  X("popcnt", "__POPCNT__")                                                                        \
  X("lzcnt", "__LZCNT__")                                                                          \
  X("movbe", "__MOVBE__")                                                                          \
  X("bmi", "__BMI__")                                                                              \
  X("bmi2", "__BMI2__")                                                                            \
  X("aes", "__AES__")                                                                              \
  X("pclmul", "__PCLMUL__")                                                                        \
  X("sha", "__SHA__")                                                                              \
  X("adx", "__ADX__")                                                                              \
  X("avx", "__AVX__")                                                                              \
  X("f16c", "__F16C__")                                                                            \
  X("fma", "__FMA__")                                                                              \
  X("fma4", "__FMA4__")                                                                            \
  X("xop", "__XOP__")                                                                              \
  X("avx2", "__AVX2__")                                                                            \
  X("avxvnni", "__AVXVNNI__")                                                                      \
  X("gfni", "__GFNI__")                                                                            \
  X("vaes", "__VAES__")                                                                            \
  X("vpclmulqdq", "__VPCLMULQDQ__")                                                                \
  X("avx512f", "__AVX512F__")                                                                      \
  X("avx512cd", "__AVX512CD__")                                                                    \
  X("avx512vl", "__AVX512VL__")                                                                    \
  X("avx512bw", "__AVX512BW__")                                                                    \
  X("avx512dq", "__AVX512DQ__")                                                                    \
  X("avx512ifma", "__AVX512IFMA__")                                                                \
  X("avx512vbmi", "__AVX512VBMI__")                                                                \
  X("avx512vbmi2", "__AVX512VBMI2__")                                                              \
  X("avx512vnni", "__AVX512VNNI__")                                                                \
  X("avx512bitalg", "__AVX512BITALG__")                                                            \
  X("avx512vpopcntdq", "__AVX512VPOPCNTDQ__")                                                      \
  X("avx512bf16", "__AVX512BF16__")                                                                \
  X("avx512er", "__AVX512ER__")                                                                    \
  X("avx512pf", "__AVX512PF__")                                                                    \
  X("avx512fp16", "__AVX512FP16__")

#endif /* AICF_RUNTIME_ISA_FEATURES_H */
