#!/usr/bin/env bash
# The GPU kit: everything that needs a GPU, in one command with an overall
# deadline, on a node with no Go toolchain. In the kit (make gpu-kit) this
# is run.sh:
#
#   tar xzf gdrotrain-gpu-kit.tar.gz && cd gdrotrain-gpu-kit && ./run.sh --out "$OUT"
#
# From a repository checkout it runs as `bash scripts/gpu_kit.sh` after
# `make gpu-check-build`. Phases, in the order of what they are worth; each
# gets what is left of the deadline (less a reserve for the report), and a
# phase the deadline cuts is reported as cut, with what it finished
# (docs/gpu-kit.md says more):
#   compile       nvidia-smi, `gdrotrain cuda-info --json` (GPU, driver, each
#                 library and where it was found), which compiles every
#                 kernel with the node's NVRTC; on a compile failure, the
#                 kernel tests name every kernel that does not compile
#   selftest      `cuda-info --self-test` in fp32 and bf16; when the bf16 one
#                 fails on the warpgroup-MMA attention, it is rerun with
#                 GDROTRAIN_ATTN_WGMMA=0 and the rest runs so (the report says)
#   bench         `gdrotrain bench --device cuda --json`, measured (no baseline)
#   cuda-tests    the CUDA backend's tests (bin/cuda.test) on the GPU, the
#                 emulator-only ones left out; the multi-process NCCL tests
#                 with two or more GPUs
#   python        an init-tiny model's logits against transformers'; a tiny
#                 LoRA run's exported adapter loaded by peft, and its
#                 TensorBoard files read by tensorboard (each where importable)
#   profile-tests the step-profile and benchmark tests (bin/cuda-profile.test)
#   baseline      the bench again beside PyTorch + transformers, if time remains
# What comes back (--out, default $OUT or ./results-HOST-TIME): summary.json,
# report.md, console.log (everything printed) and logs.tar.gz (every step's
# log and record); nothing else. The report is written also when the run is
# interrupted (SIGINT, SIGTERM). Exit status: 0 every phase passed (or was
# skipped), 1 a step failed, 3 none failed but the deadline cut one, 130
# interrupted, 2 a bad option.
#
# Options:
#   --out DIR            where the four files go
#   --deadline-s N       the whole run's deadline in seconds (default 480)
#   --size auto|full|tiny  the benchmark's model: full (Qwen3-1.7B shapes)
#                        on a GPU, tiny on the project's CPU emulator
#                        (auto: by what cuda-info reports)
#   --python PY          the Python with torch + transformers (default
#                        $PYTHON or python3); "" skips the Python steps
#   --phases LIST        comma-separated phases to run (default: all)
#   --tests REGEX        which CUDA tests to run (default: all but the
#                        emulator-only ones)
#   --profile-tests REGEX  which profile tests to run (default: all)
#   --nccl auto|on|off   the NCCL tests: auto runs them with ≥ 2 GPUs
#   --nccl-tests REGEX   which of them (default: all multi-process tests)
# GDROTRAIN, CUDA_TEST and CUDA_PROFILE_TEST override the programs;
# GDROTRAIN_KERNEL_CACHE the kernel cache (default .cache/kernels in the
# kit's folder, so each kernel is compiled once for the whole kit);
# GPU_KIT_CONSOLE_MAX the bytes console.log keeps (default 12 MiB).
# scripts/test_gpu_kit.sh runs the script against fakes and on the emulator.
set -uo pipefail # not -e: a failed step is recorded and the next one runs
SECONDS=0        # the deadline counts from here

here=$(cd "$(dirname "$0")" && pwd)
root=$here
# In a repository checkout the script sits in scripts/, the rest above it.
if [ "$(basename "$here")" = scripts ] && [ -f "$here/../go.mod" ]; then
	root=$(dirname "$here")
fi

