# gdrotrain — build, test, benchmark and demo targets.
# `make test` is what CI runs (.ci/run); it needs no GPU and no network beyond
# the Go module proxy and the npm registry (for test fixtures).

export PATH := /usr/local/go/bin:$(PATH)
GO      ?= go
BIN     := bin/gdrotrain
PKGS    := ./...

# NVRTC 12.5, cuobjdump and the CUDA headers, where scripts/install_cuda_tools.sh
# (make cuda-tools) has fetched them: the kernel tests (cuda/nvrtc_test.go,
# cuda/headers_test.go, tools/kernelreport) use them.
CUDA_TOOLS := $(CURDIR)/.cache/cuda-tools
ifneq ($(wildcard $(CUDA_TOOLS)/usr/lib/x86_64-linux-gnu/libnvrtc.so.12),)
export GDROTRAIN_NVRTC_DIR ?= $(CUDA_TOOLS)/usr/lib/x86_64-linux-gnu
export CUDA_TOOLS_BIN ?= $(CUDA_TOOLS)/usr/bin
endif
ifneq ($(wildcard $(CUDA_TOOLS)/usr/include/cuda.h),)
export GDROTRAIN_CUDA_INCLUDE ?= $(CUDA_TOOLS)/usr/include
endif

.PHONY: build test test-short vet bench profile demo demo-lora fixtures clean gpu-check-build gpu-kit cuda-tools kernel-report emulator config-doc tbproto

build:
	$(GO) build -o $(BIN) ./cmd/gdrotrain

# gpu-check-build: the binary and the CUDA test binaries, for scripts/gpu_kit.sh
# run from this checkout on a GPU node. Stripped (-s -w: no symbol table, no
# DWARF; panics still name functions and lines), so the kit's archive stays
# small (docs/gpu-kit.md gives its size).
KIT_LDFLAGS := -s -w
gpu-check-build:
	$(GO) build -ldflags='$(KIT_LDFLAGS)' -o $(BIN) ./cmd/gdrotrain
	$(GO) test -c -ldflags='$(KIT_LDFLAGS)' -o bin/cuda.test ./cuda/
	$(GO) test -c -ldflags='$(KIT_LDFLAGS)' -o bin/cuda-profile.test ./tools/profile/

# tbproto: the Go types of TensorBoard's event messages (tools/tbevents/tbpb)
# from the vendored .proto files; needs protoc (Debian: protobuf-compiler).
tbproto:
	$(GO) generate ./tools/tbevents

# config-doc: docs/config.md from the config structs' field comments
# (tools/configdoc; its test fails when the page is out of date).
config-doc:
	$(GO) run ./tools/configdoc/cmd/gen-config-doc

# gpu-kit: one archive for a GPU node without Go (docs/gpu-kit.md):
#   tar xzf gdrotrain-gpu-kit.tar.gz && cd gdrotrain-gpu-kit && ./run.sh
# cgo links the programs against this machine's glibc; the kit's VERSION
# says which the node needs.
gpu-kit: gpu-check-build
	bash scripts/make_gpu_kit.sh --out bin/gdrotrain-gpu-kit.tar.gz

# fixtures: fetch or generate whatever the tests need (nothing is read from ../shared).
fixtures:
	bash scripts/fetch_tokenizer.sh

# vet also fails when go.mod/go.sum are not tidy, when a package that
# must build without cgo (everything but cuda/, backend/, cmd/ and the CUDA
# tools tools/profile and tools/kernelreport: the
# trainer reaches the GPU only through the opener cmd passes it) gains a
# cgo dependency, on any staticcheck finding (one kept on purpose carries a
# //lint:ignore with its reason), and on any function deadcode finds
# unreachable from main or a test (generated files are not reported; deadcode
# exits 0 with findings, so its output must be empty). Both tools run at the
# pinned versions through `go run pkg@version` (the module proxy; go.mod is
# untouched).
NOCGO_PKGS := ./internal/atomicfile/ ./trainer/ ./optim/ ./memplan/ ./gdro/ ./reward/... ./data/ ./sampler/ ./checkpoint/ ./tokenizer/ ./device/ ./tools/demo/ ./synth/ ./tools/report/ ./dist/ ./grpo/ ./internal/testinfra/layers/ ./tools/gpukit/ ./tools/benchreport/ ./tools/configdoc/ ./tools/tbevents/... ./tools/watch/ ./tools/export/ ./tools/inspect/ ./tools/gdrosim/
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
DEADCODE    := golang.org/x/tools/cmd/deadcode@v0.52.0
vet:
	$(GO) vet $(PKGS)
	$(GO) mod tidy -diff
	CGO_ENABLED=0 $(GO) build $(NOCGO_PKGS)
	$(GO) run $(STATICCHECK) $(PKGS)
	@dead=$$($(GO) run $(DEADCODE) -test $(PKGS)) || exit 1; \
	if [ -n "$$dead" ]; then echo "$$dead"; echo "deadcode: the functions above are unreachable from main and the tests: delete them"; exit 1; fi

