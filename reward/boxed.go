package reward

// The "boxed" mode: verl's math.py, the Hendrycks MATH scorer that the
// reference uses for MATH-500 (docs/algorithm.md §3.3). Its normalization is Hendrycks et
// al.'s strip_string from the MATH release (via lm-evaluation-harness). The
// Python code raises in a few places; where it raises inside strip_string,
// is_equiv falls back to comparing the raw strings (errStrip below), and where
// it raises in remove_boxed the score is 0. Both are reproduced.

import (
	"errors"
	"strings"
	"unicode/utf8"
)

// Boxed is the Hendrycks MATH scorer. The zero value is ready to use.
type Boxed struct{}

// Mode reports ModeBoxed.
func (Boxed) Mode() Mode { return ModeBoxed }

// errStrip marks the inputs on which Python's strip_string raises.
var errStrip = errors.New("strip_string raised")

// Score returns 1 when the last boxed answer is equivalent to the truth
// under Hendrycks' string normalization, else 0.
func (Boxed) Score(response, truth string) (res Result) {
	defer guard(&res, 0)
	boxed, ok := hendrycksLastBoxed(response)
	if !ok {
		return Result{Status: StatusNoAnswer}
	}
	answer, ok := hendrycksRemoveBoxed(boxed)
	if !ok {
		// remove_boxed's assertion fails: compute_score catches it, score 0.
		return Result{Pred: boxed, Status: StatusNoAnswer}
	}
	res = Result{Pred: answer}
	if HendrycksEquiv(answer, truth) {
		res.Score, res.Correct = 1, true
	}
	return res
}

// hendrycksLastBoxed is last_boxed_only_string.
func hendrycksLastBoxed(s string) (string, bool) {
	idx := strings.LastIndex(s, `\boxed`)
	if j := strings.LastIndex(s, `\boxed `); j >= 0 {
		tail := s[j+len(`\boxed `):]
		if k := strings.IndexByte(tail, '$'); k >= 0 {
			tail = tail[:k]
		}
		return `\boxed ` + tail, true
	}
	if idx < 0 {
		idx = strings.LastIndex(s, `\fbox`)
		if idx < 0 {
			return "", false
		}
	}
	open := 0
	for i := idx; i < len(s); i++ {
		switch s[i] {
		case '{':
			open++
		case '}':
			open--
			if open == 0 {
				return s[idx : i+1], true
			}
		}
	}
	return "", false
}

// hendrycksRemoveBoxed is remove_boxed; false where its assertions fail.
func hendrycksRemoveBoxed(s string) (string, bool) {
	if strings.Contains(s, `\boxed `) {
		if !strings.HasPrefix(s, `\boxed `) {
			return "", false
		}
		return s[len(`\boxed `):], true
	}
	const left = `\boxed{`
	if !strings.HasPrefix(s, left) || !strings.HasSuffix(s, "}") || len(s) < len(left)+1 {
		return "", false
	}
	return s[len(left) : len(s)-1], true
}

// HendrycksEquiv is is_equiv: strip both and compare; if strip raises on
// either side, compare the raw strings.
func HendrycksEquiv(a, b string) bool {
	sa, err1 := HendrycksStrip(a)
	sb, err2 := HendrycksStrip(b)
	if err1 != nil || err2 != nil {
		return a == b
	}
	return sa == sb
}

