"""Writes reward/testdata/reference_golden.jsonl.gz: the reference Python
scorers' verdicts, which reward/reference_test.go (TestReferenceGolden) checks
the Go reference modes against.

The scorers are run unmodified from their own sources, which this script
does not contain (it loads them by path):
  - verl's math_dapo.py (compute_score, normalize_final_answer) and math.py
    (Hendrycks: compute_score, strip_string), at the commit the published
    runs were based on (docs/algorithm.md §0; both files are byte-identical
    at bd756c15c887 and 864ba998):
        git clone https://github.com/volcengine/verl /tmp/verl
        git -C /tmp/verl checkout bd756c15c887
  - the authors' gpqa_mc.py from their patched verl tree
    (verl/utils/reward_score/gpqa_mc.py): its compute_score gives the score,
    and its extraction function (--gpqa-pred, default the first function
    whose name starts with "extract") the predicted letter ("" for none).

Record format (one JSON object per line):
  {"kind": "score", "response", "truth", "dapo_score", "dapo_pred",
   "boxed_score", "gpqa_score", "gpqa_pred"}
  {"kind": "norm", "in", "dapo", "strip", "strip_raises"}
"norm" records are normalize_final_answer(in) and strip_string(in) (strip
"" and strip_raises true where strip_string raises).

Inputs:
  --inputs recorded (default) re-scores the inputs already in the file, in
      the same order: the way to regenerate it, or to check it (--check
      compares instead of writing and exits 1 on any difference).
  --inputs fresh builds them anew: the 83 examples of
      reward/testdata/verifier_examples.jsonl; every benchmark ground truth
      (benchmarks/*.jsonl) inside four response templates, against itself and
      against another truth; seeded "token soup" from the characters and
      commands the normalizations special-case, some padded past the
      300-character window; and "Answer:" spacing variants. Norm records:
      every ground truth, then more soup.

Regenerate (CPython 3.11, no packages needed beyond the standard library):
    python3 scripts/reward_golden.py --verl /tmp/verl \
        --gpqa /path/to/patched-verl/verl/utils/reward_score/gpqa_mc.py
    go test -run TestReferenceGolden -v ./reward/
"""
import argparse
import glob
import gzip
import importlib.util
import inspect
import json
import os
import random
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))
GOLDEN = os.path.join(ROOT, "reward", "testdata", "reference_golden.jsonl.gz")


def load(path, name):
    """Imports one source file as a module without its package (verl's
    package __init__ would pull in torch)."""
    if not os.path.isfile(path):
        sys.exit(f"reward_golden: {path} does not exist")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Reference:
    def __init__(self, verl, gpqa, gpqa_pred):
        rs = os.path.join(verl, "verl", "utils", "reward_score")
        self.dapo = load(os.path.join(rs, "math_dapo.py"), "ref_math_dapo")
        self.boxed = load(os.path.join(rs, "math.py"), "ref_math")
        self.gpqa = load(gpqa, "ref_gpqa_mc")
        if gpqa_pred:
            self.gpqa_extract = getattr(self.gpqa, gpqa_pred)
        else:
            names = [n for n, f in inspect.getmembers(self.gpqa, inspect.isfunction)
                     if n.startswith("extract") and f.__module__ == "ref_gpqa_mc"]
            if not names:
                sys.exit("reward_golden: gpqa_mc.py has no extract* function; name it with --gpqa-pred")
            self.gpqa_extract = getattr(self.gpqa, sorted(names)[0])

    def score(self, response, truth):
        d = self.dapo.compute_score(response, truth)
        g = self.gpqa.compute_score(response, truth)
        if isinstance(g, dict):
            g_score, g_pred = g["score"], g.get("pred")
        else:
            g_score, g_pred = g, self.gpqa_extract(response)
        return {"kind": "score", "response": response, "truth": truth,
                "dapo_score": float(d["score"]), "dapo_pred": d["pred"],
                "boxed_score": float(self.boxed.compute_score(response, truth)),
                "gpqa_score": float(g_score), "gpqa_pred": g_pred or ""}

    def norm(self, s):
        try:
            strip, raises = self.boxed.strip_string(s), False
        except Exception:  # the test checks that HendrycksStrip fails here too
            strip, raises = "", True
        return {"kind": "norm", "in": s, "dapo": self.dapo.normalize_final_answer(s),
                "strip": strip, "strip_raises": raises}


