#!/usr/bin/python3
"""Checks gdrotrain's Qwen3 folders, logits and tokenizer against the real thing.

Run by scripts/check_references.sh inside the Debian sid chroot (scripts/sid_chroot.sh), after
that script has written the model folders (gdrotrain init-tiny, and gdrotrain export of a trained
checkpoint), our logits (gdrotrain logits --all) and our token ids (gdrotrain tokenize), and a
manifest naming them. For every model folder:

  transformers  AutoModelForCausalLM.from_pretrained(output_loading_info=True): no missing,
                unexpected, mismatched or error keys; a Qwen3ForCausalLM with the folder's
                RoPE base; its logits at every position in float64 (weights upcast from the
                folder's own dtype) are the reference, and in float32 a second opinion.
  llama.cpp     the converter Debian ships (convert_hf_to_gguf.py --outtype f32) writes a GGUF;
                scripts/llama_logits.c runs it through libllama (one batch, F32 KV cache,
                flash attention off) and its logits are compared too.

Each comparison passes when |x − ref| ≤ 1e-5 + 1e-4·|ref| element by element (the tolerance
policy's float32-vs-float64 default, as in model/golden_test.go); "rel" in the report is
max|x − ref| / max|ref|.

For the LoRA checkpoint (check_lora): our logits of the checkpoint itself (its base with the
adapters applied on the fly) against transformers float64 on (a) the merged export and (b) the base
with the exported PEFT adapter folder folded in as PEFT's LoRA layer does, W + (lora_alpha/r)·B·A
(apply_adapter), same tolerance; the adapter folder run by gdrotrain must give the checkpoint's
logits exactly, and the adapters must move the base's logits (by more than 0.01) for the check to
mean anything. PEFT itself is not run: Debian sid has no python3-peft.

For every tokenizer folder, transformers' AutoTokenizer must give the ids of `gdrotrain tokenize`
on every sample of SAMPLES (encode without special tokens; and the chat template rendered as a user
turn with the generation prompt, as `tokenize --chat` does, then encoded). And for the real
Qwen3 tokenizer, on every case of tokenizer/testdata/qwen3_golden.jsonl.gz (the JS port's
encodings, decodings and chat renderings) with tokenizer/testdata/hf_overrides.jsonl
(transformers' answers where the JS port's differ, scripts/tokenizer_hf_overrides.py) taking
precedence: the expectations that `go test ./tokenizer/` holds our tokenizer to. Any mismatch
fails.

Writes RESULTS (JSON) and prints a table; exits 1 when anything fails.

  python3 scripts/check_references.py run --manifest W/manifest.json --results W/results.json
  python3 scripts/check_references.py convert HF_DIR OUT.gguf   (the converter, see convert())
"""
import argparse
import gzip
import json
import os
import runpy
import subprocess
import sys
import time

CONVERTER = "/usr/share/doc/llama.cpp-tools/scripts/convert_hf_to_gguf.py"
CONVERSION = "/usr/share/llama.cpp/llama.cpp-tools"  # the converter's private modules on Debian
ATOL, RTOL = 1e-5, 1e-4


