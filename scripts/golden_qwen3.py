#!/usr/bin/python3
"""Golden values for model/golden_test.go from an independent PyTorch Qwen3.

Builds two tiny random Qwen3 models (tied and untied embeddings; 2 layers,
GQA, q/k norms with non-unit weights), writes each as a Hugging Face folder
(config.json + model.safetensors in float32) under model/testdata/, and
computes with a plain-PyTorch Qwen3 written from the transformers reference
(in float64, from the float32 weights):
  - logits at every position of a token sequence,
  - per-token log-probs of two sequences and J = sum_t w_t log pi(token_t),
  - dJ/dtheta for every parameter (grads.safetensors),
  - three optimizer steps on loss = -J with clip_grad_norm_(1.0) and
    torch.optim.AdamW: the losses and the final parameters (adamw.safetensors).

Regenerate (Debian's python3-torch, CPU):
    /usr/bin/python3 scripts/golden_qwen3.py model/testdata
The Go test reads only the files this writes; it never needs torch.
"""
import json
import math
import os
import struct
import sys

import torch

torch.manual_seed(20261122)

CFG = dict(
    hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, head_dim=8, vocab_size=96, rms_norm_eps=1e-6, rope_theta=10000.0,
    max_position_embeddings=256,
)
ADAMW = dict(lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
CLIP = 1.0
STEPS = 3


def param_shapes(cfg, tied):
    C, F, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    D = cfg["head_dim"]
    HD, GD = cfg["num_attention_heads"] * D, cfg["num_key_value_heads"] * D
    shapes = {"model.embed_tokens.weight": (V, C)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes.update({
            p + "input_layernorm.weight": (C,), p + "self_attn.q_proj.weight": (HD, C),
            p + "self_attn.k_proj.weight": (GD, C), p + "self_attn.v_proj.weight": (GD, C),
            p + "self_attn.o_proj.weight": (C, HD), p + "self_attn.q_norm.weight": (D,),
            p + "self_attn.k_norm.weight": (D,), p + "post_attention_layernorm.weight": (C,),
            p + "mlp.gate_proj.weight": (F, C), p + "mlp.up_proj.weight": (F, C),
            p + "mlp.down_proj.weight": (C, F),
        })
    shapes["model.norm.weight"] = (C,)
    if not tied:
        shapes["lm_head.weight"] = (V, C)
    return shapes


def init_params(cfg, tied):
    params = {}
    for name, shape in param_shapes(cfg, tied).items():
        if len(shape) == 1:  # norms: around 1 so a dropped weight cannot hide
            t = 1.0 + 0.3 * torch.randn(shape)
        else:
            t = 0.2 * torch.randn(shape)
        params[name] = t.float().double().requires_grad_(True)  # float32-representable
    return params


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def forward_logits(params, cfg, tied, ids):
    """Logits (T, V) for one sequence, written from transformers' Qwen3."""
    C, D = cfg["hidden_size"], cfg["head_dim"]
    H, G = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    eps, T = cfg["rms_norm_eps"], len(ids)
    x = params["model.embed_tokens.weight"][torch.tensor(ids)]
    inv_freq = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    freqs = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    for i in range(cfg["num_hidden_layers"]):
        p = lambda n: params[f"model.layers.{i}.{n}.weight"]
        h = rms_norm(x, p("input_layernorm"), eps)
        q = (h @ p("self_attn.q_proj").T).view(T, H, D)
        k = (h @ p("self_attn.k_proj").T).view(T, G, D)
        v = (h @ p("self_attn.v_proj").T).view(T, G, D)
        q, k = rms_norm(q, p("self_attn.q_norm"), eps), rms_norm(k, p("self_attn.k_norm"), eps)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        rep = H // G
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)  # head h uses kv h // rep
        scores = torch.einsum("thd,shd->hts", q, k) / math.sqrt(D) + mask
        att = torch.einsum("hts,shd->thd", scores.softmax(-1), v).reshape(T, H * D)
        x = x + att @ p("self_attn.o_proj").T
        h = rms_norm(x, p("post_attention_layernorm"), eps)
        g, u = h @ p("mlp.gate_proj").T, h @ p("mlp.up_proj").T
        x = x + (torch.nn.functional.silu(g) * u) @ p("mlp.down_proj").T
    x = rms_norm(x, params["model.norm.weight"], eps)
    head = params["model.embed_tokens.weight"] if tied else params["lm_head.weight"]
    return x @ head.T


def token_logprobs(params, cfg, tied, seq):
    logits = forward_logits(params, cfg, tied, seq["tokens"])
    lp = logits.log_softmax(-1)
    s, toks = seq["start"], seq["tokens"]
    return torch.stack([lp[t - 1, toks[t]] for t in range(s, len(toks))])


def objective(params, cfg, tied, seqs):
    lps = [token_logprobs(params, cfg, tied, s) for s in seqs]
    j = sum((torch.tensor(s["weights"], dtype=torch.float64) * lp).sum() for s, lp in zip(seqs, lps))
    return j, lps


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        arr = tensors[name].detach().float().contiguous().numpy()
        raw = arr.tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    hdr = json.dumps(header, separators=(",", ":")).encode()
    hdr += b" " * (-len(hdr) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hdr)) + hdr + b"".join(blobs))


