package data

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/tokenizer"
)

func sampleDataset(t *testing.T) *Dataset {
	t.Helper()
	ds, err := ReadFile(filepath.Join("testdata", "dapo_math_sample.jsonl"), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func TestEpochOrder(t *testing.T) {
	// Pinned: a change here changes every run's data order.
	if got, want := EpochOrder(10, 1, 0), []int{0, 5, 2, 3, 1, 4, 8, 7, 6, 9}; !slices.Equal(got, want) {
		t.Errorf("EpochOrder(10, 1, 0) = %v, want %v", got, want)
	}
	for _, n := range []int{0, 1, 2, 77, 1000} {
		for epoch := range 3 {
			p := EpochOrder(n, 42, epoch)
			s := slices.Clone(p)
			slices.Sort(s)
			for i := range s {
				if s[i] != i {
					t.Fatalf("EpochOrder(%d, 42, %d) is not a permutation", n, epoch)
				}
			}
			if !slices.Equal(p, EpochOrder(n, 42, epoch)) {
				t.Fatal("EpochOrder is not deterministic")
			}
		}
	}
	if slices.Equal(EpochOrder(77, 1, 0), EpochOrder(77, 1, 1)) || slices.Equal(EpochOrder(77, 1, 0), EpochOrder(77, 2, 0)) {
		t.Error("epochs or seeds give the same order")
	}
}

func uids(b []Prompt) []string {
	out := make([]string, len(b))
	for i, p := range b {
		out[i] = p.UID
	}
	return out
}

func TestLoaderEpochsAndDropLast(t *testing.T) {
	ds := sampleDataset(t) // 77 prompts
	l, err := NewLoader(ds, 16, 1)
	if err != nil {
		t.Fatal(err)
	}
	if l.StepsPerEpoch() != 4 {
		t.Errorf("StepsPerEpoch = %d", l.StepsPerEpoch())
	}
	seen := map[string]bool{}
	for step := range 8 {
		b, epoch := l.Next()
		if want := step / 4; epoch != want {
			t.Errorf("step %d: epoch %d, want %d", step, epoch, want)
		}
		for _, u := range uids(b) {
			if step < 4 {
				if seen[u] {
					t.Errorf("UID %s twice in epoch 0", u)
				}
				seen[u] = true
			}
		}
	}
	if len(seen) != 64 {
		t.Errorf("epoch 0 served %d prompts, want 64 (77 with drop_last of 13)", len(seen))
	}
	for _, bad := range []int{0, -1, 78} {
		if _, err := NewLoader(ds, bad, 1); err == nil {
			t.Errorf("batch size %d: want an error", bad)
		}
	}
}

func TestLoaderResume(t *testing.T) {
	ds := sampleDataset(t)
	ref, _ := NewLoader(ds, 10, 7)
	var want [][]string
	for range 20 { // spans 2+ epochs of 7 batches
		b, _ := ref.Next()
		want = append(want, uids(b))
	}
	for _, stopAt := range []int{0, 3, 7, 8, 13} {
		l, _ := NewLoader(ds, 10, 7)
		var got [][]string
		for range stopAt {
			b, _ := l.Next()
			got = append(got, uids(b))
		}
		blob, err := json.Marshal(l.Cursor()) // as a checkpoint stores it
		if err != nil {
			t.Fatal(err)
		}
		var c Cursor
		if err := json.Unmarshal(blob, &c); err != nil {
			t.Fatal(err)
		}
		r, _ := NewLoader(ds, 10, 999) // the seed comes from the cursor
		if err := r.Restore(c); err != nil {
			t.Fatal(err)
		}
		for len(got) < 20 {
			b, _ := r.Next()
			got = append(got, uids(b))
		}
		for i := range want {
			if !slices.Equal(got[i], want[i]) {
				t.Fatalf("resumed at %d: batch %d differs", stopAt, i)
			}
		}
	}
	// A cursor from another dataset or batch size is refused.
	other, err := ReadFile(filepath.Join("testdata", "amc23.jsonl"), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lo, _ := NewLoader(other, 10, 7)
	if err := lo.Restore(ref.Cursor()); err == nil || !strings.Contains(err.Error(), "another dataset") {
		t.Errorf("foreign cursor: err = %v", err)
	}
	l8, _ := NewLoader(ds, 8, 7)
	if err := l8.Restore(ref.Cursor()); err == nil {
		t.Error("cursor with another batch size: want an error")
	}
	// The same ids with another answer: refused (the fingerprint used to
	// cover the ids only).
	edited := *ds
	edited.Prompts = slices.Clone(ds.Prompts)
	edited.Prompts[3].GroundTruth += "0"
	le, _ := NewLoader(&edited, 10, 7)
	if err := le.Restore(ref.Cursor()); !errors.Is(err, ErrContentChanged) || !strings.Contains(err.Error(), "prompts or answers differ") {
		t.Errorf("cursor over changed answers: err = %v", err)
	}
	// An older cursor, without the content's: restored, and carries it on.
	old := ref.Cursor()
	old.Content = ""
	if err := le.Restore(old); err != nil || le.Cursor().Content != edited.ContentFingerprint() {
		t.Errorf("older cursor: err = %v, content %q", err, le.Cursor().Content)
	}
}

func tinyTokenizer(t *testing.T) *tokenizer.Tokenizer {
	t.Helper()
	dir := t.TempDir()
	if err := tokenizer.WriteTiny(dir, 512); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestTokenizeAndFilterByLength(t *testing.T) {
	ds := sampleDataset(t)
	tok := tinyTokenizer(t)
	toks, err := ds.Tokenize(tok, tokenizer.PromptChat)
	if err != nil {
		t.Fatal(err)
	}
	first := toks[0].Text
	if !strings.HasPrefix(first, "<|im_start|>user\nSolve the following math problem") || !strings.HasSuffix(first, "\\boxed{}.<|im_end|>\n<|im_start|>assistant\n") {
		t.Errorf("rendered prompt %q", first)
	}
	raw, err := ds.Tokenize(tok, tokenizer.PromptRaw)
	if err != nil || raw[0].Text != ds.Prompts[0].Messages[0].Content {
		t.Errorf("raw mode: %v %q", err, raw[0].Text)
	}
	lens := make([]int, len(toks))
	for i, x := range toks {
		lens[i] = len(x.IDs)
	}
	sorted := slices.Sorted(slices.Values(lens))
	limit := sorted[len(sorted)/2] // about half the prompts are over
	over := 0
	for _, n := range lens {
		if n > limit {
			over++
		}
	}
	kept, keptToks, rep, err := FilterByLength(ds, toks, limit, true)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total != 77 || rep.Dropped != over || rep.Kept != 77-over || len(kept.Prompts) != rep.Kept || len(keptToks) != rep.Kept {
		t.Errorf("report %+v, want %d dropped", rep, over)
	}
	if rep.Max != sorted[76] || rep.Min != sorted[0] || len(rep.TooLong) == 0 || !strings.Contains(rep.String(), "dropped") {
		t.Errorf("report %+v", rep)
	}
	for _, x := range keptToks {
		if len(x.IDs) > limit {
			t.Fatal("a kept prompt is over the limit")
		}
	}
	_, _, _, err = FilterByLength(ds, toks, limit, false)
	if err == nil || !strings.Contains(err.Error(), "over the limit") || !strings.Contains(err.Error(), "dapo_math_sample.jsonl") {
		t.Errorf("truncation=error: err = %v", err)
	}
	if _, _, rep, err := FilterByLength(ds, toks, 0, false); err != nil || rep.Kept != 77 {
		t.Errorf("no limit: %v %+v", err, rep)
	}
	if h := Histogram([]int{0, 5, 9, 10, 31}, 10); !slices.Equal(h, []int{3, 1, 0, 1}) {
		t.Errorf("Histogram = %v", h)
	}
}
