package model

// Parameters, their Hugging Face names, and loading / saving them.
//
// One table (Params.Named) maps every Hugging Face tensor name to a struct
// field and its expected shape; loading, saving, gradient bookkeeping and the
// optimizer all walk that table, so a name can never be handled in one place
// and forgotten in another.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Layer holds one decoder block's weights (HF layout: linear weights are
// (out, in)).
type Layer struct {
	InputNorm *Tensor // (C)   input_layernorm
	Q         *Tensor // (H·D, C), rows 0…H·D−1 of QKV
	K         *Tensor // (G·D, C), the next G·D rows of QKV
	V         *Tensor // (G·D, C), the last G·D rows of QKV
	O         *Tensor // (C, H·D)
	QNorm     *Tensor // (D)   per-head RMSNorm on queries
	KNorm     *Tensor // (D)   per-head RMSNorm on keys
	PostNorm  *Tensor // (C)   post_attention_layernorm
	Gate      *Tensor // (F, C), rows 0…F−1 of GateUp
	Up        *Tensor // (F, C), rows F…2F−1 of GateUp
	Down      *Tensor // (C, F)
	// GateUp holds gate_proj over up_proj, so one product computes both
	// (and, for gradients, one product accumulates both); Gate and Up are
	// its row views, which is what checkpoints and the optimizer see.
	GateUp *Tensor // (2F, C)
	// QKV holds q_proj over k_proj over v_proj for the same reason: one
	// product reads the normed input once and writes every token's query,
	// key and value heads side by side, and one product accumulates the
	// three weight gradients. Q, K and V are its row views.
	QKV *Tensor // ((H+2G)·D, C)
}

// Params is a full set of model parameters (or of their gradients or
// optimizer moments, which share the layout).
type Params struct {
	Embed     *Tensor // (V, C)
	Layers    []Layer
	FinalNorm *Tensor // (C)
	LMHead    *Tensor // (V, C); the same tensor as Embed when embeddings are tied
	Tied      bool

	// LoRA, when set, makes this an adapter set (lora.go): it holds only
	// Adapters, and the name table lists them instead of the weights.
	LoRA     *LoRAConfig
	Adapters []LayerLoRA
}

// NamedParam is one row of the name table.
type NamedParam struct {
	Name  string
	Shape []int
	Ptr   **Tensor
}

// Named returns the name table in a stable order. A tied LM head is not
// listed separately: it is the embedding. An adapter set lists its
// adapters.
func (p *Params) Named(cfg *Config) []NamedParam {
	if p.LoRA != nil {
		return p.namedAdapters(cfg)
	}
	C, F, V := cfg.HiddenSize, cfg.IntermediateSize, cfg.VocabSize
	HD, GD, D := cfg.NumAttentionHeads*cfg.HeadDim, cfg.NumKeyValueHeads*cfg.HeadDim, cfg.HeadDim
	out := []NamedParam{{"model.embed_tokens.weight", []int{V, C}, &p.Embed}}
	for i := range p.Layers {
		l := &p.Layers[i]
		pre := fmt.Sprintf("model.layers.%d.", i)
		out = append(out,
			NamedParam{pre + "input_layernorm.weight", []int{C}, &l.InputNorm},
			NamedParam{pre + "self_attn.q_proj.weight", []int{HD, C}, &l.Q},
			NamedParam{pre + "self_attn.k_proj.weight", []int{GD, C}, &l.K},
			NamedParam{pre + "self_attn.v_proj.weight", []int{GD, C}, &l.V},
			NamedParam{pre + "self_attn.o_proj.weight", []int{C, HD}, &l.O},
			NamedParam{pre + "self_attn.q_norm.weight", []int{D}, &l.QNorm},
			NamedParam{pre + "self_attn.k_norm.weight", []int{D}, &l.KNorm},
			NamedParam{pre + "post_attention_layernorm.weight", []int{C}, &l.PostNorm},
			NamedParam{pre + "mlp.gate_proj.weight", []int{F, C}, &l.Gate},
			NamedParam{pre + "mlp.up_proj.weight", []int{F, C}, &l.Up},
			NamedParam{pre + "mlp.down_proj.weight", []int{C, F}, &l.Down},
		)
	}
	out = append(out, NamedParam{"model.norm.weight", []int{C}, &p.FinalNorm})
	if !p.Tied {
		out = append(out, NamedParam{"lm_head.weight", []int{V, C}, &p.LMHead})
	}
	return out
}

