#!/usr/bin/env bash
# Tests the GPU kit (scripts/gpu_kit.sh, run.sh in the kit) without a GPU:
#
# 1. Against fake programs (seconds): every phase is listed in summary.json
#    and only summary.json, report.md, console.log and logs.tar.gz come
#    back; every step runs even after another failed; the exit status (0
#    pass, 1 a failure, 3 cut, 130 interrupted, 2 a bad option); a failed
#    step's dependants are skipped with the reason; a kernel that does not
#    compile sends the kernel test to name each; a bf16 self-test failing on
#    the warpgroup-MMA attention is rerun with GDROTRAIN_ATTN_WGMMA=0 and the
#    rest runs so; the deadline cuts a hanging step, the phases after it are
#    reported cut, and the run ends by its deadline; an interrupt stops the
#    step at once and still writes the report; --phases.
# 2. On the CPU emulator (about two minutes on two cores): `make gpu-kit`'s
#    packing (scripts/make_gpu_kit.sh) of freshly built, stripped programs,
#    extracted and run as a node runs it (./run.sh with a short deadline),
#    with cuBLAS, NVRTC and NCCL found only in a CUDA 13 pip-wheel layout of
#    a virtual environment and a stand-in Python with "torch", "peft" and
#    "tensorboard": it must pass by its deadline, leave four files, list
#    every phase, carry the measured and the baseline numbers and count the
#    tests. (TEST_GPU_KIT_FAKES_ONLY=1 stops after part 1.) Then an injected fault (the warpgroup-MMA attention's dK/dV
#    kernel not run) must fail the bf16 self-test and the run, and the
#    rerun with the mma.sync kernels must pass and be reported.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
tmp=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
fail() {
	echo "test_gpu_kit: $*"
	for f in "$tmp"/stdout "$tmp"/x/*/steps.tsv; do
		[ -f "$f" ] && { echo "--- $f"; tail -40 "$f"; }
	done
	exit 1
}
start=$(date +%s)
go build -ldflags='-s -w' -o "$tmp/real/gdrotrain" ./cmd/gdrotrain
phases="compile selftest bench cuda-tests python profile-tests baseline"
# A scratch folder of the kit's own, to check it leaves nothing there.
export TMPDIR=$tmp/scratch
mkdir -p "$TMPDIR"

# unpack OUT: checks that OUT holds the kit's four files and nothing else,
# and unpacks logs.tar.gz into $tmp/x (steps.tsv and the logs).
unpack() {
	local got
	got=$(cd "$1" && ls -A | tr '\n' ' ')
	[ "$got" = "console.log logs.tar.gz report.md summary.json " ] || fail "$1 holds \"$got\", want the four files"
	rm -rf "$tmp/x"
	mkdir "$tmp/x"
	tar -C "$tmp/x" -xzf "$1/logs.tar.gz" || fail "$1/logs.tar.gz does not unpack"
	[ -z "$(ls -A "$TMPDIR")" ] || fail "the kit left $(ls -A "$TMPDIR") in its scratch folder"
}
# every_phase SUMMARY: the summary lists every phase, in order.
every_phase() {
	local got
	got=$(sed -n '/^  "phases": \[/,/^  \]/p' "$1" | sed -n 's/^      "name": "\(.*\)",$/\1/p' | tr '\n' ' ')
	[ "$got" = "$phases " ] || fail "$1 lists the phases \"$got\", want \"$phases \""
}

# ---- 1. fakes --------------------------------------------------------------
# Each fake logs its arguments (and GDROTRAIN_ATTN_WGMMA) and fails when its
# name, or its name and first argument, is in $FAIL; the one named $SLEEPER
# hangs. FAKE_COMPILE makes cuda-info fail to compile a kernel (and the
# kernel test name two); FAKE_WGMMA makes the bf16 self-test fail on the
# warpgroup-MMA attention unless GDROTRAIN_ATTN_WGMMA=0. The fake gdrotrain
# describes two GPUs (so the NCCL tests run) and leaves kit-report to the
# real binary.
mkdir -p "$tmp/fake"
for prog in gdrotrain cuda.test cuda-profile.test python; do
	cat >"$tmp/fake/$prog" <<FAKE
#!/usr/bin/env bash
echo "fake $prog \$* [wgmma=\${GDROTRAIN_ATTN_WGMMA:-}]" >>"\$FAKE_LOG"
case " \${FAIL:-} " in *" $prog "*|*" $prog:\${1:-} "*) echo "fake $prog fails"; exit 7;; esac
if [ "\${SLEEPER:-}" = $prog ]; then # a step that hangs, with a child of its own
	sleep 60 &
	echo "\$\$ \$!" >"\$FAKE_LOG.pids"
	wait
fi
case "$prog \${1:-} \${2:-} \${3:-} \${4:-}" in
"gdrotrain kit-report"*) exec "$tmp/real/gdrotrain" "\$@" ;;
"gdrotrain cuda-info --json"*)
	if [ -n "\${FAKE_COMPILE:-}" ]; then echo "Error: compile kernels/attention.cu for sm_100 with NVRTC 12.5: invalid value for --gpu-architecture" >&2; exit 1; fi
	printf '{\n  "gpu": "Fake H200",\n  "devices": 2,\n  "emulator": false,\n  "driver": "13.0"\n}\n' ;;
"gdrotrain cuda-info --self-test --matmul-precision bf16")
	if [ -n "\${FAKE_WGMMA:-}" ] && [ "\${GDROTRAIN_ATTN_WGMMA:-}" != 0 ]; then
		printf 'Error: GPU self-test failed: …\n  attention, bf16 activations, head_dim 128 (kernels: attn_wg_fwd_h; tolerance atol 0.05 + rtol 0.05): off\nHINT: … GDROTRAIN_ATTN_WGMMA=0 keeps the attention on the mma.sync kernels\n'
		exit 1
	fi ;;
"gdrotrain bench"*) echo '{"shape": "qwen3-1.7b", "train": [], "decode": []}' ;;
"cuda.test -test.v -test.count=1 -test.run ^TestKernelsCompile$")
	printf '=== RUN   TestKernelsCompile\n    nvrtc_test.go:63: compile kernels/attention.cu for sm_90 with NVRTC 12.5: x\n    nvrtc_test.go:63: compile kernels/norm.cu for sm_90 with NVRTC 12.5: y\n--- FAIL: TestKernelsCompile (1.00s)\n'
	exit 1 ;;
"python -c"*) echo "python 3.12 torch fake transformers fake peft 0.0 tensorboard 0.0 CUDA 13.0" ;;
esac
exit 0
FAKE
	chmod +x "$tmp/fake/$prog"
done
# kit WANT_RC [ARGS...]: runs the kit against the fakes (FAIL and the other
# variables as the caller set them) and wants exit status WANT_RC.
kit() {
	local rc=0 want=$1
	shift
	rm -rf "$tmp/out"
	: >"$tmp/log"
	FAKE_LOG="$tmp/log" GDROTRAIN="$tmp/fake/gdrotrain" CUDA_TEST="$tmp/fake/cuda.test" \
		CUDA_PROFILE_TEST="$tmp/fake/cuda-profile.test" GDROTRAIN_KERNEL_CACHE="$tmp/kernels" \
		bash scripts/gpu_kit.sh --out "$tmp/out" --python "$tmp/fake/python" "$@" >"$tmp/stdout" 2>&1 || rc=$?
	[ "$rc" = "$want" ] || fail "FAIL=\"${FAIL:-}\" $*: exit $rc, want $want"
	[ "$want" = 2 ] || unpack "$tmp/out"
}
# status STEP WANT: the step's status in steps.tsv.
status() {
	local got
	got=$(awk -F'\t' -v s="$1" '$2 == s { print $3 }' "$tmp"/x/*/steps.tsv)
	[ "$got" = "$2" ] || fail "FAIL=\"${FAIL:-}\": step $1 is \"$got\", want $2"
}
ran() { grep -q -- "$1" "$tmp/log" || fail "FAIL=\"${FAIL:-}\": \"$1\" did not run"; }
ranF() { grep -qF -- "$1" "$tmp/log" || fail "FAIL=\"${FAIL:-}\": \"$1\" did not run"; }