# cuda-tools: NVRTC 12.5, cuobjdump/nvdisasm/ptxas and the CUDA and NCCL headers
# from Debian into .cache/cuda-tools (about 1.1 GB downloaded, about a minute;
# nothing is installed into the system). Does nothing when already there.
cuda-tools:
	bash scripts/install_cuda_tools.sh

# kernel-report: per kernel and architecture (sm_80, sm_90), registers, stack,
# local/shared/constant memory, local loads/stores and tensor-core instructions
# of what NVRTC compiles, read back with cuobjdump (no GPU needed).
kernel-report: cuda-tools
	$(GO) run ./tools/kernelreport/cmd/kernel-report

# emulator: the CPU emulator of libcuda/libcublas/libnvrtc with our kernels
# (internal/testinfra/cudaemu), so the binary runs without a GPU:
#   GDROTRAIN_CUDA_LIB_DIR=.cache/cuda-emu GDROTRAIN_KERNEL_CACHE=.cache/cuda-emu/kernels bin/gdrotrain cuda-info
emulator:
	$(GO) run ./internal/testinfra/cudaemu/cmd/build-emulator .cache/cuda-emu

# The CUDA tests run on the emulator (see internal/testinfra/cudaemu), which schedules
# a block's threads adversarially from a seed (GDROTRAIN_EMU_SEED), so each
# run meets another schedule, and has two more rounding modes: fused
# multiply-add in kernels and GEMMs (GDROTRAIN_EMU_FMA=1, x86-64 with FMA
# only) and FAST_16BF products on tf32 inputs (GDROTRAIN_EMU_FAST16BF=tf32).
# make test runs
#   - the whole package once, under seed 1 (the default), in go test ./...;
#   - the kernel tests (CUDA_KERNEL_TESTS: every backend op, the attention
#     routes, the sampler) under seed 3; the coverage report comes from
#     this run's log;
#   - under seed 2 with FMA, the tests whose results depend on rounding:
#     the kernel tests, the bf16 and training tests (CUDA_BF16_TESTS: the
#     property tests of cuda/fuzz_test.go among them) and those that compare
#     with the CPU, the host's draws or PyTorch's numbers
#     (CUDA_ROUNDING_TESTS); and the emulator's own tests (internal/testinfra/cudaemu);
#   - the bf16 tests under seed 3 with tf32 products.
# So every kernel the kernel tests launch meets three schedules and both
# roundings. The rest (CUDA graphs, the NCCL, data-parallel and sharded-
# master ranks, the step profile, paging, library loading) compares a route
# with itself or checks plumbing, and runs once.
CUDA_KERNEL_TESTS := TestConformance$$|TestAttentionMatchesCPU|TestAttentionHalf|TestFlashAttentionCausal|TestMMAFragments|TestHalfKVCache|TestRowSampler|TestFuzz|TestDecodeSplitEveryHeadDim|TestFP8Conversions|TestFP8Attention|TestFP8KVCache|TestExactAttention|TestReportCoverage
CUDA_BF16_TESTS := TestConformanceBF16|TestTrainingStepMatchesCPU|TestLoRAStepMatchesCPU|TestFrozenReference|TestTrainOnCUDA|TestBenchSmoke|TestFuzzAttention|TestFuzzSplitQKV
CUDA_ROUNDING_TESTS := TestGenerateMatchesCPU|TestGoldenPyTorchOnCUDA|TestDeviceDrawMatchesHost|TestWeightCopies|TestActivationHalf|TestHalfOnlyWeights
CUDA_FMA_TESTS := $(CUDA_KERNEL_TESTS)|$(CUDA_BF16_TESTS)|$(CUDA_ROUNDING_TESTS)
CUDA_SEED3_LOG := .cache/cuda-seed3.log
# One folder of compiled emulator objects (keyed by their sources, flags and
# compiler) for every run: each test process, and each rank process the
# NCCL and data-parallel tests start, links the emulator from it instead of
# running g++ again (about 10 CPU seconds each).
test test-short: export GDROTRAIN_EMU_CACHE ?= $(CURDIR)/.cache/cuda-emu-objects
# The fuzz budget is a count, not a duration: Go 1.26's fuzz coordinator can
# report a spurious "context deadline exceeded" at the end of a timed run
# (golang/go#75804). FuzzReport draws every figure per input (about 0.1 s),
# so its budget is small and its minimisation counted too (about 8 CPU s).
test: fixtures vet
	$(GO) test -count=1 -timeout 40m $(PKGS)
	@mkdir -p .cache
	GDROTRAIN_EMU_SEED=3 $(GO) test -count=1 -timeout 40m -run '$(CUDA_KERNEL_TESTS)' -v ./cuda/ > $(CUDA_SEED3_LOG) 2>&1 || \
		{ grep -v -e '^=== ' -e '--- PASS' $(CUDA_SEED3_LOG) | tail -200; exit 1; }
	@grep -o 'CUDA coverage: .*' $(CUDA_SEED3_LOG) || true
	@if [ "$$(uname -m)" = x86_64 ] && grep -qw fma /proc/cpuinfo; then \
		echo "GDROTRAIN_EMU_SEED=2 GDROTRAIN_EMU_FMA=1 $(GO) test -count=1 -timeout 40m -run '\$$(CUDA_FMA_TESTS)' ./cuda/ ./tools/profile/ && ... ./internal/testinfra/cudaemu/"; \
		GDROTRAIN_EMU_SEED=2 GDROTRAIN_EMU_FMA=1 $(GO) test -count=1 -timeout 40m -run '$(CUDA_FMA_TESTS)' ./cuda/ ./tools/profile/ && \
		GDROTRAIN_EMU_SEED=2 GDROTRAIN_EMU_FMA=1 $(GO) test -count=1 ./internal/testinfra/cudaemu/; \
	else \
		echo "no x86-64 CPU with FMA: the CUDA tests' FMA mode is skipped; seed 2 without it"; \
		GDROTRAIN_EMU_SEED=2 $(GO) test -count=1 -timeout 40m -run '$(CUDA_FMA_TESTS)' ./cuda/ ./tools/profile/; \
	fi
	GDROTRAIN_EMU_SEED=3 GDROTRAIN_EMU_FAST16BF=tf32 $(GO) test -count=1 -timeout 40m -run '$(CUDA_BF16_TESTS)' ./cuda/ ./tools/profile/
	bash scripts/slurm/test_sbatch.sh
	bash scripts/test_gpu_kit.sh
	bash scripts/test_selftest_cli.sh
	$(GO) test -run '^$$' -fuzz '^FuzzScore$$' -fuzztime 100000x ./reward/
	$(GO) test -run '^$$' -fuzz '^FuzzReport$$' -fuzztime 50x -fuzzminimizetime 10x ./tools/report/

