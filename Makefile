# cortiq — see README.md. `make run` builds and generates text with the
# default model; `make test` runs every unit, parity and fuzz-seed test.

SHARED ?= $(abspath ../shared)
GO ?= go
BIN := bin/cortiq

# The fixture models resolve by name when ../shared is present.
ifneq ($(wildcard $(SHARED)/fixtures/models),)
export CORTIQ_MODEL_PATH := $(SHARED)/fixtures/models$(if $(CORTIQ_MODEL_PATH),:$(CORTIQ_MODEL_PATH))
endif

.PHONY: all build run test test-short bench fuzz wasm e2e clean cuda-kernels

all: build

build:
	$(GO) build -o $(BIN) ./cmd/native

run: build
	./$(BIN) run -m stories260K -p "Once upon a time" -n 64 --temp 0

# Browser tests (e2e, e2e/wasmtest, storage/opfs, storage/download) need
# Chromium: without it they skip, and make says so before and after the run.
# CORTIQ_REQUIRE_BROWSER=1 (set by .ci/run) makes them fail instead.
CHROMIUM_BIN = $(or $(CHROMIUM),$(firstword $(shell command -v chromium chromium-browser google-chrome google-chrome-stable 2>/dev/null)))
BROWSER_NOTE = if [ -z "$(CHROMIUM_BIN)" ]; then echo "*** no Chromium (apt-get install -y chromium, or set CHROMIUM): every browser test (e2e, e2e/wasmtest, storage/opfs, storage/download) is SKIPPED ***" >&2; fi

test:
	@$(BROWSER_NOTE)
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 30m ./...
	@$(BROWSER_NOTE)

test-short:
	$(GO) test -count=1 -short ./...

bench: build
	$(GO) test -run '^$$' -bench . -benchtime 2x ./cpu/kernel/ ./tokenizer/

# Each parser's fuzz target runs for FUZZTIME; found inputs land in the
# package's testdata/fuzz corpus, which `make test` replays.
FUZZTIME ?= 30s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

# The browser bundle: web/ holds the page sources; cortiq.wasm (the engine,
# run in a Worker) and Go's wasm_exec.js are build outputs (gitignored).
WASM_EXEC = $(firstword $(wildcard $(shell $(GO) env GOROOT)/lib/wasm/wasm_exec.js $(shell $(GO) env GOROOT)/misc/wasm/wasm_exec.js))
wasm:
	GOOS=js GOARCH=wasm $(GO) build -trimpath -ldflags="-s -w" -o web/cortiq.wasm ./cmd/wasm
	cp "$(WASM_EXEC)" web/wasm_exec.js

# Browser end-to-end tests: headless Chromium (apt-get install -y chromium)
# driven by chromedp; they build their own bundle and skip without Chromium.
# The screenshot lands in e2e/artifacts/ (or $$CORTIQ_ARTIFACTS). The OPFS
# suites (hackpadfs fstest, downloads into OPFS) run in a Worker through
# e2e/wasmtest.
e2e:
	$(GO) test -count=1 -timeout 20m -v ./e2e/
	$(GO) test -count=1 -timeout 10m ./e2e/wasmtest/ ./storage/opfs/ ./storage/download/ -run 'InChromium|TestProbe'

clean:
	rm -rf bin web/cortiq.wasm web/wasm_exec.js

# The CUDA backend's kernels (cuda/kernels/*.cu), compiled ahead on a machine
# with nvcc (CUDA 11.8 or newer) into one fatbin, embedded by
# cuda/kernels/embed.go: sm_80 and sm_90 cubins (loaded as they are: no JIT
# on Ampere and Hopper; the sm_90 one waits for its predecessor in
# griddepcontrol, for programmatic dependent launch) and compute_80 PTX,
# which the driver JITs for newer chips. kernels.ptx is that PTX as text,
# not embedded: the package's tests read the kernels' entries and
# parameters from it. kernels.sha256 records the sources, the PTX and the
# fatbin; TestPTXFresh fails when they differ. 2-3 minutes on 2 cores.
# The GPU harness (every kernel against a CPU loop, timings on llama-1b shapes):
#   nvcc -O3 -std=c++17 -arch=sm_90 -o harness cuda/kernels/test/harness.cu && ./harness
NVCC ?= nvcc
CUDA_KERNEL_SRC = $(sort $(notdir $(wildcard cuda/kernels/*.cu cuda/kernels/*.cuh)))
CUDA_ARCHS = -gencode arch=compute_80,code=[sm_80,compute_80] -gencode arch=compute_90,code=sm_90
cuda-kernels:
	$(NVCC) -O3 -std=c++17 -ptx -arch=compute_80 -o cuda/kernels/kernels.ptx cuda/kernels/kernels.cu
	$(NVCC) -O3 -std=c++17 -fatbin $(CUDA_ARCHS) -o cuda/kernels/kernels.fatbin cuda/kernels/kernels.cu
	cd cuda/kernels && sha256sum $(CUDA_KERNEL_SRC) kernels.ptx kernels.fatbin > kernels.sha256
