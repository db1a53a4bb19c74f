package cuda

// The fused LM head's per-token loss derivative (model.TokenLossGrader):
// computed where the log-probs are, so the forward's head needs no host
// round trip per chunk (kernels/loss.cu).

import (
	"fmt"
	"unsafe"

	"github.com/gdrotrain/gdrotrain/model"
)

// TokenLossGrad overwrites dl with ∂J/∂log π of target rows lo..hi of l at
// the log-probs logp.
func (b *Backend) TokenLossGrad(dl, logp *model.Tensor, l *model.TokenLoss, lo, hi int) {
	p, ok := b.ptrs("token loss gradient", dl, logp)
	if !ok {
		return
	}
	n := hi - lo
	if dl.Numel() != n || logp.Numel() != n || lo < 0 || hi > len(l.Old) {
		b.keep(fmt.Errorf("token loss gradient: rows %d..%d of a loss over %d target rows, into %v from %v", lo, hi, len(l.Old), dl.Shape, logp.Shape))
		return
	}
	if n == 0 {
		return
	}
	// Five doubles a row, uploaded through the index arena as int32 pairs.
	c := make([]float64, 5*n)
	for i := range n {
		k := lo + i
		is := 1.0
		if l.IS != nil {
			is = float64(l.IS[k])
		}
		copy(c[5*i:], []float64{float64(l.Old[k]), float64(l.Ref[k]), is, l.Adv[k], l.Denom[k]})
	}
	words := unsafe.Slice((*int32)(unsafe.Pointer(&c[0])), 2*len(c))
	addr, ok := b.upload("token loss", words)
	if !ok {
		return
	}
	b.kernelCost(40*n, 48*n)
	b.launch("token_loss_grad", [3]int{(n + 255) / 256}, 256, p[0], p[1], addr[0], int32(n),
		l.ClipLow, l.ClipHigh, l.DualClip, l.KLCoef, l.GA)
}

var _ model.TokenLossGrader = (*Backend)(nil)
