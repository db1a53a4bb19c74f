package profile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/cuda"
	"github.com/gdrotrain/gdrotrain/tools/bench"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }

// TestEstimatePipeline: the synchronous and overlapped step times of a
// made-up workload, against the formulas written out here.
func TestEstimatePipeline(t *testing.T) {
	w := Workload{World: 8, Rows: 100, PromptTokens: 10, ResponseTokens: 30, MaxNewTokens: 50, Slots: 5,
		LogProbForwards: 2, PPOEpochs: 1, Recompute: true}
	r := PipelineRates{TrainTokenS: 0.03, ForwardTokenS: 0.01, DecodeStepS: 0.2, TailStepS: 0.1, SyncBytes: NVLinkGBs * 1e9} // sync: 1 s
	// Generation on G: 100·30 tokens / (G·5 slots) steps of 0.2 s, plus
	// 50 tail steps of 0.1 s = 120/G + 5. Training on G: 100·40 tokens / G
	// × (2 forwards + a step + a recomputed forward) = 4000/G × 0.06 = 240/G.
	gen := func(g float64) float64 { return 120/g + 5 }
	train := func(g float64) float64 { return 240 / g }
	e := EstimatePipeline(w, r)
	if !near(e.SyncS, 1) || !near(e.GenerationS, 20) || !near(e.TrainingS, 30) || !near(e.SynchronousS, 50) {
		t.Errorf("sync %g s, generation %g s, training %g s, synchronous %g s; want 1, 20, 30, 50", e.SyncS, e.GenerationS, e.TrainingS, e.SynchronousS)
	}
	if len(e.Splits) != 7 {
		t.Fatalf("%d splits, want 7", len(e.Splits))
	}
	best := math.Inf(1)
	for i, s := range e.Splits {
		R := float64(i + 1)
		want := math.Max(gen(R), train(8-R)+1)
		best = math.Min(best, want)
		if s.GenerationGPUs != i+1 || s.TrainingGPUs != 7-i || !near(s.GenerationS, gen(R)) || !near(s.TrainingS, train(8-R)+1) || !near(s.StepS, want) {
			t.Errorf("split %d: %+v, want generation %g s, training %g s, step %g s", i+1, s, gen(R), train(8-R)+1, want)
		}
	}
	// R = 3: max(40 + 5, 48 + 1) = 49 s, training-bound; R = 2: 65 s; R = 4: 61 s.
	if e.Best.GenerationGPUs != 3 || !near(e.Best.StepS, 49) || best != 49 || e.Best.Bound() != "training" || !near(e.Ratio, 49.0/50) {
		t.Errorf("best %+v (%s), ratio %g; want 3 generation GPUs, 49 s, training-bound, 0.98", e.Best, e.Best.Bound(), e.Ratio)
	}
}

// madeUpProfiles are a training step and decode steps of Qwen3-1.7B
// named as the profile names them, with times set through their launch
// counts (2 µs each on the H100 roofline): a decode step of batch B at
// context C takes 1000 + 10·B + C/4 + B·C/64 launches, an affine function
// of B, C and B·C that bilinear interpolation reproduces exactly.
func madeUpProfiles(t *testing.T) ([]StepProfile, []DecodeProfile) {
	t.Helper()
	var train []StepProfile
	for _, s := range TrainShapes() {
		train = append(train, StepProfile{Shape: s.Name, Rows: s.Batch, Tokens: s.Batch * s.SeqLen, Layers: s.Opts.Layers,
			Step: cuda.Profile{Launches: 300_000}, Forward: cuda.Profile{Launches: 100_000}})
	}
	cfg, err := bench.Qwen3_1_7B().Config()
	if err != nil {
		t.Fatal(err)
	}
	var decode []DecodeProfile
	for _, s := range DecodeShapes() {
		B, C := int64(s.Batch), int64(s.Context)
		kv := float64(B*C) * float64(2*cfg.NumHiddenLayers) * float64(2*cfg.NumKeyValueHeads*cfg.HeadDim)
		decode = append(decode, DecodeProfile{Shape: s, Step: cuda.Profile{Launches: 1000 + 10*B + C/4 + B*C/64},
			BoundBytes: 2*float64(matrixParams(cfg)) + kv})
	}
	return train, decode
}

