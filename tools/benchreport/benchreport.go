// Package benchreport is the GPU benchmark's JSON (`gdrotrain bench
// --device cuda --json`, tools/profile): the rows it measures, and the merge
// of a PyTorch-only run (--torch-only) into a run of ours (--no-torch) that
// the GPU kit's report makes. No cgo, nothing of the module imported.
package benchreport

// Report is what `gdrotrain bench --device cuda --json` measured.
type Report struct {
	GPU          string   `json:"gpu"`
	Matmul       string   `json:"matmul"`
	Shape        string   `json:"shape"`
	PeakTFLOPs   float64  `json:"peak_tflops"`
	BandwidthGBs float64  `json:"bandwidth_gbs"`
	Train        []Train  `json:"train"`
	Decode       []Decode `json:"decode"`
	// Attention is the fused attention alone at the training shapes, on
	// each route the GPU has (attention.go).
	Attention []Attention `json:"attention"`
	Baseline  string      `json:"baseline"` // PyTorch's versions, or why there is no baseline
	// Weights says how often random weights were drawn: once per model
	// shape for all the rows (bench.Weights).
	Weights Weights `json:"weights"`
	// Rows lists every row's name in order: training, optimizer steps,
	// attention, decode.
	Rows []string `json:"rows"`
	// Interrupted, when set, says the run was stopped (a signal: the GPU
	// kit's phase limit or deadline, a pre-empted allocation) and which
	// rows it did not measure: they are absent; the rows here were
	// measured.
	Interrupted string `json:"interrupted,omitempty"`
}

// Weights counts the random weight sets a run drew and the rows that
// used them.
type Weights struct {
	Made    int     `json:"made"`
	Rows    int     `json:"rows"`
	Seconds float64 `json:"seconds"`
}

// Train is one training shape: a forward and backward of Batch
// sequences of SeqLen tokens, log-probabilities over the last
// ResponseTokens (the optimizer step is not included, on either side).
type Train struct {
	Name string `json:"name"`
	// Step: a whole optimizer step as the trainer runs it (fused-head
	// forward, backward, clipping, AdamW), not forward+backward alone.
	Step           bool    `json:"optimizer_step,omitempty"`
	Batch          int     `json:"batch"`
	SeqLen         int     `json:"seq_len"`
	ResponseTokens int     `json:"response_tokens"`
	Params         int64   `json:"params"`
	TokPerS        float64 `json:"tok_s"`
	StepSeconds    float64 `json:"step_s"`
	MFU            float64 `json:"mfu"` // model FLOPs / time / peak, 0–1
	TorchTokPerS   float64 `json:"torch_tok_s,omitempty"`
	TorchStepSecs  float64 `json:"torch_step_s,omitempty"`
	TorchMFU       float64 `json:"torch_mfu,omitempty"`
	Ratio          float64 `json:"ratio,omitempty"` // ours / PyTorch's tokens per second
	TorchNote      string  `json:"torch_note,omitempty"`
	Error          string  `json:"error,omitempty"` // why ours has no number (out of memory)
}

// Decode is one decode shape: Batch sequences with Context tokens of
// KV cache, one token each per step.
type Decode struct {
	Name          string  `json:"name"`
	Batch         int     `json:"batch"`
	Context       int     `json:"context"`
	KVCache       string  `json:"kv_cache"` // bf16 or fp8
	Steps         int     `json:"steps"`
	TokPerS       float64 `json:"tok_s"`
	BoundFraction float64 `json:"bound_fraction"` // of the memory-bandwidth bound, 0–1
	TorchTokPerS  float64 `json:"torch_tok_s,omitempty"`
	Ratio         float64 `json:"ratio,omitempty"`
	TorchNote     string  `json:"torch_note,omitempty"`
	Error         string  `json:"error,omitempty"`
}

// Attention is one attention shape on one route. TFLOP/s use
// FlashAttention's count, as its published figures do: a causal forward
// is 2·B·H·S²·D FLOPs, a backward 2.5 times that (its 10·D a pair; ours
// does 14·D, so at equal time per pair ours shows 1/1.4 of its rate).
type Attention struct {
	Name       string  `json:"name"`
	Route      string  `json:"route"` // "wgmma" (sm_90a kernels) or "mma.sync"
	Batch      int     `json:"batch"`
	SeqLen     int     `json:"seq_len"`
	Heads      int     `json:"heads"`
	KVHeads    int     `json:"kv_heads"`
	HeadDim    int     `json:"head_dim"`
	FwdSeconds float64 `json:"fwd_s"`
	BwdSeconds float64 `json:"bwd_s"` // AttentionBackward: δ, dq and dk/dv
	FwdTFLOPs  float64 `json:"fwd_tflops"`
	BwdTFLOPs  float64 `json:"bwd_tflops"`
	// The step estimate's assumed rates for the route (cuda.H100), in the
	// same count, to compare with.
	AssumedFwdTFLOPs float64 `json:"assumed_fwd_tflops"`
	AssumedBwdTFLOPs float64 `json:"assumed_bwd_tflops"`
	Error            string  `json:"error,omitempty"`
}

// Merge puts PyTorch's columns of torch (a --torch-only run) into the
// training and decode rows of ours with the same name, each with ours /
// PyTorch's tokens per second as its ratio, and takes torch's baseline line
// (the versions). Rows only torch has are appended as they are. Either
// run's Interrupted note is kept, the baseline's after "--torch-only: ".
func Merge(ours, torch Report) Report {
	ours.Baseline = torch.Baseline
	if torch.Interrupted != "" {
		if ours.Interrupted != "" {
			ours.Interrupted += "; "
		}
		ours.Interrupted += "--torch-only: " + torch.Interrupted
	}
	for _, th := range torch.Train {
		i := index(ours.Train, th.Name, func(t Train) string { return t.Name })
		if i < 0 {
			ours.Train = append(ours.Train, th)
			continue
		}
		t := &ours.Train[i]
		t.TorchTokPerS, t.TorchStepSecs, t.TorchMFU, t.TorchNote = th.TorchTokPerS, th.TorchStepSecs, th.TorchMFU, th.TorchNote
		t.Ratio = ratio(t.TokPerS, t.TorchTokPerS)
	}
	for _, th := range torch.Decode {
		i := index(ours.Decode, th.Name, func(d Decode) string { return d.Name })
		if i < 0 {
			ours.Decode = append(ours.Decode, th)
			continue
		}
		d := &ours.Decode[i]
		d.TorchTokPerS, d.TorchNote = th.TorchTokPerS, th.TorchNote
		d.Ratio = ratio(d.TokPerS, d.TorchTokPerS)
	}
	return ours
}

func index[T any](rows []T, name string, nameOf func(T) string) int {
	for i, r := range rows {
		if nameOf(r) == name {
			return i
		}
	}
	return -1
}

// ratio is ours/theirs, 0 where either is missing.
func ratio(ours, theirs float64) float64 {
	if ours > 0 && theirs > 0 {
		return ours / theirs
	}
	return 0
}
