package trainer

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/checkpoint"
	"github.com/gdrotrain/gdrotrain/grpo"
	"github.com/gdrotrain/gdrotrain/internal/testinfra/testfix"
	"github.com/gdrotrain/gdrotrain/model"
)

// fixture writes a tiny model + tokenizer and a small synthetic task and
// returns a config for a 2-step run.
func fixture(t *testing.T) (Config, string) {
	t.Helper()
	task := testfix.TinyTask(t)
	cfg, err := LoadBytes(nil, "", append(task.Sets(), "validation.before_training=true", "run.name=r"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg, task.Dir
}

func runFixture(t *testing.T, cfg Config) string {
	t.Helper()
	tr, err := New(cfg, io.Discard, "")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if err := tr.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return tr.Dir
}

// readLines returns the JSON objects of a JSONL file.
func readLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// TestRunEndToEnd: a 2-step Prompt-GDRO run writes every artefact, and a
// second run with the same seed writes the same metrics (timings aside).
func TestRunEndToEnd(t *testing.T) {
	cfg, _ := fixture(t)
	dir := runFixture(t, cfg)
	met := readLines(t, filepath.Join(dir, "metrics.jsonl"))
	if len(met) != 2 {
		t.Fatalf("%d metrics lines, want 2", len(met))
	}
	for _, key := range []string{"reward_mean", "acc_mean", "kl", "grad_norm", "bin_share", "bin_weight", "mean_bin", "response_len_mean", "lr", "time_gen_s"} {
		if _, ok := met[1][key]; !ok {
			t.Errorf("metrics line has no %q: %v", key, met[1])
		}
	}
	if got := met[1]["optimizer_updates"].(float64); got != 4 {
		t.Errorf("optimizer updates %v, want 4 (2 steps × 2 mini-batches)", got)
	}
	val := readLines(t, filepath.Join(dir, "validation.jsonl"))
	if len(val) != 3 { // before training, after step 1, after step 2
		t.Fatalf("%d validation lines, want 3", len(val))
	}
	if _, err := os.Stat(filepath.Join(dir, "config.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, err := model.Load(cpu.NewBackend(), filepath.Join(dir, "checkpoints", checkpoint.Name(2))); err != nil {
		t.Fatalf("saved weights do not load: %v", err)
	}

	cfg.Run.Name = "again"
	again := readLines(t, filepath.Join(runFixture(t, cfg), "metrics.jsonl"))
	sameMetrics(t, met, again, "identical runs")
}

// sameMetrics fails t where two runs' metrics lines differ, timings aside.
func sameMetrics(t *testing.T, a, b []map[string]any, what string) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d and %d metrics lines", what, len(a), len(b))
	}
	for i := range a {
		for k, v := range a[i] {
			if strings.HasPrefix(k, "time_") || strings.HasSuffix(k, "_per_s") {
				continue
			}
			x, _ := json.Marshal(v)
			y, _ := json.Marshal(b[i][k])
			if string(x) != string(y) {
				t.Errorf("step %d %s differs between %s: %s vs %s", i+1, k, what, x, y)
			}
		}
	}
}

func TestBadInputs(t *testing.T) {
	cfg, dir := fixture(t)
	// A row without a ground truth names its file and row.
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte(`{"problem": "1+1=", "answer": "2", "id": "a"}`+"\n"+`{"problem": "2+2=", "answer": "", "id": "b"}`+"\n"), 0o644)
	c := cfg
	c.Data.Train = []string{bad}
	if _, err := New(c, io.Discard, ""); err == nil || !strings.Contains(err.Error(), "bad.jsonl") || !strings.Contains(err.Error(), "row 1") {
		t.Errorf("row without ground truth: %v", err)
	}
	// Missing model files.
	c = cfg
	c.Model.Path = filepath.Join(dir, "nowhere")
	if _, err := New(c, io.Discard, ""); err == nil || !strings.Contains(err.Error(), "nowhere") {
		t.Errorf("missing model: %v", err)
	}
	// A diverging run stops with a clear error instead of training on NaN.
	c = cfg
	c.Optim.LR = 1e30
	c.Optim.GradClip = 0
	c.Run.Name = "nan"
	tr, err := New(c, io.Discard, "")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	err = tr.Run(context.Background())
	if err == nil || !(strings.Contains(err.Error(), "NaN") || strings.Contains(err.Error(), "Inf") || strings.Contains(err.Error(), "non-finite")) {
		t.Errorf("diverging run: %v", err)
	}
}

