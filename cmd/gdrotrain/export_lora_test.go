package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/checkpoint"
	"github.com/gdrotrain/gdrotrain/internal/testinfra/numcheck"
	"github.com/gdrotrain/gdrotrain/internal/testinfra/testfix"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/tools/infer"
)

// TestExportLoRA: a tiny LoRA run's checkpoint (adapters with a nonzero B
// over the task's base) exported merged and as a PEFT adapter folder, each
// loaded back and run on the same tokens as the checkpoint itself (base +
// adapters on the fly): the fp32 merged model within float32 rounding, the
// fp32 adapter folder over its recorded base bitwise, the bf16 merged
// model (sharded) the fp32 one's tensors rounded. `logits --model CHECKPOINT` runs
// the checkpoint directly, and a base whose weights differ from the
// manifest's hash is refused by export --base and by logits, naming both;
// generate runs the checkpoint too.
func TestExportLoRA(t *testing.T) {
	if testing.Short() {
		t.Skip("a tiny training run")
	}
	task := testfix.TinyTask(t)
	// The tiny model never answers right, so every reward would be −1 and
	// B would stay 0. A base with 64 of its 300 ids stopping a response
	// makes lengths differ, and the overlong penalty then rewards them
	// differently: nonzero advantages without a scripted scorer.
	o := model.DefaultTiny()
	o.Vocab, o.EOS = 300, nil
	for id := 100; id < 164; id++ {
		o.EOS = append(o.EOS, id)
	}
	mc, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
	b := cpu.NewBackend()
	if err := model.WriteFolder(task.Model, mc, b, model.RandomParams(b, mc, 5, 0.1, 0), model.F32); err != nil {
		t.Fatal(err)
	}
	if _, err := runCmd(t, "", append([]string{"train", "--config", "demo", "--device", "cpu"},
		taskArgs(task, "run.name=lora", "train.steps=2", "checkpoint.every=1", "validation.every=0",
			"sampling.max_new_tokens=8", "loss.overlong.soft_penalty_tokens=4",
			"lora.rank=4", "lora.alpha=8", "optim.lr=2e-2")...)...); err != nil {
		t.Fatal(err)
	}
	ckpt, man, skipped := checkpoint.Latest(filepath.Join(task.Dir, "lora", "checkpoints"))
	if ckpt == "" || len(skipped) > 0 {
		t.Fatalf("no checkpoint verifies: %v", skipped)
	}
	moved := false
	for name, x := range testfix.LoadWeights(t, ckpt) {
		for _, v := range x {
			moved = moved || (strings.HasSuffix(name, "lora_B.weight") && v != 0)
		}
	}
	if !moved {
		t.Fatal("every lora_B of the checkpoint is zero: the exports would equal the base")
	}

	tokens := []int32{5, 42, 17, 200, 3, 99, 150, 8, 64, 250, 11, 7}
	logits := func(m *model.Model) []float32 {
		t.Helper()
		rows, err := m.Logits(tokens)
		if err != nil {
			t.Fatal(err)
		}
		var flat []float32
		for _, r := range rows {
			flat = append(flat, r...)
		}
		return flat
	}
	ck, err := model.LoadAdapted(cpu.NewBackend(), ckpt, "")
	if err != nil {
		t.Fatal(err)
	}
	want := logits(ck)
	base, err := model.Load(cpu.NewBackend(), task.Model)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := numcheck.Compare(logits(base), want, numcheck.FP32); st.MaxAbs < 1e-3 {
		t.Fatalf("the adapters change the logits by %.1e only: too little to tell the exports apart from the base", st.MaxAbs)
	}

	// Merged, fp32, one file: W + s·B·A rounded once to float32, against
	// the checkpoint's two products rounded apart (x·Wᵀ and the low-rank
	// term). Both are float32 computations with float64 accumulators, so
	// the tolerance is check_references' float32-vs-float64 one (atol
	// 1e-5, rtol 1e-4); observed: about 2e-6, on logits up to 3.6,
	// where numcheck.FP32's atol 1e-6 fails the logits near zero.
	merged := filepath.Join(task.Dir, "merged-fp32")
	if _, err := runCmd(t, "", "export", "--checkpoint", ckpt, "--out", merged, "--dtype", "fp32", "--shard-gb", "0"); err != nil {
		t.Fatal(err)
	}
	if model.IsAdapterFolder(merged) {
		t.Fatalf("the merged export has an %s", model.AdapterConfigFile)
	}
	mf, err := model.Load(cpu.NewBackend(), merged)
	if err != nil {
		t.Fatal(err)
	}
	st, err := numcheck.Compare(logits(mf), want, numcheck.Tol{Atol: 1e-5, Rtol: 1e-4})
	peak := 0.0
	for _, v := range want {
		peak = max(peak, math.Abs(float64(v)))
	}
	t.Logf("merged fp32 vs the checkpoint: max |Δ logit| %.2e, max |logit| %.2f (%.0f%% of the tolerance)", st.MaxAbs, peak, 100*st.Used)
	if err != nil {
		t.Errorf("merged fp32: %v", err)
	}
	// Merged, bf16, sharded: every tensor the bf16 rounding of the fp32
	// export's, exactly.
	mergedBF := filepath.Join(task.Dir, "merged-bf16")
	if _, err := runCmd(t, "", "export", "--checkpoint", ckpt, "--out", mergedBF, "--dtype", "bf16", "--shard-gb", "0.00005"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(mergedBF, "model.safetensors.index.json")); err != nil {
		t.Errorf("merged bf16 --shard-gb 0.00005: no index: %v", err)
	}
	mb, err := model.Load(cpu.NewBackend(), mergedBF)
	if err != nil {
		t.Fatal(err)
	}
	gotBF := mb.P.Named(mb.Cfg)
	for i, np := range mf.P.Named(mf.Cfg) {
		w := make([]float32, (*np.Ptr).Numel())
		mf.B.Download(*np.Ptr, w)
		have := make([]float32, len(w))
		mb.B.Download(*gotBF[i].Ptr, have)
		for j := range w {
			if r := model.BF16ToF32(model.F32ToBF16(w[j])); have[j] != r {
				t.Fatalf("merged bf16 %s[%d]: %v, want %v (the fp32 export's %v rounded)", np.Name, j, have[j], r, w[j])
			}
		}
	}

	// Adapter folder, fp32: the checkpoint's own tensors under PEFT's
	// names over the recorded base, so bitwise the same logits.
	out := filepath.Join(task.Dir, "adapter")
	if _, err := runCmd(t, "", "export", "--checkpoint", ckpt, "--out", out, "--adapter", "--dtype", "fp32"); err != nil {
		t.Fatal(err)
	}
	ac, lc, err := model.ReadAdapterConfig(out)
	if err != nil {
		t.Fatal(err)
	}
	if abs, _ := filepath.Abs(task.Model); ac.BaseModel != abs || lc.Rank != 4 || lc.Alpha != 8 {
		t.Errorf("adapter_config.json: base %q rank %d alpha %v, want %q, 4, 8", ac.BaseModel, lc.Rank, lc.Alpha, abs)
	}
	for _, f := range []string{"tokenizer.json", model.AdapterWeightsFile} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("adapter export: %v", err)
		}
	}
	m, err := model.LoadAdapted(cpu.NewBackend(), out, "")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := numcheck.Compare(logits(m), want, numcheck.Tol{}); err != nil {
		t.Errorf("adapter fp32 over its base: %v (max |Δ| %.2e), want identical logits", err, st.MaxAbs)
	}
	if _, err := runCmd(t, "", "export", "--checkpoint", ckpt, "--out", out+"-x", "--adapter", "--shard-gb", "1"); err == nil || !strings.Contains(err.Error(), "--shard-gb") {
		t.Errorf("--adapter --shard-gb: %v", err)
	}

	// `logits --model CHECKPOINT`: base + adapters through launch.Device.LoadModel.
	lj := filepath.Join(task.Dir, "logits.json")
	ids := strings.Trim(strings.Join(strings.Fields(fmt.Sprint(tokens)), ","), "[]")
	if _, err := runCmd(t, "", "logits", "--model", ckpt, "--ids", ids, "--all", "--out", lj); err != nil {
		t.Fatal(err)
	}
	var lo infer.LogitsOutput
	if raw, err := os.ReadFile(lj); err != nil {
		t.Fatal(err)
	} else if err := json.Unmarshal(raw, &lo); err != nil {
		t.Fatal(err)
	}
	var got []float32
	for _, r := range lo.Positions {
		got = append(got, r...)
	}
	if _, err := numcheck.Compare(got, want, numcheck.Tol{}); err != nil {
		t.Errorf("logits --model CHECKPOINT: %v", err)
	}

	if _, err := runCmd(t, "", "generate", "--model", ckpt, "--prompt", "1+1=", "--mode", "raw", "--device", "cpu", "-n", "2", "--max-new-tokens", "3"); err != nil {
		t.Errorf("generate --model CHECKPOINT: %v", err)
	}

	// Another base: a copy of the base with its last weight byte changed
	// (same size, same header) is refused by name and hash.
	other := filepath.Join(task.Dir, "other-base")
	copyDir(t, task.Model, other)
	flipLastByte(t, filepath.Join(other, "model.safetensors"))
	otherHash, err := checkpoint.WeightsHash(other)
	if err != nil {
		t.Fatal(err)
	}
	_, err = runCmd(t, "", "export", "--checkpoint", ckpt, "--out", filepath.Join(task.Dir, "x"), "--base", other)
	for _, s := range []string{man.Reference.Path, man.Reference.Weights, other, otherHash, "--base"} {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Fatalf("export --base with other weights: %v\nwant it to name %q", err, s)
		}
	}
	// The recorded base itself changed: logits refuses the checkpoint.
	flipLastByte(t, filepath.Join(task.Model, "model.safetensors"))
	if _, err := runCmd(t, "", "logits", "--model", ckpt, "--ids", ids); err == nil || !strings.Contains(err.Error(), "not the same base model") {
		t.Fatalf("logits over a changed base: %v", err)
	}
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func flipLastByte(t *testing.T, path string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-1] ^= 1
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}
