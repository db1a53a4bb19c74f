package cuda

// The step profile: what the backend asked of the GPU, counted as it runs
// (on the emulator exactly as on a GPU), and a roofline estimate of the
// time an H100 would take for it. Counts come from the driver calls
// themselves (launches, host synchronisations, allocations, copies); each
// op adds its arithmetic by engine and its DRAM traffic, from its shapes.
//
// The estimate is a model, not a measurement: per op, the larger of its
// arithmetic at the engine's rate and its bytes at the memory bandwidth,
// plus a fixed cost per launch and per host synchronisation. Its
// assumptions are the fields of Roofline, printed with every estimate.

import (
	"fmt"
	"math"
	"sync"
)

// Engine is where an op's arithmetic runs.
type Engine int

const (
	EngineTensorBF16 Engine = iota // cuBLAS products on bf16 inputs (FAST_16BF, or bf16 operands)
	EngineTensorTF32               // cuBLAS products on tf32 inputs
	EngineFP32GEMM                 // cuBLAS fp32 products (CUDA cores)
	EngineFlash                    // the fused attention kernels on tensor cores (mma.sync bf16): the forward
	EngineFlashBwd                 // the same kernels' backward (dq, dk/dv)
	EngineWGFlash                  // the fused attention's warpgroup-MMA kernels (sm_90a): the forward
	EngineWGFlashBwd               // their backward
	EngineAttention                // the attention kernels (CUDA cores, shared-memory bound)
	EngineKernel                   // every other kernel and memset: bandwidth-bound
	EngineExactMMA                 // exact mode's batch-invariant products on tensor cores (mma.sync bf16)
	EngineExactFFMA                // exact mode's batch-invariant products on CUDA cores (fp32 FFMA)
	EngineExactAttn                // exact mode's batch-invariant attention on tensor cores (mma.sync bf16, attention_exact_tc.cu)
	EngineExactWG                  // exact mode's batch-invariant products on warpgroup MMA (sm_90a wgmma bf16)
	numEngines
)

var engineNames = [numEngines]string{"tensor_bf16", "tensor_tf32", "fp32_gemm", "attention_tc", "attention_tc_bwd", "attention_wg", "attention_wg_bwd", "attention", "kernel", "gemm_exact_tc", "gemm_exact_fp32", "attention_exact_tc", "gemm_exact_wg"}

// String is the engine's name in profiles' JSON (tensor_bf16, attention, …).
func (e Engine) String() string { return engineNames[e] }

// Roofline are the throughputs an estimate assumes.
type Roofline struct {
	Name                         string
	BF16TFLOPs, TF32TFLOPs       float64 // dense tensor-core peaks
	FP32TFLOPs                   float64 // CUDA-core fp32 peak
	AttentionTFLOPs              float64 // ceiling of the attention kernels
	BandwidthGBs                 float64 // DRAM
	GEMMEfficiency, BWEfficiency float64 // fractions of peak reached by large GEMMs / streaming kernels
	FlashEfficiency              float64 // fraction of the bf16 peak the fused attention kernels reach (forward)
	FlashBwdEfficiency           float64 // the same for their backward
	WGFlashEfficiency            float64 // the same for the warpgroup-MMA kernels (forward)
	WGFlashBwdEfficiency         float64 // and their backward
	ExactMMAEfficiency           float64 // fraction of the bf16 peak exact mode's mma.sync products reach
	ExactWGEfficiency            float64 // the same for its warpgroup-MMA products (sm_90a)
	ExactFFMAEfficiency          float64 // fraction of the fp32 peak exact mode's FFMA products reach
	ExactAttnTCEfficiency        float64 // fraction of the bf16 peak exact mode's tensor-core attention reaches
	LaunchUs, SyncUs             float64 // per launch (GPU-side gap) and per host synchronisation
	GraphNodeUs                  float64 // per op a graph launch replays (the gap between its nodes)
}

