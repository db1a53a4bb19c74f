package reward

import "testing"

// Expected values were checked against the authors' gpqa_mc.py (docs/algorithm.md §3.4).
func TestGPQAScore(t *testing.T) {
	cases := []struct {
		resp, truth string
		pred        string
		want        float64
	}{
		{`\boxed{B}`, "B", "B", 1},
		{`\boxed{ b }`, "B", "B", 1},
		{`\BOXED{c}`, "C", "C", 1},
		{`Answer: $D$`, "D", "D", 1},
		{`Answer: almost`, "A", "A", 1},
		{"answer:\tC", "c", "C", 1},
		{`\boxed{A} Answer: B`, "B", "A", 0},
		{`Answer: B \boxed{C}`, "C", "C", 1},
		{`\boxed{E}`, "E", "", 0},
		{`Answer: E`, "E", "", 0},
		{`\boxed{(C)}`, "C", "", 0},
		{`The answer is C`, "C", "", 0},
		{"Answer:\nC", "C", "", 0},
		{`\boxed{B}`, " b\n", "B", 1},
		{`\boxed{A}\boxed{B}`, "B", "A", 0},
		{`anſwer: C`, "C", "C", 1},
	}
	for _, c := range cases {
		r := GPQA{}.Score(c.resp, c.truth)
		if r.Score != c.want || r.Pred != c.pred {
			t.Errorf("GPQA.Score(%q, %q) = %v %q, want %v %q", c.resp, c.truth, r.Score, r.Pred, c.want, c.pred)
		}
	}
	if l, ok := GPQATruth(2); !ok || l != "C" {
		t.Errorf("GPQATruth(2) = %q, %v", l, ok)
	}
	if _, ok := GPQATruth(4); ok {
		t.Error("GPQATruth(4) accepted")
	}
}

func TestReferenceMode(t *testing.T) {
	cases := []struct {
		source string
		want   Mode
		err    bool
	}{
		{"openai/gsm8k", "", true},
		{"Idavidrein/gpqa", ModeGPQA, false},
		{"HuggingFaceH4/MATH-500", ModeBoxed, false},
		{"lighteval/MATH", ModeBoxed, false},
		{"DigitalLearningGmbH/MATH-lighteval", ModeBoxed, false},
		{"open-r1/DAPO-Math-17k-Processed", ModeDAPO, false},
		{"math_dapo", ModeDAPO, false},
		{"HuggingFaceH4/aime_2024", ModeDAPO, false},
		{"MathArena/aime_2025", ModeDAPO, false},
		{"math-ai/amc23", ModeDAPO, false},
		{"math-ai/minervamath", ModeDAPO, false},
		{"math-ai/olympiadbench", ModeDAPO, false},
		{"math-ai/gpqa", ModeDAPO, false},
		{"aime_custom", ModeDAPO, false},
		{"my/AMC-2022", ModeDAPO, false},
		{"someone/GPQA-main", ModeDAPO, false},
		{"numina_olympiads", ModeDAPO, false},
		{"numina_cn_k12", "", true},
		{"codecontests", "", true},
		{"", "", true},
	}
	for _, c := range cases {
		m, err := ReferenceMode(c.source)
		if (err != nil) != c.err || m != c.want {
			t.Errorf("ReferenceMode(%q) = %q, %v; want %q, err=%v", c.source, m, err, c.want, c.err)
		}
		if s, err := ForDataSource(c.source); err == nil && s.Mode() != c.want {
			t.Errorf("ForDataSource(%q).Mode() = %q", c.source, s.Mode())
		}
	}
}
