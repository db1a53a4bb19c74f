package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/gdrotrain/gdrotrain/configs"
	"github.com/gdrotrain/gdrotrain/synth"
	"github.com/gdrotrain/gdrotrain/trainer"
)

// tiny is a demo that finishes in seconds: 2 problems per group in the
// warm-up and GRPO sets, 1 held out, one warm-up epoch, one GRPO step of 4
// prompts, one validation sample.
func tiny(t *testing.T) Options {
	o := Default()
	o.Out = filepath.Join(t.TempDir(), "demo")
	o.Sets = []string{"demo.task.rl_per_group=2", "demo.task.heldout_per_group=1", "demo.task.warmup_per_group=2",
		"demo.warmup.epochs=1", "train.steps=1", "train.prompts_per_step=4", "train.mini_batch_prompts=4", "validation.n=1"}
	return o
}

func nolog(string, ...any) {}

func settings(t *testing.T, o Options) Settings {
	t.Helper()
	s, err := LoadSettings(o.Sets)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSettingsInDemoYAML: configs/demo.yaml's demo: section names every
// setting (nothing falls back to a value in Go), validates, and demo.*
// overrides reach it while unknown or invalid keys are named.
func TestSettingsInDemoYAML(t *testing.T) {
	raw, err := configs.Get("demo")
	if err != nil {
		t.Fatal(err)
	}
	run, sec, err := split(raw)
	if err != nil {
		t.Fatal(err)
	}
	var inFile map[string]any
	if err := yaml.Unmarshal(sec, &inFile); err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	all, _ := yaml.Marshal(Settings{})
	if err := yaml.Unmarshal(all, &fields); err != nil {
		t.Fatal(err)
	}
	for section, v := range fields {
		keys, nested := v.(map[string]any)
		if !nested { // a top-level setting (demo.compare)
			if _, ok := inFile[section]; !ok {
				t.Errorf("configs/demo.yaml does not set demo.%s", section)
			}
			continue
		}
		sub, _ := inFile[section].(map[string]any)
		for k := range keys {
			if _, ok := sub[k]; !ok {
				t.Errorf("configs/demo.yaml does not set demo.%s.%s", section, k)
			}
		}
	}
	// the trainer reads the first document alone, whole: `train --config demo` works
	if _, err := trainer.LoadBytes(raw, "demo", []string{"model.path=m", "data.train=[t]"}); err != nil {
		t.Errorf("trainer.LoadBytes(configs/demo.yaml): %v", err)
	}
	var runKeys map[string]any
	if err := yaml.Unmarshal(run, &runKeys); err != nil || runKeys["demo"] != nil || runKeys["train"] == nil {
		t.Errorf("the trainer's document: keys %v, %v", runKeys, err)
	}
	for _, bad := range []string{"run: {seed: 1}\n", "run: {seed: 1}\n---\ndemo: {}\nextra: 1\n"} {
		if _, _, err := split([]byte(bad)); err == nil {
			t.Errorf("split(%q) accepted", bad)
		}
	}
	if _, err := LoadSettings(nil); err != nil {
		t.Errorf("configs/demo.yaml: %v", err)
	}
	s, err := LoadSettings([]string{"demo.model.layers=3", "demo.warmup.lr=0.01", "optim.lr=1"})
	if err != nil || s.Model.Layers != 3 || s.Warmup.LR != 0.01 {
		t.Errorf("overrides: %+v, %v", s, err)
	}
	for _, c := range []struct{ set, want string }{
		{"demo.model.layer=3", "field layer not found"},
		{"demo.task.rl_per_group=0", "demo.task.rl_per_group = 0"},
		{"demo.task.heldout_per_group=600", "900"},
		{"demo.model.heads=3", "demo.model"},
		{"demo.warmup.lr=0", "demo.warmup"},
	} {
		if _, err := LoadSettings([]string{c.set}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--set %s: error %v, want it to contain %q", c.set, err, c.want)
		}
	}
}

// TestTask: the task files hold the asked sizes, and the warm-up, GRPO and
// held-out sets are disjoint.
func TestTask(t *testing.T) {
	o := tiny(t)
	o.Sets = append(o.Sets, "demo.task.rl_per_group=3", "demo.task.warmup_per_group=5", "demo.task.heldout_per_group=4")
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		t.Fatal(err)
	}
	warm, trainPath, valPath, err := Task(o, settings(t, o), nolog)
	if err != nil {
		t.Fatal(err)
	}
	read := func(p string) []synth.Problem {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var out []synth.Problem
		for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			var p synth.Problem
			if err := json.Unmarshal([]byte(l), &p); err != nil {
				t.Fatal(err)
			}
			out = append(out, p)
		}
		return out
	}
	groups := len(synth.Groups)
	sets := map[string][]synth.Problem{"warm-up": warm, "GRPO": read(trainPath), "held-out": read(valPath)}
	for name, want := range map[string]int{"warm-up": 5, "GRPO": 3, "held-out": 4} {
		if len(sets[name]) != want*groups {
			t.Errorf("%s set has %d problems, want %d", name, len(sets[name]), want*groups)
		}
	}
	if got := read(filepath.Join(o.Out, "warmup.jsonl")); !reflect.DeepEqual(got, warm) {
		t.Error("warmup.jsonl differs from the warm-up problems")
	}
	seen := map[string]string{}
	for name, ps := range sets {
		for _, p := range ps {
			if other, ok := seen[p.Problem]; ok {
				t.Errorf("problem %q is in the %s and the %s sets", p.Problem, other, name)
			}
			seen[p.Problem] = name
		}
	}
}

