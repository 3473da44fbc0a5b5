# ggufkit. `make` builds build/gguf; `make demo` and `make test` also install what is missing.
#   make            the library and the CLI (Release), build/gguf
#   make python     the Python package ggufkit in build/python (PYTHONPATH=build/python python3 -c 'import ggufkit')
#   make demo       installs the build dependencies, builds the CLI, runs the main job on the sample
#   make test       installs everything the tests need, builds (Release and ASan+UBSan), runs every
#                   test and a short fuzz run; prints the time of each phase
#   make install    installs the CLI, headers, library, CMake package, pkg-config file, man page,
#                   bash completion and the Python package (for the system python3) under PREFIX
#                   (default /usr/local; DESTDIR is honoured)
BUILD      ?= build
SAN_BUILD  ?= build-san
JOBS       ?= $(shell nproc)
FUZZ_SECONDS ?= 40
PREFIX     ?= /usr/local
SAMPLE     := samples/tiny-llama-f16.gguf

.PHONY: all build python deps deps-build oracle san test test-release test-san fuzz demo install bench clean

all: build

# Configures (Ninja when installed) and builds only what a user runs: the library and the CLI.
build:
	@scripts/configure.sh release $(BUILD)
	@cmake --build $(BUILD) -j$(JOBS) --target gguf

# The Python package, in the same build directory (the library is compiled once for both).
python: deps-build
	@scripts/configure.sh release $(BUILD) -DGGUFKIT_PYTHON=ON
	@cmake --build $(BUILD) -j$(JOBS) --target python

deps:
	@scripts/install-deps.sh test

deps-build:
	@scripts/install-deps.sh build

oracle:
	@scripts/install-oracle.sh

# The sanitizer build: clang, ASan+UBSan, coverage-instrumented library; the tests and the fuzzers
# both link it, so the library is compiled once for both.
san:
	@scripts/configure.sh sanitize $(SAN_BUILD)
	@cmake --build $(SAN_BUILD) -j$(JOBS)

test-release:
	@scripts/configure.sh release $(BUILD) -DGGUFKIT_TESTS=ON -DGGUFKIT_PYTHON=ON
	@cmake --build $(BUILD) -j$(JOBS)
	@ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

test-san: san
	@ctest --test-dir $(SAN_BUILD) --output-on-failure -j$(JOBS) -LE oracle

fuzz: san
	@scripts/run-fuzz.sh $(SAN_BUILD)/fuzz/fuzz_reader $(FUZZ_SECONDS)
	@scripts/run-fuzz.sh $(SAN_BUILD)/fuzz/fuzz_safetensors $(FUZZ_SECONDS)

# Every phase, timed: scripts/run-tests.sh.
test:
	@BUILD=$(BUILD) SAN_BUILD=$(SAN_BUILD) JOBS=$(JOBS) FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/run-tests.sh

demo: deps-build build
	@scripts/demo.sh $(BUILD)/gguf $(SAMPLE)

install: build python
	@cmake --build $(BUILD) -j$(JOBS) --target ggufkit gguf gguf-docs python
	@cmake --install $(BUILD) --prefix $(PREFIX) --strip

bench: deps oracle
	@bench/run.sh

clean:
	rm -rf $(BUILD) $(SAN_BUILD) build-asan build-fuzz build-bench
