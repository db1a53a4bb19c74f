#!/usr/bin/env bash
# The GPU kit: everything that needs a GPU, in one command, on a node with
# no Go toolchain. In the kit (make gpu-kit) this is run.sh:
#
#   tar xzf gdrotrain-gpu-kit.tar.gz && cd gdrotrain-gpu-kit && ./run.sh
#
# From a repository checkout it runs as `bash scripts/gpu_kit.sh` after
# `make gpu-check-build`. Steps (docs/gpu-kit.md says more):
#   info          nvidia-smi and `gdrotrain cuda-info --json`: GPU, driver,
#                 each library and where it was found
#   selftest-*    `cuda-info --self-test` in fp32 and bf16
#   cuda-tests    the CUDA backend's tests (bin/cuda.test) on the GPU
#   profile-tests the step-profile and benchmark tests (bin/cuda-profile.test,
#                 from cuda/profile) on the GPU
#   nccl-tests    the multi-process NCCL, data-parallel and ZeRO tests, one
#                 GPU per rank (when two or more GPUs are visible)
#   hf-*          an init-tiny model's logits against transformers' (Python
#                 with torch + transformers only)
#   bench         training step time, MFU and decode tokens/s, measured,
#                 beside PyTorch + transformers on the same GPU
#   report        summary.json and report.md from all of the above
# Every step runs even after another failed; the script exits 1 if any
# failed, 130 when interrupted (after writing the report of what ran).
# Results go to --out (default ./results-HOST-TIME beside run.sh, or $OUT).
#
# Options:
#   --out DIR            where the logs, summary.json and report.md go
#   --size auto|full|tiny  the benchmark's model: full (Qwen3-1.7B shapes)
#                        on a GPU, tiny on the project's CPU emulator
#                        (auto: by what cuda-info reports)
#   --python PY          the Python with torch + transformers (default
#                        $PYTHON or python3); "" skips the Python steps
#   --steps LIST         comma-separated steps to run (default: all)
#   --tests REGEX        which CUDA tests to run (default: all)
#   --nccl auto|on|off   the NCCL tests: auto runs them with ≥ 2 GPUs
#   --nccl-tests REGEX   which of them (default: all multi-process tests)
# GDROTRAIN, CUDA_TEST and CUDA_PROFILE_TEST override the programs (scripts/test_gpu_kit.sh
# runs the script against fakes and on the emulator).
set -uo pipefail # not -e: a failed step is recorded and the next one runs

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
size=auto
python=${PYTHON-python3}
only=""
tests=""
nccl=auto
nccl_tests='^(TestNCCLCollectives|TestNCCLShardedAdamW|TestNCCLGradientReducer|TestNCCLMissingRank|TestDataParallelOnEmulator|TestShardedMastersOnEmulator)$'
while [ $# -gt 0 ]; do
	case $1 in
	--out) out=${2:?--out needs a folder}; shift ;;
	--size) size=${2:?--size needs auto, full or tiny}; shift ;;
	--python) python=${2?--python needs an interpreter}; shift ;;
	--steps) only=${2:?--steps needs a list}; shift ;;
	--tests) tests=${2:?--tests needs a regular expression}; shift ;;
	--nccl) nccl=${2:?--nccl needs auto, on or off}; shift ;;
	--nccl-tests) nccl_tests=${2:?--nccl-tests needs a regular expression}; shift ;;
	-h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown option $1 (see --help)" ;;
	esac
	shift
done
case $size in auto | full | tiny) ;; *) die "--size $size: want auto, full or tiny" ;; esac
case $nccl in auto | on | off) ;; *) die "--nccl $nccl: want auto, on or off" ;; esac
if [ -z "$out" ]; then
	out="$root/results-$(hostname -s 2>/dev/null || echo host)-$(date +%Y%m%d-%H%M%S)"
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
# cgo links the programs against the build machine's glibc: on a node with
# an older one they do not start, and nothing below could run.
if ! err=$("$gdrotrain" --help 2>&1 >/dev/null); then
	case $err in
	*GLIBC_*) err="$err
This node's glibc ($(ldd --version 2>/dev/null | head -1)) is older than the kit's programs need ($(sed -n 's/^needs //p' "$root/VERSION" 2>/dev/null)):
build the kit on a machine (or in a container) whose glibc is no newer than the node's; docs/gpu-kit.md says how." ;;
	esac
	die "$gdrotrain does not start: $err"
