package trainer

// LoRA runs (model/lora.go): the policy is the base model plus low-rank
// adapters, the only parameters trained; the base's weights are frozen and
// shared with the reference policy, which is the base without adapters.

import (
	"encoding/binary"
	"fmt"
	"hash"
	"math"

	"github.com/gdrotrain/gdrotrain/model"
)

// LoRAConfig trains low-rank adapters on the projections instead of every
// weight (model/lora.go): the base is frozen and is also the reference.
type LoRAConfig struct {
	// Rank is the adapters' rank r; 0 trains every weight (full
	// fine-tuning).
	Rank int `yaml:"rank" json:"rank"`
	// Alpha: each adapted projection adds (alpha/rank)·B·A·x, PEFT's
	// lora_alpha.
	Alpha float64 `yaml:"alpha" json:"alpha"`
	// Targets are the adapted projections: any of q, k, v, o, gate, up,
	// down (PEFT's q_proj … down_proj).
	Targets []string `yaml:"targets" json:"targets"`
}

// DefaultLoRA is off, with the shape "LoRA Without Regret" (Thinking
// Machines, 2025) found to match full fine-tuning in RL when turned on:
// every projection, the MLP's included, α = 32.
func DefaultLoRA() LoRAConfig {
	return LoRAConfig{Alpha: 32, Targets: append([]string(nil), model.LoRAModules...)}
}

// On reports whether the run trains adapters.
func (c LoRAConfig) On() bool { return c.Rank > 0 }

// Model is the adapters' shape, nil when LoRA is off.
func (c LoRAConfig) Model() *model.LoRAConfig {
	if !c.On() {
		return nil
	}
	return &model.LoRAConfig{Rank: c.Rank, Alpha: c.Alpha, Targets: append([]string(nil), c.Targets...)}
}

// Validate checks the section's values (rank 0 needs nothing else).
func (c LoRAConfig) Validate() error {
	if c.Rank < 0 {
		return fmt.Errorf("lora.rank = %d must be ≥ 0 (0: off)", c.Rank)
	}
	if !c.On() {
		return nil
	}
	return c.Model().Validate()
}

// loraSeedSalt separates the adapters' initial draws from every other use
// of run.seed.
const loraSeedSalt = 0x4c6f5241 // "LoRA"

// attachAdapters freezes the policy's base weights (bf16 under bf16
// products, as a bf16 reference is; fp32 otherwise) and gives the policy
// fresh adapters, A drawn from run.seed and B zero, so the run starts at
// the base model.
func (t *Trainer) attachAdapters(lc *model.LoRAConfig) error {
	m, cfg := t.Policy, t.Cfg
	if cfg.Precision.RefBF16() {
		if frozen, err := m.Freeze(); err != nil {
			return fmt.Errorf("lora: freeze the base weights: %w", err)
		} else if frozen {
			t.Log.Printf("lora: base weights frozen in bf16 (precision.reference), shared by the policy and the reference")
		}
	}
	m.A = model.NewAdapters(m.B, m.Cfg, lc)
	model.InitAdapters(m.B, m.Cfg, m.A, cfg.Run.Seed^loraSeedSalt)
	if err := m.B.Err(); err != nil {
		m.B.ResetErr()
		return fmt.Errorf("lora: adapters: %w", err)
	}
	n := int64(0)
	for _, np := range m.A.Named(m.Cfg) {
		n += int64(np.Shape[0] * np.Shape[1])
	}
	t.Log.Printf("lora: rank %d, alpha %g on %v: %.2fM adapter parameters (%.3f%% of the model's %.1fM), the only ones trained",
		lc.Rank, lc.Alpha, lc.Targets, float64(n)/1e6, 100*float64(n)/float64(m.Cfg.NumParams()), float64(m.Cfg.NumParams())/1e6)
	return nil
}

// fingerprintAdapters writes the first elements of every adapter tensor
// (every update moves all of them) for the ranks' weight check.
func fingerprintAdapters(m *model.Model, h hash.Hash) {
	for _, np := range m.A.Named(m.Cfg) {
		t := *np.Ptr
		k := min(t.Numel(), 256)
		host := make([]float32, k)
		m.B.Download(t.View(t.Numel()).Rows(0, k), host)
		for _, x := range host {
			binary.Write(h, binary.LittleEndian, math.Float32bits(x))
		}
	}
}
