package model

// LoRA adapters (Hu et al., 2021) on the decoder's linear projections, as
// PEFT's LoRA layer computes them: a projection y = x·Wᵀ becomes
//
//	y = x·Wᵀ + s·(x·Aᵀ)·Bᵀ,   A (r, in), B (out, r), s = α/r,
//
// with W frozen and only A and B trained. The adapters are a parameter set
// of their own (a Params whose LoRA field is set, listing only A and B in
// its name table), so gradients, AdamW moments, clipping, ZeRO and
// checkpoints walk the adapters alone, with the code that walks a full
// model's weights. The base weights stay in Model.P; the frozen reference
// policy is the same base with no adapters (a Model sharing P, A nil), so
// it costs no second copy.
//
// The products keep the base model's fusions: the A matrices of the
// projections reading the same input are stacked (q/k/v read xn1,
// gate/up read xn2), so one product computes every adapter's x·Aᵀ, and
// the low-rank terms are added into the fused q/k/v product (AddCols: its
// column blocks) and the transposed gate/up product (row blocks).

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
)

// LoRAModules are the projections an adapter can target, in the order the
// name table lists them (PEFT's target_modules use the names in
// loraModulePaths).
var LoRAModules = []string{"q", "k", "v", "o", "gate", "up", "down"}

// loraModulePaths maps a target to its module in the Hugging Face layout.
var loraModulePaths = map[string]string{
	"q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj", "o": "self_attn.o_proj",
	"gate": "mlp.gate_proj", "up": "mlp.up_proj", "down": "mlp.down_proj",
}

// LoRAConfig is the adapters' shape: rank r, scale numerator α and the
// targeted projections.
type LoRAConfig struct {
	Rank    int
	Alpha   float64
	Targets []string
}

// Validate refuses a rank below 1, a non-finite or non-positive α and an
// unknown or repeated target; the messages name the lora.* keys.
func (c *LoRAConfig) Validate() error {
	if c.Rank < 1 {
		return fmt.Errorf("lora.rank = %d must be ≥ 1", c.Rank)
	}
	if !(c.Alpha > 0) || math.IsInf(c.Alpha, 0) {
		return fmt.Errorf("lora.alpha = %v must be a positive number", c.Alpha)
	}
	if len(c.Targets) == 0 {
		return fmt.Errorf("lora.targets is empty: name at least one of %s", strings.Join(LoRAModules, ", "))
	}
	seen := map[string]bool{}
	for _, t := range c.Targets {
		if _, ok := loraModulePaths[t]; !ok {
			return fmt.Errorf("lora.targets: %q is not one of %s", t, strings.Join(LoRAModules, ", "))
		}
		if seen[t] {
			return fmt.Errorf("lora.targets: %q is listed twice", t)
		}
		seen[t] = true
	}
	return nil
}

// Scale is s = α/r, the factor of the low-rank term.
func (c *LoRAConfig) Scale() float32 { return float32(c.Alpha / float64(c.Rank)) }

// Has reports whether target is adapted.
func (c *LoRAConfig) Has(target string) bool { return slices.Contains(c.Targets, target) }

// Adapter is one projection's pair: A (r, in) and B (out, r). Both are nil
// when the projection is not targeted.
type Adapter struct{ A, B *Tensor }

// On reports whether the projection has an adapter.
func (a *Adapter) On() bool { return a.A != nil }

// LayerLoRA is one decoder layer's adapters.
type LayerLoRA struct {
	// QKV are the q, k and v adapters; their A matrices are row views of
	// QKVA, the targeted ones stacked in that order (nil when none is).
	QKV  [3]Adapter
	QKVA *Tensor // (n·r, C)
	O    Adapter
	// Gate and Up: A matrices are row views of GateUpA, as QKV's.
	Gate, Up Adapter
	GateUpA  *Tensor // (n·r, C)
	Down     Adapter
}

// loraDims are a target's (in, out) sizes.
func loraDims(cfg *Config, target string) (in, out int) {
	C, F := cfg.HiddenSize, cfg.IntermediateSize
	HD, GD := cfg.NumAttentionHeads*cfg.HeadDim, cfg.NumKeyValueHeads*cfg.HeadDim
	switch target {
	case "q":
		return C, HD
	case "k", "v":
		return C, GD
	case "o":
		return HD, C
	case "gate", "up":
		return C, F
	default: // down
		return F, C
	}
}

// adapter returns layer l's adapter of target.
func (l *LayerLoRA) adapter(target string) *Adapter {
	switch target {
	case "q":
		return &l.QKV[0]
	case "k":
		return &l.QKV[1]
	case "v":
		return &l.QKV[2]
	case "o":
		return &l.O
	case "gate":
		return &l.Gate
	case "up":
		return &l.Up
	default:
		return &l.Down
	}
}

// namedAdapters is an adapter set's name table: per layer, per target in
// LoRAModules order, A then B, named like the base weight they adapt with
// lora_A / lora_B in place of the weight (PEFT's names less its
// "base_model.model." prefix, which the adapter export adds).
func (p *Params) namedAdapters(cfg *Config) []NamedParam {
	lc := p.LoRA
	var out []NamedParam
	for i := range p.Adapters {
		l := &p.Adapters[i]
		for _, t := range LoRAModules {
			if !lc.Has(t) {
				continue
			}
			in, o := loraDims(cfg, t)
			a := l.adapter(t)
			pre := fmt.Sprintf("model.layers.%d.%s.", i, loraModulePaths[t])
			out = append(out,
				NamedParam{pre + "lora_A.weight", []int{lc.Rank, in}, &a.A},
				NamedParam{pre + "lora_B.weight", []int{o, lc.Rank}, &a.B})
		}
	}
	return out
}

