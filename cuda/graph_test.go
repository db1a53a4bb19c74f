package cuda

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/gdrotrain/gdrotrain/internal/rng"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/sampler"
)

// TestGraphCapture checks the driver's stream capture on its own (on the
// emulator as on a GPU): captured work does not run until the graph is
// launched, each launch runs it again in order, a host-to-device copy reads
// its pinned source when the graph runs (not when it was captured), and an
// allocation or a synchronisation inside a capture invalidates it with
// CUDA's errors.
func TestGraphCapture(t *testing.T) {
	d := testDevice(t)
	drv := d.drv
	// Each capture here must end on the OS thread that began it, as in
	// graph.go (TestGraphCaptureThread).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	dev, _, err := d.alloc.get(4 * 64)
	if err != nil {
		t.Fatal(err)
	}
	defer d.alloc.put(dev, roundSize(4*64))
	pin, err := drv.HostAlloc(4 * 64)
	if err != nil {
		t.Fatal(err)
	}
	defer drv.HostFree(pin)
	host := unsafe.Slice((*uint32)(pin), 64)
	read := func() []uint32 {
		out := make([]uint32, 64)
		if err := d.copyOut(unsafe.Pointer(&out[0]), dev, 4*64); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if err := d.memset32(dev, 0, 64); err != nil {
		t.Fatal(err)
	}

	// Capture: fill with 7, then copy 16 words in from pinned memory.
	if err := drv.BeginCapture(d.stream); err != nil {
		t.Fatal(err)
	}
	if st, err := drv.IsCapturing(d.stream); err != nil || st != 1 {
		t.Fatalf("capture status %d (%v), want 1 (active)", st, err)
	}
	must := func(err error) {
		if err != nil {
			drv.EndCapture(d.stream)
			t.Fatal(err)
		}
	}
	must(drv.MemsetD32Async(dev, 7, 64, d.stream))
	host[0] = 111
	must(drv.HtoDAsync(dev, pin, 4*16, d.stream))
	g, err := drv.EndCapture(d.stream)
	if err != nil {
		t.Fatal(err)
	}
	if got := read(); got[0] != 0 || got[20] != 0 {
		t.Fatalf("captured work ran during the capture: %v", got[:4])
	}
	x, err := drv.Instantiate(g)
	if err != nil {
		t.Fatal(err)
	}
	drv.DestroyGraph(g)
	defer drv.DestroyGraphExec(x)
	for i, v := range []uint32{5, 9} {
		for k := range 16 {
			host[k] = v + uint32(k)
		}
		if err := drv.GraphLaunch(x, d.stream); err != nil {
			t.Fatal(err)
		}
		if err := d.Synchronize(); err != nil {
			t.Fatal(err)
		}
		got := read()
		if got[0] != v || got[15] != v+15 || got[16] != 7 || got[63] != 7 {
			t.Errorf("launch %d: got %v…, want the pinned words as they are at launch (%d…) then 7s", i, got[:18], v)
		}
	}

	// Forbidden calls: each invalidates the capture.
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"allocation", func() error { _, err := drv.MemAlloc(4096); return err }},
		{"stream sync", func() error { return drv.StreamSync(d.stream) }},
		{"synchronous copy", func() error { return drv.HtoD(dev, pin, 4) }},
	} {
		if err := drv.BeginCapture(d.stream); err != nil {
			t.Fatal(err)
		}
		err := c.call()
		_, endErr := drv.EndCapture(d.stream)
		if err == nil || !strings.Contains(err.Error(), "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED") {
			t.Errorf("%s during a capture: %v, want CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", c.name, err)
		}
		if endErr == nil || !strings.Contains(endErr.Error(), "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED") {
			t.Errorf("%s during a capture: end capture %v, want CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", c.name, endErr)
		}
	}
	if st, err := drv.IsCapturing(d.stream); err != nil || st != 0 {
		t.Fatalf("capture status %d (%v) after the captures, want 0", st, err)
	}
}

// graphModel is a tiny policy as generation runs it: bf16 products on bf16
// weight copies, a bf16 KV cache.
func graphModel(t *testing.T, o model.RandomOptions) *model.Model {
	t.Helper()
	b := NewBackend(testDevice(t), BF16)
	cfg, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
	m := &model.Model{Cfg: cfg, B: b, P: model.RandomParams(b, cfg, 3, 0.5, 0), KVCacheBF16: true}
	if _, err := m.ShadowWeights(); err != nil {
		t.Fatal(err)
	}
	return m
}