// HendrycksStrip is strip_string. It returns errStrip where Python raises.
func HendrycksStrip(s string) (string, error) {
	s = strings.ReplaceAll(s, "\n", "")
	s = strings.ReplaceAll(s, `\!`, "")
	s = strings.ReplaceAll(s, `\\`, `\`)
	s = strings.ReplaceAll(s, "tfrac", "frac")
	s = strings.ReplaceAll(s, "dfrac", "frac")
	s = strings.ReplaceAll(s, `\left`, "")
	s = strings.ReplaceAll(s, `\right`, "")
	s = strings.ReplaceAll(s, `^{\circ}`, "")
	s = strings.ReplaceAll(s, `^\circ`, "")
	s = strings.ReplaceAll(s, `\$`, "")
	// remove_right_units
	if strings.Contains(s, `\text{ `) {
		parts := strings.Split(s, `\text{ `)
		if len(parts) != 2 {
			return "", errStrip
		}
		s = parts[0]
	}
	s = strings.ReplaceAll(s, `\%`, "")
	s = strings.ReplaceAll(s, " .", " 0.")
	s = strings.ReplaceAll(s, "{.", "{0.")
	if s == "" {
		return s, nil
	}
	if s[0] == '.' {
		s = "0" + s
	}
	if parts := strings.Split(s, "="); len(parts) == 2 && utf8.RuneCountInString(parts[0]) <= 2 {
		s = parts[1]
	}
	s, err := hendrycksFixSqrt(s)
	if err != nil {
		return "", err
	}
	s = strings.ReplaceAll(s, " ", "")
	s, err = hendrycksFixFracs(s)
	if err != nil {
		return "", err
	}
	if s == "0.5" {
		s = `\frac{1}{2}`
	}
	return hendrycksFixSlash(s), nil
}

// hendrycksFixSqrt is fix_sqrt: `\sqrtX` → `\sqrt{X}` for one code point X.
// An empty piece after `\sqrt` is an IndexError in Python.
func hendrycksFixSqrt(s string) (string, error) {
	if !strings.Contains(s, `\sqrt`) {
		return s, nil
	}
	parts := strings.Split(s, `\sqrt`)
	var b strings.Builder
	b.WriteString(parts[0])
	for _, p := range parts[1:] {
		if p == "" {
			return "", errStrip
		}
		if p[0] != '{' {
			a, n := firstRune(p)
			b.WriteString(`\sqrt{` + a + "}" + p[n:])
		} else {
			b.WriteString(`\sqrt` + p)
		}
	}
	return b.String(), nil
}

// hendrycksFixFracs is fix_fracs: `\fracab` → `\frac{a}{b}`, `\fraca{…` →
// `\frac{a}{…`. A piece shorter than two code points returns the input
// unchanged; an empty piece is an IndexError in Python.
func hendrycksFixFracs(s string) (string, error) {
	parts := strings.Split(s, `\frac`)
	if len(parts) == 1 {
		return s, nil
	}
	var b strings.Builder
	b.WriteString(parts[0])
	for _, p := range parts[1:] {
		b.WriteString(`\frac`)
		if p == "" {
			return "", errStrip
		}
		if p[0] == '{' {
			b.WriteString(p)
			continue
		}
		a, na := firstRune(p)
		c, nc := firstRune(p[na:])
		if nc == 0 {
			return s, nil
		}
		post := p[na+nc:]
		if c != "{" {
			b.WriteString("{" + a + "}{" + c + "}" + post)
		} else {
			b.WriteString("{" + a + "}" + c + post)
		}
	}
	return b.String(), nil
}

// hendrycksFixSlash is fix_a_slash_b: "a/b" with a and b integers that
// Python's int() reads and str() prints back identically → `\frac{a}{b}`.
func hendrycksFixSlash(s string) string {
	parts := strings.Split(s, "/")
	if len(parts) != 2 || !canonicalPyInt(parts[0]) || !canonicalPyInt(parts[1]) {
		return s
	}
	return `\frac{` + parts[0] + "}{" + parts[1] + "}"
}

// canonicalPyInt reports whether str(int(s)) == s in Python: an optional
// "-", then "0" or ASCII digits without a leading zero, and at most 4300
// digits (Python's default int_max_str_digits; longer raises ValueError).
func canonicalPyInt(s string) bool {
	digits := strings.TrimPrefix(s, "-")
	if digits == "" || len(digits) > 4300 {
		return false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return false
		}
	}
	if digits == "0" {
		return s == "0" // str(int("-0")) is "0"
	}
	return digits[0] != '0'
}
