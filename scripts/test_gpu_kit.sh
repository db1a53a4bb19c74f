#!/usr/bin/env bash
# Tests the GPU kit (scripts/gpu_kit.sh, run.sh in the kit) without a GPU:
#
# 1. Against fake programs (seconds): every step runs even after another
#    failed, the script exits 1 when any failed and 0 when none did, a
#    failed step's dependants are skipped with the reason, no Python with
#    torch skips the Python steps and runs the benchmark without its
#    baseline, --steps selects steps, and kit-report's summary agrees.
# 2. On the CPU emulator (about a minute): `make gpu-kit`'s packing
#    (scripts/make_gpu_kit.sh) of freshly built programs, extracted and run
#    as a node runs it (./run.sh), with cuBLAS, NVRTC and NCCL found only in
#    a CUDA 13 pip-wheel layout of a virtual environment, a fake Python with
#    "torch", a few CUDA tests and one NCCL test; summary.json must say
#    where each library came from, carry the measured and the baseline
#    numbers and count the tests. Then an injected fault (a GEMM off by one)
#    must fail the self-test, exit 1 and say so in the summary.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
tmp=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
fail() {
	echo "test_gpu_kit: $*"
	for f in "$tmp"/stdout "$tmp"/*/steps.tsv; do
		[ -f "$f" ] && { echo "--- $f"; tail -40 "$f"; }
	done
	exit 1
}
start=$(date +%s)
go build -o "$tmp/real/gdrotrain" ./cmd/gdrotrain

# ---- 1. fakes --------------------------------------------------------------
# Each fake logs its arguments and fails when its name, or its name and
# first argument, is in $FAIL; the one named $SLEEPER hangs. The fake gdrotrain describes two GPUs (so the
# NCCL tests run) and leaves kit-report to the real binary.
mkdir -p "$tmp/fake"
for prog in gdrotrain cuda.test cuda-profile.test python; do
	cat >"$tmp/fake/$prog" <<FAKE
#!/usr/bin/env bash
echo "fake $prog \$*" >>"\$FAKE_LOG"
case " \${FAIL:-} " in *" $prog "*|*" $prog:\${1:-} "*) echo "fake $prog fails"; exit 7;; esac
if [ "\${SLEEPER:-}" = $prog ]; then # a step that hangs, with a child of its own
	sleep 60 &
	echo "\$\$ \$!" >"\$FAKE_LOG.pids"
	wait
fi
case "$prog \${1:-}" in
"gdrotrain kit-report") exec "$tmp/real/gdrotrain" "\$@" ;;
"gdrotrain cuda-info") [ "\${2:-}" = --json ] && printf '{\n  "gpu": "Fake H100",\n  "devices": 2,\n  "emulator": false,\n  "driver": "13.0"\n}\n' ;;
"gdrotrain bench") echo '{"shape": "qwen3-1.7b", "train": [], "decode": []}' ;;
"python -c") echo "python 3 torch fake transformers fake" ;;
esac
exit 0
FAKE
	chmod +x "$tmp/fake/$prog"
done
# kit FAIL WANT_RC [ARGS...]: runs the kit against the fakes, FAIL naming
# those that fail, and wants exit status WANT_RC.
kit() {
	local rc=0
	FAIL=$1
	shift
	local want=$1
	shift
	rm -rf "$tmp/out"
	: >"$tmp/log"
	FAIL=$FAIL FAKE_LOG="$tmp/log" GDROTRAIN="$tmp/fake/gdrotrain" CUDA_TEST="$tmp/fake/cuda.test" \
		CUDA_PROFILE_TEST="$tmp/fake/cuda-profile.test" bash scripts/gpu_kit.sh --out "$tmp/out" --python "$tmp/fake/python" "$@" >"$tmp/stdout" 2>&1 || rc=$?
	[ "$rc" = "$want" ] || fail "FAIL=\"$FAIL\" $*: exit $rc, want $want"
}
# status STEP WANT: the step's status in steps.tsv.
status() {
	local got
	got=$(awk -F'\t' -v s="$1" '$1 == s { print $2 }' "$tmp/out/steps.tsv")
	[ "$got" = "$2" ] || fail "FAIL=\"$FAIL\": step $1 is \"$got\", want $2"
}
ran() { grep -q -- "$1" "$tmp/log" || fail "FAIL=\"$FAIL\": \"$1\" did not run"; }

kit "" 0
for s in info selftest-fp32 selftest-bf16 cuda-tests profile-tests nccl-tests hf-model hf-logits-fp32 hf-logits-bf16 hf-fp32 hf-bf16 bench report; do
	status $s pass
done
ran "fake cuda.test -test.v -test.count=1 -test.timeout 15m -test.skip"
ran "fake cuda.test .* -test.run ^(TestNCCLCollectives"
ran "fake cuda-profile.test -test.v -test.count=1 -test.timeout 15m"
ran "--torch-python $tmp/fake/python"
grep -q '"result": "pass"' "$tmp/out/summary.json" || fail "summary.json does not say pass"
grep -q "^# gdrotrain GPU kit: PASS" "$tmp/out/report.md" || fail "report.md does not say PASS"

kit "cuda.test" 1
status cuda-tests fail
status nccl-tests fail
status profile-tests pass
status bench pass
grep -q '"result": "fail"' "$tmp/out/summary.json" || fail "summary.json does not say fail"
grep -q "2 step(s) FAILED" "$tmp/stdout" || fail "the failure count is not printed"

kit "gdrotrain:logits" 1
status hf-logits-fp32 fail
status hf-fp32 skip
grep -q "our logits in fp32 failed" "$tmp/out/steps.tsv" || fail "no reason for skipping hf-fp32"
status bench pass

kit "python" 0
status hf-fp32 skip
ran "--torch-python  --torch-script" # the benchmark without its baseline

kit "gdrotrain:cuda-info" 1
status info fail
status selftest-bf16 fail
status cuda-tests pass
status report pass

kit "" 0 --steps selftest,report --nccl off
[ "$(tail -n +2 "$tmp/out/steps.tsv" | cut -f1 | tr '\n' ' ')" = "selftest-fp32 selftest-bf16 report " ] ||
	fail "--steps selftest,report ran $(tail -n +2 "$tmp/out/steps.tsv" | cut -f1 | tr '\n' ' ')"
kit "" 2 --size huge

# An interrupt (scancel's SIGTERM) ends the step in progress at once — the
# hanging test program and its child too — records it, writes the report
# of what ran and exits 130, running nothing after it.
rm -rf "$tmp/out"
: >"$tmp/log"
SLEEPER=cuda.test FAKE_LOG="$tmp/log" GDROTRAIN="$tmp/fake/gdrotrain" CUDA_TEST="$tmp/fake/cuda.test" \
	CUDA_PROFILE_TEST="$tmp/fake/cuda-profile.test" bash scripts/gpu_kit.sh --out "$tmp/out" --python "$tmp/fake/python" >"$tmp/stdout" 2>&1 &
kitpid=$!
for _ in $(seq 100); do
	[ -s "$tmp/log.pids" ] && break
	sleep 0.1
done
[ -s "$tmp/log.pids" ] || fail "the hanging step did not start"
kill -TERM $kitpid
rc=0
wait $kitpid || rc=$?
[ $rc = 130 ] || fail "interrupted: exit $rc, want 130"
FAIL=interrupt
status cuda-tests fail
grep -q "	interrupted$" "$tmp/out/steps.tsv" || fail "the interrupted step is not marked so"
status report pass
grep -q "fake gdrotrain bench" "$tmp/log" && fail "a step ran after the interrupt"
sleep 0.5
for pid in $(cat "$tmp/log.pids"); do
	# Killed and not yet reaped (a zombie) counts as ended.
	if [ -e /proc/$pid/stat ] && [ "$(cut -d' ' -f3 /proc/$pid/stat)" != Z ]; then
		fail "process $pid of the interrupted step is still running"
	fi
done
echo "test_gpu_kit: fakes ok ($(($(date +%s) - start)) s)"

# ---- 2. the kit on the emulator ---------------------------------------------
# The test binary builds its own emulator; a shared object cache spares it
# compiling what the first build compiled.
export GDROTRAIN_EMU_CACHE=${GDROTRAIN_EMU_CACHE:-$tmp/emu-cache}
go test -c -o "$tmp/real/cuda.test" ./cuda/
go test -c -o "$tmp/real/cuda-profile.test" ./cuda/profile/
go run ./internal/cudaemu/cmd/build-emulator "$tmp/emu" >/dev/null
bash scripts/make_gpu_kit.sh --gdrotrain "$tmp/real/gdrotrain" --cuda-test "$tmp/real/cuda.test" \
	--cuda-profile-test "$tmp/real/cuda-profile.test" --out "$tmp/kit.tar.gz" >/dev/null
mkdir "$tmp/node"
tar -C "$tmp/node" -xzf "$tmp/kit.tar.gz"
kitdir=$tmp/node/gdrotrain-gpu-kit
for f in run.sh bin/gdrotrain bin/cuda.test bin/cuda-profile.test cuda/shim.h model/testdata/qwen3_tiny_tied/golden.json scripts/hf_check.py \
	scripts/bench_torch_gpu.py VERSION README.txt docs/gpu-kit.md; do
	[ -e "$kitdir/$f" ] || fail "the kit lacks $f"
done
# A node with CUDA only from pip wheels: the driver in a folder of its own
# (as the driver is never a wheel), the rest in a venv's CUDA 13 layout.
# Links, as the emulator's own folder has them: one object serves all.
sp=$tmp/venv/lib/python3.12/site-packages
mkdir -p "$tmp/driver" "$sp/nvidia/cu13/lib" "$sp/nvidia/nccl/lib"
ln -s "$tmp/emu/libcuda.so.1" "$tmp/driver/libcuda.so.1"
ln -s "$tmp/emu/libcuda.so.1" "$sp/nvidia/cu13/lib/libcublas.so.13"
ln -s "$tmp/emu/libcuda.so.1" "$sp/nvidia/cu13/lib/libnvrtc.so.13"
ln -s "$tmp/emu/libcuda.so.1" "$sp/nvidia/nccl/lib/libnccl.so.2"
# A Python with "torch": the transformers check passes, and the PyTorch
# baseline answers for the tiny benchmark's shapes.
cat >"$tmp/torchpy" <<'FAKE'
#!/usr/bin/env bash
case ${1:-} in
-c) echo "python 3.12 torch 0.0-fake CUDA 13.0 transformers 0.0-fake" ;;
*/hf_check.py) echo '{"ok": true, "max_abs": 0.0, "fake": "no transformers here"}' ;;
*/bench_torch_gpu.py)
	cat >/dev/null
	echo '{"name": "tiny-256", "train_tok_s": 1234.5, "torch": "fake PyTorch"}'
	echo '{"name": "decode-b1-c64", "tok_s": 77, "torch": "fake PyTorch"}'
	echo '{"name": "decode-b4-c64", "note": "out of memory"}' ;;
