package cpu

// The memory pool (model.MemoryPool). The model releases every temporary
// it allocates and asks for uncleared ones where an op overwrites them
// whole (model.Scratch); the fast CPU backend keeps what is released for
// the next Scratch of the same size, so a training step's activations stop
// being garbage for the collector to find, and holds the contract to the
// letter so that the CPU catches what a GPU's pool would only corrupt:
//
//   - a released tensor refuses every op and a second release, with the
//     CUDA backend's messages ("was released", "already released");
//   - released storage is filled with NaN before it is handed out again,
//     so an op that reads a Scratch tensor before writing all of it spreads
//     NaN instead of reading stale numbers that happen to be plausible
//     (a fresh Scratch, with nothing to recycle, is Go's zeroed memory).
//
// The free storage sits in a sync.Pool per element count, which the
// garbage collector empties when the storage goes unused: the pool never
// holds memory a run no longer asks for.

import (
	"math"
	"sync"

	"github.com/gdrotrain/gdrotrain/model"
)

var _ model.MemoryPool = (*Backend)(nil)

// freeLists holds released storage by element count.
type freeLists struct {
	mu     sync.Mutex
	bySize map[int]*sync.Pool // of *[]float32
}

func (f *freeLists) of(n int) *sync.Pool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.bySize == nil {
		f.bySize = map[int]*sync.Pool{}
	}
	p := f.bySize[n]
	if p == nil {
		p = new(sync.Pool)
		f.bySize[n] = p
	}
	return p
}

// Scratch returns a tensor of shape with undefined contents: released
// storage of its size (NaN) when there is some, new storage otherwise.
func (b *Backend) Scratch(shape ...int) *model.Tensor {
	n := 1
	for _, d := range shape {
		if d < 0 {
			return b.New(shape...) // records the error, as New does
		}
		n *= d
	}
	if n == 0 {
		return b.New(shape...)
	}
	if s, ok := b.free.of(n).Get().(*[]float32); ok {
		return &model.Tensor{Shape: append([]int(nil), shape...), Store: *s}
	}
	return b.New(shape...)
}

// Release gives each tensor's storage back (nil tensors skipped): the
// tensor is marked released and its storage, poisoned, waits for a Scratch
// of its size. A tensor already released, or not a CPU tensor, is an
// error the backend records.
func (b *Backend) Release(ts ...*model.Tensor) {
	for _, t := range ts {
		if t == nil {
			continue
		}
		if isKV(t) {
			b.releaseKV(t)
			continue
		}
		s, err := b.Unstore(t)
		if !b.Keep(err) {
			continue
		}
		if len(s) == 0 {
			continue
		}
		poison(s)
		b.free.of(len(s)).Put(&s)
	}
}

// poison fills s with a quiet NaN: a loop over the first block, then
// doubling copies (memmove's speed).
func poison(s []float32) {
	nan := float32(math.NaN())
	k := min(len(s), 256)
	for i := range s[:k] {
		s[i] = nan
	}
	for k < len(s) {
		k += copy(s[k:], s[:k])
	}
}
