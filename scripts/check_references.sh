#!/usr/bin/env bash
# check_references.sh (make check-references): gdrotrain's model folders, logits and tokenizer
# checked against Hugging Face transformers and llama.cpp, from the Debian sid chroot of
# scripts/sid_chroot.sh (made first if missing: about 2 minutes and 2 GB).
#
# Here, on this machine, with our binary (bin/gdrotrain, built first):
#   - init-tiny folders of eight shapes (GQA untied and tied, MQA, MHA, head_dim ≠ hidden/heads,
#     bf16 storage, the real Qwen3 vocabulary and tokenizer) with a tokenizer beside each;
#   - a trained checkpoint (one GRPO step of a tiny model with the real Qwen3 tokenizer) exported
#     with `gdrotrain export` as fp32, bf16 and fp32 sharded into several files;
#   - a LoRA checkpoint (two GRPO steps of adapters on a tiny model) exported merged (fp32) and
#     as a PEFT adapter folder (fp32);
#   - our logits at every position of a token sequence for each (`gdrotrain logits --all`), and
#     for the LoRA checkpoint itself (base + adapters on the fly) and its adapter folder.
# Then, in the chroot, scripts/check_references.py loads every folder with transformers
# (no missing or unexpected keys), compares our logits with transformers' (float64 reference,
# float32 too), converts each folder to an f32 GGUF with llama.cpp's converter and compares
# llama.cpp's logits (scripts/llama_logits.c), and compares AutoTokenizer's ids (and chat
# template) with `gdrotrain tokenize` on a sample and on the tokenizer golden file; and compares
# the LoRA checkpoint's logits with transformers' of the merged export and of the base with the
# adapter folder applied as PEFT's LoRA layer does (W + (alpha/r)·B·A).
#
# Everything lands in .cache/check-references/ (results.json: every number). Exits 1 if
# any check fails. Usage: bash scripts/check_references.sh [--threads N] [--no-build]
# (--no-build: use bin/gdrotrain as it is.)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
W=$ROOT/.cache/check-references
G=$ROOT/bin/gdrotrain
threads=2 build=1
while [ $# -gt 0 ]; do
	case $1 in
	--threads) threads=$2; shift 2 ;;
	--no-build) build=0; shift ;;
	*) echo "usage: $0 [--threads N] [--no-build]" >&2; exit 2 ;;
	esac
done
export PATH=/usr/local/go/bin:$PATH
log() { echo "check_references: $*"; }
die() { echo "check_references: error: $*" >&2; exit 1; }

t0=$(date +%s)
bash scripts/sid_chroot.sh
t1=$(date +%s)
if [ $build = 1 ]; then
	go build -o "$G" ./cmd/gdrotrain
fi
[ -x "$G" ] || die "$G missing (make build)"
bash scripts/fetch_tokenizer.sh >/dev/null
QTOK=$ROOT/.cache/qwen3-tokenizer
rm -rf "$W"
mkdir -p "$W/models" "$W/ours"

# The llama.cpp helper, built against the chroot's own llama.h.
bash scripts/sid_chroot.sh run gcc -O2 -Wall -o "$W/llama_logits" scripts/llama_logits.c -lllama -lggml -lggml-base ||
	die "building scripts/llama_logits.c in the chroot failed"

