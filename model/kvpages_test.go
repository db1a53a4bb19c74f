package model

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

// fakeMapper records which pages are mapped.
type fakeMapper struct {
	mapped map[int]bool
	log    []string
}

func (f *fakeMapper) Map(p int) error {
	if f.mapped[p] {
		return errors.New("mapped twice")
	}
	f.mapped[p] = true
	return nil
}

func (f *fakeMapper) Unmap(p int) error {
	if !f.mapped[p] {
		return errors.New("unmapped twice")
	}
	delete(f.mapped, p)
	return nil
}

func (f *fakeMapper) Release() { f.log = append(f.log, "release") }

// TestKVPagesAccounting: pages follow the byte layout (a row of 3 bytes,
// pages of 8: slot regions of 5 rows = 15 bytes straddle pages, and a
// shared page is mapped once and unmapped when its last slot lets go).
func TestKVPagesAccounting(t *testing.T) {
	f := &fakeMapper{mapped: map[int]bool{}}
	// 3 slots × 5 rows × 3 bytes = 45 bytes: pages 0..5.
	p := newKVPages(3, 5, 3, 8, 2, 5, f)
	steps := []struct {
		op      string
		slot, n int
		err     bool
		used    int
		mapped  []int
	}{
		{"grow", 0, 2, false, 1, []int{0}},          // bytes [0, 6)
		{"grow", 0, 3, false, 2, []int{0, 1}},       // [0, 9): crosses into page 1
		{"grow", 1, 1, false, 3, []int{0, 1, 2}},    // slot 1 starts at byte 15: page 1 shared, page 2 new
		{"grow", 1, 5, false, 4, []int{0, 1, 2, 3}}, // [15, 30): pages 1..3
		{"grow", 2, 5, true, 4, []int{0, 1, 2, 3}},  // [30, 45): pages 3..5 need 2 more, 1 free
		{"reset", 0, 0, false, 3, []int{1, 2, 3}},   // page 1 stays: slot 1 holds it
		{"grow", 2, 5, false, 5, []int{1, 2, 3, 4, 5}},
		{"reset", 1, 0, false, 3, []int{3, 4, 5}}, // page 3 stays for slot 2
	}
	for i, s := range steps {
		var err error
		if s.op == "grow" {
			err = p.resize(s.slot, s.n)
		} else {
			err = p.resize(s.slot, 0)
		}
		if (err != nil) != s.err || (err != nil && !errors.Is(err, ErrNoPages)) {
			t.Fatalf("step %d %s slot %d to %d: error %v, want error %v", i, s.op, s.slot, s.n, err, s.err)
		}
		var got []int
		for k := range f.mapped {
			got = append(got, k)
		}
		slices.Sort(got)
		if p.Used != len(got) || !slices.Equal(got, s.mapped) {
			t.Fatalf("step %d: used %d, mapped %v; want %v", i, p.Used, got, s.mapped)
		}
	}
	if p.Peak != 5 || p.Maps != 6 {
		t.Fatalf("peak %d, maps %d: want 5 and 6", p.Peak, p.Maps)
	}
	// Slot 0 starts on a boundary (2 pages for 5 rows), slots 1 and 2
	// inside one (3 pages).
	if got := p.SlotPages(5); got != 3 {
		t.Fatalf("SlotPages(5) = %d, want 3", got)
	}
}

// TestPagedCacheRefusesUnbackedRows: a step or a prefix copy into rows no
// page backs is an error naming the slot, not a write to unmapped memory;
// after Grow the same step runs, and Truncate gives pages back.
func TestPagedCacheRefusesUnbackedRows(t *testing.T) {
	m := tinyModel(t, true, 1)
	c := m.Cfg
	row := int64(4 * c.NumKeyValueHeads * c.HeadDim)
	page := 4 * row // 4 tokens a page
	kv, err := m.NewPagedKVCache(2, 16, KVPaging{BudgetBytes: 3 * page * int64(2*len(m.P.Layers)), PageBytes: page})
	if err != nil {
		t.Fatal(err)
	}
	if kv.Pages.Budget != 3 {
		t.Fatalf("budget %d pages, want 3", kv.Pages.Budget)
	}
	in := []StepInput{{Slot: 0, Tokens: []int32{1, 2, 3, 4, 5}}}
	if _, err := m.Step(kv, in); err == nil || !strings.Contains(err.Error(), "pages back only 0 rows") {
		t.Fatalf("step into unbacked rows: %v", err)
	}
	if err := kv.Grow(0, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Step(kv, in); err != nil {
		t.Fatal(err)
	}
	if err := m.CopyPrefix(kv, 1, 0, 5); err == nil || !strings.Contains(err.Error(), "Grow first") {
		t.Fatalf("copy into unbacked rows: %v", err)
	}
	if err := kv.Grow(1, 9); !errors.Is(err, ErrNoPages) {
		t.Fatalf("grow past the budget: %v", err)
	}
	if err := kv.Truncate(0, 4); err != nil || kv.Pages.Used != 1 {
		t.Fatalf("truncate to 4 tokens: %v, %d pages in use, want 1", err, kv.Pages.Used)
	}
	if err := kv.Grow(1, 5); err != nil {
		t.Fatal(err)
	}
	if err := m.CopyPrefix(kv, 1, 0, 4); err != nil {
		t.Fatal(err)
	}
}

// TestRecomputeMatchesDecode: a row computed over keys and values that one
// prefill recomputed (a pre-empted rollout's re-admission, sampler.Generate)
// agrees with the row over the keys and values decode steps wrote, to
// float32 rounding: not bit for bit, since a prefill's causal attention
// sums in another order than a decode step's, and the next layers' keys
// and values inherit the difference. Measured 1.2e-6 at most on these
// logits (of magnitude ~1); the tolerance, 1e-5 + 1e-5·|x|, is about eight
// float32 ulps of the largest. A draw flips only if its uniform lands that
// close to a boundary of the cumulative sum.
func TestRecomputeMatchesDecode(t *testing.T) {
	m := tinyModel(t, false, 3)
	toks := []int32{5, 9, 2, 7, 7, 1, 30, 4, 11}
	const prompt = 3
	a, b := m.NewKVCache(1, 16), m.NewKVCache(1, 16)
	if _, err := m.Step(a, []StepInput{{Slot: 0, Tokens: toks[:prompt]}}); err != nil {
		t.Fatal(err)
	}
	for _, tok := range toks[prompt : len(toks)-1] {
		if _, err := m.Step(a, []StepInput{{Slot: 0, Tokens: []int32{tok}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.Step(b, []StepInput{{Slot: 0, Tokens: toks[:len(toks)-1]}}); err != nil {
		t.Fatal(err)
	}
	last := []StepInput{{Slot: 0, Tokens: toks[len(toks)-1:]}}
	la, err := m.Step(a, last)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := m.Step(b, last)
	if err != nil {
		t.Fatal(err)
	}
	var worst float64
	for i := range la[0] {
		d, x := math.Abs(float64(la[0][i]-lb[0][i])), math.Abs(float64(la[0][i]))
		worst = max(worst, d)
		if d > 1e-5+1e-5*x {
			t.Fatalf("logit %d: %v after decode steps, %v after a recomputing prefill", i, la[0][i], lb[0][i])
		}
	}
	t.Logf("max |Δ| %.3g", worst)
}
