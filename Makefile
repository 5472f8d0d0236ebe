# A thin front over scripts/ (the scripts are what the README and CI run).
.PHONY: all build demo test format serve-demo conformance conformance-cli bench-matmul bench bench-dyn bench-costmodel bench-footprint silero-vad bench-compile fuzz wheel-check clean

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

# The ONNX backend node tests (libonnx-testdata) by op: passed (interpreted) / host (also
# through the host target) / failed / unsupported; both suites also check their lists. Then
# every node test through the command line (conformance-cli below).
conformance: build
	AICF_CONFORMANCE_TABLE=1 build/tests/aicf_unit -tc='onnx node tests*,conformance host*' --no-intro
	$(MAKE) conformance-cli

# The node tests through the command line, as a user runs a model (aicfc, --const where a
# value must be constant, aicf-run on .npy inputs): Debian's libonnx-testdata and the node tests
# the bench venv's onnx wheel generates (written to bench/work/onnx_node_tests), with ONNX
# Runtime's count on the same tests beside (--peer-ort); the passing tests are guarded by
# testdata/conformance/*_cli_passing.txt (a regression fails the target). Not part of
# `make test` (about half an hour: every test compiles a libmodel.so).
conformance-cli: build
	bench/.venv/bin/python scripts/conformance_cli.py build bench/work/conformance_cli --onnx-tests bench/work/onnx_node_tests --peer-ort --passing testdata/conformance

# Host GEMM throughput of the tiled contraction kernel (256x1024x1024), 1 and 2 threads.
bench-matmul: build
	build/aicf-bench-matmul --reps 21

# aicf vs onnxruntime / OpenVINO / TVM / IREE on the testdata models and the exported networks
# (sets up bench/.venv from PyPI), then the reduced-precision rows (bf16, int8 QDQ) at one thread:
# bench/results.md and bench/latency_ratio.png. ARGS go to bench/run_bench.py (e.g.
# ARGS="--only resnet18 --precision-only"). Not part of `make test`.
bench:
	scripts/bench.sh $(ARGS)

# Symbolic dims (issue 21): each *_dyn testdata model compiled once for ranges of its dims
# against its static compile: compile times, the ranged folder checked at several shapes against
# the interpreter, and latency at the optimised shape (interleaved): bench/dyn_results.md.
# Not part of `make test`.
bench-dyn: build
	AICF_BENCH_NO_WIDE=1 AICF_BENCH_NO_BUILD=1 scripts/bench.sh --setup-only
	/usr/bin/python3 scripts/gen_cnn_models.py --batch-range bench/models_dyn
	bench/.venv/bin/python bench/dyn_bench.py --models testdata/models bench/models_dyn $(ARGS)

# Silero VAD from PyPI (an If on the sample rate, an LSTM step), rates bound by --const, checked
# chunk by chunk against ONNX Runtime. Not part of `make test`.
silero-vad:
	scripts/silero_vad.sh

# How well the cost model ranks schedules: predicted vs measured step times under several
# candidate plans per testdata model (rank correlation), chosen vs default plans, and the CUDA
# register estimates against ptxas: bench/costmodel.md. Not part of `make test`.
bench-costmodel: build
	/usr/bin/python3 bench/costmodel.py

# Serving footprint (issue 55): 1, 2 and 4 processes of one 100 MB-class folder (torchvision's
# resnet50, exported into bench/models_footprint): total PSS / RSS and the time from process
# start to the first result, aicf (weights mapped, or copied) against ONNX Runtime and OpenVINO:
# bench/footprint.md. Not part of `make test`.
bench-footprint: build
	AICF_BENCH_NO_WIDE=1 AICF_BENCH_NO_BUILD=1 scripts/bench.sh --setup-only
	/usr/bin/python3 scripts/gen_cnn_models.py bench/models_footprint resnet50
	bench/.venv/bin/python bench/footprint.py

# libFuzzer harnesses (needs clang) for FUZZ_SECONDS each (default 60; FUZZ_TARGETS picks some
# of onnx ir npy runtime); new crashes are saved under testdata/fuzz/pending/. Not part of
# `make test`, which runs each for 15 s.
fuzz:
	scripts/fuzz.sh

# Compile time against model size (1k..10k-node generated chains, --emit source and -o) with
# the growth per doubling (2 = linear). Not part of `make test`: timings depend on the machine.
bench-compile: build
	scripts/bench_compile.sh relu
	scripts/bench_compile.sh block

clean:
	rm -rf build build-asan build-fuzz

# A bundled model served on Triton Inference Server (PyPI nvidia-pytriton) through the aicf
# Python package, checked under concurrent load: throughput, p50 / p99. Not part of `make test`.
serve-demo:
	scripts/serve_demo.sh

# pip wheel . at the root, installed alone in a fresh venv: compile and run a model (minutes).
wheel-check:
	scripts/wheel_check.sh
