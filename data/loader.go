package data

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
)

// EpochOrder returns the permutation of 0..n-1 that epoch `epoch` visits,
// a function of (seed, epoch, n) only: a Fisher–Yates shuffle driven by a
// PCG generator seeded with (seed, epoch). The generator's output is fixed
// by its specification and the bounded draw is done here (Lemire's
// multiply-shift with rejection), so the order does not change with the Go
// release. (The reference's torch.randperm order cannot be reproduced
// outside torch; docs/algorithm.md §2.6 asks only for a seeded per-epoch permutation.)
func EpochOrder(n int, seed uint64, epoch int) []int {
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	g := rand.NewPCG(seed, 0x9e3779b97f4a7c15^uint64(epoch))
	for i := n - 1; i > 0; i-- {
		j := int(boundedUint64(g, uint64(i+1)))
		perm[i], perm[j] = perm[j], perm[i]
	}
	return perm
}

// boundedUint64 draws uniformly from [0, n) (Lemire 2019).
func boundedUint64(g *rand.PCG, n uint64) uint64 {
	hi, lo := bits.Mul64(g.Uint64(), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul64(g.Uint64(), n)
		}
	}
	return hi
}

// Cursor is the loader's position, saved in checkpoints. Restoring it on the
// same dataset continues the exact sequence of batches.
type Cursor struct {
	Seed      uint64 `json:"seed"`
	BatchSize int    `json:"batch_size"`
	Epoch     int    `json:"epoch"`    // epoch of the next batch
	Position  int    `json:"position"` // index into that epoch's order of the next prompt
	Batches   int64  `json:"batches"`  // batches served so far
	// Fingerprint is a hash of the dataset's UIDs in file order; Restore
	// refuses a cursor taken on a different dataset.
	Fingerprint string `json:"fingerprint"`
	// Content is a hash of every row's content in file order (UID, data
	// source, prompt messages, ground truth, choices): the same ids with
	// other prompts or answers are another dataset too. Absent in cursors
	// of older checkpoints, where Restore cannot check it (the caller says
	// so) and the restored cursor takes this dataset's.
	Content string `json:"content_fingerprint,omitempty"`
}

// ErrContentChanged: a cursor's rows have the same ids but other content.
var ErrContentChanged = errors.New("the training data changed")

// Loader serves batches of prompts: each epoch a fresh permutation, batches
// of BatchSize, the incomplete last batch dropped (drop_last, docs/algorithm.md §2.6).
type Loader struct {
	ds     *Dataset
	cur    Cursor
	order  []int
	orderE int // epoch of order
}

// Fingerprint hashes the dataset's UIDs in order.
func (d *Dataset) Fingerprint() string {
	h := sha256.New()
	for i := range d.Prompts {
		h.Write([]byte(d.Prompts[i].UID))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// ContentFingerprint hashes every row's content in order: what the
// trainer sees of it (UID, data source, the prompt messages, the ground
// truth, the choices).
func (d *Dataset) ContentFingerprint() string {
	h := sha256.New()
	for i := range d.Prompts {
		p := &d.Prompts[i]
		row, _ := json.Marshal(struct { // plain strings: cannot fail
			UID, Source, Truth string
			Messages           any
			Choices            []string
		}{p.UID, p.DataSource, p.GroundTruth, p.Messages, p.Choices})
		h.Write(row)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// NewLoader starts at epoch 0, position 0.
func NewLoader(ds *Dataset, batchSize int, seed uint64) (*Loader, error) {
	if ds == nil || len(ds.Prompts) == 0 {
		return nil, errors.New("data: loader: empty dataset")
	}
	if batchSize <= 0 || batchSize > len(ds.Prompts) {
		return nil, fmt.Errorf("data: loader: batch size %d with %d prompts (drop_last would serve nothing)", batchSize, len(ds.Prompts))
	}
	return &Loader{ds: ds, cur: Cursor{Seed: seed, BatchSize: batchSize, Fingerprint: ds.Fingerprint(), Content: ds.ContentFingerprint()}, orderE: -1}, nil
}

// StepsPerEpoch is ⌊prompts / batch size⌋.
func (l *Loader) StepsPerEpoch() int { return len(l.ds.Prompts) / l.cur.BatchSize }

// Next returns the next batch and the epoch it belongs to.
func (l *Loader) Next() ([]Prompt, int) {
	n := len(l.ds.Prompts)
	if l.cur.Position+l.cur.BatchSize > n {
		l.cur.Epoch++
		l.cur.Position = 0
	}
	if l.orderE != l.cur.Epoch {
		l.order = EpochOrder(n, l.cur.Seed, l.cur.Epoch)
		l.orderE = l.cur.Epoch
	}
	batch := make([]Prompt, l.cur.BatchSize)
	for i := range batch {
		batch[i] = l.ds.Prompts[l.order[l.cur.Position+i]]
	}
	epoch := l.cur.Epoch
	l.cur.Position += l.cur.BatchSize
	l.cur.Batches++
	return batch, epoch
}

// Cursor returns the position to save.
func (l *Loader) Cursor() Cursor { return l.cur }

// Restore continues from a saved cursor.
func (l *Loader) Restore(c Cursor) error {
	if c.Fingerprint != l.cur.Fingerprint {
		return fmt.Errorf("data: loader: cursor was taken on another dataset (fingerprint %s, this dataset %s)", c.Fingerprint, l.cur.Fingerprint)
	}
	if c.Content != "" && c.Content != l.cur.Content {
		return fmt.Errorf("data: loader: %w since the cursor was taken: the same %d row ids, but their prompts or answers differ (content fingerprint %s, this dataset %s)",
			ErrContentChanged, len(l.ds.Prompts), c.Content, l.cur.Content)
	}
	if c.BatchSize != l.cur.BatchSize {
		return fmt.Errorf("data: loader: cursor batch size %d, loader %d", c.BatchSize, l.cur.BatchSize)
	}
	if c.Epoch < 0 || c.Position < 0 || c.Position > len(l.ds.Prompts) {
		return fmt.Errorf("data: loader: cursor out of range (epoch %d, position %d, %d prompts)", c.Epoch, c.Position, len(l.ds.Prompts))
	}
	content := l.cur.Content
	l.cur = c
	l.cur.Content = content // an older cursor's missing one: later cursors carry it
	l.orderE = -1
	return nil
}
