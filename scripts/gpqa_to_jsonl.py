#!/usr/bin/env python3
"""Convert GPQA-Diamond's CSV into the JSONL rows gdrotrain validates on.

GPQA is not shipped with gdrotrain: its authors ask that the examples not be
revealed in plain text online (to keep them out of training corpora). Get the
CSV yourself (Hugging Face dataset Idavidrein/gpqa, config gpqa_diamond, after
accepting its terms: gpqa_diamond.csv), convert it here, keep the output out of
public places, and add it to validation.files:

    python3 scripts/gpqa_to_jsonl.py gpqa_diamond.csv /private/gpqa_diamond.jsonl
    gdrotrain train --config configs/paper-prompt-gdro-1.7b.yaml ... \
        --set 'validation.files=[benchmarks/math500.jsonl, benchmarks/aime24.jsonl,
               benchmarks/aime25.jsonl, benchmarks/amc23.jsonl, benchmarks/minerva_math.jsonl,
               benchmarks/olympiadbench.jsonl, /private/gpqa_diamond.jsonl]'

Each row is {"id": "gpqa_diamond-<i>", "source": "gpqa_diamond", "problem",
"choices": [4 options], "answer": "<letter>"}; gdrotrain maps the source to
Idavidrein/gpqa, renders the multiple-choice prompt and scores the letter.
The options are shuffled deterministically (the authors' script used an
unseeded random.shuffle, so their letters cannot be reproduced): for CSV row
i (0-based), k = first 8 bytes of SHA-256("gdro-gpqa-diamond-v1:<i>") as a
big-endian integer mod 24, perm = the k-th permutation of (0, 1, 2, 3) in
lexicographic order over [correct, incorrect 1, incorrect 2, incorrect 3].
Standard library only.
"""
import csv
import hashlib
import itertools
import json
import sys

PERMS = list(itertools.permutations(range(4)))


def perm_for(i):
    h = hashlib.sha256(("gdro-gpqa-diamond-v1:%d" % i).encode()).digest()
    return PERMS[int.from_bytes(h[:8], "big") % 24]


def main(src, dst):
    with open(src, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    with open(dst, "w", encoding="utf-8") as out:
        for i, r in enumerate(rows):
            options = [r["Correct Answer"], r["Incorrect Answer 1"], r["Incorrect Answer 2"], r["Incorrect Answer 3"]]
            perm = perm_for(i)
            row = {"id": "gpqa_diamond-%d" % i, "source": "gpqa_diamond", "problem": r["Question"],
                   "answer": "ABCD"[perm.index(0)], "choices": [options[p] for p in perm]}
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    print("wrote %d rows to %s" % (len(rows), dst))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: gpqa_to_jsonl.py gpqa_diamond.csv OUT.jsonl")
    main(sys.argv[1], sys.argv[2])