def recorded_inputs():
    with gzip.open(GOLDEN, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    scores = [(r["response"], r["truth"]) for r in rows if r["kind"] == "score"]
    norms = [r["in"] for r in rows if r["kind"] == "norm"]
    return scores, norms


# What the normalizations special-case: their literals, Unicode whitespace and
# digits, the long s (ſ, which casefolds to "s"), unbalanced braces, the
# boxed-with-a-space form, \text{ with a space.
SOUP = ["\\boxed{", "\\boxed ", "\\fbox{", "}", "{", "$", "\\$", "\\text{", "\\text{ ", "\\textbf{",
        "\\overline{", "\\frac", "\\dfrac", "tfrac", "\\sqrt", "sqrt", "\\left", "\\right", "\\!",
        "\\\\", "^\\circ", "^{\\circ}", "\\%", "=", ",", ".", " .", "{.", "/", "an ", "a ", "\\ ",
        "mbox", "\\text{and}", "\\text{m}", "units", "degrees", "\\ldots", "\\dots", "\\;", ",\\!",
        "{,}", "\"", "\\mathrm{th}", "Answer:", "answer :", "ANSWER", "Answer: $a$", "\n", "\r",
        "\t", "\u00a0", "\u3000", "\u200b", "\u0663", "\u00b2", "\u017f", "\u7b54\u6848", "A", "B",
        "C", "D", "E", "(", ")", "[", "]", "0", "1", "2", "05", "1200", "-3/4", "1/2", "0.5", "-0",
        "\\pi", "x", "a", "A)", "answer", "\\boxed{ C }"]

TEMPLATES = ["Some work.\nAnswer: {a}", "Some work.\n\\boxed{{{a}}}", "Some work.\nAnswer: \\boxed{{{a}}}",
             "Some work.\nThe answer is \\boxed {a} $"]


def soup(rng, lo, hi):
    s = "".join(rng.choice(SOUP) for _ in range(rng.randint(lo, hi)))
    if rng.random() < 0.2:  # past math_dapo's 300-character window
        s = "x" * rng.randint(250, 400) + s
    return s


def fresh_inputs(seed):
    rng = random.Random(seed)
    scores, truths = [], []
    with open(os.path.join(ROOT, "reward", "testdata", "verifier_examples.jsonl"), encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            scores.append((r["response"], str(r["ground_truth"])))
    for path in sorted(glob.glob(os.path.join(ROOT, "benchmarks", "*.jsonl"))):
        with open(path, encoding="utf-8") as f:
            for line in f:
                r = json.loads(line)
                a = r.get("answer", r.get("final_answer"))
                if isinstance(a, list):
                    a = a[0] if a else ""
                if a is not None:
                    truths.append(str(a))
    for t in truths:
        tmpl = rng.choice(TEMPLATES)
        scores.append((tmpl.format(a=t), t))
        scores.append((tmpl.format(a=rng.choice(truths)), t))
    for _ in range(1200):
        scores.append((soup(rng, 3, 40), soup(rng, 0, 4)))
    for _ in range(200):  # "Answer:" spacing, case and line-break variants
        words = ["answer", "Answer", "ANSWER", "aNsWeR"]
        gap = lambda: "".join(rng.choice([" ", "\n", "\r", "\t", "\u00a0", "\u3000", "\u200b", ""]) for _ in range(rng.randint(0, 3)))
        resp = rng.choice(words) + gap() + ":" + gap() + rng.choice(["5", ":", "A", "x = 5", "1,000", ""])
        scores.append((resp, rng.choice(["5", "A", "", " ", "1000"])))
    norms = list(truths)
    while len(norms) < 2025:
        norms.append(soup(rng, 1, 12))
    return scores, norms


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--verl", required=True, help="a verl checkout (its verl/utils/reward_score is read)")
    ap.add_argument("--gpqa", required=True, help="the authors' gpqa_mc.py")
    ap.add_argument("--gpqa-pred", default="", help="gpqa_mc.py's letter-extraction function")
    ap.add_argument("--inputs", choices=["recorded", "fresh"], default="recorded")
    ap.add_argument("--seed", type=int, default=1, help="soup seed for --inputs fresh")
    ap.add_argument("--out", default=GOLDEN)
    ap.add_argument("--check", action="store_true", help="compare with --out instead of writing it")
    a = ap.parse_args()
    ref = Reference(a.verl, a.gpqa, a.gpqa_pred)
    scores, norms = recorded_inputs() if a.inputs == "recorded" else fresh_inputs(a.seed)
    rows = [ref.score(r, t) for r, t in scores] + [ref.norm(s) for s in norms]
    if a.check:
        with gzip.open(a.out, "rt", encoding="utf-8") as f:
            old = [json.loads(line) for line in f]
        bad = [i for i, (x, y) in enumerate(zip(old, rows)) if x != y]
        if bad or len(old) != len(rows):
            for i in bad[:10]:
                print(f"record {i + 1}:\n  file      {json.dumps(old[i])[:300]}\n  reference {json.dumps(rows[i])[:300]}")
            sys.exit(f"reward_golden: {len(bad)} of {len(rows)} records differ ({len(old)} in the file)")
        print(f"reward_golden: all {len(rows)} records agree with the reference")
        return
    # mtime=0: the same records give the same bytes.
    with open(a.out, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        for r in rows:
            gz.write((json.dumps(r, ensure_ascii=True) + "\n").encode("utf-8"))
    print(f"reward_golden: wrote {len(scores)} score and {len(norms)} norm records to {a.out}")


if __name__ == "__main__":
    main()
