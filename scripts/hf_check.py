#!/usr/bin/env python3
"""Checks a Hugging Face folder written by gdrotrain (init-tiny or export) with transformers.

Loads HF_DIR with AutoModelForCausalLM (and, if vLLM is installed, with vllm.LLM), runs the
token ids of --ours (a `gdrotrain logits --all` JSON file) and compares transformers' logits at
every position with ours. Prints one JSON line with the max abs/rel errors and exits 1 when they
exceed the tolerance. Runs where transformers is installed (the GPU node); CUDA if present.

  gdrotrain logits --model HF_DIR --ids 1,2,3 --all --device cuda --out ours.json
  python3 scripts/hf_check.py --model HF_DIR --ours ours.json --dtype float32 --atol 1e-4
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--ours", required=True)
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--vllm", action="store_true", help="also load the folder with vLLM")
    a = ap.parse_args()

    import torch
    from transformers import AutoModelForCausalLM

    ours = json.load(open(a.ours))
    ids = ours["ids"]
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = getattr(torch, a.dtype)
    model = AutoModelForCausalLM.from_pretrained(a.model, torch_dtype=dtype).to(dev).eval()
    with torch.no_grad():
        ref = model(input_ids=torch.tensor([ids], device=dev)).logits[0].float().cpu()
    got = torch.tensor(ours["positions"] if ours.get("positions") else [ours["logits"]])
    if got.shape[0] != ref.shape[0]:
        ref = ref[-got.shape[0]:]
    diff = (got - ref).abs()
    ok = bool((diff <= a.atol + a.rtol * ref.abs()).all())
    res = {"model": a.model, "dtype": a.dtype, "device": dev, "positions": int(got.shape[0]),
           "max_abs": float(diff.max()), "max_rel": float((diff / ref.abs().clamp_min(1e-6)).max()), "ok": ok,
           "transformers_class": type(model).__name__}
    if a.vllm:
        try:
            from vllm import LLM, SamplingParams

            # The folder may have no tokenizer (init-tiny writes none): ids in,
            # ids out, and no stop at an end-of-sequence id the greedy loop
            # below would not stop at either.
            llm = LLM(model=a.model, dtype=a.dtype, enforce_eager=True, gpu_memory_utilization=0.3, skip_tokenizer_init=True)
            out = llm.generate({"prompt_token_ids": ids},
                               SamplingParams(max_tokens=4, temperature=0, detokenize=False, ignore_eos=True))
            res["vllm_tokens"] = list(out[0].outputs[0].token_ids)
            greedy = []
            seq = list(ids)
            with torch.no_grad():
                for _ in range(4):
                    nxt = int(model(input_ids=torch.tensor([seq], device=dev)).logits[0, -1].argmax())
                    greedy.append(nxt)
                    seq.append(nxt)
            res["transformers_greedy"] = greedy
            res["vllm_ok"] = greedy == res["vllm_tokens"]
            ok = ok and res["vllm_ok"]
        except Exception as e:  # report, do not hide: vLLM is optional on the node
            res["vllm_error"] = f"{type(e).__name__}: {e}"
    print(json.dumps(res))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
