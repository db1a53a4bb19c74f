package reward

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

func TestDAPOScore(t *testing.T) {
	pad := strings.Repeat("x", 400)
	cases := []struct {
		name, resp, truth string
		wantPred          string
		wantScore         float64
	}{
		// The consequences listed in docs/algorithm.md §3.2.
		{"plain", "work\nAnswer: 42", "42", "42", 1},
		{"boxed on the line", "Answer: \\boxed{42}", "42", "42", 1},
		{"markdown final answer", "**Final Answer:** \\boxed{42}", "42", "**42", -1},
		{"no colon", "The final answer is \\boxed{42}", "42", "[INVALID]", -1},
		{"x = 5", "Answer: x = 5", "5", "5", 1},
		{"thousands", "Answer: 1,000", "1000", "1000", 1},
		// The window is the last 300 code points.
		{"outside window", "Answer: 7\n" + pad, "7", "[INVALID]", -1},
		{"inside window", pad + "\nAnswer: 7", "7", "7", 1},
		{"window counts code points", "Answer: 7" + strings.Repeat("é", 291), "7", "7" + strings.Repeat("é", 291), -1},
		{"last match wins", "Answer: 3\nAnswer: 4", "4", "4", 1},
		{"earlier match loses", "Answer: 4\nAnswer: 3", "4", "3", -1},
		{"case-insensitive", "ANSWER: 12", "12", "12", 1},
		{"long s folds to s", "anſwer: 12", "12", "12", 1},
		{"space before colon", "Answer : 12", "12", "12", 1},
		{"answer on next line", "Answer:\n\n12", "12", "12", 1},
		{"only whitespace after colon", "Answer: \n", "", "", 1},
		{"dollars", "Answer: $\\frac{1}{2}$", "\\frac{1}{2}", "\\frac{1}{2}", 1},
		{"dfrac is not frac", "Answer: \\dfrac{1}{2}", "\\frac{1}{2}", "\\dfrac{1}{2}", -1},
		{"frac shorthand", "Answer: \\frac12", "\\frac{1}{2}", "\\frac{1}{2}", 1},
		{"sqrt shorthand", "Answer: \\sqrt3", "\\sqrt{3}", "\\sqrt{3}", 1},
		{"text unit", "Answer: 5 \\text{ cm}", "5", "5", 1},
		{"degrees", "Answer: 30^\\circ", "30", "30", 1},
		{"removed word", "Answer: 12 students", "12", "12", 1},
		{"decimal is not equal", "Answer: 0.5", "\\frac{1}{2}", "0.5", -1},
		{"leading zero kept", "Answer: 33", "033", "33", -1},
		{"article removed", "Answer: a triangle", "triangle", "triangle", 1},
		{"an removed", "Answer: an ellipse", "ellipse", "ellipse", 1},
		{"and becomes comma, digits lose commas", "Answer: 1\\text{and}2", "1,2", "12", 1},
		{"a digit list collapses", "Answer: 1, 2", "12", "12", 1},
		{"non-digit commas kept", "Answer: (1,2)", "(1, 2)", "(1,2)", 1},
		{"boxed greedy", "Answer: \\boxed{1}+\\boxed{2}", "1}+\\boxed{2", "1}+\\boxed{2", 1},
		{"dollar pair per line", "Answer: the value $7$ here", "7", "7", 1},
		{"empty truth matches empty", "Answer: ", "", "", 1},
		{"invalid equals invalid", "nothing", "[INVALID]", "[INVALID]", 1},
		{"superscript digits are digits", "Answer: 1,²", "1²", "1²", 1},
	}
	for _, c := range cases {
		r := DAPO{}.Score(c.resp, c.truth)
		if r.Pred != c.wantPred || r.Score != c.wantScore || r.Correct != (c.wantScore > 0) {
			t.Errorf("%s: DAPO.Score(%q, %q) = (%v, %q), want (%v, %q)", c.name, c.resp, c.truth, r.Score, r.Pred, c.wantScore, c.wantPred)
		}
	}
}

func TestNormalizeDAPO(t *testing.T) {
	cases := []struct{ in, want string }{
		{"x = 5", "5"},
		{"a=b=c", "c"},
		{"\\$18.90", "18.90"},
		{"10\\%", "10\\%"},
		{"\\text{(C)}", "(C)"},
		{"\\textbf{7}", "7"},
		{"\\overline{AB}", "AB"},
		{"\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"},
		{"\\fracab", "\\frac{a}{b}"},
		{"\\frac1{72}", "\\frac{1}{{}72}"},
		{"\\sqrtab", "\\sqrt{a}b"},
		{"11,\\! 111", "11111"},
		{"1{,}000", "1000"},
		{"  7  ", "7"},
		{"5 \\text{ inches}^2", "5"},
		{"\"quoted\"", "quoted"},
		{"$1$ and $2$", "1"},
		{"\\mbox{m}", ""},
	}
	for _, c := range cases {
		if got := NormalizeDAPO(c.in); got != c.want {
			t.Errorf("NormalizeDAPO(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestDAPOBraceArgs: the frac and sqrt fixes agree with the regular
// expressions they stand for (Go's regexp has Python's semantics for these:
// `.` stops at "\n", `[^{]` does not, matches are leftmost and disjoint), on
// chosen cases and on random strings of the pieces that matter.
func TestDAPOBraceArgs(t *testing.T) {
	frac := regexp.MustCompile(`(frac)([^{])(.)`)
	sqrt := regexp.MustCompile(`(sqrt)([^{])`)
	inputs := []string{"", "frac", "frac1", "frac12", "frac{1}{2}", "frac1\n", "frac\n1", "fracfrac12",
		"sqrt", "sqrt2", "sqrt{2}", "sqrt\n", "sqrtsqrt2", "fracé√", "frac\xff2", "ssqrt3 frac 12"}
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"frac", "sqrt", "fra", "{", "}", "\n", "1", "é", "\xff", " "}
	for range 2000 {
		var b strings.Builder
		for range rng.IntN(8) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		inputs = append(inputs, b.String())
	}
	for _, a := range inputs {
		if got, want := dapoFixFrac(a), frac.ReplaceAllString(a, "frac{${2}}{${3}}"); got != want {
			t.Errorf("dapoFixFrac(%q) = %q, want %q", a, got, want)
		}
		if got, want := dapoFixSqrt(a), sqrt.ReplaceAllString(a, "sqrt{${2}}"); got != want {
			t.Errorf("dapoFixSqrt(%q) = %q, want %q", a, got, want)
		}
	}
}
