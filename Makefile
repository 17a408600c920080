# softrdma front door.
#   make        install Debian packages (if missing), build, run the demo
#   make test   build (normal, ASan+UBSan, TSan) and run every test
#   make deb    build softrdma_VERSION_ARCH.deb here (hardened build in
#               build-deb/, lintian run on it)
#   make install [PREFIX=/usr/local] [DESTDIR=]
#               install (programs in bin/ and sbin/, libraries in the
#               private <libdir>/softrdma, man pages, softrdma.pc)
# Other targets: build, deps, demo, test-fast, test-asan, test-tsan, test-installed,
# test-stress (scripts/stress.sh: hogs on every core, two copies at once),
# test-streak (scripts/streak.sh: CI on a fresh clone 20 times in a row;
# STREAK_ARGS=-f follows the branch),
# test-interop (scripts/kernel-peer/run.sh: softrdma against the kernel's
# rxe and siw in a qemu guest, root; skips where qemu cannot boot;
# test-interop-full: the longer matrix),
# uninstall, bench (bench/run.sh), bench-network (bench/network.sh: loss,
# RTT and a shared bottleneck, beside TCP; root), bench-storage (bench/storage.sh: iSER
# beside iSCSI/TCP; root for the two-namespace half), clean.

BUILD      ?= build
BUILD_ASAN ?= build-asan
BUILD_TSAN ?= build-tsan
JOBS       ?= $(shell nproc)
CTEST_ARGS ?=
PREFIX     ?= /usr/local
DESTDIR    ?=

.PHONY: all deps build demo test test-fast test-asan test-tsan test-installed test-stress test-streak test-interop test-interop-full install uninstall deb bench bench-storage bench-network clean

all: deps build demo

deps:
	@bash scripts/install-deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS)

demo: build
	$(BUILD)/bin/softrdma-run $(BUILD)/bin/softrdma-demo

$(BUILD_ASAN)/CMakeCache.txt:
	cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DSOFTRDMA_SANITIZE=ON

# The whole suite on the normal build, then again under ASan+UBSan, then
# our own test programs under ThreadSanitizer.
test: deps test-fast test-asan test-tsan

test-fast: build
	cd $(BUILD) && ctest --output-on-failure $(CTEST_ARGS)

test-asan: $(BUILD_ASAN)/CMakeCache.txt
	cmake --build $(BUILD_ASAN) -j$(JOBS)
	cd $(BUILD_ASAN) && ctest --output-on-failure $(CTEST_ARGS)

# ThreadSanitizer (clang): the tests of our own programs -- unit, verbs, cm,
# rsocket.  Debian's RDMA programs are not TSan-instrumented and cannot load
# a TSan library, so the conformance tests are not run here.
$(BUILD_TSAN)/CMakeCache.txt:
	CC=clang cmake -S . -B $(BUILD_TSAN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSOFTRDMA_SANITIZE=thread

test-tsan: $(BUILD_TSAN)/CMakeCache.txt
	cmake --build $(BUILD_TSAN) -j$(JOBS)
	cd $(BUILD_TSAN) && ctest --output-on-failure -L 'unit|verbs|cm|rsocket' $(CTEST_ARGS)

# The prefix is a configure-time choice (GNUInstallDirs picks lib/<multiarch>
# for /usr), so install reconfigures the build tree with it.
install:
	cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX)
	cmake --build $(BUILD) -j$(JOBS)
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD)

uninstall:
	@test -f $(BUILD)/install_manifest.txt || { echo "nothing installed from $(BUILD)"; exit 1; }
	xargs -d '\n' rm -f -- < $(BUILD)/install_manifest.txt

deb:
	bash scripts/make-deb.sh

# softrdma against the Linux kernel's own rxe and siw (docs/interop.md):
# a skip (no qemu, no root, too slow a guest) is said, not a failure.
test-interop: build
	@bash scripts/kernel-peer/run.sh $(BUILD) ci

test-interop-full: build
	@bash scripts/kernel-peer/run.sh $(BUILD) full

# The conformance tests against a copy installed into a temporary root.
test-installed: build
	bash scripts/test-installed.sh --build $(BUILD)

# Debian's RDMA programs with a CPU hog on every core and two copies at
# once; a hang fails with every thread's backtrace (scripts/stress.sh).
test-stress: build
	bash scripts/stress.sh $(STRESS_ARGS)

# What CI does (the README's two commands on a fresh clone of HEAD), 20
# times in a row: a flaky test shows (scripts/streak.sh; STREAK_ARGS).
test-streak:
	bash scripts/streak.sh $(STREAK_ARGS)

bench: build
	bash bench/run.sh

bench-storage: build
	bash bench/storage.sh

bench-network: build
	bash bench/network.sh

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_TSAN) build-deb