# tiny NAME WHAT FLAGS…: an init-tiny folder with a 512-token tokenizer beside it.
models=()
tiny() {
	local name=$1 what=$2
	shift 2
	"$G" init-tiny --out "$W/models/$name" --layers 2 --hidden 64 --intermediate 96 --vocab 512 --seed ${#models[@]} "$@" >/dev/null
	"$G" tokenize --write-tiny "$W/models/$name" --vocab 512 >/dev/null
	models+=("$name|$what")
}
tiny gqa-untied "GQA 4/2 heads, untied" --heads 4 --kv-heads 2 --head-dim 16
tiny gqa-tied "GQA 4/2 heads, tied" --heads 4 --kv-heads 2 --head-dim 16 --tied
tiny mqa "MQA 4/1 heads" --heads 4 --kv-heads 1 --head-dim 16
tiny mha "MHA 4/4 heads" --heads 4 --kv-heads 4 --head-dim 16
tiny head-dim-32 "head_dim 32, 4 heads, hidden 64" --heads 4 --kv-heads 2 --head-dim 32
tiny bf16 "bf16 storage" --heads 4 --kv-heads 2 --head-dim 16 --dtype bfloat16
"$G" init-tiny --out "$W/models/qwen3-vocab" --layers 2 --hidden 64 --intermediate 96 --heads 4 --kv-heads 2 --head-dim 16 \
	--vocab 151936 --tied --eos 151643,151645 --seed 9 >/dev/null
cp "$QTOK/tokenizer.json" "$QTOK/tokenizer_config.json" "$W/models/qwen3-vocab/"
models+=("qwen3-vocab|Qwen3 vocabulary 151936 + its tokenizer, tied")

# A trained checkpoint: one GRPO step (weight decay on, so the weights move even when every
# reward is 0), exported three ways.
P=$W/train/policy
"$G" init-tiny --out "$P" --layers 2 --hidden 64 --intermediate 96 --heads 4 --kv-heads 2 --head-dim 16 \
	--vocab 151936 --eos 151643,151645 --seed 11 >/dev/null
cp "$QTOK/tokenizer.json" "$QTOK/tokenizer_config.json" "$P/"
for i in 1 2 3 4 5 6 7 8; do echo "{\"problem\": \"What is $i+$i?\", \"answer\": \"$((i + i))\"}"; done >"$W/train/train.jsonl"
cat >"$W/train/config.yaml" <<EOF
run: {name: t, out_dir: $W/train/runs, seed: 1, device: cpu}
model: {path: $P, prompt: raw}
data: {train: [$W/train/train.jsonl], template: none, max_prompt_length: 64}
sampling: {max_new_tokens: 6, max_slots: 16}
train: {method: grpo, steps: 1, prompts_per_step: 4, mini_batch_prompts: 4, micro_batch_rows: 16}
optim: {lr: 0.01, weight_decay: 0.1}
gdro: {rollout: {n_mean: 4}}
reward: {mode: dapo}
validation: {files: [], before_training: false}
checkpoint: {every: 1}
EOF
"$G" train --config "$W/train/config.yaml" >"$W/train/train.log" 2>&1 ||
	{ tail -20 "$W/train/train.log" >&2; die "the training run for the export check failed (log: $W/train/train.log)"; }
CK=$(ls -d "$W"/train/runs/t/checkpoints/step_* | tail -1)
"$G" export --checkpoint "$CK" --out "$W/models/export-fp32" --dtype fp32 --shard-gb 0 >/dev/null
"$G" export --checkpoint "$CK" --out "$W/models/export-bf16" --dtype bf16 >/dev/null
"$G" export --checkpoint "$CK" --out "$W/models/export-sharded" --dtype fp32 --shard-gb 0.02 >/dev/null
[ -f "$W/models/export-sharded/model.safetensors.index.json" ] || die "export --shard-gb 0.02 wrote no index"
models+=("export-fp32|gdrotrain export of a trained checkpoint, fp32, untied"
	"export-bf16|the same, bf16"
	"export-sharded|the same, fp32 in $(ls "$W/models/export-sharded"/model-*.safetensors | wc -l) shards")

# A LoRA checkpoint: two GRPO steps of rank-4 adapters (alpha 16) on every projection of a tiny
# base, lr 0.05 so that B moves well away from 0. The tiny model never answers right, so its 64
# stop ids (of 512) make response lengths differ and the overlong penalty gives the rewards
# their spread. Exported merged (fp32, checked like the folders above) and as a PEFT adapter
# folder (fp32), which the chroot applies to the base as PEFT's LoRA layer does.
L=$W/lora
"$G" init-tiny --out "$L/base" --layers 2 --hidden 64 --intermediate 96 --heads 4 --kv-heads 2 --head-dim 16 \
	--vocab 512 --eos "$(seq -s, 300 363)" --seed 12 >/dev/null
"$G" tokenize --write-tiny "$L/base" --vocab 512 >/dev/null
cat >"$L/config.yaml" <<EOF
run: {name: t, out_dir: $L/runs, seed: 1, device: cpu}
model: {path: $L/base, prompt: raw}
data: {train: [$W/train/train.jsonl], template: none, max_prompt_length: 64}
sampling: {max_new_tokens: 8, max_slots: 16}
train: {method: grpo, steps: 2, prompts_per_step: 4, mini_batch_prompts: 4, micro_batch_rows: 16}
optim: {lr: 0.05}
lora: {rank: 4, alpha: 16}
loss: {overlong: {soft_penalty_tokens: 4}}
gdro: {rollout: {n_mean: 4}}
reward: {mode: dapo}
validation: {files: [], before_training: false}
checkpoint: {every: 1}
EOF
"$G" train --config "$L/config.yaml" >"$L/train.log" 2>&1 ||
	{ tail -20 "$L/train.log" >&2; die "the LoRA training run failed (log: $L/train.log)"; }
LCK=$(ls -d "$L"/runs/t/checkpoints/step_* | tail -1)
"$G" export --checkpoint "$LCK" --out "$W/models/lora-merged" --dtype fp32 --shard-gb 0 >/dev/null
"$G" export --checkpoint "$LCK" --out "$L/adapter" --adapter --dtype fp32 >/dev/null
models+=("lora-merged|gdrotrain export of a LoRA checkpoint, merged, fp32")

# Our logits at every position: 24 ids spread over the vocabulary (Qwen3-vocabulary folders:
# the tokens of a sentence, special tokens included).
small_ids=$(seq 0 23 | awk '{ printf "%s%d", (NR > 1 ? "," : ""), ($1 * 37 + 5) % 512 }')
qwen_ids=$("$G" tokenize --tokenizer "$QTOK" -- '<|im_start|>user
What is 7·6? Think: <think>' | tr ' ' ,)
entries=()
for m in "${models[@]}"; do
	name=${m%%|*} what=${m#*|}
	ids=$small_ids
	case $name in qwen3-vocab | export-*) ids=$qwen_ids ;; esac
	"$G" logits --model "$W/models/$name" --ids "$ids" --all --out "$W/ours/$name.json" 2>/dev/null
	entries+=("{\"name\": \"$name\", \"what\": \"$what\", \"dir\": \"$W/models/$name\", \"ours\": \"$W/ours/$name.json\"}")
done
# The LoRA checkpoint itself (base + adapters on the fly) and the exported adapter folder.
"$G" logits --model "$LCK" --ids "$small_ids" --all --out "$W/ours/lora-checkpoint.json" 2>/dev/null
"$G" logits --model "$L/adapter" --ids "$small_ids" --all --out "$W/ours/lora-adapter.json" 2>/dev/null
{
	echo "{\"work\": \"$W\", \"gdrotrain\": \"$G\", \"llama_logits\": \"$W/llama_logits\","
	echo " \"lora\": {\"checkpoint\": \"$LCK\", \"base\": \"$L/base\", \"merged\": \"$W/models/lora-merged\","
	echo "  \"adapter\": \"$L/adapter\", \"ours\": \"$W/ours/lora-checkpoint.json\", \"ours_adapter\": \"$W/ours/lora-adapter.json\"},"
	echo " \"models\": [$(IFS=,; echo "${entries[*]}")],"
	echo " \"tokenizers\": [{\"name\": \"qwen3\", \"dir\": \"$QTOK\"}, {\"name\": \"export-fp32\", \"dir\": \"$W/models/export-fp32\"},"
	echo "  {\"name\": \"tiny-512\", \"dir\": \"$W/models/gqa-untied\"}],"
	echo " \"tokenizer_golden\": {\"dir\": \"$QTOK\", \"file\": \"$ROOT/tokenizer/testdata/qwen3_golden.jsonl.gz\"}}"
} >"$W/manifest.json"
t2=$(date +%s)

rc=0
bash scripts/sid_chroot.sh run python3 scripts/check_references.py run --manifest "$W/manifest.json" \
	--results "$W/results.json" --threads "$threads" || rc=$?
t3=$(date +%s)
log "chroot $((t1 - t0)) s, folders and our logits $((t2 - t1)) s, references $((t3 - t2)) s; total $((t3 - t0)) s"
exit $rc