fi
# A Python named by path decides which environment's pip wheels the CUDA
# library search looks in (it looks beside python3 on PATH; cuda/internal/wheels).
if [ -n "$python" ] && [[ $python == */* ]]; then
	PATH="$(cd "$(dirname "$python")" && pwd):$PATH"
	export PATH
fi

steps="$out/steps.tsv"
printf 'step\tstatus\trc\tseconds\tlog\tnote\n' >"$steps"

# want STEP: whether --steps selects STEP (a prefix selects a group:
# selftest selects selftest-fp32 and selftest-bf16).
want() {
	[ -z "$only" ] && return 0
	local s
	for s in ${only//,/ }; do
		case $1 in "$s" | "$s"-*) return 0 ;; esac
	done
	return 1
}

# record STEP STATUS RC SECONDS LOG NOTE: one line of steps.tsv.
record() {
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "${6//$'\t'/ }" >>"$steps"
	case $2 in
	pass) echo "== $1: passed ($4 s)" ;;
	skip) echo "== $1: skipped ($6)" ;;
	*) echo "== $1: FAILED, exit $3 ($4 s; log $out/$5)${6:+: $6}" ;;
	esac
}

skip() { record "$1" skip 0 0 "" "$2"; }

# limited SECONDS CMD...: CMD under a time limit where timeout(1) is here
# (GNU's and busybox's take -k), else CMD as it is.
limited() {
	local secs=$1
	shift
	if command -v timeout >/dev/null; then
		timeout -k 30 "$secs" "$@"
	else
		"$@"
	fi
}

# A step runs in the background and the script waits for it, so that an
# interrupt (Ctrl-C; scancel's SIGTERM) is handled at once: timeout(1) puts
# the step in a process group of its own, which the terminal's Ctrl-C does
# not reach, and passes our SIGTERM on to the whole group (the NCCL tests'
# worker processes included). The step is recorded as interrupted, and the
# script stops after writing the report of what ran.
step_pid=""
interrupted=""
on_signal() {
	interrupted=1
	[ -n "$step_pid" ] && kill -TERM "$step_pid" 2>/dev/null
}
trap on_signal INT TERM

# run STEP LIMIT LOG CMD...: runs CMD (not in a pipeline's subshell, where a
# failure would be lost) under a time limit of LIMIT seconds, its output to
# the terminal and to $out/LOG.
run() {
	local step=$1 limit=$2 log=$3 rc start end note=""
	shift 3
	want "$step" || return 0
	[ -n "$interrupted" ] && return 0
	echo "== $step: $*" | tee -a "$out/$log"
	start=$(date +%s)
	# Simple commands, so that $! is timeout's (or CMD's) own process.
	if command -v timeout >/dev/null; then
		timeout -k 30 "$limit" "$@" > >(tee -a "$out/$log") 2>&1 &
	else
		"$@" > >(tee -a "$out/$log") 2>&1 &
	fi
	step_pid=$!
	# wait returns early when a signal's trap runs; wait again for the end.
	while true; do
		wait "$step_pid"
		rc=$?
		kill -0 "$step_pid" 2>/dev/null || break
	done
	step_pid=""
	end=$(date +%s)
	if [ -n "$interrupted" ]; then
		note="interrupted"
	elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
		note="timed out after $limit s"
	fi
	if [ $rc -eq 0 ]; then
		record "$step" pass 0 $((end - start)) "$log" ""
	else
		record "$step" fail $rc $((end - start)) "$log" "$note"
	fi
}

# passed STEP: whether STEP ran and passed.
passed() { grep -q "^$1	pass	" "$steps"; }

echo "gpu_kit: results in $out"

# info: what the node has. nvidia-smi is a record, not a step: containers
# and some nodes lack it while the GPU works.
if want info; then
	if command -v nvidia-smi >/dev/null; then
		nvidia-smi >"$out/nvidia-smi.txt" 2>&1
		nvidia-smi --query-gpu=index,name,driver_version,memory.total,power.limit,clocks.max.sm,pci.bus_id \
			--format=csv >"$out/nvidia-smi.csv" 2>&1
		nvidia-smi topo -m >"$out/nvidia-smi-topo.txt" 2>&1
	fi
	# The first Open compiles every kernel with NVRTC (cached after).
	run info 600 cuda-info.log sh -c 'exec "$@" >"$0"' "$out/cuda-info.json" "$gdrotrain" cuda-info --json
	cat "$out/cuda-info.json" 2>/dev/null
fi
emulator=false
devices=0
if [ -s "$out/cuda-info.json" ]; then
	grep -q '"emulator": true' "$out/cuda-info.json" && emulator=true
	devices=$(sed -n 's/^ *"devices": \([0-9]*\),*$/\1/p' "$out/cuda-info.json")
	devices=${devices:-0}
fi
if [ "$size" = auto ]; then
	size=full
	[ "$emulator" = true ] && size=tiny
fi
echo "gpu_kit: size $size, $devices GPU(s) visible, emulator $emulator"

for prec in fp32 bf16; do
	run selftest-$prec 600 selftest-$prec.log "$gdrotrain" cuda-info --self-test --matmul-precision $prec
done

# The tests read their testdata relative to the package folder (cuda/).
# On a GPU, GDROTRAIN_TEST_DEVICE=gpu makes them run there or fail: never
# on an emulator they would build, never skipped.
testenv=()
if [ "$emulator" = false ]; then
	testenv=(env GDROTRAIN_TEST_DEVICE=gpu)
fi
testargs=(-test.v -test.count=1)
if want cuda-tests; then
	args=("${testargs[@]}" -test.timeout 15m -test.skip "$nccl_tests")
	[ -n "$tests" ] && args+=(-test.run "$tests")
	cd "$root/cuda" || die "no $root/cuda"
	run cuda-tests 960 cuda-tests.log "${testenv[@]}" "$cudatest" "${args[@]}"
	cd "$OLDPWD" || die "cannot return to $OLDPWD"
fi
if want profile-tests; then
	cd "$root/cuda/profile" || die "no $root/cuda/profile"
	run profile-tests 960 profile-tests.log "${testenv[@]}" "$profiletest" "${testargs[@]}" -test.timeout 15m
	cd "$OLDPWD" || die "cannot return to $OLDPWD"
fi
if want nccl-tests; then
	if [ "$nccl" = off ]; then
		skip nccl-tests "--nccl off"
	elif [ "$nccl" = auto ] && { [ "$emulator" = true ] || [ "$devices" -lt 2 ]; }; then
		skip nccl-tests "$devices GPU(s) visible; the NCCL tests need 2 or more (the emulator runs them in make test)"
	else
		cd "$root/cuda" || die "no $root/cuda"
		run nccl-tests 900 nccl-tests.log "${testenv[@]}" "$cudatest" "${testargs[@]}" -test.timeout 14m -test.run "$nccl_tests"
		cd "$OLDPWD" || die "cannot return to $OLDPWD"
	fi
fi

# Python with torch and transformers (and a GPU torch can see): the
# transformers check and the PyTorch baseline of the benchmark need it.
have_torch=false
torch_why=""
if [ -z "$python" ]; then
	torch_why="--python is empty"
elif ! command -v "$python" >/dev/null; then
	torch_why="no $python"
else
	# Importing torch from a network file system can take a while.
	if limited 300 "$python" -c 'import torch, transformers
assert torch.cuda.is_available(), "torch sees no GPU"
print("python", __import__("sys").version.split()[0], "torch", torch.__version__, "CUDA", torch.version.cuda,
      "transformers", transformers.__version__)' >"$out/python.txt" 2>&1; then
		have_torch=true
	else
		torch_why="$python: $(tail -1 "$out/python.txt")"
	fi
fi

tiny="$out/tiny-model"
ids=1,5,9,200,17,301,42,7,7,88,123,500
if want hf; then
	run hf-model 120 hf.log "$gdrotrain" init-tiny --out "$tiny" --force --layers 2 --hidden 128 --heads 4 --kv-heads 2 --head-dim 32 --vocab 512
	for prec in fp32 bf16; do
		run hf-logits-$prec 300 hf.log "$gdrotrain" logits --model "$tiny" --ids $ids --all --device cuda --matmul-precision $prec \
			--skip-self-test --out "$out/ours_$prec.json"
	done
	if [ "$have_torch" = false ]; then
		skip hf-fp32 "no PyTorch + transformers: $torch_why"
		skip hf-bf16 "no PyTorch + transformers: $torch_why"
	else
		for prec in fp32 bf16; do
			if passed hf-logits-$prec; then
				if [ $prec = fp32 ]; then
					tol=(--dtype float32 --atol 1e-4 --rtol 1e-3 --vllm)
				else
					tol=(--dtype bfloat16 --atol 5e-2 --rtol 5e-2)
				fi
				run hf-$prec 600 hf-$prec.log "$python" "$root/scripts/hf_check.py" --model "$tiny" --ours "$out/ours_$prec.json" "${tol[@]}"
			else
				skip hf-$prec "our logits in $prec failed"
			fi
		done
	fi
fi

if want bench; then
	shape=qwen3-1.7b
	[ "$size" = tiny ] && shape=tiny
	torch=""
	if [ "$have_torch" = true ]; then
		torch=$python
	else
		echo "gpu_kit: the benchmark runs without its PyTorch baseline: $torch_why"
	fi
	# bench's own self-test ran above; its JSON goes to stdout, the
	# progress lines to stderr.
	run bench 1500 bench.log sh -c 'exec "$@" >"$0"' "$out/bench.json" "$gdrotrain" bench --device cuda --gpu-shape "$shape" --json \
		--skip-self-test --torch-python "$torch" --torch-script "$root/scripts/bench_torch.py"
fi

if want report; then
	interrupted_run=$interrupted
	interrupted="" # the report of what ran is still written
	version=$(head -1 "$root/VERSION" 2>/dev/null || git -C "$root" describe --always --dirty 2>/dev/null || true)
	run report 60 report.log "$gdrotrain" kit-report --dir "$out" --size "$size" --kit-version "$version"
	[ -f "$out/report.md" ] && cat "$out/report.md"
fi
wait # the tee processes
if [ -n "${interrupted_run:-}$interrupted" ]; then
	echo "gpu_kit: interrupted; what ran is in $out"
	exit 130
fi
failed=$(grep -c '	fail	' "$steps")
if [ "$failed" -ne 0 ]; then
	echo "gpu_kit: $failed step(s) FAILED; send back the folder $out (summary.json, report.md and the logs)"
	exit 1
fi
echo "gpu_kit: every step passed or was skipped; send back the folder $out (summary.json, report.md and the logs)"