FAIL="" kit 0
for s in info selftest-fp32 selftest-bf16 bench cuda-tests nccl-tests hf-model hf-logits-fp32 hf-logits-bf16 hf-fp32 hf-bf16 \
	lora-train lora-export lora-logits peft tensorboard profile-tests baseline; do
	status $s pass
done
every_phase "$tmp/out/summary.json"
ranF 'fake cuda.test -test.v -test.count=1 -test.timeout 15m -test.skip OnEmulator$|^TestNCCL(Collectives|ShardedAdamW|GradientReducer|MissingRank|Worker)$ [wgmma=]'
ran "fake cuda.test .* -test.run ^(TestNCCLCollectives"
ran "fake cuda-profile.test -test.v -test.count=1 -test.timeout 15m"
ran "fake gdrotrain bench .* --no-torch \[" # measured alone, then
ran "--torch-only --torch-python $tmp/fake/python --torch-script"  # PyTorch's rows alone
ran "fake python .*kit_checks.py peft --base"
ran "fake python .*kit_checks.py tensorboard --run"
grep -q "fake cuda.test .*TestKernelsCompile" "$tmp/log" && fail "the kernel test ran though every kernel compiled"
grep -q '"result": "pass"' "$tmp/out/summary.json" || fail "summary.json does not say pass"
grep -q "^# gdrotrain GPU kit: PASS" "$tmp/out/report.md" || fail "report.md does not say PASS"
grep -q "fake python -c" "$tmp/out/console.log" && fail "console.log has the fakes' own log"
grep -q "== profile-tests: passed" "$tmp/out/console.log" || fail "console.log lacks what the run printed"
grep -q "kernel cache $tmp/kernels\$" "$tmp/out/console.log" || fail "GDROTRAIN_KERNEL_CACHE set by the user was not kept"

