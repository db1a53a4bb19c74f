package benchrun

import (
	"github.com/gdrotrain/gdrotrain/configs"
	cudaprofile "github.com/gdrotrain/gdrotrain/tools/profile"
	"github.com/gdrotrain/gdrotrain/trainer"
)

// paperRunSettings resolves a built-in config into the settings the
// profile's pipeline estimate reads. It lives here, above both packages:
// tools/profile sits below the trainer and the configs (docs/architecture.md).
func paperRunSettings(name string) (cudaprofile.RunSettings, error) {
	raw, err := configs.Get(name)
	if err != nil {
		return cudaprofile.RunSettings{}, err
	}
	cfg, err := trainer.Resolve(raw, "built-in "+name, nil)
	if err != nil {
		return cudaprofile.RunSettings{}, err
	}
	fwd := 1
	if trainer.NeedsReference(cfg) {
		fwd = 2
	}
	return cudaprofile.RunSettings{Rows: cfg.Train.PromptsPerStep * cfg.GDRO.Rollout.NMean,
		MaxNewTokens: cfg.Sampling.MaxNewTokens, Slots: cfg.Sampling.MaxSlots, Graphs: cfg.Sampling.CUDAGraphs,
		LogProbForwards: fwd, PPOEpochs: cfg.Train.PPOEpochs, Recompute: cfg.Train.Recompute}, nil
}
