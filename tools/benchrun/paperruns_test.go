package benchrun

import (
	"testing"

	cudaprofile "github.com/gdrotrain/gdrotrain/tools/profile"
)

// TestPaperRunSettings: the pipeline estimate's workloads read the paper
// configs as resolved (256 prompts × 4 rollouts, a reference model for the
// KL, recompute), and an unknown config is an error naming it.
func TestPaperRunSettings(t *testing.T) {
	for _, c := range []struct {
		config string
		want   cudaprofile.RunSettings
	}{
		{"paper-grpo-1.7b", cudaprofile.RunSettings{Rows: 1024, MaxNewTokens: 4096, Slots: 32, Graphs: true, LogProbForwards: 2, PPOEpochs: 1, Recompute: true}},
		{"paper-grpo-8b", cudaprofile.RunSettings{Rows: 1024, MaxNewTokens: 4096, Slots: 16, Graphs: true, LogProbForwards: 2, PPOEpochs: 1, Recompute: true}},
		// Exact mode: no π_old forward, decode graphs as today's.
		{"recipe-exact-grpo-1.7b", cudaprofile.RunSettings{Rows: 1024, MaxNewTokens: 4096, Slots: 32, Graphs: true, LogProbForwards: 1, PPOEpochs: 1,
			Recompute: true, Exact: true}},
	} {
		got, err := paperRunSettings(c.config)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("%s: %+v, want %+v", c.config, got, c.want)
		}
	}
	wls, err := cudaprofile.PaperWorkloads(paperRunSettings)
	if err != nil || len(wls) != len(cudaprofile.PaperConfigs) || wls[0].ResponseTokens != 2048 || wls[1].Model != "Qwen3-8B" {
		t.Errorf("paper workloads %+v, %v", wls, err)
	}
	if _, err := paperRunSettings("no-such-config"); err == nil {
		t.Error("an unknown config was accepted")
	}
}
