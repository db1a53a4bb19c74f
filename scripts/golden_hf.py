#!/usr/bin/python3
"""Golden fixtures for model/golden_test.go from transformers' own Qwen3ForCausalLM.

For tied and untied embeddings it builds a tiny random Qwen3 (2 layers, GQA 4/2 heads,
head_dim 16 ≠ hidden/heads as in Qwen3-4B, RoPE base 1e6 as in every Qwen3, q/k norms and
RMSNorm weights drawn around 1 so that a dropped weight cannot hide), writes it with
transformers' save_pretrained (config.json as transformers 5 writes it, model.safetensors in
float32), loads that folder back with Qwen3ForCausalLM.from_pretrained in float64 (eager
attention) and records, with PyTorch autograd:

  - logits at every position of one token sequence (golden.json "ids", "logits");
  - a GRPO-style batch: sequences of different lengths, right-padded into one (B, T) batch
    with an attention mask, each with a prompt/response boundary "start" and an advantage
    (GRPO's (r − mean) / (std + 1e-6) over the group's rewards); the per-token log-probs of
    the response tokens ("logprobs") and the objective
        J = Σ_{b,t} mask[b,t] · A_b · log π(x[b,t] | x[b,<t]) / Σ mask
    (mask: response tokens, not prompt or padding; token-mean as the trainer's default);
  - dJ/dθ for every parameter (grads.safetensors, float32);
  - three optimizer steps on loss = −J with clip_grad_norm_(1.0) and torch.optim.AdamW:
    the losses, the gradient norms and the final parameters (adamw.safetensors).

Needs transformers ≥ 5 and torch: it runs in the Debian sid chroot of scripts/sid_chroot.sh.
Regenerate with `make golden`, i.e.
    bash scripts/sid_chroot.sh run python3 scripts/golden_hf.py model/testdata
The Go test reads only the files this writes; `make test` never needs the chroot.
"""
import importlib.metadata
import json
import os
import platform
import sys

import safetensors
import safetensors.torch
import torch
import transformers
from transformers import Qwen3Config, Qwen3ForCausalLM

