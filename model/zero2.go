package model

// ZeRO-2: gradients sharded over data-parallel ranks as well as the
// optimizer state. Under ZeRO-1 every rank accumulates the whole gradient
// of its micro-batches (4 bytes per parameter: 30.5 GiB for Qwen3-8B) and
// the ranks reduce-scatter it once per optimizer step. Under ZeRO-2 a rank
// keeps only
//
//   - a gradient window: one layer's gradients, shared by every layer,
//     plus the input embedding's, the final norm's and the LM head's (an
//     untied head shares the embedding's storage: its gradient is complete
//     and sent before the embedding's backward begins to accumulate);
//   - accumulators for its own range of every parameter (4/W bytes per
//     parameter).
//
// Backward reports each part of the window as soon as the micro-batch's
// gradient of it is complete (GradFlush); the trainer reduce-scatters the
// part over the ranks, adds its range into the accumulators and zeroes the
// part, so the next layer's backward finds it clear. The price is one
// reduce-scatter of the whole gradient per micro-batch instead of one per
// optimizer step; it runs on the compute stream (NCCL) in the order the
// backward frees the parts, so every rank issues the same collectives.
// Summation order changes: the ranks' sums are added micro-batch by
// micro-batch rather than once, so ZeRO-2 equals ZeRO-1 bit for bit when
// each rank runs one micro-batch per optimizer step, and otherwise within
// floating-point reassociation (tested in trainer).

import (
	"fmt"
	"strings"
)

// GradFlush receives the Params.Named indices of parameters whose
// gradients the current backward has completed; it must leave those
// gradient tensors zeroed. A non-nil error stops the backward.
type GradFlush func(named []int) error

// ShardAccumulator is ZeRO-2's reduce-scatter: for each i, acc[i] += the
// sum over the ranks of ts[i] within s.Range (acc[i] holds that range
// only; nil where the range is empty). ts are left with undefined
// contents (the caller zeroes them).
type ShardAccumulator interface {
	ReduceScatterAdd(ts, acc []*Tensor, s Shard) error
}

// GradParts groups cfg's Params.Named indices by when Backward completes
// their gradients: Head (the final norm and an untied LM head) right after
// the head's backward, Layers[l] after layer l's, Embed (with a tied head)
// at the end.
type GradParts struct {
	Head   []int
	Layers [][]int
	Embed  []int
}

// PartsOf returns cfg's GradParts.
func PartsOf(cfg *Config) GradParts {
	gp := GradParts{Layers: make([][]int, cfg.NumHiddenLayers)}
	for i, np := range ParamShapes(cfg) {
		var l int
		switch {
		case np.Name == "model.embed_tokens.weight":
			gp.Embed = append(gp.Embed, i)
		case strings.HasPrefix(np.Name, "model.layers."):
			if _, err := fmt.Sscanf(np.Name, "model.layers.%d.", &l); err == nil && l >= 0 && l < len(gp.Layers) {
				gp.Layers[l] = append(gp.Layers[l], i)
			}
		default:
			gp.Head = append(gp.Head, i)
		}
	}
	return gp
}

// All lists every part in the order Backward completes them: what a rank
// with no micro-batch left in a round flushes (zeros) so that its
// collectives still match the other ranks'.
func (gp GradParts) All() [][]int {
	out := [][]int{gp.Head}
	for l := len(gp.Layers) - 1; l >= 0; l-- {
		out = append(out, gp.Layers[l])
	}
	return append(out, gp.Embed)
}

// NewWindowGrads allocates ZeRO-2's gradient window (see the package
// comment above): every layer's gradients are the same tensors, and an
// untied LM head's gradient shares the embedding's storage. Use it only
// with a GradFlush that zeroes each part as Backward completes it.
func NewWindowGrads(b Backend, cfg *Config) *Params {
	one := *cfg
	one.NumHiddenLayers = 1
	w := NewParams(b, &one)
	p := &Params{Layers: make([]Layer, cfg.NumHiddenLayers), Tied: cfg.TieWordEmbeddings, Embed: w.Embed, FinalNorm: w.FinalNorm}
	for i := range p.Layers {
		p.Layers[i] = w.Layers[0]
	}
	if p.Tied {
		p.LMHead = p.Embed
	} else {
		// The head's part is flushed (and zeroed) before
		// EmbeddingBackward accumulates into the same storage.
		Release(b, w.LMHead)
		p.LMHead = p.Embed
	}
	return p
}

// WindowBytes is the fp32 size of NewWindowGrads' tensors for cfg.
func WindowBytes(cfg *Config) int64 {
	one := *cfg
	one.NumHiddenLayers = 1
	var n int64
	for _, np := range ParamShapes(&one) {
		if np.Name == "lm_head.weight" {
			continue // shares the embedding's storage
		}
		n += int64(numel(np.Shape))
	}
	return 4 * n
}
