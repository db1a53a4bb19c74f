package reward

import (
	"strings"
	"testing"
)

func TestExtractAnswer(t *testing.T) {
	cases := []struct {
		resp, want, kind string
	}{
		{"work\nAnswer: 42", "42", "answer-line"},
		{"Answer: $42$.", "42", "answer-line"},
		{"**Answer:** 42", "42", "answer-line"},
		{"**Answer**: 42", "42", "answer-line"},
		{"answer: \\(x+1\\)", "x+1", "answer-line"},
		{"Answer:\n\n42\n", "42", "answer-line"},
		{"Answer: 1251 students", "1251 students", "answer-line"},
		{"Answer: \\boxed{5}", "5", "boxed"},
		{"Answer: $\\boxed{}$", "", "boxed"},
		{"Answer: ", "", "answer-line"},
		{"The answers: 5", "", ""},
		{"\\boxed{3} then \\boxed{4}", "4", "boxed"},
		{"\\boxed{\\frac{1}{2}}", "\\frac{1}{2}", "boxed"},
		{"\\boxed{\\{1,2\\}}", "\\{1,2\\}", "boxed"},
		{"\\fbox{7}", "7", "boxed"},
		{"\\boxed 7$ and", "7", "boxed"},
		{"\\boxed{12", "", "boxed"},
		{"Answer: 5\n\\boxed{6}", "6", "boxed"},
		{"\\boxed{6}\nAnswer: 5", "5", "answer-line"},
		{"Therefore, the final answer is $\\boxed{116}$.", "116", "boxed"},
		{"The final answer is $7 \\times 10^{37}$. I hope it is correct.", "7 \\times 10^{37}", "final-answer-is"},
		{"Final Answer: The final answer is $9$. I hope it is correct.", "9", "final-answer-is"},
		{"The final answer is A.", "A", "final-answer-is"},
		{"The final answer is 1.25.", "1.25", "final-answer-is"},
		{"So the answer is \\(\\boxed{13536}\\).", "13536", "boxed"},
		{"The answer is: 12", "12", "final-answer-is"},
		{"Answer: 5\nThe answer is correct.", "5", "answer-line"},
		{"the final answer is $\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}$.", "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "final-answer-is"},
		{"Answer: $$\\frac{1}{2}$$", "\\frac{1}{2}", "answer-line"},
		{"Answer: \\[\n\\frac{1}{2}\n\\]", "\\frac{1}{2}", "answer-line"},
		{"Answer: x = 2 and $y = 3$", "x = 2 and y = 3", "answer-line"},
		{"Answer: \\$18.90", "18.90", "answer-line"},
		{"Answer: B or C", "B or C", "answer-line"},
		{"no marker at all, just 42", "", ""},
		{"", "", ""},
		{"Answer: \\frac{1}{2}\\,.", "\\frac{1}{2}", "answer-line"},
	}
	for _, c := range cases {
		got := ExtractAnswer(c.resp)
		if got.Answer != c.want || got.Kind != c.kind || got.Found != (c.kind != "") {
			t.Errorf("ExtractAnswer(%q) = %+v, want %q (%s)", c.resp, got, c.want, c.kind)
		}
	}
}

func TestExtractAnswerLongResponse(t *testing.T) {
	long := strings.Repeat("We compute step by step. ", 40000) // 1 MB
	if got := ExtractAnswer(long + "\nAnswer: 17"); got.Answer != "17" {
		t.Errorf("1 MB response: got %+v", got)
	}
	if got := ExtractAnswer("\\boxed{" + long); got.Answer != "" || !got.Found {
		t.Errorf("1 MB unclosed box: got %+v", got)
	}
}