// paperSettings are the paper configs' settings as the binary resolves
// them (cmd/gdrotrain's TestPaperRunSettings checks the binary's reading).
func paperSettings(config string) (RunSettings, error) {
	rs := RunSettings{Rows: 256 * 4, MaxNewTokens: 4096, Slots: 32, Graphs: true, LogProbForwards: 2, PPOEpochs: 1, Recompute: true}
	switch config {
	case "paper-grpo-1.7b":
		return rs, nil
	case "paper-grpo-8b":
		rs.Slots = 16
		return rs, nil
	case "recipe-exact-grpo-1.7b":
		rs.LogProbForwards, rs.Exact = 1, true
		return rs, nil
	}
	return RunSettings{}, fmt.Errorf("no config %q", config)
}

// TestPipelineRates: the rates read from (made-up) counted profiles, for
// the counted model and for one scaled from it.
func TestPipelineRates(t *testing.T) {
	train, decode := madeUpProfiles(t)
	wls, err := PaperWorkloads(paperSettings)
	if err != nil {
		t.Fatal(err)
	}
	w := wls[0] // paper-grpo-1.7b: 256 prompts × 4, 32 slots, max_new_tokens 4096, kl_coef > 0, recompute
	if w.Config != "paper-grpo-1.7b" || w.Rows != 1024 || w.Slots != 32 || w.MaxNewTokens != 4096 || w.ResponseTokens != 2048 ||
		w.PromptTokens != 300 || w.LogProbForwards != 2 || !w.Recompute || w.PPOEpochs != 1 || !w.Graphs || w.World != 8 {
		t.Fatalf("1.7B workload %+v", w)
	}
	shape := TrainShapes()[0]
	r, err := RatesFrom(w, train[0], shape, decode, cuda.H100)
	if err != nil {
		t.Fatal(err)
	}
	launches := func(B, C float64) float64 { return 1000 + 10*B + C/4 + B*C/64 }
	wantDecode := 2e-6 * launches(32, 300+1024)
	wantTail := 2e-6 * launches(1, 300+2048)
	// Tied 1.7B: the embedding (151,936 × 2,048) and the norms in fp32,
	// the 28 layers' matrices in bf16.
	layer := int64(2048*(2048*2+1024*2) + 3*2048*6144)
	norms := int64(28*(2*2048+2*128) + 2048)
	wantSync := float64(4*151936*2048 + 2*28*layer + 4*norms)
	if !near(r.TrainTokenS, 0.6/16384) || !near(r.ForwardTokenS, 0.2/16384) || !near(r.DecodeStepS, wantDecode) ||
		!near(r.TailStepS, wantTail) || !near(r.SyncBytes, wantSync) {
		t.Errorf("rates %+v; want train %g, forward %g, decode %g, tail %g s, sync %g bytes", r, 0.6/16384, 0.2/16384, wantDecode, wantTail, wantSync)
	}
	// The 8B: training scaled by model FLOPs, decode by the bound bytes
	// of each counted corner (exact here only at the corners: check the
	// batch-1 tail against its own interpolation of scaled corners).
	w8 := wls[1]
	if w8.Config != "paper-grpo-8b" || w8.Slots != 16 || w8.Rows != 1024 {
		t.Fatalf("8B workload %+v", w8)
	}
	r8, err := RatesFrom(w8, train[0], shape, decode, cuda.H100)
	if err != nil {
		t.Fatal(err)
	}
	s8 := shape
	s8.Opts = bench.Qwen3_8B()
	if k := bench.TrainFLOPs(s8) / bench.TrainFLOPs(shape); !near(r8.TrainTokenS, k*0.6/16384) || k < 4 || k > 5 {
		t.Errorf("8B training per token %g s, want %g (×%.3f)", r8.TrainTokenS, k*0.6/16384, k)
	}
	if !(r8.DecodeStepS > 2*r.DecodeStepS && r8.TailStepS > 3*r.TailStepS) || !strings.Contains(r8.Source, "scaled") {
		t.Errorf("8B decode %g s, tail %g s (1.7B: %g, %g); source %q", r8.DecodeStepS, r8.TailStepS, r.DecodeStepS, r.TailStepS, r8.Source)
	}
}

