// libFuzzer harness: the ONNX importer, then the graph pipeline up to the kernel source (body:
// fuzz_bodies.cpp).
#include "tests/fuzz/fuzz_harness.h"

AICF_FUZZ_HARNESS(onnx)
