#!/usr/bin/env python3
"""PyTorch + transformers baseline for `gdrotrain bench --device cuda`.

Reads a JSON request on stdin: {"opts": model.TinyOptions fields, "train": [BenchShape...],
"decode": [[batch, context], ...], "steps": N}. Builds transformers' Qwen3ForCausalLM with the
same sizes and random weights in bf16 with SDPA attention (PyTorch eager + SDPA) on the GPU, and
prints one JSON line per measurement:
  {"name": shape name, "train_tok_s": forward+backward tokens/s}
  {"name": "decode-b{batch}-c{context}", "tok_s": decode tokens/s}
Decode throughput is generate(steps) minus generate(1) (the prefill), greedy, KV cache on.
"""
import json
import sys
import time

import torch


def build(o):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    cfg = Qwen3Config(
        vocab_size=o["Vocab"], hidden_size=o["Hidden"], intermediate_size=o["Intermediate"],
        num_hidden_layers=o["Layers"], num_attention_heads=o["Heads"], num_key_value_heads=o["KVHeads"],
        head_dim=o["HeadDim"], rope_theta=o["RopeTheta"], tie_word_embeddings=o["Tied"],
        max_position_embeddings=max(o["MaxPositions"], 16384), rms_norm_eps=1e-6,
        attn_implementation="sdpa", torch_dtype=torch.bfloat16)
    torch.manual_seed(0)
    return Qwen3ForCausalLM(cfg).to(device="cuda", dtype=torch.bfloat16)


def sync():
    torch.cuda.synchronize()


def train_tok_s(model, s):
    V = s["Opts"]["Vocab"]
    ids = torch.randint(0, V, (s["Batch"], s["SeqLen"]), device="cuda")
    start = s["SeqLen"] - s["ResponseTokens"]

    def step():
        out = model(input_ids=ids)
        logp = torch.log_softmax(out.logits[:, start - 1:-1].float(), -1)
        tgt = ids[:, start:].unsqueeze(-1)
        loss = -logp.gather(-1, tgt).mean()
        loss.backward()

    step()  # warm-up (allocator, kernels)
    model.zero_grad(set_to_none=True)
    sync()
    t = time.perf_counter()
    for _ in range(s["Iters"]):
        step()
    sync()
    return s["Batch"] * s["SeqLen"] * s["Iters"] / (time.perf_counter() - t)


@torch.no_grad()
def decode_tok_s(model, V, batch, context, steps):
    ids = torch.randint(0, V, (batch, context), device="cuda")

    def gen(n):
        sync()
        t = time.perf_counter()
        model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n,
                       do_sample=False, use_cache=True, pad_token_id=0)
        sync()
        return time.perf_counter() - t

    gen(2)  # warm-up
    t1, tn = gen(1), gen(steps + 1)
    return batch * steps / max(tn - t1, 1e-9)


def main():
    req = json.load(sys.stdin)
    try:
        import transformers
    except ImportError as e:
        print(json.dumps({"name": "error", "note": f"transformers missing: {e}"}))
        return
    version = f"PyTorch {torch.__version__} + transformers {transformers.__version__}, bf16, SDPA"
    model = build(req["opts"])
    for s in req["train"]:
        try:
            print(json.dumps({"name": s["Name"], "train_tok_s": train_tok_s(model, s), "torch": version}), flush=True)
        except torch.cuda.OutOfMemoryError:
            print(json.dumps({"name": s["Name"], "note": "out of memory"}), flush=True)
        model.zero_grad(set_to_none=True)
        torch.cuda.empty_cache()
    model.eval()
    for batch, context in req["decode"]:
        name = f"decode-b{batch}-c{context}"
        try:
            tok_s = decode_tok_s(model, req["opts"]["Vocab"], batch, context, req["steps"])
            print(json.dumps({"name": name, "tok_s": tok_s, "torch": version}), flush=True)
        except torch.cuda.OutOfMemoryError:
            print(json.dumps({"name": name, "note": "out of memory"}), flush=True)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
