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
        rows.setdefault(method, []).append((first, last))
    if not rows:
        sys.exit("no runs under %s" % out)

    def fmt(xs):
        if len(xs) == 1:
            return "%.3f" % xs[0]
        return "%.3f ± %.3f" % (statistics.mean(xs), statistics.stdev(xs))

    n = next(iter(rows.values()))[0][1]["n"]
    print("| method | seeds | mean@%d before → after | pooled pass@%d after | worst-group acc after |" % (n, n))
    print("|---|---|---|---|---|")
    for method in ("grpo", "prompt_gdro", "rollout_gdro"):
        if method not in rows:
            continue
        r = rows[method]
        before = fmt([f["mean_acc"] for f, _ in r])
        after = fmt([l["mean_acc"] for _, l in r])
        pooled = fmt([l["pooled_pass_at_n"] for _, l in r])
        worst = fmt([l["worst_group_acc"] for _, l in r])
        print("| %s | %d | %s → %s | %s | %s |" % (method, len(r), before, after, pooled, worst))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "runs/study")
