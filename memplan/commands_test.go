package memplan

import (
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/model"
)

// TestMemPlanCheck: the sizes against this machine's kind of
// memory (24 GiB): init-tiny --hidden 1000000 --layers 100 (434 GiB) and an
// export of it are refused, a tiny model is not, and an unknown memory
// refuses nothing.
func TestMemPlanCheck(t *testing.T) {
	const avail = 24 << 30
	big := model.DefaultTiny()
	big.Hidden, big.Layers = 1_000_000, 100
	bc, err := big.Config()
	if err != nil {
		t.Fatal(err)
	}
	tc, err := model.DefaultTiny().Config()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		plan Command
		want string // "" : fits
	}{
		{"init-tiny 434 GiB", InitTiny(bc, model.F32), "needs about 434.47 GiB (weights (fp32) 217.23 GiB, model.safetensors (float32) 217.23 GiB) but this machine has 24.00 GiB available (466504025600 bytes needed, 25769803776 available); lower --hidden"},
		{"export of it, bf16 in 5 GiB shards", Export(bc, model.BF16, 5<<30), "export: out of memory before starting: needs about 222.23 GiB"},
		{"tiny", InitTiny(tc, model.F32), ""},
		{"generate on the tiny model", Generate(tc, false, 8, 10, 256, 0), ""},
	} {
		err := c.plan.Check(avail, "this machine")
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v; want %q", c.name, err, c.want)
		}
		if err := c.plan.Check(0, "this machine"); err != nil {
			t.Errorf("%s with unknown memory: %v", c.name, err)
		}
	}
}