// H100 is an H100 SXM5 from NVIDIA's data sheet (dense bf16 989.4 TFLOP/s,
// tf32 494.7, fp32 66.9, HBM3 3.35 TB/s). The attention ceiling is today's
// kernels' own: they issue one 4-byte shared-memory load per FMA, and 132
// SMs × 128 B/clock × 1.98 GHz ≈ 33.4 TB/s of shared memory feed at most
// 8.4 T loads/s, i.e. 16.7 TFLOP/s (optimistic: it ignores their 166–251
// registers per thread and the occupancy those allow). cuBLAS reaches ≈ 75
// % of peak on large bf16 GEMMs, streaming kernels ≈ 80 % of bandwidth; a
// launch costs ≈ 2 µs of GPU time when kernels are short and a host
// synchronisation ≈ 10 µs of idle GPU (drain, return, re-issue). The fused
// attention kernels are assumed to reach 35 % of the bf16 peak, what
// FlashAttention-2 (whose structure they follow, without its
// asynchronous-copy pipelining) is reported to reach on an H100. Their
// warpgroup-MMA form (Hopper, the training route at head dim 128) is
// assumed to take 1.5 times FlashAttention-3's measured time for the same
// work at the 2×8k shape (H100FA3Measured): 2/3 of its forward rate, 440
// TFLOP/s (44.5 %), and of its deterministic backward's, 474·1.4·2/3 =
// 442 TFLOP/s (44.7 %) counted over our 14·D FLOPs a pair (its 10·D, at
// the same time per pair, is 1.4 times fewer FLOPs) — for kernels that
// have its warpgroup MMA but not its TMA loads, warp specialisation,
// 128-row tiles or softmax/MMA overlap (FlashAttention-3's paper puts
// the last two at ≈ 14 % of its forward), and that no GPU has timed yet.
// Inside
// a CUDA graph the host issues nothing per kernel and the GPU walks a
// prepared chain, so the gap per node is assumed to be half an eager
// launch's, 1 µs (an assumption, not a measurement; a graph launch itself
// costs one launch). Exact mode's batch-invariant products
// (gemm_exact.cu) are assumed to reach 35 % of the bf16 peak on the tensor
// cores (mma.sync, 128 × 128 tiles, a 3-stage cp.async pipeline, no
// ldmatrix or warpgroup MMA: docs/gpu.md counts 256 shared-memory and 64 L2
// bytes per mma against the 64 × 128 register-staged kernel's 352 and 96,
// bounds 1.4–1.5× that kernel's, whose assumed 25 % this scales; under
// half cuBLAS's 75 %) and 50 % of the fp32 peak on the CUDA cores (4 × 4
// elements a thread); estimates, not measurements (docs/gpu.md). On a
// device with the sm_90a kernels every exact bf16 product is a warpgroup
// MMA (gemm_exact_wg*), ASSUMED to reach 50 % of the bf16 peak, 2/3 of
// cuBLAS's 75 % as the attn_wg kernels are assumed 2/3 of
// FlashAttention-3's: the same 128 × 128 tiles, 3-stage cp.async pipeline
// and 48 KiB of shared memory, but each k-step one m64n128k16 per
// warpgroup (64 clocks of an SM's tensor cores at peak) reading its 6 KiB
// of A and B from shared memory (48 clocks at 128 bytes a clock) where
// mma.sync's fragments are 32-bit loads into registers, 16 KiB of copies landing per
// chunk of 32 k beside them; against cuBLAS it lacks TMA (the computing
// warps issue the copies), warp specialisation (here two block-wide
// barriers per chunk of 32 k, one wgmma group kept in flight across them,
// and at 163–168 registers one block an SM to cover the waits) and 128 ×
// 256 tiles; a little above the attn_wg kernels' 44.5 % for having no
// softmax between its products. No GPU has timed it. Exact mode's
// tensor-core attention (attention_exact_tc.cu, under bf16
// products) is assumed to reach 20 % of the bf16 peak, the fused forward's
// 35 % less what its fixed softmax tiles of 16 keys cost: a warp rescales
// its 64 output accumulators, shuffles its rows' statistics and takes a
// barrier-separated tile every 16 keys where the fused forward does so
// every 64, ≈ 100 more CUDA-core instructions beside each 32 mma.sync (D =
// 128), with the same staging through registers and no cp.async. Its
// flops are the fragments' (a decode row padded to 16 rows counts 16):
// what the tensor cores issue.
var H100 = Roofline{Name: "H100 SXM5", BF16TFLOPs: 989.4, TF32TFLOPs: 494.7, FP32TFLOPs: 66.9,
	AttentionTFLOPs: 16.7, BandwidthGBs: 3350, GEMMEfficiency: 0.75, BWEfficiency: 0.8, FlashEfficiency: 0.35,
	FlashBwdEfficiency: 0.35, WGFlashEfficiency: 660.0 * 2 / 3 / 989.4, WGFlashBwdEfficiency: 474.0 * 1.4 * 2 / 3 / 989.4,
	ExactMMAEfficiency: 0.35, ExactWGEfficiency: 0.5, ExactFFMAEfficiency: 0.5, ExactAttnTCEfficiency: 0.2, LaunchUs: 2, SyncUs: 10, GraphNodeUs: 1}

