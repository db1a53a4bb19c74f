package cuda

// CUDA graphs for the decode step (model.DeviceSampler, model.GraphSet).
//
// A decode step is ~700 launches of short kernels; issued one by one from
// the host it is bound by launch overhead at small batches. A graph issues
// them with one cuGraphLaunch. Per key (a row bucket) a step runs:
//
//  1. eagerly, once, with the graph's private memory pool (sizing it, so
//     that capture never allocates: CUDA refuses cuMemAlloc in a capture)
//     and counting the bytes of index tables the step uploads;
//  2. captured, the second time: the stream records a copy of the graph's
//     pinned input block to its device twin (the graph's first node), every
//     op of the step (its index tables written into the pinned block, their
//     device addresses pointing into the twin), and a copy of the step's
//     result into a pinned output block; the graph is then launched. The
//     goroutine stays on one OS thread from cuStreamBeginCapture to
//     cuStreamEndCapture, which CUDA requires of a global-mode capture;
//  3. replayed afterwards: the step runs on the host only — ops issue
//     nothing, uploads write the pinned input block at the offsets they had
//     in the capture — and every op's name, launch shape and arguments are
//     folded into a fingerprint that must equal the capture's, then the
//     graph is launched and the stream synchronised once (the step's one
//     host sync) before the pinned output is read.
//
// Replay = eager: the replayed graph runs the captured ops with the same
// arguments; only the table contents differ, and those are what the host
// just wrote. A fingerprint mismatch (a step whose launches changed, say a
// grown RoPE table) issues nothing, so the step reruns eagerly and the key
// is captured again next time.
//
// Memory: each graph owns a private pool (allocator). Before a capture and
// before every replay the pool's free lists are restored to their state at
// the capture's start, so the same sequence of requests gets the same
// blocks (the replay's fingerprint covers the addresses too), and no block
// a graph bakes in is ever handed to anyone else: the main pool's blocks
// are reused in stream order by eager work, which would otherwise
// overwrite a graph's activations between replays, or free them. The
// pinned input block is rewritten by the host only after the previous
// launch's synchronisation, so no queued copy reads a half-written block.

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"unsafe"

	"github.com/gdrotrain/gdrotrain/model"
)

// graphMode is what a step under a graph does with its ops.
type graphMode int

const (
	graphWarm    graphMode = iota + 1 // eager, with the graph's pool, counting upload bytes
	graphCapture                      // recorded into the graph, fingerprinted
	graphReplay                       // fingerprinted only; uploads fill the pinned input
)

// graphOutBytes bounds a step's result (a bucket of 256 rows brings back
// 2 KiB, 5 KiB with exact log-probs).
const graphOutBytes = 1 << 20

// errReplayMismatch reports a replay whose ops differ from the capture's.
var errReplayMismatch = errors.New("the step's ops differ from the captured graph's")

// recorder fingerprints a step's ops (each op's kind, name, shape and
// arguments, folded in word by word) and, when replaying, keeps them from
// being issued.
type recorder struct {
	replay bool
	h      uint64
	ops    int
}

func newRecorder(replay bool) *recorder { return &recorder{replay: replay, h: 14695981039346656037} }

// word folds v in: h ← xorshift((h ⊕ v)·odd), a bijection of h for each v
// and of v for each h, so a sequence differing in one word always ends in
// another fingerprint (several differences collide with odds ≈ 2⁻⁶⁴).
func (r *recorder) word(v uint64) {
	h := (r.h ^ v) * 0x9e3779b97f4a7c15
	r.h = h ^ h>>29
}

func (r *recorder) str(s string) {
	for i := 0; i < len(s); i++ {
		r.h ^= uint64(s[i])
		r.h *= 1099511628211
	}
	r.word(uint64(len(s)))
}

// op folds one op in and reports whether it must be issued.
func (r *recorder) op(kind string, words ...uint64) bool {
	r.ops++
	r.str(kind)
	for _, w := range words {
		r.word(w)
	}
	return !r.replay
}

