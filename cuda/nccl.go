package cuda

// Collectives between the GPUs of a training job, one process per GPU,
// through NCCL loaded at run time (libnccl.so.2, found like the other CUDA
// libraries: GDROTRAIN_CUDA_LIB_DIR first; libs.go). Rank 0 makes a
// UniqueID, the dist package carries it to every rank, and each rank opens
// a Comm on its device's compute stream (stream.go), so a collective runs
// in order with the kernels that produce and consume its tensors.
//
// NCCL has no time limit of its own: a rank that dies or never arrives
// leaves the others waiting forever, inside the call or on the stream. So
// every call here runs under a watchdog: the call is made on its own
// goroutine, then the stream is polled (cuStreamQuery) together with
// ncclCommGetAsyncError until the work has run; past the Comm's timeout, or
// on an asynchronous error, the communicator is aborted (ncclCommAbort,
// which also ends a call blocked in it) and the error names this rank, the
// collective and its size. A failed Comm refuses further calls: a job whose
// ranks disagree cannot go on, and each rank should exit.
//
// Each collective waits for its own completion before returning (a host
// sync), which is what the data-parallel step needs now; overlapping
// gradient buckets with the backward pass would add an asynchronous variant.

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gdrotrain/gdrotrain/model"
)

// UniqueID is NCCL's ncclUniqueId: 128 opaque bytes made by rank 0 and given
// to every rank of the communicator.
type UniqueID [ncclIDBytes]byte

// ErrCommTimeout is wrapped by the error of a collective, or of OpenComm,
// that did not finish within the Comm's time limit.
var ErrCommTimeout = errors.New("timed out")

// abortGrace bounds the wait for ncclCommAbort and for the call it ends.
const abortGrace = 10 * time.Second

var (
	ncclMu     sync.Mutex
	ncclLoaded *ncclLib
)

// openNCCL loads libnccl once per process.
func openNCCL() (*ncclLib, error) {
	ncclMu.Lock()
	defer ncclMu.Unlock()
	if ncclLoaded != nil {
		return ncclLoaded, nil
	}
	lib, err := openLibrary("nccl", 0)
	if err != nil {
		return nil, err
	}
	n, err := loadNCCL(lib)
	if err != nil {
		return nil, fmt.Errorf("%s is not a usable NCCL: %w", lib.path, err)
	}
	ncclLoaded = n
	return n, nil
}

// NCCLInfo loads NCCL and says which file it is, where the search found it
// (libs.go) and its version code.
func NCCLInfo() (path, from string, version int, err error) {
	n, err := openNCCL()
	if err != nil {
		return "", "", 0, err
	}
	version, err = n.Version()
	return n.lib.path, n.lib.from, version, err
}

// NewUniqueID makes the id of a new communicator. Only rank 0 calls it; the
// other ranks receive it (dist.ExchangeID).
func NewUniqueID() (UniqueID, error) {
	n, err := openNCCL()
	if err != nil {
		return UniqueID{}, err
	}
	id, err := n.UniqueID()
	return UniqueID(id), err
}

// Comm is this process's rank in an NCCL communicator. Its collectives
// take float32 tensors of b's device and run one at a time.
type Comm struct {
	b           *Backend
	n           *ncclLib
	rank, world int
	timeout     time.Duration

	mu  sync.Mutex
	h   ncclComm
	err error // why the communicator may no longer be used
}

// OpenComm joins the communicator id as rank of world, on b's device and
// stream. It returns once every rank has joined, or fails after timeout.
func OpenComm(b *Backend, id UniqueID, rank, world int, timeout time.Duration) (*Comm, error) {
	if world < 1 || rank < 0 || rank >= world {
		return nil, fmt.Errorf("nccl init: rank %d of %d is not a rank", rank, world)
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("nccl init (rank %d of %d): time limit %s must be positive", rank, world, timeout)
	}
	n, err := openNCCL()
	if err != nil {
		return nil, err
	}
	ncclMu.Lock()
	if n.streamQuery == nil {
		n.streamQuery, err = b.d.drv.lib.sym("cuStreamQuery")
	}
	ncclMu.Unlock()
	if err != nil {
		return nil, err
	}
	c := &Comm{b: b, n: n, rank: rank, world: world, timeout: timeout}
	type joined struct {
		h   ncclComm
		err error
	}
	ch := make(chan joined, 1)
	go func() {
		h, err := n.InitRank(world, id, rank)
		ch <- joined{h, err}
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("nccl init (rank %d of %d): %w", rank, world, r.err)
		}
		c.h = r.h
		return c, nil
	case <-timer.C:
		// There is no communicator to abort yet: the call stays blocked on
		// its thread, and a communicator it returns later is aborted.
		go func() {
			if r := <-ch; r.err == nil {
				n.Abort(r.h)
			}
		}()
		return nil, fmt.Errorf("nccl init (rank %d of %d): %w after %s: not every rank joined (one is missing, failed before it, or was given another id)",
			rank, world, ErrCommTimeout, timeout)
	}
}