// H100FA2Measured is H100 with the fused attention at the rates
// FlashAttention-2 itself is measured at on an H100 at the 2×8k shape
// (head dim 128, causal, 8,192 tokens, 16 heads; flash-attention pull
// request #1893's benchmark): forward 306.2 TFLOP/s (31 % of the bf16
// peak), backward 166.0 TFLOP/s (17 %, counted as 2.5 forwards: FA2's
// backward does 10·D FLOPs a pair, as does its non-deterministic dQ with
// atomic adds; ours 14·D). The kernels follow FA2's structure, so this is
// the sensitivity of the estimate to H100's assumed 35 %, which the
// backward at least is unlikely to reach; FlashAttention-3 and cuDNN
// (warpgroup MMA and TMA, Hopper only) reach 474–575 backward and
// 566–660 forward in the same benchmark.
var H100FA2Measured = func() Roofline {
	r := H100
	r.Name = "H100 SXM5, attention at FlashAttention-2's measured rates"
	r.FlashEfficiency, r.FlashBwdEfficiency = 306.2/989.4, 166.0/989.4
	r.WGFlashEfficiency, r.WGFlashBwdEfficiency = r.FlashEfficiency, r.FlashBwdEfficiency
	return r
}()

// H100FA3Measured is H100 with the fused attention at FlashAttention-3's
// measured rates in the same benchmark: forward 660 TFLOP/s, deterministic
// backward 474 counted at 10·D a pair, i.e. the same time per pair for our
// 14·D (474·1.4). It bounds the warpgroup-MMA kernels' estimate from
// above: FlashAttention-3's own speed. The mma.sync kernels keep H100's.
var H100FA3Measured = func() Roofline {
	r := H100
	r.Name = "H100 SXM5, warpgroup-MMA attention at FlashAttention-3's measured rates"
	r.WGFlashEfficiency, r.WGFlashBwdEfficiency = 660.0/989.4, 474.0*1.4/989.4
	return r
}()

// rate is the engine's arithmetic throughput in FLOP/s.
func (r Roofline) rate(e Engine) float64 {
	switch e {
	case EngineTensorBF16:
		return r.BF16TFLOPs * 1e12 * r.GEMMEfficiency
	case EngineTensorTF32:
		return r.TF32TFLOPs * 1e12 * r.GEMMEfficiency
	case EngineFP32GEMM:
		return r.FP32TFLOPs * 1e12 * r.GEMMEfficiency
	case EngineFlash:
		return r.BF16TFLOPs * 1e12 * r.FlashEfficiency
	case EngineFlashBwd:
		return r.BF16TFLOPs * 1e12 * r.FlashBwdEfficiency
	case EngineWGFlash:
		return r.BF16TFLOPs * 1e12 * r.WGFlashEfficiency
	case EngineWGFlashBwd:
		return r.BF16TFLOPs * 1e12 * r.WGFlashBwdEfficiency
	case EngineAttention:
		return r.AttentionTFLOPs * 1e12
	case EngineExactMMA:
		return r.BF16TFLOPs * 1e12 * r.ExactMMAEfficiency
	case EngineExactWG:
		return r.BF16TFLOPs * 1e12 * r.ExactWGEfficiency
	case EngineExactFFMA:
		return r.FP32TFLOPs * 1e12 * r.ExactFFMAEfficiency
	case EngineExactAttn:
		return r.BF16TFLOPs * 1e12 * r.ExactAttnTCEfficiency
	}
	return r.FP32TFLOPs * 1e12
}

