// Package reward is the math verifier: it turns a decoded model response and
// a ground-truth answer into a reward. Every scorer returns the same Result
// (score, correctness, extracted prediction, status), so validation never
// mixes return types (docs/algorithm.md §9.5 and §11 item 17).
//
// # Modes
//
// Four modes. The first three reproduce the reference implementation
// (docs/algorithm.md §3) exactly, including its mistakes; reference_test.go
// checks them against the Python originals on thousands of inputs. The
// fourth is ours.
//
//   - "dapo" (dapo.go): verl's math_dapo scorer, the "Minerva" answer-line
//     criterion. Only the last 300 code points are read; the last
//     `(?i)answer\s*:\s*([^\n]+)` capture (Python's Unicode `\s` and
//     backtracking) is normalized with math_dapo's normalize_final_answer —
//     the Minerva normalization of Lewkowycz et al. (2022) as in
//     lm-evaluation-harness: substitutions, removed unit words, the `$…$`,
//     `\text{}`, `\boxed{}` regex rewrites, the `\fracab` and `\sqrta` fixes,
//     comma removal for digit strings — and compared as a string with the
//     normalized ground truth. Score +1 / −1.
//   - "boxed" (boxed.go): verl's math.py, the Hendrycks MATH scorer: the last
//     `\boxed{}` (or `\boxed ` up to `$`, or `\fbox{}`), unwrapped, then
//     strip_string from Hendrycks et al. (2021) on both sides and string
//     equality. Where the Python raises inside strip_string the raw strings
//     are compared; where it raises in remove_boxed the score is 0. Score 1 / 0.
//   - "gpqa" (gpqa.go): the authors' gpqa_mc.py: the first `\boxed{X}`, else the
//     first `Answer: X`, X a letter A–D in either case, compared with the
//     stripped, upper-cased gold letter. Score 1 / 0.
//   - "symbolic" (symbolic.go): extracts the final answer and decides
//     mathematical equivalence (below). Score +1 / −1 like the training reward.
//
// ForDataSource picks one of the reference modes from a dataset's
// data_source exactly as verl's default_compute_score does (docs/algorithm.md §3.1).
//
// # The symbolic mode, and what it does beyond the reference
//
// Extraction (extract.go) reads the whole response and takes whichever marker
// comes last: an `Answer:` line, a `\boxed{}`/`\fbox{}`, or a "final answer
// is …" statement. The final answer is the one given last, so a boxed answer
// followed by a corrected one, or the Minerva "Final Answer: The final answer
// is $X$. I hope it is correct." form, read as a person reads them. The
// reference reads only an `Answer:` line in the last 300 characters (dapo) or
// only the last box (boxed).
//
// Equivalence compares normalized strings first, then multiple-choice
// letters when the truth is one (a hedge such as "B or C" is wrong), then
// words when the truth is a word or phrase (a leading article or a short
// statement is dropped: "an ellipse", "It is an ellipse" and "The curve is an
// ellipse" equal \text{ellipse}; "not an ellipse" does not), then parses both
// sides (symbolic_lex.go, symbolic_parse.go) into numbers,
// expressions, tuples and intervals (brackets kept: open and closed
// endpoints differ), sets and unordered answer lists (with `\pm` expanded;
// two lists must give as many answers, so `1,000` ≠ `1,000,000`),
// unions, matrices, equations and inequalities, numerals in a base (`52_8`)
// and text, and compares structure first, then scalars by value
// (symbolic_equiv.go):
//
//   - Values are exact Gaussian rationals (math/big) wherever exactness is
//     possible: integers, decimals, fractions, mixed numbers (`1\frac{4}{5}`),
//     percents, scientific notation, integer powers, perfect roots,
//     floor/ceil, factorials, binomials, logarithms of exact powers, i. Only
//     irrational values (π, e, other roots, transcendental functions) fall
//     back to complex128, compared with a relative tolerance of 1e-8
//     (symbolic_value.go). A decimal never equals an irrational truth (3.14 ≠
//     π, 1.41421356 ≠ √2) and a rounded decimal never equals an exact
//     fraction (0.33 ≠ 1/3, 38.57 ≠ 270/7).
//   - Expressions with variables are equal when they agree at eight points
//     (integers, fractions and negatives per variable; sixteen with larger
//     integers when floor, ceil, factorials or binomials occur), exactly
//     where possible. Points where either side is undefined are skipped, and
//     so are points where either side is not real unless an answer uses i:
//     √(1/n) = 1/√n, while √(x²) ≠ x and 1 − 1/e ≠ 1 + 1/e.
//   - `x = 3` equals 3 (also `f(x) = …`, `(x, y) = (1, 2)`, `x ∈ [a, b]`);
//     equations are equal when lhs − rhs are proportional, inequalities when
//     positively proportional.
//   - Against a truth that is not a relation, a predicted `lhs = v` whose left
//     side is an expression (`a + b = 12`, `f(2) + f(3) = 7`) is v, the value
//     stated last, as math_dapo reads it — unless v is 0 or mentions a
//     variable of lhs (`x² − 4 = 0` states an equation, not a value). A right
//     value on the left (`12 = a + b + 1`) is not the answer.
//   - An inequality about one variable is the interval it states, against an
//     interval or against `x ∈ I`, either way round: `1 \le x < 8` = [1, 8),
//     `8 \ge x \ge 1` = [1, 8], `x > 2` = (2, ∞); brackets must match
//     (`1 < x \le 8` ≠ [1, 8]), the bounds must not mention the variable, and
//     two inequalities compared as intervals must be about the same variable.
//   - Units (`\text{ cm}`, "students"), degree signs, `\$`, `\left`/`\right`,
//     spacing, `\text{}` and `\mathrm{}` are ignored, except that two different
//     explicit units never match (cm ≠ m, cm² ≠ cm³).
//   - Thousands separators: `1,234` reads both as 1234 and as a list; a
//     separator written with spacing or braces (`1\,000`, `10{,}080`,
//     `11,\! 111`, `1\!,\!000`, `1~000`, a thin space) is one, but only in a
//     well-formed grouping (one to three digits, then groups of three):
//     `1{,}00` is not 100 and `3{,}14` (a decimal comma) is not 3.14, and two
//     numbers side by side (`12 34`, `1\,00`) are not a product
//     (groupDigits in symbolic_lex.go).
//   - A decimal ground truth is taken as rounded: an irrational prediction,
//     or any prediction against a truth in e-notation (Minerva's `2.7778e-6`),
//     is accepted when it rounds to the truth at the truth's precision.
//   - Conventions: `\log` is the natural logarithm (only ratios of logarithms
//     appear in the benchmarks), e is Euler's number and i the imaginary unit
//     unless subscripted, juxtaposition is multiplication, and a function
//     without parentheses takes the factors after it (`\sin 2x`).
//
// # Bounded work
//
// Every symbolic call runs under a Budget (budget.go): a deterministic step
// counter charged by the lexer, parser and evaluator (big-number operations
// in proportion to their size), a wall-clock deadline as a backstop, caps on
// the size of exact numbers, nesting depth, parsed answer length and list
// sizes. A call that exhausts the budget scores as incorrect with
// StatusBudget, and so does an answer or truth longer than MaxAnswerBytes
// that is not equal to the other as a string: extraction never shortens an
// answer, so an identical answer of a million digits is correct and a
// different one is reported as over budget, never as no answer. An exact
// value past MaxBits (8192 bits) becomes floating point; one that then
// leaves float64's range (2^{9000}, 100000!, 2^{-9000}) is undecidable, and a
// comparison it leaves unequal is StatusBudget too, never a confident
// "incorrect" (nor 1/2^{9000} = 0). Powers are sized by |n|·log2|x|, so
// 2^{8000} (8001 bits) stays exact. A panic in
// any scorer is recovered and scored as incorrect with StatusPanic. Metrics
// counts both (the trainer logs them per step as verifier_budget_exhausted
// and verifier_panics). FuzzScore and the adversarial set (adversarial_test.go)
// check that no input panics or runs unbounded.
package reward
