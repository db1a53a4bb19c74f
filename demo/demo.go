// Package demo is `gdrotrain demo`: the whole pipeline on a tiny model with
// nothing to download. It writes a small Qwen3-style tokenizer and a random
// tiny Qwen3 model in the Hugging Face layout and loads them back through
// the normal loaders; generates the synthetic arithmetic task (package
// synth) with disjoint warm-up/GRPO and held-out sets; warms the model up
// with a short supervised phase; runs GRPO with Prompt-GDRO
// (configs/demo.yaml) and reports held-out accuracy per group before and
// after.
//
// Folder layout under Options.Out: train.jsonl and heldout.jsonl (the
// task), model-init/ (the random model and tokenizer), model-warm/ (the
// warmed-up model, with demo-warmup.json recording what made it) and the
// GRPO run folder (run.name of the config, grpo-prompt-gdro).
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/gdrotrain/gdrotrain/configs"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/synth"
	"github.com/gdrotrain/gdrotrain/tokenizer"
	"github.com/gdrotrain/gdrotrain/trainer"
)

// Options size the demo; Default's finish in minutes on 2 cores.
type Options struct {
	Out           string   // output folder
	Seed          uint64   // seeds the model, the data and the run
	TrainPerGroup int      // GRPO training problems per group
	ValPerGroup   int      // held-out problems per group
	WarmPerGroup  int      // problems per group in the supervised warm-up
	WarmEpochs    int      // supervised warm-up epochs
	Sets          []string // overrides of configs/demo.yaml (section.key=value)
	// ReuseWarm reuses Out/model-warm without checking what made it.
	ReuseWarm bool
	// Resume reuses a finished warm-up of the same seed and sizes and
	// resumes the GRPO run from its newest checkpoint.
	Resume bool
	// Backend opens run.device (nil: trainer.CPUOnly; demo.yaml says cpu).
	Backend trainer.BackendOpener
}

// Default returns the demo's default sizes.
func Default() Options {
	return Options{Out: filepath.Join("runs", "demo"), Seed: 1, TrainPerGroup: 100, ValPerGroup: 40, WarmPerGroup: 400, WarmEpochs: 16}
}

// Stopped is a demo stopped by a signal (ctx cancelled). It is
// trainer.ErrStopped (the CLI exits with status 3) and its message says how
// to continue.
type Stopped struct{ msg string }

func (e Stopped) Error() string        { return e.msg }
func (e Stopped) Is(target error) bool { return target == trainer.ErrStopped }

// Run runs the demo: progress goes to logw, the final report to out.
func Run(ctx context.Context, o Options, out, logw io.Writer) error {
	logf := func(format string, a ...any) { fmt.Fprintf(logw, format+"\n", a...) }
	warmDir := filepath.Join(o.Out, "model-warm")
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return err
	}
	pool, trainPath, valPath, err := Task(o, logf)
	if err != nil {
		return err
	}
	switch reuse, why := warmReusable(o, warmDir); {
	case o.ReuseWarm:
		logf("reusing the warmed-up model in %s", warmDir)
	case o.Resume && reuse:
		logf("--resume: reusing the finished warm-up in %s", warmDir)
	default:
		if o.Resume {
			logf("--resume: warming up again (%s)", why)
		}
		if err := WarmUp(ctx, o, pool, warmDir, logf); err != nil {
			if ctx.Err() != nil {
				return Stopped{"demo: stopped by a signal during the warm-up (nothing is kept from it); run `gdrotrain demo --resume` with the same flags to start again"}
			}
			return err
		}
	}
	cfg, err := Config(o, warmDir, trainPath, valPath)
	if err != nil {
		return err
	}
	start := trainer.Options{Overwrite: true, Backend: o.Backend}
	if o.Resume {
		start = trainer.Options{Resume: "auto", Backend: o.Backend}
	}
	t, err := trainer.Open(cfg, logw, start)
	if err != nil {
		return err
	}
	defer t.Close()
	if err := t.Run(ctx); err != nil {
		if errors.Is(err, trainer.ErrStopped) {
			return Stopped{"demo: stopped by a signal; the GRPO run's last complete step is checkpointed: continue with `gdrotrain demo --resume` and the same flags"}
		}
		return err
	}
	return Report(out, filepath.Join(t.Dir, "validation.jsonl"), t.Dir)
}

