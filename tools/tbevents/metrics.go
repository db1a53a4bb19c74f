package tbevents

// From a metrics.jsonl or validation.jsonl line to one Summary, under tags
// grouped the way TensorBoard groups its cards (by the tag's first path
// segment):
//
//	train/<key>            the step's learning figures (reward, accuracy,
//	                       KL, loss, gradient norm, lr, mismatch, dynamic
//	                       sampling, overlong, verifier counts)
//	gdro/<key>             the curriculum controllers' record (bins, weights,
//	                       rollouts per prompt, μ, budget)
//	perf/<key>             timings and throughput (time_*, *_per_s)
//	memory/<key>           GPU memory peaks (gpu_mem_*)
//	validation/<key>       a validation's pooled figures
//	validation/<benchmark>/<figure>  per benchmark: mean_acc, prompts,
//	                       pass@k, first_k_any@k
//
// Every number and boolean (as 0/1) of a line is a scalar; a list becomes
// one scalar per element, named by its index — "b<i>" for the first index
// of a per-bin list (keys bin_* and arm_prob), so gdro/bin_weight/b3 is bin
// 3's weight and gdro/arm_prob/b3/2 its third arm's probability. Strings
// (method, bin labels, the worst group's name) are not scalars and are
// left out. Each per-bin list is also a histogram with one bucket per bin
// (bucket b spans [b, b+1), its count the bin's value), which TensorBoard's
// histogram and distribution views draw over steps as the report's
// heatmaps do; a validation's prompt_correct is the histogram of prompts
// by number of correct samples.

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/gdrotrain/gdrotrain/tools/tbevents/tbpb"
)

// gdroKeys are the metrics keys of gdro.StepRecord that do not start with
// a prefix gdroKey recognises (a test checks the list against the struct).
var gdroKeys = map[string]bool{
	"method": true, "num_prompts": true, "num_rows": true, "mean_bin": true, "acc": true,
	"mu": true, "dmu": true, "violation": true, "arms": true, "rollout_mode": true,
	"weights_applied": true, "focus_fallback": true, "using_prev_labels": true,
}

// Group is the tag group of a metrics.jsonl key.
func Group(key string) string {
	switch {
	case strings.HasPrefix(key, "time_") || strings.HasSuffix(key, "_per_s") || key == "rollout_preemptions":
		return "perf"
	case strings.HasPrefix(key, "gpu_mem_"):
		return "memory"
	case gdroKey(key):
		return "gdro"
	}
	return "train"
}

func gdroKey(k string) bool {
	for _, p := range []string{"bin_", "arm_", "mult_", "weight_", "wse", "budget_", "sim_"} {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return gdroKeys[k]
}

// perBin reports whether the list under key has one element per bin.
func perBin(key string) bool { return strings.HasPrefix(key, "bin_") || key == "arm_prob" }

// decode reads a JSON line and its step.
func decode(line []byte) (int64, map[string]any, error) {
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		return 0, nil, err
	}
	step, ok := m["step"].(float64)
	if !ok {
		return 0, nil, fmt.Errorf("line has no step")
	}
	return int64(step), m, nil
}

// MetricsSummary converts one metrics.jsonl line.
func MetricsSummary(line []byte) (int64, *tbpb.Summary, error) {
	step, m, err := decode(line)
	if err != nil {
		return 0, nil, fmt.Errorf("metrics line: %w", err)
	}
	s := &tbpb.Summary{}
	for _, k := range sortedKeys(m) {
		if k == "step" {
			continue
		}
		tag := Group(k) + "/" + k
		scalars(s, tag, m[k], perBin(k))
		if perBin(k) {
			if h := binHistogram(m[k]); h != nil {
				s.Value = append(s.Value, &tbpb.Summary_Value{Tag: tag, Value: &tbpb.Summary_Value_Histo{Histo: h}})
			}
		}
	}
	return step, s, nil
}

