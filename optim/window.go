package optim

// ZeRO-2's gradient window: one layer's gradients, which every layer's
// backward uses in turn, plus the input embedding's and the final norm's
// (an untied LM head shares the embedding's storage: its gradient is
// complete and flushed before the embedding's backward begins to
// accumulate). Valid only with a model.GradFlush that zeroes each part as
// model.BackwardFlush completes it (zero2.go).

import "github.com/gdrotrain/gdrotrain/model"

// NewWindowGrads allocates ZeRO-2's gradient window: every layer's
// gradients are the same tensors, and an untied LM head's gradient shares
// the embedding's storage. Use it only with a GradFlush that zeroes each
// part as Backward completes it.
func NewWindowGrads(b model.Backend, cfg *model.Config) *model.Params {
	one := *cfg
	one.NumHiddenLayers = 1
	w := model.NewParams(b, &one)
	p := &model.Params{Layers: make([]model.Layer, cfg.NumHiddenLayers), Tied: cfg.TieWordEmbeddings, Embed: w.Embed, FinalNorm: w.FinalNorm}
	for i := range p.Layers {
		p.Layers[i] = w.Layers[0]
	}
	if p.Tied {
		p.LMHead = p.Embed
	} else {
		// The head's part is flushed (and zeroed) before
		// EmbeddingBackward accumulates into the same storage.
		model.Release(b, w.LMHead)
		p.LMHead = p.Embed
	}
	return p
}

// WindowBytes is the fp32 size of NewWindowGrads' tensors for cfg.
func WindowBytes(cfg *model.Config) int64 {
	one := *cfg
	one.NumHiddenLayers = 1
	var n int64
	for _, np := range model.ParamShapes(&one) {
		if np.Name == "lm_head.weight" {
			continue // shares the embedding's storage
		}
		n += int64(numel(np.Shape))
	}
	return 4 * n
}