// NewParams allocates zero-filled parameters for cfg on backend b.
func NewParams(b Backend, cfg *Config) *Params {
	p := &Params{Layers: make([]Layer, cfg.NumHiddenLayers), Tied: cfg.TieWordEmbeddings}
	F := cfg.IntermediateSize
	HD, GD := cfg.NumAttentionHeads*cfg.HeadDim, cfg.NumKeyValueHeads*cfg.HeadDim
	for i := range p.Layers {
		l := &p.Layers[i]
		l.GateUp = b.New(2*F, cfg.HiddenSize)
		l.Gate, l.Up = l.GateUp.Rows(0, F), l.GateUp.Rows(F, 2*F)
		l.QKV = b.New(HD+2*GD, cfg.HiddenSize)
		l.Q, l.K, l.V = l.QKV.Rows(0, HD), l.QKV.Rows(HD, HD+GD), l.QKV.Rows(HD+GD, HD+2*GD)
	}
	for _, np := range p.Named(cfg) {
		if *np.Ptr == nil {
			*np.Ptr = b.New(np.Shape...)
		}
	}
	if p.Tied {
		p.LMHead = p.Embed
	}
	return p
}

// Each calls f on every parameter tensor once (a tied head is visited once).
func (p *Params) Each(cfg *Config, f func(name string, t *Tensor)) {
	for _, np := range p.Named(cfg) {
		f(np.Name, *np.Ptr)
	}
}

// weightSource routes tensor names to the safetensors file holding them.
type weightSource struct {
	files  []*SafetensorsFile
	byName map[string]*SafetensorsFile
}

func (w *weightSource) Close() {
	for _, f := range w.files {
		f.Close()
	}
}

// openWeightSource opens DIR/model.safetensors or, if present, the shards
// listed in DIR/model.safetensors.index.json.
func openWeightSource(dir string) (*weightSource, error) {
	ws := &weightSource{byName: map[string]*SafetensorsFile{}}
	indexPath := filepath.Join(dir, "model.safetensors.index.json")
	raw, err := os.ReadFile(indexPath)
	switch {
	case err == nil:
		if err := ws.openSharded(dir, indexPath, raw); err != nil {
			ws.Close()
			return nil, err
		}
		return ws, nil
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("read %s: %w", indexPath, err)
	}
	path := filepath.Join(dir, "model.safetensors")
	f, err := OpenSafetensors(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s: no model.safetensors or model.safetensors.index.json (is this a Hugging Face model folder?)", dir)
		}
		return nil, err
	}
	ws.files = append(ws.files, f)
	for name := range f.Tensors {
		ws.byName[name] = f
	}
	return ws, nil
}