*) exit 3 ;;
esac
FAKE
chmod +x "$tmp/torchpy"
rc=0
(cd "$kitdir" && env -u GDROTRAIN_TEST_DEVICE VIRTUAL_ENV="$tmp/venv" GDROTRAIN_CUDA_LIB_DIR="$tmp/driver" \
	GDROTRAIN_KERNEL_CACHE="$tmp/kernels" PYTHON="$tmp/torchpy" ./run.sh --out "$tmp/results" \
	--tests '^(TestDeviceForExternalTests|TestGoldenPyTorchOnCUDA|TestSonameMajor)$' --nccl on --nccl-tests '^TestNCCLGradientReducer$') \
	>"$tmp/stdout" 2>&1 || rc=$?
[ $rc = 0 ] || fail "the kit on the emulator: exit $rc, want 0"
sum=$tmp/results/summary.json
for want in '"result": "pass"' '"emulator": true' '"size": "tiny"' \
	"\"from\": \"pip wheel in $sp (VIRTUAL_ENV)\"" "\"path\": \"$sp/nvidia/cu13/lib/libcublas.so.13\"" \
	"\"path\": \"$sp/nvidia/cu13/lib/libnvrtc.so.13\"" "\"path\": \"$sp/nvidia/nccl/lib/libnccl.so.2\"" \
	'"from": "GDROTRAIN_CUDA_LIB_DIR"' '"torch_tok_s": 1234.5' \
	'"torch_tok_s": 77' '"torch_note": "out of memory"' '"baseline": "baseline: fake PyTorch"' \
	'"device": "gdrotrain CPU emulator' '"python": "python 3.12 torch 0.0-fake'; do
	grep -qF -- "$want" "$sum" || fail "summary.json lacks $want"
