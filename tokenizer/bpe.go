package tokenizer

import (
	"fmt"
	"math"
)

// bpeModel is byte-level BPE over ids: a piece starts as one symbol per byte
// and adjacent symbols are merged, lowest merge rank first and leftmost among
// equal ranks, until no adjacent pair has a merge. That is the order of
// Hugging Face's BinaryHeap on (rank, position) and of transformers.js's
// priority queue; the result never depends on whether the whole piece is
// itself in the vocabulary (no ignore_merges shortcut).
type bpeModel struct {
	byteID [256]int32          // id of the single-byte token of each byte
	merges map[uint64]mergeVal // (left id, right id) → rank and merged id
}

type mergeVal struct {
	rank int32
	id   int32
}

const noRank = math.MaxInt32

// linearMax is the piece length (bytes) up to which the quadratic scan is
// used; longer pieces take the heap. Both give identical results (tested).
const linearMax = 128

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

func newBPE(vocab map[string]int, merges [][2]string) (*bpeModel, error) {
	m := &bpeModel{merges: make(map[uint64]mergeVal, len(merges))}
	for b := 0; b < 256; b++ {
		id, ok := vocab[string(byteChar[b])]
		if !ok {
			return nil, fmt.Errorf("model.vocab lacks the byte-level token %q for byte 0x%02x", string(byteChar[b]), b)
		}
		m.byteID[b] = int32(id)
	}
	for i, p := range merges {
		a, okA := vocab[p[0]]
		b, okB := vocab[p[1]]
		c, okC := vocab[p[0]+p[1]]
		if !okA || !okB || !okC {
			return nil, fmt.Errorf("model.merges[%d] = [%q, %q]: token missing from model.vocab", i, p[0], p[1])
		}
		k := pairKey(int32(a), int32(b))
		if _, dup := m.merges[k]; dup {
			continue // Hugging Face keeps the first rank of a duplicated merge
		}
		m.merges[k] = mergeVal{rank: int32(i), id: int32(c)}
	}
	return m, nil
}

func (m *bpeModel) rank(a, b int32) (int32, int32) {
	if v, ok := m.merges[pairKey(a, b)]; ok {
		return v.rank, v.id
	}
	return noRank, -1
}

// encode appends the ids of one pre-tokenized piece (raw bytes) to out.
func (m *bpeModel) encode(piece string, out []int32) []int32 {
	switch n := len(piece); {
	case n == 0:
		return out
	case n == 1:
		return append(out, m.byteID[piece[0]])
	case n <= linearMax:
		return m.encodeLinear(piece, out)
	default:
		return m.encodeHeap(piece, out)
	}
}

// encodeLinear keeps the symbols and the rank of each adjacent pair in
// arrays, merges the minimum and updates the two neighbouring ranks:
// O(n²) with small constants, fastest for ordinary words.
func (m *bpeModel) encodeLinear(piece string, out []int32) []int32 {
	var symBuf, rankBuf, idBuf [linearMax]int32
	n := len(piece)
	sym := symBuf[:n]
	for i := 0; i < n; i++ {
		sym[i] = m.byteID[piece[i]]
	}
	ranks, ids := rankBuf[:n-1], idBuf[:n-1] // ranks[i]: pair (sym[i], sym[i+1])
	for i := range ranks {
		ranks[i], ids[i] = m.rank(sym[i], sym[i+1])
	}
	for len(sym) > 1 {
		best := -1
		bestRank := int32(noRank)
		for i, r := range ranks {
			if r < bestRank { // strict: the leftmost of equal ranks wins
				best, bestRank = i, r
			}
		}
		if best < 0 {
			break
		}
		sym[best] = ids[best]
		copy(sym[best+1:], sym[best+2:])
		sym = sym[:len(sym)-1]
		copy(ranks[best:], ranks[best+1:])
		copy(ids[best:], ids[best+1:])
		ranks, ids = ranks[:len(ranks)-1], ids[:len(ids)-1]
		if best > 0 {
			ranks[best-1], ids[best-1] = m.rank(sym[best-1], sym[best])
		}
		if best < len(ranks) {
			ranks[best], ids[best] = m.rank(sym[best], sym[best+1])
		}
	}
	return append(out, sym...)
}

// heapEntry is a candidate merge of the symbol at pos with its right
// neighbour; it is stale when either symbol has changed since it was pushed.
type heapEntry struct {
	rank, pos, id int32
}

func entryLess(a, b heapEntry) bool {
	return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos)
}

// encodeHeap is Hugging Face's Word::merge_all: a doubly linked list of
// symbols and a min-heap of (rank, position); O(n log n) for long pieces
// (a 100 KB run of letters is one piece).
func (m *bpeModel) encodeHeap(piece string, out []int32) []int32 {
	n := len(piece)
	id := make([]int32, n)
	prev := make([]int32, n)
	next := make([]int32, n)
	for i := 0; i < n; i++ {
		id[i] = m.byteID[piece[i]]
		prev[i] = int32(i - 1)
		next[i] = int32(i + 1)
	}
	next[n-1] = -1
	h := make([]heapEntry, 0, n)
	push := func(e heapEntry) {
		h = append(h, e)
		for i := len(h) - 1; i > 0; {
			p := (i - 1) / 2
			if !entryLess(h[i], h[p]) {
				break
			}
			h[i], h[p] = h[p], h[i]
			i = p
		}
	}
	pop := func() heapEntry {
		top := h[0]
		last := len(h) - 1
		h[0] = h[last]
		h = h[:last]
		for i := 0; ; {
			l, r, s := 2*i+1, 2*i+2, i
			if l < len(h) && entryLess(h[l], h[s]) {
				s = l
			}
			if r < len(h) && entryLess(h[r], h[s]) {
				s = r
			}
			if s == i {
				break
			}
			h[i], h[s] = h[s], h[i]
			i = s
		}
		return top
	}
	for i := 0; i+1 < n; i++ {
		if r, c := m.rank(id[i], id[i+1]); r != noRank {
			push(heapEntry{r, int32(i), c})
		}
	}
	alive := make([]bool, n)
	for i := range alive {
		alive[i] = true
	}
	for len(h) > 0 {
		e := pop()
		p := e.pos
		q := next[p]
		if !alive[p] || q < 0 {
			continue
		}
		if r, c := m.rank(id[p], id[q]); r != e.rank || c != e.id {
			continue // stale: the pair at p changed since e was pushed
		}
		id[p] = e.id
		alive[q] = false
		next[p] = next[q]
		if next[q] >= 0 {
			prev[next[q]] = p
		}
		if pp := prev[p]; pp >= 0 {
			if r, c := m.rank(id[pp], id[p]); r != noRank {
				push(heapEntry{r, pp, c})
			}
		}
		if nq := next[p]; nq >= 0 {
			if r, c := m.rank(id[p], id[nq]); r != noRank {
				push(heapEntry{r, p, c})
			}
		}
	}
	for i := int32(0); i >= 0; i = next[i] {
		out = append(out, id[i])
	}
	return out
}
