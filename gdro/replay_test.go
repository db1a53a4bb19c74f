package gdro

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
)

func loadTestConfig(t *testing.T, path string) Config {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig(data, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// testdata/trace_small.jsonl under testdata/replay_small.yaml, checked by hand:
//
// step 1: a, b never seen → bin 0, one class → n = 4, 4; multipliers 1.
// a's first 4 rollouts have 3 correct, b's (rewards −1 ×4) none:
// S_0 = 1 − 3/8 = 0.625; class 0's variance v̄_0 = (0.25 + 0)/2 = 0.125.
//
// step 2: a (acc 1) → bin 1, b, c → bin 0. Class 1 is unobserved (flat),
// class 0 reads its pooled 4·0.125·(1 − 4/a) = 0.5·(1 − 4/a) for every arm,
// so the joint-probability DP (2·n_0 + n_1 = 12, n_1 ∈ [2, 6]) gives
// n_0 = 5, n_1 = 2. Best responses 4 and 6 → v = 4/3 + 4 − 4 = 4/3,
// μ → 0.05·4/3. Prompt-GDRO: p_0 =
// 0.99·e^{0.40625}/(e^{0.40625} + 1) + 0.005, p_1 the rest, multipliers p·12/(10p_0 + 2p_1).
// Then S_0 = 0.88·0.625 + 0.12·0.8 = 0.646, S_1 = 1 − 1/2 = 0.5.
//
// step 3: c and a both have acc 1 → bin 1 → n = 4, 4. Class 1 reads its
// pooled 4·0.5·(1 − 4/a) (a's two rollouts split): its best response is 6
// (2·(1 − 4/6) − 2μ beats 5 and every smaller arm) → v = 2.
func TestReplaySmallTrace(t *testing.T) {
	cfg := loadTestConfig(t, "testdata/replay_small.yaml")
	f, err := os.Open("testdata/trace_small.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out bytes.Buffer
	sum, err := Replay(cfg, f, &out)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Steps != 3 || sum.Prompts != 7 || sum.Rows != 28 {
		t.Fatalf("summary %+v", sum)
	}
	var recs []ReplayRecord
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var r ReplayRecord
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	e := math.Exp(0.65 * 0.625)
	p0, p1 := 0.99*e/(e+1)+0.005, 0.99/(e+1)+0.005
	tot := 10*p0 + 2*p1
	for i, w := range []struct {
		bins, n   []int
		mult      []float64
		score     []float64
		mu, viol  float64
		binWeight []float64
	}{
		{[]int{0, 0}, []int{4, 4}, []float64{1, 1}, []float64{0.625, 0}, 0, 0, []float64{1, 0}},
		{[]int{1, 0, 0}, []int{2, 5, 5}, []float64{12 * p1 / tot, 12 * p0 / tot, 12 * p0 / tot}, []float64{0.646, 0.5}, 0, 4.0 / 3, []float64{p0, p1}},
		{[]int{1, 1}, []int{4, 4}, []float64{1, 1}, []float64{0.646, 0.5}, 0.05 * 4 / 3, 2, []float64{0, 1}},
	} {
		r := recs[i]
		if !slices.Equal(r.PromptBin, w.bins) || !slices.Equal(r.PromptN, w.n) {
			t.Errorf("step %d: bins %v n %v, want %v %v", i+1, r.PromptBin, r.PromptN, w.bins, w.n)
		}
		checkSlice(t, "multipliers", r.PromptMult, w.mult, 1e-12)
		checkSlice(t, "scores", r.BinScore, w.score, 1e-12)
		checkSlice(t, "bin weights", r.BinWeight, w.binWeight, 1e-12)
		checkClose(t, "mu", r.Mu, w.mu, 1e-15)
		checkClose(t, "violation", r.Violation, w.viol, 1e-12)
	}
	checkClose(t, "final mu", sum.MuFinal, 0.05*4/3+0.1, 1e-12)
}

func TestReplayMalformed(t *testing.T) {
	cfg := loadTestConfig(t, "testdata/replay_small.yaml")
	good := `{"prompts": [{"uid": "a", "correct": [true, false, true, false, true, true]}]}`
	surrogate := cfg
	surrogate.Prompt.Signal = SignalSurrogate
	kl := cfg
	kl.Prompt.Signal = SignalSurrogateKL
	for _, c := range []struct {
		name  string
		cfg   Config
		trace string
		want  string
	}{
		{"bad JSON", cfg, good + "\n{\"prompts\": [\n", "trace line 2"},
		{"unknown field", cfg, `{"prompts": [{"uid": "a", "corect": [true]}]}`, `line 1: json: unknown field "corect"`},
		{"no prompts", cfg, `{"step": 1, "prompts": []}`, "line 1: no prompts"},
		{"missing uid", cfg, `{"prompts": [{"correct": [true]}]}`, "prompts[0]: missing uid"},
		{"duplicate uid", cfg, `{"prompts": [` + good[13:len(good)-2] + `, ` + good[13:len(good)-2] + `]}`, "prompts[1]: uid a repeats prompts[0]"},
		{"no outcomes", cfg, `{"prompts": [{"uid": "a"}]}`, "needs correct or reward"},
		{"length mismatch", cfg, `{"prompts": [{"uid": "a", "correct": [true, false], "reward": [1]}]}`, "reward has 1 entries"},
		{"too few rollouts", cfg, `{"prompts": [{"uid": "a", "correct": [true, false, true]}]}`, "3 recorded rollouts, the allocation needs 4"},
		{"step order", cfg, `{"step": 2, ` + good[1:] + "\n" + `{"step": 2, ` + good[1:], "line 2: step 2 does not increase"},
		{"missing loss", surrogate, good, "missing loss"},
		{"missing kl", kl, `{"prompts": [{"uid": "a", "correct": [true, false, true, false], "loss": [0, 0, 0, 0]}]}`, "missing kl"},
		{"wrong type", cfg, `{"prompts": [{"uid": 7, "correct": [true]}]}`, "line 1"},
		// An empty trace replayed nothing and used to succeed.
		{"empty", cfg, "", "the trace holds no step"},
		{"blank lines", cfg, "\n  \n", "the trace holds no step"},
	} {
		_, err := Replay(c.cfg, strings.NewReader(c.trace), &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.want)
		}
	}
	// a final line without newline and blank lines are fine
	if sum, err := Replay(cfg, strings.NewReader("\n"+good+"\n\n"+good), &bytes.Buffer{}); err != nil || sum.Steps != 2 {
		t.Errorf("blank lines / no final newline: %+v, %v", sum, err)
	}
}
