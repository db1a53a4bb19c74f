package testfix

// Helpers that compare two training runs' results (checkpoints, metrics)
// within stated tolerances, shared by the trainer's data-parallel tests and
// the CUDA backend's end-to-end tests.

import (
	"encoding/json"
	"hash/fnv"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/optim"
	"github.com/gdrotrain/gdrotrain/reward"
)

// Parity is a scorer that marks a response correct when the FNV hash of its
// text is even: on a random model it gives non-zero, deterministic
// advantages (the tiny task's real verifier scores everything wrong).
type Parity struct{}

// Mode implements reward.Scorer.
func (Parity) Mode() reward.Mode { return reward.ModeDAPO }

// Score implements reward.Scorer.
func (Parity) Score(response, truth string) reward.Result {
	h := fnv.New32a()
	h.Write([]byte(response))
	if h.Sum32()%2 == 0 {
		return reward.Result{Score: 1, Correct: true, Status: reward.StatusOK}
	}
	return reward.Result{Score: -1, Status: reward.StatusOK}
}

// LoadWeights reads a model folder's (or checkpoint's) parameters by name.
func LoadWeights(t testing.TB, dir string) map[string][]float32 {
	t.Helper()
	b := cpu.NewBackend()
	m, err := model.LoadAdapted(b, dir, "")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]float32{}
	// A LoRA checkpoint's trainable weights are its adapters.
	for _, np := range m.Trainable().Named(m.Cfg) {
		host := make([]float32, (*np.Ptr).Numel())
		b.Download(*np.Ptr, host)
		out[np.Name] = host
	}
	return out
}

// LoadMoments reads a checkpoint's AdamW moments ("m/<name>", "v/<name>")
// for the parameters of like, whether one process wrote them or one file
// per rank (ZeRO-1).
func LoadMoments(t testing.TB, dir string, like map[string][]float32) map[string][]float32 {
	t.Helper()
	f, err := optim.OpenMoments(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]float32{}
	for name, w := range like {
		m, v, err := f.Moments(name, len(w), 0, len(w))
		if err != nil {
			t.Fatal(err)
		}
		out["m/"+name], out["v/"+name] = m, v
	}
	return out
}

// CloseTensors compares tensors by the relative L2 distance per tensor,
// ‖got − want‖ / ‖want − base‖ (base nil: ‖want‖), which must be at most
// tol, and logs the largest.
func CloseTensors(t testing.TB, what string, want, got, base map[string][]float32, tol float64) {
	t.Helper()
	var names []string
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	worst, where := 0.0, ""
	for _, n := range names {
		x, y := want[n], got[n]
		if len(x) != len(y) {
			t.Fatalf("%s %s: %d vs %d values", what, n, len(x), len(y))
		}
		var diff, ref float64
		for i := range x {
			d := float64(y[i]) - float64(x[i])
			r := float64(x[i])
			if bn := base[n]; bn != nil { // a tensor the base lacks (an adapter) changes from 0
				r -= float64(bn[i])
			}
			diff += d * d
			ref += r * r
		}
		if ref == 0 && diff == 0 {
			continue
		}
		rel := math.Sqrt(diff / ref)
		if !(rel <= tol) {
			t.Errorf("%s %s: relative L2 distance %.3g > %.g", what, n, rel, tol)
		}
		if rel > worst {
			worst, where = rel, n
		}
	}
	t.Logf("%s: largest relative L2 distance %.3g (%s)", what, worst, where)
}

// Metrics reads a run folder's metrics.jsonl without the fields that
// depend on timing or on the device's allocation timing (time_*, *_per_s,
// gpu_mem_*).
func Metrics(t testing.TB, run string) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(run, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		for k := range m {
			if strings.HasPrefix(k, "time_") || strings.HasSuffix(k, "_per_s") || strings.HasPrefix(k, "gpu_mem_") {
				delete(m, k)
			}
		}
		out = append(out, m)
	}
	return out
}
