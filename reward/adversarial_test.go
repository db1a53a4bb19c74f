package reward

import (
	"strings"
	"testing"
	"time"
)

type adversarialCase struct {
	name, resp, truth string
}

// adversarialCases are inputs built to make a verifier hang, blow up memory
// or panic. BenchmarkScoreAdversarial reports the worst single-call time.
func adversarialCases() []adversarialCase {
	mb := strings.Repeat("We compute step by step; nothing to see. ", 25600) // ~1 MB
	deepParens := strings.Repeat("(", 2000) + "1" + strings.Repeat(")", 2000)
	deepBraces := strings.Repeat("{", 2000) + "1" + strings.Repeat("}", 2000)
	deepFrac := strings.Repeat(`\frac{1}{`, 400) + "2" + strings.Repeat("}", 400)
	deepSqrt := strings.Repeat(`\sqrt{`, 60) + "2" + strings.Repeat("}", 60)
	longSum := strings.TrimSuffix(strings.Repeat("1+", 1500), "+")
	bigSet := func(n, off int) string {
		var b strings.Builder
		b.WriteString(`\{`)
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString("x^{" + itoa(i+off) + "}")
		}
		b.WriteString(`\}`)
		return b.String()
	}
	pmChain := "1" + strings.Repeat(`\pm 1`, 40)
	bigMatrix := func(n int) string {
		row := strings.TrimSuffix(strings.Repeat("1 & ", n), " & ")
		return `\begin{pmatrix}` + strings.TrimSuffix(strings.Repeat(row+`\\`, n), `\\`) + `\end{pmatrix}`
	}
	vars := strings.Join(strings.Split("abcdfghjklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", ""), "+")
	return []adversarialCase{
		{"tower 10^10^10", `\boxed{10^{10^{10}}}`, `10^{10^{10}}+1`},
		{"tower 2^2^2^2^2^2", `\boxed{2^{2^{2^{2^{2^{2}}}}}}`, "3"},
		{"exponent 2^62", `\boxed{2^{2^{62}}}`, `2^{2^{62}}+1`},
		{"exponent near int64 limit", `\boxed{x^{4611686018427387904} + 3^{-9223372036854775808}}`, "x"},
		{"huge power of a fraction", `\boxed{(1+10^{-100})^{10^{100}}}`, "e"},
		{"negative tower", `\boxed{10^{-10^{10}}}`, "0"},
		{"variable to a huge power", `\boxed{x^{10^{6}} + y^{3^{40}}}`, "x"},
		{"power tower of variables", `\boxed{x^{x^{x^{x^{x^{x}}}}}}`, "x^{x^{x^{x^{x^{x}}}}}+1"},
		{"factorial of a million", `\boxed{9999999!}`, "1"},
		{"factorial of a tower", `\boxed{(10^{4000})!}`, "1"},
		{"huge binomial", `\boxed{\binom{10^9}{5 \cdot 10^8}}`, "1"},
		{"binomial of a variable", `\boxed{\binom{n}{4999}}`, `\binom{n}{4998}`},
		{"4000-digit literal", `\boxed{1` + strings.Repeat("0", 4000) + `}`, "1" + strings.Repeat("0", 3999) + "1"},
		{"huge e-notation", `\boxed{1e999999999}`, "1e999999998"},
		{"high root", `\boxed{\sqrt[1000000]{2}}`, `\sqrt[64]{2^{64}}`},
		{"nested roots", `\boxed{` + deepSqrt + `}`, "1"},
		{"deep parentheses", `\boxed{` + deepParens + `}`, "1"},
		{"deep braces", `\boxed{` + deepBraces + `}`, "1"},
		{"deep fractions", `\boxed{` + deepFrac + `}`, "1"},
		{"long sum", "Answer: " + longSum, "1500"},
		{"plus-minus chain", `\boxed{` + pmChain + `}`, "1"},
		{"big sets", `\boxed{` + bigSet(250, 0) + `}`, bigSet(250, 1)},
		{"big sets of big powers", `\boxed{` + bigSet(250, 1000) + `}`, bigSet(250, 1001)},
		{"big list of big numbers", `\boxed{` + strings.TrimSuffix(strings.Repeat("3^{999}+1,", 250), ",") + `}`,
			strings.TrimSuffix(strings.Repeat("3^{999}+2,", 250), ",")},
		{"big matrix", `\boxed{` + bigMatrix(40) + `}`, bigMatrix(40)},
		{"many variables", `\boxed{` + vars + `}`, vars + "+1"},
		{"1 MB, no answer", mb, "42"},
		{"1 MB, answer at end", mb + "\nAnswer: 42", "42"},
		{"1 MB of boxes", strings.Repeat(`\boxed{`, 150000), "1"},
		{"1 MB of answer lines", strings.Repeat("Answer: 1\n", 100000), "1"},
		{"1 MB of answer is", strings.Repeat("the answer is ", 75000), "1"},
		{"1 MB answer line", "Answer: " + strings.Repeat("1+", 500000) + "1", "1"},
		{"1 MB truth", "Answer: 1", strings.Repeat("1+", 500000) + "1"},
		{"unbalanced", `\boxed{\frac{1}{2}`, `\frac{1}{2}`},
		{"unclosed left", `\boxed{\left( 1, 2}`, "(1,2)"},
		{"unclosed matrix", `\boxed{\begin{pmatrix} 1 & 2}`, "1"},
		{"malformed mix", `Answer: \frac{\sqrt[}{]}^^__{{}}\left\right)(][`, `\frac{}{}`},
		{"stray commands", `Answer: \end{pmatrix} \right) \\ & \\ \cup \cup`, "1"},
		{"division by zero", `\boxed{\frac{1}{0}}`, `\frac{1}{0}`},
		{"zero to the zero", `\boxed{0^0}`, "1"},
		{"log of zero", `\boxed{\log_0 0 + \ln 0}`, "0"},
		{"nan-making", `\boxed{\tan(\pi/2) - \tan(\pi/2)}`, "0"},
		{"invalid UTF-8", "Answer: \xff\xfe\xfd 1", "1"},
		{"NUL bytes", "Answer: 1\x00\x00", "1"},
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for i > 0 {
		b = append([]byte{byte('0' + i%10)}, b...)
		i /= 10
	}
	return string(b)
}