done
# Every check of the self-test passed (the count grows with the checks).
grep -qE '"fp32": "self-test: ([0-9]+) of \1 checks passed' "$sum" || fail "summary.json: the fp32 self-test did not pass every check"
# Measured numbers, not placeholders: our tokens/s, step time and MFU are
# positive, and the ratio is ours over the baseline's.
awk '/"name": "tiny-256"/ { t = 1 } t && /"tok_s":/ { gsub(/[,"a-z_: ]/, ""); ours = $0 }
	t && /"step_s":/ { gsub(/[,"a-z_: ]/, ""); step = $0 } t && /"mfu":/ { gsub(/[,"a-z_: ]/, ""); mfu = $0 }
	t && /"ratio":/ { gsub(/[,"a-z_: ]/, ""); ratio = $0; exit }
	END { if (!(ours > 0 && step > 0 && mfu > 0 && (ratio - ours / 1234.5)^2 < 1e-12)) { print ours, step, mfu, ratio; exit 1 } }' "$sum" ||
	fail "the tiny-256 row's numbers are off"
grep -q '"passed": [3-9]' "$sum" || fail "summary.json counts fewer than 3 passed CUDA tests"
grep -q "^| nccl-tests | PASS" "$tmp/results/report.md" || fail "report.md: the NCCL tests did not pass"
grep -q "CPU emulator: its timings mean nothing" "$tmp/results/report.md" || fail "report.md does not flag the emulator"

# An injected fault: the self-test fails, the run exits 1 and says so.
rc=0
(cd "$kitdir" && GDROTRAIN_EMU_FAULT=gemm GDROTRAIN_CUDA_LIB_DIR="$tmp/emu" GDROTRAIN_KERNEL_CACHE="$tmp/kernels" \
	./run.sh --out "$tmp/faulty" --python "" --steps info,selftest,hf,report) >"$tmp/stdout" 2>&1 || rc=$?
[ $rc = 1 ] || fail "the kit with a GEMM fault: exit $rc, want 1"
grep -q '"result": "fail"' "$tmp/faulty/summary.json" || fail "the faulty run's summary does not say fail"
grep -q "^| selftest-fp32 | \*\*FAIL\*\* (exit 1) | .*matmul NN" "$tmp/faulty/report.md" || fail "report.md does not name the failing check"
grep -q "^| hf-fp32 | SKIP | .*--python is empty" "$tmp/faulty/report.md" || fail "report.md does not say why hf-fp32 was skipped"
echo "test_gpu_kit: ok ($(($(date +%s) - start)) s: the kit passes on the emulator with wheel-only CUDA libraries, and fails on a fault)"