func (ws *weightSource) openSharded(dir, indexPath string, raw []byte) error {
	var index struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(raw, &index); err != nil {
		return fmt.Errorf("%s: %w", indexPath, err)
	}
	if len(index.WeightMap) == 0 {
		return fmt.Errorf("%s: empty weight_map", indexPath)
	}
	shards := map[string]*SafetensorsFile{}
	names := make([]string, 0, len(index.WeightMap))
	for name := range index.WeightMap {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		shard := index.WeightMap[name]
		if strings.Contains(shard, "/") || strings.Contains(shard, `\`) || shard == ".." {
			return fmt.Errorf("%s: shard name %q for tensor %q must be a plain file name", indexPath, shard, name)
		}
		f, ok := shards[shard]
		if !ok {
			var err error
			if f, err = OpenSafetensors(filepath.Join(dir, shard)); err != nil {
				return fmt.Errorf("shard listed in %s: %w", indexPath, err)
			}
			shards[shard] = f
			ws.files = append(ws.files, f)
		}
		if _, ok := f.Tensors[name]; !ok {
			return fmt.Errorf("%s: tensor %q is mapped to %s, which does not contain it", indexPath, name, f.Path)
		}
		ws.byName[name] = f
	}
	return nil
}

// LoadParams reads every parameter of cfg from the Hugging Face folder dir
// onto backend b, checking each tensor's shape and reporting missing and
// unused tensors together.
func LoadParams(b Backend, cfg *Config, dir string) (*Params, error) {
	if err := CheckBackend(b, cfg); err != nil {
		return nil, fmt.Errorf("load %s: %w", dir, err)
	}
	p := NewParams(b, cfg)
	if err := ReadParams(cfg, p, dir, func(np NamedParam, host []float32) { b.Upload(*np.Ptr, host) }); err != nil {
		return nil, err
	}
	if err := b.Err(); err != nil {
		return nil, fmt.Errorf("load weights from %s: %w", dir, err)
	}
	if p.Tied {
		p.LMHead = p.Embed
	}
	return p, nil
}

// ReadParams reads every parameter of p's name table from the folder dir
// and hands each, checked, to put; it reports missing, misshapen,
// non-finite and unused tensors together.
func ReadParams(cfg *Config, p *Params, dir string, put func(np NamedParam, host []float32)) error {
	ws, err := openWeightSource(dir)
	if err != nil {
		return err
	}
	defer ws.Close()
	problems, used := readTensors(ws.byName, p.Named(cfg), "", "config.json", put)
	// A tied checkpoint may still carry lm_head.weight (transformers ignores it).
	if p.Tied {
		used["lm_head.weight"] = true
	}
	problems = append(problems, unusedTensors(ws.byName, used, " (not part of a Qwen3 model with this config)")...)
	if len(problems) > 0 {
		return fmt.Errorf("load weights from %s: %w", dir, errors.Join(problems...))
	}
	return nil
}

// saveParams writes p in the Hugging Face layout, split into shards of at
// most maxShardBytes (model-0000i-of-0000n.safetensors plus
// model.safetensors.index.json) when it does not fit in one; 0 never shards.
// Tensors stay in name-table order and are never split. The values of the
// parameters named in given are taken from there instead of from the
// backend (the fp32 masters a sharded optimizer gathered:
// optim.ShardedAdamW.GatherMasters).
func saveParams(b Backend, cfg *Config, p *Params, dir string, dtype DType, maxShardBytes int64, given map[string][]float32) error {
	var shards [][]NamedTensor
	var size, total int64
	for _, np := range p.Named(cfg) {
		host, ok := given[np.Name]
		if !ok {
			host = make([]float32, (*np.Ptr).Numel())
			b.Download(*np.Ptr, host)
		} else if len(host) != (*np.Ptr).Numel() {
			return fmt.Errorf("save weights: %d values given for %s of shape %v", len(host), np.Name, np.Shape)
		}
		n := int64(len(host) * dtype.Size())
		if len(shards) == 0 || (maxShardBytes > 0 && size+n > maxShardBytes && size > 0) {
			shards = append(shards, nil)
			size = 0
		}
		shards[len(shards)-1] = append(shards[len(shards)-1], NamedTensor{Name: np.Name, Shape: np.Shape, Data: host})
		size += n
		total += n
	}
	if err := b.Err(); err != nil {
		return fmt.Errorf("save weights: %w", err)
	}
	meta := map[string]string{"format": "pt"}
	if len(shards) == 1 {
		return WriteSafetensors(filepath.Join(dir, "model.safetensors"), shards[0], dtype, meta)
	}
	weightMap := map[string]string{}
	for i, shard := range shards {
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(shards))
		if err := WriteSafetensors(filepath.Join(dir, name), shard, dtype, meta); err != nil {
			return err
		}
		for _, t := range shard {
			weightMap[t.Name] = name
		}
	}
	index := map[string]any{"metadata": map[string]any{"total_size": total}, "weight_map": weightMap}
	return writeJSON(filepath.Join(dir, "model.safetensors.index.json"), index)
}

// readTensors reads each of named, its name prefixed, from the file byName
// maps it to, and hands it, checked, to put; it returns the missing,
// misshapen, unreadable and non-finite ones as problems (the shapes being
// those what implies), and the names it found.
func readTensors(byName map[string]*SafetensorsFile, named []NamedParam, prefix, what string, put func(np NamedParam, host []float32)) ([]error, map[string]bool) {
	var problems []error
	used := map[string]bool{}
	for _, np := range named {
		name := prefix + np.Name
		f, ok := byName[name]
		if !ok {
			problems = append(problems, fmt.Errorf("missing tensor %q (shape %v)", name, np.Shape))
			continue
		}
		used[name] = true
		ti := f.Tensors[name]
		if !slices.Equal(ti.Shape, np.Shape) {
			problems = append(problems, fmt.Errorf("%s: tensor %q has shape %v, %s implies %v", f.Path, name, ti.Shape, what, np.Shape))
			continue
		}
		host := make([]float32, ti.Numel())
		if err := f.ReadFloat32(name, host); err != nil {
			problems = append(problems, err)
			continue
		}
		if i := firstNonFinite(host); i >= 0 {
			problems = append(problems, fmt.Errorf("%s: tensor %q has a non-finite value (%v) at flat index %d", f.Path, name, host[i], i))
			continue
		}
		put(np, host)
	}
	return problems, used
}

// unusedTensors reports, in name order, the tensors of byName not in used.
func unusedTensors(byName map[string]*SafetensorsFile, used map[string]bool, why string) []error {
	var unused []string
	for name := range byName {
		if !used[name] {
			unused = append(unused, name)
		}
	}
	sort.Strings(unused)
	var problems []error
	for _, name := range unused {
		problems = append(problems, fmt.Errorf("%s: unused tensor %q%s", byName[name].Path, name, why))
	}
	return problems
}

func firstNonFinite(x []float32) int {
	for i, v := range x {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return i
		}
	}
	return -1
}

// ParamShapes lists cfg's parameters (names and shapes, Params.Named
// order) without allocating them, for plans.
func ParamShapes(cfg *Config) []NamedParam {
	return (&Params{Layers: make([]Layer, cfg.NumHiddenLayers), Tied: cfg.TieWordEmbeddings}).Named(cfg)
}
