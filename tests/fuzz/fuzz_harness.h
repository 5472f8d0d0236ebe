// The libFuzzer entry points, one harness per file (fuzz_onnx.cpp, ...): the body is in
// fuzz_bodies.cpp. An internal error is a finding: printed, then abort() so that libFuzzer
// saves the input. AICF_FUZZ_VERBOSE=1 prints every outcome (what a .expected file holds).
#pragma once

#include "tests/fuzz/fuzz_bodies.h"

#include <cstdio>
#include <cstdlib>

#define AICF_FUZZ_HARNESS(NAME)                                                                    \
  extern "C" int LLVMFuzzerInitialize(int *, char ***) {                                           \
    aicf::fuzz::init(AICF_TESTDATA);                                                               \
    return 0;                                                                                      \
  }                                                                                                \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {                        \
    aicf::fuzz::Outcome o = aicf::fuzz::NAME(data, size);                                          \
    if (o.internal) {                                                                              \
      std::fprintf(stderr, "internal error: %s\n", o.message.c_str());                             \
      std::abort();                                                                                \
    }                                                                                              \
    if (const char *v = std::getenv("AICF_FUZZ_VERBOSE"); v && *v == '1')                          \
      std::fprintf(stderr, "outcome: %s\n", o.message.c_str());                                    \
    return 0;                                                                                      \
  }