FAIL="cuda.test" kit 1
status cuda-tests fail
status nccl-tests fail
status profile-tests pass
status bench pass
grep -q '"result": "fail"' "$tmp/out/summary.json" || fail "summary.json does not say fail"

FAIL="gdrotrain:logits" kit 1
status hf-logits-fp32 fail
status hf-fp32 skip
grep -q "our logits in fp32 failed" "$tmp"/x/*/steps.tsv || fail "no reason for skipping hf-fp32"
status bench pass

FAIL="python" kit 0
status hf-fp32 skip
status baseline skip
status peft skip
ran "fake gdrotrain bench .* --no-torch \["

FAKE_COMPILE=1 kit 1
status info fail
status kernels fail
grep -q "kernels that did not compile: attention.cu (sm_90), norm.cu (sm_90)" "$tmp/out/report.md" ||
	fail "report.md does not name each kernel that did not compile"
status selftest-bf16 pass

# The warpgroup-MMA attention fails the bf16 self-test: the run fails, the
# rerun with the mma.sync kernels passes, and every later step runs with them.
FAKE_WGMMA=1 kit 1
status selftest-bf16 fail
status selftest-bf16-mma pass
ran "fake gdrotrain bench .*\[wgmma=0\]"
ran "fake cuda.test .*\[wgmma=0\]"
grep -q "fake gdrotrain cuda-info --self-test --matmul-precision fp32 \[wgmma=\]" "$tmp/log" || fail "the fp32 self-test ran with the fallback"
grep -q '"notes": \[' "$tmp/out/summary.json" || fail "summary.json has no note of the fallback"
grep -q "^\*\*Note:\*\* The bf16 self-test failed on the warpgroup-MMA attention" "$tmp/out/report.md" || fail "report.md does not say the rest ran with the mma.sync kernels"

# A console.log over its limit keeps its head and tail, and says so.
GPU_KIT_CONSOLE_MAX=2000 kit 0 --phases selftest,bench --nccl off
[ "$(wc -c <"$tmp/out/console.log")" -le 1700 ] || fail "console.log over its limit: $(wc -c <"$tmp/out/console.log") bytes"
grep -q "console.log cut to its first 500 and last 1000 bytes" "$tmp/out/console.log" || fail "the cut console.log does not say so"
grep -q "^gpu_kit: deadline" "$tmp/out/console.log" || fail "the cut console.log lost its head"
grep -q "^gpu_kit: every phase passed" "$tmp/out/console.log" || fail "the cut console.log lost its tail"
[ "$(tail -n +2 "$tmp"/x/*/steps.tsv | cut -f2,3 | tr '\t\n' ': ')" = "compile:skip selftest-fp32:pass selftest-bf16:pass bench:pass cuda-tests:skip python:skip profile-tests:skip baseline:skip " ] ||
	fail "--phases selftest,bench ran $(tail -n +2 "$tmp"/x/*/steps.tsv | cut -f2,3 | tr '\t\n' ': ')"
every_phase "$tmp/out/summary.json"
kit 2 --size huge
kit 2 --phases selftest,nonesuch
kit 2 --deadline-s 5m

