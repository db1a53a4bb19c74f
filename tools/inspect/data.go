package inspect

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/gdrotrain/gdrotrain/data"
	"github.com/gdrotrain/gdrotrain/tokenizer"
)

// DataOptions are data inspect's settings, the flags of `gdrotrain data
// inspect`.
type DataOptions struct {
	// Files are the datasets, inspected as one concatenated dataset.
	Files []string
	// Tokenizer is the folder with tokenizer.json (--tokenizer; "":
	// DefaultTokenizerDir when present).
	Tokenizer string
	// Template renders {problem, answer} rows (--template: auto, none,
	// dapo, math or gpqa), Mode the prompts (--mode: chat or raw).
	Template, Mode string
	// SkipBadRows skips malformed rows, counted, instead of failing on
	// the first (--skip-bad-rows).
	SkipBadRows bool
	// MaxPromptLength reports the prompts longer than this many tokens
	// (--max-prompt-length; 0: no limit); Sample is the index of the
	// prompt printed rendered (--sample).
	MaxPromptLength, Sample int
	// Stdout gets the report, Stderr the skipped rows' log.
	Stdout, Stderr io.Writer
}

// Data reads and checks the files, renders every prompt as the trainer
// will and prints the schema, the row count, a histogram of prompt
// lengths in tokens and one rendered prompt.
func Data(o DataOptions) error {
	tmpl, err := data.ParseTemplate(o.Template)
	if err != nil {
		return err
	}
	pm, err := tokenizer.ParsePromptMode(o.Mode)
	if err != nil {
		return err
	}
	opts := data.ReadOptions{Template: tmpl, SkipBadRows: o.SkipBadRows,
		Logf: func(f string, a ...any) { fmt.Fprintf(o.Stderr, f+"\n", a...) }}
	ds, err := data.ReadFiles(o.Files, opts)
	if err != nil {
		return err
	}
	tok, tokDir, err := loadTokenizer(o.Tokenizer)
	if err != nil {
		return err
	}
	toks, err := ds.Tokenize(tok, pm)
	if err != nil {
		return err
	}
	return o.print(ds, toks, tokDir, pm)
}

// print writes the report of ds, whose prompts toks are, read with the
// tokenizer in tokDir.
func (o DataOptions) print(ds *data.Dataset, toks []data.Tokenized, tokDir string, mode tokenizer.PromptMode) error {
	out, maxLen, sample := o.Stdout, o.MaxPromptLength, o.Sample
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
