# gdrotrain — build, test, benchmark and demo targets.
# `make test` is what CI runs (.ci/run); it needs no GPU and no network beyond
# the Go module proxy and the npm registry (for test fixtures).

export PATH := /usr/local/go/bin:$(PATH)
GO      ?= go
BIN     := bin/gdrotrain
PKGS    := ./...

.PHONY: build test test-short vet bench demo fixtures clean gpu-check-build

build:
	$(GO) build -o $(BIN) ./cmd/gdrotrain

# gpu-check-build: the binary and the CUDA test binary, for scripts/gpu_check.sh
# on a GPU node that has no Go toolchain.
gpu-check-build: build
	$(GO) test -c -o bin/cuda.test ./cuda/

# fixtures: fetch or generate whatever the tests need (nothing is read from ../shared).
fixtures:
	bash scripts/fetch_tokenizer.sh

vet:
	$(GO) vet $(PKGS)

# The fuzz budget is a count, not a duration: Go 1.26's fuzz coordinator can
# report a spurious "context deadline exceeded" at the end of a timed run
# (golang/go#75804).
test: fixtures vet
	$(GO) test -count=1 -timeout 40m $(PKGS)
	@$(GO) test -count=1 -run 'TestConformance$$|TestReportCoverage' -v ./cuda/ | grep -o 'CUDA coverage: .*' || true
	bash scripts/slurm/test_sbatch.sh
	$(GO) test -run '^$$' -fuzz '^FuzzScore$$' -fuzztime 100000x ./reward/

test-short: fixtures
	$(GO) test -short $(PKGS)

# bench prints speed figures as ratios against a baseline measured in the same run.
bench: build
	./$(BIN) bench
	bash scripts/bench_tokenizer.sh
	$(GO) test -run '^$$' -bench . ./gdro/
	$(GO) test -run '^$$' -bench . -benchtime 200x ./reward/

demo: build
	./$(BIN) demo

clean:
	rm -rf bin .cache