# The deadline: a step that hangs is cut when the deadline (less the
# report's reserve) comes, the phases after it are reported cut without
# starting, the report is written, and the run ends by its deadline.
SECONDS=0
SLEEPER=cuda.test kit 3 --deadline-s 30
took=$SECONDS
[ $took -le 32 ] || fail "a 30 s deadline took $took s"
status cuda-tests cut
status profile-tests cut
status baseline cut
status bench pass
every_phase "$tmp/out/summary.json"
grep -q '"result": "cut"' "$tmp/out/summary.json" || fail "summary.json does not say cut"
grep -q "| cuda-tests | \*\*CUT\*\* | .* | cuda-tests, nccl-tests | cuda-tests: 0 passed, 0 failed, 0 skipped |" "$tmp/out/report.md" || fail "report.md does not say what the cut phase finished"
grep -q "cut by the 30 s deadline after" "$tmp"/x/*/steps.tsv || fail "the cut step's note"
grep -q "not started: .* of the 30 s deadline left" "$tmp"/x/*/steps.tsv || fail "the phases after the cut are not marked so"

# An interrupt (scancel's SIGTERM) ends the step in progress at once — the
# hanging test program and its child too — records it, writes the report
# of what ran and exits 130, running nothing after it.
rm -rf "$tmp/out" "$tmp/log.pids"
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
unpack "$tmp/out"
FAIL=interrupt
status cuda-tests cut
grep -q "	interrupted after" "$tmp"/x/*/steps.tsv || fail "the interrupted step is not marked so"
status profile-tests cut
every_phase "$tmp/out/summary.json"
grep -q "fake cuda-profile.test" "$tmp/log" && fail "a step ran after the interrupt"
grep -q "interrupted after" "$tmp/out/console.log" || fail "console.log lacks the interrupt"
sleep 0.5
for pid in $(cat "$tmp/log.pids"); do
	# Killed and not yet reaped (a zombie) counts as ended.
	if [ -e /proc/$pid/stat ] && [ "$(cut -d' ' -f3 /proc/$pid/stat)" != Z ]; then
		fail "process $pid of the interrupted step is still running"
	fi
done
echo "test_gpu_kit: fakes ok ($(($(date +%s) - start)) s)"
[ -z "${TEST_GPU_KIT_FAKES_ONLY:-}" ] || exit 0 # while working on the script

# ---- 2. the kit on the emulator ---------------------------------------------
# The test binary builds its own emulator; a shared object cache spares it
# compiling what the first build compiled.
export GDROTRAIN_EMU_CACHE=${GDROTRAIN_EMU_CACHE:-$tmp/emu-cache}
go test -c -ldflags='-s -w' -o "$tmp/real/cuda.test" ./cuda/
go test -c -ldflags='-s -w' -o "$tmp/real/cuda-profile.test" ./tools/profile/
go run ./internal/testinfra/cudaemu/cmd/build-emulator "$tmp/emu" >/dev/null
bash scripts/make_gpu_kit.sh --gdrotrain "$tmp/real/gdrotrain" --cuda-test "$tmp/real/cuda.test" \
	--cuda-profile-test "$tmp/real/cuda-profile.test" --out "$tmp/kit.tar.gz" >/dev/null
mkdir "$tmp/node"
tar -C "$tmp/node" -xzf "$tmp/kit.tar.gz"
kitdir=$tmp/node/gdrotrain-gpu-kit
for f in run.sh bin/gdrotrain bin/cuda.test bin/cuda-profile.test cuda/shim.h model/testdata/qwen3_tiny_tied/golden.json scripts/hf_check.py \
	scripts/bench_torch_gpu.py scripts/kit_checks.py VERSION README.txt docs/gpu-kit.md; do
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
# A Python with "torch", "peft" and "tensorboard": the transformers check
# passes, the PyTorch baseline answers for the tiny benchmark's shapes, and
# the peft and tensorboard checks find what they would read (the adapter
# folder, our logits of it, the event files).
cat >"$tmp/torchpy" <<'FAKE'
#!/usr/bin/env bash
case ${1:-} in
-c) echo "python 3.12 torch 0.0-fake transformers 0.0-fake peft 0.0-fake tensorboard 0.0-fake CUDA 13.0" ;;
*/hf_check.py) echo '{"ok": true, "max_abs": 0.0, "fake": "no transformers here"}' ;;
*/kit_checks.py)
	case $2 in
	peft) [ -f "$4/config.json" ] && [ -f "$6/adapter_config.json" ] && [ -f "$6/adapter_model.safetensors" ] && grep -q '"ids"' "$8" || exit 1
		echo '{"check": "peft", "ok": true, "fake": "no peft here"}' ;;
	tensorboard) ls "$4"/tb/events.out.tfevents.* >/dev/null && [ "$(wc -l <"$4/metrics.jsonl")" = 2 ] || exit 1
		echo '{"check": "tensorboard", "ok": true, "fake": "no tensorboard here"}' ;;
	*) exit 3 ;;
	esac ;;
