package report

// fuzz_test.go: the report on degenerate runs (issue 44): nothing solved
// yet, everything solved, one step, one bin, no steps at all, NaN and ±Inf
// in the logged numbers. Build and every figure's drawing must neither
// panic nor draw an invalid SVG. FuzzReport explores the same space:
//
//	go test -run '^$' -fuzz '^FuzzReport$' -fuzztime 2m ./report/
//
// (make test runs it with a small count budget.) Failing inputs land in
// testdata/fuzz/FuzzReport and rerun with go test.

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// scalarKeys are the top-level numbers of a trainer metrics line that some
// figure reads.
var scalarKeys = []string{"acc", "acc_mean", "reward_mean", "response_len_mean", "truncation_rate", "kl", "ppo_kl",
	"entropy", "clip_frac", "lower_clip_frac", "grad_norm", "gen_tokens_per_s", "train_tokens_per_s", "mean_bin", "dmu",
	"mu", "weight_entropy", "wse", "wse_uniform", "wse_ratio", "num_prompts", "is_weight_mean", "is_weight_min",
	"is_weight_max", "is_masked_frac", "mismatch_kl", "overlong_penalty_mean", "ds_rounds"}

// degenerate describes a generated run.
type degenerate struct {
	steps, bins int
	acc         float64 // every bin's accuracy (0: nothing solved yet)
	special     float64 // the value put where mask has a bit set
	mask        uint64  // bit i%64 set: the i-th number filled is special
	val         bool    // a validation.jsonl with one record per step
}

// run builds the Run LoadRun would return for such a metrics file (NaN and
// ±Inf cannot be written in JSON, but a Run from elsewhere can hold them).
func (d degenerate) run() *Run {
	r := &Run{Name: "degenerate"}
	for c := 0; c < d.bins; c++ {
		r.Labels = append(r.Labels, fmt.Sprintf("accbin_%d", c))
	}
	if d.bins > 2 {
		r.Labels[d.bins-1] = ExclLabel
	}
	i := 0
	num := func(v float64) float64 {
		defer func() { i++ }()
		if d.mask>>(uint(i)%64)&1 == 1 {
			return d.special
		}
		return v
	}
	for s := 1; s <= d.steps; s++ {
		rec := Record{Step: s, Method: "prompt+rollout", Labels: r.Labels, Arrays: map[string][]float64{},
			Scalars: map[string]float64{}, Flags: map[string]bool{"weights_applied": true}, HasFields: map[string]bool{},
			Arms: []float64{2, 4, 6, 8}}
		for _, k := range perClassKeys {
			a := make([]float64, d.bins)
			for c := range a {
				switch k {
				case "bin_acc":
					a[c] = num(d.acc)
				case "bin_share", "bin_weight":
					a[c] = num(1 / float64(d.bins))
				case "bin_count":
					a[c] = num(float64(1 + 8/d.bins))
				case "bin_n", "bin_n_mean", "bin_n_unconstrained":
					a[c] = num(float64(2 + 2*(c%4)))
				default:
					a[c] = num(float64(c) / float64(d.bins))
				}
			}
			rec.Arrays[k] = a
			rec.HasFields[k] = true
		}
		for j, k := range scalarKeys {
			rec.Scalars[k] = num(float64(j%5) * 0.25)
			rec.HasFields[k] = true
		}
		for _, k := range []string{"step", "method", "bin_labels", "arms", "weights_applied"} {
			rec.HasFields[k] = true
		}
		r.Records = append(r.Records, rec)
		if d.val {
			step, acc, pass, worst := s, num(d.acc), num(d.acc), num(d.acc)
			bench := func() *BenchRecord {
				m := num(d.acc)
				return &BenchRecord{Prompts: 4, MeanAcc: &m, PassAtK: map[string]float64{"1": num(d.acc), "8": num(d.acc)}}
			}
			r.Val = append(r.Val, ValRecord{Step: &step, N: 8, MeanAcc: &acc, PooledPass: &pass, WorstGroup: r.Labels[0],
				WorstAcc: &worst, Benchmarks: map[string]*BenchRecord{"aime24": bench(), "aime25": bench(), "math500": bench()},
				PromptCorrect: []int{0, 8 * int(math.Min(1, math.Max(0, d.acc))), 3}})
		}
	}
	return r
}

// checkReport builds the report of run and draws every figure into an
// SVG, which must be well-formed XML; a panic anywhere fails the caller.
func checkReport(t *testing.T, run *Run) *Report {
	t.Helper()
	rep := Build(run)
	seen := map[string]bool{}
	for _, f := range rep.Figures {
		if f.Name == "" || seen[f.Name] || !(f.Width > 0) || !(f.Height > 0) || f.draw == nil {
			t.Fatalf("figure %q: name repeated or empty, size %v × %v, or nothing to draw", f.Name, f.Width, f.Height)
		}
		seen[f.Name] = true
		svg := vgsvg.New(f.Width, f.Height)
		f.draw(draw.New(svg))
		var buf bytes.Buffer
		if _, err := svg.WriteTo(&buf); err != nil {
			t.Fatalf("figure %s: %v", f.Name, err)
		}
		if err := wellFormed(buf.Bytes()); err != nil {
			t.Fatalf("figure %s: SVG is not well-formed XML: %v", f.Name, err)
		}
	}
	if h := rep.HTML(); !strings.Contains(h, "</html>") {
		t.Fatalf("index.html is cut short: %d bytes", len(h))
	}
	if cmp, err := BuildCompare([]*Run{run, {Name: "other", Labels: run.Labels, Records: run.Records, Val: run.Val}}); err != nil {
		t.Fatalf("compare: %v", err)
	} else {
		for _, f := range cmp.Figures {
			svg := vgsvg.New(f.Width, f.Height)
			f.draw(draw.New(svg))
		}
	}
	return rep
}

