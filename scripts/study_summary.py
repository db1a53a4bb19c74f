#!/usr/bin/env python3
"""Summarise scripts/study.sh: final held-out metrics per method, mean ± std over seeds.

usage: python3 scripts/study_summary.py runs/study
Reads OUT/seed*/<method>/validation.jsonl (first line: before RL, last line: after).
"""
import glob
import json
import os
import statistics
import sys


def main(out):
    rows = {}
    for path in sorted(glob.glob(os.path.join(out, "seed*", "*", "validation.jsonl"))):
        method = os.path.basename(os.path.dirname(path))
        lines = [json.loads(l) for l in open(path) if l.strip()]
        if len(lines) < 2:
            continue
        first, last = lines[0], lines[-1]
        seed = os.path.basename(os.path.dirname(os.path.dirname(path)))
        rows.setdefault(method, []).append((first, last, seed))
    if not rows:
        sys.exit("no runs under %s" % out)

    def fmt(xs):
        if len(xs) == 1:
            return "%.3f" % xs[0]
        return "%.3f ± %.3f" % (statistics.mean(xs), statistics.stdev(xs))

    n = next(iter(rows.values()))[0][1]["n"]
    rows = {m: sorted(r, key=lambda x: x[2]) for m, r in rows.items()}
    print("| method | seeds | mean@%d before → after | pooled pass@%d after | worst-group acc after |" % (n, n))
    print("|---|---|---|---|---|")
    for method in ("grpo", "prompt_gdro", "rollout_gdro"):
        if method not in rows:
            continue
        r = rows[method]
        before = fmt([f["mean_acc"] for f, _, _ in r])
        after = fmt([l["mean_acc"] for _, l, _ in r])
        pooled = fmt([l["pooled_pass_at_n"] for _, l, _ in r])
        worst = fmt([l["worst_group_acc"] for _, l, _ in r])
        print("| %s | %d | %s → %s | %s | %s |" % (method, len(r), before, after, pooled, worst))

    # The warm-up differs a lot between seeds, so the informative numbers are
    # the paired ones: each method's change over its own starting point, and
    # its difference from GRPO trained from the same warm model.
    print()
    print("| method | Δ mean@%d (after − before) | Δ pooled pass@%d | Δ worst-group | vs GRPO: mean@%d | vs GRPO: worst-group |" % (n, n, n))
    print("|---|---|---|---|---|---|")
    base = {seed: l for _, l, seed in rows.get("grpo", [])}
    for method in ("grpo", "prompt_gdro", "rollout_gdro"):
        if method not in rows:
            continue
        r = rows[method]
        dm = fmt([l["mean_acc"] - f["mean_acc"] for f, l, _ in r])
        dp = fmt([l["pooled_pass_at_n"] - f["pooled_pass_at_n"] for f, l, _ in r])
        dw = fmt([l["worst_group_acc"] - f["worst_group_acc"] for f, l, _ in r])
        paired = [(l, base[s]) for _, l, s in r if s in base]
        vm = fmt([l["mean_acc"] - b["mean_acc"] for l, b in paired]) if paired else "-"
        vw = fmt([l["worst_group_acc"] - b["worst_group_acc"] for l, b in paired]) if paired else "-"
        print("| %s | %s | %s | %s | %s | %s |" % (method, dm, dp, dw, vm, vw))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "runs/study")
