package reward

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"os"
	"testing"
)

// TestReferenceGolden checks the three reference modes against outputs of
// the reference Python scorers themselves (verl's math_dapo.py and math.py at
// the base commits of docs/algorithm.md §0, and the authors' gpqa_mc.py), recorded in
// testdata/reference_golden.jsonl.gz. Inputs: the 83 shared examples; every
// benchmark ground truth inside a response template, against itself or
// another truth; and random "token soup" built from the characters and
// commands the normalizations special-case (Unicode whitespace and digits,
// ſ, unbalanced braces, `\boxed `, `\text{ `, …), some padded past the
// 300-character window. "norm" records check normalize_final_answer and
// strip_string (including where strip_string raises) on every ground truth
// and on more soup.
//
// The file was produced by running those Python functions, unmodified, on
// the inputs above under CPython 3.11. The generator is
// scripts/reward_golden.py: it loads the scorers from a verl checkout and
// the authors' gpqa_mc.py (it contains none of their code) and re-scores
// the recorded inputs (or builds fresh ones, --inputs fresh):
//
//	python3 scripts/reward_golden.py --verl /tmp/verl --gpqa PATH/gpqa_mc.py [--check]
func TestReferenceGolden(t *testing.T) {
	f, err := os.Open("testdata/reference_golden.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var scores, norms, failures int
	for line := 1; sc.Scan(); line++ {
		var r struct {
			Kind        string  `json:"kind"`
			Response    string  `json:"response"`
			Truth       string  `json:"truth"`
			DAPOScore   float64 `json:"dapo_score"`
			DAPOPred    string  `json:"dapo_pred"`
			BoxedScore  float64 `json:"boxed_score"`
			GPQAScore   float64 `json:"gpqa_score"`
			GPQAPred    string  `json:"gpqa_pred"`
			In          string  `json:"in"`
			DAPO        string  `json:"dapo"`
			Strip       string  `json:"strip"`
			StripRaises bool    `json:"strip_raises"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %d: %v", line, err)
		}
		fail := func(format string, args ...any) {
			failures++
			if failures <= 30 {
				t.Errorf("line %d: "+format, append([]any{line}, args...)...)
			}
		}
		switch r.Kind {
		case "score":
			scores++
			d := DAPO{}.Score(r.Response, r.Truth)
			if d.Score != r.DAPOScore || d.Pred != r.DAPOPred {
				fail("dapo(%q, %q) = %v %q, want %v %q", r.Response, r.Truth, d.Score, d.Pred, r.DAPOScore, r.DAPOPred)
			}
			if b := (Boxed{}).Score(r.Response, r.Truth); b.Score != r.BoxedScore {
				fail("boxed(%q, %q) = %v, want %v", r.Response, r.Truth, b.Score, r.BoxedScore)
			}
			g := GPQA{}.Score(r.Response, r.Truth)
			if g.Score != r.GPQAScore || g.Pred != r.GPQAPred {
				fail("gpqa(%q, %q) = %v %q, want %v %q", r.Response, r.Truth, g.Score, g.Pred, r.GPQAScore, r.GPQAPred)
			}
		case "norm":
			norms++
			if got := NormalizeDAPO(r.In); got != r.DAPO {
				fail("NormalizeDAPO(%q) = %q, want %q", r.In, got, r.DAPO)
			}
			got, err := HendrycksStrip(r.In)
			if (err != nil) != r.StripRaises || (err == nil && got != r.Strip) {
				fail("HendrycksStrip(%q) = %q, %v; want %q, raises=%v", r.In, got, err, r.Strip, r.StripRaises)
			}
		default:
			t.Fatalf("line %d: unknown kind %q", line, r.Kind)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if scores < 3000 || norms < 2000 {
		t.Fatalf("golden file too small: %d score and %d norm records", scores, norms)
	}
	t.Logf("%d score records × 3 modes and %d normalization records agree with the Python reference", scores, norms)
}