// decodeRun is a scripted decode loop over a cache of slots+1 slots: rows
// start and finish at different steps, so the batch (and its bucket)
// shrinks and grows; each row's tokens come from its own draws.
type decodeRun struct {
	tokens [][]int32
	lps    [][]float32
	ents   [][]float32 // with p.ExactLogProbs
	steps  map[int]int
}

// checkReplays checks that a graphed run of n tokens covered several
// buckets with several hundred tokens and that its steps past each
// bucket's first two (the eager one and the capture) were graph launches
// (at least one); it returns the steps run.
func (r decodeRun) checkReplays(t *testing.T, n int, launches int64) int {
	t.Helper()
	steps := 0
	for _, s := range r.steps {
		steps += s
	}
	if n < 300 || len(r.steps) < 3 {
		t.Fatalf("%d tokens over buckets %v: want several hundred over at least 3 buckets", n, r.steps)
	}
	if replays := int64(steps - 2*len(r.steps)); launches < replays || replays < 1 {
		t.Errorf("%d graph launches over %d steps in buckets %v, want at least %d", launches, steps, r.steps, replays)
	}
	return steps
}

func runDecode(t *testing.T, m *model.Model, slots int, p model.SampleParams, eager bool) decodeRun {
	t.Helper()
	b := m.B.(*Backend)
	b.graphEager = eager
	defer func() { b.graphEager = false }()
	const maxLen = 64
	kv := m.NewKVCache(slots+1, maxLen)
	defer kv.Release()
	dg, err := m.NewDecodeGraph(kv, p)
	if err != nil {
		t.Fatal(err)
	}
	defer dg.Release()
	// Row r holds a prompt of 2+r%3 tokens, joins at step r and stops after
	// 20+(7·r)%25 tokens.
	rows := 2 * slots
	run := decodeRun{tokens: make([][]int32, rows), lps: make([][]float32, rows), ents: make([][]float32, rows)}
	slotOf := map[int]int{}
	var free []int
	for s := slots - 1; s >= 0; s-- {
		free = append(free, s)
	}
	next := 0
	for step := 0; ; step++ {
		for next < rows && next <= step && len(free) > 0 {
			s := free[len(free)-1]
			free = free[:len(free)-1]
			kv.Reset(s)
			prompt := make([]int32, 2+next%3)
			for i := range prompt {
				prompt[i] = int32((next*31 + i*7) % m.Cfg.VocabSize)
			}
			if _, err := m.Step(kv, []model.StepInput{{Slot: s, Tokens: prompt}}); err != nil {
				t.Fatal(err)
			}
			run.tokens[next] = []int32{prompt[len(prompt)-1]}
			slotOf[next] = s
			next++
		}
		var in []model.StepInput
		var draws []model.Draw
		var who []int
		for r := range next {
			s, live := slotOf[r]
			if !live {
				continue
			}
			if len(run.tokens[r]) > 20+(7*r)%25 {
				delete(slotOf, r)
				free = append(free, s)
				continue
			}
			in = append(in, model.StepInput{Slot: s, Tokens: run.tokens[r][len(run.tokens[r])-1:]})
			draws = append(draws, model.Draw{Key: rng.Key(11, uint64(r)), Counter: uint64(len(run.tokens[r]))})
			who = append(who, r)
		}
		if len(in) == 0 {
			if next == rows {
				break
			}
			continue
		}
		toks, lps, ents, err := dg.Step(in, draws)
		if err != nil {
			t.Fatal(err)
		}
		if (ents != nil) != p.ExactLogProbs {
			t.Fatalf("exact log-probs %v, entropies %v", p.ExactLogProbs, ents)
		}
		for i, r := range who {
			run.tokens[r] = append(run.tokens[r], toks[i])
			run.lps[r] = append(run.lps[r], lps[i])
			if ents != nil {
				run.ents[r] = append(run.ents[r], ents[i])
			}
		}
		stompMainPool(b, m.Cfg, dg.Bucket(len(in)))
	}
	run.steps = dg.Steps
	return run
}

// stompMainPool fills main-pool blocks of the sizes a step of R rows uses
// with NaN and gives them back: were a graph's buffers in the main pool
// (handed to eager work between replays), its next replay would read NaN.
func stompMainPool(b *Backend, c *model.Config, R int) {
	var ts []*model.Tensor
	for _, n := range []int{R * c.HiddenSize, R * c.VocabSize, 2 * R * c.IntermediateSize, R * c.NumAttentionHeads * c.HeadDim} {
		t := b.New(n)
		b.Scale(t, float32(math.NaN()))
		ts = append(ts, t)
	}
	b.Release(ts...)
}

