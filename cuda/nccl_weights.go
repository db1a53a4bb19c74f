package cuda

// The weights' way from the training ranks to the generation ranks
// (dist.rollout_ranks; trainer/async.go, docs/data-parallel.md "Generation
// ranks"): an NCCL communicator of their own between training rank 0 (its
// rank 0) and the R generation ranks (world rank W−R+j is its rank 1+j),
// over which each new version of the weights is broadcast device to device
// from training rank 0.
//
// Only training rank 0 joins: it holds every weight whole (replicated, or
// bf16-only weights the training ranks all-gather after each update, with
// sharded masters), a broadcast's bandwidth does not grow with more
// senders, and the other training ranks never wait on a generation rank.
//
// A tensor travels as the generation ranks' products read it. Under bf16
// products every matrix but the input embedding (optim.MasterSharded's
// rule) travels as bf16 — the round-to-nearest-even of the fp32 master, the
// operand training rank 0's own products read (its bf16 copy, Shadow, or
// its bf16-only weight) — and lands in the generation rank's bf16-only
// weight (HalfOnly): half the bytes of fp32. The embedding, whose rows
// the lookup reads unrounded, and the norms travel as float32 into fp32
// tensors; a write there marks their bf16 copy stale, so the next product
// refreshes it. Under fp32 or tf32 products everything is float32.
//
// The payload (Payload) is what travels, as bytes in tensor order: each
// tensor little-endian bf16 or float32. Rank 0 hashes it, and keeps it for
// a checkpoint of rollouts in flight; a generation rank reads back what it
// received and hashes it, so the hash covers the transfer end to end.

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/gdrotrain/gdrotrain/model"
)

// WeightLink is this rank's end of the weights' communicator
// (trainer.WeightLink).
type WeightLink struct {
	b *Backend
	c *Comm
}

// OpenWeightLink makes the weights' communicator of a world whose first
// trainers ranks train (world is the whole job's control plane). Every
// world rank calls it, since the id travels in a broadcast of the whole
// world's group; the training ranks but rank 0 then return nil.
func OpenWeightLink(b *Backend, world ControlPlane, trainers int, timeout time.Duration) (*WeightLink, error) {
	gens := world.Size() - trainers
	if trainers < 1 || gens < 1 {
		return nil, fmt.Errorf("weights' communicator: %d training ranks of %d", trainers, world.Size())
	}
	var id UniqueID
	if world.Rank() == 0 {
		var err error
		if id, err = NewUniqueID(); err != nil {
			return nil, fmt.Errorf("weights' nccl id: %w", err)
		}
	}
	got, err := world.Broadcast("weights nccl id", id[:])
	if err != nil {
		return nil, fmt.Errorf("weights' nccl id: %w", err)
	}
	if len(got) != len(id) {
		return nil, fmt.Errorf("weights' nccl id from rank 0: %d bytes, want %d", len(got), len(id))
	}
	copy(id[:], got)
	rank := 0
	switch r := world.Rank(); {
	case r >= trainers:
		rank = r - trainers + 1
	case r > 0:
		return nil, nil
	}
	c, err := OpenComm(b, id, rank, gens+1, timeout)
	if err != nil {
		return nil, fmt.Errorf("weights' communicator (training rank 0 and %d generation ranks): %w", gens, err)
	}
	return &WeightLink{b: b, c: c}, nil
}

// HalfProducts reports whether products read bf16 weights, so that
// matrices travel in bf16.
func (l *WeightLink) HalfProducts() bool { return l.b.prec == BF16 }

// PayloadBytes is the size of ts's payload.
func PayloadBytes(ts []*model.Tensor, half []bool) int {
	n := 0
	for i, t := range ts {
		n += t.Numel() * width(half[i])
	}
	return n
}

func width(half bool) int {
	if half {
		return 2
	}
	return 4
}

// Payload reads ts as they travel (see the file comment).
func (l *WeightLink) Payload(ts []*model.Tensor, half []bool) ([]byte, error) {
	b := l.b
	if len(half) != len(ts) {
		return nil, fmt.Errorf("weights' payload: %d tensors, %d dtypes", len(ts), len(half))
	}
	out := make([]byte, PayloadBytes(ts, half))
	off := 0
	for i, t := range ts {
		n := t.Numel() * width(half[i])
		if n > 0 {
			p, done, err := l.source(t, half[i])
			if err != nil {
				return nil, err
			}
			err = b.d.copyOut(unsafe.Pointer(&out[off]), p, int64(n))
			done()
			if err != nil {
				return nil, fmt.Errorf("weights' payload: read tensor %d %v: %w", i, t.Shape, err)
			}
		}
		off += n
	}
	return out, b.Err()
}