def compare(got, ref):
    import numpy as np
    got, ref = np.asarray(got, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape:
        return {"ok": False, "error": f"shape {got.shape} vs {ref.shape}"}
    d = np.abs(got - ref)
    bad = d > ATOL + RTOL * np.abs(ref)
    return {"ok": bool(not bad.any()), "max_abs": float(d.max()), "rel": float(d.max() / np.abs(ref).max()),
            "bad": int(bad.sum()), "n": int(d.size)}


# --- llama.cpp -----------------------------------------------------------------------------

def convert(argv):
    """convert HF_DIR OUT.gguf: Debian's convert_hf_to_gguf.py --outtype f32.

    The converter names a BPE tokenizer's pre-tokenizer by hashing the ids it gives a test
    string, so a vocabulary it has never seen (our tiny tokenizers: the Qwen3 pre-tokenizer with
    a 512-token vocabulary) is refused even though its pre-tokenizer is Qwen2/3's. Where the
    hash is unknown this answers "qwen2" and says so on stderr; Qwen3's own tokenizer is
    recognised without it. The pre-tokenizer does not enter the logits."""
    hf_dir, out = argv
    sys.path.insert(1, CONVERSION)
    from conversion import base

    orig = base.TextModel.get_vocab_base_pre

    def pre(self, tokenizer):
        try:
            return orig(self, tokenizer)
        except NotImplementedError:
            print("check_references: pre-tokenizer hash unknown; using qwen2's", file=sys.stderr)
            return "qwen2"

    base.TextModel.get_vocab_base_pre = pre
    sys.argv = [CONVERTER, hf_dir, "--outtype", "f32", "--outfile", out]
    runpy.run_path(CONVERTER, run_name="__main__")


def llama_logits(helper, gguf, ids, out, threads):
    import numpy as np
    r = subprocess.run([helper, gguf, ",".join(map(str, ids)), out, str(threads)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"llama_logits {gguf}: {r.stderr.strip()}")
    n, v = map(int, r.stdout.split())
    return np.fromfile(out, dtype=np.float32).reshape(n, v)


# --- transformers --------------------------------------------------------------------------

def hf_logits(model_dir, ids, dtype):
    import torch
    from transformers import AutoModelForCausalLM
    m, info = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, attn_implementation="eager",
                                                   output_loading_info=True)
    with torch.no_grad():
        logits = m(input_ids=torch.tensor([ids])).logits[0]
    return m, {k: sorted(map(str, v)) for k, v in info.items()}, logits.numpy()


def check_model(c, work, helper, threads):
    import torch
    res = {"name": c["name"], "dir": c["dir"], "what": c.get("what", "")}
    ours = json.load(open(c["ours"]))
    ids = ours["ids"]
    t0 = time.time()
    m64, info, ref = hf_logits(c["dir"], ids, torch.float64)
    cfg = m64.config
    res["load"] = {"class": type(m64).__name__, "info": info,
                   "ok": type(m64).__name__ == "Qwen3ForCausalLM" and not any(info.values())}
    want_theta = json.load(open(os.path.join(c["dir"], "config.json"))).get("rope_theta")
    got_theta = (getattr(cfg, "rope_parameters", None) or {}).get("rope_theta", getattr(cfg, "rope_theta", None))
    if want_theta is not None and got_theta != want_theta:
        res["load"]["ok"] = False
        res["load"]["rope_theta"] = f"{got_theta} != {want_theta}"
    del m64
    _, _, tf32 = hf_logits(c["dir"], ids, torch.float32)
    res["ours_vs_tf64"] = compare(ours["positions"], ref)
    res["tf32_vs_tf64"] = compare(tf32, ref)
    res["transformers_s"] = round(time.time() - t0, 1)
    if c.get("gguf", True):
        t0 = time.time()
        gguf = os.path.join(work, "gguf", c["name"] + ".gguf")
        os.makedirs(os.path.dirname(gguf), exist_ok=True)
        log = gguf + ".log"
        with open(log, "w") as f:
            r = subprocess.run([sys.executable, os.path.abspath(__file__), "convert", c["dir"], gguf],
                               stdout=f, stderr=subprocess.STDOUT)
        if r.returncode != 0:
            res["gguf"] = {"ok": False, "error": f"converter failed (log {log}): " + open(log).read()[-2000:]}
        else:
            res["gguf"] = {"ok": True, "bytes": os.path.getsize(gguf),
                           "pre_fallback": "pre-tokenizer hash unknown" in open(log).read()}
            lc = llama_logits(helper, gguf, ids, gguf + ".logits.f32", threads)
            res["llama_vs_tf64"] = compare(lc, ref)
            res["llama_vs_ours"] = compare(lc, ours["positions"])
        res["llama_s"] = round(time.time() - t0, 1)
    keys = ["load", "ours_vs_tf64", "tf32_vs_tf64", "gguf", "llama_vs_tf64", "llama_vs_ours"]
    res["ok"] = all(res[k]["ok"] for k in keys if k in res)
    return res


# --- LoRA ----------------------------------------------------------------------------------

PEFT_PREFIX = "base_model.model."  # PEFT's PeftModelForCausalLM before the base model's names


def apply_adapter(model, adapter_dir):
    """Folds a PEFT LoRA adapter folder into model's weights as PEFT's LoRA layer computes it
    (peft/tuners/lora/layer.py: Linear.get_delta_weight = lora_B.weight @ lora_A.weight * scaling,
    scaling = lora_alpha / r, added to base_layer.weight on merge), in the model's own dtype.
    Names, r and lora_alpha come from the folder; what gdrotrain does not write (rsLoRA, DoRA,
    fan_in_fan_out, per-module ranks, biases) is refused. Returns the adapted module names and
    the problems found (a target module without an adapter, a tensor that adapts nothing)."""
    import torch
    from safetensors.torch import load_file
    cfg = json.load(open(os.path.join(adapter_dir, "adapter_config.json")))
    bad = [k for k in ("use_rslora", "use_dora", "fan_in_fan_out", "rank_pattern", "alpha_pattern",
                       "modules_to_save") if cfg.get(k)]
    if cfg.get("bias", "none") != "none" or cfg.get("peft_type") != "LORA":
        bad.append("bias/peft_type")
    if bad:
        raise ValueError(f"{adapter_dir}: adapter_config.json sets {bad}")
    scaling = cfg["lora_alpha"] / cfg["r"]
    pairs, problems = {}, []
    for name, t in load_file(os.path.join(adapter_dir, "adapter_model.safetensors")).items():
        head, _, kind = name.rpartition(".lora_")
        if not name.startswith(PEFT_PREFIX) or kind not in ("A.weight", "B.weight"):
            problems.append(f"unexpected tensor {name}")
            continue
        pairs.setdefault(head[len(PEFT_PREFIX):], {})[kind[0]] = t
    want = sorted(n for n, mod in model.named_modules()
                  if isinstance(mod, torch.nn.Linear) and n.rpartition(".")[2] in cfg["target_modules"])
    if sorted(pairs) != want:
        problems.append(f"adapted modules {sorted(pairs)} != the targets' {want}")
    with torch.no_grad():
        for mod, p in sorted(pairs.items()):
            w = model.get_submodule(mod).weight
            a, b = p["A"].to(w.dtype), p["B"].to(w.dtype)
            if a.shape != (cfg["r"], w.shape[1]) or b.shape != (w.shape[0], cfg["r"]):
                problems.append(f"{mod}: A {tuple(a.shape)}, B {tuple(b.shape)} over W {tuple(w.shape)}")
                continue
            w += (b @ a) * scaling
    return sorted(pairs), problems


def check_lora(c):
    """A LoRA checkpoint against transformers: our logits of the checkpoint itself (its base with
    the adapters applied on the fly, `gdrotrain logits --all`) against (a) the merged export loaded
    by AutoModelForCausalLM and (b) the base loaded by AutoModelForCausalLM with the exported
    adapter folder applied by apply_adapter, both in float64. Also recorded: (a) against (b),
    which differ only by the merged weights' float32 rounding; our logits of the exported adapter
    folder against the checkpoint's (the same tensors: identical); and how far the adapters move
    the base's logits (the check is empty unless they do)."""
    import torch
    from transformers import AutoModelForCausalLM
    res = {"checkpoint": c["checkpoint"], "merged": c["merged"], "adapter": c["adapter"]}
    ours = json.load(open(c["ours"]))
    ids = ours["ids"]
    t0 = time.time()
    _, info, merged = hf_logits(c["merged"], ids, torch.float64)
    base = AutoModelForCausalLM.from_pretrained(c["base"], dtype=torch.float64, attn_implementation="eager")
    with torch.no_grad():
        plain = base(input_ids=torch.tensor([ids])).logits[0].numpy()
    mods, problems = apply_adapter(base, c["adapter"])
    with torch.no_grad():
        adapted = base(input_ids=torch.tensor([ids])).logits[0].numpy()
    cfg = json.load(open(os.path.join(c["adapter"], "adapter_config.json")))
    res["adapter_config"] = {k: cfg.get(k) for k in ("r", "lora_alpha", "target_modules", "base_model_name_or_path")}
    res["adapter_apply"] = {"modules": len(mods), "problems": problems, "ok": not problems and bool(mods)}
    res["merged_load"] = {"info": info, "ok": not any(info.values())}
    res["ours_vs_merged_tf64"] = compare(ours["positions"], merged)
    res["ours_vs_adapted_tf64"] = compare(ours["positions"], adapted)
    res["merged_vs_adapted_tf64"] = compare(merged, adapted)
    res["ours_adapter_vs_ours"] = compare(json.load(open(c["ours_adapter"]))["positions"], ours["positions"])
    res["ours_adapter_vs_ours"]["ok"] = res["ours_adapter_vs_ours"].get("max_abs") == 0  # the same tensors
    eff = compare(plain, adapted)
    res["adapter_effect"] = {"max_abs": eff["max_abs"], "rel": eff["rel"], "ok": eff["max_abs"] > 1e-2}
    res["peft"] = "PeftModel.from_pretrained not run: Debian sid packages no python3-peft (apt-cache, 2026-11)"
    res["transformers_s"] = round(time.time() - t0, 1)
    keys = ["adapter_apply", "merged_load", "ours_vs_merged_tf64", "ours_vs_adapted_tf64", "merged_vs_adapted_tf64",
            "ours_adapter_vs_ours", "adapter_effect"]
    res["ok"] = all(res[k]["ok"] for k in keys)
    return res


# --- tokenizers ----------------------------------------------------------------------------

# Text that exercises the pre-tokenizer (contractions, digit runs, whitespace runs, punctuation,
# non-Latin scripts, emoji), the special tokens and the chat template.
SAMPLES = [
    "Hello, world! <think>",
    "What is $\\frac{3}{4} + \\sqrt{2}$? Put the answer in \\boxed{}.",
    "I've been told he's there; we'll see. DON'T", "12345678901234567890 3.14159 -42 1e-6",
    "  leading and trailing spaces  ", "tabs\tand\n\nnewlines\r\n  \n",
    "def f(x):\n    return x ** 2  # square\n", "数学很有趣。答案是 42。", "Привет, мир! Ünïcödé ß ﬁ",
    "emoji 🚀🦙 ✅ 😶\u200d🌫️", "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "</think>\n\nThe answer is 7.", "Let $x^2 - 5x + 6 = 0$. Then $x \\in \\{2, 3\\}$.",
    "a" * 300, "...!!!???------======", "\u00a0non-breaking\u2003em space",
    "bom   \t\ufeff here", "next line \t\x85 here", "\ufeffx \x85\ufeff\n\x85y\x85\x85",
    "it'\u017f \u017ftrange, don'\u017ft", "a\u07fd\u0301 cafe\u0301\u0898\u0301 \U00011935\U00011930",
]

def check_tokenizer(c, gdrotrain):
    """AutoTokenizer against `gdrotrain tokenize --json` (and --chat) on SAMPLES."""
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(c["dir"])
    res = {"name": c["name"], "dir": c["dir"], "class": type(tok).__name__, "cases": 0, "mismatches": []}
    for text in SAMPLES:
        for chat in (False, True) if c.get("chat", True) else (False,):
            cmd = [gdrotrain, "tokenize", "--json", "--tokenizer", c["dir"]] + (["--chat"] if chat else []) + ["--", text]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                res["mismatches"].append({"text": text, "chat": chat, "error": r.stderr.strip()})
                continue
            ours = json.loads(r.stdout)
            want = text
            if chat:
                want = tok.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                               add_generation_prompt=True)
            ids = tok.encode(want, add_special_tokens=False)
            res["cases"] += 1
            if ours["text"] != want or ours["ids"] != ids:
                res["mismatches"].append(
                    {"text": text, "chat": chat, "rendered": [want, ours["text"]], "transformers": ids, "ours": ours["ids"]})
    res["ok"] = not res["mismatches"] and res["cases"] > 0
    return res