// Config is configs/demo.yaml with the demo's files and seed filled in,
// then o.Sets.
func Config(o Options, warmDir, trainPath, valPath string) (trainer.Config, error) {
	raw, err := configs.Get("demo")
	if err != nil {
		return trainer.Config{}, err
	}
	sets := append([]string{
		"model.path=" + quoteYAML(warmDir), "data.train=[" + quoteYAML(trainPath) + "]",
		"validation.files=[" + quoteYAML(valPath) + "]", "run.out_dir=" + quoteYAML(o.Out),
		fmt.Sprintf("run.seed=%d", o.Seed),
	}, o.Sets...)
	return trainer.LoadBytes(raw, "built-in demo", sets)
}

// warmStamp records what a warmed-up model was made from, so Resume reuses
// it only for the same demo.
type warmStamp struct {
	Seed          uint64 `json:"seed"`
	WarmPerGroup  int    `json:"warmup_per_group"`
	WarmEpochs    int    `json:"warmup_epochs"`
	TrainPerGroup int    `json:"train_per_group"`
}

const warmStampFile = "demo-warmup.json"

func stampOf(o Options) warmStamp {
	return warmStamp{Seed: o.Seed, WarmPerGroup: o.WarmPerGroup, WarmEpochs: o.WarmEpochs, TrainPerGroup: o.TrainPerGroup}
}

// warmReusable reports whether warmDir holds a finished warm-up for o, and
// why not otherwise.
func warmReusable(o Options, warmDir string) (bool, string) {
	raw, err := os.ReadFile(filepath.Join(warmDir, warmStampFile))
	if err != nil {
		return false, "no finished warm-up in " + warmDir
	}
	var got warmStamp
	if json.Unmarshal(raw, &got) != nil || got != stampOf(o) {
		return false, "the warm-up in " + warmDir + " was made with other --seed or sizes"
	}
	return true, ""
}

// Task writes the synthetic task into o.Out and returns the problem pool
// and the two files: the warm-up uses the first WarmPerGroup problems of
// each group, GRPO the first TrainPerGroup (a small set, so prompts recur
// and the difficulty classifier builds a history); held-out problems are
// disjoint from both.
func Task(o Options, logf func(string, ...any)) (pool []synth.Problem, trainPath, valPath string, err error) {
	pool = synth.Generate(max(o.TrainPerGroup, o.WarmPerGroup), o.Seed, nil)
	train := synth.FirstPerGroup(pool, o.TrainPerGroup)
	val := synth.Generate(o.ValPerGroup, o.Seed+1000, synth.Texts(pool))
	trainPath, valPath = filepath.Join(o.Out, "train.jsonl"), filepath.Join(o.Out, "heldout.jsonl")
	if err := synth.WriteJSONL(trainPath, train); err != nil {
		return nil, "", "", err
	}
	if err := synth.WriteJSONL(valPath, val); err != nil {
		return nil, "", "", err
	}
	logf("task: %d warm-up, %d GRPO and %d held-out problems in %d groups",
		len(synth.FirstPerGroup(pool, o.WarmPerGroup)), len(train), len(val), len(synth.Groups))
	return pool, trainPath, valPath, nil
}

// tinyModel is the demo's model: 2 layers, hidden 128 (0.36M parameters
// with the 512-token tokenizer).
func tinyModel(vocab int, eos []int) model.RandomOptions {
	return model.RandomOptions{Layers: 2, Hidden: 128, Intermediate: 256, Heads: 4, KVHeads: 2, HeadDim: 32,
		Vocab: vocab, Tied: true, RopeTheta: 1e4, MaxPositions: 512, EOS: eos, InitStd: 0.02}
}

