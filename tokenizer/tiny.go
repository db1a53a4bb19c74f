package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// tinyCorpus is the text WriteTiny learns its merges from: the prompt
// templates the trainer sends, chat markup and a few math problems and
// solutions in the style of the training data.
const tinyCorpus = `Solve the following math problem step by step. The last line of your response should be of the form Answer: $Answer (without quotes) where $Answer is the answer to the problem.

Remember to put your answer on its own line after "Answer:". Let's think step by step and output the final answer within \boxed{}.
Please reason step by step, and put your final answer within \boxed{}.
Please only provide the letter of the answer in the box.
user assistant system think The answer is Answer: 42
Let $a, b, c$ be distinct numbers such that the equations $x^2 + ax + 1 = 0$ and $x^2 + bx + c = 0$ have a common real root. Compute the sum $a + b + c$.
In triangle $ABC$, $\sin \angle A = \frac{4}{5}$ and $\angle A < 90^\circ$. Find $AB + AC$.
There are $7$ boxes arranged in a row and numbered $1$ through $7$. You have a stack of $2015$ cards.
Let $ABCD$ be a unit square in the plane. Points $X$ and $Y$ are chosen independently and uniformly at random on the perimeter of $ABCD$. Compute $m+n$.
Convert the point $(0,3)$ in rectangular coordinates to polar coordinates. Enter your answer in the form $(r,\theta),$ where $r > 0$ and $0 \le \theta < 2 \pi.$
Define \[p = \sum_{k = 1}^\infty \frac{1}{k^2} \quad \text{and} \quad q = \sum_{k = 1}^\infty \frac{1}{k^3}.\]
How many positive whole-number divisors does 196 have? What is the value of $\sqrt{36 \times \sqrt{16}}$?
First, we note that the sum of the roots is equal to the negative of the coefficient. Therefore the answer is $\boxed{12}$.
We have $x = 3$ and $y = 4$, so $x + y = 7$. Then $2x + 3y = 6 + 12 = 18$. The final answer is $\boxed{18}$.
Since the triangle is a right triangle, the area is $\frac{1}{2} \cdot 3 \cdot 4 = 6$. Answer: 6
The probability is $\frac{m}{n}$ where $m$ and $n$ are relatively prime positive integers, so $m + n = 113$.
Let $f(x) = x^3 - 3x + 1$. Find the number of real solutions of $f(f(x)) = 0$. The function is increasing on the interval.
Suppose that the polynomial has integer coefficients and the equation holds for every integer $n \ge 1$.
Thus the minimum value is $-\frac{1}{4}$, attained when $x = \frac{1}{2}$. Therefore, the answer is $\boxed{-\frac{1}{4}}$.
Count the number of ordered pairs $(a, b)$ of integers with $1 \le a, b \le 100$ such that $a + b$ is divisible by $7$.
The sequence is defined by $a_1 = 1$ and $a_{n+1} = 2a_n + 1$ for all $n \geq 1$. Find the remainder when $a_{100}$ is divided by $1000$.
A circle of radius $r$ is inscribed in a square with side length $10$. What is the area of the region inside the square but outside the circle?
Determine all functions satisfying the given functional equation, and prove that no other solutions exist.
An isosceles trapezoid has parallel bases of lengths twelve and eighteen; its diagonals are perpendicular.
Evaluate the integral, simplify the expression, factor the quadratic, and rationalize the denominator.
The geometric series converges because the common ratio has absolute value less than one.
Consider the hexagon, pentagon, octagon, and dodecagon; compute each interior angle in degrees.
Probability, expectation, variance, combinations, permutations, binomial coefficients, and generating functions.
Matrices, determinants, eigenvalues, vectors, orthogonal projections, and linear transformations appear frequently.
The logarithm, exponential, trigonometric identities, cosine, tangent, secant, cotangent, and hyperbolic functions.
Prime factorization, greatest common divisor, least common multiple, modular arithmetic, and congruences.
Hence by induction the inequality holds; equality occurs exactly when all variables are equal.
Physics: velocity, acceleration, momentum, kinetic energy, wavelength, frequency, temperature, pressure.
Chemistry: molecules, reactions, electrons, oxidation, equilibrium, concentration, spectroscopy, catalysts.
Biology: proteins, enzymes, chromosomes, mutation, transcription, membranes, organisms, populations.
Wednesday, Thursday, Saturday; January, February, September, November, December; kilometers, centimeters.
`