// source is the device address of t as it travels: its float32 values, or
// (half) the bf16 operand products read — a bf16-only weight itself, its
// bf16 copy refreshed, or else a rounding into scratch that done frees.
func (l *WeightLink) source(t *model.Tensor, half bool) (uint64, func(), error) {
	b := l.b
	none := func() {}
	p, isHalf, ok := b.operand("weights' link", 0, t)
	if !ok {
		return 0, none, b.Err()
	}
	switch {
	case !half && isHalf:
		return 0, none, fmt.Errorf("weights' link: tensor %v is bf16 storage, the link sends it as float32", t.Shape)
	case !half || isHalf:
		return p, none, nil
	case b.hasHalf(t):
		return b.halfOf(t), none, b.Err()
	}
	sc, err := b.allocBytes(t.Numel(), 2)
	if err != nil {
		return 0, none, fmt.Errorf("weights' link: bf16 rounding of %v: %w", t.Shape, err)
	}
	b.kernelCost(t.Numel(), 6*t.Numel())
	b.elementwise("f32_to_bf16", t.Numel(), sc.ptr, p, int64(t.Numel()))
	return sc.ptr, func() { b.free(sc) }, b.Err()
}

// Send broadcasts ts's payload from this rank (rank 0): from ts, or, with
// from non-nil, from those bytes (a payload Payload made earlier, e.g. the
// weights of a checkpoint's rollouts in flight), staged through scratch.
func (l *WeightLink) Send(ts []*model.Tensor, half []bool, from []byte) error {
	b := l.b
	if l.c.rank != 0 {
		return fmt.Errorf("weights' link: rank %d sends; only rank 0 (training rank 0) does", l.c.rank)
	}
	if len(half) != len(ts) {
		return fmt.Errorf("weights' link: %d tensors, %d dtypes", len(ts), len(half))
	}
	if from != nil && len(from) != PayloadBytes(ts, half) {
		return fmt.Errorf("weights' link: %d bytes to send, the tensors' payload is %d", len(from), PayloadBytes(ts, half))
	}
	off := 0
	for i, t := range ts {
		n := t.Numel()
		if n == 0 {
			continue
		}
		var p uint64
		var done func()
		if from == nil {
			var err error
			if p, done, err = l.source(t, half[i]); err != nil {
				return err
			}
		} else {
			sc, err := b.allocBytes(n, width(half[i]))
			if err != nil {
				return fmt.Errorf("weights' link: staging %v: %w", t.Shape, err)
			}
			bytes := n * width(half[i])
			if !b.keep(b.d.copyIn(sc.ptr, unsafe.Pointer(&from[off]), int64(bytes))) {
				b.free(sc)
				return b.Err()
			}
			p, done = sc.ptr, func() { b.free(sc) }
			off += bytes
		}
		err := l.broadcast(p, n, half[i])
		done()
		if err != nil {
			return err
		}
	}
	return b.Err()
}

// Receive writes the broadcast payload into ts (a generation rank): a
// half tensor must be a bf16-only weight; a float32 one's bf16 copy, if
// any, is marked stale.
func (l *WeightLink) Receive(ts []*model.Tensor, half []bool) error {
	b := l.b
	if l.c.rank == 0 {
		return fmt.Errorf("weights' link: rank 0 sends, it does not receive")
	}
	if len(half) != len(ts) {
		return fmt.Errorf("weights' link: %d tensors, %d dtypes", len(ts), len(half))
	}
	for i, t := range ts {
		if t.Numel() == 0 {
			continue
		}
		var p uint64
		if half[i] {
			var ok bool
			if p, ok = b.halfOnlyOperand("weights' link (receive)", 0, t); !ok {
				return b.Err()
			}
		} else {
			ps, ok := b.ptrs("weights' link (receive)", t) // marks a bf16 copy stale
			if !ok {
				return b.Err()
			}
			p = ps[0]
		}
		if err := l.broadcast(p, t.Numel(), half[i]); err != nil {
			return err
		}
	}
	return b.Err()
}

// broadcast runs one ncclBroadcast of n elements at p from rank 0, in
// place.
func (l *WeightLink) broadcast(p uint64, n int, half bool) error {
	c := l.c
	dtype, what := ncclFloat32, fmt.Sprintf("weights' broadcast of %d floats", n)
	if half {
		dtype, what = ncclBfloat16, fmt.Sprintf("weights' broadcast of %d bf16", n)
	}
	return c.run(what, func() error {
		return c.n.Collective("ncclBroadcast", collBroadcast, c.h, p, p, n, dtype, 0, c.b.d.stream)
	})
}

// Close frees the communicator.
func (l *WeightLink) Close() error { return l.c.Close() }