// TestDecodeGraphReplayEqualsEager: graphed decoding gives the tokens and
// log-probs of the same steps run eagerly, bit for bit, token for token,
// over several hundred tokens while rows finish at different times and the
// bucket changes (greedy, unfiltered and top-k + top-p draws), with
// prefills and NaN-filled main-pool blocks between the steps (pool
// safety: a graph's memory is its own); the graphs were replayed and
// nothing leaked. Under -short, the top-k + top-p draws only.
func TestDecodeGraphReplayEqualsEager(t *testing.T) {
	o := model.DefaultTiny()
	o.Vocab = 1000
	m := graphModel(t, o)
	d := m.B.(*Backend).Device()
	for _, c := range []struct {
		name string
		p    model.SampleParams
	}{
		{"greedy", model.SampleParams{Temperature: 0, TopP: 1}},
		{"unfiltered", model.SampleParams{Temperature: 1, TopP: 1}},
		{"top-k top-p", model.SampleParams{Temperature: 0.7, TopK: 20, TopP: 0.9}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if testing.Short() && c.name != "top-k top-p" {
				t.Skip("-short: the filtered draw only")
			}
			want := runDecode(t, m, 6, c.p, true)
			before := d.MemStats() // after the backend's caches (index tables, RoPE) are made
			p0 := d.Profile()
			got := runDecode(t, m, 6, c.p, false)
			prof := d.Profile().Sub(p0)
			n := 0
			for r := range want.tokens {
				if fmt.Sprint(got.tokens[r]) != fmt.Sprint(want.tokens[r]) {
					t.Fatalf("row %d: graphed %v, eager %v", r, got.tokens[r], want.tokens[r])
				}
				for k := range want.lps[r] {
					if math.Float32bits(got.lps[r][k]) != math.Float32bits(want.lps[r][k]) {
						t.Fatalf("row %d token %d: graphed log-prob %v, eager %v", r, k, got.lps[r][k], want.lps[r][k])
					}
				}
				n += len(want.lps[r])
			}
			steps := got.checkReplays(t, n, prof.GraphLaunches)
			// Live + leaked: earlier tests' garbage that the collector
			// finds meanwhile moves from live to leaked, a buffer this
			// test left behind adds to one or the other.
			if after := d.MemStats(); after.Live+after.Leaked != before.Live+before.Leaked {
				t.Errorf("buffers: %d live, %d leaked before; %d, %d after", before.Live, before.Leaked, after.Live, after.Leaked)
			}
			t.Logf("%d tokens, %d steps in buckets %v, %d graph launches", n, steps, got.steps, prof.GraphLaunches)
		})
	}
}

// TestGenerateGraphsDeterministic: sampler.Generate with graphs gives the
// same completions whatever the slot count and the order of the requests,
// and the same as without graphs (the draws' uniforms are the host's bit
// for bit; the rare boundary case TestDeviceDrawMatchesHost measures did
// not occur here). Under -short, the top-k + top-p draws against two of the
// variants.
func TestGenerateGraphsDeterministic(t *testing.T) {
	o := model.DefaultTiny()
	o.Vocab = 1000
	o.EOS = []int{999}
	m := graphModel(t, o)
	d := m.B.(*Backend).Device()
	reqs := []sampler.Request{{UID: "a", Prompt: []int32{5, 17, 42}, N: 3}, {UID: "b", Prompt: []int32{8, 1}, N: 2},
		{UID: "c", Prompt: []int32{9}, N: 4}, {UID: "d", Prompt: []int32{300, 301, 302, 303}, N: 1}}
	params := []sampler.Params{{Temperature: 1, TopP: 1}, {Temperature: 0.6, TopK: 20, TopP: 0.8}, {Temperature: 0, TopP: 1}}
	type variant struct {
		slots           int
		graphs, reverse bool
	}
	variants := []variant{{4, true, false}, {5, true, true}, {16, true, true}, {8, false, false}}
	if testing.Short() {
		// The filtered draw, with other slots and the requests reversed,
		// and without graphs.
		params, variants = params[1:2], []variant{{5, true, true}, {8, false, false}}
	}
	for _, p := range params {
		p.MaxNewTokens, p.Seed, p.Step, p.StopIDs = 30, 5, 2, []int32{999, 7}
		gen := func(slots int, graphs, reverse bool) map[string]string {
			q := p
			q.MaxSlots, q.Graphs = slots, graphs
			rs := append([]sampler.Request(nil), reqs...)
			if reverse {
				for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
					rs[i], rs[j] = rs[j], rs[i]
				}
			}
			before := d.Profile().GraphLaunches
			out, err := sampler.Generate(context.Background(), m, rs, q, nil)
			if err != nil {
				t.Fatal(err)
			}
			if used := d.Profile().GraphLaunches > before; used != graphs {
				t.Fatalf("%+v, %d slots: graphs asked %v, graph launches seen %v", q, slots, graphs, used)
			}
			got := map[string]string{}
			for _, cs := range out {
				for _, c := range cs {
					got[fmt.Sprintf("%s/%d", c.UID, c.Index)] = fmt.Sprint(c.Tokens, c.Stopped, c.Truncated)
				}
			}
			return got
		}
		want := gen(8, true, false)
		for _, c := range variants {
			got := gen(c.slots, c.graphs, c.reverse)
			for k, w := range want {
				if got[k] != w {
					t.Errorf("%+v, %d slots, graphs %v, reversed %v: %s = %s, want %s", p, c.slots, c.graphs, c.reverse, k, got[k], w)
				}
			}
		}
	}
}

