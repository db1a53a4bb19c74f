package reward

import (
	"testing"
	"time"
)

// FuzzScore feeds arbitrary (response, truth) pairs to every mode. It fails
// on a recovered panic, on a verdict that is not a valid reward, on a
// nondeterministic verdict, or on a call slower than a generous bound.
// Seeds: the shared examples, the adversarial set and a few malformed
// fragments.
func FuzzScore(f *testing.F) {
	for _, ex := range loadExamples(f) {
		f.Add(ex.Response, ex.GroundTruth)
	}
	for _, c := range adversarialCases() {
		if len(c.resp) < 10000 && len(c.truth) < 10000 {
			f.Add(c.resp, c.truth)
		}
	}
	for _, s := range []string{`\frac`, `\sqrt[`, `\left(`, `\begin{pmatrix}`, `^^`, `__`, `\boxed{`, `$`, `\{`,
		`1,000,00`, `(1,2]`, `\pm\pm`, `|||`, `\lfloor`, `x^{-1/0}`, "Answer:\n", "ſ", `\text{`, `0.\overline{3}`,
		`1\,000\,00`, `1{,}0{,}`, "1\u2009000,\\!", `12 34`, `1 \le x < 8 \ge`, `x > `, `(x, y) = (1,`, `a + b = 0`,
		`an`, `It is an`, `\text{a} the`} {
		f.Add("Answer: "+s, s)
		f.Add(`\boxed{`+s+`}`, "1")
	}
	scorers := []Scorer{NewSymbolic(stepsOnly()), DAPO{}, Boxed{}, GPQA{}}
	f.Fuzz(func(t *testing.T, resp, truth string) {
		for _, s := range scorers {
			start := time.Now()
			r := s.Score(resp, truth)
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("%s: %v for %q vs %q", s.Mode(), d, resp, truth)
			}
			if r.Status == StatusPanic {
				t.Fatalf("%s: panic on %q vs %q: %v", s.Mode(), resp, truth, r.Err)
			}
			switch s.Mode() {
			case ModeDAPO, ModeSymbolic:
				if r.Score != 1 && r.Score != -1 || r.Correct != (r.Score == 1) {
					t.Fatalf("%s: bad verdict %+v", s.Mode(), r)
				}
			default:
				if r.Score != 1 && r.Score != 0 || r.Correct != (r.Score == 1) {
					t.Fatalf("%s: bad verdict %+v", s.Mode(), r)
				}
			}
			if again := s.Score(resp, truth); again.Correct != r.Correct || again.Pred != r.Pred || again.Status != r.Status {
				t.Fatalf("%s: nondeterministic on %q vs %q: %+v then %+v", s.Mode(), resp, truth, r, again)
			}
		}
	})
}
