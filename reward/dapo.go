package reward

// The "dapo" mode: verl's math_dapo scorer exactly as the reference runs it
// for training and for AIME/AMC/Minerva/OlympiadBench validation (docs/algorithm.md §3.2).
// Its normalization is the Minerva one (normalize_final_answer, from
// lm-evaluation-harness' hendrycks_math utils). Every Python regex is
// re-implemented by hand so that Python semantics (Unicode `\s`, `.` not
// matching only "\n", lazy/greedy backtracking, non-overlapping re.sub scans)
// are reproduced exactly; dapo_test.go pins the behaviours.

import (
	"strings"
	"unicode/utf8"
)

// DAPO is the math_dapo scorer. The zero value is ready to use.
type DAPO struct{}

// dapoWindow is how many trailing code points math_dapo reads.
const dapoWindow = 300

// dapoInvalid is math_dapo's prediction when no answer line is found.
const dapoInvalid = "[INVALID]"

// Mode reports ModeDAPO.
func (DAPO) Mode() Mode { return ModeDAPO }

// Score returns +1 when the normalized last answer line equals the
// normalized ground truth, −1 otherwise.
func (DAPO) Score(response, truth string) (res Result) {
	defer guard(&res, -1)
	capture, ok := dapoLastAnswer(lastRunes(response, dapoWindow))
	if !ok {
		capture = dapoInvalid
	}
	pred := NormalizeDAPO(capture)
	res = Result{Score: -1, Pred: pred}
	if !ok {
		res.Status = StatusNoAnswer
	}
	if pred == NormalizeDAPO(truth) {
		res.Score, res.Correct = 1, true
	}
	return res
}

// dapoLastAnswer emulates re.findall(r"(?i)Answer\s*:\s*([^\n]+)", s)[-1].
func dapoLastAnswer(s string) (string, bool) {
	last, found := "", false
	pos := 0
	for pos < len(s) {
		i := pos
		n, ok := foldAnswerAt(s, i)
		if !ok {
			pos++
			continue
		}
		colon := skipPySpace(s, i+n)
		if colon >= len(s) || s[colon] != ':' {
			pos = i + 1
			continue
		}
		start, end, ok := dapoCapture(s, colon+1)
		if !ok {
			pos = i + 1
			continue
		}
		last, found = s[start:end], true
		pos = end
	}
	return last, found
}

// dapoCapture matches `\s*([^\n]+)` at k with Python backtracking and returns
// the capture's bounds.
func dapoCapture(s string, k int) (start, end int, ok bool) {
	w := skipPySpace(s, k)
	if w < len(s) {
		// s[w] is not whitespace, so it is not "\n": the greedy run starts here.
		return w, lineEnd(s, w), true
	}
	// The whitespace run reaches the end of s: `\s*` gives back code points
	// until `[^\n]+` can start on one that is not a newline.
	for p := len(s); p > k; {
		r, size := utf8.DecodeLastRuneInString(s[k:p])
		p -= size
		if r != '\n' {
			return p, lineEnd(s, p), true
		}
	}
	return 0, 0, false
}

// lineEnd returns the index of the first "\n" at or after i, or len(s).
func lineEnd(s string, i int) int {
	if j := strings.IndexByte(s[i:], '\n'); j >= 0 {
		return i + j
	}
	return len(s)
}

var dapoSubstitutions = [][2]string{
	{"an ", ""},
	{"a ", ""},
	{".$", "$"},
	{`\$`, ""},
	{`\ `, ""},
	{" ", ""},
	{"mbox", "text"},
	{`,\text{and}`, ","},
	{`\text{and}`, ","},
	{`\text{m}`, `\text{}`},
}

var dapoRemoved = []string{
	"square", "ways", "integers", "dollars", "mph", "inches", "hours", "km",
	"units", `\ldots`, "sue", "points", "feet", "minutes", "digits", "cents",
	"degrees", "cm", "gm", "pounds", "meters", "meals", "edges", "students",
	"childrentickets", "multiples", `\text{s}`, `\text{.}`, "\\text{\ns}",
	`\text{}^2`, `\text{}^3`, "\\text{\n}", `\text{}`, `\mathrm{th}`, `^\circ`,
	`^{\circ}`, `\;`, `,\!`, "{,}", `"`, `\dots`,
}

// NormalizeDAPO is math_dapo's normalize_final_answer (docs/algorithm.md §3.2).
func NormalizeDAPO(a string) string {
	if i := strings.LastIndexByte(a, '='); i >= 0 {
		a = a[i+1:]
	}
	for _, sub := range dapoSubstitutions {
		a = strings.ReplaceAll(a, sub[0], sub[1])
	}
	for _, e := range dapoRemoved {
		a = strings.ReplaceAll(a, e, "")
	}
	a = dapoDollarPair(a)
	a = subLazyGroup(a, `\text{`)
	a = subLazyGroup(a, `\textbf{`)
	a = subLazyGroup(a, `\overline{`)
	a = subGreedyGroup(a, `\boxed{`)
	a = dapoFixFrac(a)
	a = dapoFixSqrt(a)
	a = strings.ReplaceAll(a, "$", "")
	if t := strings.ReplaceAll(a, ",", ""); pyIsDigit(t) {
		a = t
	}
	return pyStrip(a)
}

