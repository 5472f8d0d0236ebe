// libFuzzer harness: the .npy reader (and write + read back) (body: fuzz_bodies.cpp).
#include "tests/fuzz/fuzz_harness.h"

AICF_FUZZ_HARNESS(npy)
