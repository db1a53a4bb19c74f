#!/usr/bin/env bash
# Tests the GPU self-test as a user meets it, on the CPU emulator: the binary
# runs on the emulator's libcuda/libcublas/libnvrtc (GDROTRAIN_CUDA_LIB_DIR),
#   - `cuda-info --self-test` passes (exit 0) in bf16 and fp32 (the exact
#     log-probs check may fail, reported in the summary, until the kernels
#     are batch-invariant);
#   - with a fault injected (GDROTRAIN_EMU_FAULT: a kernel that does not run,
#     a GEMM off by one) it exits non-zero naming the op and the tolerance;
#   - `train`, `generate` and `logits` on CUDA run it first and stop before
#     any work; --skip-self-test goes on regardless;
#   - at every head_dim a model config admits (every even one) up to the
#     CUDA backend's 256, `logits` of a short prompt agree with the CPU's
#     and greedy `generate` (a prefill, then decode steps as CUDA graphs)
#     picks the CPU's tokens; a larger head_dim is refused, naming head_dim.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/gdrotrain" ./cmd/gdrotrain
go run ./internal/testinfra/cudaemu/cmd/build-emulator "$tmp/emu" >/dev/null
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

# Every check passes but, until the CUDA kernels are batch-invariant
# (docs/algorithm.md §5.10), the exact log-probs check, which fails only a
# run in exact mode: its failure is in the summary with its first
# differing row.
for prec in bf16 fp32; do
	expect 0 "self-test: [0-9]* of [0-9]* checks passed.*exact log-probs" "$g" cuda-info --self-test --matmul-precision $prec
	grep -q "self-test: \([0-9]*\) of \1 checks passed" "$tmp/out" || grep -q "exact log-probs FAILED: .*vocabulary id" "$tmp/out" ||
		fail "$prec: a check other than the exact one failed, or the exact one's failure does not name its first difference"
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

# maxdiff A B: the largest |a − b| / (1e-5 + 1e-4·|b|) over the logits of
# two `logits --all` outputs (B the CPU's): ≤ 1 passes. fp32 kernels against
# the CPU's float32 BLAS: observed ≤ 1e-6 on logits of order 0.1–1; the
# split-K decode bug of issue 28 gave 0.5 and more.
maxdiff() {
	paste <(sed 's/.*"logits"://' "$1" | tr -c '0-9eE.+-' '\n' | grep .) \
		<(sed 's/.*"logits"://' "$2" | tr -c '0-9eE.+-' '\n' | grep .) |
		awk 'BEGIN { w = 0; n = 0 } { d = $1 - $2; if (d < 0) d = -d; b = $2 < 0 ? -$2 : $2; r = d / (1e-5 + 1e-4 * b); if (r > w) w = r; n++ }
			END { if (n < 100) { print "inf"; exit } printf "%.3g\n", w }'
}
# Per head dim: logits of a 5-token prompt (eager per-row and split-K
# decode attention), and greedy generate from a prompt of more than 16
# tokens (its prefill takes the tensor-core route, its decode steps the
# split-K kernels inside CUDA graphs); cpu and cuda side by side.
prompt="What is 12+7? Think step by step, then answer with one number."
for D in $(seq 2 2 256); do
	m="$tmp/hd$D"
	"$g" init-tiny --out "$m" --head-dim "$D" --heads 4 --kv-heads 2 --hidden 64 --vocab 512 --seed "$D" >/dev/null
	cp tokenizer/testdata/tiny512/tokenizer*.json "$m/"
	for dev in cpu cuda; do
		{
			"$g" logits --model "$m" --ids 3,17,42,99,250 --all --device $dev --skip-self-test --out "$tmp/$dev.json" &&
				"$g" generate --model "$m" --prompt "$prompt" --mode raw --temperature 0 --max-new-tokens 8 --device $dev \
					--skip-self-test --json >"$tmp/gen.$dev"
		} 2>"$tmp/err.$dev" &
	done
	for dev in cpu cuda; do
		wait -n || { cat "$tmp"/err.* >"$tmp/out"; fail "head_dim $D: logits or generate failed"; }
	done
	r=$(maxdiff "$tmp/cuda.json" "$tmp/cpu.json")
	awk -v r="$r" 'BEGIN { exit !(r != "inf" && r <= 1) }' ||
		fail "head_dim $D: cuda logits differ from the cpu's ($r × the tolerance 1e-5 + 1e-4·|cpu|)"
	cmp -s "$tmp/gen.cpu" "$tmp/gen.cuda" || fail "head_dim $D: greedy generate on cuda $(cat "$tmp/gen.cuda"), on cpu $(cat "$tmp/gen.cpu")"
	rm -rf "$m"
done
"$g" init-tiny --out "$tmp/hd258" --head-dim 258 >/dev/null
expect nonzero "head_dim 258 is not supported on cuda" "$g" logits --model "$tmp/hd258" --ids 1,2 --device cuda --skip-self-test

echo "test_selftest_cli: ok (self-test passes on the emulator; faults fail it, naming the op; train/generate/logits stop before work; every head_dim up to 256 agrees with the CPU, larger ones are refused)"