// TestWarmReusable: a finished warm-up is reused only for the same seed and
// settings.
func TestWarmReusable(t *testing.T) {
	o := tiny(t)
	s := settings(t, o)
	dir := filepath.Join(o.Out, "model-warm")
	if ok, why := warmReusable(o, s, dir); ok || !strings.Contains(why, "no finished warm-up") {
		t.Errorf("empty folder: %v %q", ok, why)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	stamp, _ := json.Marshal(stampOf(o, s))
	if err := os.WriteFile(filepath.Join(dir, warmStampFile), stamp, 0o644); err != nil {
		t.Fatal(err)
	}
	if ok, _ := warmReusable(o, s, dir); !ok {
		t.Error("the same demo's warm-up is not reused")
	}
	s2 := s
	s2.Model.Hidden *= 2
	if ok, why := warmReusable(o, s2, dir); ok || !strings.Contains(why, "other demo settings") {
		t.Errorf("another model size: %v %q", ok, why)
	}
	o.Seed++
	if ok, why := warmReusable(o, s, dir); ok || !strings.Contains(why, "another --seed") {
		t.Errorf("another seed: %v %q", ok, why)
	}
}

// TestPairedChange: the change of mean@n and its paired standard error on a
// hand-computed case, and the errors.
func TestPairedChange(t *testing.T) {
	// n = 4: per-problem mean@4 before 0, .25, .5, 1; after .5, .25, 1, 1 →
	// changes .5, 0, .5, 0: mean .25, sample sd √(4·.0625/3) = .288675,
	// SE = .288675/2 = .144338
	c, err := PairedChange([]int{0, 1, 2, 4}, []int{2, 1, 4, 4}, 4)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		name      string
		got, want float64
	}{
		{"before", c.Before, 0.4375}, {"after", c.After, 0.6875}, {"delta", c.Delta, 0.25},
		{"se", c.SE, math.Sqrt(0.25/3) / 2}, {"z", c.Z(), 0.25 / (math.Sqrt(0.25/3) / 2)},
	} {
		if math.Abs(x.got-x.want) > 1e-12 {
			t.Errorf("%s = %v, want %v", x.name, x.got, x.want)
		}
	}
	if c.Problems != 4 {
		t.Errorf("problems %d", c.Problems)
	}
	if c, _ := PairedChange([]int{1, 2}, []int{1, 2}, 4); c.SE != 0 || c.Z() != 0 {
		t.Errorf("no change: %+v", c)
	}
	for _, bad := range [][2][]int{{{1}, {1, 2}}, {nil, nil}} {
		if _, err := PairedChange(bad[0], bad[1], 4); err == nil {
			t.Errorf("PairedChange(%v, %v) accepted", bad[0], bad[1])
		}
	}
}

