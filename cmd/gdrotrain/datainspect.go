package main

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/data"
	"github.com/gdrotrain/gdrotrain/tokenizer"
	"github.com/gdrotrain/gdrotrain/trainer"
)

func newDataCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:          "data",
		Short:        "Dataset tools",
		SilenceUsage: true,
	}
	cmd.AddCommand(newDataInspectCmd())
	return cmd
}

func newDataInspectCmd() *cobra.Command {
	var (
		dir, template, mode string
		skipBad             bool
		maxLen, sample      int
	)
	cmd := &cobra.Command{
		Use:   "inspect FILE...",
		Short: "Show a dataset's schema, row count, prompt lengths in tokens and a rendered prompt",
		Long: `inspect reads Parquet or JSONL datasets (verl rows or {problem, answer} rows),
checks every row and the prompt UIDs, renders every prompt as the trainer will
(chat template with an open assistant turn, or raw) and prints the schema, the
row count, a histogram of prompt lengths in tokens and one rendered prompt.
Several files are inspected as one concatenated dataset (a validation set).`,
		Example: `  gdrotrain data inspect data/testdata/dapo_math_sample.jsonl
  gdrotrain data inspect --tokenizer /models/Qwen3-1.7B-Base --max-prompt-length 3200 train.parquet`,
		Args:         cobra.MinimumNArgs(1),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			tmpl, err := data.ParseTemplate(template)
			if err != nil {
				return err
			}
			pm, err := tokenizer.ParsePromptMode(mode)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			opts := data.ReadOptions{Template: tmpl, SkipBadRows: skipBad,
				Logf: func(f string, a ...any) { fmt.Fprintf(cmd.ErrOrStderr(), f+"\n", a...) }}
			ds, err := data.ReadFiles(args, opts)
			if err != nil {
				return err
			}
			tok, tokDir, err := loadTokenizerFlag(dir)
			if err != nil {
				return err
			}
			toks, err := ds.Tokenize(tok, pm)
			if err != nil {
				return err
			}
			return printInspect(out, ds, toks, tokDir, pm, maxLen, sample)
		},
	}
	f := cmd.Flags()
	defaults := trainer.Default() // the training defaults, so inspect sees what train would
	f.StringVar(&dir, "tokenizer", "", "folder with tokenizer.json and tokenizer_config.json (default "+defaultTokenizerDir+" when present)")
	f.StringVar(&template, "template", defaults.Data.Template, "prompt template for {problem, answer} rows: auto, none, dapo, math or gpqa")
	f.StringVar(&mode, "mode", defaults.Model.Prompt, "prompt rendering: chat (chat template + open assistant turn) or raw")
	f.BoolVar(&skipBad, "skip-bad-rows", false, "skip malformed rows (counted) instead of failing on the first")
	f.IntVar(&maxLen, "max-prompt-length", defaults.Data.MaxPromptLength, "report prompts longer than this many tokens (0: no limit)")
	f.IntVar(&sample, "sample", 0, "index of the prompt to print rendered")
	return cmd
}

func printInspect(out io.Writer, ds *data.Dataset, toks []data.Tokenized, tokDir string, mode tokenizer.PromptMode, maxLen, sample int) error {
	fmt.Fprintf(out, "files: %s\n", strings.Join(ds.Files, ", "))
	fmt.Fprintf(out, "format: %s, %d rows", ds.Format, len(ds.Prompts))
	if ds.Skipped > 0 {
		fmt.Fprintf(out, " (%d bad rows skipped)", ds.Skipped)
	}
	if ds.InvalidUTF8 > 0 {
		fmt.Fprintf(out, " (%d rows with invalid UTF-8, read as U+FFFD)", ds.InvalidUTF8)
	}
	fmt.Fprintf(out, "\nschema:\n%s", ds.Schema)
	if !strings.HasSuffix(ds.Schema, "\n") {
		fmt.Fprintln(out)
	}
	sources := map[string]int{}
	for _, p := range ds.Prompts {
		sources[p.DataSource]++
	}
	names := make([]string, 0, len(sources))
	for s := range sources {
		names = append(names, s)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, s := range names {
		parts[i] = fmt.Sprintf("%s (%d)", s, sources[s])
	}
	fmt.Fprintf(out, "data sources: %s\n", strings.Join(parts, ", "))
	fmt.Fprintf(out, "UIDs: %d unique, e.g. %q\n", len(ds.Prompts), ds.Prompts[0].UID)

	_, _, rep, err := data.FilterByLength(ds, toks, maxLen, true)
	if err != nil && rep.Total == 0 {
		return err
	}
	fmt.Fprintf(out, "prompt length in tokens (%s mode, tokenizer %s): min %d, median %d, mean %.1f, max %d\n",
		mode, tokDir, rep.Min, rep.Median, rep.Mean, rep.Max)
	lens := make([]int, len(toks))
	for i, t := range toks {
		lens[i] = len(t.IDs)
	}
	printHistogram(out, lens, rep.Min, rep.Max)
	if maxLen > 0 {
		fmt.Fprintf(out, "over --max-prompt-length %d: %d\n", maxLen, rep.Dropped)
		for _, s := range rep.TooLong {
			fmt.Fprintf(out, "  %s\n", s)
		}
	}
	if sample < 0 || sample >= len(ds.Prompts) {
		return fmt.Errorf("--sample %d: the dataset has %d prompts", sample, len(ds.Prompts))
	}
	p := ds.Prompts[sample]
	fmt.Fprintf(out, "sample prompt %d (uid %s, %s row %d, ground truth %q, %d tokens):\n%s\n",
		sample, p.UID, p.File, p.Row, p.GroundTruth, len(toks[sample].IDs), toks[sample].Text)
	return nil
}

// printHistogram prints about ten buckets of a round width.
func printHistogram(out io.Writer, lens []int, lo, hi int) {
	width := niceWidth(float64(hi-lo+1) / 10)
	start := lo / width * width
	counts := data.Histogram(shift(lens, start), width)
	peak := 0
	for _, c := range counts {
		peak = max(peak, c)
	}
	for k, c := range counts {
		bar := strings.Repeat("#", int(math.Ceil(40*float64(c)/float64(max(peak, 1)))))
		line := fmt.Sprintf("  [%5d, %5d) %6d %s", start+k*width, start+(k+1)*width, c, bar)
		fmt.Fprintln(out, strings.TrimRight(line, " "))
	}
}

func shift(xs []int, by int) []int {
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = x - by
	}
	return out
}

// niceWidth rounds w up to 1, 2 or 5 times a power of ten.
func niceWidth(w float64) int {
	if w <= 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(w)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= w {
			return int(m * p)
		}
	}
	return int(10 * p)
}