// argWord is a launch argument's bits, with its type folded in.
func (r *recorder) arg(a any) {
	switch v := a.(type) {
	case uint64:
		r.word(1)
		r.word(v)
	case int64:
		r.word(2)
		r.word(uint64(v))
	case int32:
		r.word(3)
		r.word(uint64(uint32(v)))
	case uint32:
		r.word(4)
		r.word(uint64(v))
	case float32:
		r.word(5)
		r.word(uint64(math.Float32bits(v)))
	case float64:
		r.word(6)
		r.word(math.Float64bits(v))
	default:
		r.word(7)
	}
}

// notCapturable is the error for an op a graph cannot hold.
func notCapturable(what string) error {
	return fmt.Errorf("%s inside a decode graph step (a graph cannot synchronise with the host or read Go memory)", what)
}

// stepGraph is one key's graph and its memory.
type stepGraph struct {
	key     string
	pool    *allocator
	snap    map[int64][]uint64 // the pool's free lists when the capture began
	exec    *GraphExec
	nodes   int    // ops in the graph
	fp      uint64 // the capture's fingerprint
	inBytes int64  // index table bytes a step uploads
	inCap   int64  // bytes of the input blocks as allocated
	inHost  unsafe.Pointer
	inDev   *buffer
	outHost unsafe.Pointer // graphOutBytes
	fails   int            // failed captures; at 2 the key stays eager
}

// graphRun is the backend's state while a step runs under a graph.
type graphRun struct {
	set  *graphSet
	g    *stepGraph
	mode graphMode
	in   int64 // bytes of the input block used so far
	// fresh holds the bf16 copies' ranges the step marked fresh (markFresh,
	// spans.go), put back to stale (undo) if its graph is not launched.
	fresh []freshMark
}

// graphSet is a decode loop's graphs (model.GraphSet).
type graphSet struct {
	b       *Backend
	maxKeys int
	graphs  map[string]*stepGraph
	lastErr error // the last failed capture's reason (tests)
}

// NewGraphSet prepares graphs for a cache of maxKeys keys per slot.
func (b *Backend) NewGraphSet(maxKeys int, ropeTheta float64, headDim int) (model.GraphSet, error) {
	if maxKeys < 1 || headDim < 2 {
		return nil, fmt.Errorf("graph set: %d keys, head dim %d", maxKeys, headDim)
	}
	if _, ok := b.ropeTables(ropeTheta, headDim, maxKeys); !ok {
		return nil, b.Err()
	}
	return &graphSet{b: b, maxKeys: maxKeys, graphs: map[string]*stepGraph{}}, nil
}

// Run runs step under key's graph (see the file comment).
func (s *graphSet) Run(key string, step func() (*model.Tensor, error)) ([]uint32, error) {
	b := s.b
	if b.gr != nil {
		return nil, fmt.Errorf("graph %s: another graph step is running", key)
	}
	if err := b.Err(); err != nil {
		return nil, err
	}
	g := s.graphs[key]
	switch {
	case g != nil && b.graphEager:
		return s.eager(g, step)
	case g == nil:
		g = &stepGraph{key: key, pool: newAllocator(b.d.drv)}
		s.graphs[key] = g
		return s.eager(g, step)
	case g.exec != nil:
		out, err := s.replay(g, step)
		if !errors.Is(err, errReplayMismatch) {
			return out, err
		}
		s.drop(g)
		return s.eager(g, step)
	case g.fails < 2:
		out, err := s.capture(g, step)
		if !errors.Is(err, errCapture) {
			return out, err
		}
		// The step ran into something a graph cannot hold (the error says
		// what): it runs eagerly, and after a second failure always will.
		b.ResetErr()
		g.fails++
		s.lastErr = err
		return s.eager(g, step)
	default:
		return s.eager(g, step)
	}
}

// errCapture marks a failed capture (the step then runs eagerly).
var errCapture = errors.New("capture failed")

// eager runs step with the graph's pool, sizing its input block.
func (s *graphSet) eager(g *stepGraph, step func() (*model.Tensor, error)) ([]uint32, error) {
	b := s.b
	b.gr = &graphRun{set: s, g: g, mode: graphWarm}
	t, err := step()
	in := b.gr.in
	b.gr = nil
	if err != nil {
		return nil, err
	}
	g.inBytes = max(g.inBytes, in)
	words := make([]uint32, t.Numel())
	b.Download(t, unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(words))), len(words)))
	b.Release(t)
	return words, b.Err()
}

