package sampler

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/model"
)

// pagedScripted is the scripted model with a paged cache whose page holds
// pageRows tokens (rows of 1 byte, one range), and which refuses to write
// or copy into rows no page backs, as the CUDA backend's unmapped memory
// would.
type pagedScripted struct {
	*scripted
	pageRows int
}

func (m *pagedScripted) NewPagedKVCache(slots, maxLen int, pg model.KVPaging) (*model.KVCache, error) {
	kv := m.NewKVCache(slots, maxLen)
	return kv, kv.AccountPages(1, 1, model.KVPaging{BudgetBytes: pg.BudgetBytes, PageBytes: int64(m.pageRows)})
}

func (m *pagedScripted) CopyPrefix(kv *model.KVCache, dst, src, n int) error {
	if kv.Pages.Rows(dst) < n {
		return fmt.Errorf("copy %d tokens into slot %d backed for %d", n, dst, kv.Pages.Rows(dst))
	}
	return m.scripted.CopyPrefix(kv, dst, src, n)
}

func (m *pagedScripted) Step(kv *model.KVCache, in []model.StepInput) ([][]float32, error) {
	for _, s := range in {
		if n := kv.Len[s.Slot] + len(s.Tokens); kv.Pages.Rows(s.Slot) < n {
			return nil, fmt.Errorf("slot %d: %d tokens, backed for %d", s.Slot, n, kv.Pages.Rows(s.Slot))
		}
	}
	return m.scripted.Step(kv, in)
}

// historyLogits make a rollout's length and tokens depend on its whole
// history, so a recomputed prefix that differed would show.
func historyLogits(h []int32) []float32 {
	l := make([]float32, 16)
	sum := 0
	for _, x := range h {
		sum = sum*7 + int(x)
	}
	for i := range l {
		l[i] = float32(math.Sin(float64(sum%1000*13+i*5+len(h)))) * 1.5
	}
	l[0] = float32(len(h)%5) - 2.5
	return l
}

// TestPreemptionKeepsTokens: under page budgets too tight for every slot
// to run (rollouts pre-empted, re-admitted by recomputation, prompts whose
// home slot was pre-empted re-prefilled), every completion is the one an
// unconstrained run draws; the pages in use never pass the budget.
func TestPreemptionKeepsTokens(t *testing.T) {
	reqs := []Request{{UID: "a", Prompt: []int32{3, 1}, N: 5}, {UID: "b", Prompt: []int32{4}, N: 1},
		{UID: "c", Prompt: []int32{1, 5, 9}, N: 7}, {UID: "d", Prompt: []int32{2, 6}, N: 3},
		{UID: "e", Prompt: []int32{7, 7, 7, 7, 7, 7, 7}, N: 2}}
	p := base()
	p.StopIDs, p.MaxNewTokens, p.MaxSlots = []int32{0}, 24, 64
	want := gen(t, newScripted(16, historyLogits), reqs, p)
	total, rehomed := 0, 0
	for _, c := range []struct{ slots, pageRows, pages int }{
		{3, 4, 9}, {5, 4, 9}, {5, 4, 12}, {8, 3, 12}, {8, 7, 6}, {4, 1, 40}, {16, 5, 10},
	} {
		p.MaxSlots, p.KVBudgetBytes = c.slots, int64(c.pages*c.pageRows)
		lm := &pagedScripted{newScripted(16, historyLogits), c.pageRows}
		got, st, err := GenerateStats(context.Background(), lm, reqs, p, nil)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		for i := range want {
			for j := range want[i] {
				if !equalTokens(want[i][j].Tokens, got[i][j].Tokens) || got[i][j].Stopped != want[i][j].Stopped {
					t.Fatalf("%+v: request %d rollout %d: %v, unconstrained %v", c, i, j, got[i][j].Tokens, want[i][j].Tokens)
				}
			}
		}
		if st.PeakPages > c.pages {
			t.Fatalf("%+v: %d pages in use at the peak", c, st.PeakPages)
		}
		t.Logf("%+v: %d steps, %d pre-emptions, %d prompts re-homed, %d tokens recomputed, peak %d pages",
			c, st.Steps, st.Preemptions, st.Rehomed, st.Recomputed, st.PeakPages)
		total += st.Preemptions
		rehomed += st.Rehomed
	}
	if total < 20 || rehomed == 0 {
		t.Fatalf("%d pre-emptions, %d prompts re-homed in all: the budgets no longer force both", total, rehomed)
	}
}

// TestPagedBudgetTooSmall: a budget that cannot hold one full-length
// rollout is refused up front, naming the config key.
func TestPagedBudgetTooSmall(t *testing.T) {
	p := base()
	p.MaxNewTokens, p.MaxSlots, p.KVBudgetBytes = 20, 4, 5*4
	lm := &pagedScripted{newScripted(16, historyLogits), 4}
	_, err := Generate(context.Background(), lm, []Request{{UID: "a", Prompt: []int32{1, 2, 3}, N: 2}}, p, nil)
	if err == nil || !strings.Contains(err.Error(), "sampling.kv_cache_gib") {
		t.Fatalf("error %v, want one naming sampling.kv_cache_gib", err)
	}
	// A model that cannot page is refused too, not silently unpaged.
	if _, err := Generate(context.Background(), newScripted(16, historyLogits), []Request{{UID: "a", Prompt: []int32{1}, N: 1}}, p, nil); err == nil {
		t.Fatal("a budget for a model without paging was accepted")
	}
}

// TestPreemptionMatchesOnCPUModel: the tiny model on the CPU backend, its
// paged cache accounting bf16-sized pages of 4 tokens, gives the same
// completions under a budget that pre-empts as with every slot at full
// length (recomputed keys and values are the decoded ones).
func TestPreemptionMatchesOnCPUModel(t *testing.T) {
	m := tinyCPUModel(t)
	cfg := m.Cfg
	rnd := rand.New(rand.NewPCG(2, 2))
	var reqs []Request
	for i := range 4 {
		prompt := make([]int32, 2+3*i)
		for j := range prompt {
			prompt[j] = int32(rnd.IntN(cfg.VocabSize))
		}
		reqs = append(reqs, Request{UID: fmt.Sprint("p", i), Prompt: prompt, N: 1 + i%3})
	}
	p := Params{Temperature: 1, TopP: 1, MaxNewTokens: 14, MaxSlots: 4, Seed: 3}
	want := gen(t, m, reqs, p)
	row := int64(4 * cfg.NumKeyValueHeads * cfg.HeadDim) // the CPU cache's float32 rows
	p.KVPageBytes = 4 * row
	p.KVBudgetBytes = 9 * p.KVPageBytes * int64(2*cfg.NumHiddenLayers)
	got, st, err := GenerateStats(context.Background(), m, reqs, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		for j := range want[i] {
			if !equalTokens(want[i][j].Tokens, got[i][j].Tokens) {
				t.Fatalf("request %d rollout %d: %v, unconstrained %v", i, j, got[i][j].Tokens, want[i][j].Tokens)
			}
		}
	}
	if st.Preemptions == 0 {
		t.Fatal("no pre-emption: the budget no longer forces any")
	}
	t.Logf("%d steps, %d pre-emptions, peak %d pages", st.Steps, st.Preemptions, st.PeakPages)
}
