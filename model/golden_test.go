package model_test

// Golden test against an independent PyTorch Qwen3 (scripts/golden_qwen3.py,
// float64 from float32 weights). Regenerate the fixture with
//
//	/usr/bin/python3 scripts/golden_qwen3.py model/testdata
//
// (Debian's python3-torch). Checks, for tied and untied embeddings: logits
// at every position, per-token log-probs, the objective J = Σ w·log π, every
// parameter gradient dJ/dθ, and three clipped AdamW steps (losses, gradient
// norms and the final parameters).

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/gdrotrain/gdrotrain/internal/numcheck"
	"github.com/gdrotrain/gdrotrain/model"
)

type golden struct {
	IDs       []int32     `json:"ids"`
	Logits    [][]float64 `json:"logits"`
	Sequences []struct {
		Tokens  []int32   `json:"tokens"`
		Start   int       `json:"start"`
		Weights []float64 `json:"weights"`
	} `json:"sequences"`
	LogProbs  [][]float64 `json:"logprobs"`
	Objective float64     `json:"objective"`
	AdamW     struct {
		LR, Beta1, Beta2, Eps, WeightDecay, Clip float64
		Steps                                    int
		Losses, GradNorms                        []float64
	} `json:"adamw"`
}

func (g *golden) UnmarshalJSON(b []byte) error {
	type plain golden
	var aux struct {
		plain
		AdamW struct {
			LR          float64   `json:"lr"`
			Beta1       float64   `json:"beta1"`
			Beta2       float64   `json:"beta2"`
			Eps         float64   `json:"eps"`
			WeightDecay float64   `json:"weight_decay"`
			Clip        float64   `json:"clip"`
			Steps       int       `json:"steps"`
			Losses      []float64 `json:"losses"`
			GradNorms   []float64 `json:"grad_norms"`
		} `json:"adamw"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*g = golden(aux.plain)
	a := aux.AdamW
	g.AdamW.LR, g.AdamW.Beta1, g.AdamW.Beta2, g.AdamW.Eps = a.LR, a.Beta1, a.Beta2, a.Eps
	g.AdamW.WeightDecay, g.AdamW.Clip, g.AdamW.Steps = a.WeightDecay, a.Clip, a.Steps
	g.AdamW.Losses, g.AdamW.GradNorms = a.Losses, a.GradNorms
	return nil
}

func loadGolden(t *testing.T, dir string) (*model.Model, *golden) {
	t.Helper()
	m, err := model.Load(model.NewCPU(), dir)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	return m, &g
}

// readAll reads every tensor of a safetensors file into host slices.
func readAll(t *testing.T, path string) map[string][]float32 {
	t.Helper()
	f, err := model.OpenSafetensors(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]float32{}
	for name, ti := range f.Tensors {
		buf := make([]float32, ti.Numel())
		if err := f.ReadFloat32(name, buf); err != nil {
			t.Fatal(err)
		}
		out[name] = buf
	}
	return out
}

func flatten(rows [][]float64) []float64 {
	var out []float64
	for _, r := range rows {
		out = append(out, r...)
	}
	return out
}

// Logit tolerance: the bar, max relative error 1e-4 in float32,
// with atol 1e-5 for logits near zero.
var logitTol = numcheck.Tol{Atol: 1e-5, Rtol: 1e-4}

func TestGoldenPyTorch(t *testing.T) {
	for _, name := range []string{"qwen3_tiny_untied", "qwen3_tiny_tied"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("testdata", name)
			m, g := loadGolden(t, dir)

			logits, err := m.Logits(g.IDs)
			if err != nil {
				t.Fatal(err)
			}
			var got []float32
			for _, r := range logits {
				got = append(got, r...)
			}
			st, err := numcheck.Compare(got, flatten(g.Logits), logitTol)
			if err != nil {
				t.Fatalf("logits: %v", err)
			}
			t.Logf("logits: max abs %.2g, max rel %.2g", st.MaxAbs, st.MaxRel)

			var seqs []model.Sequence
			var w [][]float32
			for _, s := range g.Sequences {
				seqs = append(seqs, model.Sequence{Tokens: s.Tokens, Start: s.Start})
				row := make([]float32, len(s.Weights))
				for i, v := range s.Weights {
					row[i] = float32(v)
				}
				w = append(w, row)
			}
			p, err := m.Forward(seqs)
			if err != nil {
				t.Fatal(err)
			}
			var lp []float32
			for _, r := range p.LogProbs {
				lp = append(lp, r...)
			}
			if _, err := numcheck.Compare(lp, flatten(g.LogProbs), logitTol); err != nil {
				t.Fatalf("log-probs: %v", err)
			}

			grads := model.NewParams(m.B, m.Cfg)
			if err := m.Backward(p, w, grads); err != nil {
				t.Fatal(err)
			}
			want := readAll(t, filepath.Join(dir, "grads.safetensors"))
			// Gradients go through two more float32 passes than the logits;
			// atol 1e-5 covers near-zero entries, rtol 1e-3 the rest.
			gradTol := numcheck.Tol{Atol: 1e-5, Rtol: 1e-3}
			grads.Each(m.Cfg, func(name string, gt *model.Tensor) {
				host := make([]float32, gt.Numel())
				m.B.Download(gt, host)
				if _, err := numcheck.Compare(host, want[name], gradTol); err != nil {
					t.Errorf("gradient %s: %v", name, err)
				}
			})
			checkAdamW(t, m, g, seqs, w, filepath.Join(dir, "adamw.safetensors"))
		})
	}
}

// checkAdamW replays the fixture's optimizer steps on loss = −J.
func checkAdamW(t *testing.T, m *model.Model, g *golden, seqs []model.Sequence, w [][]float32, path string) {
	a := g.AdamW
	opt := model.NewOptimizer(m.B, m.Cfg, model.AdamWConfig{LR: a.LR, Beta1: a.Beta1, Beta2: a.Beta2, Eps: a.Eps, WeightDecay: a.WeightDecay})
	neg := make([][]float32, len(w))
	for i := range w {
		neg[i] = make([]float32, len(w[i]))
		for k, v := range w[i] {
			neg[i][k] = -v
		}
	}
	grads := model.NewParams(m.B, m.Cfg)
	var losses, norms []float64
	for step := 0; step < a.Steps; step++ {
		p, err := m.Forward(seqs)
		if err != nil {
			t.Fatal(err)
		}
		var loss float64
		for i := range w {
			for k, v := range neg[i] {
				loss += float64(v) * float64(p.LogProbs[i][k])
			}
		}
		model.ZeroGrads(m.B, m.Cfg, grads)
		if err := m.Backward(p, neg, grads); err != nil {
			t.Fatal(err)
		}
		norm, err := model.ClipGradNorm(m.B, m.Cfg, grads, a.Clip)
		if err != nil {
			t.Fatal(err)
		}
		if err := opt.Update(m.B, m.Cfg, m.P, grads, a.LR); err != nil {
			t.Fatal(err)
		}
		losses, norms = append(losses, loss), append(norms, norm)
	}
	if _, err := numcheck.Compare(losses, a.Losses, numcheck.Tol{Atol: 1e-5, Rtol: 1e-4}); err != nil {
		t.Errorf("adamw losses: %v", err)
	}
	if _, err := numcheck.Compare(norms, a.GradNorms, numcheck.Tol{Atol: 1e-5, Rtol: 1e-4}); err != nil {
		t.Errorf("adamw grad norms: %v", err)
	}
	want := readAll(t, path)
	// Adam normalises each gradient entry, so an entry whose gradient is
	// tiny still moves by ≈ lr and float32 noise in that gradient shows up
	// in the update. Observed max abs error ≤ 1e-4 (lr 1e-2, 3 steps);
	// atol 2e-4 leaves headroom without hiding a wrong step (≈ lr = 1e-2).
	tol := numcheck.Tol{Atol: 2e-4, Rtol: 1e-4}
	m.P.Each(m.Cfg, func(name string, pt *model.Tensor) {
		host := make([]float32, pt.Numel())
		m.B.Download(pt, host)
		if st, err := numcheck.Compare(host, want[name], tol); err != nil {
			t.Errorf("parameter %s after %d AdamW steps: %v", name, a.Steps, err)
		} else if st.MaxAbs > 1e-4 {
			t.Logf("parameter %s after AdamW: max abs %.2g", name, st.MaxAbs)
		}
	})
}