// capture records step into g's graph and launches it.
func (s *graphSet) capture(g *stepGraph, step func() (*model.Tensor, error)) ([]uint32, error) {
	b, d := s.b, s.b.d
	if err := s.buffers(g); err != nil {
		return nil, err
	}
	g.snap = g.pool.freeLists()
	// A capture in the global mode must end on the OS thread that began it
	// (cuStreamEndCapture fails with CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD
	// otherwise), and the step between makes hundreds of cgo calls, at any
	// of which the runtime may move an unlocked goroutine to another thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.drv.BeginCapture(d.stream); err != nil {
		return nil, fmt.Errorf("%w: %v", errCapture, err)
	}
	rec := newRecorder(false)
	gr := &graphRun{set: s, g: g, mode: graphCapture}
	d.rec, b.gr = rec, gr
	t, serr := s.body(g, step)
	d.rec, b.gr = nil, nil
	graph, err := d.drv.EndCapture(d.stream)
	if serr != nil || err != nil {
		if graph != nil {
			d.drv.DestroyGraph(graph)
		}
		gr.undo()
		return nil, fmt.Errorf("%w: graph %s: %v", errCapture, g.key, errors.Join(serr, err))
	}
	exec, err := d.drv.Instantiate(graph)
	d.drv.DestroyGraph(graph)
	if err != nil {
		gr.undo()
		return nil, fmt.Errorf("%w: graph %s: %v", errCapture, g.key, err)
	}
	g.exec, g.fp, g.nodes = exec, rec.h, rec.ops
	return s.launch(g, gr, t.Numel())
}

// replay runs step on the host only, checks its fingerprint and launches.
func (s *graphSet) replay(g *stepGraph, step func() (*model.Tensor, error)) ([]uint32, error) {
	b, d := s.b, s.b.d
	g.pool.setFreeLists(g.snap)
	rec := newRecorder(true)
	gr := &graphRun{set: s, g: g, mode: graphReplay}
	d.rec, b.gr = rec, gr
	t, err := s.body(g, step)
	d.rec, b.gr = nil, nil
	if err != nil {
		// Refused by the graph's rules (an allocation its pool cannot
		// serve, say): the step runs eagerly, where a genuine error
		// shows again.
		gr.undo()
		return nil, fmt.Errorf("graph %s: %w: %v", g.key, errReplayMismatch, err)
	}
	if rec.h != g.fp || rec.ops != g.nodes {
		gr.undo()
		return nil, fmt.Errorf("graph %s: %w (%d ops, %d captured)", g.key, errReplayMismatch, rec.ops, g.nodes)
	}
	return s.launch(g, gr, t.Numel())
}

// body is the captured (or replayed) step: the input block's copy, the
// step's ops, the result's copy to the pinned output.
func (s *graphSet) body(g *stepGraph, step func() (*model.Tensor, error)) (*model.Tensor, error) {
	b, d := s.b, s.b.d
	if d.rec.op("h2d", g.inDev.ptr, uint64(g.inBytes)) {
		if err := d.drv.HtoDAsync(g.inDev.ptr, g.inHost, g.inBytes, d.stream); err != nil {
			return nil, err
		}
	}
	t, err := step()
	if err == nil {
		err = b.Err()
	}
	if err != nil {
		b.ResetErr()
		if t != nil {
			b.Release(t)
			b.ResetErr()
		}
		return nil, err
	}
	p, _, ok := b.operand("graph output", 0, t)
	if !ok || int64(t.Numel())*4 > graphOutBytes {
		b.ResetErr()
		return nil, fmt.Errorf("graph %s: output %v does not fit its block", g.key, t.Shape)
	}
	if d.rec.op("d2h", p, uint64(t.Numel())) {
		if err := d.drv.DtoHAsync(g.outHost, p, int64(t.Numel())*4, d.stream); err != nil {
			return nil, err
		}
	}
	b.Release(t)
	return t, b.Err()
}