die() {
	echo "gpu_kit: $*" >&2
	exit 2
}
out=${OUT:-}
deadline=480
size=auto
python=${PYTHON-python3}
only=""
tests=""
profile_tests=""
nccl=auto
nccl_tests='^(TestNCCLCollectives|TestNCCLShardedAdamW|TestNCCLGradientReducer|TestNCCLMissingRank|TestDataParallelOnEmulator|TestShardedMastersOnEmulator)$'
# Left out of cuda-tests: the tests that need the emulator (or skip on one
# GPU after minutes: TestAsyncOnEmulator) and the multi-process NCCL tests
# (nccl-tests runs those with two or more GPUs).
emu_only='OnEmulator$|^TestNCCL(Collectives|ShardedAdamW|GradientReducer|MissingRank|Worker)$'
while [ $# -gt 0 ]; do
	case $1 in
	--out) out=${2:?--out needs a folder}; shift ;;
	--deadline-s) deadline=${2:?--deadline-s needs seconds}; shift ;;
	--size) size=${2:?--size needs auto, full or tiny}; shift ;;
	--python) python=${2?--python needs an interpreter}; shift ;;
	--phases) only=${2:?--phases needs a list}; shift ;;
	--tests) tests=${2:?--tests needs a regular expression}; shift ;;
	--profile-tests) profile_tests=${2:?--profile-tests needs a regular expression}; shift ;;
	--nccl) nccl=${2:?--nccl needs auto, on or off}; shift ;;
	--nccl-tests) nccl_tests=${2:?--nccl-tests needs a regular expression}; shift ;;
	-h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown option $1 (see --help)" ;;
	esac
	shift
done
case $size in auto | full | tiny) ;; *) die "--size $size: want auto, full or tiny" ;; esac
case $nccl in auto | on | off) ;; *) die "--nccl $nccl: want auto, on or off" ;; esac
[[ $deadline =~ ^[0-9]+$ ]] && [ "$deadline" -ge 30 ] || die "--deadline-s $deadline: want a whole number of seconds, 30 or more"
phases_all="compile selftest bench cuda-tests python profile-tests baseline"
for p in ${only//,/ }; do
	case " $phases_all " in *" $p "*) ;; *) die "--phases: no phase $p (the phases: $phases_all)" ;; esac
done
if [ -z "$out" ]; then
	out="$PWD/results-$(hostname -s 2>/dev/null || echo host)-$(date +%Y%m%d-%H%M%S)"
fi
mkdir -p "$out" || die "cannot create $out"
out=$(cd "$out" && pwd)
gdrotrain=${GDROTRAIN:-$root/bin/gdrotrain}
cudatest=${CUDA_TEST:-$root/bin/cuda.test}
profiletest=${CUDA_PROFILE_TEST:-$root/bin/cuda-profile.test}
for p in "$gdrotrain" "$cudatest" "$profiletest"; do
	[ -x "$p" ] || die "$p is missing or not executable (build the kit with make gpu-kit, or make gpu-check-build in a checkout)"
done
# The tests run from cuda/: the programs' paths must not be relative.
[[ $gdrotrain == /* ]] || gdrotrain=$PWD/$gdrotrain
[[ $cudatest == /* ]] || cudatest=$PWD/$cudatest
[[ $profiletest == /* ]] || profiletest=$PWD/$profiletest

# Everything the steps write goes to a scratch folder, packed into
# logs.tar.gz at the end: only four files come back in $out.
work=$(mktemp -d "${TMPDIR:-/tmp}/gdrotrain-kit.XXXXXX") || die "cannot create a scratch folder in ${TMPDIR:-/tmp}"
res=$work/results-$(hostname -s 2>/dev/null || echo host)-$(date +%Y%m%d-%H%M%S)
mkdir -p "$res"
# console.log: everything printed. tee ignores the signals that stop the
# run, so the lines about the interrupt and the report still reach it.
exec > >(
	trap '' INT TERM
	exec tee -a "$out/console.log"
) 2>&1
tee_pid=$!
for f in "$out"/*; do
	case ${f##*/} in console.log | summary.json | report.md | logs.tar.gz | '*') ;;
	*) echo "gpu_kit: warning: $out already holds ${f##*/}; only console.log, summary.json, report.md and logs.tar.gz are the kit's" ;;
	esac
done

