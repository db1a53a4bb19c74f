package export

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/checkpoint"
	"github.com/gdrotrain/gdrotrain/model"
)

// TestExportRoundTrip: export a checkpoint (float32 and bf16, sharded and
// not) and load it back with our loader: identical tensors (bf16: the
// rounded values), index present when sharded, a damaged checkpoint refused.
func TestExportRoundTrip(t *testing.T) {
	root := t.TempDir()
	o := model.DefaultTiny()
	cfg, _ := o.Config()
	b := cpu.NewBackend()
	p := model.RandomParams(b, cfg, 4, 0.1, 0.2)
	w, err := checkpoint.Begin(filepath.Join(root, "checkpoints"), 7)
	if err != nil {
		t.Fatal(err)
	}
	if err := model.WriteFolder(w.Dir(), cfg, b, p, model.F32); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(w.Dir(), "tokenizer.json"), []byte(`{"stub": true}`), 0o644)
	ckpt, err := w.Commit(checkpoint.Manifest{State: json.RawMessage(`{}`), Config: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dtype   string
		shardGB float64
		sharded bool
	}{{"fp32", 0, false}, {"bf16", 0.00005, true}, {"fp16", 5, false}} {
		out := filepath.Join(root, "hf-"+c.dtype)
		if err := Run(quiet(Options{Checkpoint: ckpt, Out: out, DType: c.dtype, ShardGB: c.shardGB})); err != nil {
			t.Fatal(err)
		}
		_, err := os.Stat(filepath.Join(out, "model.safetensors.index.json"))
		if (err == nil) != c.sharded {
			t.Errorf("%s: index present = %v, want %v", c.dtype, err == nil, c.sharded)
		}
		if _, err := os.Stat(filepath.Join(out, "tokenizer.json")); err != nil {
			t.Errorf("%s: tokenizer not exported", c.dtype)
		}
		m, err := model.Load(cpu.NewBackend(), out)
		if err != nil {
			t.Fatal(err)
		}
		dt, _ := model.ParseDType(c.dtype)
		if m.Cfg.Dtype() != dt.TorchName() {
			t.Errorf("%s: config torch_dtype %q", c.dtype, m.Cfg.Dtype())
		}
		got := m.P.Named(m.Cfg)
		for i, np := range p.Named(cfg) {
			want := make([]float32, (*np.Ptr).Numel())
			b.Download(*np.Ptr, want)
			have := make([]float32, len(want))
			m.B.Download(*got[i].Ptr, have)
			for j := range want {
				w := want[j]
				switch dt {
				case model.BF16:
					w = model.BF16ToF32(model.F32ToBF16(w))
				case model.F16:
					w = model.F16ToF32(model.F32ToF16(w))
				}
				if have[j] != w {
					t.Fatalf("%s %s[%d]: %v, want %v", c.dtype, np.Name, j, have[j], w)
				}
			}
		}
	}
	// --adapter and --base belong to LoRA checkpoints.
	x := Options{Checkpoint: ckpt, Out: filepath.Join(root, "x"), DType: "bf16", ShardGB: 5}
	for flag, o := range map[string]Options{"--adapter": {Adapter: true}, "--base": {Base: root}} {
		o.Checkpoint, o.Out, o.DType, o.ShardGB = x.Checkpoint, x.Out, x.DType, x.ShardGB
		if err := Run(quiet(o)); err == nil ||
			!strings.Contains(err.Error(), flag+": ") || !strings.Contains(err.Error(), "not a LoRA checkpoint") {
			t.Errorf("%s on a full checkpoint: %v", flag, err)
		}
	}
	// A damaged checkpoint is refused by name.
	os.Truncate(filepath.Join(ckpt, "model.safetensors"), 100)
	if err := Run(quiet(x)); err == nil || !strings.Contains(err.Error(), "model.safetensors") {
		t.Fatalf("damaged checkpoint: %v", err)
	}
}

// quiet sets o's writers to discard the summary lines.
func quiet(o Options) Options {
	o.Stdout, o.Stderr = io.Discard, io.Discard
	return o
}
