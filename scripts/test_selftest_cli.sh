#!/usr/bin/env bash
# Tests the GPU self-test as a user meets it, on the CPU emulator: the binary
# runs on the emulator's libcuda/libcublas/libnvrtc (GDROTRAIN_CUDA_LIB_DIR),
#   - `cuda-info --self-test` passes (exit 0) in bf16 and fp32;
#   - with a fault injected (GDROTRAIN_EMU_FAULT: a kernel that does not run,
#     a GEMM off by one) it exits non-zero naming the op and the tolerance;
#   - `train`, `generate` and `logits` on CUDA run it first and stop before
#     any work; --skip-self-test goes on regardless.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/gdrotrain" ./cmd/gdrotrain
go run ./cuda/internal/emu/cmd/build-emulator "$tmp/emu" >/dev/null
export GDROTRAIN_CUDA_LIB_DIR="$tmp/emu" GDROTRAIN_KERNEL_CACHE="$tmp/kernels"
g="$tmp/gdrotrain"
fail() { echo "test_selftest_cli: $*"; [ -f "$tmp/out" ] && tail -20 "$tmp/out"; exit 1; }
# expect RC PATTERN CMD...: CMD exits RC (0 or "nonzero") and prints PATTERN.
expect() {
	local want=$1 pattern=$2 rc=0
	shift 2
	"$@" >"$tmp/out" 2>&1 || rc=$?
	if [ "$want" = 0 ] && [ $rc -ne 0 ]; then fail "exit $rc, want 0: $*"; fi
	if [ "$want" != 0 ] && [ $rc -eq 0 ]; then fail "exit 0, want non-zero: $*"; fi
	grep -q -- "$pattern" "$tmp/out" || fail "output lacks \"$pattern\": $*"
}

for prec in bf16 fp32; do
	expect 0 "28 of 28 checks passed" "$g" cuda-info --self-test --matmul-precision $prec
done
GDROTRAIN_EMU_FAULT=rmsnorm_fwd expect nonzero "rmsnorm fwd+bwd (kernels: rmsnorm_fwd" "$g" cuda-info --self-test
grep -q "tolerance atol" "$tmp/out" || fail "no tolerance in the failure"
grep -q -- "--device cpu" "$tmp/out" || fail "no hint in the failure"
GDROTRAIN_EMU_FAULT=gemm expect nonzero "matmul NN (kernels: gemm" "$g" cuda-info --self-test --matmul-precision fp32

"$g" init-tiny --out "$tmp/tiny" --vocab 512 >/dev/null
cp tokenizer/testdata/tiny512/tokenizer*.json "$tmp/tiny/"
GDROTRAIN_EMU_FAULT=gemm expect nonzero "GPU self-test failed" "$g" logits --model "$tmp/tiny" --ids 1,2,3 --device cuda
GDROTRAIN_EMU_FAULT=swiglu_fwd expect nonzero "GPU self-test failed" "$g" generate --model "$tmp/tiny" --prompt "1+1=" --device cuda --max-new-tokens 4
echo '{"problem": "What is 1+1?", "answer": "2"}' >"$tmp/train.jsonl"
train=("$g" train --config demo --device cuda --set model.path="$tmp/tiny" --set "data.train=[$tmp/train.jsonl]" --set run.out_dir="$tmp/runs")
GDROTRAIN_EMU_FAULT=adamw expect nonzero "adamw (kernels: adamw" "${train[@]}"
[ ! -e "$tmp/runs" ] || [ -z "$(ls -A "$tmp/runs")" ] || fail "train wrote a run folder before its self-test passed"
GDROTRAIN_EMU_FAULT=gemm expect 0 "" "$g" logits --model "$tmp/tiny" --ids 1,2,3 --device cuda --skip-self-test
echo "test_selftest_cli: ok (self-test passes on the emulator; faults fail it, naming the op; train/generate/logits stop before work)"