# The kernel cache in the kit's folder (else the scratch folder): every
# process of the kit reuses what the first compiled.
if [ -z "${GDROTRAIN_KERNEL_CACHE:-}" ]; then
	GDROTRAIN_KERNEL_CACHE=$root/.cache/kernels
	mkdir -p "$GDROTRAIN_KERNEL_CACHE" 2>/dev/null && [ -w "$GDROTRAIN_KERNEL_CACHE" ] || GDROTRAIN_KERNEL_CACHE=$work/kernels
fi
export GDROTRAIN_KERNEL_CACHE

# A Python named by path decides which environment's pip wheels the CUDA
# library search looks in (it looks beside python3 on PATH; cuda/internal/wheels).
if [ -n "$python" ] && [[ $python == */* ]]; then
	PATH="$(cd "$(dirname "$python")" && pwd):$PATH"
	export PATH
fi

steps="$res/steps.tsv"
printf 'phase\tstep\tstatus\trc\tseconds\tlog\tnote\n' >"$steps"
notes="$res/notes.txt"
: >"$notes"

# Time: each step gets what is left of the deadline less $reserve (the
# report and the archive), and does not start with less than $min_start.
reserve=20
min_start=5
left() { echo $((deadline - reserve - SECONDS)); }

# want PHASE: whether --phases selects PHASE.
want() {
	[ -z "$only" ] && return 0
	case ",$only," in *",$1,"*) return 0 ;; esac
	return 1
}

# record PHASE STEP STATUS RC SECONDS LOG NOTE: one line of steps.tsv.
record() {
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$6" "${7//$'\t'/ }" >>"$steps"
	case $3 in
	pass) echo "== $2: passed ($5 s)" ;;
	skip) echo "== $2: skipped ($7)" ;;
	cut) echo "== $2: CUT by the deadline ($7)" ;;
	*) echo "== $2: FAILED, exit $4 ($5 s; log $6)${7:+: $7}" ;;
	esac
}

# skip PHASE STEP REASON: a step that does not run, for REASON. Past the
# deadline (or after an interrupt) it is cut instead, as it could not
# have run anyway; a step not selected is a skip whatever the time.
skip() {
	if [[ $3 != "not selected"* ]] && { [ -n "$interrupted" ] || [ "$(left)" -lt "$min_start" ]; }; then
		record "$1" "$2" cut 0 0 "" "not started: ${interrupted:+interrupted; }$((deadline - SECONDS)) s of the $deadline s deadline left"
		return
	fi
	record "$1" "$2" skip 0 0 "" "$3"
}

# limited SECONDS CMD...: CMD under a time limit where timeout(1) is here.
limited() {
	local secs=$1
	shift
	if command -v timeout >/dev/null; then
		timeout -k 5 "$secs" "$@"
	else
		"$@"
	fi
}

# A step runs in the background and the script waits for it, so that an
# interrupt (Ctrl-C; scancel's SIGTERM) is handled at once: timeout(1) puts
# the step in a process group of its own, which the terminal's Ctrl-C does
# not reach, and passes our SIGTERM on to the whole group (the NCCL tests'
# worker processes included). The step is recorded as interrupted, no
# other starts, and the report of what ran is written.
step_pid=""
interrupted=""
on_signal() {
	interrupted=1
	[ -n "$step_pid" ] && kill -TERM "$step_pid" 2>/dev/null
}
trap on_signal INT TERM

# run PHASE STEP CAP LOG CMD...: runs CMD (not in a pipeline's subshell,
# where a failure would be lost) for at most CAP seconds or what is left of
# the deadline, its output to the console and to $res/LOG. Killed by the
# deadline it is "cut"; by its own cap, "fail" (timed out). Returns 0 when
# the step passed.
run() {
	local phase=$1 step=$2 cap=$3 log=$4 rc start secs lim bound=""
	shift 4
	lim=$(left)
	if [ -n "$interrupted" ]; then
		record "$phase" "$step" cut 0 0 "" "not started: interrupted; $((deadline - SECONDS)) s of the $deadline s deadline left"
		return 1
	fi
	if [ "$lim" -lt "$min_start" ]; then
		record "$phase" "$step" cut 0 0 "" "not started: $((deadline - SECONDS)) s of the $deadline s deadline left"
		return 1
	fi
	if [ "$lim" -lt "$cap" ]; then
		bound=1
	else
		lim=$cap
	fi
	echo "== $step (limit $lim s): $*" | tee -a "$res/$log"
	start=$SECONDS
	# The tee first, on a descriptor of its own, so that the step's end can
	# wait for it: the log is whole before anything reads it.
	local fd tee_step
	exec {fd}> >(tee -a "$res/$log")
	tee_step=$!
	# Simple commands, so that $! is timeout's (or CMD's) own process.
	if command -v timeout >/dev/null; then
		timeout -k 5 "$lim" "$@" >&$fd 2>&1 &
	else
		"$@" >&$fd 2>&1 &
	fi
	step_pid=$!
	exec {fd}>&- # the step holds the tee's input now; its end is the tee's
	# wait returns early when a signal's trap runs; wait again for the end.
	while true; do
		wait "$step_pid"
		rc=$?
		kill -0 "$step_pid" 2>/dev/null || break
	done
	step_pid=""
	# The tee ends when every writer has closed the pipe; a process the step
	# left behind may hold it, so wait 5 s at most.
	for _ in $(seq 50); do
		kill -0 "$tee_step" 2>/dev/null || break
		sleep 0.1
	done
	secs=$((SECONDS - start))
	if [ $rc -eq 0 ]; then
		record "$phase" "$step" pass 0 $secs "$log" ""
		return 0
	fi
	if [ -n "$interrupted" ]; then
		record "$phase" "$step" cut $rc $secs "$log" "interrupted after $secs s"
	elif { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && [ -n "$bound" ]; then
		record "$phase" "$step" cut $rc $secs "$log" "cut by the $deadline s deadline after $secs s"
	elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
		record "$phase" "$step" fail $rc $secs "$log" "timed out after $lim s"
	else
		record "$phase" "$step" fail $rc $secs "$log" ""
	fi
	return 1
}

# indir DIR CMD...: CMD in DIR (the tests read their testdata relative to
# their package folder), in this shell: a subshell would not see the
# interrupt's trap.
indir() {
	local back=$PWD rc
	cd "$1" || return 1
	shift
	"$@"
	rc=$?
	cd "$back" || return 1
	return $rc
}

# passed STEP: whether STEP ran and passed.
passed() { awk -F'\t' -v s="$1" '$2 == s && $3 == "pass" { f = 1 } END { exit !f }' "$steps"; }

echo "gpu_kit: deadline $deadline s; results in $out (the steps' files in $res, packed into logs.tar.gz); kernel cache $GDROTRAIN_KERNEL_CACHE"

# ---- 1. compile: what the node has, and every kernel compiled ---------------
emulator=false
devices=0
starts=true
if want compile; then
	# cgo links the programs against the build machine's glibc: on a node
	# with an older one they do not start, and nothing below can run.
	if ! err=$("$gdrotrain" --help 2>&1 >/dev/null); then
		case $err in
		*GLIBC_*) err="$err
This node's glibc ($(ldd --version 2>/dev/null | head -1)) is older than the kit's programs need ($(sed -n 's/^needs //p' "$root/VERSION" 2>/dev/null)):
build the kit on a machine (or in a container) whose glibc is no newer than the node's; docs/gpu-kit.md says how." ;;
		esac
		echo "$gdrotrain does not start: $err" | tee "$res/start.log"
		record compile start fail 1 0 start.log "$gdrotrain does not start"
		starts=false
	fi
	# nvidia-smi is a record, not a step: containers and some nodes lack it
	# while the GPU works.
	if command -v nvidia-smi >/dev/null; then
		limited 20 nvidia-smi >"$res/nvidia-smi.txt" 2>&1
		limited 20 nvidia-smi --query-gpu=index,name,driver_version,memory.total,power.limit,clocks.max.sm,pci.bus_id \
			--format=csv >"$res/nvidia-smi.csv" 2>&1
		limited 20 nvidia-smi topo -m >"$res/nvidia-smi-topo.txt" 2>&1
	fi
	if [ $starts = true ]; then
		# The first Open compiles every kernel with NVRTC into the cache.
		if ! run compile info 300 cuda-info.log sh -c 'exec "$@" >"$0"' "$res/cuda-info.json" "$gdrotrain" cuda-info --json &&
			grep -q 'compile kernels/' "$res/cuda-info.log"; then
			# cuda-info stops at the first kernel that does not compile; the
			# kernel test compiles them all and names each that fails.
			indir "$root/cuda" run compile kernels 300 kernels.log "$cudatest" -test.v -test.count=1 -test.run '^TestKernelsCompile$'
		fi
		cat "$res/cuda-info.json" 2>/dev/null
	fi
else
	skip compile compile "not selected (--phases)"
fi
if [ $starts = false ]; then
	for p in $phases_all; do
		[ $p = compile ] || skip $p $p "$gdrotrain does not start"
	done
	only=none # nothing else can run
fi
if [ -s "$res/cuda-info.json" ]; then
	grep -q '"emulator": true' "$res/cuda-info.json" && emulator=true
	devices=$(sed -n 's/^ *"devices": \([0-9]*\),*$/\1/p' "$res/cuda-info.json")
	devices=${devices:-0}
fi
if [ "$size" = auto ]; then
	size=full
	[ "$emulator" = true ] && size=tiny
fi
echo "gpu_kit: size $size, $devices GPU(s) visible, emulator $emulator"

# ---- 2. selftest --------------------------------------------------------------
if want selftest; then
	run selftest selftest-fp32 300 selftest-fp32.log "$gdrotrain" cuda-info --self-test --matmul-precision fp32
	if ! run selftest selftest-bf16 300 selftest-bf16.log "$gdrotrain" cuda-info --self-test --matmul-precision bf16 &&
		grep -q 'GDROTRAIN_ATTN_WGMMA=0' "$res/selftest-bf16.log"; then
		# The warpgroup-MMA attention failed: the mma.sync kernels are the
		# fallback; with them the rest still measures and tests the GPU.
		if run selftest selftest-bf16-mma 300 selftest-bf16-mma.log env GDROTRAIN_ATTN_WGMMA=0 "$gdrotrain" cuda-info --self-test --matmul-precision bf16; then
			export GDROTRAIN_ATTN_WGMMA=0
			echo "The bf16 self-test failed on the warpgroup-MMA attention kernels (sm_90a) and passed with GDROTRAIN_ATTN_WGMMA=0: every later phase ran with the mma.sync attention kernels." >>"$notes"
		fi
	fi
elif [ "$only" != none ]; then
	skip selftest selftest "not selected (--phases)"
fi

# Python with torch and transformers (and a GPU torch can see): the
# transformers check and the PyTorch baseline need it; peft and
# tensorboard are checked where importable. A record, not a step.
have_torch=false
torch_why=""
have_peft=false
have_tb=false
probe_python() {
	if [ -z "$python" ]; then
		torch_why="--python is empty"
		return
	fi
	if ! command -v "$python" >/dev/null; then
		torch_why="no $python"
		return
	fi
	local lim
	lim=$(left)
	[ "$lim" -gt 120 ] && lim=120
	if [ "$lim" -lt "$min_start" ]; then
		torch_why="no time left to look"
		return
	fi
	# Importing torch from a network file system can take a while.
	limited "$lim" "$python" -c 'import sys
def version(m):
    try:
        return __import__(m).__version__
    except Exception as e:
        return "none (" + type(e).__name__ + ")"
line = "python %s torch %s transformers %s peft %s tensorboard %s" % (sys.version.split()[0], version("torch"),
    version("transformers"), version("peft"), version("tensorboard"))
import torch, transformers
assert torch.cuda.is_available(), "torch sees no GPU: " + line
print(line + " CUDA " + str(torch.version.cuda))' >"$res/python.txt" 2>&1 &
	# In the background, as a step is, so that an interrupt ends it at once.
	step_pid=$!
	local rc
	while true; do
		wait "$step_pid"
		rc=$?
		kill -0 "$step_pid" 2>/dev/null || break
	done
	step_pid=""
	grep -q ' peft [0-9]' "$res/python.txt" && have_peft=true
	grep -q ' tensorboard [0-9]' "$res/python.txt" && have_tb=true
	if [ $rc -eq 0 ]; then
		have_torch=true
	else
		torch_why="$python: $(tail -1 "$res/python.txt")"
	fi
}

# ---- 3. bench, measured -------------------------------------------------------
shape=qwen3-1.7b
[ "$size" = tiny ] && shape=tiny
if want bench; then
	# The self-test ran above; the JSON goes to stdout, progress to stderr.
	# The PyTorch baseline is phase 7's (bench --torch-only). Cut (timeout's
	# TERM), the bench writes the rows it measured with an "interrupted"
	# note, within 3 s: before timeout's KILL 5 s later.
	run bench bench 600 bench.log sh -c 'exec "$@" >"$0"' "$res/bench.json" "$gdrotrain" bench --device cuda --gpu-shape "$shape" --json \
		--skip-self-test --no-torch
elif [ "$only" != none ]; then
	skip bench bench "not selected (--phases)"
fi

# ---- 4. the CUDA tests on the GPU ---------------------------------------------
# The tests read their testdata relative to the package folder (cuda/).
# On a GPU, GDROTRAIN_TEST_DEVICE=gpu makes them run there or fail: never
# on an emulator they would build, never skipped.
testenv=(env)
if [ "$emulator" = false ]; then
	testenv=(env GDROTRAIN_TEST_DEVICE=gpu)
fi
testargs=(-test.v -test.count=1)
if want cuda-tests; then
	args=("${testargs[@]}" -test.timeout 15m -test.skip "$emu_only")
	[ -n "$tests" ] && args+=(-test.run "$tests")
	indir "$root/cuda" run cuda-tests cuda-tests 900 cuda-tests.log "${testenv[@]}" "$cudatest" "${args[@]}"
	if [ "$nccl" = off ]; then
		skip cuda-tests nccl-tests "--nccl off"
	elif [ "$nccl" = auto ] && { [ "$emulator" = true ] || [ "$devices" -lt 2 ]; }; then
		skip cuda-tests nccl-tests "$devices GPU(s) visible; the NCCL tests need 2 or more (the emulator runs them in make test)"
	else
		indir "$root/cuda" run cuda-tests nccl-tests 600 nccl-tests.log "${testenv[@]}" "$cudatest" "${testargs[@]}" -test.timeout 14m -test.run "$nccl_tests"
	fi
elif [ "$only" != none ]; then
	skip cuda-tests cuda-tests "not selected (--phases)"
fi

# ---- 5. Python: transformers, peft, tensorboard -------------------------------
if want python || want baseline; then
	probe_python
	echo "gpu_kit: Python: $(tail -1 "$res/python.txt" 2>/dev/null || echo "$torch_why")"
fi
tiny="$res/tiny-model"
ids=1,5,9,200,17,301,42,7,7,88,123,500
if want python; then
	run python hf-model 120 hf.log "$gdrotrain" init-tiny --out "$tiny" --layers 2 --hidden 128 --heads 4 --kv-heads 2 --head-dim 32 --vocab 512
	for prec in fp32 bf16; do
		run python hf-logits-$prec 120 hf.log "$gdrotrain" logits --model "$tiny" --ids $ids --all --device cuda --matmul-precision $prec \
			--skip-self-test --out "$res/ours_$prec.json"
	done
	for prec in fp32 bf16; do
		if [ "$have_torch" = false ]; then
			skip python hf-$prec "no PyTorch + transformers: $torch_why"
		elif ! passed hf-logits-$prec; then
			skip python hf-$prec "our logits in $prec failed"
		else
			if [ $prec = fp32 ]; then
				tol=(--dtype float32 --atol 1e-4 --rtol 1e-3 --vllm)
			else
				tol=(--dtype bfloat16 --atol 5e-2 --rtol 5e-2)
			fi
			run python hf-$prec 300 hf-$prec.log "$python" "$root/scripts/hf_check.py" --model "$tiny" --ours "$res/ours_$prec.json" "${tol[@]}"
		fi
	done
	# A tiny LoRA run on the GPU (2 GRPO steps, TensorBoard on), its
	# adapters exported as a PEFT folder: peft loads it over the base and
	# must give our logits; tensorboard's own reader must read our event
	# files and find metrics.jsonl's figures in them.
	lora=$res/lora
	if [ "$have_peft" = false ] && [ "$have_tb" = false ]; then
		skip python lora-train "neither peft nor tensorboard importable: $(tail -1 "$res/python.txt" 2>/dev/null || echo "$torch_why")"
	else
		mkdir -p "$lora"
		"$gdrotrain" init-tiny --out "$lora/base" --layers 2 --hidden 64 --intermediate 96 --heads 4 --kv-heads 2 --head-dim 16 \
			--vocab 512 --eos "$(seq -s, 300 363)" --seed 12 >/dev/null 2>&1 &&
			"$gdrotrain" tokenize --write-tiny "$lora/base" --vocab 512 >/dev/null 2>&1
		for i in 1 2 3 4 5 6 7 8; do echo "{\"problem\": \"What is $i+$i?\", \"answer\": \"$((i + i))\"}"; done >"$lora/train.jsonl"
		cat >"$lora/config.yaml" <<EOF
run: {name: t, out_dir: $lora/runs, seed: 1, device: cuda}
model: {path: $lora/base, prompt: raw}
data: {train: [$lora/train.jsonl], template: none, max_prompt_length: 64}
sampling: {max_new_tokens: 8, max_slots: 16}
train: {method: grpo, steps: 2, prompts_per_step: 4, mini_batch_prompts: 4, micro_batch_rows: 16}
optim: {lr: 0.05}
lora: {rank: 4, alpha: 16}
loss: {overlong: {soft_penalty_tokens: 4}}
gdro: {rollout: {n_mean: 4}}
reward: {mode: dapo}
validation: {files: [], before_training: false}
checkpoint: {every: 1}
log: {tensorboard: true}
EOF
		if run python lora-train 240 lora.log "$gdrotrain" train --config "$lora/config.yaml" --skip-self-test; then
			ck=$(ls -d "$lora"/runs/t/checkpoints/step_* 2>/dev/null | tail -1)
			run python lora-export 60 lora.log "$gdrotrain" export --checkpoint "$ck" --out "$lora/adapter" --adapter --dtype fp32
		fi
	fi
	if [ "$have_peft" = false ]; then
		skip python peft "peft not importable: $(tail -1 "$res/python.txt" 2>/dev/null || echo "$torch_why")"
	elif [ "$have_torch" = false ]; then
		skip python peft "no PyTorch + transformers: $torch_why"
	elif ! passed lora-export; then
		skip python peft "the LoRA run or its export failed"
	elif run python lora-logits 120 lora.log "$gdrotrain" logits --model "$lora/adapter" --ids $ids --all --device cuda \
		--matmul-precision fp32 --skip-self-test --out "$res/ours_lora.json"; then
		run python peft 300 peft.log "$python" "$root/scripts/kit_checks.py" peft --base "$lora/base" --adapter "$lora/adapter" \
			--ours "$res/ours_lora.json"
	fi
	if [ "$have_tb" = false ]; then
		skip python tensorboard "tensorboard not importable: $(tail -1 "$res/python.txt" 2>/dev/null || echo "$torch_why")"
	elif ! passed lora-train; then
		skip python tensorboard "the LoRA run failed"
	else
		run python tensorboard 120 tensorboard.log "$python" "$root/scripts/kit_checks.py" tensorboard --run "$lora/runs/t"
	fi
elif [ "$only" != none ]; then
	skip python python "not selected (--phases)"
fi

# ---- 6. profile tests ---------------------------------------------------------
if want profile-tests; then
	args=("${testargs[@]}" -test.timeout 15m)
	[ -n "$profile_tests" ] && args+=(-test.run "$profile_tests")
	indir "$root/tools/profile" run profile-tests profile-tests 600 profile-tests.log "${testenv[@]}" "$profiletest" "${args[@]}"
elif [ "$only" != none ]; then
	skip profile-tests profile-tests "not selected (--phases)"
fi

# ---- 7. the PyTorch baseline, if time remains -----------------------------------
# PyTorch's rows alone (bench --torch-only); kit-report merges them into
# phase 3's rows by name, each with its ratio.
if want baseline; then
	if [ "$have_torch" = false ]; then
		skip baseline baseline "no PyTorch + transformers: $torch_why"
	else
		run baseline baseline 600 baseline.log sh -c 'exec "$@" >"$0"' "$res/bench-baseline.json" "$gdrotrain" bench --device cuda \
			--gpu-shape "$shape" --json --skip-self-test --torch-only --torch-python "$python" --torch-script "$root/scripts/bench_torch_gpu.py"
	fi
elif [ "$only" != none ]; then
	skip baseline baseline "not selected (--phases)"
fi

# ---- the report, always ---------------------------------------------------------
interrupted_run=$interrupted
trap '' INT TERM # the report of what ran is written whatever comes now
version=$(head -1 "$root/VERSION" 2>/dev/null || git -C "$root" describe --always --dirty 2>/dev/null || true)
if [ $starts = true ] && limited 10 "$gdrotrain" kit-report --dir "$res" --size "$size" --kit-version "$version" >"$res/report.log" 2>&1; then
	cp "$res/summary.json" "$res/report.md" "$out/"
else
	# kit-report could not run: a summary from steps.tsv alone.
	echo "gpu_kit: kit-report failed ($(tail -1 "$res/report.log" 2>/dev/null)); summary.json from steps.tsv alone"
	awk -F'\t' 'BEGIN { printf "{\n  \"result\": \"fail\",\n  \"error\": \"kit-report did not run: see console.log\",\n  \"steps\": [" }
		NR > 1 { gsub(/["\\]/, "", $7); printf "%s\n    {\"phase\": \"%s\", \"name\": \"%s\", \"status\": \"%s\", \"rc\": %s, \"seconds\": %s, \"note\": \"%s\"}",
			(NR > 2 ? "," : ""), $1, $2, $3, $4, $5, $7 }
		END { print "\n  ]\n}" }' "$steps" >"$out/summary.json"
	{
		echo "# gdrotrain GPU kit: FAIL"
		echo
		echo "kit-report did not run; the steps as run.sh recorded them:"
		echo
		echo '```'
		cat "$steps"
		echo '```'
	} >"$out/report.md"
fi
[ -f "$out/report.md" ] && cat "$out/report.md"
# The models' weights stay out (their logits are in): the archive is logs.
tar -czf "$out/logs.tar.gz" --exclude='*.safetensors' -C "$work" "${res##*/}" || echo "gpu_kit: packing the logs into $out/logs.tar.gz failed"
rm -rf "$work"

rc=0
if [ -n "$interrupted_run" ]; then
	echo "gpu_kit: interrupted after $SECONDS s; what ran is in $out"
	rc=130
elif grep -q '"result": "fail"' "$out/summary.json"; then
	echo "gpu_kit: a step FAILED ($SECONDS s); send back $out: summary.json, report.md, console.log, logs.tar.gz"
	rc=1
elif grep -q '"result": "cut"' "$out/summary.json"; then
	echo "gpu_kit: the $deadline s deadline cut a phase ($SECONDS s); send back $out: summary.json, report.md, console.log, logs.tar.gz"
	rc=3
else
	echo "gpu_kit: every phase passed or was skipped in $SECONDS s; send back $out: summary.json, report.md, console.log, logs.tar.gz"
fi
# The console's last lines reach console.log before the script ends.
exec >&- 2>&-
wait "$tee_pid" 2>/dev/null
# What comes back is limited per file (16 MiB where this kit was planned):
# a console.log larger than GPU_KIT_CONSOLE_MAX bytes keeps its first
# quarter and last half; every step's whole log is in logs.tar.gz.
max=${GPU_KIT_CONSOLE_MAX:-12582912}
if [ "$(wc -c <"$out/console.log")" -gt "$max" ]; then
	{
		head -c $((max / 4)) "$out/console.log"
		printf '\n[… console.log cut to its first %d and last %d bytes; every step'"'"'s whole log is in logs.tar.gz …]\n' $((max / 4)) $((max / 2))
		tail -c $((max / 2)) "$out/console.log"
	} >"$out/console.log.cut" && mv "$out/console.log.cut" "$out/console.log"
fi
exit $rc
