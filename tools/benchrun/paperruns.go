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
	exact := cfg.Precision.ExactLogProbs
	fwd := 1 // π_old's, which exact mode skips
	if exact {
		fwd = 0
	}
	if trainer.NeedsReference(cfg) {
		fwd++
	}
	return cudaprofile.RunSettings{Rows: cfg.Train.PromptsPerStep * cfg.GDRO.Rollout.NMean,
		MaxNewTokens: cfg.Sampling.MaxNewTokens, Slots: cfg.Sampling.MaxSlots,
		// Exact mode graphs its decode steps too, but for the check's
		// vocabulary digests (sampler.Params.VocabDigests: eager steps).
		Graphs:          cfg.Sampling.CUDAGraphs && !cfg.Precision.ExactLogProbsCheck,
		LogProbForwards: fwd, PPOEpochs: cfg.Train.PPOEpochs, Recompute: cfg.Train.Recompute, Exact: exact}, nil
}
