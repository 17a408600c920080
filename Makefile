# softrdma front door.
#   make        install Debian packages (if missing), build, run the demo
#   make test   build (normal and ASan+UBSan) and run every test
# Other targets: build, deps, demo, test-fast, test-asan, bench, clean.

BUILD      ?= build
BUILD_ASAN ?= build-asan
JOBS       ?= $(shell nproc)
CTEST_ARGS ?=

.PHONY: all deps build demo test test-fast test-asan bench clean

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

# The whole suite on the normal build, then again under ASan+UBSan.
test: deps test-fast test-asan

test-fast: build
	cd $(BUILD) && ctest --output-on-failure $(CTEST_ARGS)

test-asan: $(BUILD_ASAN)/CMakeCache.txt
	cmake --build $(BUILD_ASAN) -j$(JOBS)
	cd $(BUILD_ASAN) && ctest --output-on-failure $(CTEST_ARGS)

bench: build
	bash bench/run.sh

clean:
	rm -rf $(BUILD) $(BUILD_ASAN)
