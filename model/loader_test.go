package model

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTiny writes a random tiny model folder and returns its config.
func writeTiny(t *testing.T, dir string, tied bool) *Config {
	t.Helper()
	o := DefaultTiny()
	o.Tied = tied
	cfg, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
	b := NewTestBackend()
	if err := WriteFolder(dir, cfg, b, RandomParams(b, cfg, 1, 0.02, 0), F32); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// rawSafetensors assembles a file from a header map and a data length.
func rawSafetensors(t *testing.T, path string, header map[string]any, data int) {
	t.Helper()
	hdr, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8, 8+len(hdr)+data)
	binary.LittleEndian.PutUint64(buf, uint64(len(hdr)))
	buf = append(buf, hdr...)
	buf = append(buf, make([]byte, data)...)
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestSafetensorsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	vals := []float32{0, 1, -2.5, 3.140625, 1e-3, -65504, 0.333333}
	for _, dt := range []DType{F32, BF16, F16} {
		path := filepath.Join(dir, string(dt)+".safetensors")
		err := WriteSafetensors(path, []NamedTensor{{Name: "a", Shape: []int{7}, Data: vals}, {Name: "b.c", Shape: []int{2, 1}, Data: []float32{4, 5}}}, dt, map[string]string{"format": "pt"})
		if err != nil {
			t.Fatal(err)
		}
		f, err := OpenSafetensors(path)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float32, 7)
		if err := f.ReadFloat32("a", got); err != nil {
			t.Fatal(err)
		}
		f.Close()
		for i, v := range vals {
			want := v
			switch dt {
			case BF16:
				want = BF16ToF32(F32ToBF16(v))
			case F16:
				want = F16ToF32(F32ToF16(v))
			}
			if got[i] != want {
				t.Errorf("%s [%d]: got %v want %v", dt, i, got[i], want)
			}
		}
		if f.Metadata["format"] != "pt" {
			t.Errorf("%s: metadata %v", dt, f.Metadata)
		}
	}
}

func TestDTypeConversions(t *testing.T) {
	cases := []struct {
		in       float32
		bf16     uint16
		f16      uint16
		f16Value float32
	}{
		{0, 0x0000, 0x0000, 0},
		{1, 0x3f80, 0x3c00, 1},
		{-2, 0xc000, 0xc000, -2},
		{65504, 0x4780, 0x7bff, 65504},                                 // bf16 rounds 0x477fe000 up
		{65520, 0x4780, 0x7c00, float32(inf())},                        // rounds to +Inf in half
		{1.00390625, 0x3f80, 0x3c04, 1.00390625},                       // bf16 tie rounds to even (down)
		{1.01171875, 0x3f82, 0x3c0c, 1.01171875},                       // bf16 tie rounds to even (up)
		{5.960464477539063e-08, 0x3380, 0x0001, 5.960464477539063e-08}, // smallest half subnormal
		{2.9802322387695312e-08, 0x3300, 0x0000, 0},                    // half of it: ties to even zero
	}
	for _, c := range cases {
		if got := F32ToBF16(c.in); got != c.bf16 {
			t.Errorf("F32ToBF16(%v) = %#04x, want %#04x", c.in, got, c.bf16)
		}
		if got := F32ToF16(c.in); got != c.f16 {
			t.Errorf("F32ToF16(%v) = %#04x, want %#04x", c.in, got, c.f16)
		}
		if got := F16ToF32(c.f16); got != c.f16Value {
			t.Errorf("F16ToF32(%#04x) = %v, want %v", c.f16, got, c.f16Value)
		}
	}
	if v := BF16ToF32(F32ToBF16(float32(nan()))); v == v {
		t.Errorf("NaN did not survive bf16: %v", v)
	}
	if v := F16ToF32(F32ToF16(float32(nan()))); v == v {
		t.Errorf("NaN did not survive f16: %v", v)
	}
	// Every half value round-trips exactly through float32.
	for h := 0; h < 1<<16; h++ {
		f := F16ToF32(uint16(h))
		if f != f {
			continue
		}
		if back := F32ToF16(f); back != uint16(h) {
			t.Fatalf("half %#04x → %v → %#04x", h, f, back)
		}
	}
}

