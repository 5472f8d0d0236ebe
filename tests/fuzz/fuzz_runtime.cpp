// libFuzzer harness: the runtime's folder loader: fuzzed plan.yaml and weights.bin beside a fixed
// libmodel.so (body: fuzz_bodies.cpp).
#include "tests/fuzz/fuzz_harness.h"

AICF_FUZZ_HARNESS(runtime)
