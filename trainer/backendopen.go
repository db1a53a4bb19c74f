package trainer

// The run's memory plan (package memplan) from its config, and opening
// the backend the plan is checked against.

import (
	"fmt"

	"github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/device"
	"github.com/gdrotrain/gdrotrain/gdro"
	"github.com/gdrotrain/gdrotrain/memplan"
	"github.com/gdrotrain/gdrotrain/model"
)

// memSettings is what the memory plan reads of c, for a GPU (gpu) or the
// CPU.
func (c Config) memSettings(gpu bool) memplan.Settings {
	return memplan.Settings{
		SeqLen:         c.Data.MaxPromptLength + max(c.Sampling.MaxNewTokens, c.Validation.MaxNewTokens),
		MicroBatchRows: c.Train.MicroBatchRows, FusedHead: c.Train.FusedHead, Recompute: c.Train.Recompute,
		LoRA: c.LoRA.Model(), MaxSlots: c.Sampling.MaxSlots, CUDAGraphs: c.Sampling.CUDAGraphs,
		KVPoolBytes: c.Sampling.KVBudgetBytes(), NeedRef: NeedsReference(c), ShardMasters: c.Dist.ShardMasters,
		RefBF16: c.Precision.RefBF16(), KVBF16: c.Precision.KVBF16(gpu), KVFP8: c.Precision.KVFP8(),
		BF16Products: c.Precision.MatMul == "bf16",
	}
}

// kvCacheGPU reports whether precision.kv_cache auto resolves for a GPU on
// b: a backend with its own device memory (model.MemoryReporter).
func kvCacheGPU(b model.Backend) bool { return model.MemoryCapsOf(b).Reporter != nil }

// planFor plans cfg's run for the CPU or a GPU named device.
func planFor(mc *model.Config, cfg Config, gpu bool, device string) memplan.Budget {
	return memplan.For(mc, cfg.memSettings(gpu), gpu, device)
}

// NeedsReference reports whether the run keeps a frozen reference model.
func NeedsReference(cfg Config) bool {
	return cfg.Loss.KLCoef > 0 || cfg.GDRO.Prompt.Signal == gdro.SignalSurrogateKL
}

// PlanBudget plans the run's memory from config.json alone for the device
// run.device names, without opening it (Available is left 0).
func PlanBudget(cfg Config) (memplan.Budget, error) {
	mc, err := model.LoadConfig(cfg.Model.Path)
	if err != nil {
		return memplan.Budget{}, fmt.Errorf("policy: %w", err)
	}
	kind, _, _ := device.Parse(cfg.Run.Device)
	return planFor(mc, cfg, kind == device.CUDA, cfg.Run.Device), nil
}

// BackendOpener opens the backend a device name asks for (cpu, cuda,
// cuda:N, auto) with the GPU's matrix-product precision; logf receives the
// choice. The binary passes backend.Open; the trainer itself links no GPU
// code.
type BackendOpener func(device, precision string, logf func(string, ...any)) (model.Backend, error)

// CPUOnly is the opener used when none is given: cpu opens the CPU
// backend, auto falls back to it (saying so), and cuda is an error.
func CPUOnly(name, precision string, logf func(string, ...any)) (model.Backend, error) {
	kind, _, err := device.Parse(name)
	if err != nil {
		return nil, err
	}
	if _, err := device.ParsePrecision(precision); err != nil {
		return nil, err
	}
	switch kind {
	case device.CUDA:
		return nil, fmt.Errorf("device %s: this program opens no GPU backend (trainer.Options.Backend is not set; the gdrotrain binary sets it to backend.Open)", name)
	case device.Auto:
		logf("device auto: this program opens no GPU backend; using the CPU backend")
	}
	return cpu.NewBackend(), nil
}

// OpenBackend opens the device run.device names with open (nil: CPUOnly)
// and plans the run's memory against it, reading only config.json (nothing
// large is allocated). A backend with its own device memory
// (model.MemoryReporter) is planned against that memory, others against
// the host's.
func OpenBackend(cfg Config, open BackendOpener, logf func(string, ...any)) (model.Backend, memplan.Budget, error) {
	mc, err := model.LoadConfig(cfg.Model.Path)
	if err != nil {
		return nil, memplan.Budget{}, fmt.Errorf("policy: %w", err)
	}
	if open == nil {
		open = CPUOnly
	}
	b, err := open(cfg.Run.Device, cfg.Precision.MatMul, logf)
	if err != nil {
		kind, _, _ := device.Parse(cfg.Run.Device)
		return nil, planFor(mc, cfg, kind != device.CPU, cfg.Run.Device+" (not opened)"), fmt.Errorf("run.device: %w", err)
	}
	if cfg.Precision.ExactLogProbs {
		bi := model.TrainerCapsOf(b).Exact
		if bi == nil {
			return nil, planFor(mc, cfg, true, b.Name()), fmt.Errorf("run.device %s (%s): %w", cfg.Run.Device, b.Name(), errNotInvariant)
		}
		bi.SetBatchInvariant(true)
		logf("precision.exact_logprobs: batch-invariant products on %s; the sampler's log-probs are π_old", b.Name())
	}
	mr := model.MemoryCapsOf(b).Reporter
	gpu := mr != nil
	bud := planFor(mc, cfg, gpu, b.Name())
	bud.Available = memplan.Available()
	if gpu {
		free, _, err := mr.MemInfo()
		if err != nil {
			return nil, bud, err
		}
		bud.Device, bud.Available = fmt.Sprintf("%s, %s", b.Name(), mr.DeviceName()), free
	}
	return b, bud, nil
}
