// Package demo is `gdrotrain demo`: the whole pipeline on a tiny model with
// nothing to download. It writes a small Qwen3-style tokenizer and a random
// tiny Qwen3 model in the Hugging Face layout and loads them back through
// the normal loaders; generates the synthetic arithmetic task (package
// synth) with three disjoint sets — warm-up, GRPO and held-out problems;
// warms the model up with a short supervised phase; runs GRPO with
// Prompt-GDRO; and reports held-out accuracy per group before and after,
// with paired standard errors.
//
// Every hyperparameter is in configs/demo.yaml, in two YAML documents: the
// GRPO run's ordinary trainer config, then the demo: section with the
// model's size, the task's sizes and the warm-up (Settings). --set
// overrides either (demo.* keys go to Settings).
//
// Folder layout under Options.Out: warmup.jsonl, train.jsonl and
// heldout.jsonl (the task), model-init/ (the random model and tokenizer),
// model-warm/ (the warmed-up model, with demo-warmup.json recording what
// made it) and the GRPO run folder (run.name of the config,
// grpo-prompt-gdro).
package demo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/configs"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/optim"
	"github.com/gdrotrain/gdrotrain/synth"
	"github.com/gdrotrain/gdrotrain/tokenizer"
	"github.com/gdrotrain/gdrotrain/trainer"
)

// Options say where and how to run the demo; the hyperparameters are in
// configs/demo.yaml.
type Options struct {
	Out  string   // output folder
	Seed uint64   // seeds the model, the data and the run
	Sets []string // overrides of configs/demo.yaml (section.key=value; demo.* for Settings)
	// ReuseWarm reuses Out/model-warm without checking what made it.
	ReuseWarm bool
	// Resume reuses a finished warm-up of the same seed and settings and
	// resumes the GRPO run from its newest checkpoint.
	Resume bool
	// Backend opens run.device (nil: trainer.CPUOnly; demo.yaml says cpu).
	Backend trainer.BackendOpener
}

// Default returns the demo's default options.
func Default() Options { return Options{Out: filepath.Join("runs", "demo"), Seed: 1} }

// Settings are the demo's own hyperparameters: the demo: section, the
// second YAML document of configs/demo.yaml.
type Settings struct {
	Model  ModelSettings  `yaml:"model" json:"model"`
	Task   TaskSettings   `yaml:"task" json:"task"`
	Warmup WarmupSettings `yaml:"warmup" json:"warmup"`
	// Compare also trains plain GRPO from the same warm-up, seed and
	// prompts (run folder grpo-baseline) and reports the GDRO method
	// against it, paired per held-out problem: the paper's claim is GDRO
	// over GRPO, not RL over a warm-up. Ignored when train.method is grpo.
	Compare bool `yaml:"compare" json:"compare"`
}

// ModelSettings size the random tiny Qwen3 and its tokenizer.
type ModelSettings struct {
	Layers       int     `yaml:"layers" json:"layers"`
	Hidden       int     `yaml:"hidden" json:"hidden"`
	Intermediate int     `yaml:"intermediate" json:"intermediate"`
	Heads        int     `yaml:"heads" json:"heads"`
	KVHeads      int     `yaml:"kv_heads" json:"kv_heads"`
	HeadDim      int     `yaml:"head_dim" json:"head_dim"`
	Vocab        int     `yaml:"vocab" json:"vocab"` // the byte-level BPE tokenizer's size
	Tied         bool    `yaml:"tied_embeddings" json:"tied_embeddings"`
	RopeTheta    float64 `yaml:"rope_theta" json:"rope_theta"`
	MaxPositions int     `yaml:"max_positions" json:"max_positions"`
	InitStd      float64 `yaml:"init_std" json:"init_std"`
}

// TaskSettings size the three disjoint problem sets, per group.
type TaskSettings struct {
	WarmupPerGroup  int `yaml:"warmup_per_group" json:"warmup_per_group"`   // supervised warm-up
	RLPerGroup      int `yaml:"rl_per_group" json:"rl_per_group"`           // GRPO training prompts
	HeldoutPerGroup int `yaml:"heldout_per_group" json:"heldout_per_group"` // evaluation only
}

