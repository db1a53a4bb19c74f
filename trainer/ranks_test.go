package trainer

import (
	"fmt"
	"testing"
)

// TestForwardBatches: one process computes the old log-probs in
// micro-batches of mb rows over the whole step; the data-parallel ranks
// each take the rows of the micro-batches they train (k mod W), and
// together every span exactly once, in order.
func TestForwardBatches(t *testing.T) {
	spans := microBatches([]int{2, 6, 3, 5, 2, 4, 6, 2}, 5, 7) // 30 rows: 5 micro-batches
	solo := soloRanks{}.forwardBatches(spans, 30, 7)
	if want := "[{0 7 0 0} {7 14 0 0} {14 21 0 0} {21 28 0 0} {28 30 0 0}]"; fmt.Sprint(solo) != want {
		t.Errorf("one process: %v, want %v", solo, want)
	}
	for _, c := range []struct {
		size int
		want []string // by rank
	}{
		{2, []string{"[{0 7 0 3} {14 18 0 3} {25 30 1 2}]", "[{7 14 0 3} {18 25 1 2}]"}},
		{3, []string{"[{0 7 0 3} {18 25 1 2}]", "[{7 14 0 3} {25 30 1 2}]", "[{14 18 0 3}]"}},
		{6, []string{"[{0 7 0 3}]", "[{7 14 0 3}]", "[{14 18 0 3}]", "[{18 25 1 2}]", "[{25 30 1 2}]", "[]"}},
	} {
		covered := map[microSpan]int{}
		for r := range c.size {
			got := (&dataParallel{rnk: r, n: c.size}).forwardBatches(spans, 30, 7)
			if fmt.Sprint(got) != c.want[r] {
				t.Errorf("%d ranks, rank %d: %v, want %v", c.size, r, got, c.want[r])
			}
			for _, s := range got {
				covered[s]++
			}
		}
		for _, s := range spans {
			if covered[s] != 1 {
				t.Errorf("%d ranks: span %v computed %d times, want once", c.size, s, covered[s])
			}
		}
	}
}

// TestOpenParts: the parts a run is composed of follow Options.Dist: one
// process without a group or with a group of one, data parallel with more;
// the local sampler without a world, the generation ranks with one (and a
// world without generation ranks is refused).
func TestOpenParts(t *testing.T) {
	gen := Default()
	gen.Dist.RolloutRanks = 1
	for _, c := range []struct {
		name          string
		cfg           Config
		d             *Dist
		ranks, source string // "" with source: refused
	}{
		{"no Dist", Default(), nil, "trainer.soloRanks", "trainer.localRollouts"},
		{"no group", Default(), &Dist{}, "trainer.soloRanks", "trainer.localRollouts"},
		{"a group of one", Default(), &Dist{Group: groups(t, 1)[0]}, "trainer.soloRanks", "trainer.localRollouts"},
		{"a group of two", Default(), &Dist{Group: groups(t, 2)[1]}, "*trainer.dataParallel", "trainer.localRollouts"},
		{"a generation rank", gen, &Dist{World: groups(t, 2)[0]}, "trainer.soloRanks", "*trainer.asyncState"},
		{"no generation rank", Default(), &Dist{World: groups(t, 2)[0]}, "trainer.soloRanks", ""},
	} {
		if got := fmt.Sprintf("%T", openRanks(c.d)); got != c.ranks {
			t.Errorf("%s: rank group %s, want %s", c.name, got, c.ranks)
		}
		src, err := openRollouts(&Trainer{}, c.cfg, c.d)
		if c.source == "" {
			if err == nil {
				t.Errorf("%s: rollout source %T, want an error", c.name, src)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := fmt.Sprintf("%T", src); got != c.source {
			t.Errorf("%s: rollout source %s, want %s", c.name, got, c.source)
		}
	}
}
