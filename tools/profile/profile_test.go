package profile

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/cuda"
	"github.com/gdrotrain/gdrotrain/internal/testinfra/cudatest"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/tools/bench"
)

// device opens the GPU, or the CPU emulator where there is none (built
// once for the package's tests).
func device(t *testing.T) *cuda.Device {
	d, _ := cudatest.Device(t, "./tools/profile/")
	return d
}

func TestMain(m *testing.M) {
	code := m.Run()
	cudatest.Cleanup()
	os.Exit(code)
}

// profileShape is a small model whose step the emulator computes quickly.
func profileShape(layers int) bench.Shape {
	o := model.DefaultTiny()
	o.Layers, o.Vocab = layers, 300
	return bench.Shape{Name: "tiny", Opts: o, Batch: 2, SeqLen: 48, ResponseTokens: 40}
}

// TestProfileExtrapolation: a step counted at one and two layers and
// extrapolated to four gives the counts of a step run at four layers.
func TestProfileExtrapolation(t *testing.T) {
	b := cuda.NewBackend(device(t), cuda.BF16)
	s := profileShape(4)
	sp, err := TrainStep(b, s)
	if err != nil {
		t.Fatal(err)
	}
	_, direct, err := profileAt(b, s.Opts, s)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := sp.Forward.EstSeconds(cuda.H100), direct.forward.EstSeconds(cuda.H100); math.Abs(g-w) > 1e-9 || sp.Forward.Launches != direct.forward.Launches {
		t.Errorf("forward: extrapolated %g s, %d launches; counted %g s, %d launches", g, sp.Forward.Launches, w, direct.forward.Launches)
	}
	got, want := sp.Step, direct.step
	for _, c := range []struct {
		name      string
		got, want int64
	}{
		{"launches", got.Launches, want.Launches}, {"gemms", got.GEMMs, want.GEMMs}, {"memsets", got.Memsets, want.Memsets},
		{"host syncs", got.HostSyncs, want.HostSyncs}, {"h2d bytes", got.H2DBytes, want.H2DBytes}, {"d2h bytes", got.D2HBytes, want.D2HBytes},
	} {
		if c.got != c.want {
			t.Errorf("%s: extrapolated %d, counted %d", c.name, c.got, c.want)
		}
	}
	for e := range got.Flops {
		if math.Abs(got.Flops[e]-want.Flops[e]) > 1e-9*want.Flops[e] {
			t.Errorf("%s flops: extrapolated %g, counted %g", cuda.Engine(e), got.Flops[e], want.Flops[e])
		}
	}
	if math.Abs(got.EstSeconds(cuda.H100)-want.EstSeconds(cuda.H100)) > 1e-9 {
		t.Errorf("estimate: extrapolated %g s, counted %g s", got.EstSeconds(cuda.H100), want.EstSeconds(cuda.H100))
	}
	t.Logf("4-layer tiny step: %d launches, %d GEMMs, %d host syncs, %d device allocs (first step %d)",
		got.Launches, got.GEMMs, got.HostSyncs, got.DeviceAllocs, sp.First.DeviceAllocs)
}

