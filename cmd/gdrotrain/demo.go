package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/configs"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/synth"
	"github.com/gdrotrain/gdrotrain/tokenizer"
	"github.com/gdrotrain/gdrotrain/trainer"
)

func init() { register(newDemoCmd) }

// demoOptions size the demo; the defaults finish in minutes on 2 cores.
type demoOptions struct {
	out           string
	seed          uint64
	trainPerGroup int
	valPerGroup   int
	warmPerGroup  int
	warmEpochs    int
	sets          []string
	reuseWarm     bool
	resume        bool
}

func newDemoCmd() *cobra.Command {
	o := demoOptions{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the tiny CPU demo: build a model and tokenizer, warm up, train with GRPO + Prompt-GDRO",
		Long: `demo runs the whole pipeline on the CPU with nothing to download:
  1. writes a small Qwen3-style tokenizer and a random tiny Qwen3 model in the
     Hugging Face layout, and loads them back through the normal loaders;
  2. generates a synthetic arithmetic task (six groups from 1-digit addition
     to 2-digit × 1-digit multiplication) with disjoint train and held-out sets;
  3. warms the model up with a short supervised phase on part of the train set;
  4. runs GRPO with Prompt-GDRO (configs/demo.yaml) and reports held-out
     accuracy per group before and after, leaving a run folder with
     metrics.jsonl, validation.jsonl, the config and the trained weights.
Without --resume the GRPO run folder is started afresh (an earlier demo run
there is replaced). A signal (SIGINT, SIGTERM, SIGUSR1) exits with status 3:
during the warm-up nothing is kept; during GRPO the last complete step is
checkpointed, and --resume continues from it (reusing the warmed-up model).`,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDemo(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.out, "out", filepath.Join("runs", "demo"), "output folder")
	f.Uint64Var(&o.seed, "seed", 1, "seed for the model, the data and the run")
	f.IntVar(&o.trainPerGroup, "train-per-group", 100, "GRPO training problems per group")
	f.IntVar(&o.valPerGroup, "val-per-group", 40, "held-out problems per group")
	f.IntVar(&o.warmPerGroup, "warmup-per-group", 400, "problems per group in the supervised warm-up")
	f.IntVar(&o.warmEpochs, "warmup-epochs", 16, "supervised warm-up epochs")
	f.BoolVar(&o.reuseWarm, "reuse-warmup", false, "reuse OUT/model-warm from an earlier demo with the same seed (skips steps 1 and 3)")
	f.BoolVar(&o.resume, "resume", false, "continue an interrupted demo: reuse its finished warm-up (same seed and sizes) and resume the GRPO run from its newest checkpoint")
	f.StringArrayVar(&o.sets, "set", nil, "override a key of configs/demo.yaml (section.key=value)")
	return cmd
}

func runDemo(cmd *cobra.Command, o demoOptions) error {
	w := cmd.ErrOrStderr()
	logf := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	warmDir := filepath.Join(o.out, "model-warm")
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	pool, trainPath, valPath, err := demoTask(o, logf)
	if err != nil {
		return err
	}
	switch reuse, why := warmReusable(o, warmDir); {
	case o.reuseWarm:
		logf("reusing the warmed-up model in %s", warmDir)
	case o.resume && reuse:
		logf("--resume: reusing the finished warm-up in %s", warmDir)
	default:
		if o.resume {
			logf("--resume: warming up again (%s)", why)
		}
		if err := demoWarmModel(cmd, o, pool, warmDir, logf); err != nil {
			if cmd.Context().Err() != nil {
				return demoStopped{"demo: stopped by a signal during the warm-up (nothing is kept from it); run `gdrotrain demo --resume` with the same flags to start again"}
			}
			return err
		}
	}
	// GRPO + Prompt-GDRO (or whatever --set says) from the warm model.
	raw, err := configs.Get("demo")
	if err != nil {
		return err
	}
	sets := append([]string{
		"model.path=" + quoteYAML(warmDir), "data.train=[" + quoteYAML(trainPath) + "]",
		"validation.files=[" + quoteYAML(valPath) + "]", "run.out_dir=" + quoteYAML(o.out),
		fmt.Sprintf("run.seed=%d", o.seed),
	}, o.sets...)
	cfg, err := trainer.LoadBytes(raw, "built-in demo", sets)
	if err != nil {
		return err
	}
	start := trainer.Options{Overwrite: true}
	if o.resume {
		start = trainer.Options{Resume: "auto"}
	}
	t, err := trainer.Open(cfg, w, start)
	if err != nil {
		return err
	}
	defer t.Close()
	if err := t.Run(cmd.Context()); err != nil {
		if errors.Is(err, trainer.ErrStopped) {
			return demoStopped{"demo: stopped by a signal; the GRPO run's last complete step is checkpointed: continue with `gdrotrain demo --resume` and the same flags"}
		}
		return err
	}
	return printDemoReport(cmd.OutOrStdout(), filepath.Join(t.Dir, "validation.jsonl"), t.Dir)
}

// demoStopped is a demo stopped by a signal: main exits with status 3 (it
// is trainer.ErrStopped) and prints the demo's own hint.
type demoStopped struct{ msg string }

func (e demoStopped) Error() string        { return e.msg }
func (e demoStopped) Is(target error) bool { return target == trainer.ErrStopped }

// warmStamp records what a warmed-up model was made from, so --resume
// reuses it only for the same demo.
type warmStamp struct {
	Seed          uint64 `json:"seed"`
	WarmPerGroup  int    `json:"warmup_per_group"`
	WarmEpochs    int    `json:"warmup_epochs"`
	TrainPerGroup int    `json:"train_per_group"`
}

const warmStampFile = "demo-warmup.json"

func stampOf(o demoOptions) warmStamp {
	return warmStamp{Seed: o.seed, WarmPerGroup: o.warmPerGroup, WarmEpochs: o.warmEpochs, TrainPerGroup: o.trainPerGroup}
}

// warmReusable reports whether warmDir holds a finished warm-up for o, and
// why not otherwise.
func warmReusable(o demoOptions, warmDir string) (bool, string) {
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

// demoTask writes the synthetic task: the warm-up uses the first
// warmup-per-group problems of each group, GRPO the first train-per-group (a
// small set, so prompts recur and the difficulty classifier builds a
// history); held-out problems are disjoint from both.
func demoTask(o demoOptions, logf func(string, ...any)) ([]synth.Problem, string, string, error) {
	pool := synth.Generate(max(o.trainPerGroup, o.warmPerGroup), o.seed, nil)
	train := synth.FirstPerGroup(pool, o.trainPerGroup)
	val := synth.Generate(o.valPerGroup, o.seed+1000, synth.Texts(pool))
	trainPath, valPath := filepath.Join(o.out, "train.jsonl"), filepath.Join(o.out, "heldout.jsonl")
	if err := synth.WriteJSONL(trainPath, train); err != nil {
		return nil, "", "", err
	}
	if err := synth.WriteJSONL(valPath, val); err != nil {
		return nil, "", "", err
	}
	logf("task: %d warm-up, %d GRPO and %d held-out problems in %d groups",
		len(synth.FirstPerGroup(pool, o.warmPerGroup)), len(train), len(val), len(synth.Groups))
	return pool, trainPath, valPath, nil
}

// demoWarmModel writes a tokenizer and a random tiny model in the Hugging
// Face layout, loads them back like a real checkpoint, runs the supervised
// warm-up and writes the result to warmDir.
func demoWarmModel(cmd *cobra.Command, o demoOptions, pool []synth.Problem, warmDir string, logf func(string, ...any)) error {
	initDir := filepath.Join(o.out, "model-init")
	if err := tokenizer.WriteTiny(initDir, 512); err != nil {
		return err
	}
	tok, err := tokenizer.Load(initDir)
	if err != nil {
		return err
	}
	opts := model.TinyOptions{Layers: 2, Hidden: 128, Intermediate: 256, Heads: 4, KVHeads: 2, HeadDim: 32,
		Vocab: tok.VocabSize(), Tied: true, RopeTheta: 1e4, MaxPositions: 512, EOS: tok.StopIDs(), InitStd: 0.02}
	mcfg, err := opts.Config()
	if err != nil {
		return err
	}
	b := model.NewCPU()
	if err := model.WriteFolder(initDir, mcfg, b, model.RandomParams(b, mcfg, o.seed, opts.InitStd, 0), model.F32); err != nil {
		return err
	}
	m, err := model.Load(model.NewCPU(), initDir)
	if err != nil {
		return err
	}
	logf("model: %s (%.2fM parameters, vocab %d)", initDir, float64(mcfg.NumParams())/1e6, mcfg.VocabSize)
	var examples []trainer.SFTExample
	for _, p := range synth.FirstPerGroup(pool, o.warmPerGroup) {
		ids, err := tok.EncodePrompt([]tokenizer.Message{{Role: "user", Content: p.Problem}}, tokenizer.PromptRaw)
		if err != nil {
			return err
		}
		resp := tok.Encode(synth.Response(p) + "<|im_end|>")
		examples = append(examples, trainer.SFTExample{Prompt: toInt32(ids), Response: toInt32(resp)})
	}
	logf("warm-up: %d examples × %d epochs", len(examples), o.warmEpochs)
	sft := trainer.SFTConfig{Epochs: o.warmEpochs, BatchRows: 16, GradClip: 1, Seed: o.seed,
		Optim: model.AdamWConfig{LR: 3e-3, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8}}
	if _, err := trainer.SFT(cmd.Context(), m, examples, sft, logf); err != nil {
		return err
	}
	// Written beside warmDir and renamed into place: warmDir holds a
	// finished warm-up or none.
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

// printDemoReport shows held-out accuracy per group before and after RL.
func printDemoReport(w io.Writer, valPath, runDir string) error {
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
		fmt.Fprintf(w, "%-16s %10.3f %10.3f\n", n, first.Benchmarks[n].MeanAcc, last.Benchmarks[n].MeanAcc)
	}
	fmt.Fprintf(w, "%-16s %10.3f %10.3f\n", "all", first.MeanAcc, last.MeanAcc)
	fmt.Fprintf(w, "%-16s %10.3f %10.3f\n", "worst group", first.WorstAcc, last.WorstAcc)
	fmt.Fprintf(w, "run folder: %s\n", runDir)
	return nil
}

func toInt32(ids []int) []int32 {
	out := make([]int32, len(ids))
	for i, v := range ids {
		out[i] = int32(v)
	}
	return out
}

// quoteYAML makes a path safe inside a --set value.
func quoteYAML(s string) string { return fmt.Sprintf("%q", s) }
