package cuda

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/model"
)

// TestHeadDimRefused: the CUDA backend serves every even head dim up to
// MaxHeadDim (the tests run each) and refuses larger ones with an error
// naming head_dim: when a model is loaded (model.ConfigChecker, before
// any weight is read) and in attention itself, rather than computing
// something wrong.
func TestHeadDimRefused(t *testing.T) {
	b := NewBackend(testDevice(t), FP32)
	o := model.DefaultTiny()
	for _, c := range []struct {
		D  int
		ok bool
	}{{2, true}, {24, true}, {130, true}, {MaxHeadDim, true}, {MaxHeadDim + 2, false}, {512, false}} {
		o.HeadDim = c.D
		cfg, err := o.Config()
		if err != nil {
			t.Fatal(err)
		}
		err = model.CheckBackend(b, cfg)
		if c.ok != (err == nil) {
			t.Errorf("head_dim %d: CheckConfig %v, want accepted %v", c.D, err, c.ok)
		}
		if c.ok {
			continue
		}
		want := fmt.Sprintf("head_dim %d", c.D)
		if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--device cpu") {
			t.Errorf("head_dim %d: %v, want an error naming %q and the CPU alternative", c.D, err, want)
		}
		// Loading stops at the config: the folder is not even opened.
		if _, err := model.LoadParams(b, cfg, t.TempDir()+"/absent"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("head_dim %d: LoadParams %v, want the head_dim refusal", c.D, err)
		}
		q, k, v, out := b.New(1, 2, c.D), b.New(1, 1, c.D), b.New(1, 1, c.D), b.New(1, 2, c.D)
		b.Attention(out, nil, q, k, v, []model.Segment{{QLen: 1, KLen: 1}}, 1)
		if err := b.Err(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("head_dim %d: attention %v, want the head_dim refusal", c.D, err)
		}
		b.ResetErr()
		b.Release(q, k, v, out)
	}
}