// wellFormed reads b to the end as XML.
func wellFormed(b []byte) error {
	dec := xml.NewDecoder(bytes.NewReader(b))
	for {
		if _, err := dec.Token(); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// degenerateRuns are the cases of issue 44, FuzzReport's seeds.
var degenerateRuns = []struct {
	name string
	d    degenerate
}{
	{"nothing solved yet", degenerate{steps: 6, bins: 11, acc: 0}},
	{"nothing solved, with validation", degenerate{steps: 6, bins: 11, acc: 0, val: true}},
	{"everything solved", degenerate{steps: 6, bins: 11, acc: 1, val: true}},
	{"one step", degenerate{steps: 1, bins: 11, acc: 0.5, val: true}},
	{"one step, nothing solved", degenerate{steps: 1, bins: 11, acc: 0}},
	{"a single bin", degenerate{steps: 5, bins: 1, acc: 0.5, val: true}},
	{"a single bin, nothing solved", degenerate{steps: 5, bins: 1, acc: 0}},
	{"two bins", degenerate{steps: 3, bins: 2, acc: 0.25}},
	{"no steps", degenerate{steps: 0, bins: 11, acc: 0.5}},
	{"NaN everywhere", degenerate{steps: 4, bins: 11, acc: 0.5, special: math.NaN(), mask: ^uint64(0), val: true}},
	{"NaN here and there", degenerate{steps: 4, bins: 11, acc: 0.5, special: math.NaN(), mask: 0x8421_0842_1084_2108, val: true}},
	{"+Inf here and there", degenerate{steps: 4, bins: 11, acc: 0.5, special: math.Inf(1), mask: 0x1248_1248_1248_1248, val: true}},
	{"-Inf here and there", degenerate{steps: 4, bins: 11, acc: 0.5, special: math.Inf(-1), mask: 0x0f0f_0000_f0f0_0001, val: true}},
	{"negative numbers", degenerate{steps: 4, bins: 3, acc: -1, special: -5, mask: 0x5555_5555_5555_5555, val: true}},
	{"huge numbers", degenerate{steps: 3, bins: 4, acc: 0.5, special: 1e308, mask: 0xffff_0000_ffff_0000, val: true}},
}

// TestNoStepRecords: a run without records (LoadRun refuses one; a Run
// built otherwise may have none) gets a page that says why it has no
// figure. The other degenerate runs are FuzzReport's seeds, which go test
// runs.
func TestNoStepRecords(t *testing.T) {
	rep := checkReport(t, degenerate{steps: 0, bins: 11, acc: 0.5}.run())
	if len(rep.Figures) > 0 || len(rep.Skipped) == 0 || rep.Skipped[0].Reason != "the run has no step records" {
		t.Errorf("no steps: %d figures, skipped %+v", len(rep.Figures), rep.Skipped)
	}
}

// TestWSENothingSolved: the run of issue 44 (no rollout correct yet) has
// its WSE figure, whose caption says why the ratio panel is empty.
func TestWSENothingSolved(t *testing.T) {
	rep := checkReport(t, degenerate{steps: 6, bins: 11, acc: 0}.run())
	for _, f := range rep.Figures {
		if f.Name == "dyn_wse" {
			if !strings.Contains(f.Caption, "The ratio is undefined at every step") {
				t.Errorf("dyn_wse caption does not say why the ratio is missing: %q", f.Caption)
			}
			return
		}
	}
	t.Errorf("no dyn_wse figure; skipped: %+v", rep.Skipped)
}

// FuzzReport draws the report of generated runs of 0–15 steps and 1–12 bins
// with any accuracy and any special value in any of the logged numbers.
func FuzzReport(f *testing.F) {
	for _, c := range degenerateRuns {
		f.Add(uint8(c.d.steps), uint8(c.d.bins-1), c.d.acc, c.d.special, c.d.mask, c.d.val)
	}
	f.Fuzz(func(t *testing.T, steps, bins uint8, acc, special float64, mask uint64, val bool) {
		d := degenerate{steps: int(steps % 16), bins: 1 + int(bins%12), acc: acc, special: special, mask: mask, val: val}
		checkReport(t, d.run())
	})
}

// FuzzMetricsFile reads arbitrary bytes as a metrics.jsonl: LoadRun either
// refuses them with an error naming the file, or the run's report draws
// (seeds: a real three-step file, its first line, an empty file, a line
// without bins, a truncated line).
//
//	go test -run '^$' -fuzz '^FuzzMetricsFile$' -fuzztime 2m ./report/
func FuzzMetricsFile(f *testing.F) {
	raw, err := os.ReadFile(filepath.Join("testdata", "run3", MetricsFile))
	if err != nil {
		f.Fatal(err)
	}
	first, _, _ := bytes.Cut(raw, []byte("\n"))
	for _, seed := range [][]byte{raw, first, nil, []byte(`{"step": 1, "bin_labels": [], "bin_share": []}`), first[:len(first)/2],
		[]byte(`{"step": 2, "bin_labels": ["accbin_0"], "bin_share": [1], "bin_acc": [0], "bin_n_mean": [4]}` + "\n" +
			`{"step": 1, "bin_labels": ["accbin_0"], "bin_share": [1], "bin_acc": [0], "bin_n_mean": [4]}`)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), MetricsFile)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		run, err := LoadRun(path)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		checkReport(t, run)
	})
}