def config_json(cfg, tied):
    c = dict(cfg)
    c.update(model_type="qwen3", architectures=["Qwen3ForCausalLM"], hidden_act="silu",
             tie_word_embeddings=tied, torch_dtype="float32", eos_token_id=cfg["vocab_size"] - 1,
             attention_bias=False, use_sliding_window=False, rope_scaling=None)
    return c


def build(outdir, tied):
    name = "qwen3_tiny_tied" if tied else "qwen3_tiny_untied"
    d = os.path.join(outdir, name)
    os.makedirs(d, exist_ok=True)
    params = init_params(CFG, tied)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config_json(CFG, tied), f, indent=2)
    write_safetensors(os.path.join(d, "model.safetensors"), params)

    g = torch.Generator().manual_seed(7 if tied else 8)
    V = CFG["vocab_size"]
    ids = torch.randint(0, V, (12,), generator=g).tolist()
    seqs = []
    for n, start in ((10, 4), (7, 1)):
        toks = torch.randint(0, V, (n,), generator=g).tolist()
        w = torch.randn(n - start, generator=g, dtype=torch.float64).tolist()
        seqs.append({"tokens": toks, "start": start, "weights": w})

    logits = forward_logits(params, CFG, tied, ids)
    j, lps = objective(params, CFG, tied, seqs)
    grads = torch.autograd.grad(j, list(params.values()))
    write_safetensors(os.path.join(d, "grads.safetensors"), dict(zip(params.keys(), grads)))

    opt = torch.optim.AdamW(list(params.values()), **ADAMW)
    losses, norms = [], []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = -objective(params, CFG, tied, seqs)[0]
        loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(list(params.values()), CLIP)))
        opt.step()
        losses.append(float(loss))
    write_safetensors(os.path.join(d, "adamw.safetensors"), params)

    golden = {
        "generator": "scripts/golden_qwen3.py (torch %s, float64)" % torch.__version__,
        "ids": ids, "logits": logits.tolist(),
        "sequences": seqs, "logprobs": [lp.tolist() for lp in lps], "objective": float(j),
        "adamw": {"lr": ADAMW["lr"], "beta1": ADAMW["betas"][0], "beta2": ADAMW["betas"][1],
                  "eps": ADAMW["eps"], "weight_decay": ADAMW["weight_decay"], "clip": CLIP,
                  "steps": STEPS, "losses": losses, "grad_norms": norms},
    }
    with open(os.path.join(d, "golden.json"), "w") as f:
        json.dump(golden, f)
    print("wrote", d)


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "model/testdata"
    build(out, tied=False)
    build(out, tied=True)