// TestDeviceDrawMatchesHost measures how often the device draw picks
// another token than sampler.Sample on the same logits with the same
// uniform: the uniforms are the same bits, so only the float64 sums (in
// another order, with the device's exp) can move a boundary, by a few
// ulps. Over 12,288 draws on random rows (2,048 under -short) none differ
// on the emulator; the bound allows 1 in 1,000.
func TestDeviceDrawMatchesHost(t *testing.T) {
	b := NewBackend(testDevice(t), FP32)
	const R, V = 256, 3000
	rnd := rand.New(rand.NewPCG(4, 5))
	host := make([]float32, R*V)
	for i := range host {
		host[i] = float32(rnd.NormFloat64() * 3)
	}
	logits := b.New(R, V)
	b.Upload(logits, host)
	out := b.New(R, 2)
	defer b.Release(logits, out)
	total, differ := 0, 0
	reps := 12
	if testing.Short() {
		reps = 2 // 2,048 draws: the bound still allows 2
	}
	for _, p := range []model.SampleParams{{Temperature: 1, TopP: 1}, {Temperature: 0.6, TopK: 20, TopP: 0.8},
		{Temperature: 1.3, TopK: 50, TopP: 1}, {Temperature: 0, TopP: 1}} {
		for rep := range reps {
			draws := make([]model.Draw, R)
			for r := range draws {
				draws[r] = model.Draw{Key: rng.Key(uint64(rep), uint64(r)), Counter: uint64(rep*7 + r)}
			}
			b.SampleTokens(out, logits, draws, p)
			got := make([]float32, 2*R)
			b.Download(out, got)
			if err := b.Err(); err != nil {
				t.Fatal(err)
			}
			for r := range R {
				u := rng.Uniform(draws[r].Key, draws[r].Counter)
				tok, lp := sampler.Sample(host[r*V:(r+1)*V], p.Temperature, p.TopK, p.TopP, u)
				gt := int32(math.Float32bits(got[2*r]))
				total++
				if gt != tok {
					differ++
					continue
				}
				// Both log-probs are float32 roundings of float64 logs
				// whose inputs differ by a few float64 ulps at most: 1e-5
				// is far above that and far below a wrong token's error.
				if d := math.Abs(float64(got[2*r+1] - lp)); d > 1e-5 {
					t.Errorf("%+v row %d: log-prob %v, host %v", p, r, got[2*r+1], lp)
				}
			}
		}
	}
	t.Logf("device draws differing from the host's: %d of %d", differ, total)
	if differ*1000 > total {
		t.Errorf("%d of %d device draws differ from the host's, want at most 1 in 1,000", differ, total)
	}
}