// WarmUp writes a tokenizer and a random tiny model in the Hugging Face
// layout (Out/model-init), loads them back like a real checkpoint, runs the
// supervised warm-up on the pool's first WarmPerGroup problems per group
// and writes the result to warmDir: beside it first, then renamed, so
// warmDir holds a finished warm-up or none.
func WarmUp(ctx context.Context, o Options, pool []synth.Problem, warmDir string, logf func(string, ...any)) error {
	initDir := filepath.Join(o.Out, "model-init")
	if err := tokenizer.WriteTiny(initDir, 512); err != nil {
		return err
	}
	tok, err := tokenizer.Load(initDir)
	if err != nil {
		return err
	}
	opts := tinyModel(tok.VocabSize(), tok.StopIDs())
	mcfg, err := opts.Config()
	if err != nil {
		return err
	}
	b := model.NewCPU()
	if err := model.WriteFolder(initDir, mcfg, b, model.RandomParams(b, mcfg, o.Seed, opts.InitStd, 0), model.F32); err != nil {
		return err
	}
	m, err := model.Load(model.NewCPU(), initDir)
	if err != nil {
		return err
	}
	logf("model: %s (%.2fM parameters, vocab %d)", initDir, float64(mcfg.NumParams())/1e6, mcfg.VocabSize)
	var examples []trainer.SFTExample
	for _, p := range synth.FirstPerGroup(pool, o.WarmPerGroup) {
		ids, err := tok.EncodePrompt([]tokenizer.Message{{Role: "user", Content: p.Problem}}, tokenizer.PromptRaw)
		if err != nil {
			return err
		}
		resp := tok.Encode32(synth.Response(p)+"<|im_end|>", nil)
		examples = append(examples, trainer.SFTExample{Prompt: tokenizer.Int32s(ids), Response: resp})
	}
	logf("warm-up: %d examples × %d epochs", len(examples), o.WarmEpochs)
	sft := trainer.SFTConfig{Epochs: o.WarmEpochs, BatchRows: 16, GradClip: 1, Seed: o.Seed,
		Optim: model.AdamWConfig{LR: 3e-3, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8}}
	if _, err := trainer.SFT(ctx, m, examples, sft, logf); err != nil {
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
	stamp, _ := json.Marshal(stampOf(o))
	if err := os.WriteFile(filepath.Join(tmp, warmStampFile), stamp, 0o644); err != nil {
		return err
	}
	if err := os.RemoveAll(warmDir); err != nil {
		return err
	}
	return os.Rename(tmp, warmDir)
}

// Report writes held-out accuracy per group at the first and the last
// validation of valPath.
func Report(w io.Writer, valPath, runDir string) error {
	results, err := trainer.ReadValidation(valPath)
	if err != nil {
		return err
	}
	if len(results) < 2 {
		return fmt.Errorf("demo: expected validation before and after training in %s", valPath)
	}
	first, last := results[0], results[len(results)-1]
	fmt.Fprintf(w, "\nheld-out accuracy (mean@%d over %d problems never trained on)\n", first.N, first.Prompts)
	fmt.Fprintf(w, "%-16s %10s %10s\n", "group", "step "+fmt.Sprint(first.Step), "step "+fmt.Sprint(last.Step))
	var names []string
	for n := range first.Benchmarks {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		var after float64
		if b, ok := last.Benchmarks[n]; ok {
			after = b.MeanAcc
		}
		fmt.Fprintf(w, "%-16s %10.3f %10.3f\n", n, first.Benchmarks[n].MeanAcc, after)
	}
	fmt.Fprintf(w, "%-16s %10.3f %10.3f\n", "all", first.MeanAcc, last.MeanAcc)
	fmt.Fprintf(w, "%-16s %10.3f %10.3f\n", "worst group", first.WorstAcc, last.WorstAcc)
	fmt.Fprintf(w, "run folder: %s\n", runDir)
	return nil
}

// quoteYAML makes a path safe inside a --set value.
func quoteYAML(s string) string { return fmt.Sprintf("%q", s) }
