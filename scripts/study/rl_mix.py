#!/usr/bin/env python3
"""Write the study's RL prompt set: a difficulty mix with a heavy hard tail.

usage: rl_mix.py POOL.jsonl OUT.jsonl [group=count ...]

POOL is the demo's GRPO set (train.jsonl: rl_per_group problems per group,
disjoint from the warm-up and held-out sets). The first COUNT problems of
each group (in the pool's order, so the choice is fixed by the seed) are
kept. Defaults: 40 of each easy group, 120 add-2x2, 200 each of the two
hard groups (sub-2x2, mul-2x1): 640 prompts, 62% hard.
"""
import collections
import json
import sys

DEFAULT = {"mul-3x10": 40, "add-3x1": 40, "sub-3x1": 40, "add-2x2": 120, "sub-2x2": 200, "mul-2x1": 200}


def main(pool, out, specs):
    want = dict(DEFAULT)
    for s in specs:
        g, n = s.split("=")
        want[g] = int(n)
    rows = [json.loads(l) for l in open(pool) if l.strip()]
    have = collections.Counter()
    kept = []
    for r in rows:
        g = r["data_source"].split("/", 1)[1]
        if have[g] < want.get(g, 0):
            have[g] += 1
            kept.append(r)
    short = {g: (have[g], n) for g, n in want.items() if have[g] < n}
    if short:
        sys.exit("rl_mix.py: the pool %s is too small: %s" % (pool, short))
    with open(out, "w") as f:
        for r in kept:
            f.write(json.dumps(r) + "\n")
    print("rl_mix.py: %d prompts %s → %s" % (len(kept), dict(have), out), file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