// WriteTiny writes a small, self-contained Qwen3-style tokenizer to dir in
// the Hugging Face layout (tokenizer.json and tokenizer_config.json) for
// tests and the CPU demo: byte-level BPE with Qwen3's pre-tokenizer, 256 byte
// tokens plus merges learned deterministically from a built-in math corpus,
// followed by Qwen3's 26 added tokens (<|endoftext|>, <|im_start|>,
// <|im_end|>, …, <think>, </think>) and Qwen3's chat template. vocabSize is
// the total number of ids, added tokens included; the same vocabSize always
// gives the same bytes.
func WriteTiny(dir string, vocabSize int) error {
	tj, tc, err := TinyFiles(vocabSize)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("tokenizer: %w", err)
	}
	for name, b := range map[string][]byte{"tokenizer.json": tj, "tokenizer_config.json": tc} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("tokenizer: %w", err)
		}
	}
	return nil
}

// qwen3Added are Qwen3's added tokens in id order: content and special flag.
var qwen3Added = []struct {
	content string
	special bool
}{
	{"<|endoftext|>", true}, {"<|im_start|>", true}, {"<|im_end|>", true}, {"<|object_ref_start|>", true},
	{"<|object_ref_end|>", true}, {"<|box_start|>", true}, {"<|box_end|>", true}, {"<|quad_start|>", true},
	{"<|quad_end|>", true}, {"<|vision_start|>", true}, {"<|vision_end|>", true}, {"<|vision_pad|>", true},
	{"<|image_pad|>", true}, {"<|video_pad|>", true}, {"<tool_call>", false}, {"</tool_call>", false},
	{"<|fim_prefix|>", false}, {"<|fim_middle|>", false}, {"<|fim_suffix|>", false}, {"<|fim_pad|>", false},
	{"<|repo_name|>", false}, {"<|file_sep|>", false}, {"<tool_response>", false}, {"</tool_response>", false},
	{"<think>", false}, {"</think>", false},
}

// MinTinyVocab is the smallest vocabSize WriteTiny accepts (bytes + added tokens).
var MinTinyVocab = 256 + len(qwen3Added)

// TinyFiles returns the tokenizer.json and tokenizer_config.json bytes that
// WriteTiny writes.
func TinyFiles(vocabSize int) (tokenizerJSON, configJSON []byte, err error) {
	nMerges := vocabSize - MinTinyVocab
	if nMerges < 0 {
		return nil, nil, fmt.Errorf("tokenizer: tiny vocab size %d is below the minimum %d (256 bytes + %d added tokens)",
			vocabSize, MinTinyVocab, len(qwen3Added))
	}
	tokens, merges, err := trainTinyBPE(nMerges)
	if err != nil {
		return nil, nil, err
	}
	var b bytes.Buffer
	js := func(v any) string {
		out, _ := json.Marshal(v) // strings, bools and ints only: cannot fail
		return string(out)
	}
	b.WriteString("{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": [")
	for i, a := range qwen3Added {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "\n    {\"id\": %d, \"content\": %s, \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": false, \"special\": %v}",
			len(tokens)+i, js(a.content), a.special)
	}
	b.WriteString("\n  ],\n  \"normalizer\": {\"type\": \"NFC\"},\n")
	fmt.Fprintf(&b, "  \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": %s}, \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": false, \"use_regex\": false}]},\n", js(QwenSplitRegex))
	b.WriteString("  \"post_processor\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": false, \"use_regex\": false},\n")
	b.WriteString("  \"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": false, \"use_regex\": false},\n")
	b.WriteString("  \"model\": {\n    \"type\": \"BPE\",\n    \"dropout\": null,\n    \"unk_token\": null,\n    \"continuing_subword_prefix\": \"\",\n    \"end_of_word_suffix\": \"\",\n    \"fuse_unk\": false,\n    \"byte_fallback\": false,\n    \"ignore_merges\": false,\n    \"vocab\": {")
	for i, tok := range tokens {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "\n      %s: %d", js(tok), i)
	}
	b.WriteString("\n    },\n    \"merges\": [")
	for i, m := range merges {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "\n      [%s, %s]", js(m[0]), js(m[1]))
	}
	b.WriteString("\n    ]\n  }\n}\n")
	tokenizerJSON = b.Bytes()

	var c bytes.Buffer
	c.WriteString("{\n  \"add_bos_token\": false,\n  \"add_prefix_space\": false,\n  \"added_tokens_decoder\": {")
	var extra []string
	for i, a := range qwen3Added {
		if i > 0 {
			c.WriteString(",")
		}
		fmt.Fprintf(&c, "\n    \"%d\": {\"content\": %s, \"lstrip\": false, \"normalized\": false, \"rstrip\": false, \"single_word\": false, \"special\": %v}",
			len(tokens)+i, js(a.content), a.special)
		if a.special && a.content != "<|endoftext|>" {
			extra = append(extra, js(a.content))
		}
	}
	c.WriteString("\n  },\n  \"additional_special_tokens\": [" + strings.Join(extra, ", ") + "],\n")
	c.WriteString("  \"bos_token\": null,\n  \"chat_template\": " + js(qwen3ChatTemplate) + ",\n")
	c.WriteString("  \"clean_up_tokenization_spaces\": false,\n  \"eos_token\": \"<|im_end|>\",\n  \"errors\": \"replace\",\n")
	c.WriteString("  \"model_max_length\": 131072,\n  \"pad_token\": \"<|endoftext|>\",\n  \"split_special_tokens\": false,\n")
	c.WriteString("  \"tokenizer_class\": \"Qwen2Tokenizer\",\n  \"unk_token\": null\n}\n")
	return tokenizerJSON, c.Bytes(), nil
}