# test-short: the quick lane (README, "The two commands"): go test -short,
# where the CUDA tests run each route once, without repetitions and sweeps.
test-short: fixtures
	$(GO) test -short $(PKGS)

# bench prints speed figures as ratios against a baseline measured in the same run.
bench: build
	bash scripts/install_bench_deps.sh
	./$(BIN) bench
	bash scripts/bench_tokenizer.sh
	$(GO) test -run '^$$' -bench . ./gdro/
	$(GO) test -run '^$$' -bench . -benchtime 200x ./reward/

# profile: the step profile of a Qwen3-1.7B training step and its decode
# steps, counted on the emulator with the arithmetic skipped; time and MFU
# are roofline ESTIMATES for an H100, and so is the step time of the paper's
# GRPO configs on 8 GPUs, synchronous and overlapped, put together from them
# (on a GPU node: bin/gdrotrain bench --device cuda --profile).
profile: build emulator
	GDROTRAIN_EMU_COUNT_ONLY=1 GDROTRAIN_EMU_MEM_BYTES=200000000000 GDROTRAIN_CUDA_LIB_DIR=$(CURDIR)/.cache/cuda-emu \
		GDROTRAIN_KERNEL_CACHE=$(CURDIR)/.cache/cuda-emu/kernels ./$(BIN) bench --device cuda --profile --skip-self-test

demo: build
	./$(BIN) demo

# golden: regenerate the model/testdata/ fixtures from transformers' own
# Qwen3ForCausalLM and PyTorch autograd (scripts/golden_hf.py), in the Debian sid
# chroot of scripts/sid_chroot.sh (made first if missing: about 2 minutes and
# 2 GB under .cache/sid), then run the golden test on them. `make test` only
# reads the committed fixtures.
.PHONY: golden check-references
golden:
	bash scripts/sid_chroot.sh
	bash scripts/sid_chroot.sh run python3 scripts/golden_hf.py model/testdata
	$(GO) test -count=1 -run Golden -v ./model/

# check-references: our model folders (init-tiny, export fp32/bf16/sharded),
# logits and tokenizer against transformers and llama.cpp from the sid chroot
# (scripts/check_references.sh; about 3 minutes with the chroot in place).
check-references:
	bash scripts/check_references.sh

clean:
	rm -rf bin .cache

# demo-lora: the CPU demo training rank-8 LoRA adapters (4× the demo's
# learning rate; docs/algorithm.md §5.14 has its result over three seeds).
demo-lora: build
	./$(BIN) demo --out runs/demo-lora --set lora.rank=8 --set optim.lr=2e-3