func (r Roofline) String() string {
	att := fmt.Sprintf("%.0f %%", 100*r.FlashEfficiency)
	if r.FlashBwdEfficiency != r.FlashEfficiency {
		att = fmt.Sprintf("%.0f %% (forward) / %.0f %% (backward)", 100*r.FlashEfficiency, 100*r.FlashBwdEfficiency)
	}
	att += fmt.Sprintf(" (mma.sync), %.1f %% / %.1f %% (warpgroup MMA)", 100*r.WGFlashEfficiency, 100*r.WGFlashBwdEfficiency)
	return fmt.Sprintf("%s roofline: bf16 %.1f / tf32 %.1f / fp32 %.1f TFLOP/s × %.0f %% for GEMMs (exact mode's: %.0f %% of bf16 on mma.sync, %.0f %% on warpgroup MMA, %.0f %% of fp32; its attention %.0f %% of bf16), fused tensor-core attention at %s of bf16, CUDA-core attention kernels ≤ %.1f TFLOP/s, %.0f GB/s × %.0f %%, %.0f µs per launch, %.0f µs per host sync, %.1f µs per graph node",
		r.Name, r.BF16TFLOPs, r.TF32TFLOPs, r.FP32TFLOPs, 100*r.GEMMEfficiency, 100*r.ExactMMAEfficiency,
		100*r.ExactWGEfficiency, 100*r.ExactFFMAEfficiency, 100*r.ExactAttnTCEfficiency, att, r.AttentionTFLOPs, r.BandwidthGBs, 100*r.BWEfficiency, r.LaunchUs, r.SyncUs,
		r.GraphNodeUs)
}

// Profile is what the backend asked of the GPU over an interval.
type Profile struct {
	Launches int64 // kernel launches (cuLaunchKernel)
	GEMMs    int64 // cuBLAS calls
	Memsets  int64
	// GraphLaunches counts cuGraphLaunch calls and GraphNodes the ops they
	// replayed (launches, products, copies and memsets inside graphs, not
	// counted above).
	GraphLaunches, GraphNodes int64
	HostSyncs                 int64 // cuCtxSynchronize and the synchronous copies that wait for the GPU
	DeviceAllocs              int64 // cuMemAlloc calls (allocator cache misses)
	PageMaps                  int64 // cuMemMap calls (a paged KV cache's pages, mapped on the host between steps)
	LiveBuffers               int64 // live device buffers (over an interval: how many more at its end)
	Leaked                    int64 // buffers returned by the garbage collector, not released (must stay 0)
	H2DBytes                  int64
	D2HBytes                  int64
	D2DBytes                  int64
	Flops                     [numEngines]float64
	Bytes                     [numEngines]float64 // estimated DRAM traffic of the ops
	Seconds                   [numEngines]float64 // Σ per op max(arithmetic, traffic) on the H100 roofline
	opSeconds                 float64             // Σ over engines
}

// FlopsTensorCore is the arithmetic done on tensor cores.
func (p Profile) FlopsTensorCore() float64 {
	return p.Flops[EngineTensorBF16] + p.Flops[EngineTensorTF32] + p.Flops[EngineExactMMA] + p.FlopsFlash()
}

// FlopsFlash is the fused attention kernels' arithmetic, forward and
// backward, exact mode's tensor-core forward included.
func (p Profile) FlopsFlash() float64 {
	return p.Flops[EngineFlash] + p.Flops[EngineFlashBwd] + p.Flops[EngineWGFlash] + p.Flops[EngineWGFlashBwd] +
		p.Flops[EngineExactAttn]
}

// FlopsCUDACore is the arithmetic done on CUDA cores.
func (p Profile) FlopsCUDACore() float64 {
	return p.Flops[EngineFP32GEMM] + p.Flops[EngineAttention] + p.Flops[EngineKernel] + p.Flops[EngineExactFFMA]
}

// TensorCoreFraction is the share of all arithmetic on tensor cores.
func (p Profile) TensorCoreFraction() float64 {
	t := p.FlopsTensorCore() + p.FlopsCUDACore()
	if t == 0 {
		return 0
	}
	return p.FlopsTensorCore() / t
}

// EstSeconds is the roofline estimate of the interval on r (which must be
// the roofline the profile was counted against: the op terms are summed as
// they happen, with H100).
func (p Profile) EstSeconds(r Roofline) float64 {
	return p.opSeconds + float64(p.Launches+p.GEMMs+p.Memsets+p.GraphLaunches)*r.LaunchUs*1e-6 +
		float64(p.GraphNodes)*r.GraphNodeUs*1e-6 + float64(p.HostSyncs)*r.SyncUs*1e-6
}

// EstSecondsAttentionOn is EstSeconds with the fused attention's two
// engines re-timed at r's rates (the larger of their summed arithmetic at
// r's rate and their summed traffic; exact when, as at the profiled
// shapes, every such op is bound by its arithmetic), the rest as counted
// on the H100 roofline.
func (p Profile) EstSecondsAttentionOn(r Roofline) float64 {
	t := p.EstSeconds(H100)
	bw := r.BandwidthGBs * 1e9 * r.BWEfficiency
	for _, e := range []Engine{EngineFlash, EngineFlashBwd, EngineWGFlash, EngineWGFlashBwd} {
		t += math.Max(p.Flops[e]/r.rate(e), p.Bytes[e]/bw) - p.Seconds[e]
	}
	return t
}

