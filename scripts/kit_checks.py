#!/usr/bin/env python3
"""The GPU kit's checks with the Python ecosystem's own readers (run.sh's python phase).

  kit_checks.py peft --base BASE --adapter ADAPTER --ours OURS.json [--atol 1e-4 --rtol 1e-3]
      Loads the base Hugging Face folder with transformers, the adapter folder `gdrotrain export
      --adapter` wrote with peft.PeftModel.from_pretrained over it, runs the ids of OURS (a
      `gdrotrain logits --all` file of the adapter folder) and compares the logits at every
      position with ours. The adapters must also move the logits (against the base with the adapter
      disabled), or the check would pass on an export that wrote zeros.

  kit_checks.py tensorboard --run RUN_DIR
      Reads RUN_DIR/tb with tensorboard's own EventAccumulator and checks that every number of
      every metrics.jsonl line is a scalar <group>/<key> at the line's step with the same value (as
      float32; booleans as 0/1), and that the config text is there.

Each prints one JSON line and exits 1 when its check fails.
"""
import argparse
import glob
import json
import math
import os
import struct
import sys


def peft_check(a):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    ours = json.load(open(a.ours))
    ids = ours["ids"]
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    # No dtype argument (transformers 5 renamed torch_dtype): float32 after loading, as ours ran.
    base = AutoModelForCausalLM.from_pretrained(a.base).float()
    model = PeftModel.from_pretrained(base, a.adapter).to(dev).eval()
    x = torch.tensor([ids], device=dev)
    with torch.no_grad():
        ref = model(input_ids=x).logits[0].float().cpu()
        with model.disable_adapter():
            plain = model(input_ids=x).logits[0].float().cpu()
    got = torch.tensor(ours["positions"] if ours.get("positions") else [ours["logits"]])
    if got.shape[0] != ref.shape[0]:
        ref, plain = ref[-got.shape[0]:], plain[-got.shape[0]:]
    diff = (got - ref).abs()
    effect = float((ref - plain).abs().max())
    ok = bool((diff <= a.atol + a.rtol * ref.abs()).all()) and effect > 1e-3
    lora = [n for n, _ in model.named_modules() if n.endswith("lora_A")]
    print(json.dumps({"check": "peft", "device": dev, "positions": int(got.shape[0]), "max_abs": float(diff.max()),
                      "adapter_effect": effect, "lora_modules": len(lora), "peft_class": type(model).__name__,
                      "ok": ok}))
    return ok


def tb_events(tb):
    """Every scalar (tag, step) → value and every tag in the event files under tb, read by
    tensorboard's own loader. Its data-compatibility layer may hand a simple_value back as a
    0-dimensional tensor (the scalars plugin's form); both are taken."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util import tensor_util

    scalars, tags = {}, set()
    for path in sorted(glob.glob(os.path.join(tb, "events.out.tfevents.*"))):
        for ev in EventFileLoader(path).Load():
            if not ev.HasField("summary"):
                continue
            for v in ev.summary.value:
                tags.add(v.tag)
                if v.HasField("simple_value"):
                    scalars[(v.tag, ev.step)] = v.simple_value
                elif v.HasField("tensor"):
                    arr = tensor_util.make_ndarray(v.tensor)
                    if arr.ndim == 0 and arr.dtype.kind in "fiu":
                        scalars[(v.tag, ev.step)] = float(arr)
    return scalars, tags


def tb_check(a):
    tb = os.path.join(a.run, "tb")
    if not glob.glob(os.path.join(tb, "events.out.tfevents.*")):
        print(json.dumps({"check": "tensorboard", "ok": False, "error": f"no event files in {tb}"}))
        return False
    scalars, tags = tb_events(tb)
    f32 = lambda v: struct.unpack("f", struct.pack("f", float(v)))[0]
    lines, checked, problems = 0, 0, []
    for raw in open(os.path.join(a.run, "metrics.jsonl")):
        m = json.loads(raw)
        step = m["step"]
        lines += 1
        for key, v in m.items():
            if key in ("step", "epoch") or isinstance(v, (str, list, dict)) or v is None:
                continue
            want = f32(1.0 if v is True else 0.0 if v is False else v)
            hits = [scalars[(g + "/" + key, step)] for g in ("train", "gdro", "perf", "memory")
                    if (g + "/" + key, step) in scalars]
            if not hits:
                problems.append(f"step {step}: no scalar <group>/{key}")
            elif not any(f32(h) == want or (math.isnan(h) and math.isnan(want)) for h in hits):
                problems.append(f"step {step}: {key} is {hits[0]}, metrics.jsonl has {want}")
            else:
                checked += 1
    if not any(t == "config" or t.startswith("config/") for t in tags):
        problems.append("no config text")
    ok = not problems and checked > 0
    print(json.dumps({"check": "tensorboard", "metrics_lines": lines, "scalars_checked": checked, "tags": len(tags),
                      "problems": problems[:10], "ok": ok}))
    return ok


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="check", required=True)
    p = sub.add_parser("peft")
    p.add_argument("--base", required=True)
    p.add_argument("--adapter", required=True)
    p.add_argument("--ours", required=True)
    p.add_argument("--atol", type=float, default=1e-4)
    p.add_argument("--rtol", type=float, default=1e-3)
    t = sub.add_parser("tensorboard")
    t.add_argument("--run", required=True)
    a = ap.parse_args()
    ok = peft_check(a) if a.check == "peft" else tb_check(a)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
