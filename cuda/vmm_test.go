package cuda

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/sampler"
)

// TestVirtualMemory: the driver's virtual memory calls as the paged KV
// cache uses them (2 MiB granularity, as on current GPUs): data written
// through a mapped page reads back, a copy touching an unmapped page of a
// reserved range fails with CUDA_ERROR_ILLEGAL_ADDRESS (on the emulator,
// which checks copies' ranges; a GPU may fault later), and a range with a
// page still mapped cannot be freed.
func TestVirtualMemory(t *testing.T) {
	d := testDevice(t)
	drv, dev := d.drv, d.Info.Ordinal
	g, err := drv.MemGranularity(dev)
	if err != nil {
		t.Fatal(err)
	}
	if devKind == "emulator" && g != 2<<20 {
		t.Fatalf("granularity %d, want 2 MiB", g)
	}
	base, err := drv.MemReserve(3*g, g)
	if err != nil {
		t.Fatal(err)
	}
	if base%uint64(g) != 0 {
		t.Fatalf("reserved range at %#x is not aligned to %d", base, g)
	}
	h, err := drv.MemCreate(g, dev)
	if err != nil {
		t.Fatal(err)
	}
	page := base + uint64(g)
	if err := drv.MemMap(page, g, h, dev); err != nil {
		t.Fatal(err)
	}
	host := pinned(t, drv, 64)
	want := unsafe.Slice((*byte)(host), 64)
	for i := range want {
		want[i] = byte(i * 7)
	}
	// Copies into unmapped pages only where they are checked: on a GPU
	// such a copy may fault the context for good.
	emulated := devKind == "emulator"
	if emulated {
		if err := drv.HtoD(page+uint64(g)-32, host, 64); !isCode(err, 700) {
			t.Fatalf("copy across into the unmapped third page: %v, want CUDA_ERROR_ILLEGAL_ADDRESS", err)
		}
	}
	if err := drv.HtoD(page+100, host, 64); err != nil {
		t.Fatal(err)
	}
	back := pinned(t, drv, 64)
	if err := drv.DtoH(back, page+100, 64); err != nil {
		t.Fatal(err)
	}
	if got := unsafe.Slice((*byte)(back), 64); string(got) != string(want) {
		t.Fatalf("read back %v, wrote %v", got, want)
	}
	if emulated {
		if err := drv.DtoH(back, base, 64); !isCode(err, 700) {
			t.Fatalf("copy from the unmapped first page: %v, want CUDA_ERROR_ILLEGAL_ADDRESS", err)
		}
		if err := drv.MemAddressFree(base, 3*g); err == nil {
			t.Fatal("a range with a page mapped was freed")
		}
		if err := drv.MemMap(page, g, h, dev); err == nil {
			t.Fatal("a page mapped twice at the same address")
		}
	}
	if err := drv.MemUnmap(page, g); err != nil {
		t.Fatal(err)
	}
	if emulated {
		if err := drv.DtoH(back, page+100, 64); !isCode(err, 700) {
			t.Fatalf("copy from an unmapped page: %v, want CUDA_ERROR_ILLEGAL_ADDRESS", err)
		}
	}
	if err := drv.MemRelease(h, g); err != nil {
		t.Fatal(err)
	}
	if err := drv.MemAddressFree(base, 3*g); err != nil {
		t.Fatal(err)
	}
}

// isCode reports whether err is a CUDA error with the given code.
func isCode(err error, code int) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// pinned returns n bytes of page-locked host memory (a copy's host side
// must not be Go memory), freed at the end of the test.
func pinned(t *testing.T, drv *driver, n int64) unsafe.Pointer {
	p, err := drv.HostAlloc(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = drv.HostFree(p) })
	return p
}

// pagedModel is graphModel with rows of 512 bytes (4 KV heads of 64 bf16
// dimensions), so that a 4 KiB page holds 8 tokens.
func pagedModel(t *testing.T) *model.Model {
	o := model.DefaultTiny()
	o.KVHeads, o.HeadDim, o.Vocab, o.EOS = 4, 64, 1000, []int{999}
	return graphModel(t, o)
}

