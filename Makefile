# The two commands of the README:  make run  and  make test.  Both install what is missing first.
JOBS ?= $(shell nproc)
BUILD ?= build

.PHONY: all setup build run test install package bench test-asan test-tsan ci fuzz tidy clean

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

# The binary, its man page and bash completion, the Python package, the C++ headers, library and
# CMake package under PREFIX (DESTDIR=... stages them elsewhere). docs/install.md says where each goes.
PREFIX ?= /usr/local
install: build
	@cmake --install $(BUILD) --prefix $(PREFIX)

# The same as a .deb (CPack) in $(BUILD): dpkg -c lists it, apt install ./polymargin_*.deb installs it.
package: build
	@cd $(BUILD) && cpack --config CPackConfig.cmake

bench: build
	@./bench/run_all.sh $(BUILD)

# The sanitizer suites (CMake presets asan and tsan: -O1 -g1, trees build-asan and build-tsan).
# Address + UndefinedBehavior (a UBSan finding aborts the test, a leak fails it): every test but the
# accuracy checks on the full real data sets (RealData/*: minutes each under ASan; the Release suite
# runs them). ASAN_EXCLUDE= runs those too.
ASAN_EXCLUDE ?= ^RealData/
test-asan: setup
	@cmake --preset asan >/dev/null
	@cmake --build build-asan -j $(JOBS)
	@cd build-asan && UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) $(if $(ASAN_EXCLUDE),-E '$(ASAN_EXCLUDE)')

# Thread: every test but the RealData/* accuracy checks (training on the full real data
# sets, minutes each under TSan; the Release suite runs them), against a ThreadSanitizer build of
# oneTBB (scripts/tbb_tsan.sh says why). TSAN_EXCLUDE= runs those too.
TSAN_EXCLUDE ?= ^RealData/
TSAN_TBB = $(CURDIR)/build-tsan/tbb
test-tsan: setup
	@cmake --preset tsan >/dev/null
	@JOBS=$(JOBS) ./scripts/tbb_tsan.sh $(TSAN_TBB)
	@cmake --build build-tsan -j $(JOBS)
	@cd build-tsan && LD_LIBRARY_PATH=$(TSAN_TBB) TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
	  ctest --output-on-failure -j $(JOBS) $(if $(TSAN_EXCLUDE),-E '$(TSAN_EXCLUDE)')

# What .ci/run runs: every test of the Release build, then the ASan + UBSan suite.
ci:
	@$(MAKE) --no-print-directory test
	@$(MAKE) --no-print-directory test-asan

# libFuzzer targets (clang, ASan + UBSan) for a minute each; `make test` runs 100,000 inputs of each.
fuzz: setup
	@FUZZ_SECONDS=$${FUZZ_SECONDS:-60} ./fuzz/run.sh

# clang-tidy (.clang-tidy) on the C++ files changed since the upstream merge base, else since
# HEAD~1 (BASE=REV to choose; ALL=1 every file); exit 1 on any finding. docs/testing.md says more.
tidy: setup
	@./scripts/tidy.sh

clean:
	rm -rf build build-debug build-asan build-tsan build-fuzz