// WarmupSettings configure the supervised warm-up (SFT, AdamW).
type WarmupSettings struct {
	Epochs      int     `yaml:"epochs" json:"epochs"`
	BatchRows   int     `yaml:"batch_rows" json:"batch_rows"`
	LR          float64 `yaml:"lr" json:"lr"`
	Beta1       float64 `yaml:"beta1" json:"beta1"`
	Beta2       float64 `yaml:"beta2" json:"beta2"`
	Eps         float64 `yaml:"eps" json:"eps"`
	WeightDecay float64 `yaml:"weight_decay" json:"weight_decay"`
	GradClip    float64 `yaml:"grad_clip" json:"grad_clip"`
}

// Validate checks the settings, naming the key.
func (s Settings) Validate() error {
	var errs []error
	positive := func(key string, v int) {
		if v < 1 {
			errs = append(errs, fmt.Errorf("demo.%s = %d must be ≥ 1", key, v))
		}
	}
	positive("task.warmup_per_group", s.Task.WarmupPerGroup)
	positive("task.rl_per_group", s.Task.RLPerGroup)
	positive("task.heldout_per_group", s.Task.HeldoutPerGroup)
	positive("warmup.epochs", s.Warmup.Epochs)
	positive("warmup.batch_rows", s.Warmup.BatchRows)
	// mul-3x10 has 900 distinct problems and every set must be disjoint
	if n := s.Task.WarmupPerGroup + s.Task.RLPerGroup + s.Task.HeldoutPerGroup; n > 900 {
		errs = append(errs, fmt.Errorf("demo.task: %d problems per group in all; the smallest group has 900", n))
	}
	if w := s.Warmup; !(w.LR > 0) || !(w.Beta1 >= 0 && w.Beta1 < 1) || !(w.Beta2 >= 0 && w.Beta2 < 1) || !(w.Eps > 0) || !(w.WeightDecay >= 0) || !(w.GradClip >= 0) {
		errs = append(errs, fmt.Errorf("demo.warmup: lr %v and eps %v must be > 0, betas %v %v in [0, 1), weight_decay %v and grad_clip %v ≥ 0",
			w.LR, w.Eps, w.Beta1, w.Beta2, w.WeightDecay, w.GradClip))
	}
	if s.Model.Vocab < 300 {
		errs = append(errs, fmt.Errorf("demo.model.vocab = %d must be ≥ 300 (the tiny tokenizer's bytes and special tokens)", s.Model.Vocab))
	}
	if _, err := s.modelOptions(nil).Config(); err != nil {
		errs = append(errs, fmt.Errorf("demo.model: %w", err))
	}
	return errors.Join(errs...)
}

func (s Settings) modelOptions(eos []int) model.RandomOptions {
	m := s.Model
	return model.RandomOptions{Layers: m.Layers, Hidden: m.Hidden, Intermediate: m.Intermediate, Heads: m.Heads,
		KVHeads: m.KVHeads, HeadDim: m.HeadDim, Vocab: m.Vocab, Tied: m.Tied, RopeTheta: m.RopeTheta,
		MaxPositions: m.MaxPositions, EOS: eos, InitStd: m.InitStd}
}

// Stopped is a demo stopped by a signal (ctx cancelled). It is
// trainer.ErrStopped (the CLI exits with status 3) and its message says how
// to continue.
type Stopped struct{ msg string }

func (e Stopped) Error() string        { return e.msg }
func (e Stopped) Is(target error) bool { return target == trainer.ErrStopped }