// TestGraphStepErrors: what a graph cannot hold is refused with an error
// naming it, and the step still runs (eagerly): a download (a host sync)
// and an allocation the graph's pool cannot serve fail the capture; a step
// whose launches changed since the capture, or whose index tables outgrew
// the graph's input block, is not replayed (its fingerprint differs, or it
// is refused) but run eagerly and captured again.
func TestGraphStepErrors(t *testing.T) {
	b := NewBackend(testDevice(t), FP32)
	d := b.Device()
	set, err := b.NewGraphSet(64, 1e6, 16)
	if err != nil {
		t.Fatal(err)
	}
	gs := set.(*graphSet)
	defer gs.Release()
	x := b.New(4)
	defer b.Release(x)
	b.Upload(x, []float32{1, 2, 3, 4})
	run := func(key string, step func() (*model.Tensor, error)) []float32 {
		t.Helper()
		words, err := gs.Run(key, step)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		out := make([]float32, len(words))
		for i, w := range words {
			out[i] = math.Float32frombits(w)
		}
		return out
	}
	for _, c := range []struct {
		key, want string
		step      func() (*model.Tensor, error)
	}{
		{"download", "a download inside a decode graph step", func() (*model.Tensor, error) {
			out := b.Scratch(4)
			b.Copy(out, x)
			host := make([]float32, 4)
			b.Download(x, host)
			return out, b.Err()
		}},
		{"allocation", "a capture or replay cannot allocate", func() func() (*model.Tensor, error) {
			n := 4
			return func() (*model.Tensor, error) {
				big := b.Scratch(n)
				n += 4096 // a larger block each time: only the eager run may reach cuMemAlloc
				out := b.Scratch(4)
				b.Copy(out, x)
				b.Release(big)
				return out, b.Err()
			}
		}()},
	} {
		for i := range 3 {
			gs.lastErr = nil
			if got := run(c.key, c.step); fmt.Sprint(got) != "[1 2 3 4]" {
				t.Errorf("%s, run %d: got %v, want x", c.key, i, got)
			}
			if i == 1 && (gs.lastErr == nil || !strings.Contains(gs.lastErr.Error(), c.want)) {
				t.Errorf("%s: capture error %v, want one saying %q", c.key, gs.lastErr, c.want)
			}
		}
		if g := gs.graphs[c.key]; g.exec != nil || g.fails != 2 {
			t.Errorf("%s: graph captured (%v) after %d failures", c.key, g.exec != nil, g.fails)
		}
		if b.Err() != nil {
			t.Fatalf("%s: backend error left behind: %v", c.key, b.Err())
		}
	}
	// A scalar argument that changes: run 1 eager, 2 captured, 3 refused
	// (eager), 4 captured again, 5 replayed.
	v := float32(1)
	scale := func() (*model.Tensor, error) {
		out := b.Scratch(4)
		b.Copy(out, x)
		b.Scale(out, v)
		return out, b.Err()
	}
	launches := []int64{0, 1, 0, 1, 1}
	for i, nv := range []float32{1, 2, 3, 4, 4} {
		v = nv
		before := d.Profile().GraphLaunches
		got := run("scale", scale)
		if want := fmt.Sprint([]float32{nv, 2 * nv, 3 * nv, 4 * nv}); fmt.Sprint(got) != want {
			t.Errorf("scale run %d: got %v, want %s", i, got, want)
		}
		if n := d.Profile().GraphLaunches - before; n != launches[i] {
			t.Errorf("scale run %d: %d graph launches, want %d", i, n, launches[i])
		}
	}
	// Index tables that grow: run 3 is refused (its table no longer fits
	// the input block), run 4 captured with a larger block, run 5 replayed.
	n := 4
	gather := func() (*model.Tensor, error) {
		idx := make([]int32, n)
		for i := range idx {
			idx[i] = int32(3 - i%4)
		}
		out := b.Scratch(n)
		b.GatherRows(out.View(n, 1), x.View(4, 1), idx)
		return out, b.Err()
	}
	for i, nn := range []int{4, 4, 100, 100, 100} {
		n = nn
		before := d.Profile().GraphLaunches
		got := run("gather", gather)
		if len(got) != nn || got[0] != 4 || got[nn-1] != float32(4-(nn-1)%4) {
			t.Errorf("gather run %d: got %v", i, got)
		}
		if got := d.Profile().GraphLaunches - before; got != launches[i] {
			t.Errorf("gather run %d: %d graph launches, want %d", i, got, launches[i])
		}
	}
}