*/bench_torch_gpu.py)
	cat >/dev/null
	echo '{"name": "tiny-256", "train_tok_s": 1234.5, "torch": "fake PyTorch"}'
	echo '{"name": "decode-b1-c64", "tok_s": 77, "torch": "fake PyTorch"}'
	echo '{"name": "decode-b4-c64", "note": "out of memory"}' ;;
*) exit 3 ;;
esac
FAKE
chmod +x "$tmp/torchpy"
deadline=420 # generous: CI machines are slow and shared; an idle 2-core one needs about 150 s
rc=0
SECONDS=0
(cd "$kitdir" && env -u GDROTRAIN_TEST_DEVICE -u GDROTRAIN_KERNEL_CACHE VIRTUAL_ENV="$tmp/venv" GDROTRAIN_CUDA_LIB_DIR="$tmp/driver" \
	PYTHON="$tmp/torchpy" ./run.sh --out "$tmp/results" --deadline-s $deadline \
	--tests '^(TestDeviceForExternalTests|TestGoldenPyTorchOnCUDA|TestSonameMajor)$' --profile-tests '^(TestWritePipeline|TestDecodeProfile)$' \
	--nccl on --nccl-tests '^TestNCCLGradientReducer$') >"$tmp/stdout" 2>&1 || rc=$?
took=$SECONDS
[ $rc = 0 ] || fail "the kit on the emulator: exit $rc, want 0"
[ $took -le $((deadline + 2)) ] || fail "the kit on the emulator took $took s, past its $deadline s deadline"
unpack "$tmp/results"
sum=$tmp/results/summary.json
every_phase "$sum"
for want in '"result": "pass"' '"emulator": true' '"size": "tiny"' \
	"\"from\": \"pip wheel in $sp (VIRTUAL_ENV)\"" "\"path\": \"$sp/nvidia/cu13/lib/libcublas.so.13\"" \
	"\"path\": \"$sp/nvidia/cu13/lib/libnvrtc.so.13\"" "\"path\": \"$sp/nvidia/nccl/lib/libnccl.so.2\"" \
	'"from": "GDROTRAIN_CUDA_LIB_DIR"' '"torch_tok_s": 1234.5' '"bench_from": "bench.json + bench-baseline.json"' \
	'"torch_tok_s": 77' '"torch_note": "out of memory"' '"baseline": "baseline: fake PyTorch"' \
	'"device": "gdrotrain CPU emulator' '"python": "python 3.12 torch 0.0-fake' \
	"\"kernel_cache\": \"$kitdir/.cache/kernels\"" '"fake": "no peft here"' '"fake": "no tensorboard here"'; do
	grep -qF -- "$want" "$sum" || fail "summary.json lacks $want"
done
ls "$kitdir"/.cache/kernels/attention-*.cubin >/dev/null || fail "no kernel cache in the kit's folder"
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

# An injected fault: the warpgroup-MMA attention's dK/dV kernel does not
# run. The bf16 self-test fails naming its check, the run exits 1, and the
# rerun on the mma.sync kernels passes and is reported.
rc=0
(cd "$kitdir" && GDROTRAIN_EMU_FAULT=attn_wg_bwd_dkv_h GDROTRAIN_CUDA_LIB_DIR="$tmp/emu" \
	./run.sh --out "$tmp/faulty" --python "" --phases compile,selftest --deadline-s 120) >"$tmp/stdout" 2>&1 || rc=$?
[ $rc = 1 ] || fail "the kit with a wgmma fault: exit $rc, want 1"
unpack "$tmp/faulty"
every_phase "$tmp/faulty/summary.json"
status selftest-fp32 pass
status selftest-bf16 fail
status selftest-bf16-mma pass
grep -q '"result": "fail"' "$tmp/faulty/summary.json" || fail "the faulty run's summary does not say fail"
grep -q "^| selftest-bf16 | \*\*FAIL\*\* (exit 1) | .*failed checks: .*head_dim 128" "$tmp/faulty/report.md" || fail "report.md does not name the failing check"
grep -q "passed with GDROTRAIN_ATTN_WGMMA=0" "$tmp/faulty/report.md" || fail "report.md does not say the rest ran with the mma.sync kernels"
echo "test_gpu_kit: ok ($(($(date +%s) - start)) s: the kit passes on the emulator by its deadline with wheel-only CUDA libraries, and fails on a fault)"
