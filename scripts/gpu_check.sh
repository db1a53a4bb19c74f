#!/usr/bin/env bash
# Everything that needs a GPU, in one run, for a GPU node without Go (build
# here first: `make gpu-check-build`, then run this from the repository root
# on the node). Writes its logs to $OUT (default /tmp/gdrotrain-gpu-check):
#   0. `gdrotrain cuda-info --self-test` in fp32 and bf16: every op, a
#      training step and a greedy decode against the CPU backend;
#   1. the CUDA backend's tests on the real GPU (conformance, every op vs the
#      CPU, attention, training step, greedy decode, PyTorch goldens, sampler,
#      trainer end to end with exact resume);
#   2. an init-tiny model and an exported checkpoint loaded by transformers
#      (and vLLM when installed), logits compared with ours on the GPU in
#      fp32 and bf16;
#   3. `gdrotrain bench --device cuda` beside PyTorch + transformers.
# Every step runs even after a failure; the script exits 1 if any failed
# (listed in $OUT/steps.txt). GDROTRAIN, CUDA_TEST and PYTHON override the
# programs (scripts/test_gpu_check.sh runs it against fakes).
set -uo pipefail
out=${OUT:-/tmp/gdrotrain-gpu-check}
gdrotrain=${GDROTRAIN:-bin/gdrotrain}
cudatest=${CUDA_TEST:-$PWD/bin/cuda.test}
python=${PYTHON:-python3}
mkdir -p "$out"
: >"$out/steps.txt"
failed=0

# run LOG CMD...: runs CMD in this shell (never in a pipeline's subshell, where
# a failure would be lost), its output to the terminal and to $out/LOG.
run() {
	local log=$1 rc
	shift
	echo "+ $*" | tee -a "$out/steps.txt"
	"$@" > >(tee -a "$out/$log") 2>&1
	rc=$?
	if [ $rc -ne 0 ]; then
		echo "FAILED ($rc): $*" | tee -a "$out/steps.txt"
		failed=$((failed + 1))
	fi
	return 0
}

nvidia-smi >"$out/nvidia-smi.txt" 2>&1 || true
for prec in fp32 bf16; do
	run selftest.txt "$gdrotrain" cuda-info --self-test --matmul-precision $prec
done
cd cuda || exit 1 # the tests read their testdata relative to the package
run cuda_test.txt "$cudatest" -test.v -test.count=1 -test.timeout 20m
cd ..

tiny="$out/tiny"
run tiny.txt "$gdrotrain" init-tiny --out "$tiny" --layers 2 --hidden 128 --heads 4 --kv-heads 2 --head-dim 32 --vocab 512
ids=1,5,9,200,17,301,42,7,7,88,123,500
for prec in fp32 bf16; do
	run logits.txt "$gdrotrain" logits --model "$tiny" --ids $ids --all --device cuda --matmul-precision $prec --out "$out/ours_$prec.json"
done
run hf_fp32.json "$python" scripts/hf_check.py --model "$tiny" --ours "$out/ours_fp32.json" --dtype float32 --atol 1e-4 --rtol 1e-3 --vllm
run hf_bf16.json "$python" scripts/hf_check.py --model "$tiny" --ours "$out/ours_bf16.json" --dtype bfloat16 --atol 5e-2 --rtol 5e-2

run bench.txt "$gdrotrain" bench --device cuda --torch-python "$python"
wait # the tee processes
if [ $failed -ne 0 ]; then
	echo "gpu_check: $failed step(s) FAILED (see $out/steps.txt)"
	exit 1
fi
echo "gpu_check: every step passed (logs in $out)"
