package grpo

import (
	"strings"
	"testing"
)

// TestTokenLossMatchesMicroBatch: the per-token loss the fused head takes
// gives, token for token and bit for bit, MicroBatch's derivative, in
// every aggregation, with and without importance weights and with a
// masked row (divisor 0: no gradient).
func TestTokenLossMatchesMicroBatch(t *testing.T) {
	for _, agg := range []string{"token-mean", "seq-mean-token-mean", "prompt-mean-token-mean"} {
		for _, is := range []bool{false, true} {
			c := DefaultLoss()
			c.Aggregation, c.KLCoef = agg, 0.05
			rows := microRows(is)
			rows[1].Masked = true
			grads, _ := c.MicroBatch(rows, 3)
			l := c.TokenLoss(rows, 3)
			if err := l.Check(9); err != nil {
				t.Fatalf("%s: %v", agg, err)
			}
			k := 0
			for i, r := range rows {
				for j, lp := range r.LogProbs {
					if got := l.Grad(k, lp); got != grads[i][j] {
						t.Errorf("%s, weights %v: row %d token %d: %v, MicroBatch %v", agg, is, i, j, got, grads[i][j])
					}
					k++
				}
			}
		}
	}
}

// TestTokenLossCheck: a loss whose slices disagree with the target count,
// or whose accumulation count is below 1, is an error naming the counts.
func TestTokenLossCheck(t *testing.T) {
	ok := func() *TokenLoss { return DefaultLoss().TokenLoss(microRows(true), 1) }
	for _, c := range []struct {
		name string
		edit func(l *TokenLoss)
		m    int
		want string
	}{
		{"valid", func(*TokenLoss) {}, 9, ""},
		{"wrong count", func(*TokenLoss) {}, 8, "8 target tokens but 9 old"},
		{"short divisors", func(l *TokenLoss) { l.Denom = l.Denom[:8] }, 9, "8 divisors"},
		{"short weights", func(l *TokenLoss) { l.IS = l.IS[:2] }, 9, "2 importance weights"},
		{"accumulation 0", func(l *TokenLoss) { l.GA = 0 }, 9, "must be ≥ 1, got 0"},
	} {
		l := ok()
		c.edit(l)
		err := l.Check(c.m)
		if (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
