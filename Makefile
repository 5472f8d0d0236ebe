# A thin front over scripts/ (the scripts are what the README and CI run).
.PHONY: all build demo test format conformance clean

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

clean:
	rm -rf build build-asan
