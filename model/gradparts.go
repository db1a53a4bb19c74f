package model

// The gradients' completion order: BackwardFlush reports each group of
// parameters as soon as the backward has completed their gradients, so a
// caller can send them on (ZeRO-2 reduce-scatters them over the ranks,
// optim/zero2.go) and reuse their storage for the next group.

import (
	"fmt"
	"strings"
)

// GradFlush receives the Params.Named indices of parameters whose
// gradients the current backward has completed; it must leave those
// gradient tensors zeroed. A non-nil error stops the backward.
type GradFlush func(named []int) error

// GradParts groups cfg's Params.Named indices by when Backward completes
// their gradients: Head (the final norm and an untied LM head) right after
// the head's backward, Layers[l] after layer l's, Embed (with a tied head)
// at the end.
type GradParts struct {
	Head   []int
	Layers [][]int
	Embed  []int
}

// PartsOfNamed returns the GradParts of a name table of a model with
// layers decoder layers (a full model's or an adapter set's: adapters are
// in their layer's part, and an adapter set has no head or embedding).
func PartsOfNamed(named []NamedParam, layers int) GradParts {
	gp := GradParts{Layers: make([][]int, layers)}
	for i, np := range named {
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
