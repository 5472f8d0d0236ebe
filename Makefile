# A thin front over scripts/ (the scripts are what the README and CI run).
.PHONY: all build demo test format conformance bench-matmul clean

all: build

build:
	scripts/setup.sh
	scripts/build.sh

demo:
	scripts/demo.sh

test:
	scripts/test.sh

format:
	git ls-files --cached --others --exclude-standard -- '*.cpp' '*.h' | xargs clang-format -i

# The ONNX backend node tests (libonnx-testdata) by op: passed / failed / unsupported.
conformance: build
	AICF_CONFORMANCE_TABLE=1 build/tests/aicf_unit -tc='onnx node tests*' --no-intro

# Host GEMM throughput of the tiled contraction kernel (256x1024x1024), 1 and 2 threads.
bench-matmul: build
	build/aicf-bench-matmul --reps 21

clean:
	rm -rf build build-asan