def load_overrides(path):
    """hf_overrides.jsonl beside the golden file: golden line → transformers' answer."""
    p = os.path.join(os.path.dirname(path), "hf_overrides.jsonl")
    with open(p, encoding="utf-8") as f:
        return {o["line"]: o for o in (json.loads(l) for l in f if l.strip())}


def stale(c, o):
    """Whether override o no longer belongs to golden case c (the JS port's answer is beside it)."""
    k = c["kind"]
    if o["kind"] != k:
        return True
    if k == "encode":
        return c["text"] != o["text"] or c["ids"] != o["js_ids"]
    if k == "chat":
        return c["rendered"] != o["rendered"] or c["ids"] != o["js_ids"]
    return c["ids"] != o["ids"] or c.get("skip_special", False) != o["skip_special"] or c["text"] != o["js_text"]


def check_tokenizer_golden(tok_dir, path):
    """AutoTokenizer on the cases our tokenizer is tested against: the JS port's golden file with
    hf_overrides.jsonl (transformers' earlier answers where the JS port's differ) applied."""
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(tok_dir)
    over = load_overrides(path)
    counts, bad, used = {}, [], 0
    with gzip.open(path, "rt") as f:
        for n, line in enumerate(f):
            c = json.loads(line)
            k = c["kind"]
            o = over.get(n)
            if o is not None:
                if stale(c, o):  # the override no longer belongs to this line
                    c = dict(c, stale_override=o)
                elif k == "decode":
                    c = dict(c, text=o["text"])
                else:
                    c = dict(c, ids=o["ids"])
                used += 1
            if "stale_override" in c:
                ok = False
            elif k == "encode":
                ok = tok.encode(c["text"], add_special_tokens=False) == c["ids"]
            elif k == "decode":
                ok = tok.decode(c["ids"], skip_special_tokens=c.get("skip_special", False)) == c["text"]
            elif k == "chat":
                kw = {} if c.get("enable_thinking") is None else {"enable_thinking": c["enable_thinking"]}
                r = tok.apply_chat_template(c["messages"], tokenize=False, add_generation_prompt=True, **kw)
                ok = r == c["rendered"] and tok.encode(r, add_special_tokens=False) == c["ids"]
            else:
                continue
            n_k, m, ov = counts.get(k, (0, 0, 0))
            counts[k] = (n_k + 1, m + (not ok), ov + (o is not None))
            if not ok and len(bad) < 5:
                bad.append(dict(c, line=n))
    ok = all(m == 0 for _, m, _ in counts.values()) and bool(counts) and used == len(over)
    return {"name": "qwen3 vs " + os.path.basename(path), "dir": tok_dir,
            "counts": {k: {"cases": n, "mismatches": m, "overridden": ov} for k, (n, m, ov) in counts.items()},
            "overrides": {"entries": len(over), "used": used}, "examples": bad, "ok": ok}


