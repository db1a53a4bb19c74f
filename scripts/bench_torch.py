#!/usr/bin/python3
"""PyTorch (CPU, float32) baseline for `gdrotrain bench`.

Reads a JSON list of shapes on stdin (the fields of model.BenchShape) and
prints one JSON object per shape: forward and forward+backward tokens/s of a
plain-PyTorch Qwen3 with the same sizes, batch and sequence length, using as
many threads as the machine has cores. Needs Debian's python3-torch.
"""
import json
import math
import os
import sys
import time

import torch


def rms_norm(x, w, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class Qwen3(torch.nn.Module):
    def __init__(self, o):
        super().__init__()
        C, F, V, D = o["Hidden"], o["Intermediate"], o["Vocab"], o["HeadDim"]
        H, G = o["Heads"], o["KVHeads"]
        self.o = o
        P = lambda *s: torch.nn.Parameter(0.02 * torch.randn(*s))
        self.embed = P(V, C)
        self.layers = torch.nn.ModuleList()
        for _ in range(o["Layers"]):
            l = torch.nn.Module()
            l.q, l.k, l.v, l.o = P(H * D, C), P(G * D, C), P(G * D, C), P(C, H * D)
            l.qn, l.kn = torch.nn.Parameter(torch.ones(D)), torch.nn.Parameter(torch.ones(D))
            l.n1, l.n2 = torch.nn.Parameter(torch.ones(C)), torch.nn.Parameter(torch.ones(C))
            l.gate, l.up, l.down = P(F, C), P(F, C), P(C, F)
            self.layers.append(l)
        self.norm = torch.nn.Parameter(torch.ones(C))
        self.head = self.embed if o["Tied"] else P(V, C)

    def forward(self, ids, start):
        o = self.o
        B, T = ids.shape
        H, G, D = o["Heads"], o["KVHeads"], o["HeadDim"]
        x = self.embed[ids]
        inv = 1.0 / (o["RopeTheta"] ** (torch.arange(0, D, 2).float() / D))
        emb = torch.outer(torch.arange(T).float(), inv)
        emb = torch.cat((emb, emb), -1)
        cos, sin = emb.cos()[None, :, None], emb.sin()[None, :, None]
        mask = torch.full((T, T), float("-inf")).triu(1)
        for l in self.layers:
            h = rms_norm(x, l.n1)
            q = rms_norm((h @ l.q.T).view(B, T, H, D), l.qn)
            k = rms_norm((h @ l.k.T).view(B, T, G, D), l.kn)
            v = (h @ l.v.T).view(B, T, G, D)
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
            k, v = k.repeat_interleave(H // G, 2), v.repeat_interleave(H // G, 2)
            s = torch.einsum("bthd,bshd->bhts", q, k) / math.sqrt(D) + mask
            a = torch.einsum("bhts,bshd->bthd", s.softmax(-1), v).reshape(B, T, H * D)
            x = x + a @ l.o.T
            h = rms_norm(x, l.n2)
            x = x + (torch.nn.functional.silu(h @ l.gate.T) * (h @ l.up.T)) @ l.down.T
        x = rms_norm(x, self.norm)[:, start - 1:T - 1]
        lp = (x @ self.head.T).log_softmax(-1)
        return lp.gather(-1, ids[:, start:, None]).squeeze(-1)


def measure(s):
    torch.manual_seed(0)
    m = Qwen3(s["Opts"])
    B, T, R, iters = s["Batch"], s["SeqLen"], s["ResponseTokens"], s["Iters"]
    ids = torch.randint(0, s["Opts"]["Vocab"], (B, T))
    start = T - R
    with torch.no_grad():
        m(ids, start)  # warm-up
        t0 = time.perf_counter()
        for _ in range(iters):
            m(ids, start)
        fwd = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(iters):
        m.zero_grad()
        (m(ids, start).mean()).backward()
    train = time.perf_counter() - t0
    tokens = B * T * iters
    return {"name": s["Name"], "fwd_tok_s": tokens / fwd, "train_tok_s": tokens / train,
            "torch": torch.__version__, "threads": torch.get_num_threads()}


if __name__ == "__main__":
    torch.set_num_threads(os.cpu_count() or 1)
    for shape in json.load(sys.stdin):
        print(json.dumps(measure(shape)), flush=True)
