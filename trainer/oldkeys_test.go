package trainer

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestOldKeysRefused: every old key, in a file or a --set, is an error
// naming what replaced it; a current key of the same name elsewhere
// (gdro.rollout, Rollout-GDRO's section) is not.
func TestOldKeysRefused(t *testing.T) {
	const base = "model: {path: m}\ndata: {train: [a.jsonl]}\n"
	for _, c := range []struct {
		yaml string
		sets []string
		want string // "" for no error
	}{
		{"run: {matmul_precision: fp32}\n", nil, "run.matmul_precision is renamed precision.matmul"},
		{"run: {reference_dtype: bf16}\n", nil, "run.reference_dtype is renamed precision.reference"},
		{"run: {kv_cache_dtype: fp32, seed: 3}\n", nil, "run.kv_cache_dtype is renamed precision.kv_cache"},
		{"rollout: {temperature: 0.7}\n", nil, "rollout is renamed sampling: rollout.KEY is sampling.KEY"},
		{"rollout:\n", nil, "rollout is renamed sampling"},
		{"train: {method: prompt_gdro}\ngdro: {prompt: {enabled: true}}\n", nil, "gdro.prompt.enabled is no longer a key: train.method decides"},
		{"train: {method: rollout_gdro}\ngdro: {rollout: {enabled: true}}\n", nil, "gdro.rollout.enabled is no longer a key"},
		{"gdro: {prompt: {kl_coef: 0.001}}\n", nil, "gdro.prompt.kl_coef is replaced by loss.kl_coef"},
		{"", []string{"run.matmul_precision=tf32"}, "--set run.matmul_precision=tf32: run.matmul_precision is renamed precision.matmul"},
		{"", []string{"rollout={max_slots: 4}"}, "--set rollout={max_slots: 4}: rollout is renamed sampling"},
		{"", []string{"gdro.prompt.kl_coef=0.01"}, "gdro.prompt.kl_coef is replaced by loss.kl_coef"},
		{"train: {method: rollout_gdro}\ngdro: {rollout: {n_mean: 3}}\n", nil, ""},
		{"precision: {matmul: fp32}\nsampling: {temperature: 0.7}\nloss: {kl_coef: 0.01}\n", []string{"sampling.top_p=0.9"}, ""},
	} {
		_, err := LoadBytes([]byte(base+c.yaml), "old.yaml", c.sets)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q %v: %v", c.yaml, c.sets, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q %v: error %v, want %q", c.yaml, c.sets, err, c.want)
		}
	}
}

// TestReadRecorded: a checkpoint's recorded config reads back as the
// config it records; one with an old key (written before the rename) is
// refused, naming the key and what replaced it.
func TestReadRecorded(t *testing.T) {
	want := Default()
	want.Train.Method, want.Precision.MatMul, want.Sampling.Temperature = MethodPromptGDRO, "fp32", 0.7
	want = want.Resolved()
	raw, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readRecorded(raw)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("readRecorded: %v\n%+v\nwant\n%+v", err, got, want)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	m["rollout"] = m["sampling"]
	delete(m, "sampling")
	old, _ := json.Marshal(m)
	if _, err := readRecorded(old); err == nil || !strings.Contains(err.Error(), "rollout is renamed sampling") ||
		!strings.Contains(err.Error(), "resume it with that build") {
		t.Fatalf("readRecorded of an old recorded config: %v", err)
	}
}
