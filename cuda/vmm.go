package cuda

// The paged KV cache's memory (model.KVStore), with CUDA's virtual memory
// management: each of the cache's 2·L tensors is a reserved address range
// of its full size (Slots·MaxLen rows), so its address never changes and
// the kernels, prefix copies and captured decode graphs that use it are
// those of a plain cache; physical pages (cuMemCreate) are mapped into the
// ranges (cuMemMap, cuMemSetAccess) as slots grow and unmapped when they
// shrink, from a pool of at most the budget's pages.
//
// Mapping is host work between steps, never inside a graph or a capture:
// the sampler grows and shrinks slots after a step's download (its host
// synchronisation), so no kernel still reads a page being unmapped. A page
// is mapped when a slot's length crosses into it, which at Qwen3-1.7B's
// 2 KiB rows and 2 MiB pages is once per 1,024 tokens of a slot.

import (
	"errors"
	"fmt"

	"github.com/gdrotrain/gdrotrain/model"
)

// KVPageBytes is the device's mapping granularity (2 MiB on current GPUs
// and on the emulator), or 2 MiB where the driver cannot say (NewPagedKV
// then reports why).
func (b *Backend) KVPageBytes() int64 {
	g, err := b.d.drv.MemGranularity(b.d.Info.Ordinal)
	if err != nil || g <= 0 {
		return model.DefaultKVPageBytes
	}
	return g
}

// NewPagedKV reserves n ranges for bf16 (rows, g, d) tensors and returns
// the tensors and their page mapper (model.KVStore).
func (b *Backend) NewPagedKV(n, rows, g, d int, pageBytes int64, maxPages int) ([]*model.Tensor, model.PageMapper, error) {
	return b.newPagedRanges(n, rows, g, d, 2*int64(rows*g*d), pageBytes, maxPages, func(buf *buffer) { buf.bf16 = true })
}

// newPagedRanges reserves n ranges of dataBytes each (rounded up to whole
// pages) for (rows, g, d) tensors whose storage kind setup marks (bf16, or
// an fp8 cache: backend_fp8.go).
func (b *Backend) newPagedRanges(n, rows, g, d int, dataBytes, pageBytes int64, maxPages int, setup func(*buffer)) ([]*model.Tensor, model.PageMapper, error) {
	drv, dev := b.d.drv, b.d.Info.Ordinal
	gran, err := drv.MemGranularity(dev)
	if err != nil {
		return nil, nil, err
	}
	if n <= 0 || rows <= 0 || g <= 0 || d <= 0 || pageBytes <= 0 || pageBytes%gran != 0 || maxPages < 0 {
		return nil, nil, fmt.Errorf("paged kv: %d ranges of (%d, %d, %d), pages of %d bytes (granularity %d), %d pages: bad arguments", n, rows, g, d, pageBytes, gran, maxPages)
	}
	elems := rows * g * d
	rangeBytes := (dataBytes + pageBytes - 1) / pageBytes * pageBytes
	base, err := drv.MemReserve(int64(n)*rangeBytes, gran)
	if err != nil {
		return nil, nil, fmt.Errorf("paged kv: reserve %d ranges of %d bytes: %w", n, rangeBytes, err)
	}
	pm := &pageMapper{drv: drv, dev: dev, base: base, rangeBytes: rangeBytes, n: n, pageBytes: pageBytes,
		most: maxPages * n, mapped: map[int][]uint64{}}
	ts := make([]*model.Tensor, n)
	for i := range ts {
		// No allocator: Release skips the buffer, the mapper owns it.
		buf := &buffer{ptr: base + uint64(int64(i)*rangeBytes), size: rangeBytes, elems: elems}
		setup(buf)
		ts[i] = &model.Tensor{Shape: []int{rows, g, d}, Store: buf}
	}
	return ts, pm, nil
}

// pageMapper maps page p of every range at once: page p of range i is
// bytes [p·pageBytes, (p+1)·pageBytes) of range i.
type pageMapper struct {
	drv        *driver
	dev        int
	base       uint64
	rangeBytes int64
	n          int
	pageBytes  int64
	most       int              // physical pages the pool may create (the budget's pages × n)
	created    int              // physical pages created so far
	idle       []uint64         // created pages mapped nowhere
	mapped     map[int][]uint64 // page index → the handles mapped in each range
}

// errPoolFull means the budget's pages are all mapped: the caller's
// accounting (model.KVPages) keeps this from happening.
var errPoolFull = errors.New("paged kv: every page of the pool is mapped")

func (pm *pageMapper) addr(i, p int) uint64 {
	return pm.base + uint64(int64(i)*pm.rangeBytes+int64(p)*pm.pageBytes)
}

// Map backs page p of every range, with idle pages first: the pool
// creates pages only up to the budget and keeps them once created, so
// memory stays at the budget's peak use rather than going back and forth.
func (pm *pageMapper) Map(p int) error {
	if _, ok := pm.mapped[p]; ok {
		return fmt.Errorf("paged kv: page %d is already mapped", p)
	}
	if int64(p+1)*pm.pageBytes > pm.rangeBytes || p < 0 {
		return fmt.Errorf("paged kv: page %d outside ranges of %d bytes", p, pm.rangeBytes)
	}
	hs := make([]uint64, 0, pm.n)
	for i := range pm.n {
		var h uint64
		if k := len(pm.idle); k > 0 {
			h, pm.idle = pm.idle[k-1], pm.idle[:k-1]
		} else if pm.created < pm.most {
			var err error
			if h, err = pm.drv.MemCreate(pm.pageBytes, pm.dev); err != nil {
				pm.undo(p, hs)
				return fmt.Errorf("paged kv: page %d of range %d: %w", p, i, err)
			}
			pm.created++
		} else {
			pm.undo(p, hs)
			return errPoolFull
		}
		if err := pm.drv.MemMap(pm.addr(i, p), pm.pageBytes, h, pm.dev); err != nil {
			pm.idle = append(pm.idle, h)
			pm.undo(p, hs)
			return fmt.Errorf("paged kv: page %d of range %d: %w", p, i, err)
		}
		hs = append(hs, h)
	}
	pm.mapped[p] = hs
	return nil
}

// undo unmaps the ranges a failed Map had already backed.
func (pm *pageMapper) undo(p int, hs []uint64) {
	for i, h := range hs {
		_ = pm.drv.MemUnmap(pm.addr(i, p), pm.pageBytes) // best effort: Map reports the first error
		pm.idle = append(pm.idle, h)
	}
}

// Unmap gives page p of every range back to the pool.
func (pm *pageMapper) Unmap(p int) error {
	hs, ok := pm.mapped[p]
	if !ok {
		return fmt.Errorf("paged kv: page %d is not mapped", p)
	}
	delete(pm.mapped, p)
	var first error
	for i, h := range hs {
		if err := pm.drv.MemUnmap(pm.addr(i, p), pm.pageBytes); err != nil && first == nil {
			first = fmt.Errorf("paged kv: page %d of range %d: %w", p, i, err)
		}
		pm.idle = append(pm.idle, h)
	}
	return first
}

// Release unmaps every page, frees the pool and the address ranges.
func (pm *pageMapper) Release() {
	for p := range pm.mapped {
		_ = pm.Unmap(p) // the cache is going away; a failure leaves the range to the context
	}
	for _, h := range pm.idle {
		_ = pm.drv.MemRelease(h, pm.pageBytes)
	}
	pm.idle, pm.created = nil, 0
	if pm.base != 0 {
		_ = pm.drv.MemAddressFree(pm.base, int64(pm.n)*pm.rangeBytes)
		pm.base = 0
	}
}
