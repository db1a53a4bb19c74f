#!/usr/bin/python3
"""PyTorch (CPU, float32) baseline for `gdrotrain bench`.

Reads a JSON list of shapes (the fields of bench.Shape, tools/bench) as the first
line of stdin and prints one JSON line describing this PyTorch first:

  {"info": {"torch": version, "threads": torch threads, "blas": the BLAS
            library mapped into the process after a matrix product, "blas_kind":
            OpenBLAS / MKL / reference / ..., "blas_config": what OpenBLAS says of
            itself, "blas_core": the core whose kernels OpenBLAS runs
            (OPENBLAS_CORETYPE, when set, chooses it), "blas_threads":
            OpenBLAS's thread count, "parallel": ATen's
            parallel backend, "build_blas": BLAS_INFO of the build}}

Then, for each further stdin line holding a shape name, it times that shape
(one untimed warm-up pass on first use, as gdrotrain does) and prints
{"name", "fwd_tok_s", "train_tok_s"}; so gdrotrain can interleave its own
measurements with these in one run. With no further lines (stdin closed
after the list) it measures every shape once, as earlier versions did.

--threads N sets torch's intra-op threads and OpenBLAS's thread count (the
caller also exports OMP_NUM_THREADS and OPENBLAS_NUM_THREADS=N, which
OpenBLAS reads when it loads). Needs Debian's python3-torch; with Debian's
reference BLAS (libblas3) its matrix products run ≈ 15× slower than with
libopenblas0-pthread, which `info` makes visible. Runs unchanged on PyTorch 2.x:
`gdrotrain bench --torch-python scripts/sid_python.sh` runs it on the PyTorch 2.14
(OpenBLAS) of the Debian sid chroot (scripts/sid_chroot.sh).
"""
import argparse
import ctypes
import json
import math
import os
import re
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


class Bench:
    """A model and batch of one shape, warmed up once, timed on request."""

    def __init__(self, s):
        torch.manual_seed(0)
        self.s = s
        self.m = Qwen3(s["Opts"])
        self.ids = torch.randint(0, s["Opts"]["Vocab"], (s["Batch"], s["SeqLen"]))
        self.start = s["SeqLen"] - s["ResponseTokens"]
        with torch.no_grad():
            self.m(self.ids, self.start)
        self.m.zero_grad()
        self.m(self.ids, self.start).mean().backward()

    def run(self):
        s, m = self.s, self.m
        iters = s["Iters"]
        with torch.no_grad():
            t0 = time.perf_counter()
            for _ in range(iters):
                m(self.ids, self.start)
            fwd = time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in range(iters):
            m.zero_grad()
            m(self.ids, self.start).mean().backward()
        train = time.perf_counter() - t0
        tokens = s["Batch"] * s["SeqLen"] * iters
        return {"name": s["Name"], "fwd_tok_s": tokens / fwd, "train_tok_s": tokens / train,
                "torch": torch.__version__, "threads": torch.get_num_threads()}


def blas_info(threads):
    """Which BLAS this process really calls, and its thread count."""
    a = torch.randn(64, 64)
    a @ a  # make sure the BLAS is loaded
    mapped = []
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1] if "/" in line else ""
            name = os.path.basename(path).lower()
            if re.search(r"blas|mkl|lapack", name) and path not in mapped:
                mapped.append(path)
    info = {"torch": torch.__version__, "threads": torch.get_num_threads(),
            "parallel": next((l.split(":", 1)[1].strip() for l in torch.__config__.parallel_info().splitlines()
                              if l.startswith("ATen parallel backend")), ""),
            "build_blas": (re.search(r"BLAS_INFO=([^,]*)", torch.__config__.show()) or [None, ""])[1],
            "blas": "", "blas_kind": "", "blas_config": "", "blas_core": "", "blas_threads": 0}
    real = [os.path.realpath(p) for p in mapped if "lapack" not in os.path.basename(p).lower()]
    info["blas"] = ", ".join(real)
    for p in real:
        if "openblas" in p.lower():
            info["blas_kind"] = "OpenBLAS"
            try:
                lib = ctypes.CDLL(p)
                lib.openblas_get_config.restype = ctypes.c_char_p
                if threads:
                    lib.openblas_set_num_threads(threads)
                info["blas_config"] = lib.openblas_get_config().decode()
                info["blas_threads"] = lib.openblas_get_num_threads()
                lib.openblas_get_corename.restype = ctypes.c_char_p
                info["blas_core"] = lib.openblas_get_corename().decode()
            except (OSError, AttributeError):
                pass
            break
        if "mkl" in p.lower():
            info["blas_kind"] = "MKL"
            break
    else:
        if any("/blas/" in p or os.path.basename(p).startswith("libblas") for p in real):
            info["blas_kind"] = "reference BLAS (netlib)"
    return info


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    shapes = {s["Name"]: s for s in json.loads(sys.stdin.readline())}
    print(json.dumps({"info": blas_info(args.threads)}), flush=True)
    benches = {}
    asked = False
    for line in sys.stdin:
        name = line.strip()
        if not name:
            continue
        asked = True
        if name not in benches:
            benches[name] = Bench(shapes[name])
        print(json.dumps(benches[name].run()), flush=True)
    if not asked:
        for name, s in shapes.items():
            print(json.dumps(Bench(s).run()), flush=True)


if __name__ == "__main__":
    main()
