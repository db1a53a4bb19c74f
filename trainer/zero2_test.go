package trainer

import (
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gdrotrain/gdrotrain/checkpoint"
	"github.com/gdrotrain/gdrotrain/internal/testinfra/testfix"
)

// TestZeRO2MatchesZeRO1Bitwise: where each rank runs one micro-batch per
// optimizer step (2 ranks, 2 micro-batches per mini-batch), ZeRO-2's
// per-micro-batch reduce-scatter adds the same sums in the same order as
// ZeRO-1's per-step one, so weights, moments and metrics are bitwise
// equal (TestDataParallelMatchesOneRank covers the other layouts, within
// tolerance).
func TestZeRO2MatchesZeRO1Bitwise(t *testing.T) {
	cfg := dpConfigs(t)["prompt_gdro"]
	// 4 prompts of 2 rollouts, 2 prompts per mini-batch: 4 rows, two
	// micro-batches of 2.
	cfg.Train.MicroBatchRows = 2
	dirs := map[int]string{}
	for _, zero := range []int{1, 2} {
		c := cfg
		c.Run.Name = fmt.Sprintf("zero%d", zero)
		c.Dist.ZeROStage = zero
		for r, err := range runRanks(t, c, 2, "", nil, nil) {
			if err != nil {
				t.Fatalf("ZeRO-%d rank %d: %v", zero, r, err)
			}
		}
		dirs[zero] = c.RunDir()
	}
	last := func(dir string) string {
		d, m, _ := checkpoint.Latest(filepath.Join(dir, "checkpoints"))
		if m.Step != cfg.Train.Steps {
			t.Fatalf("%s: last checkpoint is of step %d, want %d", dir, m.Step, cfg.Train.Steps)
		}
		return d
	}
	a, b := last(dirs[1]), last(dirs[2])
	wa, wb := testfix.LoadWeights(t, a), testfix.LoadWeights(t, b)
	if !reflect.DeepEqual(wa, wb) {
		testfix.CloseTensors(t, "weights", wa, wb, nil, 0)
		t.Error("ZeRO-2's weights differ from ZeRO-1's")
	}
	if !reflect.DeepEqual(testfix.LoadMoments(t, a, wa), testfix.LoadMoments(t, b, wb)) {
		t.Error("ZeRO-2's AdamW moments differ from ZeRO-1's")
	}
	if ma, mb := testfix.Metrics(t, dirs[1]), testfix.Metrics(t, dirs[2]); !reflect.DeepEqual(ma, mb) {
		t.Errorf("metrics differ:\n%v\n%v", ma, mb)
	}
}