// ValidationSummary converts one validation.jsonl line.
func ValidationSummary(line []byte) (int64, *tbpb.Summary, error) {
	step, m, err := decode(line)
	if err != nil {
		return 0, nil, fmt.Errorf("validation line: %w", err)
	}
	s := &tbpb.Summary{}
	for _, k := range sortedKeys(m) {
		switch v := m[k]; k {
		case "step":
		case "benchmarks":
			benches, _ := v.(map[string]any)
			for _, name := range sortedKeys(benches) {
				b, _ := benches[name].(map[string]any)
				for _, f := range sortedKeys(b) {
					if sub, ok := b[f].(map[string]any); ok { // pass_at_k, first_k_any: their keys name the figure
						for _, g := range sortedKeys(sub) {
							scalars(s, "validation/"+name+"/"+g, sub[g], false)
						}
						continue
					}
					scalars(s, "validation/"+name+"/"+f, b[f], false)
				}
			}
		case "prompt_correct":
			n, _ := m["n"].(float64)
			if h := countHistogram(v, int(n)); h != nil {
				s.Value = append(s.Value, &tbpb.Summary_Value{Tag: "validation/prompt_correct", Value: &tbpb.Summary_Value_Histo{Histo: h}})
			}
		default:
			scalars(s, "validation/"+k, v, false)
		}
	}
	return step, s, nil
}

// TextSummary is markdown text under tag, for TensorBoard's text plugin (a
// string tensor with the plugin's name in its metadata).
func TextSummary(tag, markdown string) *tbpb.Summary {
	return &tbpb.Summary{Value: []*tbpb.Summary_Value{{
		Tag: tag,
		Metadata: &tbpb.SummaryMetadata{PluginData: &tbpb.SummaryMetadata_PluginData{PluginName: "text"},
			DataClass: tbpb.DataClass_DATA_CLASS_TENSOR},
		Value: &tbpb.Summary_Value_Tensor{Tensor: &tbpb.TensorProto{Dtype: tbpb.DataType_DT_STRING,
			TensorShape: &tbpb.TensorShapeProto{}, StringVal: [][]byte{[]byte(markdown)}}},
	}}}
}

// scalars adds v's numbers and booleans under tag (lists by index).
func scalars(s *tbpb.Summary, tag string, v any, bins bool) {
	switch x := v.(type) {
	case float64:
		s.Value = append(s.Value, simple(tag, x))
	case bool:
		b := 0.0
		if x {
			b = 1
		}
		s.Value = append(s.Value, simple(tag, b))
	case []any:
		for i, e := range x {
			sub := fmt.Sprintf("%s/%d", tag, i)
			if bins {
				sub = fmt.Sprintf("%s/b%d", tag, i)
			}
			scalars(s, sub, e, false)
		}
	case map[string]any:
		for _, k := range sortedKeys(x) {
			scalars(s, tag+"/"+k, x[k], false)
		}
	}
}

func simple(tag string, x float64) *tbpb.Summary_Value {
	return &tbpb.Summary_Value{Tag: tag, Value: &tbpb.Summary_Value_SimpleValue{SimpleValue: float32(x)}}
}

// binHistogram is a per-bin list as a histogram with bucket b = [b, b+1)
// holding the bin's value; nil when v is not a list of numbers.
func binHistogram(v any) *tbpb.HistogramProto {
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return nil
	}
	h := &tbpb.HistogramProto{Max: float64(len(list))}
	for b, e := range list {
		x, ok := e.(float64)
		if !ok {
			return nil
		}
		mid := float64(b) + 0.5
		h.BucketLimit = append(h.BucketLimit, float64(b+1))
		h.Bucket = append(h.Bucket, x)
		h.Num += x
		h.Sum += x * mid
		h.SumSquares += x * mid * mid
	}
	return h
}

// countHistogram is the histogram of a list of counts 0..n, one bucket
// per count.
func countHistogram(v any, n int) *tbpb.HistogramProto {
	list, ok := v.([]any)
	if !ok || len(list) == 0 || n < 1 {
		return nil
	}
	h := &tbpb.HistogramProto{Max: float64(n + 1), Bucket: make([]float64, n+1)}
	for c := 0; c <= n; c++ {
		h.BucketLimit = append(h.BucketLimit, float64(c+1))
	}
	for _, e := range list {
		x, ok := e.(float64)
		if !ok || x < 0 || int(x) > n {
			return nil
		}
		h.Bucket[int(x)]++
		h.Num++
		h.Sum += x
		h.SumSquares += x * x
	}
	return h
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
