package trainer

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/internal/testinfra/testfix"
	"github.com/gdrotrain/gdrotrain/memplan"
	"github.com/gdrotrain/gdrotrain/model"
)

func loraConfig(t *testing.T, extra ...string) Config {
	t.Helper()
	task := testfix.TinyTask(t)
	cfg, err := LoadBytes(nil, "", append(append(task.Sets(), "train.steps=4", "checkpoint.every=1", "validation.every=0",
		"lora.rank=4", "lora.alpha=8", "optim.lr=1e-2", "loss.kl_coef=0.01", "dist.state_check_every=1",
		"train.mini_batch_prompts=4"), extra...)) // one update per step: step 1's KL is at B = 0
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestLoRARun: a LoRA run trains the adapters alone (the base's weights
// untouched, the reference the base itself: KL exactly 0 at the first
// update, where B = 0), checkpoints them as a PEFT adapter folder over the
// base with the base's weight hash, and a run resumed from step 2 ends
// bitwise where the uninterrupted one does.
func TestLoRARun(t *testing.T) {
	if testing.Short() {
		t.Skip("three tiny runs")
	}
	cfg := loraConfig(t)
	cfg.Run.Name = "straight"
	if errs := runRanks(t, cfg, 1, "", nil, nil); errs[0] != nil {
		t.Fatal(errs[0])
	}
	met := readLines(t, filepath.Join(cfg.RunDir(), "metrics.jsonl"))
	if kl := met[0]["kl"].(float64); kl != 0 {
		t.Errorf("step 1: KL %v, want exactly 0 (B = 0: the policy is its base, which is the reference)", kl)
	}
	if kl := met[len(met)-1]["kl"].(float64); kl == 0 {
		t.Errorf("step %d: KL still 0: the adapters did not move the policy", len(met))
	}
	last := lastCheckpoint(t, cfg.RunDir())
	for _, f := range []string{model.AdapterConfigFile, model.AdapterWeightsFile} {
		if _, err := os.Stat(filepath.Join(last, f)); err != nil {
			t.Fatalf("the checkpoint has no %s: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(last, "model.safetensors")); err == nil {
		t.Errorf("a LoRA checkpoint copied the base weights")
	}
	m, err := model.LoadAdapted(cpu.NewBackend(), last, "")
	if err != nil {
		t.Fatal(err)
	}
	base := testfix.LoadWeights(t, cfg.Model.Path)
	for _, np := range m.P.Named(m.Cfg) {
		got := make([]float32, (*np.Ptr).Numel())
		m.B.Download(*np.Ptr, got)
		for i := range got {
			if got[i] != base[np.Name][i] {
				t.Fatalf("base weight %s[%d] changed: %v, was %v", np.Name, i, got[i], base[np.Name][i])
			}
		}
	}
	moved := false
	for name, x := range testfix.LoadWeights(t, last) {
		if strings.HasSuffix(name, "lora_B.weight") {
			for _, v := range x {
				moved = moved || v != 0
			}
		}
	}
	if !moved {
		t.Errorf("every lora_B is still zero after %d steps", len(met))
	}

	half := cfg
	half.Run.Name, half.Train.Steps = "half", 2
	if errs := runRanks(t, half, 1, "", nil, nil); errs[0] != nil {
		t.Fatal(errs[0])
	}
	half.Train.Steps = 4
	if errs := runRanks(t, half, 1, "auto", nil, nil); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if x, y := stripTimes(t, filepath.Join(cfg.RunDir(), "metrics.jsonl")), stripTimes(t, filepath.Join(half.RunDir(), "metrics.jsonl")); x != y {
		t.Errorf("resumed metrics differ:\n%s\n%s", x, y)
	}
	w1, w2 := testfix.LoadWeights(t, last), testfix.LoadWeights(t, lastCheckpoint(t, half.RunDir()))
	if len(w1) != 2*7*m.Cfg.NumHiddenLayers {
		t.Fatalf("%d adapter tensors, want %d", len(w1), 2*7*m.Cfg.NumHiddenLayers)
	}
	for name, x := range w1 {
		for i := range x {
			if x[i] != w2[name][i] {
				t.Fatalf("%s[%d]: %v uninterrupted, %v resumed", name, i, x[i], w2[name][i])
			}
		}
	}
}

// TestLoRARefusesAnotherBase: resuming a LoRA run over a base whose
// weights changed, its config.json and safetensors header the same, is
// refused, naming the weights' hash.
func TestLoRARefusesAnotherBase(t *testing.T) {
	if testing.Short() {
		t.Skip("two tiny runs")
	}
	cfg := loraConfig(t, "train.steps=1")
	if errs := runRanks(t, cfg, 1, "", nil, nil); errs[0] != nil {
		t.Fatal(errs[0])
	}
	// Change the last byte of the weights: same size, same header.
	path := filepath.Join(cfg.Model.Path, "model.safetensors")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-1] ^= 1
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.Train.Steps = 2
	tr, err := Open(cfg, io.Discard, Options{Resume: "auto"})
	if err == nil {
		tr.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "base model's weights changed") {
		t.Fatalf("resume over a changed base: %v", err)
	}
}

// TestLoRADataParallel: two ranks (replicated, ZeRO-1, ZeRO-2 over the
// adapters) end where one process does.
func TestLoRADataParallel(t *testing.T) {
	if testing.Short() {
		t.Skip("four tiny runs")
	}
	cfg := loraConfig(t, "train.steps=2", "checkpoint.every=0")
	cfg.Run.Name = "one"
	if errs := runRanks(t, cfg, 1, "", nil, nil); errs[0] != nil {
		t.Fatal(errs[0])
	}
	oneDir := cfg.RunDir()
	for _, zero := range []int{0, 1, 2} {
		c := cfg
		c.Run.Name, c.Dist.ZeROStage = "two-zero"+string(rune('0'+zero)), zero
		for r, err := range runRanks(t, c, 2, "", nil, nil) {
			if err != nil {
				t.Fatalf("zero %d rank %d: %v", zero, r, err)
			}
		}
		sameWithin(t, c.Model.Path, oneDir, c.RunDir(), c.Train.Steps, 0)
	}
}

// TestLoRAMemoryPlan: a LoRA plan holds the base once (no reference), and
// the adapters' weights, gradients and moments; over 8 ranks ZeRO-1
// shards the adapters' moments. Computed here from the shapes.
func TestLoRAMemoryPlan(t *testing.T) {
	mc := &model.Config{HiddenSize: 2048, IntermediateSize: 6144, NumHiddenLayers: 28, NumAttentionHeads: 16,
		NumKeyValueHeads: 8, HeadDim: 128, VocabSize: 151936, TieWordEmbeddings: true}
	cfg := Default()
	cfg.LoRA.Rank = 32
	lc := cfg.LoRA.Model()
	var n int64
	for _, np := range model.AdapterShapes(mc, lc) {
		n += int64(np.Shape[0] * np.Shape[1])
	}
	if n != 34865152 { // 32·(4096 + 2·3072 + 4096 + 2·8192 + 8192) per layer × 28
		t.Fatalf("%d adapter parameters at rank 32, want 34,865,152", n)
	}
	full := memplan.Estimate(mc, withRef(cfg.memSettings(true)))
	if full.Reference != 0 || full.Base != 4*mc.NumParams() || full.Weights != 4*n || full.Gradients != 4*n || full.Moments != 8*n {
		t.Errorf("one process: %+v; want base %d, no reference, adapters %d, gradients %d, moments %d", full, 4*mc.NumParams(), 4*n, 4*n, 8*n)
	}
	b := planFor(mc, cfg, true, "cuda")
	if b.Plan.Base != memplan.FrozenBytes(mc) || b.Plan.WeightCopies != 2*n+2*int64(mc.VocabSize*mc.HiddenSize) {
		t.Errorf("GPU: base %d (want %d, bf16 matrices), copies %d (want the adapters' and the tied head's bf16)", b.Plan.Base, memplan.FrozenBytes(mc), b.Plan.WeightCopies)
	}
	b.ForWorld(8, 1)
	if b.Plan.Moments > 8*n/8+8*int64(2*7*28) || b.Plan.Moments < 8*n/8 {
		t.Errorf("ZeRO-1 over 8 ranks: moments %d, want about %d", b.Plan.Moments, n)
	}
	if !strings.Contains(b.Report(), "LoRA adapters r=32") || strings.Contains(b.Report(), "reference model") {
		t.Errorf("report:\n%s", b.Report())
	}
}