// TestBadInputs: every malformed input is an error naming the culprit.
func TestBadInputs(t *testing.T) {
	f32 := func(shape []int, off int64) map[string]any {
		n := int64(numel(shape)) * 4
		return map[string]any{"dtype": "F32", "shape": shape, "data_offsets": []int64{off, off + n}}
	}
	cases := []struct {
		name  string
		setup func(t *testing.T, path string)
		want  string
	}{
		{"short file", func(t *testing.T, p string) { os.WriteFile(p, []byte{1, 2, 3}, 0o644) }, "too short"},
		{"header beyond file", func(t *testing.T, p string) {
			b := make([]byte, 16)
			binary.LittleEndian.PutUint64(b, 1<<40)
			os.WriteFile(p, b, 0o644)
		}, "exceeds the file size"},
		{"header not json", func(t *testing.T, p string) {
			b := make([]byte, 8)
			binary.LittleEndian.PutUint64(b, 4)
			os.WriteFile(p, append(b, "nope"...), 0o644)
		}, "not valid JSON"},
		{"truncated data", func(t *testing.T, p string) { rawSafetensors(t, p, map[string]any{"w": f32([]int{4, 4}, 0)}, 20) }, `tensor "w": data_offsets [0, 64] outside the 20 data bytes`},
		{"overlap", func(t *testing.T, p string) {
			rawSafetensors(t, p, map[string]any{"a": f32([]int{4}, 0), "b": f32([]int{4}, 8)}, 32)
		}, "overlap"},
		{"span mismatch", func(t *testing.T, p string) {
			rawSafetensors(t, p, map[string]any{"a": map[string]any{"dtype": "F32", "shape": []int{3}, "data_offsets": []int{0, 16}}}, 16)
		}, "needs 12"},
		{"unknown dtype", func(t *testing.T, p string) {
			rawSafetensors(t, p, map[string]any{"a": map[string]any{"dtype": "I64", "shape": []int{2}, "data_offsets": []int{0, 16}}}, 16)
		}, `unsupported dtype "I64"`},
		{"bad metadata", func(t *testing.T, p string) {
			rawSafetensors(t, p, map[string]any{"__metadata__": map[string]any{"x": 1}}, 0)
		}, "__metadata__"},
	}
	for _, c := range cases {
		path := filepath.Join(t.TempDir(), "model.safetensors")
		c.setup(t, path)
		_, err := OpenSafetensors(path)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %v, want it to contain %q and the path", c.name, err, c.want)
		}
	}
}

// TestLoadErrors: config/weight mismatches name the tensor and file.
func TestLoadErrors(t *testing.T) {
	edit := func(dir string, f func(map[string]NamedTensor)) {
		st, err := OpenSafetensors(filepath.Join(dir, "model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		all := map[string]NamedTensor{}
		for name, ti := range st.Tensors {
			buf := make([]float32, ti.Numel())
			if err := st.ReadFloat32(name, buf); err != nil {
				t.Fatal(err)
			}
			all[name] = NamedTensor{Name: name, Shape: ti.Shape, Data: buf}
		}
		st.Close()
		f(all)
		var list []NamedTensor
		for _, v := range all {
			list = append(list, v)
		}
		if err := WriteSafetensors(filepath.Join(dir, "model.safetensors"), list, F32, nil); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name   string
		mutate func(dir string)
		want   []string
	}{
		{"missing tensor", func(d string) {
			edit(d, func(m map[string]NamedTensor) { delete(m, "model.layers.1.self_attn.k_norm.weight") })
		}, []string{`missing tensor "model.layers.1.self_attn.k_norm.weight"`}},
		{"unused tensor", func(d string) {
			edit(d, func(m map[string]NamedTensor) {
				m["model.layers.9.mlp.up_proj.weight"] = NamedTensor{Name: "model.layers.9.mlp.up_proj.weight", Shape: []int{1}, Data: []float32{1}}
			})
		}, []string{`unused tensor "model.layers.9.mlp.up_proj.weight"`}},
		{"wrong shape", func(d string) {
			edit(d, func(m map[string]NamedTensor) {
				m["model.norm.weight"] = NamedTensor{Name: "model.norm.weight", Shape: []int{63}, Data: make([]float32, 63)}
			})
		}, []string{`"model.norm.weight" has shape [63], config.json implies [64]`, "model.safetensors"}},
		{"config mismatch", func(d string) {
			raw, _ := os.ReadFile(filepath.Join(d, "config.json"))
			os.WriteFile(filepath.Join(d, "config.json"), []byte(strings.Replace(string(raw), `"intermediate_size": 128`, `"intermediate_size": 96`, 1)), 0o644)
		}, []string{`"model.layers.0.mlp.gate_proj.weight" has shape [128 64], config.json implies [96 64]`}},
		{"non-finite weight", func(d string) {
			edit(d, func(m map[string]NamedTensor) { m["model.norm.weight"].Data[3] = float32(nan()) })
		}, []string{`"model.norm.weight" has a non-finite value`}},
		{"no weights", func(d string) { os.Remove(filepath.Join(d, "model.safetensors")) }, []string{"no model.safetensors"}},
		{"rope scaling", func(d string) {
			raw, _ := os.ReadFile(filepath.Join(d, "config.json"))
			os.WriteFile(filepath.Join(d, "config.json"), []byte(strings.Replace(string(raw), `"model_type"`, `"rope_scaling": {"rope_type": "yarn", "factor": 4}, "model_type"`, 1)), 0o644)
		}, []string{`rope_scaling type "yarn" is not implemented`, "config.json"}},
		{"gqa divisibility", func(d string) {
			raw, _ := os.ReadFile(filepath.Join(d, "config.json"))
			os.WriteFile(filepath.Join(d, "config.json"), []byte(strings.Replace(string(raw), `"num_key_value_heads": 2`, `"num_key_value_heads": 3`, 1)), 0o644)
		}, []string{"must be a multiple of num_key_value_heads (3)"}},
	}
	for _, c := range cases {
		dir := t.TempDir()
		writeTiny(t, dir, false)
		c.mutate(dir)
		_, err := Load(NewTestBackend(), dir)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", c.name, err, w)
			}
		}
	}
}