// TestReport prints the first and the last validation per group with the
// paired standard errors, and refuses results it cannot pair.
func TestReport(t *testing.T) {
	dir := t.TempDir()
	path, held := filepath.Join(dir, "validation.jsonl"), filepath.Join(dir, "heldout.jsonl")
	if err := synth.WriteJSONL(held, []synth.Problem{
		{Problem: "1", DataSource: "synth/b"}, {Problem: "2", DataSource: "synth/a"},
		{Problem: "3", DataSource: "synth/b"}, {Problem: "4", DataSource: "synth/a"},
	}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, r := range []trainer.ValResult{
		{Step: 0, N: 4, Prompts: 4, WorstAcc: 0.125, PromptCorrect: []int{2, 0, 4, 1}},
		{Step: 5, N: 4, Prompts: 4, PromptCorrect: []int{0, 0, 0, 0}},
		{Step: 10, N: 4, Prompts: 4, WorstAcc: 0.5, PromptCorrect: []int{4, 2, 4, 2}},
	} {
		line, _ := json.Marshal(r)
		buf.Write(append(line, '\n'))
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := Report(&out, path, held, dir); err != nil {
		t.Fatal(err)
	}
	// a: 0→.5, .25→.5: changes .5, .25 (mean .375, SE .125); b: .5→1, 1→1:
	// .5, 0 (mean .25, SE .25); all: .5, .5, 0, .25 → mean .3125, SE .119682
	want := `
held-out accuracy (mean@4 over 4 problems never trained on)
group                step 0    step 10        change ± SE
synth/a               0.125      0.500    +0.375 ± 0.125
synth/b               0.750      1.000    +0.250 ± 0.250
all                   0.438      0.750    +0.312 ± 0.120
worst group           0.125      0.500
improvement: +0.312 = 2.6 standard errors (paired over the 4 problems: SE = sd of the per-problem change / √4)
run folder: ` + dir + "\n"
	if out.String() != want {
		t.Errorf("report:\n%s\nwant:\n%s", out.String(), want)
	}
	if err := os.WriteFile(path, buf.Bytes()[:bytes.IndexByte(buf.Bytes(), '\n')+1], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Report(&out, path, held, dir); err == nil || !strings.Contains(err.Error(), "before and after") {
		t.Errorf("one validation: %v", err)
	}
	short := filepath.Join(dir, "short.jsonl")
	if err := synth.WriteJSONL(short, []synth.Problem{{Problem: "1", DataSource: "synth/b"}}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Report(&out, path, short, dir); err == nil || !strings.Contains(err.Error(), "per-problem results") {
		t.Errorf("unpaired results: %v", err)
	}
}

// TestCompareReport: the GDRO run against the GRPO baseline at their last
// validations, paired per problem, by hand.
func TestCompareReport(t *testing.T) {
	dir := t.TempDir()
	held := filepath.Join(dir, "heldout.jsonl")
	if err := synth.WriteJSONL(held, []synth.Problem{
		{Problem: "1", DataSource: "synth/b"}, {Problem: "2", DataSource: "synth/a"},
		{Problem: "3", DataSource: "synth/b"}, {Problem: "4", DataSource: "synth/a"},
	}); err != nil {
		t.Fatal(err)
	}
	write := func(name string, rs ...trainer.ValResult) string {
		var buf bytes.Buffer
		for _, r := range rs {
			line, _ := json.Marshal(r)
			buf.Write(append(line, '\n'))
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	base := write("base.jsonl", trainer.ValResult{Step: 0, N: 4, PromptCorrect: []int{0, 0, 0, 0}},
		trainer.ValResult{Step: 10, N: 4, WorstAcc: 0.25, PromptCorrect: []int{2, 1, 4, 1}})
	gdro := write("gdro.jsonl", trainer.ValResult{Step: 0, N: 4, PromptCorrect: []int{0, 0, 0, 0}},
		trainer.ValResult{Step: 10, N: 4, WorstAcc: 0.5, PromptCorrect: []int{2, 2, 4, 2}})
	var out strings.Builder
	if err := CompareReport(&out, base, gdro, held, "prompt_gdro"); err != nil {
		t.Fatal(err)
	}
	// a: .25→.5 twice (differences .25, .25: mean .25, SE 0); b: .5→.5 and
	// 1→1 (0, 0); all: .25, .25, 0, 0 → mean .125, SE sd(.25,.25,0,0)/2 =
	// 0.144338/2 = 0.072169, 1.7 SE.
	want := `
prompt_gdro against GRPO (same warm-up, seed and prompts; held-out mean@4 at step 10)
group                  grpo  prompt_gdro   difference ± SE
synth/a               0.250        0.500    +0.250 ± 0.000
synth/b               0.750        0.750    +0.000 ± 0.000
all                   0.500        0.625    +0.125 ± 0.072
worst group           0.250        0.500
prompt_gdro − grpo: +0.125 = 1.7 standard errors (paired over the 4 problems)
`
	if out.String() != want {
		t.Errorf("compare report:\n%s\nwant:\n%s", out.String(), want)
	}
	short := write("short.jsonl", trainer.ValResult{Step: 5, N: 4, PromptCorrect: []int{0, 0, 0, 0}})
	if err := CompareReport(&out, base, short, held, "prompt_gdro"); err == nil || !strings.Contains(err.Error(), "do not pair") {
		t.Errorf("runs ending at different steps: %v", err)
	}
}

func TestShortLibrary(t *testing.T) {
	for in, want := range map[string]string{
		"OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Cooperlake MAX_THREADS=64, core Cooperlake (/usr/lib/x/libopenblasp-r0.3.21.so)":                                                                   "OpenBLAS 0.3.21, core Cooperlake",
		"OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY SkylakeX MAX_THREADS=64, core SkylakeX (set: the library picked Prescott on an AVX-512 CPU it does not know) (/usr/lib/x/libopenblasp-r0.3.21.so)": "OpenBLAS 0.3.21, core SkylakeX (set: the library picked Prescott on an AVX-512 CPU it does not know)",
		"OpenBLAS 0.3.21 DYNAMIC_ARCH Haswell, core Haswell (OPENBLAS_CORETYPE=Haswell, the user's setting) (/l.so)":                                                                                            "OpenBLAS 0.3.21, core Haswell (OPENBLAS_CORETYPE=Haswell, the user's setting)",
		"OpenBLAS /usr/lib/x/libopenblas.so.0":                   "OpenBLAS /usr/lib/x/libopenblas.so.0",
		"Go kernels (gonum Sgemm): no OpenBLAS found (dlopen …)": "Go kernels (no OpenBLAS)",
		"cuda": "cuda",
	} {
		if got := shortLibrary(in); got != want {
			t.Errorf("shortLibrary(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestConfig: the demo's files and seed fill the trainer's part of
// configs/demo.yaml, and Sets override it (demo.* keys are not the
// trainer's).
func TestConfig(t *testing.T) {
	o := tiny(t)
	o.Seed = 7
	cfg, err := Config(o, "w", "a b.jsonl", "v.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Model.Path != "w" || cfg.Data.Train[0] != "a b.jsonl" || cfg.Validation.Files[0] != "v.jsonl" || cfg.Run.OutDir != o.Out ||
		cfg.Run.Seed != 7 || cfg.Train.Steps != 1 || cfg.Train.Method != trainer.MethodPromptGDRO || cfg.Run.Device != "cpu" {
		t.Errorf("config: %+v", cfg)
	}
	o.Sets = append(o.Sets, "train.nope=1")
	if _, err := Config(o, "w", "a", "v"); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("unknown trainer key: %v", err)
	}
}

// TestRun: a tiny demo runs end to end and reports; --resume reuses its
// warm-up; a cancelled context during the warm-up is Stopped (exit 3).
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a tiny model")
	}
	o := tiny(t)
	var out, log bytes.Buffer
	if err := Run(context.Background(), o, &out, &log); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	for _, want := range []string{"held-out accuracy (mean@1 over 6 problems never trained on)", "worst group", "standard errors", "time: ",
		"prompt_gdro against GRPO", "prompt_gdro − grpo:", "machine: ", "matrix products: ", "GRPO baseline",
		"sampler/trainer mismatch over 1 steps", "precision.exact_logprobs off"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	for _, f := range []string{"warmup.jsonl", "train.jsonl", "heldout.jsonl", "model-init/config.json", "model-warm/" + warmStampFile, "grpo-prompt-gdro/metrics.jsonl",
		"grpo-prompt-gdro/tb", BaselineRun + "/metrics.jsonl"} {
		if _, err := os.Stat(filepath.Join(o.Out, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	o.Resume = true
	log.Reset()
	if err := Run(context.Background(), o, &out, &log); err != nil || !strings.Contains(log.String(), "reusing the finished warm-up") {
		t.Errorf("--resume: %v\n%s", err, log.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o.Resume, o.Seed = false, 2
	err := Run(ctx, o, &out, &log)
	var stopped Stopped
	if !errors.As(err, &stopped) || !errors.Is(err, trainer.ErrStopped) || !strings.Contains(err.Error(), "during the warm-up") {
		t.Errorf("cancelled warm-up: %v", err)
	}
}

// TestRunExact: the demo in exact mode prints a mismatch of exactly 0.
func TestRunExact(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a tiny model")
	}
	o := tiny(t)
	o.Sets = append(o.Sets, "demo.compare=false", "precision.exact_logprobs=true")
	var out, log bytes.Buffer
	if err := Run(context.Background(), o, &out, &log); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	want := "sampler/trainer mismatch over 1 steps: max |Δ log-prob| 0, max KL 0 (precision.exact_logprobs on"
	if !strings.Contains(out.String(), want) {
		t.Errorf("report lacks %q:\n%s", want, out.String())
	}
}

// TestMismatchReport: the worst step's figures, steps without them
// skipped, a bad line named.
func TestMismatchReport(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		lines, want string
	}{
		{`{"step":1,"mismatch_logp_abs_max":2e-6,"mismatch_kl":1e-12}` + "\n" + `{"step":2}` + "\n" + `{"step":3,"mismatch_logp_abs_max":5e-6,"mismatch_kl":3e-13}` + "\n",
			"over 2 steps: max |Δ log-prob| 5e-06, max KL 1e-12 (precision.exact_logprobs off"},
		{`{"step":1}` + "\n", "not measured"},
		{"{\n", "metrics.jsonl line 1"},
	} {
		path := filepath.Join(dir, "metrics.jsonl")
		if err := os.WriteFile(path, []byte(c.lines), 0o644); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		err := MismatchReport(&out, path, false)
		if got := out.String() + errString(err); !strings.Contains(got, c.want) {
			t.Errorf("%q: got %q, want %q", c.lines, got, c.want)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