// Rank is this process's rank; World the number of ranks.
func (c *Comm) Rank() int  { return c.rank }
func (c *Comm) World() int { return c.world }

// AllReduce replaces t, on every rank, by the sum of the ranks' t.
func (c *Comm) AllReduce(t *model.Tensor) error {
	what := fmt.Sprintf("all-reduce of %d floats", t.Numel())
	p, err := c.ptrs(what, t)
	if err != nil {
		return err
	}
	return c.run(what, func() error {
		return c.n.Collective("ncclAllReduce", collAllReduce, c.h, p[0], p[0], t.Numel(), ncclFloat32, 0, c.b.d.stream)
	})
}

// AllReduceSum replaces every tensor of ts, on every rank, by the sum of the
// ranks' copies (one all-reduce each, in order): the gradient reducer of a
// data-parallel run (trainer.Reducer).
func (c *Comm) AllReduceSum(ts []*model.Tensor) error {
	for _, t := range ts {
		if err := c.AllReduce(t); err != nil {
			return err
		}
	}
	return nil
}

// ReduceScatter sums the ranks' src, of World·n elements, and leaves block
// Rank of the sum (elements [Rank·n, (Rank+1)·n)) in dst, of n elements.
func (c *Comm) ReduceScatter(dst, src *model.Tensor) error {
	what := fmt.Sprintf("reduce-scatter of %d floats into %d", src.Numel(), dst.Numel())
	if src.Numel() != c.world*dst.Numel() {
		return fmt.Errorf("nccl %s (rank %d of %d): source %v must hold %d × destination %v", what, c.rank, c.world,
			src.Shape, c.world, dst.Shape)
	}
	p, err := c.ptrs(what, dst, src)
	if err != nil {
		return err
	}
	return c.run(what, func() error {
		return c.n.Collective("ncclReduceScatter", collReduceScatter, c.h, p[1], p[0], dst.Numel(), ncclFloat32, 0, c.b.d.stream)
	})
}

// AllGather concatenates the ranks' src, of n elements each, in rank order
// into dst, of World·n elements, on every rank. Both are float32, or both
// bf16 storage (the bf16-only weights of sharded fp32 masters, half the
// bytes; an all-gather only copies, so any 2-byte type travels exactly).
func (c *Comm) AllGather(dst, src *model.Tensor) error {
	what := fmt.Sprintf("all-gather of %d elements into %d", src.Numel(), dst.Numel())
	if dst.Numel() != c.world*src.Numel() {
		return fmt.Errorf("nccl %s (rank %d of %d): destination %v must hold %d × source %v", what, c.rank, c.world,
			dst.Shape, c.world, src.Shape)
	}
	pd, hd, ok1 := c.b.operand("nccl "+what, 0, dst)
	ps, hs, ok2 := c.b.operand("nccl "+what, 1, src)
	if !ok1 || !ok2 {
		return fmt.Errorf("rank %d of %d: %w", c.rank, c.world, c.b.Err())
	}
	if hd != hs {
		return fmt.Errorf("nccl %s (rank %d of %d): one of source and destination is bf16, the other float32", what, c.rank, c.world)
	}
	dtype := ncclFloat32
	if hd {
		dtype, what = ncclBfloat16, what+" (bf16)"
	} else {
		markStale(dst)
	}
	return c.run(what, func() error {
		return c.n.Collective("ncclAllGather", collAllGather, c.h, ps, pd, src.Numel(), dtype, 0, c.b.d.stream)
	})
}

// Broadcast copies root's t into t on every rank.
func (c *Comm) Broadcast(t *model.Tensor, root int) error {
	what := fmt.Sprintf("broadcast of %d floats from rank %d", t.Numel(), root)
	if root < 0 || root >= c.world {
		return fmt.Errorf("nccl %s (rank %d of %d): no such root", what, c.rank, c.world)
	}
	p, err := c.ptrs(what, t)
	if err != nil {
		return err
	}
	return c.run(what, func() error {
		return c.n.Collective("ncclBroadcast", collBroadcast, c.h, p[0], p[0], t.Numel(), ncclFloat32, root, c.b.d.stream)
	})
}

