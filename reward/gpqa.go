package reward

// The "gpqa" mode: the authors' gpqa_mc.py (docs/algorithm.md §3.4). The first
// `\boxed{X}` (case-insensitive, whitespace allowed inside the braces), else
// the first `Answer: X` with optional spaces/tabs and an optional `$`, X a
// letter A–D in either case; correct iff it upper-cases to the stripped,
// upper-cased gold. Because the pattern is case-insensitive, "Answer: almost"
// reads as A, as in the reference.

import "strings"

// GPQA is the multiple-choice letter scorer. The zero value is ready to use.
type GPQA struct{}

// Mode reports ModeGPQA.
func (GPQA) Mode() Mode { return ModeGPQA }

// Score returns 1 when the extracted letter equals the gold letter, else 0.
func (GPQA) Score(response, truth string) (res Result) {
	defer guard(&res, 0)
	letter, ok := gpqaBoxed(response)
	if !ok {
		letter, ok = gpqaAnswerLine(response)
	}
	if !ok {
		return Result{Status: StatusNoAnswer}
	}
	pred := strings.ToUpper(letter)
	res = Result{Pred: pred}
	if pred == strings.ToUpper(pyStrip(truth)) {
		res.Score, res.Correct = 1, true
	}
	return res
}

// GPQATruth converts a ground truth given as an option index 0–3 to its
// letter, as gpqa_mc.py does for an int ground truth.
func GPQATruth(index int) (string, bool) {
	if index < 0 || index > 3 {
		return "", false
	}
	return string(rune('A' + index)), true
}

func isABCD(c byte) bool { return c >= 'A' && c <= 'D' || c >= 'a' && c <= 'd' }

// gpqaBoxed is re.search(r"\\boxed\{\s*([A-D])\s*\}", s, re.IGNORECASE).
func gpqaBoxed(s string) (string, bool) {
	for i := 0; i+len(`\boxed{`) <= len(s); i++ {
		if s[i] != '\\' || !strings.EqualFold(s[i+1:i+6], "boxed") || s[i+6] != '{' {
			continue
		}
		j := skipPySpace(s, i+7)
		if j >= len(s) || !isABCD(s[j]) {
			continue
		}
		k := skipPySpace(s, j+1)
		if k < len(s) && s[k] == '}' {
			return s[j : j+1], true
		}
	}
	return "", false
}

// gpqaAnswerLine is re.search(r"(?i)Answer[ \t]*:[ \t]*\$?([A-D])\$?", s).
func gpqaAnswerLine(s string) (string, bool) {
	skipBlank := func(j int) int {
		for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
			j++
		}
		return j
	}
	for i := 0; i < len(s); i++ {
		n, ok := foldAnswerAt(s, i)
		if !ok {
			continue
		}
		j := skipBlank(i + n)
		if j >= len(s) || s[j] != ':' {
			continue
		}
		j = skipBlank(j + 1)
		if j < len(s) && s[j] == '$' && j+1 < len(s) && isABCD(s[j+1]) {
			return s[j+1 : j+2], true
		}
		if j < len(s) && isABCD(s[j]) {
			return s[j : j+1], true
		}
	}
	return "", false
}