// Run runs the demo: progress goes to logw, the final report to out.
func Run(ctx context.Context, o Options, out, logw io.Writer) error {
	start := time.Now()
	logf := func(format string, a ...any) { fmt.Fprintf(logw, format+"\n", a...) }
	s, err := LoadSettings(o.Sets)
	if err != nil {
		return err
	}
	warmDir := filepath.Join(o.Out, "model-warm")
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return err
	}
	warm, trainPath, valPath, err := Task(o, s, logf)
	if err != nil {
		return err
	}
	switch reuse, why := warmReusable(o, s, warmDir); {
	case o.ReuseWarm:
		logf("reusing the warmed-up model in %s", warmDir)
	case o.Resume && reuse:
		logf("--resume: reusing the finished warm-up in %s", warmDir)
	default:
		if o.Resume {
			logf("--resume: warming up again (%s)", why)
		}
		if err := WarmUp(ctx, o, s, warm, warmDir, logf); err != nil {
			if ctx.Err() != nil {
				return Stopped{"demo: stopped by a signal during the warm-up (nothing is kept from it); run `gdrotrain demo --resume` with the same flags to start again"}
			}
			return err
		}
	}
	warmTime := time.Since(start)
	cfg, err := Config(o, warmDir, trainPath, valPath)
	if err != nil {
		return err
	}
	main, err := train(ctx, cfg, o, logw)
	if err != nil {
		return err
	}
	mainTime := time.Since(start) - warmTime
	var base trained
	compare := s.Compare && cfg.Train.Method != trainer.MethodGRPO
	if compare {
		bo := o
		bo.Sets = append(append([]string{}, o.Sets...), "train.method="+trainer.MethodGRPO, "run.name="+BaselineRun)
		bcfg, err := Config(bo, warmDir, trainPath, valPath)
		if err != nil {
			return err
		}
		logf("the GRPO baseline: same warm-up, seed and prompts, train.method grpo (run folder %s)", bcfg.RunDir())
		if base, err = train(ctx, bcfg, o, logw); err != nil {
			return err
		}
	}
	total := time.Since(start)
	if err := Report(out, filepath.Join(main.dir, "validation.jsonl"), valPath, main.dir); err != nil {
		return err
	}
	if compare {
		if err := CompareReport(out, filepath.Join(base.dir, "validation.jsonl"), filepath.Join(main.dir, "validation.jsonl"),
			valPath, cfg.Train.Method); err != nil {
			return err
		}
	}
	if err := MismatchReport(out, filepath.Join(main.dir, "metrics.jsonl"), cfg.Precision.ExactLogProbs); err != nil {
		return err
	}
	fmt.Fprintf(out, "machine: %s; matrix products: %s\n", cpuModel(), main.library)
	if compare {
		fmt.Fprintf(out, "time: %s (warm-up %s, %s with validation %s, GRPO baseline %s)\n", round(total), round(warmTime),
			cfg.Train.Method, round(mainTime), round(total-warmTime-mainTime))
	} else {
		fmt.Fprintf(out, "time: %s (warm-up %s, %s with validation %s)\n", round(total), round(warmTime), cfg.Train.Method, round(mainTime))
	}
	return nil
}

// MismatchReport prints the run's sampler/trainer mismatch (metrics.jsonl's
// mismatch_logp_abs_max and mismatch_kl over its steps): exactly 0 with
// precision.exact_logprobs, a rounding's worth without (docs/algorithm.md
// §5.10). Steps without the figures (a sampler that does not draw from the
// policy) are skipped.
func MismatchReport(w io.Writer, metrics string, exact bool) error {
	f, err := os.Open(metrics)
	if err != nil {
		return err
	}
	defer f.Close()
	var absMax, klMax float64
	steps := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for line := 1; sc.Scan(); line++ {
		var m struct {
			AbsMax *float64 `json:"mismatch_logp_abs_max"`
			KL     *float64 `json:"mismatch_kl"`
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			return fmt.Errorf("%s line %d: %w", metrics, line, err)
		}
		if m.AbsMax == nil || m.KL == nil {
			continue
		}
		steps++
		absMax, klMax = math.Max(absMax, *m.AbsMax), math.Max(klMax, *m.KL)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", metrics, err)
	}
	mode := "off: the trainer recomputes π_old"
	if exact {
		mode = "on: the sampler's log-probs are π_old"
	}
	if steps == 0 {
		fmt.Fprintf(w, "sampler/trainer mismatch: not measured (the sampler does not draw from the policy); precision.exact_logprobs %s\n", mode)
		return nil
	}
	fmt.Fprintf(w, "sampler/trainer mismatch over %d steps: max |Δ log-prob| %.3g, max KL %.3g (precision.exact_logprobs %s)\n",
		steps, absMax, klMax, mode)
	return nil
}

