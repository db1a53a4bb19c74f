package model

// Paged KV memory: a cache whose physical memory follows its slots' actual
// lengths instead of MaxLen for every slot (issue 15; the design of
// vAttention rather than vLLM's block tables).
//
// The layout does not change: each layer's K and V stay one (Slots·MaxLen,
// G, D) tensor at a fixed address, slot s at rows [s·MaxLen, (s+1)·MaxLen),
// so every kernel, CopyPrefix and every captured decode graph is the same
// as with a plain cache. What changes is that the CUDA backend only
// reserves those address ranges and maps physical pages into them as a
// slot grows (CUDA's virtual memory management), and unmaps them when the
// slot is cut back or reset.
//
// A page is one mapping granule of one range (2 MiB on current GPUs). All
// 2·L ranges share the row layout, so page p means the same rows in each
// and is mapped in all of them at once: the accounting below counts such
// page indices, each worth 2·L granules of memory. Pages follow the byte
// layout, not slot boundaries: a slot's region need not be a multiple of
// the granule (at Qwen3-1.7B a row is 2 KiB and a 2 MiB page 1,024 tokens,
// while MaxLen is whatever the prompt and max_new_tokens make it), so the
// page holding the end of slot s and the start of slot s+1 is shared and
// reference-counted. Rounding each slot's region up to whole pages instead
// would keep pages private but change MaxLen, which sizes the decode
// graphs' split-K attention and RoPE tables, and waste up to a page per
// slot of address space and, for short slots, of memory.
//
// The accounting (budget, pages per slot, what a growth would take) is
// plain Go, the same on every backend, so the sampler's scheduler runs and
// is tested on the CPU; a CPU cache keeps its full storage and only obeys
// the budget, with rows of the format it holds (fp32, bf16 or fp8).

import (
	"errors"
	"fmt"
)

// KVPaging asks for a paged KV cache.
type KVPaging struct {
	// BudgetBytes is the physical memory for the K and V of every layer.
	BudgetBytes int64
	// PageBytes is one page of one layer's K (or V) range: 0 means the
	// backend's mapping granularity (KVPager) or DefaultKVPageBytes; a
	// KVPager backend needs a multiple of its granularity.
	PageBytes int64
}

// DefaultKVPageBytes is the page of backends without KVPager: the
// granularity of current GPUs, so CPU runs budget as a GPU would.
const DefaultKVPageBytes = 2 << 20

// PageMapper maps and unmaps physical pages into a paged cache's ranges.
type PageMapper interface {
	Map(page int) error
	Unmap(page int) error
	// Release unmaps everything and frees the pages and address ranges;
	// the tensors must not be used afterwards.
	Release()
}

// ErrNoPages is returned by KVCache.Grow when the budget has no room.
var ErrNoPages = errors.New("kv cache: page budget exhausted")

// KVPages is a paged cache's page accounting.
type KVPages struct {
	RowBytes  int64 // bytes of one token of one layer's K (G·D elements)
	PageBytes int64 // bytes of one page of one range
	Ranges    int   // ranges a page is mapped into (2·layers)
	Budget    int   // pages that may be in use at once
	Used      int   // pages in use now
	Peak      int   // most pages in use at once
	Maps      int   // pages mapped so far (a page mapped twice counts twice)

	maxLen int
	refs   []int32 // per page: slots whose rows lie on it
	rows   []int   // per slot: rows backed
	mapper PageMapper
}

func newKVPages(slots, maxLen int, rowBytes, pageBytes int64, ranges, budget int, mapper PageMapper) *KVPages {
	total := (int64(slots)*int64(maxLen)*rowBytes + pageBytes - 1) / pageBytes
	return &KVPages{RowBytes: rowBytes, PageBytes: pageBytes, Ranges: ranges, Budget: budget, maxLen: maxLen,
		refs: make([]int32, total), rows: make([]int, slots), mapper: mapper}
}

// span is the page interval [lo, hi) holding rows [0, n) of slot s.
func (p *KVPages) span(s, n int) (int, int) {
	if n <= 0 {
		return 0, 0
	}
	a := int64(s) * int64(p.maxLen) * p.RowBytes
	b := a + int64(n)*p.RowBytes
	return int(a / p.PageBytes), int((b + p.PageBytes - 1) / p.PageBytes)
}

// Need is the number of pages slot s would newly take to back n rows.
func (p *KVPages) Need(s, n int) int {
	lo, hi := p.span(s, n)
	olo, ohi := p.span(s, p.rows[s])
	k := 0
	for i := lo; i < hi; i++ {
		if (i < olo || i >= ohi) && p.refs[i] == 0 {
			k++
		}
	}
	return k
}

// Free is the number of pages the budget still allows.
func (p *KVPages) Free() int { return p.Budget - p.Used }

// Rows is the number of rows of slot s backed by pages.
func (p *KVPages) Rows(s int) int { return p.rows[s] }

// SlotPages is the most pages one slot of n rows can span (a slot whose
// region starts inside a page spans one more than one that starts on a
// boundary), so a budget of SlotPages(MaxLen) lets any one sequence run to
// full length alone.
func (p *KVPages) SlotPages(n int) int {
	most := 0
	for s := range p.rows {
		lo, hi := p.span(s, n)
		most = max(most, hi-lo)
	}
	return most
}

// Bytes is the physical memory of k pages.
func (p *KVPages) Bytes(k int) int64 { return int64(k) * p.PageBytes * int64(p.Ranges) }