// leaveThread tries to move the calling goroutine off its OS thread, and
// keeps that thread busy until release is called, so the goroutine cannot
// come back to it meanwhile: a helper goroutine that finds itself on the
// caller's thread (it is the next to run there once the caller blocks)
// locks itself to that thread and blocks, so the caller resumes on
// another. The helper lands elsewhere now and then; up to 100 tries. A
// goroutine locked to its thread never moves (the helper can never run on
// it). moved reports whether the caller now runs on another thread.
func leaveThread() (moved bool, release func()) {
	before := syscall.Gettid()
	for range 100 {
		hold := make(chan struct{})
		took := make(chan bool)
		go func() {
			if syscall.Gettid() != before {
				took <- false
				return
			}
			runtime.LockOSThread()
			took <- true
			<-hold
			runtime.UnlockOSThread()
		}()
		if <-took {
			return syscall.Gettid() != before, func() { close(hold) }
		}
	}
	return false, func() {}
}

// TestGraphCaptureThread: a capture in the global mode must end on the OS
// thread that began it. At the driver level (on the emulator as on a GPU)
// ending it from another thread fails with
// CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD and leaves the capture invalidated
// until its own thread ends it, and an allocation from another thread
// invalidates it as well. At the graph level, the goroutine is pushed off
// its thread in the middle of a step's capture and the capture must still
// succeed: graph.go holds the goroutine on its thread for the capture's
// duration (without that the capture fails and the step runs eagerly).
func TestGraphCaptureThread(t *testing.T) {
	b := NewBackend(testDevice(t), FP32)
	d := b.Device()
	drv := d.drv
	// onThread runs f on a goroutine locked to an OS thread of its own.
	onThread := func(f func()) {
		done := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			defer close(done)
			f()
		}()
		<-done
	}
	// capture begins a capture on a locked thread of its own, runs
	// meanwhile on another OS thread, then ends the capture on the first.
	capture := func(meanwhile func()) (beginErr, endErr error) {
		begin, end := make(chan struct{}), make(chan struct{})
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			beginErr = drv.BeginCapture(d.stream)
			close(begin)
			<-end
			_, endErr = drv.EndCapture(d.stream)
			close(end)
		}()
		<-begin
		onThread(meanwhile)
		end <- struct{}{}
		<-end
		return beginErr, endErr
	}
	var otherErr, allocErr error
	status := -1
	beginErr, endErr := capture(func() {
		_, otherErr = drv.EndCapture(d.stream)
		status, _ = drv.IsCapturing(d.stream)
	})
	if beginErr != nil {
		t.Fatal(beginErr)
	}
	if otherErr == nil || !strings.Contains(otherErr.Error(), "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD") {
		t.Errorf("end capture on another thread: %v, want CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", otherErr)
	}
	if status != 2 {
		t.Errorf("capture status after the wrong thread's end: %d, want 2 (invalidated, still capturing)", status)
	}
	if endErr == nil || !strings.Contains(endErr.Error(), "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED") {
		t.Errorf("end capture on its own thread after that: %v, want CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", endErr)
	}
	beginErr, endErr = capture(func() {
		var p uint64
		if p, allocErr = drv.MemAlloc(4096); allocErr == nil {
			drv.MemFree(p)
		}
	})
	if beginErr != nil {
		t.Fatal(beginErr)
	}
	if allocErr == nil || !strings.Contains(allocErr.Error(), "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED") {
		t.Errorf("allocation on another thread during a global capture: %v, want CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", allocErr)
	}
	if endErr == nil || !strings.Contains(endErr.Error(), "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED") {
		t.Errorf("end capture after another thread's allocation: %v, want CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", endErr)
	}

	set, err := b.NewGraphSet(64, 1e6, 16)
	if err != nil {
		t.Fatal(err)
	}
	gs := set.(*graphSet)
	defer gs.Release()
	x := b.New(4)
	defer b.Release(x)
	b.Upload(x, []float32{1, 2, 3, 4})
	moves := 0
	for i := range 2 { // run 0 eager, run 1 captured
		var release func()
		words, err := gs.Run("scale", func() (*model.Tensor, error) {
			out := b.Scratch(4)
			b.Copy(out, x)
			if i == 1 {
				var moved bool
				moved, release = leaveThread()
				if moved {
					moves++
				}
			}
			b.Scale(out, 2)
			return out, b.Err()
		})
		if release != nil {
			release()
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(words); got != fmt.Sprint([]uint32{0x40000000, 0x40800000, 0x40c00000, 0x41000000}) {
			t.Errorf("run %d: got %v, want 2·x", i, got)
		}
	}
	if g := gs.graphs["scale"]; g.exec == nil || gs.lastErr != nil {
		t.Errorf("the capture failed when its goroutine was pushed off its thread: %v", gs.lastErr)
	}
	t.Logf("goroutine moved during the capture: %d time(s)", moves)
}