// TestProfileCountsArithmetic: the GEMM arithmetic the profile counts is
// the model's matrix arithmetic (bench.TrainFLOPs less attention, plus the
// head's recomputation), all on tensor cores in bf16 and none in fp32.
// Attention through the kernels is 14·D per causal pair and head per layer
// (forward 4·D, backward 10·D) on CUDA cores; through the tensor-core
// products it is the same 14·D over the whole T×T rectangle, on the
// product engine.
func TestProfileCountsArithmetic(t *testing.T) {
	s := profileShape(2)
	o := s.Opts
	HD, L, B, T := float64(o.HeadDim*o.Heads), float64(o.Layers), float64(s.Batch), float64(s.SeqLen)
	causal := B * T * (T + 1) / 2
	kernelAttn := 14 * HD * causal * L
	productAttn := 14 * HD * B * T * T * L
	// TrainFLOPs counts attention as 3 × 2·T²·HD (T² over two for QKᵀ
	// and PV each); the rest is the matrices.
	matrices := bench.TrainFLOPs(s) - 3*L*B*2*T*T*HD
	// The step runs the fused head (model.ForwardLoss, the trainer's
	// default): no logits chunk is recomputed, so the products are the
	// model's matrices exactly.
	for _, prec := range []cuda.Precision{cuda.BF16, cuda.FP32} {
		for _, route := range []int{-1, 1} {
			b := cuda.NewBackend(device(t), prec)
			b.ForceAttention(route, 0)
			sp, err := TrainStep(b, s)
			if err != nil {
				t.Fatal(err)
			}
			p := sp.Step
			tc, fp := p.FlopsTensorCore(), p.Flops[cuda.EngineFP32GEMM]
			wantGEMM, wantAttn := matrices, kernelAttn
			if route > 0 {
				wantGEMM, wantAttn = matrices+productAttn, 0
			}
			if gemm := tc + fp; math.Abs(gemm-wantGEMM) > 1e-9*wantGEMM {
				t.Errorf("%s route %d: GEMM flops %g, want %g", prec, route, gemm, wantGEMM)
			}
			if prec == cuda.BF16 && fp != 0 || prec == cuda.FP32 && tc != 0 {
				t.Errorf("%s route %d: tensor-core %g, fp32 GEMM %g flops", prec, route, tc, fp)
			}
			if got := p.Flops[cuda.EngineAttention]; math.Abs(got-wantAttn) > 1e-9*wantAttn {
				t.Errorf("%s route %d: attention-kernel flops %g, want %g", prec, route, got, wantAttn)
			}
			t.Logf("%s route %d: tensor-core fraction %.3f, est %.3f ms on an H100", prec, route, p.TensorCoreFraction(), 1e3*p.EstSeconds(cuda.H100))
		}
	}
}

// TestProfileFlashRoute: under bf16 products the automatic route is the
// fused tensor-core attention: its arithmetic is counted on the tensor
// cores (18·D per visited pair and head: 4·D forward, 6·D for dq, 8·D for
// dk and dv), none on CUDA cores or in cuBLAS, and the products left in
// cuBLAS are the model's matrices alone.
func TestProfileFlashRoute(t *testing.T) {
	s := profileShape(2)
	o := s.Opts
	b := cuda.NewBackend(device(t), cuda.BF16)
	sp, err := TrainStep(b, s)
	if err != nil {
		t.Fatal(err)
	}
	p := sp.Step
	L, HD := float64(o.Layers), float64(o.Heads*o.HeadDim)
	// One segment of 48 tokens: one query tile of 64 rows visiting one
	// key tile (forward, 64 keys) or two (dq, 32 keys each: 64 keys);
	// the dk/dv kernel visits the same pairs.
	pairs := float64(s.Batch) * 64 * 64
	want := 18 * HD * pairs * L
	if got := p.FlopsFlash(); math.Abs(got-want) > 1e-9*want {
		t.Errorf("fused attention flops %g, want %g", got, want)
	}
	if fwd := p.Flops[cuda.EngineFlash]; math.Abs(fwd-want*4/18) > 1e-9*want {
		t.Errorf("fused attention forward flops %g, want 4/18 of %g", fwd, want)
	}
	if p.Flops[cuda.EngineAttention] != 0 || p.Flops[cuda.EngineFP32GEMM] != 0 {
		t.Errorf("CUDA-core attention %g, fp32 GEMM %g flops; want 0", p.Flops[cuda.EngineAttention], p.Flops[cuda.EngineFP32GEMM])
	}
	matrices := bench.TrainFLOPs(s) - 3*L*float64(s.Batch)*2*float64(s.SeqLen*s.SeqLen)*HD
	if got := p.Flops[cuda.EngineTensorBF16]; math.Abs(got-matrices) > 1e-9*matrices {
		t.Errorf("cuBLAS flops %g, want the matrices' %g", got, matrices)
	}
}