// resize backs exactly rows [0, n) of slot s: it maps pages it newly
// needs (all or none: ErrNoPages when the budget has no room) and unmaps
// those no slot needs any more.
func (p *KVPages) resize(s, n int) error {
	lo, hi := p.span(s, n)
	olo, ohi := p.span(s, p.rows[s])
	if n > p.rows[s] {
		if need := p.Need(s, n); p.Used+need > p.Budget {
			return fmt.Errorf("slot %d to %d rows needs %d pages, %d of %d free: %w", s, n, need, p.Free(), p.Budget, ErrNoPages)
		}
	}
	for i := lo; i < hi; i++ {
		if i >= olo && i < ohi {
			continue
		}
		if p.refs[i] == 0 {
			if p.mapper != nil {
				if err := p.mapper.Map(i); err != nil {
					return fmt.Errorf("slot %d: map page %d: %w", s, i, err)
				}
			}
			p.Used++
			p.Maps++
			p.Peak = max(p.Peak, p.Used)
		}
		p.refs[i]++
	}
	for i := olo; i < ohi; i++ {
		if i >= lo && i < hi {
			continue
		}
		if p.refs[i]--; p.refs[i] == 0 {
			if p.mapper != nil {
				if err := p.mapper.Unmap(i); err != nil {
					return fmt.Errorf("slot %d: unmap page %d: %w", s, i, err)
				}
			}
			p.Used--
		}
	}
	p.rows[s] = n
	return nil
}

// NewPagedKVCache allocates a cache for slots sequences of up to maxLen
// tokens whose memory follows the slots' lengths within pg's budget. On a
// KVPager backend with a bf16 (or fp8) cache the physical memory is the
// budget's pages, mapped as slots grow; elsewhere the cache
// keeps full storage and only the accounting follows the budget.
func (m *Model) NewPagedKVCache(slots, maxLen int, pg KVPaging) (*KVCache, error) {
	c := m.Cfg
	L := len(m.P.Layers)
	ranges := 2 * L
	if pg.BudgetBytes <= 0 || pg.PageBytes < 0 {
		return nil, fmt.Errorf("paged kv cache: budget %d bytes and page %d bytes: want a budget > 0 and a page ≥ 0", pg.BudgetBytes, pg.PageBytes)
	}
	caps := SamplerCapsOf(m.B)
	pk := caps.Pager
	paged := pk != nil
	_, fp8 := m.fp8Cache()
	bf16 := caps.KV != nil && m.KVCacheBF16 && !fp8 // the cache NewKVCache holds
	if paged && !bf16 && !fp8 {
		// Pages back bf16 or fp8 rows only; an fp32 cache here would
		// silently take every slot's full length instead of the budget.
		return nil, fmt.Errorf("paged kv cache on %s: the cache must be bf16 or fp8 (precision.kv_cache bf16 or fp8, or auto with bf16 products)", m.B.Name())
	}
	elem := int64(4)
	if bf16 {
		elem = 2
	}
	rowBytes := elem * int64(c.NumKeyValueHeads*c.HeadDim)
	if fp8 {
		rowBytes = FP8KVRowBytes(c.NumKeyValueHeads, c.HeadDim)
	}
	pageBytes := pg.PageBytes
	if pageBytes == 0 {
		pageBytes = DefaultKVPageBytes
		if paged {
			pageBytes = pk.KVPageBytes()
		}
	}
	if paged && pageBytes%pk.KVPageBytes() != 0 {
		return nil, fmt.Errorf("paged kv cache: a page of %d bytes is not a multiple of the backend's granularity (%d bytes)", pageBytes, pk.KVPageBytes())
	}
	if !paged {
		kv := m.NewKVCache(slots, maxLen)
		return kv, kv.AccountPages(rowBytes, ranges, KVPaging{BudgetBytes: pg.BudgetBytes, PageBytes: pageBytes})
	}
	budget := int(pg.BudgetBytes / (pageBytes * int64(ranges)))
	kv := &KVCache{Slots: slots, MaxLen: maxLen, Len: make([]int, slots), b: m.B}
	newPaged := pk.NewPagedKV
	if fp8 {
		newPaged = pk.NewPagedFP8KV
	}
	ts, mapper, err := newPaged(ranges, slots*maxLen, c.NumKeyValueHeads, c.HeadDim, pageBytes, budget)
	if err != nil {
		return nil, fmt.Errorf("paged kv cache (%d slots × %d tokens, %d pages of %d bytes × %d ranges): %w", slots, maxLen, budget, pageBytes, ranges, err)
	}
	kv.K, kv.V = ts[:L], ts[L:]
	kv.Pages = newKVPages(slots, maxLen, rowBytes, pageBytes, ranges, budget, mapper)
	kv.b = nil // the mapper owns the ranges: nothing goes back to the backend's pool
	return kv, nil
}

// AccountPages makes a cache with full storage obey a page budget (what a
// paged cache does without a KVPager backend, and what test models use):
// rows of rowBytes, pages of pg.PageBytes (0: DefaultKVPageBytes) in each
// of ranges ranges. It must be called on a cache no step has written.
func (kv *KVCache) AccountPages(rowBytes int64, ranges int, pg KVPaging) error {
	if pg.PageBytes == 0 {
		pg.PageBytes = DefaultKVPageBytes
	}
	if rowBytes <= 0 || ranges <= 0 || pg.BudgetBytes <= 0 || pg.PageBytes < 0 {
		return fmt.Errorf("kv page accounting: rows of %d bytes, %d ranges, budget %d, page %d bytes: want all > 0", rowBytes, ranges, pg.BudgetBytes, pg.PageBytes)
	}
	budget := int(pg.BudgetBytes / (pg.PageBytes * int64(ranges)))
	kv.Pages = newKVPages(kv.Slots, kv.MaxLen, rowBytes, pg.PageBytes, ranges, budget, nil)
	return nil
}