// Close frees the communicator (a failed one is already freed).
func (c *Comm) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.h.valid() {
		return nil
	}
	err := c.n.Destroy(c.h)
	c.h = ncclComm{}
	c.err = errors.New("communicator closed")
	if err != nil {
		return fmt.Errorf("nccl close (rank %d of %d): %w", c.rank, c.world, err)
	}
	return nil
}

// ptrs resolves the device addresses of float32 tensors of c's backend.
func (c *Comm) ptrs(what string, ts ...*model.Tensor) ([]uint64, error) {
	p, ok := c.b.ptrs("nccl "+what, ts...)
	if !ok {
		return nil, fmt.Errorf("rank %d of %d: %w", c.rank, c.world, c.b.Err())
	}
	return p, nil
}

// run makes one NCCL call under the watchdog and waits for the work it
// queued (see the file comment).
func (c *Comm) run(what string, call func() error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return fmt.Errorf("nccl %s (rank %d of %d): %w", what, c.rank, c.world, c.err)
	}
	deadline := time.Now().Add(c.timeout)
	done := make(chan error, 1)
	go func() { done <- call() }()
	timer := time.NewTimer(c.timeout)
	defer timer.Stop()
	select {
	case err := <-done:
		if err != nil {
			return c.fail(what, err, nil)
		}
	case <-timer.C:
		return c.fail(what, nil, done)
	}
	for sleep := 10 * time.Microsecond; ; sleep = min(2*sleep, time.Millisecond) {
		finished, err := c.n.StreamQuery(c.b.d.drv, c.b.d.stream)
		if err != nil {
			return c.fail(what, err, nil)
		}
		if finished {
			return nil
		}
		if err := c.n.AsyncError(c.h); err != nil {
			return c.fail(what, err, nil)
		}
		if time.Now().After(deadline) {
			return c.fail(what, nil, nil)
		}
		time.Sleep(sleep)
	}
}

// fail aborts the communicator after err (nil: the time limit passed;
// blocked: the result of a call still running) and returns the error,
// which every later call repeats. Call with c.mu held.
func (c *Comm) fail(what string, err error, blocked chan error) error {
	aborted := make(chan error, 1)
	h := c.h
	c.h = ncclComm{}
	go func() { aborted <- c.n.Abort(h) }()
	note := "communicator aborted"
	select {
	case aerr := <-aborted:
		if aerr != nil {
			note = fmt.Sprintf("aborting the communicator: %v", aerr)
		}
	case <-time.After(abortGrace):
		note = fmt.Sprintf("ncclCommAbort did not return within %s", abortGrace)
	}
	if err == nil {
		cause := ""
		if blocked != nil {
			// Aborting ends the blocked call; its error may say more
			// (the emulator names the ranks that did not arrive).
			select {
			case berr := <-blocked:
				if berr != nil {
					cause = ": " + berr.Error()
				}
			case <-time.After(abortGrace):
			}
		}
		err = fmt.Errorf("%w after %s waiting for the other ranks (one is missing, stuck or slower than the limit); %s%s",
			ErrCommTimeout, c.timeout, note, cause)
	} else {
		err = fmt.Errorf("%w; %s", err, note)
	}
	c.err = fmt.Errorf("nccl %s (rank %d of %d): %w", what, c.rank, c.world, err)
	return c.err
}

// ControlPlane is what opening a communicator needs of the ranks' control
// plane (dist.Group implements it): this rank, the world size, and a blob
// broadcast from rank 0 to every rank. An interface, so that this package
// does not import dist (docs/architecture.md, the layers).
type ControlPlane interface {
	Rank() int
	Size() int
	Broadcast(name string, blob []byte) ([]byte, error)
}

// OpenCommOver opens the communicator of a data-parallel run whose ranks
// form the control plane g: rank 0 makes NCCL's id and broadcasts it over
// g, then every rank joins. The Comm is the trainer's gradient reducer
// (AllReduceSum) and ZeRO-1 gatherer (GatherShards).
func OpenCommOver(b *Backend, g ControlPlane, timeout time.Duration) (*Comm, error) {
	var id UniqueID
	if g.Rank() == 0 {
		var err error
		if id, err = NewUniqueID(); err != nil {
			return nil, fmt.Errorf("nccl id: %w", err)
		}
	}
	got, err := g.Broadcast("nccl id", id[:])
	if err != nil {
		return nil, err
	}
	if len(got) != len(id) {
		return nil, fmt.Errorf("nccl id from rank 0: %d bytes, want %d", len(got), len(id))
	}
	copy(id[:], got)
	return OpenComm(b, id, g.Rank(), g.Size(), timeout)
}
