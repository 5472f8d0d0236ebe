// libFuzzer harness: the Graph IR parser and verifier (and print + parse again) (body:
// fuzz_bodies.cpp).
#include "tests/fuzz/fuzz_harness.h"

AICF_FUZZ_HARNESS(ir)