CFG = dict(
    hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, head_dim=16, vocab_size=96, rms_norm_eps=1e-6, rope_theta=1e6,
    max_position_embeddings=256,
)
ADAMW = dict(lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
CLIP = 1.0
STEPS = 3
ADV_EPS = 1e-6  # GRPO's ε in (r − mean) / (std + ε)


def versions():
    return {
        "python": platform.python_version(), "torch": torch.__version__,
        "transformers": transformers.__version__, "safetensors": safetensors.__version__,
        "numpy": importlib.metadata.version("numpy"),
    }


def make_model(tied, seed):
    """A Qwen3ForCausalLM with every weight redrawn (float32 values)."""
    cfg = Qwen3Config(**CFG, tie_word_embeddings=tied, eos_token_id=CFG["vocab_size"] - 1,
                      bos_token_id=None, pad_token_id=None)
    torch.manual_seed(seed)
    m = Qwen3ForCausalLM(cfg).float()
    with torch.no_grad():
        for name, p in m.named_parameters():
            if p.dim() == 1:  # RMSNorm weights: around 1, not 1
                p.copy_(1.0 + 0.3 * torch.randn(p.shape))
            else:
                p.copy_(0.2 * torch.randn(p.shape))
    return m


def load64(d):
    m, info = Qwen3ForCausalLM.from_pretrained(d, dtype=torch.float64, attn_implementation="eager",
                                               output_loading_info=True)
    bad = {k: v for k, v in info.items() if v}
    if bad:
        sys.exit(f"golden_hf: {d} does not load cleanly: {bad}")
    return m.eval()


def batch(seqs):
    """Right-padded ids (B, T), attention mask (B, T) and loss mask (B, T)."""
    B, T = len(seqs), max(len(s["tokens"]) for s in seqs)
    ids = torch.zeros(B, T, dtype=torch.long)
    att = torch.zeros(B, T, dtype=torch.long)
    mask = torch.zeros(B, T, dtype=torch.float64)
    for b, s in enumerate(seqs):
        n = len(s["tokens"])
        ids[b, :n] = torch.tensor(s["tokens"])
        att[b, :n] = 1
        mask[b, s["start"]:n] = 1
    return ids, att, mask


def objective(model, seqs):
    """J and the per-token log-probs (B, T): lp[b, t] = log π(ids[b, t] | ids[b, <t]), t ≥ 1."""
    ids, att, mask = batch(seqs)
    logits = model(input_ids=ids, attention_mask=att).logits  # (B, T, V)
    lp = torch.zeros(ids.shape, dtype=logits.dtype)
    lp[:, 1:] = logits[:, :-1].log_softmax(-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    adv = torch.tensor([s["advantage"] for s in seqs], dtype=torch.float64)[:, None]
    j = (mask * adv * lp).sum() / mask.sum()
    return j, lp


def build(outdir, tied):
    name = "qwen3_tiny_tied" if tied else "qwen3_tiny_untied"
    d = os.path.join(outdir, name)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):  # nothing stale from an earlier generator
        os.remove(os.path.join(d, f))
    make_model(tied, 20261122 + tied).save_pretrained(d, safe_serialization=True)
    model = load64(d)

    g = torch.Generator().manual_seed(7 if tied else 8)
    V = CFG["vocab_size"]
    ids = torch.randint(0, V, (12,), generator=g).tolist()
    # One GRPO group: four responses of different lengths to prompts of different lengths.
    rewards = [1.0, 0.0, 0.0, 1.0]
    mean = sum(rewards) / len(rewards)
    std = (sum((r - mean) ** 2 for r in rewards) / (len(rewards) - 1)) ** 0.5
    seqs = []
    for (n, start), r in zip(((10, 4), (7, 1), (12, 6), (5, 3)), rewards):
        toks = torch.randint(0, V, (n,), generator=g).tolist()
        seqs.append({"tokens": toks, "start": start, "reward": r, "advantage": (r - mean) / (std + ADV_EPS)})

    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0]
    j, lp = objective(model, seqs)
    params = dict(model.named_parameters())  # tied: lm_head is embed_tokens, listed once
    grads = torch.autograd.grad(j, list(params.values()))
    safetensors.torch.save_file({k: gr.float().contiguous() for k, gr in zip(params, grads)},
                                os.path.join(d, "grads.safetensors"))
    logprobs = [lp[b, s["start"]:len(s["tokens"])].tolist() for b, s in enumerate(seqs)]

    opt = torch.optim.AdamW(list(params.values()), **ADAMW)
    losses, norms = [], []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = -objective(model, seqs)[0]
        loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(list(params.values()), CLIP)))
        opt.step()
        losses.append(float(loss.detach()))
    safetensors.torch.save_file({k: p.detach().float().contiguous() for k, p in params.items()},
                                os.path.join(d, "adamw.safetensors"))

    v = versions()
    golden = {
        "generator": ("scripts/golden_hf.py (make golden): transformers %s Qwen3ForCausalLM, eager attention, "
                      "float64 from the float32 weights; torch %s autograd; python %s; Debian sid chroot "
                      "(scripts/sid_chroot.sh)") % (v["transformers"], v["torch"], v["python"]),
        "versions": v,
        "ids": ids, "logits": logits.tolist(),
        "loss": "J = sum(mask * advantage * logprob) / sum(mask); mask = response tokens [start, len)",
        "sequences": seqs, "logprobs": logprobs, "objective": float(j),
        "adamw": {"lr": ADAMW["lr"], "beta1": ADAMW["betas"][0], "beta2": ADAMW["betas"][1],
                  "eps": ADAMW["eps"], "weight_decay": ADAMW["weight_decay"], "clip": CLIP,
                  "steps": STEPS, "losses": losses, "grad_norms": norms},
    }
    with open(os.path.join(d, "golden.json"), "w") as f:
        json.dump(golden, f)
    for f in os.listdir(d):
        os.chmod(os.path.join(d, f), 0o644)
    print("wrote", d, "with", golden["generator"])


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "model/testdata"
    torch.use_deterministic_algorithms(True)
    transformers.utils.logging.disable_progress_bar()
    build(out, tied=False)
    build(out, tied=True)