// TestDecodeProfile: a steady-state decode step waits on the host twice
// (the chunk sums, then every row's chunk in one download) when issued
// eagerly, and once as a graph replay, which is one graph launch and no
// other launch; either allocates nothing, leaves nothing behind, reads at
// least its bandwidth bound, and reports the keys bench --profile --json
// promises.
func TestDecodeProfile(t *testing.T) {
	b := cuda.NewBackend(device(t), cuda.BF16)
	o := model.DefaultTiny()
	o.Layers, o.Vocab = 3, 3000
	for _, graphs := range []bool{false, true} {
		dp, err := DecodeStep(b, DecodeShape{Name: "tiny", Opts: o, Batch: 5, Context: 40, Graphs: graphs})
		if err != nil {
			t.Fatal(err)
		}
		p := dp.Step
		wantSyncs := int64(2)
		if graphs {
			wantSyncs = 1
		}
		if p.HostSyncs != wantSyncs || p.DeviceAllocs != 0 || p.LiveBuffers+p.Leaked != 0 {
			t.Errorf("graphs %v: %d host syncs (want %d), %d device allocations, %d buffers left, %d leaked",
				graphs, p.HostSyncs, wantSyncs, p.DeviceAllocs, p.LiveBuffers, p.Leaked)
		}
		other := p.Launches + p.GEMMs + p.Memsets
		if graphs && (p.GraphLaunches != 1 || other != 0 || p.GraphNodes == 0) {
			t.Errorf("graph step: %d graph launches of %d nodes and %d other launches, want 1 launch and no other", p.GraphLaunches, p.GraphNodes, other)
		}
		if !graphs && p.GraphLaunches != 0 {
			t.Errorf("eager step: %d graph launches", p.GraphLaunches)
		}
		var bytes float64
		for _, x := range p.Bytes {
			bytes += x
		}
		if bytes < dp.BoundBytes {
			t.Errorf("graphs %v: decode step counts %.0f bytes, below its bound %.0f (bf16 weights + live KV)", graphs, bytes, dp.BoundBytes)
		}
		j := dp.JSON(cuda.H100)
		for _, k := range []string{"decode_batch", "context", "launches_per_step", "graph_launches_per_step", "host_syncs_per_step",
			"bytes_per_step", "est_tok_s", "est_fraction_of_bound"} {
			if _, ok := j[k]; !ok {
				t.Errorf("JSON lacks %q", k)
			}
		}
		if f := j["est_fraction_of_bound"].(float64); !(f > 0 && f <= 1) {
			t.Errorf("est_fraction_of_bound %v outside (0, 1]", f)
		}
		t.Logf("tiny decode step, graphs %v: %d launches (%d graph launches of %d nodes), %d GEMMs, %d host syncs, %.0f bytes (bound %.0f), est %.1f%% of the bound",
			graphs, j["launches_per_step"], p.GraphLaunches, p.GraphNodes, p.GEMMs, p.HostSyncs, bytes, dp.BoundBytes, 100*j["est_fraction_of_bound"].(float64))
	}
}

// TestDecodeProfilePaged: with a paged cache a steady-state graphed decode
// step is still one graph launch, one host sync and no other launch or
// allocation; the page mapping between steps is cuMemMap calls only, one
// per K and V range for each page a slot crosses into. Rows of 2 KiB (8 KV
// heads of 128 dimensions, as Qwen3-1.7B) in 4 KiB emulator pages: the
// slots whose counted token starts a page (3 of 5 here) map one.
func TestDecodeProfilePaged(t *testing.T) {
	t.Setenv("GDROTRAIN_EMU_VMM_GRANULARITY", "4096")
	d, kind := cudatest.Device(t, "./tools/profile/")
	b := cuda.NewBackend(d, cuda.BF16)
	if kind != "emulator" {
		t.Skip("the page arithmetic below assumes the emulator's 4 KiB pages")
	}
	o := model.DefaultTiny()
	o.Layers, o.Vocab, o.Heads, o.KVHeads, o.HeadDim = 3, 3000, 8, 8, 128
	dp, err := DecodeStep(b, DecodeShape{Name: "tiny-paged", Opts: o, Batch: 5, Context: 40, Graphs: true, Paged: true})
	if err != nil {
		t.Fatal(err)
	}
	p := dp.Step
	if p.GraphLaunches != 1 || p.Launches+p.GEMMs+p.Memsets != 0 || p.HostSyncs != 1 || p.DeviceAllocs != 0 || p.LiveBuffers+p.Leaked != 0 {
		t.Fatalf("paged graph step: %d graph launches, %d other launches, %d host syncs, %d allocations, %d buffers left; want 1, 0, 1, 0, 0",
			p.GraphLaunches, p.Launches+p.GEMMs+p.Memsets, p.HostSyncs, p.DeviceAllocs, p.LiveBuffers+p.Leaked)
	}
	if dp.PagesMapped != 3 || p.PageMaps != int64(dp.PagesMapped*2*o.Layers) {
		t.Fatalf("%d pages mapped, %d cuMemMap calls; want 3 pages and 2·%d calls each", dp.PagesMapped, p.PageMaps, o.Layers)
	}
	j := dp.JSON(cuda.H100)
	if j["page_maps_per_step"] != p.PageMaps || j["kv_page_tokens"] != 2 || j["page_maps_per_step_mean"] != float64(5*2*3)/2 {
		t.Fatalf("JSON: page_maps_per_step %v, kv_page_tokens %v, page_maps_per_step_mean %v", j["page_maps_per_step"], j["kv_page_tokens"], j["page_maps_per_step_mean"])
	}
}