// TestTrainingStepGradient checks the gradient of a whole micro-batch loss
// (dual-clip surrogate + KL, token-mean, GDRO weights, ratios away from 1 so
// every branch is live) against central finite differences on a tiny model.
func TestTrainingStepGradient(t *testing.T) {
	o := model.DefaultTiny()
	mc, _ := o.Config()
	b := cpu.NewBackend()
	m := &model.Model{Cfg: mc, B: b, P: model.RandomParams(b, mc, 9, 0.3, 0.2)}
	rng := rand.New(rand.NewPCG(1, 2))
	var rows []grpo.Row
	var seqs []model.Sequence
	for i := 0; i < 4; i++ {
		toks := make([]int32, 6+i)
		for k := range toks {
			toks[k] = int32(rng.IntN(mc.VocabSize))
		}
		seqs = append(seqs, model.Sequence{Tokens: toks, Start: 3})
	}
	p, err := m.Forward(seqs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range seqs {
		n := len(p.LogProbs[i])
		old, ref := make([]float32, n), make([]float32, n)
		for k := range old {
			old[k] = p.LogProbs[i][k] + float32(rng.NormFloat64()*0.3)
			ref[k] = p.LogProbs[i][k] + float32(rng.NormFloat64()*0.3)
		}
		rows = append(rows, grpo.Row{Old: old, Ref: ref, Adv: []float64{1.2, -0.7, 0.4, -1.5}[i], Weight: []float64{1, 2, 0.5, 1}[i]})
	}
	lc := grpo.DefaultLoss()
	lc.KLCoef = 0.1
	loss := func() float64 {
		p, err := m.Forward(seqs)
		if err != nil {
			t.Fatal(err)
		}
		rs := append([]grpo.Row(nil), rows...)
		for i := range rs {
			rs[i].LogProbs = p.LogProbs[i]
		}
		_, st := lc.MicroBatch(rs, 1)
		return st.Loss
	}
	rs := append([]grpo.Row(nil), rows...)
	for i := range rs {
		rs[i].LogProbs = p.LogProbs[i]
	}
	dl, st := lc.MicroBatch(rs, 1)
	if st.ClipCount == 0 || st.ClipCount == st.Tokens {
		t.Fatalf("want a mix of clipped and unclipped tokens, got %d of %d", st.ClipCount, st.Tokens)
	}
	grads := model.NewParams(b, mc)
	if err := m.Backward(p, dl, grads); err != nil {
		t.Fatal(err)
	}
	gn := grads.Named(mc)
	checked := 0
	for i, np := range m.P.Named(mc) {
		host := make([]float32, (*np.Ptr).Numel())
		b.Download(*np.Ptr, host)
		g := make([]float32, len(host))
		b.Download(*gn[i].Ptr, g)
		var maxG float64
		for _, v := range g {
			maxG = math.Max(maxG, math.Abs(float64(v)))
		}
		for probe := 0; probe < 3; probe++ {
			// Probe the largest-gradient entry and random ones.
			k := rng.IntN(len(host))
			if probe == 0 {
				for j, v := range g {
					if math.Abs(float64(v)) == maxG {
						k = j
					}
				}
			}
			const h = 1e-3
			orig := host[k]
			host[k] = orig + h
			b.Upload(*np.Ptr, host)
			lp := loss()
			host[k] = orig - h
			b.Upload(*np.Ptr, host)
			lm := loss()
			host[k] = orig
			b.Upload(*np.Ptr, host)
			fd := (lp - lm) / (2 * h)
			// The surrogate is piecewise smooth: a probe that crosses a clip
			// boundary is noisy, so compare against 3% of the tensor's
			// largest gradient (plus a float32 noise floor).
			if math.Abs(fd-float64(g[k])) > 0.03*maxG+2e-4 {
				t.Errorf("%s[%d]: backward %v, finite difference %v (max |g| %v)", np.Name, k, g[k], fd, maxG)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("nothing checked")
	}
}