// dapoDollarPair is re.sub(r"(.*?)(\$)(.*?)(\$)(.*)", "$\\3$", a). Because `.`
// stops at "\n", each line with at least two `$` becomes `$X$`, X being the
// text between its first two `$`; other lines are unchanged.
func dapoDollarPair(a string) string {
	if strings.Count(a, "$") < 2 {
		return a
	}
	lines := strings.Split(a, "\n")
	for i, l := range lines {
		first := strings.IndexByte(l, '$')
		if first < 0 {
			continue
		}
		second := strings.IndexByte(l[first+1:], '$')
		if second < 0 {
			continue
		}
		lines[i] = "$" + l[first+1:first+1+second] + "$"
	}
	return strings.Join(lines, "\n")
}

// subLazyGroup is re.sub(open + r"(.*?)\}", r"\1", a) for an open string
// ending in "{": each open…} with no newline inside loses its wrapper. The
// stop (next "}" or "\n") only moves forward, so the scan is linear where
// Python's is quadratic.
func subLazyGroup(a, open string) string {
	if !strings.Contains(a, open) {
		return a
	}
	var b strings.Builder
	pos, stop := 0, -1 // a[:pos] has been copied to b; a[stop] is '}' or '\n'
	for search := 0; ; {
		i := strings.Index(a[search:], open)
		if i < 0 {
			break
		}
		i += search
		body := i + len(open)
		if stop < body {
			stop = len(a)
			if j := strings.IndexAny(a[body:], "}\n"); j >= 0 {
				stop = body + j
			}
		}
		if stop == len(a) || a[stop] == '\n' {
			search = i + 1
			continue
		}
		b.WriteString(a[pos:i])
		b.WriteString(a[body:stop])
		pos = stop + 1
		search = pos
	}
	b.WriteString(a[pos:])
	return b.String()
}

// subGreedyGroup is re.sub(open + r"(.*)\}", r"\1", a): the group runs to the
// last "}" on the same line.
func subGreedyGroup(a, open string) string {
	if !strings.Contains(a, open) {
		return a
	}
	var b strings.Builder
	pos := 0
	end, last := -1, -1 // the current line's end and its last '}'
	for search := 0; ; {
		i := strings.Index(a[search:], open)
		if i < 0 {
			break
		}
		i += search
		body := i + len(open)
		if body > end {
			end = lineEnd(a, body)
			last = strings.LastIndexByte(a[body:end], '}')
			if last >= 0 {
				last += body
			}
		}
		if last < body {
			search = i + 1
			continue
		}
		b.WriteString(a[pos:i])
		b.WriteString(a[body:last])
		pos = last + 1
		search = pos
	}
	b.WriteString(a[pos:])
	return b.String()
}

// dapoFixFrac is re.sub(r"(frac)([^{])(.)", "frac{\\2}{\\3}", a).
func dapoFixFrac(a string) string { return dapoBraceArgs(a, "frac", 2) }

// dapoFixSqrt is re.sub(r"(sqrt)([^{])", "sqrt{\\2}", a).
func dapoFixSqrt(a string) string { return dapoBraceArgs(a, "sqrt", 1) }

// dapoBraceArgs puts each of the n code points after every word in braces,
// as re.sub(r"(word)([^{])(.)…", "word{\\2}{\\3}…", a) with n−1 `(.)`:
// the first must not be "{" (a newline may be), the others not "\n". A
// word not followed by them is left as it is, and the search goes on from
// its next byte, as the regular expression's does.
func dapoBraceArgs(a, word string, n int) string {
	if !strings.Contains(a, word) {
		return a
	}
	var b strings.Builder
	pos := 0
	for search := 0; ; {
		i := strings.Index(a[search:], word)
		if i < 0 {
			break
		}
		i += search
		args, end, ok := dapoArgs(a, i+len(word), n)
		if !ok {
			search = i + 1
			continue
		}
		b.WriteString(a[pos:i])
		b.WriteString(word)
		for _, x := range args {
			b.WriteString("{" + x + "}")
		}
		pos, search = end, end
	}
	b.WriteString(a[pos:])
	return b.String()
}

// dapoArgs reads the n code points dapoBraceArgs wraps, starting at x, and
// returns them and where they end; ok is false when they are not there.
func dapoArgs(a string, x, n int) (args []string, end int, ok bool) {
	for k := range n {
		r, size := utf8.DecodeRuneInString(a[x:])
		if size == 0 || (k == 0 && r == '{') || (k > 0 && r == '\n') {
			return nil, 0, false
		}
		args = append(args, a[x:x+size])
		x += size
	}
	return args, x, true
}