// launch launches g, the graph of step run gr, and waits for it: the
// step's one host sync.
func (s *graphSet) launch(g *stepGraph, gr *graphRun, n int) ([]uint32, error) {
	d := s.b.d
	if err := d.drv.GraphLaunch(g.exec, d.stream); err != nil {
		gr.undo()
		return nil, fmt.Errorf("graph %s: %w", g.key, err)
	}
	d.prof.mu.Lock()
	d.prof.graphNodes += int64(g.nodes)
	d.prof.mu.Unlock()
	if err := d.Synchronize(); err != nil {
		return nil, fmt.Errorf("graph %s: %w", g.key, err)
	}
	return append([]uint32(nil), unsafe.Slice((*uint32)(g.outHost), n)...), nil
}

// buffers allocates g's pinned blocks and the input's device twin (outside
// any capture).
func (s *graphSet) buffers(g *stepGraph) error {
	b, d := s.b, s.b.d
	g.inBytes = max(g.inBytes, 256)
	if g.inDev != nil && g.inBytes <= g.inCap {
		return nil
	}
	// First capture, or an eager run since the last one uploaded more:
	// (re)make the input block. Nothing reads the old one any more (its
	// graph was dropped, and its last launch waited for).
	s.freeBuffers(g)
	var err error
	if g.inHost, err = d.drv.HostAlloc(g.inBytes); err != nil {
		return err
	}
	if g.outHost, err = d.drv.HostAlloc(graphOutBytes); err != nil {
		return err
	}
	if g.inDev, err = b.allocFrom(d.alloc, int(g.inBytes), 1); err != nil {
		return err
	}
	g.inCap = g.inBytes
	return nil
}

// freeBuffers gives back g's input and output blocks.
func (s *graphSet) freeBuffers(g *stepGraph) {
	d := s.b.d
	s.b.free(g.inDev)
	if g.inHost != nil {
		d.drv.HostFree(g.inHost)
	}
	if g.outHost != nil {
		d.drv.HostFree(g.outHost)
	}
	g.inDev, g.inHost, g.outHost, g.inCap = nil, nil, nil, 0
}

// drop destroys g's graph (it will be captured again).
func (s *graphSet) drop(g *stepGraph) {
	if g.exec != nil {
		s.b.d.drv.DestroyGraphExec(g.exec)
		g.exec = nil
	}
}

// Release frees every graph, its pool and its blocks.
func (s *graphSet) Release() {
	for _, g := range s.graphs {
		s.drop(g)
		g.pool.release()
		s.freeBuffers(g)
	}
	s.graphs = map[string]*stepGraph{}
}

// graphUpload places tables in the graph's input block: in a capture or a
// replay they are written to the pinned block (the graph's first node
// copies it in) and the twin's addresses returned; in the eager first run
// they are only counted (ok false: upload as usual).
func (b *Backend) graphUpload(tables [][]int32) ([]uint64, bool, bool) {
	gr := b.gr
	total := 0
	for _, t := range tables {
		total += len(t)
	}
	need := int64(max(total, 1)+63) / 64 * 256
	off := gr.in
	gr.in += need
	if gr.mode == graphWarm {
		return nil, false, true
	}
	if gr.in > gr.g.inBytes {
		b.keep(fmt.Errorf("graph %s: index tables exceed the input block (%d bytes) sized by the eager run", gr.g.key, gr.g.inBytes))
		return nil, true, false
	}
	out := make([]uint64, len(tables))
	host := unsafe.Slice((*int32)(unsafe.Add(gr.g.inHost, off)), total)
	k := 0
	for i, t := range tables {
		if len(t) > 0 {
			out[i] = gr.g.inDev.ptr + uint64(off) + uint64(4*k)
		}
		k += copy(host[k:], t)
	}
	return out, true, true
}

// freeLists copies the pool's free lists.
func (a *allocator) freeLists() map[int64][]uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[int64][]uint64, len(a.free))
	for k, v := range a.free {
		out[k] = append([]uint64(nil), v...)
	}
	return out
}

// setFreeLists restores lists saved by freeLists: the same blocks (a step
// returns all it takes), in the saved order.
func (a *allocator) setFreeLists(l map[int64][]uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.free = make(map[int64][]uint64, len(l))
	for k, v := range l {
		a.free[k] = append([]uint64(nil), v...)
	}
}