// Sub returns p − q, the counts of an interval between two snapshots.
func (p Profile) Sub(q Profile) Profile {
	return p.combine(q, -1)
}

// Extrapolate returns p + k·(per − 0), i.e. p with k more copies of per
// (per-layer counts, from the difference of two depths).
func (p Profile) Extrapolate(per Profile, k int) Profile {
	return p.combine(per, float64(k))
}

func (p Profile) combine(q Profile, k float64) Profile {
	i := func(a, b int64) int64 { return a + int64(math.Round(k*float64(b))) }
	out := Profile{Launches: i(p.Launches, q.Launches), GEMMs: i(p.GEMMs, q.GEMMs), Memsets: i(p.Memsets, q.Memsets),
		GraphLaunches: i(p.GraphLaunches, q.GraphLaunches), GraphNodes: i(p.GraphNodes, q.GraphNodes),
		HostSyncs: i(p.HostSyncs, q.HostSyncs), DeviceAllocs: i(p.DeviceAllocs, q.DeviceAllocs), PageMaps: i(p.PageMaps, q.PageMaps),
		LiveBuffers: i(p.LiveBuffers, q.LiveBuffers), Leaked: i(p.Leaked, q.Leaked),
		H2DBytes: i(p.H2DBytes, q.H2DBytes), D2HBytes: i(p.D2HBytes, q.D2HBytes), D2DBytes: i(p.D2DBytes, q.D2DBytes),
		opSeconds: p.opSeconds + k*q.opSeconds}
	for e := range p.Flops {
		out.Flops[e] = p.Flops[e] + k*q.Flops[e]
		out.Bytes[e] = p.Bytes[e] + k*q.Bytes[e]
		out.Seconds[e] = p.Seconds[e] + k*q.Seconds[e]
	}
	return out
}

// profiler accumulates the op costs of a device.
type profiler struct {
	mu        sync.Mutex
	gemms     int64
	flops     [numEngines]float64
	bytes     [numEngines]float64
	seconds   [numEngines]float64
	opSeconds float64
	// graphNodes counts the ops graph launches replayed (graph.go).
	graphNodes int64
}

// cost records one op: flops of arithmetic on engine e and bytes of DRAM
// traffic.
func (d *Device) cost(e Engine, flops, bytes float64) {
	r := H100
	t := math.Max(flops/r.rate(e), bytes/(r.BandwidthGBs*1e9*r.BWEfficiency))
	if siteCosts.on {
		recordSite(e, t, bytes, flops)
	}
	d.prof.mu.Lock()
	d.prof.flops[e] += flops
	d.prof.bytes[e] += bytes
	d.prof.opSeconds += t
	d.prof.seconds[e] += t
	if e <= EngineFP32GEMM && d.rec == nil { // inside a graph, a product is one of its nodes
		d.prof.gemms++
	}
	d.prof.mu.Unlock()
}

// Profile returns the counts since the device was opened.
func (d *Device) Profile() Profile {
	n := &d.drv.n
	ms := d.alloc.stats()
	d.prof.mu.Lock()
	defer d.prof.mu.Unlock()
	return Profile{Launches: n.launches.Load(), GEMMs: d.prof.gemms, Memsets: n.memsets.Load(),
		GraphLaunches: n.graphLaunches.Load(), GraphNodes: d.prof.graphNodes,
		// A pageable host-to-device copy waits for the stream before it
		// starts, and a device-to-host copy until it ends: both stall the
		// host, as cuCtxSynchronize does.
		HostSyncs:    n.syncs.Load() + n.h2d.Load() + n.d2h.Load(),
		DeviceAllocs: n.allocs.Load(), PageMaps: n.pageMaps.Load(), LiveBuffers: ms.Live, Leaked: ms.Leaked, H2DBytes: n.h2dBytes.Load(), D2HBytes: n.d2hBytes.Load(), D2DBytes: n.d2dBytes.Load(),
		Flops: d.prof.flops, Bytes: d.prof.bytes, Seconds: d.prof.seconds, opSeconds: d.prof.opSeconds}
}