// TestAdversarialBounded: every adversarial input returns, without a
// panic, well inside a generous bound, in every mode. (Speed goals are
// measured by BenchmarkScoreAdversarial, not asserted here.)
func TestAdversarialBounded(t *testing.T) {
	scorers := []Scorer{NewSymbolic(DefaultBudget()), DAPO{}, Boxed{}, GPQA{}}
	for _, c := range adversarialCases() {
		for _, s := range scorers {
			start := time.Now()
			r := s.Score(c.resp, c.truth)
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("%s/%s: took %v", s.Mode(), c.name, d)
			}
			if r.Status == StatusPanic {
				t.Errorf("%s/%s: panic: %v", s.Mode(), c.name, r.Err)
			}
			if r.Correct && r.Status != StatusOK {
				t.Errorf("%s/%s: correct with status %v", s.Mode(), c.name, r.Status)
			}
		}
	}
}

// TestBudgetExhaustion: an answer that exhausts the budget scores as
// incorrect with StatusBudget and is counted by Metrics.
func TestBudgetExhaustion(t *testing.T) {
	var m Metrics
	s := Counted{NewSymbolic(DefaultBudget()), &m}
	deep := `\boxed{` + strings.Repeat("(", 500) + "1" + strings.Repeat(")", 500) + `}`
	r := s.Score(deep, "1")
	if r.Status != StatusBudget || r.Correct || r.Score != -1 || r.Err == nil {
		t.Fatalf("deep nesting: got %+v", r)
	}
	tight := Budget{Timeout: time.Second, MaxSteps: 50, MaxAnswerBytes: 4096, MaxBits: 8192, MaxDepth: 64, MaxItems: 256}
	r = Counted{NewSymbolic(tight), &m}.Score(`\boxed{(x+1)^2}`, "x^2+2x+1")
	if r.Status != StatusBudget || r.Correct {
		t.Fatalf("50-step budget: got %+v", r)
	}
	r = s.Score(`\boxed{3}`, "3")
	if !r.Correct {
		t.Fatalf("plain answer: got %+v", r)
	}
	snap := m.Snapshot()
	if snap.Calls != 3 || snap.Budget != 2 || snap.Correct != 1 || snap.Panics != 0 {
		t.Fatalf("metrics: got %+v", snap)
	}
}

// TestPanicRecovered: a panic inside a scorer becomes StatusPanic.
func TestPanicRecovered(t *testing.T) {
	var m Metrics
	r := Counted{panicky{}, &m}.Score("x", "y")
	if r.Status != StatusPanic || r.Correct || r.Score != -1 || r.Err == nil {
		t.Fatalf("got %+v", r)
	}
	if m.Snapshot().Panics != 1 {
		t.Fatalf("metrics: %+v", m.Snapshot())
	}
}

type panicky struct{}

func (panicky) Mode() Mode { return "panicky" }
func (panicky) Score(string, string) (res Result) {
	defer guard(&res, -1)
	var m map[string]int
	//lint:ignore SA5000 the runtime error is the point: guard must recover it
	m["boom"] = 1
	return res
}

// stepsOnly is the default budget without a practical deadline, for tests
// that compare verdicts across runs on a loaded machine.
func stepsOnly() Budget {
	b := DefaultBudget()
	b.Timeout = time.Hour
	return b
}

func TestBudgetDeterministic(t *testing.T) {
	s := NewSymbolic(stepsOnly())
	for _, c := range adversarialCases() {
		a, b := s.Score(c.resp, c.truth), s.Score(c.resp, c.truth)
		if a.Correct != b.Correct || a.Status != b.Status || a.Pred != b.Pred {
			t.Errorf("%s: two runs differ: %+v vs %+v", c.name, a, b)
		}
	}
}