// TestBenchSmoke runs the GPU benchmark's code path on the tiny shape (the
// numbers mean nothing on the emulator; the table and MFU arithmetic run).
// Two measured runs (a table with --no-torch, JSON beside a fake
// baseline): make test repeats this test under three emulator seeds.
func TestBenchSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the benchmark's code path is left to make test")
	}
	d := device(t)
	// A fake PyTorch baseline (a shell script speaking the baseline's
	// protocol) that leaves a mark when it runs.
	tmp := t.TempDir()
	script, ran := filepath.Join(tmp, "baseline.sh"), filepath.Join(tmp, "baseline-ran")
	fake := "cat >/dev/null\ntouch '" + ran + "'\n" +
		`echo '{"name": "tiny-256", "train_tok_s": 1000, "torch": "fake torch"}'` + "\n" +
		`echo '{"name": "decode-b1-c64", "tok_s": 50, "torch": "fake torch"}'` + "\n" +
		`echo '{"name": "decode-b4-c64", "note": "out of memory"}'` + "\n"
	if err := os.WriteFile(script, []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}

	// The table, --no-torch: our rows measured, the baseline not started.
	var out strings.Builder
	err := Bench(context.Background(), &out, cuda.NewBackend(d, cuda.BF16), BenchOptions{Shape: "tiny", PeakTFLOPs: 1, BandwidthGBs: 1,
		Python: "/bin/sh", Script: script, NoTorch: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"tiny-256", "tiny-step-2x256", "decode-b1-c64", "decode-b4-c64", "decode-b4-c64-fp8", "decode-b4-c64-exact", "decode-b4-c64-graph", "decode-b4-c64-graph-exact", "MFU",
		"PyTorch baseline not run (--no-torch)", "attn-1x256", "mma.sync", "random weights: 1 set(s)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("bench output lacks %q:\n%s", want, out.String())
		}
	}
	if m := regexp.MustCompile(`(?m)^decode-b4-c64-graph-exact +[0-9]`); !m.MatchString(out.String()) {
		t.Errorf("the graphed exact decode row was not measured:\n%s", out.String())
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("--no-torch started the baseline")
	}
	t.Log("\n" + out.String())

	// --json, beside the fake baseline: ratios and PyTorch's MFU come
	// from its numbers.
	out.Reset()
	err = Bench(context.Background(), &out, cuda.NewBackend(d, cuda.BF16), BenchOptions{Shape: "tiny", PeakTFLOPs: 1, BandwidthGBs: 1,
		Python: "/bin/sh", Script: script, JSON: true})
	if err != nil {
		t.Fatal(err)
	}
	var r BenchReport
	if err := json.Unmarshal([]byte(out.String()), &r); err != nil {
		t.Fatalf("--json output is not one JSON object: %v\n%s", err, out.String())
	}
	if len(r.Train) != 2 || len(r.Decode) != 7 || r.Baseline != "baseline: fake torch" {
		t.Fatalf("report %+v", r)
	}
	// Every row measured, listed in order, on one set of random weights.
	wantRows := []string{"tiny-256", "tiny-step-2x256"}
	for _, a := range r.Attention {
		wantRows = append(wantRows, a.Name+"/"+a.Route)
	}
	wantRows = append(wantRows, "decode-b1-c64", "decode-b4-c64", "decode-b1-c64-fp8", "decode-b4-c64-fp8", "decode-b4-c64-exact",
		"decode-b4-c64-graph", "decode-b4-c64-graph-exact")
	if !slices.Equal(r.Rows, wantRows) || r.Weights.Made != 1 || r.Weights.Rows != 9 {
		t.Errorf("rows %q (want %q), weights %+v (want 1 set for 9 rows)", r.Rows, wantRows, r.Weights)
	}
	if st := r.Train[1]; !st.Step || st.TokPerS <= 0 || st.MFU <= 0 || st.Error != "" || st.TorchTokPerS != 0 {
		t.Errorf("optimizer-step row %+v", st)
	}
	for _, d := range r.Decode[2:4] {
		if d.KVCache != "fp8" || d.TokPerS <= 0 || d.Error != "" || d.TorchTokPerS != 0 {
			t.Errorf("fp8 decode row %+v", d)
		}
	}
	for _, d := range r.Decode[4:] {
		if d.KVCache != "bf16" || d.TokPerS <= 0 || d.Error != "" || d.TorchTokPerS != 0 {
			t.Errorf("exact or graphed decode row %+v", d)
		}
	}
	tr := r.Train[0]
	tokens := float64(tr.Batch * tr.SeqLen)
	if tr.TokPerS <= 0 || math.Abs(tr.StepSeconds*tr.TokPerS-tokens) > 1e-6*tokens || tr.MFU <= 0 ||
		tr.TorchTokPerS != 1000 || math.Abs(tr.Ratio-tr.TokPerS/1000) > 1e-9 || math.Abs(tr.TorchMFU/tr.MFU-1000/tr.TokPerS) > 1e-9 {
		t.Errorf("training row %+v", tr)
	}
	if d := r.Decode[0]; d.TokPerS <= 0 || d.BoundFraction <= 0 || d.TorchTokPerS != 50 || math.Abs(d.Ratio-d.TokPerS/50) > 1e-9 {
		t.Errorf("decode row %+v", d)
	}
	if d := r.Decode[1]; d.TokPerS <= 0 || d.Ratio != 0 || d.TorchNote != "out of memory" {
		t.Errorf("decode row without a baseline number %+v", d)
	}
	// The attention rows: both routes on an sm_90 device (the emulator is
	// one), the mma.sync route alone elsewhere; FlashAttention's FLOP count
	// over the times, the assumed rates beside.
	routes := []string{"mma.sync"}
	if d.Info.HasWGMMA() {
		routes = []string{"wgmma", "mma.sync"}
	}
	if len(r.Attention) != len(routes) {
		t.Fatalf("attention rows %+v, want routes %v", r.Attention, routes)
	}
	for i, a := range r.Attention {
		if a.Route != routes[i] {
			t.Errorf("attention row %d: route %s, want %s", i, a.Route, routes[i])
		}
	}
	for _, a := range r.Attention {
		f := 2 * float64(a.Batch*a.Heads*a.SeqLen*a.SeqLen*a.HeadDim)
		if a.Error != "" || a.FwdSeconds <= 0 || math.Abs(a.FwdTFLOPs*a.FwdSeconds*1e12/f-1) > 1e-9 ||
			math.Abs(a.BwdTFLOPs*a.BwdSeconds*1e12/(2.5*f)-1) > 1e-9 || a.AssumedFwdTFLOPs <= 0 || a.AssumedBwdTFLOPs <= 0 {
			t.Errorf("attention row %+v", a)
		}
	}

	// --torch-only: the baseline alone, our rows empty and no weights
	// drawn (nothing measured: cheap); without --torch-python, skipped.
	for _, python := range []string{"/bin/sh", ""} {
		out.Reset()
		err = Bench(context.Background(), &out, cuda.NewBackend(d, cuda.BF16), BenchOptions{Shape: "tiny", PeakTFLOPs: 1, BandwidthGBs: 1,
			Python: python, Script: script, JSON: true, TorchOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		var r BenchReport
		if err := json.Unmarshal([]byte(out.String()), &r); err != nil {
			t.Fatal(err)
		}
		ours, theirs := r.Train[0].TokPerS > 0 || r.Decode[0].TokPerS > 0, r.Train[0].TorchTokPerS == 1000 && r.Decode[0].TorchTokPerS == 50
		skipped := strings.Contains(r.Baseline, "skipped (--torch-python empty)")
		if ours || theirs != (python != "") || skipped != (python == "") || r.Weights.Made > 0 || len(r.Attention) > 0 {
			t.Errorf("torch-only, python %q: ours measured %v, baseline %v (%q), weights %+v, %d attention rows",
				python, ours, theirs, r.Baseline, r.Weights, len(r.Attention))
		}
	}
	if err := Bench(context.Background(), &out, cuda.NewBackend(d, cuda.BF16), BenchOptions{Shape: "tiny", NoTorch: true, TorchOnly: true}); err == nil {
		t.Error("--no-torch with --torch-only was accepted")
	}
}

// TestDecodeProfileFP8: with an fp8 KV cache the graphed decode step is
// still one graph launch and one host sync, allocates nothing, reads at
// least its bound (bf16 weights + fp8 codes and scales), and reads fewer
// bytes than the same step over a bf16 cache, by about the cache's saving.
func TestDecodeProfileFP8(t *testing.T) {
	b := cuda.NewBackend(device(t), cuda.BF16)
	o := model.DefaultTiny()
	o.Layers, o.Vocab = 3, 3000
	var read [2]float64
	for i, fp8 := range []bool{false, true} {
		dp, err := DecodeStep(b, DecodeShape{Name: "tiny", Opts: o, Batch: 5, Context: 400, Graphs: true, FP8: fp8})
		if err != nil {
			t.Fatal(err)
		}
		p := dp.Step
		for _, x := range p.Bytes {
			read[i] += x
		}
		if p.GraphLaunches != 1 || p.Launches != 0 || p.HostSyncs != 1 || p.DeviceAllocs != 0 {
			t.Errorf("fp8 %v: %d graph launches, %d other launches, %d syncs, %d allocations; want 1, 0, 1, 0", fp8, p.GraphLaunches, p.Launches, p.HostSyncs, p.DeviceAllocs)
		}
		if read[i] < dp.BoundBytes {
			t.Errorf("fp8 %v: reads %.0f bytes, under its bound %.0f", fp8, read[i], dp.BoundBytes)
		}
		if got := dp.JSON(cuda.H100)["kv_cache"]; got != map[bool]string{false: "bf16", true: "fp8"}[fp8] {
			t.Errorf("fp8 %v: kv_cache %v", fp8, got)
		}
	}
	cfg, _ := o.Config()
	saved := 5 * 400 * float64(2*cfg.NumHiddenLayers) * float64(2*cfg.NumKeyValueHeads*cfg.HeadDim-int(model.FP8KVRowBytes(cfg.NumKeyValueHeads, cfg.HeadDim)))
	if d := read[0] - read[1]; d < 0.9*saved {
		t.Errorf("an fp8 cache saves %.0f bytes a step, want about %.0f", d, saved)
	}
	t.Logf("bytes a step: bf16 cache %.0f, fp8 %.0f", read[0], read[1])
}

// TestDecodeProfileLoRA: a LoRA run's graphed decode step (the base frozen,
// every projection's adapter applied on the fly) is still one graph launch,
// one host sync and no allocation, and reads what the step without adapters
// reads plus little more than the adapters' bf16 copies: the choice of
// docs/algorithm.md §5.14 rests on these counts.
func TestDecodeProfileLoRA(t *testing.T) {
	b := cuda.NewBackend(device(t), cuda.BF16)
	o := model.DefaultTiny()
	o.Layers, o.Vocab = 3, 3000
	lc := &model.LoRAConfig{Rank: 4, Alpha: 8, Targets: model.LoRAModules}
	base, err := DecodeStep(b, DecodeShape{Name: "tiny", Opts: o, Batch: 5, Context: 40, Graphs: true})
	if err != nil {
		t.Fatal(err)
	}
	dp, err := DecodeStep(b, DecodeShape{Name: "tiny-lora", Opts: o, Batch: 5, Context: 40, Graphs: true, LoRA: lc})
	if err != nil {
		t.Fatal(err)
	}
	p := dp.Step
	if p.GraphLaunches != 1 || p.Launches+p.GEMMs+p.Memsets != 0 || p.HostSyncs != 1 || p.DeviceAllocs != 0 || p.LiveBuffers+p.Leaked != 0 {
		t.Fatalf("LoRA graph step: %d graph launches, %d other launches, %d host syncs, %d allocations, %d buffers left; want 1, 0, 1, 0, 0",
			p.GraphLaunches, p.Launches+p.GEMMs+p.Memsets, p.HostSyncs, p.DeviceAllocs, p.LiveBuffers+p.Leaked)
	}
	sum := func(p cuda.Profile) (s float64) {
		for _, x := range p.Bytes {
			s += x
		}
		return s
	}
	cfg, _ := o.Config()
	var adapters float64
	for _, np := range model.AdapterShapes(cfg, lc) {
		adapters += 2 * float64(np.Shape[0]*np.Shape[1])
	}
	extra := sum(p) - sum(base.Step)
	if extra < adapters || extra > 4*adapters+float64(64*5*o.Layers*(o.Hidden+o.Intermediate)) {
		t.Errorf("LoRA adds %.0f bytes to a decode step; the adapters' bf16 copies are %.0f", extra, adapters)
	}
	t.Logf("tiny decode step: %d graph nodes without adapters, %d with; %.0f bytes, +%.0f (adapters %.0f)",
		base.Step.GraphNodes, p.GraphNodes, sum(base.Step), extra, adapters)
}

// TestDecodeProfileExact: exact mode's graphed decode step (the draw, then
// LogSoftmaxGather on the drawn tokens, inside the graph) is one graph
// launch, one host sync and no allocation, as today's graphed step; the
// eager exact step it replaces launches its kernels one by one and syncs
// for the draw and again for the log-probs.
func TestDecodeProfileExact(t *testing.T) {
	b := cuda.NewBackend(device(t), cuda.BF16)
	o := model.DefaultTiny()
	o.Layers, o.Vocab = 3, 3000
	graphed, err := DecodeStep(b, DecodeShape{Name: "tiny-graph-exact", Opts: o, Batch: 5, Context: 40, Graphs: true, Exact: true})
	if err != nil {
		t.Fatal(err)
	}
	eager, err := DecodeStep(b, DecodeShape{Name: "tiny-exact", Opts: o, Batch: 5, Context: 40, Exact: true})
	if err != nil {
		t.Fatal(err)
	}
	if b.IsBatchInvariant() {
		t.Error("exact mode left on after the profile")
	}
	p := graphed.Step
	if p.GraphLaunches != 1 || p.Launches+p.GEMMs+p.Memsets != 0 || p.HostSyncs != 1 || p.DeviceAllocs != 0 || p.LiveBuffers+p.Leaked != 0 {
		t.Fatalf("exact graph step: %d graph launches, %d other launches, %d host syncs, %d allocations, %d buffers left; want 1, 0, 1, 0, 0",
			p.GraphLaunches, p.Launches+p.GEMMs+p.Memsets, p.HostSyncs, p.DeviceAllocs, p.LiveBuffers+p.Leaked)
	}
	if e := eager.Step; e.GraphLaunches != 0 || e.Launches < p.GraphNodes/2 || e.HostSyncs < 2 {
		t.Errorf("eager exact step: %d graph launches, %d launches, %d host syncs (the graph replays %d nodes)", e.GraphLaunches, e.Launches, e.HostSyncs, p.GraphNodes)
	}
	t.Logf("tiny exact decode step: graphed %d nodes, eager %d launches and %d host syncs", p.GraphNodes, eager.Step.Launches, eager.Step.HostSyncs)
	// On a device with the sm_90a kernels (the emulator's sm_90, as the
	// profile's H100) the exact products are counted on the warpgroup-MMA
	// engine, none on mma.sync's.
	if b.Device().Info.HasWGMMA() && os.Getenv(cuda.ExactWGMMAEnv) != "0" {
		for _, c := range []struct {
			name string
			p    cuda.Profile
		}{{"graphed", p}, {"eager", eager.Step}} {
			if wg, mma := c.p.Flops[cuda.EngineExactWG], c.p.Flops[cuda.EngineExactMMA]; wg == 0 || mma != 0 {
				t.Errorf("%s exact step on sm_90a: %g flops on %s, %g on %s; want some and none", c.name, wg, cuda.EngineExactWG,
					mma, cuda.EngineExactMMA)
			}
		}
	}
}