// BaselineRun is the run folder of the GRPO baseline (Settings.Compare).
const BaselineRun = "grpo-baseline"

// trained is a finished GRPO run of the demo.
type trained struct {
	dir     string
	library string // what computed its matrix products
}

// train runs one GRPO run of the demo (afresh, or resumed with --resume).
func train(ctx context.Context, cfg trainer.Config, o Options, logw io.Writer) (trained, error) {
	opts := trainer.Options{Overwrite: true, Backend: o.Backend}
	if o.Resume {
		opts = trainer.Options{Resume: "auto", Backend: o.Backend}
	}
	t, err := trainer.Open(cfg, logw, opts)
	if err != nil {
		return trained{}, err
	}
	defer t.Close()
	lib := t.Policy.B.Name()
	if m, ok := t.Policy.B.(interface{ MatMulLibrary() string }); ok {
		lib = shortLibrary(m.MatMulLibrary())
	}
	if err := t.Run(ctx); err != nil {
		if errors.Is(err, trainer.ErrStopped) {
			return trained{}, Stopped{"demo: stopped by a signal; the GRPO run's last complete step is checkpointed: continue with `gdrotrain demo --resume` and the same flags"}
		}
		return trained{}, err
	}
	return trained{dir: t.Dir, library: lib}, nil
}

// shortLibrary is the part of a backend's MatMulLibrary that decides the
// demo's numbers: OpenBLAS's version, the core whose kernels it runs and,
// when that core was not the library's own choice, how it was chosen
// ("OpenBLAS 0.3.21 … , core SkylakeX (set: the library picked Prescott …)
// (path)" → "OpenBLAS 0.3.21, core SkylakeX (set: the library picked
// Prescott …)"), or the Go kernels.
func shortLibrary(lib string) string {
	if strings.HasPrefix(lib, "Go kernels") {
		return "Go kernels (no OpenBLAS)"
	}
	f := strings.Fields(lib)
	if len(f) < 2 || f[0] != "OpenBLAS" {
		return lib
	}
	out := "OpenBLAS " + f[1]
	if _, core, ok := strings.Cut(lib, ", core "); ok {
		name := strings.Fields(core)[0]
		out += ", core " + name
		// What follows the name: " (note) (path)" or " (path)".
		if rest := strings.TrimPrefix(core, name); strings.Count(rest, " (") >= 2 {
			out += rest[:strings.LastIndex(rest, " (")]
		}
	}
	return out
}

// cpuModel names the processor and its core count (Linux's /proc/cpuinfo;
// "unknown CPU" elsewhere): the demo's numbers depend on its floating point.
func cpuModel() string {
	raw, err := os.ReadFile("/proc/cpuinfo")
	name, cores := "unknown CPU", 0
	if err == nil {
		for _, line := range strings.Split(string(raw), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			switch strings.TrimSpace(k) {
			case "model name":
				name = strings.TrimSpace(v)
			case "processor":
				cores++
			}
		}
	}
	return fmt.Sprintf("%s, %d logical cores, %s", name, max(cores, runtime.NumCPU()), runtime.GOARCH)
}

func round(d time.Duration) time.Duration { return d.Round(time.Second) }