// NewAdapters allocates a zero-filled adapter set of lc for cfg on b.
func NewAdapters(b Backend, cfg *Config, lc *LoRAConfig) *Params {
	p := &Params{LoRA: lc, Adapters: make([]LayerLoRA, cfg.NumHiddenLayers)}
	r, C := lc.Rank, cfg.HiddenSize
	for i := range p.Adapters {
		l := &p.Adapters[i]
		l.QKVA = stackA(b, lc, C, []string{"q", "k", "v"}, []*Adapter{&l.QKV[0], &l.QKV[1], &l.QKV[2]}, r)
		l.GateUpA = stackA(b, lc, C, []string{"gate", "up"}, []*Adapter{&l.Gate, &l.Up}, r)
	}
	for _, np := range p.Named(cfg) {
		if *np.Ptr == nil {
			*np.Ptr = b.New(np.Shape...)
		}
	}
	return p
}

// stackA allocates the stacked A storage of the targeted ones among
// targets (all reading an input of width in) and points their A at its
// row blocks; nil when none is targeted.
func stackA(b Backend, lc *LoRAConfig, in int, targets []string, as []*Adapter, r int) *Tensor {
	n := 0
	for _, t := range targets {
		if lc.Has(t) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	st := b.New(n*r, in)
	k := 0
	for i, t := range targets {
		if lc.Has(t) {
			as[i].A = st.Rows(k*r, (k+1)*r)
			k++
		}
	}
	return st
}

// NewLike allocates a zero-filled set laid out like p: an adapter set of
// the same LoRA config, or a full model's parameters. Gradients and
// optimizer moments are made with it.
func NewLike(b Backend, cfg *Config, p *Params) *Params {
	if p.LoRA != nil {
		return NewAdapters(b, cfg, p.LoRA)
	}
	return NewParams(b, cfg)
}

// AdapterShapes lists lc's adapter names and shapes without allocating.
func AdapterShapes(cfg *Config, lc *LoRAConfig) []NamedParam {
	return (&Params{LoRA: lc, Adapters: make([]LayerLoRA, cfg.NumHiddenLayers)}).Named(cfg)
}

// InitAdapters draws A as PEFT initialises it (torch's kaiming_uniform_
// with a = √5: uniform in ±1/√in) and sets B to zero, so the adapted model
// starts equal to the base; draws come from seed.
func InitAdapters(b Backend, cfg *Config, p *Params, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x10fa5eed))
	for _, np := range p.Named(cfg) {
		host := make([]float32, numel(np.Shape))
		if strings.HasSuffix(np.Name, "lora_A.weight") {
			bound := 1 / math.Sqrt(float64(np.Shape[1]))
			for i := range host {
				host[i] = float32(bound * (2*rng.Float64() - 1))
			}
		}
		b.Upload(*np.Ptr, host)
	}
}

// Trainable is the parameter set the optimizer updates: the adapters when
// the model has them, else its weights.
func (m *Model) Trainable() *Params {
	if m.A != nil {
		return m.A
	}
	return m.P
}

// Base returns a model that computes m's base weights without adapters:
// the frozen reference of a LoRA policy, sharing every weight tensor.
func (m *Model) Base() *Model {
	return &Model{Cfg: m.Cfg, B: m.B, P: m.P, Recompute: m.Recompute, KVCacheBF16: m.KVCacheBF16, KVCacheFP8: m.KVCacheFP8, ExactKV: m.ExactKV, frozen: m.frozen}
}

// MergedWeights returns the host values of m's base weights with every
// adapter folded in, W + s·B·A, in float64 before the one rounding to
// float32, by Params.Named name of the base: what a merged export writes.
// Weights without an adapter are not in the map.
func (m *Model) MergedWeights() (map[string][]float32, error) {
	if m.A == nil {
		return nil, nil
	}
	b, cfg, lc := m.B, m.Cfg, m.A.LoRA
	base := map[string]NamedParam{}
	for _, np := range m.P.Named(cfg) {
		base[np.Name] = np
	}
	out := map[string][]float32{}
	s := float64(lc.Scale())
	for i := range m.A.Adapters {
		for _, t := range LoRAModules {
			if !lc.Has(t) {
				continue
			}
			name := fmt.Sprintf("model.layers.%d.%s.weight", i, loraModulePaths[t])
			np := base[name]
			in, o := loraDims(cfg, t)
			w := readWeight(b, *np.Ptr)
			ad := m.A.Adapters[i].adapter(t)
			A, B := make([]float32, lc.Rank*in), make([]float32, o*lc.Rank)
			b.Download(ad.A, A)
			b.Download(ad.B, B)
			for r := range o {
				for c := range in {
					var d float64
					for k := range lc.Rank {
						d += float64(B[r*lc.Rank+k]) * float64(A[k*in+c])
					}
					w[r*in+c] = float32(float64(w[r*in+c]) + s*d)
				}
			}
			out[name] = w
		}
	}
	if err := b.Err(); err != nil {
		b.ResetErr()
		return nil, fmt.Errorf("merge adapters: %w", err)
	}
	return out, nil
}

// readWeight downloads a base weight, frozen bf16 ones widened (Download
// reads frozen storage; bf16-only weights through ReadHalf).
func readWeight(b Backend, t *Tensor) []float32 {
	host := make([]float32, t.Numel())
	if hw := TrainerCapsOf(b).Half; hw != nil && hw.IsHalfOnly(t) {
		hw.ReadHalf(t, host)
		return host
	}
	b.Download(t, host)
	return host
}