// TestPagedGenerateMatches: generation over a paged cache whose budget
// forces pre-emptions gives the tokens of a plain cache with every slot at
// full length, with decode graphs and without; the emulator's granularity
// is 4 KiB here (8 tokens a page) so that short rollouts cross pages.
// Pages come and go under captured graphs, whose kernels keep writing the
// cache's fixed addresses.
func TestPagedGenerateMatches(t *testing.T) {
	t.Setenv("GDROTRAIN_EMU_VMM_GRANULARITY", "4096")
	m := pagedModel(t)
	d := m.B.(*Backend).Device()
	reqs := []sampler.Request{{UID: "a", Prompt: []int32{5, 17, 42}, N: 3}, {UID: "b", Prompt: []int32{8, 1}, N: 2},
		{UID: "c", Prompt: []int32{9}, N: 4}, {UID: "d", Prompt: []int32{300, 301, 302, 303}, N: 2}}
	gen := func(p sampler.Params) (map[string]string, sampler.Stats) {
		t.Helper()
		out, st, err := sampler.GenerateStats(context.Background(), m, reqs, p, nil)
		if err != nil {
			t.Fatalf("%+v: %v", p, err)
		}
		got := map[string]string{}
		for _, cs := range out {
			for _, c := range cs {
				got[fmt.Sprintf("%s/%d", c.UID, c.Index)] = fmt.Sprint(c.Tokens, c.Stopped, c.Truncated)
			}
		}
		return got, st
	}
	row := int64(2 * 4 * 64)
	gran := m.B.(*Backend).KVPageBytes()
	for _, p := range []sampler.Params{{Temperature: 1, TopP: 1}, {Temperature: 0, TopP: 1}} {
		p.MaxNewTokens, p.Seed, p.Step, p.StopIDs, p.MaxSlots = 30, 5, 2, []int32{999, 7}, 4
		p.Graphs = true
		want, _ := gen(p)
		for _, graphs := range []bool{true, false} {
			q := p
			q.Graphs = graphs
			q.KVBudgetBytes = 10 * gran * int64(2*m.Cfg.NumHiddenLayers)
			before := d.Profile().GraphLaunches
			m.B.(*Backend).ResetMemPeak()
			got, st := gen(q)
			// The pool creates pages only as the peak needs them, counts
			// them in the reported peak, and frees them with the cache.
			n := &d.drv.n
			if want := int64(st.PeakPages) * gran * int64(2*m.Cfg.NumHiddenLayers); n.physPeak.Load() != want || n.physBytes.Load() != 0 {
				t.Fatalf("physical pages: peak %d bytes (want %d for %d pages), %d bytes left after the cache's release",
					n.physPeak.Load(), want, st.PeakPages, n.physBytes.Load())
			}
			for k, w := range want {
				if got[k] != w {
					t.Errorf("%+v: %s = %s, with every slot at full length %s", q, k, got[k], w)
				}
			}
			if used := d.Profile().GraphLaunches > before; used != graphs {
				t.Fatalf("graphs %v, graph launches seen %v", graphs, used)
			}
			t.Logf("temperature %v, graphs %v: %d steps, %d pre-emptions, %d tokens recomputed, peak %d of 10 pages of %d tokens",
				q.Temperature, graphs, st.Steps, st.Preemptions, st.Recomputed, st.PeakPages, gran/row)
			if devKind == "emulator" && st.Preemptions == 0 {
				t.Fatalf("graphs %v: no pre-emption: the budget no longer forces any", graphs)
			}
		}
	}
	// Too small for one rollout: refused up front, naming the key.
	q := sampler.Params{Temperature: 1, TopP: 1, MaxNewTokens: 30, MaxSlots: 4, KVBudgetBytes: 2 * gran * int64(2*m.Cfg.NumHiddenLayers)}
	if _, err := sampler.Generate(context.Background(), m, reqs, q, nil); err == nil || !strings.Contains(err.Error(), "sampling.kv_cache_gib") {
		t.Fatalf("a budget of 2 pages: %v, want an error naming sampling.kv_cache_gib", err)
	}
}

// TestPagedNeedsBF16: an fp32 cache cannot be paged (pages hold bf16
// rows); asking is an error, not a silently full-size cache.
func TestPagedNeedsBF16(t *testing.T) {
	m := pagedModel(t)
	m.KVCacheBF16 = false
	if _, err := m.NewPagedKVCache(3, 16, model.KVPaging{BudgetBytes: 1 << 30}); err == nil || !strings.Contains(err.Error(), "precision.kv_cache") {
		t.Fatalf("paged fp32 cache: %v, want an error naming precision.kv_cache", err)
	}
}