// split returns the two YAML documents of configs/demo.yaml (or raw): the
// GRPO run's trainer config, which trainer.LoadBytes reads (it decodes only
// a file's first document), and the demo's own demo: section.
func split(raw []byte) (run, demoSection []byte, err error) {
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	var docs [][]byte
	for {
		var n yaml.Node
		if err := dec.Decode(&n); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, nil, fmt.Errorf("configs/demo.yaml: %w", err)
		}
		b, err := yaml.Marshal(&n)
		if err != nil {
			return nil, nil, err
		}
		docs = append(docs, b)
	}
	if len(docs) != 2 {
		return nil, nil, fmt.Errorf("configs/demo.yaml: want 2 YAML documents (the trainer config, then demo:), got %d", len(docs))
	}
	var top map[string]yaml.Node
	if err := yaml.Unmarshal(docs[1], &top); err != nil {
		return nil, nil, fmt.Errorf("configs/demo.yaml, second document: %w", err)
	}
	sec, ok := top["demo"]
	if !ok || len(top) != 1 {
		return nil, nil, errors.New("configs/demo.yaml: the second document must hold the demo: section alone")
	}
	if demoSection, err = yaml.Marshal(&sec); err != nil {
		return nil, nil, err
	}
	return docs[0], demoSection, nil
}

