package data

import (
	"fmt"
	"sort"

	"github.com/gdrotrain/gdrotrain/tokenizer"
)

// Tokenized is a prompt's rendered text and ids.
type Tokenized struct {
	Text string
	IDs  []int
}

// Tokenize renders every prompt (chat template or raw) and encodes it; the
// result is parallel to d.Prompts. An error names the prompt's file and row.
func (d *Dataset) Tokenize(tok *tokenizer.Tokenizer, mode tokenizer.PromptMode) ([]Tokenized, error) {
	out := make([]Tokenized, len(d.Prompts))
	for i := range d.Prompts {
		p := &d.Prompts[i]
		s, err := tok.RenderPrompt(p.Messages, mode)
		if err != nil {
			return nil, fmt.Errorf("data: %s: row %d (uid %s): %w", p.File, p.Row, p.UID, err)
		}
		out[i] = Tokenized{Text: s, IDs: tok.Encode(s)}
	}
	return out, nil
}

// LengthReport summarizes prompt lengths in tokens against a limit.
type LengthReport struct {
	Total, Kept, Dropped int
	Limit                int
	Min, Max, Median     int
	Mean                 float64
	// TooLong lists the first few prompts over the limit ("uid (file row r): n tokens").
	TooLong []string
}

func (r LengthReport) String() string {
	return fmt.Sprintf("%d prompts, %d kept, %d over %d tokens dropped; length min %d median %d mean %.1f max %d",
		r.Total, r.Kept, r.Dropped, r.Limit, r.Min, r.Median, r.Mean, r.Max)
}

// FilterByLength checks the tokenized prompts against maxTokens. With drop
// false an over-long prompt is an error naming it (the reference's
// truncation=error, docs/algorithm.md §2.3); with drop true it is removed and counted.
// It returns the dataset and tokens of the kept prompts and the report.
func FilterByLength(d *Dataset, toks []Tokenized, maxTokens int, drop bool) (*Dataset, []Tokenized, LengthReport, error) {
	if len(toks) != len(d.Prompts) {
		return nil, nil, LengthReport{}, fmt.Errorf("data: %d tokenized prompts for %d prompts", len(toks), len(d.Prompts))
	}
	rep := LengthReport{Total: len(toks), Limit: maxTokens}
	kept := &Dataset{Files: d.Files, Format: d.Format, Schema: d.Schema, Skipped: d.Skipped}
	var keptToks []Tokenized
	lens := make([]int, len(toks))
	sum := 0
	for i, t := range toks {
		n := len(t.IDs)
		lens[i] = n
		sum += n
		p := d.Prompts[i]
		if maxTokens > 0 && n > maxTokens {
			if !drop {
				return nil, nil, rep, fmt.Errorf("data: %s: row %d (uid %s): prompt has %d tokens, over the limit of %d (drop over-long prompts or raise the limit)",
					p.File, p.Row, p.UID, n, maxTokens)
			}
			rep.Dropped++
			if len(rep.TooLong) < 5 {
				rep.TooLong = append(rep.TooLong, fmt.Sprintf("%s (%s row %d): %d tokens", p.UID, p.File, p.Row, n))
			}
			continue
		}
		kept.Prompts = append(kept.Prompts, p)
		keptToks = append(keptToks, t)
	}
	rep.Kept = len(kept.Prompts)
	if len(lens) > 0 {
		sort.Ints(lens)
		rep.Min, rep.Max, rep.Median = lens[0], lens[len(lens)-1], lens[len(lens)/2]
		rep.Mean = float64(sum) / float64(len(lens))
	}
	if rep.Kept == 0 {
		return nil, nil, rep, fmt.Errorf("data: every prompt is over %d tokens", maxTokens)
	}
	return kept, keptToks, rep, nil
}

// Histogram counts lengths in buckets of width `width`: bucket k holds
// lengths in [k·width, (k+1)·width).
func Histogram(lengths []int, width int) []int {
	if width <= 0 {
		width = 1
	}
	var out []int
	for _, n := range lengths {
		k := n / width
		for len(out) <= k {
			out = append(out, 0)
		}
		out[k]++
	}
	return out
}