// TestShardedLoad: a model split over two shards with an index loads to the
// same parameters as the single file, and a wrong index entry is reported.
func TestShardedLoad(t *testing.T) {
	dir := t.TempDir()
	cfg := writeTiny(t, dir, true)
	single, err := Load(NewTestBackend(), dir)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := OpenSafetensors(filepath.Join(dir, "model.safetensors"))
	shards := [2][]NamedTensor{}
	index := map[string]string{}
	i := 0
	for name, ti := range st.Tensors {
		buf := make([]float32, ti.Numel())
		st.ReadFloat32(name, buf)
		k := i % 2
		shards[k] = append(shards[k], NamedTensor{Name: name, Shape: ti.Shape, Data: buf})
		index[name] = []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}[k]
		i++
	}
	st.Close()
	os.Remove(filepath.Join(dir, "model.safetensors"))
	for k, s := range shards {
		WriteSafetensors(filepath.Join(dir, []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}[k]), s, BF16, nil)
	}
	idx, _ := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 0}, "weight_map": index})
	os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), idx, 0o644)
	sharded, err := Load(NewTestBackend(), dir)
	if err != nil {
		t.Fatal(err)
	}
	sn := sharded.P.Named(cfg)
	for i, np := range single.P.Named(cfg) {
		a, b := make([]float32, (*np.Ptr).Numel()), make([]float32, (*np.Ptr).Numel())
		single.B.Download(*np.Ptr, a)
		sharded.B.Download(*sn[i].Ptr, b)
		for j := range a {
			if BF16ToF32(F32ToBF16(a[j])) != b[j] {
				t.Fatalf("%s[%d]: %v vs %v", np.Name, j, a[j], b[j])
			}
		}
	}
	// Route a tensor to the shard that does not hold it.
	for name, shard := range index {
		other := "model-00001-of-00002.safetensors"
		if shard == other {
			other = "model-00002-of-00002.safetensors"
		}
		index[name] = other
		idx, _ = json.Marshal(map[string]any{"weight_map": index})
		os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), idx, 0o644)
		_, err := Load(NewTestBackend(), dir)
		if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "does not contain it") {
			t.Fatalf("misrouted %s: error %v", name, err)
		}
		break
	}
}

func TestConfigDefaultsAndEOS(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{"model_type":"qwen3","hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,
		"num_attention_heads":4,"vocab_size":100,"eos_token_id":[98, 99],"rope_scaling":{"rope_type":"default"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HeadDim != 16 || cfg.NumKeyValueHeads != 4 || cfg.RMSNormEps != 1e-6 || len(cfg.EOSTokenIDs) != 2 || cfg.Dtype() != "bfloat16" {
		t.Fatalf("defaults not applied: %+v", cfg)
	}
	for _, bad := range []struct{ json, want string }{
		{`{"model_type":"llama"}`, `model_type "llama"`},
		{`{"model_type":"qwen3","hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":100,"attention_bias":true}`, "attention_bias"},
		{`{"model_type":"qwen3","hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":100,"use_sliding_window":true}`, "use_sliding_window"},
		{`{"model_type":"qwen3","hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":100,"eos_token_id":100}`, "outside the vocabulary"},
		{`{"model_type":"qwen3","hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":100,"torch_dtype":"int8"}`, `dtype "int8"`},
		{`{"model_type":"qwen3","hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":100,"hidden_act":"gelu"}`, `hidden_act "gelu"`},
		{`{"model_type":"qwen3","hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":100,"rope_parameters":{"rope_type":"yarn","rope_theta":1e6,"factor":4}}`, `rope_type "yarn"`},
		{`{"model_type":"qwen3","hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":100,"rope_theta":1e4,"rope_parameters":{"rope_type":"default","rope_theta":1e6}}`, "disagree"},
	} {
		if _, err := ParseConfig([]byte(bad.json)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("config %s: error %v, want %q", bad.json, err, bad.want)
		}
	}
}

// TestConfigRopeParameters: transformers ≥ 5 writes the RoPE base only in
// rope_parameters (no top-level rope_theta); it must not fall back to the
// default base.
func TestConfigRopeParameters(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{"model_type":"qwen3","hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,
		"num_attention_heads":4,"vocab_size":100,"rope_parameters":{"rope_theta":1000000.0,"rope_type":"default"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RopeTheta != 1e6 {
		t.Fatalf("rope_theta %g, want 1e6 from rope_parameters", cfg.RopeTheta)
	}
}

func inf() float64  { return 1 / zero() }
func nan() float64  { return zero() / zero() }
func zero() float64 { return 0 }