// decodeStrict decodes YAML into v, rejecting unknown keys.
func decodeStrict(raw []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// demoSets separates the demo.* overrides (prefix removed) from the rest.
func demoSets(sets []string) (demo, rest []string) {
	for _, s := range sets {
		if k, v, ok := strings.Cut(s, "="); ok && strings.HasPrefix(strings.TrimSpace(k), "demo.") {
			demo = append(demo, strings.TrimPrefix(strings.TrimSpace(k), "demo.")+"="+v)
			continue
		}
		rest = append(rest, s)
	}
	return demo, rest
}

// LoadSettings reads the demo: section of configs/demo.yaml and applies the
// demo.* entries of sets (e.g. demo.task.rl_per_group=50).
func LoadSettings(sets []string) (Settings, error) {
	raw, err := configs.Get("demo")
	if err != nil {
		return Settings{}, err
	}
	_, sec, err := split(raw)
	if err != nil {
		return Settings{}, err
	}
	var s Settings
	if err := decodeStrict(sec, &s); err != nil {
		return Settings{}, fmt.Errorf("configs/demo.yaml demo: %w", err)
	}
	ds, _ := demoSets(sets)
	for _, kv := range ds {
		key, value, _ := strings.Cut(kv, "=")
		doc := value
		if strings.TrimSpace(doc) == "" {
			doc = "null"
		}
		parts := strings.Split(key, ".")
		for i := len(parts) - 1; i >= 0; i-- {
			doc = fmt.Sprintf("{%q: %s}", parts[i], doc)
		}
		if err := decodeStrict([]byte(doc), &s); err != nil {
			return Settings{}, fmt.Errorf("--set demo.%s: %w", kv, err)
		}
	}
	return s, s.Validate()
}

// Config is the GRPO run's part of configs/demo.yaml with the demo's files
// and seed filled in, then the non-demo entries of o.Sets.
func Config(o Options, warmDir, trainPath, valPath string) (trainer.Config, error) {
	raw, err := configs.Get("demo")
	if err != nil {
		return trainer.Config{}, err
	}
	run, _, err := split(raw)
	if err != nil {
		return trainer.Config{}, err
	}
	_, runSets := demoSets(o.Sets)
	sets := append([]string{
		"model.path=" + quoteYAML(warmDir), "data.train=[" + quoteYAML(trainPath) + "]",
		"validation.files=[" + quoteYAML(valPath) + "]", "run.out_dir=" + quoteYAML(o.Out),
		fmt.Sprintf("run.seed=%d", o.Seed),
	}, runSets...)
	return trainer.LoadBytes(run, "built-in demo", sets)
}

// warmStamp records what a warmed-up model was made from, so Resume reuses
// it only for the same demo.
type warmStamp struct {
	Seed     uint64         `json:"seed"`
	Model    ModelSettings  `json:"model"`
	Task     TaskSettings   `json:"task"`
	Warmup   WarmupSettings `json:"warmup"`
	Problems int            `json:"warmup_problems"`
}

const warmStampFile = "demo-warmup.json"

func stampOf(o Options, s Settings) warmStamp {
	return warmStamp{Seed: o.Seed, Model: s.Model, Task: s.Task, Warmup: s.Warmup,
		Problems: s.Task.WarmupPerGroup * len(synth.Groups)}
}

// warmReusable reports whether warmDir holds a finished warm-up for o and
// s, and why not otherwise.
func warmReusable(o Options, s Settings, warmDir string) (bool, string) {
	raw, err := os.ReadFile(filepath.Join(warmDir, warmStampFile))
	if err != nil {
		return false, "no finished warm-up in " + warmDir
	}
	var got warmStamp
	if json.Unmarshal(raw, &got) != nil || got != stampOf(o, s) {
		return false, "the warm-up in " + warmDir + " was made with another --seed or other demo settings"
	}
	return true, ""
}

// Task writes the synthetic task into o.Out and returns the warm-up
// problems and the GRPO and held-out files. Per group, the warm-up takes
// the first warmup_per_group problems of one draw and GRPO the next
// rl_per_group (a small set, so prompts recur and the difficulty classifier
// builds a history); the held-out problems are drawn apart and exclude
// both. The three sets are disjoint.
func Task(o Options, s Settings, logf func(string, ...any)) (warm []synth.Problem, trainPath, valPath string, err error) {
	t := s.Task
	pool := synth.Generate(t.WarmupPerGroup+t.RLPerGroup, o.Seed, nil)
	warm = synth.PerGroup(pool, 0, t.WarmupPerGroup)
	train := synth.PerGroup(pool, t.WarmupPerGroup, t.WarmupPerGroup+t.RLPerGroup)
	val := synth.Generate(t.HeldoutPerGroup, o.Seed+1000, synth.Texts(pool))
	trainPath, valPath = filepath.Join(o.Out, "train.jsonl"), filepath.Join(o.Out, "heldout.jsonl")
	for _, f := range []struct {
		path string
		ps   []synth.Problem
	}{{filepath.Join(o.Out, "warmup.jsonl"), warm}, {trainPath, train}, {valPath, val}} {
		if err := synth.WriteJSONL(f.path, f.ps); err != nil {
			return nil, "", "", err
		}
	}
	logf("task: %d warm-up, %d GRPO and %d held-out problems in %d groups (disjoint sets)",
		len(warm), len(train), len(val), len(synth.Groups))
	return warm, trainPath, valPath, nil
}

// WarmUp writes a tokenizer and a random tiny model in the Hugging Face
// layout (Out/model-init), loads them back like a real checkpoint, runs the
// supervised warm-up on the warm-up problems and writes the result to
// warmDir: beside it first, then renamed, so warmDir holds a finished
// warm-up or none.
func WarmUp(ctx context.Context, o Options, s Settings, warm []synth.Problem, warmDir string, logf func(string, ...any)) error {
	initDir := filepath.Join(o.Out, "model-init")
	if err := tokenizer.WriteTiny(initDir, s.Model.Vocab); err != nil {
		return err
	}
	tok, err := tokenizer.Load(initDir)
	if err != nil {
		return err
	}
	opts := s.modelOptions(tok.StopIDs())
	opts.Vocab = tok.VocabSize()
	mcfg, err := opts.Config()
	if err != nil {
		return err
	}
	b := cpu.NewBackend()
	if err := model.WriteFolder(initDir, mcfg, b, model.RandomParams(b, mcfg, o.Seed, opts.InitStd, 0), model.F32); err != nil {
		return err
	}
	m, err := model.Load(cpu.NewBackend(), initDir)
	if err != nil {
		return err
	}
	logf("model: %s (%.2fM parameters, vocab %d)", initDir, float64(mcfg.NumParams())/1e6, mcfg.VocabSize)
	var examples []SFTExample
	for _, p := range warm {
		ids, err := tok.EncodePrompt([]tokenizer.Message{{Role: "user", Content: p.Problem}}, tokenizer.PromptRaw)
		if err != nil {
			return err
		}
		resp := tok.Encode32(synth.Response(p)+"<|im_end|>", nil)
		examples = append(examples, SFTExample{Prompt: tokenizer.Int32s(ids), Response: resp})
	}
	w := s.Warmup
	logf("warm-up: %d examples × %d epochs", len(examples), w.Epochs)
	sft := SFTConfig{Epochs: w.Epochs, BatchRows: w.BatchRows, GradClip: w.GradClip, Seed: o.Seed,
		Optim: optim.AdamWConfig{LR: w.LR, Beta1: w.Beta1, Beta2: w.Beta2, Eps: w.Eps, WeightDecay: w.WeightDecay}}
	if _, err := SFT(ctx, m, examples, sft, logf); err != nil {
		return err
	}
	tmp := warmDir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := model.WriteFolder(tmp, m.Cfg, m.B, m.P, model.F32); err != nil {
		return err
	}
	if err := tokenizer.CopyFiles(initDir, tmp); err != nil {
		return err
	}
	stamp, _ := json.Marshal(stampOf(o, s))
	if err := os.WriteFile(filepath.Join(tmp, warmStampFile), stamp, 0o644); err != nil {
		return err
	}
	if err := os.RemoveAll(warmDir); err != nil {
		return err
	}
	return os.Rename(tmp, warmDir)
}

// Change is an improvement measured on the same problems twice: the mean
// per-problem change of mean@n and its paired standard error, the sample
// standard deviation of the per-problem changes over √problems.
type Change struct {
	Before, After, Delta, SE float64
	Problems                 int
}

// Z is the change in standard errors (0 when SE is 0).
func (c Change) Z() float64 {
	if c.SE == 0 {
		return 0
	}
	return c.Delta / c.SE
}

// PairedChange compares per-problem correct counts of n samples each.
func PairedChange(before, after []int, n int) (Change, error) {
	if len(before) != len(after) || len(before) == 0 || n < 1 {
		return Change{}, fmt.Errorf("demo: cannot pair %d and %d per-problem results of %d samples", len(before), len(after), n)
	}
	var c Change
	c.Problems = len(before)
	d := make([]float64, len(before))
	for i := range before {
		b, a := float64(before[i])/float64(n), float64(after[i])/float64(n)
		c.Before += b
		c.After += a
		d[i] = a - b
		c.Delta += d[i]
	}
	P := float64(len(d))
	c.Before, c.After, c.Delta = c.Before/P, c.After/P, c.Delta/P
	if len(d) > 1 {
		var ss float64
		for _, x := range d {
			ss += (x - c.Delta) * (x - c.Delta)
		}
		c.SE = math.Sqrt(ss/(P-1)) / math.Sqrt(P)
	}
	return c, nil
}

// Report writes held-out accuracy per group at the first and the last
// validation of valPath, with paired standard errors over the held-out
// problems of heldoutPath (the file validated, whose rows give each
// problem's group).
func Report(w io.Writer, valPath, heldoutPath, runDir string) error {
	results, err := trainer.ReadValidation(valPath)
	if err != nil {
		return err
	}
	if len(results) < 2 {
		return fmt.Errorf("demo: expected validation before and after training in %s", valPath)
	}
	first, last := results[0], results[len(results)-1]
	groups, err := readGroups(heldoutPath)
	if err != nil {
		return err
	}
	if len(first.PromptCorrect) != len(groups) || len(last.PromptCorrect) != len(groups) || first.N != last.N {
		return fmt.Errorf("demo: %s has %d and %d per-problem results (n = %d, %d) for the %d problems of %s",
			valPath, len(first.PromptCorrect), len(last.PromptCorrect), first.N, last.N, len(groups), heldoutPath)
	}
	names, byGroup := pairByGroup(groups, first.PromptCorrect, last.PromptCorrect)
	fmt.Fprintf(w, "\nheld-out accuracy (mean@%d over %d problems never trained on)\n", first.N, len(groups))
	fmt.Fprintf(w, "%-16s %10s %10s %18s\n", "group", "step "+fmt.Sprint(first.Step), "step "+fmt.Sprint(last.Step), "change ± SE")
	row := func(name string, c Change) {
		fmt.Fprintf(w, "%-16s %10.3f %10.3f %+9.3f ± %.3f\n", name, c.Before, c.After, c.Delta, c.SE)
	}
	for _, g := range names {
		c, err := PairedChange(byGroup[g][0], byGroup[g][1], first.N)
		if err != nil {
			return err
		}
		row(g, c)
	}
	all, err := PairedChange(first.PromptCorrect, last.PromptCorrect, first.N)
	if err != nil {
		return err
	}
	row("all", all)
	fmt.Fprintf(w, "%-16s %10.3f %10.3f\n", "worst group", first.WorstAcc, last.WorstAcc)
	fmt.Fprintf(w, "improvement: %+.3f = %.1f standard errors (paired over the %d problems: SE = sd of the per-problem change / √%d)\n",
		all.Delta, all.Z(), all.Problems, all.Problems)
	fmt.Fprintf(w, "run folder: %s\n", runDir)
	return nil
}

// CompareReport writes the GDRO run against the GRPO baseline at their
// last validations, per group and in all, paired per held-out problem
// (the difference GDRO − GRPO and its standard error).
func CompareReport(w io.Writer, baseVal, mainVal, heldoutPath, method string) error {
	b, err := trainer.ReadValidation(baseVal)
	if err != nil {
		return err
	}
	m, err := trainer.ReadValidation(mainVal)
	if err != nil {
		return err
	}
	if len(b) == 0 || len(m) == 0 {
		return fmt.Errorf("demo: no validation in %s or %s", baseVal, mainVal)
	}
	bl, ml := b[len(b)-1], m[len(m)-1]
	groups, err := readGroups(heldoutPath)
	if err != nil {
		return err
	}
	if len(bl.PromptCorrect) != len(groups) || len(ml.PromptCorrect) != len(groups) || bl.N != ml.N || bl.Step != ml.Step {
		return fmt.Errorf("demo: the baseline (%s: step %d, n = %d, %d problems) and %s (%s: step %d, n = %d, %d problems) do not pair",
			baseVal, bl.Step, bl.N, len(bl.PromptCorrect), method, mainVal, ml.Step, ml.N, len(ml.PromptCorrect))
	}
	names, byGroup := pairByGroup(groups, bl.PromptCorrect, ml.PromptCorrect)
	fmt.Fprintf(w, "\n%s against GRPO (same warm-up, seed and prompts; held-out mean@%d at step %d)\n", method, ml.N, ml.Step)
	fmt.Fprintf(w, "%-16s %10s %12s %17s\n", "group", "grpo", method, "difference ± SE")
	for _, g := range names {
		c, err := PairedChange(byGroup[g][0], byGroup[g][1], ml.N)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%-16s %10.3f %12.3f %+9.3f ± %.3f\n", g, c.Before, c.After, c.Delta, c.SE)
	}
	all, err := PairedChange(bl.PromptCorrect, ml.PromptCorrect, ml.N)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%-16s %10.3f %12.3f %+9.3f ± %.3f\n", "all", all.Before, all.After, all.Delta, all.SE)
	fmt.Fprintf(w, "%-16s %10.3f %12.3f\n", "worst group", bl.WorstAcc, ml.WorstAcc)
	fmt.Fprintf(w, "%s − grpo: %+.3f = %.1f standard errors (paired over the %d problems)\n", method, all.Delta, all.Z(), all.Problems)
	return nil
}

// pairByGroup splits two per-problem result lists by the problems' groups
// and returns the group names in order.
func pairByGroup(groups []string, a, b []int) ([]string, map[string][2][]int) {
	byGroup := map[string][2][]int{}
	for i, g := range groups {
		e := byGroup[g]
		e[0], e[1] = append(e[0], a[i]), append(e[1], b[i])
		byGroup[g] = e
	}
	names := make([]string, 0, len(byGroup))
	for g := range byGroup {
		names = append(names, g)
	}
	sort.Strings(names)
	return names, byGroup
}

// readGroups returns the data_source of each row of a task file, in order.
func readGroups(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var p synth.Problem
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			return nil, fmt.Errorf("%s row %d: %w", path, len(out)+1, err)
		}
		out = append(out, p.DataSource)
	}
	return out, sc.Err()
}

// quoteYAML makes a path safe inside a --set value.
func quoteYAML(s string) string { return fmt.Sprintf("%q", s) }
