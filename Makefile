# topspin: every target installs missing Debian packages (scripts/install-deps.sh),
# configures with CMake + Ninja and builds before it runs anything.
#
#   make          release build into build/
#   make test     build, then every test (ctest); non-zero exit on any failure
#   make build-notorch  the CLI without LibTorch (CI builds it too)
#   make install  the binary into PREFIX/bin (default /usr/local)
#   make demo     the main job on the embedded default config
#   make bench    the named benchmarks, each against its peer in the same run
#   make asan     AddressSanitizer + UBSan build and tests of the modules without LibTorch,
#                 then every libFuzzer target for FUZZ_SECONDS each (clang)
#   make format   clang-format every source file
#   make tidy     clang-tidy over the project's sources

BUILD_DIR ?= build
ASAN_DIR  ?= build-asan
FUZZ_DIR  ?= build-fuzz
TSAN_DIR  ?= build-tsan
FUZZ_SECONDS ?= 30
JOBS      ?= $(shell nproc)
CMAKE_ARGS ?=

.PHONY: all build build-notorch install deps deps-bench deps-dev deps-fuzz test demo bench asan tsan fuzz format tidy clean

all: build

deps:
	@scripts/install-deps.sh --check >/dev/null 2>&1 || scripts/install-deps.sh

deps-bench:
	@scripts/install-deps.sh --bench --check >/dev/null 2>&1 || scripts/install-deps.sh --bench

deps-fuzz:
	@scripts/install-deps.sh --fuzz --check >/dev/null 2>&1 || scripts/install-deps.sh --fuzz

deps-dev:
	@scripts/install-deps.sh --dev --check >/dev/null 2>&1 || scripts/install-deps.sh --dev

$(BUILD_DIR)/build.ninja: | deps
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

build: deps $(BUILD_DIR)/build.ninja
	cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

# Installs build/topspin into $(PREFIX)/bin (default /usr/local).
PREFIX ?= /usr/local
install: build
	cmake --install $(BUILD_DIR) --prefix $(PREFIX)

# The CLI without LibTorch (what make asan, tsan and fuzz configure): CI
# builds it so the torch-free configuration cannot stop compiling.
NOTORCH_DIR ?= build-notorch
$(NOTORCH_DIR)/build.ninja: | deps
	cmake -S . -B $(NOTORCH_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release -DTOPSPIN_WITH_TORCH=OFF \
	  $(CMAKE_ARGS)

build-notorch: deps $(NOTORCH_DIR)/build.ninja
	cmake --build $(NOTORCH_DIR) -j $(JOBS) --target topspin

demo: build
	$(BUILD_DIR)/topspin demo

bench: deps-bench build
	$(BUILD_DIR)/topspin bench core --json $(BUILD_DIR)/bench-core.json
	$(BUILD_DIR)/topspin bench read --json $(BUILD_DIR)/bench-read.json
	$(BUILD_DIR)/topspin bench convert --json $(BUILD_DIR)/bench-convert.json
	$(BUILD_DIR)/topspin bench pipeline --json $(BUILD_DIR)/bench-pipeline.json
	$(BUILD_DIR)/topspin bench order --json $(BUILD_DIR)/bench-order.json
	$(BUILD_DIR)/topspin bench train-ranker --epochs 3 --json $(BUILD_DIR)/bench-train-ranker.json

$(ASAN_DIR)/build.ninja: | deps
	cmake -S . -B $(ASAN_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DTOPSPIN_WITH_TORCH=OFF -DTOPSPIN_SANITIZE=address,undefined $(CMAKE_ARGS)

asan: deps $(ASAN_DIR)/build.ninja
	cmake --build $(ASAN_DIR) -j $(JOBS)
	cd $(ASAN_DIR) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS)
	$(MAKE) fuzz

# ThreadSanitizer over the multi-threaded modules (core's pool, the pipeline).
$(TSAN_DIR)/build.ninja: | deps
	cmake -S . -B $(TSAN_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DTOPSPIN_WITH_TORCH=OFF -DTOPSPIN_SANITIZE=thread $(CMAKE_ARGS)

tsan: deps $(TSAN_DIR)/build.ninja
	cmake --build $(TSAN_DIR) -j $(JOBS) --target core_test pipeline_test
	cd $(TSAN_DIR) && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	  ctest --output-on-failure -j $(JOBS) -R '^(ThreadPool|Pipeline|Transform|FeatureChain|BatchPool)'

$(FUZZ_DIR)/build.ninja: | deps deps-fuzz
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DTOPSPIN_WITH_TORCH=OFF -DTOPSPIN_SANITIZE=address,undefined -DTOPSPIN_FUZZ=ON $(CMAKE_ARGS)

# Each libFuzzer target runs FUZZ_SECONDS from the kept inputs in
# tests/fuzz/<target>/; a crashing input is saved there (commit it: every
# build then replays it as a regression test).
fuzz: deps deps-fuzz $(FUZZ_DIR)/build.ninja
	cmake --build $(FUZZ_DIR) -j $(JOBS)
	scripts/run-fuzzers.sh $(FUZZ_DIR) $(FUZZ_SECONDS)

format: deps-dev
	clang-format -i $$(git ls-files '*.cc' '*.h')

tidy: deps-dev build
	clang-tidy -p $(BUILD_DIR) --quiet $$(git ls-files 'src/*.cc' | grep -v '_test.cc$$')

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR) $(NOTORCH_DIR)
