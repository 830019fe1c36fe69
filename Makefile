# The two commands of the README:  make run  and  make test.  Both install what is missing first.
JOBS ?= $(shell nproc)
BUILD ?= build

.PHONY: all setup build run test bench test-asan test-tsan fuzz clean

all: build

setup:
	@./scripts/setup.sh

build: setup
	@cmake --preset release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# The main job on the bundled default data (data/a9a.zst, data/a9a.t.zst).
run: build
	@./scripts/main_job.sh $(BUILD)/polymargin

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

bench: build
	@./bench/run_all.sh $(BUILD)

test-asan: setup
	@cmake --preset asan >/dev/null
	@cmake --build build-asan -j $(JOBS)
	@cd build-asan && ctest --output-on-failure -j $(JOBS)

test-tsan: setup
	@cmake --preset tsan >/dev/null
	@cmake --build build-tsan -j $(JOBS)
	@cd build-tsan && ctest --output-on-failure -j $(JOBS)

# libFuzzer targets (clang, ASan + UBSan) for a minute each; `make test` runs them for 8 s each.
fuzz: setup
	@FUZZ_SECONDS=$${FUZZ_SECONDS:-60} ./fuzz/run.sh

clean:
	rm -rf build build-debug build-asan build-tsan build-fuzz