# --- report --------------------------------------------------------------------------------

def fmt(c):
    if not c:
        return "-"
    if "error" in c:
        return "ERROR"
    return "%s %.1e/%.1e" % ("ok" if c["ok"] else "FAIL", c["max_abs"], c["rel"])


def versions():
    import importlib.metadata as md
    import platform
    import torch
    import transformers
    deb = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${Version}\\n", "llama.cpp-tools", "libllama0"],
                         capture_output=True, text=True).stdout.split("\n")
    return {"python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "gguf": md.version("gguf"),
            "debian": [l for l in deb if l]}


def run(a):
    import torch
    torch.set_num_threads(a.threads)
    from transformers.utils import logging as hf_logging
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    man = json.load(open(a.manifest))
    out = {"versions": versions(), "tolerance": {"atol": ATOL, "rtol": RTOL}, "models": [], "tokenizers": []}
    print("references:", json.dumps(out["versions"]))
    print("each cell: verdict, max abs error / (max abs error ÷ max |reference|); reference = transformers float64")
    print("%-16s %-6s %-19s %-19s %-19s %-19s  %s" % ("model", "load", "ours", "transformers fp32",
                                                        "llama.cpp f32", "llama.cpp vs ours", "what"))
    for c in man["models"]:
        try:
            r = check_model(c, man["work"], man["llama_logits"], a.threads)
        except Exception as e:  # report and go on: one broken case must not hide the others
            r = {"name": c["name"], "ok": False, "error": f"{type(e).__name__}: {e}"}
        out["models"].append(r)
        if "error" in r:
            print("%-16s ERROR %s" % (r["name"], r["error"]))
            continue
        load = "ok" if r["load"]["ok"] else "FAIL"
        g = r.get("gguf", {})
        lc = fmt(r.get("llama_vs_tf64")) if g.get("ok", True) else "convert FAIL"
        print("%-16s %-6s %-19s %-19s %-19s %-19s  %s" % (r["name"], load, fmt(r["ours_vs_tf64"]), fmt(r["tf32_vs_tf64"]),
                                                          lc, fmt(r.get("llama_vs_ours")), r["what"]))
        if not r["load"]["ok"]:
            print("   loading info:", json.dumps(r["load"]))
        if not g.get("ok", True):
            print("   ", g["error"][-1500:])
    if man.get("lora"):
        try:
            r = check_lora(man["lora"])
        except Exception as e:
            r = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        out["lora"] = r
        if "error" in r:
            print("lora             ERROR %s" % r["error"])
        else:
            print("lora checkpoint  %s: ours vs merged %s, vs base+adapter %s; merged vs base+adapter %s; "
                  "adapter folder vs checkpoint %s; adapters move the logits by %.2f (%d modules, r %s, alpha %s)" % (
                      "ok" if r["ok"] else "FAIL", fmt(r["ours_vs_merged_tf64"]), fmt(r["ours_vs_adapted_tf64"]),
                      fmt(r["merged_vs_adapted_tf64"]), fmt(r["ours_adapter_vs_ours"]), r["adapter_effect"]["max_abs"],
                      r["adapter_apply"]["modules"], r["adapter_config"]["r"], r["adapter_config"]["lora_alpha"]))
            for k in ("adapter_apply", "merged_load"):
                if not r[k]["ok"]:
                    print("   ", k, json.dumps(r[k]))
    for c in man["tokenizers"]:
        try:
            r = check_tokenizer(c, man["gdrotrain"])
        except Exception as e:
            r = {"name": c["name"], "ok": False, "error": f"{type(e).__name__}: {e}"}
        out["tokenizers"].append(r)
        print("tokenizer %-14s %s: %s" % (r["name"], "ok" if r["ok"] else "FAIL",
                                          r.get("error") or "%d samples, %d mismatches (%s)" % (
                                              r["cases"], len(r["mismatches"]), r["class"])))
        for mm in r.get("mismatches", [])[:3]:
            print("   ", json.dumps(mm, ensure_ascii=False)[:400])
    if man.get("tokenizer_golden"):
        try:
            r = check_tokenizer_golden(man["tokenizer_golden"]["dir"], man["tokenizer_golden"]["file"])
        except Exception as e:
            r = {"name": "qwen3 golden", "ok": False, "error": f"{type(e).__name__}: {e}"}
        out["tokenizers"].append(r)
        print("tokenizer %-14s %s: %s" % ("qwen3 golden", "ok" if r["ok"] else "FAIL",
                                          r.get("error") or ", ".join(
                                              "%s %d/%d identical%s" % (k, v["cases"] - v["mismatches"], v["cases"],
                                                                         " (%d from hf_overrides.jsonl)" % v["overridden"] if v["overridden"] else "")
                                              for k, v in r["counts"].items())))
        for ex in r.get("examples", [])[:3]:
            print("   ", json.dumps(ex, ensure_ascii=False)[:400])
    out["ok"] = all(r["ok"] for r in out["models"] + out["tokenizers"] + ([out["lora"]] if "lora" in out else []))
    with open(a.results, "w") as f:
        json.dump(out, f, indent=1)
    print("check_references:", "all passed" if out["ok"] else "FAILED", "(details: %s)" % a.results)
    return 0 if out["ok"] else 1


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "convert":
        return convert(sys.argv[2:])
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["run"])
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--results", required=True)
    ap.add_argument("--threads", type=int, default=2)
    return run(ap.parse_args())


if __name__ == "__main__":
    sys.exit(main())