// TestWritePipeline: the profile's pipeline section (table and JSON) has
// a row for each paper config, labelled an estimate, on made-up counts.
func TestWritePipeline(t *testing.T) {
	train, decode := madeUpProfiles(t)
	wls, err := PaperWorkloads(paperSettings)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := WritePipeline(&out, train, decode, wls, false); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", out.String())
	for _, want := range []string{"ESTIMATES", "paper-grpo-1.7b ", "paper-grpo-8b ", "Qwen3-8B, scaled from the counts of qwen3-1.7b-8x2k",
		"recipe-exact-grpo-1.7b ", "counted (qwen3-1.7b-8x2k-exact",
		"overlapped s by R: 1: ", "weight sync:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := WritePipeline(&out, train, decode, wls, true); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d JSON lines, want 3:\n%s", len(lines), out.String())
	}
	for i, l := range lines {
		var j map[string]any
		if err := json.Unmarshal([]byte(l), &j); err != nil {
			t.Fatal(err)
		}
		if j["pipeline"] != []string{"paper-grpo-1.7b", "paper-grpo-8b", "recipe-exact-grpo-1.7b"}[i] ||
			!strings.HasPrefix(j["estimate"].(string), "ESTIMATE") || j["est_synchronous_s"].(float64) <= 0 {
			t.Errorf("JSON %d: %s", i, l)
		}
		// Exact mode is refused at max_off_policy_steps 1: no overlapped
		// step for it, every split for the others.
		overlapped, _ := j["est_overlapped_s"].(float64)
		if exact := i == 2; exact != (len(j["splits"].([]any)) == 0) || exact != (overlapped == 0) || exact != (j["no_overlap"] != nil) {
			t.Errorf("JSON %d: %d splits, est_overlapped_s %v, no_overlap %v", i, len(j["splits"].([]any)), j["est_overlapped_s"], j["no_overlap"])
		}
	}
	// Exact mode: the π_old forward is gone (only the reference's is
	// left), and the decode steps are the graphed exact ones.
	var ex map[string]any
	if err := json.Unmarshal([]byte(lines[2]), &ex); err != nil {
		t.Fatal(err)
	}
	if ex["log_prob_forwards"] != 1.0 || ex["cuda_graphs"] != true {
		t.Errorf("exact workload: log_prob_forwards %v, cuda_graphs %v; want 1 and true", ex["log_prob_forwards"], ex["cuda_graphs"])
	}
}

// TestExactDecodeCorners: exact mode's graphed decode steps are counted
// at the batches and contexts of today's, so the pipeline estimate reads
// both modes' generation off the same corners (it once interpolated
// today's between batch 1 and 64 and exact mode's between 1 and 256,
// overstating the exact step at 32 slots).
func TestExactDecodeCorners(t *testing.T) {
	corners := map[bool]map[[2]int]bool{false: {}, true: {}}
	for _, s := range DecodeShapes() {
		if s.Graphs && !s.Paged && !s.FP8 && s.LoRA == nil {
			corners[s.Exact][[2]int{s.Batch, s.Context}] = true
		}
	}
	if len(corners[false]) < 4 || !reflect.DeepEqual(corners[false], corners[true]) {
		t.Errorf("graphed decode steps counted at (batch, context) %v today, %v in exact mode; want the same, at least 4", corners[false], corners[true])
	}
}
