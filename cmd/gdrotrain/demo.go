package main

import (
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
     metrics.jsonl, validation.jsonl, the config and the trained weights.`,
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
	if o.reuseWarm {
		logf("reusing the warmed-up model in %s", warmDir)
	} else if err := demoWarmModel(cmd, o, pool, warmDir, logf); err != nil {
		return err
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
	t, err := trainer.New(cfg, w, "")
	if err != nil {
		return err
	}
	defer t.Close()
	if err := t.Run(cmd.Context()); err != nil {
		return err
	}
	return printDemoReport(cmd.OutOrStdout(), filepath.Join(t.Dir, "validation.jsonl"), t.Dir)
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
	if err := model.WriteFolder(warmDir, m.Cfg, m.B, m.P, model.F32); err != nil {
		return err
	}
	return tokenizer.CopyFiles(initDir, warmDir)
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
