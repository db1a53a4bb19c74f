package demo

// Supervised warm-up: maximise the log-likelihood of target responses (the
// token mean per batch), used by the demo to give a random tiny model the
// answer format before GRPO, and usable for any short SFT phase.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gdrotrain/gdrotrain/internal/progress"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/optim"
)

// SFTExample is a prompt and the response to imitate (token ids).
type SFTExample struct {
	Prompt, Response []int32
}

// SFTConfig are the warm-up settings.
type SFTConfig struct {
	Epochs    int
	BatchRows int
	Optim     optim.AdamWConfig
	GradClip  float64
	Seed      uint64
}

// SFT trains m on examples and returns the mean loss (nats per response
// token) of each epoch.
func SFT(ctx context.Context, m *model.Model, examples []SFTExample, c SFTConfig, logf func(string, ...any)) ([]float64, error) {
	if c.Epochs < 1 || c.BatchRows < 1 || len(examples) == 0 {
		return nil, fmt.Errorf("sft: need ≥ 1 epoch, batch ≥ 1 and examples (got %d, %d, %d)", c.Epochs, c.BatchRows, len(examples))
	}
	opt := optim.NewAdamW(m.B, m.Cfg, c.Optim)
	grads := model.NewParams(m.B, m.Cfg)
	rng := rand.New(rand.NewPCG(c.Seed, 0x5f7))
	order := make([]int, len(examples))
	for i := range order {
		order[i] = i
	}
	steps := (len(examples) + c.BatchRows - 1) / c.BatchRows
	bar := progress.New(c.Epochs*steps, "warm-up batches")
	defer bar.Finish()
	var losses []float64
	for e := 0; e < c.Epochs; e++ {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		var sum float64
		var count int
		for lo := 0; lo < len(order); lo += c.BatchRows {
			if err := ctx.Err(); err != nil {
				return losses, err
			}
			var seqs []model.Sequence
			tokens := 0
			for _, i := range order[lo:min(lo+c.BatchRows, len(order))] {
				ex := examples[i]
				seqs = append(seqs, model.Sequence{Tokens: append(append([]int32(nil), ex.Prompt...), ex.Response...), Start: len(ex.Prompt)})
				tokens += len(ex.Response)
			}
			p, err := m.Forward(seqs)
			if err != nil {
				return losses, fmt.Errorf("sft: %w", err)
			}
			// loss = −(1/T) Σ log π, so ∂loss/∂log π = −1/T for every token.
			d := make([][]float32, len(seqs))
			for i, lp := range p.LogProbs {
				d[i] = make([]float32, len(lp))
				for k, v := range lp {
					d[i][k] = -1 / float32(tokens)
					sum -= float64(v)
				}
			}
			count += tokens
			optim.ZeroGrads(m.B, m.Cfg, grads)
			if err := m.Backward(p, d, grads); err != nil {
				return losses, fmt.Errorf("sft: %w", err)
			}
			if _, err := optim.ClipGradNorm(m.B, m.Cfg, grads, c.GradClip); err != nil {
				return losses, fmt.Errorf("sft: %w", err)
			}
			if err := opt.Update(m.B, m.Cfg, m.P, grads, c.Optim.LR); err != nil {
				return losses, fmt.Errorf("sft: %w", err)
			}
			bar.Add(1, tokens)
		}
		loss := sum / float64(max(count, 1))
		if math.IsNaN(loss) {
			return losses, fmt.Errorf("sft: loss is NaN in epoch %d", e+1)
		}
		losses = append(losses, loss)
		if logf != nil {
			logf("warm-up epoch %d/%d: loss %.4f nats/token", e+1, c.Epochs, loss)
		}
	}
	return losses, nil
}
