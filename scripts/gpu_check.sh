#!/usr/bin/env bash
# Everything that needs a GPU, in one run, for a GPU node without Go (build
# here first: `make gpu-check-build`, then run this from the repository root
# on the node). Writes its logs to $OUT (default /tmp/gdrotrain-gpu-check):
#   1. the CUDA backend's tests on the real GPU (conformance, every op vs the
#      CPU, attention, training step, greedy decode, PyTorch goldens, sampler,
#      trainer end to end with exact resume);
#   2. an init-tiny model and an exported checkpoint loaded by transformers
#      (and vLLM when installed), logits compared with ours on the GPU in
#      fp32 and bf16;
#   3. `gdrotrain bench --device cuda` beside PyTorch + transformers.
set -uo pipefail
out=${OUT:-/tmp/gdrotrain-gpu-check}
mkdir -p "$out"
status=0
run() { echo "+ $*" | tee -a "$out/steps.txt"; "$@"; local rc=$?; [ $rc -eq 0 ] || { echo "FAILED ($rc): $*" | tee -a "$out/steps.txt"; status=1; }; }

nvidia-smi >"$out/nvidia-smi.txt" 2>&1 || true
(cd cuda && run ../bin/cuda.test -test.v -test.count=1 -test.timeout 20m) 2>&1 | tee "$out/cuda_test.txt"

tiny="$out/tiny"
run bin/gdrotrain init-tiny --out "$tiny" --layers 2 --hidden 128 --heads 4 --kv-heads 2 --head-dim 32 --vocab 512
ids=1,5,9,200,17,301,42,7,7,88,123,500
for prec in fp32 bf16; do
	run bin/gdrotrain logits --model "$tiny" --ids $ids --all --device cuda --matmul-precision $prec --out "$out/ours_$prec.json"
done
run python3 scripts/hf_check.py --model "$tiny" --ours "$out/ours_fp32.json" --dtype float32 --atol 1e-4 --rtol 1e-3 --vllm | tee "$out/hf_fp32.json"
run python3 scripts/hf_check.py --model "$tiny" --ours "$out/ours_bf16.json" --dtype bfloat16 --atol 5e-2 --rtol 5e-2 | tee "$out/hf_bf16.json"

run bin/gdrotrain bench --device cuda --torch-python python3 2>&1 | tee "$out/bench.txt"
exit $status
