# ggufkit: `make` builds build/gguf; `make demo` and `make test` also install what is missing.
BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
JOBS       ?= $(shell nproc)
FUZZ_SECONDS ?= 60
SAMPLE     := samples/tiny-llama-f16.gguf

.PHONY: all build deps oracle asan fuzz-build fuzz test test-release test-asan demo bench clean

all: build

build:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

deps:
	@scripts/install-deps.sh

oracle:
	@scripts/install-oracle.sh

asan:
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DGGUFKIT_SANITIZE=ON -DGGUFKIT_BENCH=OFF >/dev/null
	@cmake --build $(ASAN_BUILD) -j$(JOBS)

fuzz-build:
	@CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGGUFKIT_FUZZ=ON \
	  -DGGUFKIT_TESTS=OFF -DGGUFKIT_BENCH=OFF >/dev/null
	@cmake --build $(FUZZ_BUILD) -j$(JOBS) --target fuzz_reader

# A short libFuzzer run over the reader, seeded with the sample and the shared corpus when present.
fuzz: fuzz-build
	@scripts/run-fuzz.sh $(FUZZ_BUILD)/fuzz/fuzz_reader $(FUZZ_SECONDS)

test-release: build
	@ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

# The sanitizer build runs every test but the oracle comparisons (the oracle is not instrumented).
test-asan: asan
	@ctest --test-dir $(ASAN_BUILD) --output-on-failure -j$(JOBS) -LE oracle

test: deps oracle
	@$(MAKE) --no-print-directory build asan fuzz-build
	@scripts/run-tests.sh $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)/fuzz/fuzz_reader $(FUZZ_SECONDS)

demo: deps build
	@scripts/demo.sh $(BUILD)/gguf $(SAMPLE)

bench: deps oracle
	@bench/run.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) build-bench
