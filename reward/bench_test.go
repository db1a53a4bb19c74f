package reward

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// mixedBatch is a realistic batch: each shared example's response, plus
// every (prediction, truth) row of the equivalence tables wrapped in ~1.5 KB
// of reasoning and one of the four final-answer styles the models use.
func mixedBatch(tb testing.TB) [][2]string {
	reasoning := strings.Repeat("We expand the expression, collect like terms and check the boundary cases; "+
		"the constraint $x^2 + y^2 = 1$ gives $\\frac{a}{b} = 2$. ", 12)
	styles := []string{
		"%s\n\nAnswer: %s",
		"%s\n\nTherefore, the final answer is $\\boxed{%s}$.",
		"%s\n\nFinal Answer: The final answer is $%s$. I hope it is correct.",
		"%s\n\nSo the answer is \\(\\boxed{%s}\\).\n\nAnswer: %s",
	}
	var batch [][2]string
	for _, ex := range loadExamples(tb) {
		batch = append(batch, [2]string{ex.Response, ex.GroundTruth})
	}
	i := 0
	for _, group := range sortedGroups() {
		for _, c := range equivTables[group] {
			st := styles[i%len(styles)]
			var resp string
			if strings.Count(st, "%s") == 3 {
				resp = fmt.Sprintf(st, reasoning, c.pred, c.pred)
			} else {
				resp = fmt.Sprintf(st, reasoning, c.pred)
			}
			batch = append(batch, [2]string{resp, c.truth})
			i++
		}
	}
	return batch
}

// BenchmarkScoreMixed reports verdicts per second on one core for each mode
// on the mixed batch, and the symbolic mode's throughput relative to the
// reference dapo mode measured in the same run. Goal: ≥ 20,000/s symbolic.
//
//	go test -run '^$' -bench ScoreMixed -benchtime 200x ./reward/
func BenchmarkScoreMixed(b *testing.B) {
	batch := mixedBatch(b)
	rate := map[Mode]float64{}
	for _, mode := range []Mode{ModeDAPO, ModeBoxed, ModeGPQA, ModeSymbolic} {
		s, _ := New(mode)
		b.Run(string(mode), func(b *testing.B) {
			start := time.Now()
			for range b.N {
				for _, p := range batch {
					s.Score(p[0], p[1])
				}
			}
			r := float64(b.N*len(batch)) / time.Since(start).Seconds()
			rate[mode] = r
			b.ReportMetric(r, "verdicts/s")
			b.ReportMetric(0, "ns/op")
		})
	}
	if rate[ModeDAPO] > 0 && rate[ModeSymbolic] > 0 {
		fmt.Printf("symbolic: %.0f verdicts/s/core on %d mixed responses (goal ≥ 20000), %.2f× the dapo reference's %.0f/s\n",
			rate[ModeSymbolic], len(batch), rate[ModeSymbolic]/rate[ModeDAPO], rate[ModeDAPO])
	}
}

// BenchmarkScoreAdversarial reports the worst single-call time of the
// symbolic mode over the adversarial set. Iteration i scores case i mod n and
// each case keeps its fastest time, so with -benchtime 200x every case runs
// five times and a scheduler hiccup is not counted. Goal: ≤ 50 ms.
//
//	go test -run '^$' -bench ScoreAdversarial -benchtime 200x ./reward/
func BenchmarkScoreAdversarial(b *testing.B) {
	cases := adversarialCases()
	s := NewSymbolic(DefaultBudget())
	best := make([]time.Duration, len(cases))
	for i := range b.N {
		k := i % len(cases)
		start := time.Now()
		s.Score(cases[k].resp, cases[k].truth)
		if d := time.Since(start); best[k] == 0 || d < best[k] {
			best[k] = d
		}
	}
	var worst time.Duration
	worstName := ""
	for k, d := range best {
		if d > worst {
			worst, worstName = d, cases[k].name
		}
	}
	b.ReportMetric(float64(worst.Microseconds())/1000, "worst-ms")
	b.ReportMetric(0, "ns/op")
	if b.N >= len(cases) {
		b.Logf("worst single call %.2f ms (%s) over %d adversarial cases (goal ≤ 50 ms)",
			float64(worst.Microseconds())/1000, worstName, len(cases))
	}
}

func sortedGroups() []string {
	var gs []string
	for g := range equivTables {
		gs = append(gs, g)
	}
	for i := range gs {
		for j := i + 1; j < len(gs); j++ {
			if gs[j] < gs[i] {
				gs[i], gs[j] = gs[j], gs[i]
			}
		}
	}
	return gs
}