// gpt2ByteOrder is the order GPT-2's bytes_to_unicode lists the bytes in:
// the printable ranges first, then the rest. Qwen's vocabulary starts with
// the 256 byte tokens in this order.
func gpt2ByteOrder() []int {
	var order []int
	in := [256]bool{}
	for _, r := range [][2]int{{'!', '~'}, {0xa1, 0xac}, {0xae, 0xff}} {
		for b := r[0]; b <= r[1]; b++ {
			order = append(order, b)
			in[b] = true
		}
	}
	for b := 0; b < 256; b++ {
		if !in[b] {
			order = append(order, b)
		}
	}
	return order
}

// trainTinyBPE learns nMerges merges from tinyCorpus: classic BPE training
// over the pre-tokenizer's pieces, most frequent adjacent pair first, ties
// broken by the pair's byte-level strings. It returns the vocabulary in id
// order (256 byte tokens, then one token per merge) and the merges.
func trainTinyBPE(nMerges int) ([]string, [][2]string, error) {
	var tokens []string
	for _, b := range gpt2ByteOrder() {
		tokens = append(tokens, string(byteChar[b]))
	}
	idOf := map[string]int{}
	for i, t := range tokens {
		idOf[t] = i
	}
	counts := map[string]int{}
	pretokenize(tinyCorpus, func(p string) { counts[p]++ })
	pieces := make([]string, 0, len(counts))
	for p := range counts {
		pieces = append(pieces, p)
	}
	sort.Strings(pieces)
	words := make([][]int, len(pieces))
	freq := make([]int, len(pieces))
	for i, p := range pieces {
		for k := 0; k < len(p); k++ {
			words[i] = append(words[i], idOf[string(byteChar[p[k]])])
		}
		freq[i] = counts[p]
	}
	var merges [][2]string
	for len(merges) < nMerges {
		pairCount := map[[2]int]int{}
		for i, w := range words {
			for k := 0; k+1 < len(w); k++ {
				pairCount[[2]int{w[k], w[k+1]}] += freq[i]
			}
		}
		best, bestN := [2]int{-1, -1}, 0
		for p, n := range pairCount {
			if n > bestN || (n == bestN && pairLess(tokens, p, best)) {
				best, bestN = p, n
			}
		}
		if bestN == 0 {
			return nil, nil, fmt.Errorf("tokenizer: the tiny corpus yields only %d merges (vocab size %d at most)",
				len(merges), MinTinyVocab+len(merges))
		}
		a, b := tokens[best[0]], tokens[best[1]]
		newTok := a + b
		if _, dup := idOf[newTok]; dup {
			// A token reachable by two different merges keeps its first id;
			// merging the pair still shortens the words, so record the merge
			// but do not grow the vocabulary twice. (Rare in this corpus.)
			return nil, nil, fmt.Errorf("tokenizer: tiny BPE produced %q twice", newTok)
		}
		idOf[newTok] = len(tokens)
		tokens = append(tokens, newTok)
		merges = append(merges, [2]string{a, b})
		newID := idOf[newTok]
		for i, w := range words {
			out := w[:0]
			for k := 0; k < len(w); k++ {
				if k+1 < len(w) && w[k] == best[0] && w[k+1] == best[1] {
					out = append(out, newID)
					k++
				} else {
					out = append(out, w[k])
				}
			}
			words[i] = out
		}
	}
	return tokens, merges, nil
}

func pairLess(tokens []string, p, q [2]int) bool {
	if q[0] < 0 {
		return true
	}
	if tokens[p[0]] != tokens[q[0]] {
		return tokens[p[0]] < tokens[q[0]]
	}
	return tokens[p[1]] < tokens[q[1]]
}
