package gdro

import (
	"encoding/json"
	"github.com/gdrotrain/gdrotrain/internal/rng"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// driveStep plans, weights and observes one synthetic step: prompt u solves
// each rollout with probability (u mod 10)/10, and the per-row loss is a
// keyed pseudo-random value.
func driveStep(t *testing.T, c *Controller, step int, uids []string) *StepRecord {
	t.Helper()
	plan, err := c.Plan(uids)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Weights(plan); err != nil {
		t.Fatal(err)
	}
	var rows Rows
	for i, u := range uids {
		id, _ := strconv.Atoi(strings.TrimPrefix(u, "p"))
		for j := 0; j < plan.N[i]; j++ {
			rows.Correct = append(rows.Correct, rng.UniformAt(1, uint64(step), rng.HashString(u), uint64(j)) < float64(id%10)/10)
			rows.Loss = append(rows.Loss, rng.UniformAt(2, uint64(step), rng.HashString(u), uint64(j))-0.5)
			rows.KL = append(rows.KL, rng.UniformAt(3, uint64(step), rng.HashString(u), uint64(j)))
		}
	}
	rec, err := c.Observe(plan, rows)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func batchUIDs(step, n int) []string {
	u := make([]string, n)
	for i := range u {
		u[i] = "p" + strconv.Itoa((step*7+i*3)%50)
	}
	return u
}

// A run checkpointed (State → JSON → Restore) after step 10 continues exactly
// like the uninterrupted run, for every method and mode.
func TestControllerCheckpointResumeExact(t *testing.T) {
	for _, preset := range []string{"prompt-10bins", "rollout-10bins", "rollout-10bins-ref", "prompt-softf-6bins-ref", "prompt-3bins-ref"} {
		cfg, _ := Preset(preset)
		cfg.Prompt.Signal = SignalSurrogateKL
		a, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for s := 1; s <= 10; s++ {
			driveStep(t, a, s, batchUIDs(s, 16))
		}
		blob, err := json.Marshal(a.State())
		if err != nil {
			t.Fatal(err)
		}
		var st State
		if err := json.Unmarshal(blob, &st); err != nil {
			t.Fatal(err)
		}
		b, _ := New(cfg)
		if err := b.Restore(st); err != nil {
			t.Fatalf("%s: %v", preset, err)
		}
		if b.Step() != 10 {
			t.Fatalf("%s: restored step %d", preset, b.Step())
		}
		for s := 11; s <= 20; s++ {
			ra, _ := json.Marshal(driveStep(t, a, s, batchUIDs(s, 16)))
			rb, _ := json.Marshal(driveStep(t, b, s, batchUIDs(s, 16)))
			if string(ra) != string(rb) {
				t.Fatalf("%s step %d differs after resume:\n%s\n%s", preset, s, ra, rb)
			}
		}
	}
}

func TestControllerRestoreMismatch(t *testing.T) {
	p, _ := Preset("prompt-10bins")
	r, _ := Preset("rollout-10bins")
	cp, _ := New(p)
	cr, _ := New(r)
	if err := cr.Restore(cp.State()); err == nil || !strings.Contains(err.Error(), "HINT") {
		t.Errorf("restoring a prompt-only state into a rollout config: %v", err)
	}
	st := cp.State()
	st.Version = 99
	if err := cp.Restore(st); err == nil || !strings.Contains(err.Error(), "version") {
		t.Errorf("version mismatch: %v", err)
	}
	// a failed restore leaves the controller untouched
	driveStep(t, cp, 1, batchUIDs(1, 4))
	before, _ := json.Marshal(cp.State())
	bad := cp.State()
	bad.Prompt.Score = bad.Prompt.Score[:3]
	if err := cp.Restore(bad); err == nil {
		t.Error("bad prompt state accepted")
	}
	after, _ := json.Marshal(cp.State())
	if string(before) != string(after) {
		t.Error("a failed Restore changed the state")
	}
}

func TestControllerStepOrderAndValidation(t *testing.T) {
	cfg, _ := Preset("rollout-10bins")
	cfg.Prompt.Enabled = true
	c, _ := New(cfg)
	plan, err := c.Plan([]string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	R := plan.Rows()
	if R != 8 {
		t.Fatalf("R = %d, want 8", R)
	}
	before, _ := json.Marshal(c.State())
	for _, bad := range []struct {
		rows Rows
		want string
	}{
		{Rows{Correct: make([]bool, R-1), Loss: make([]float64, R)}, "correctness values"},
		{Rows{Correct: make([]bool, R), Loss: make([]float64, R-1)}, "losses"},
		{Rows{Correct: make([]bool, R)}, "per-row losses"}, // surrogate signal needs Loss
	} {
		if _, err := c.Observe(plan, bad.rows); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Observe(%d correct, %d loss) = %v, want %q", len(bad.rows.Correct), len(bad.rows.Loss), err, bad.want)
		}
	}
	after, _ := json.Marshal(c.State())
	if string(before) != string(after) {
		t.Error("a rejected Observe changed the state")
	}
	if _, err := c.Observe(plan, Rows{Correct: make([]bool, R), Loss: make([]float64, R)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Observe(plan, Rows{Correct: make([]bool, R), Loss: make([]float64, R)}); err == nil || !strings.Contains(err.Error(), "step") {
		t.Errorf("observing a plan twice: %v", err)
	}
	if _, err := c.Plan(nil); err == nil {
		t.Error("empty batch accepted")
	}
	if _, err := c.Plan([]string{"a", ""}); err == nil || !strings.Contains(err.Error(), "empty UID") {
		t.Errorf("empty UID: %v", err)
	}
}

// Weights are all ones when Prompt-GDRO is off or not applied; the computed
// multipliers are still reported.
func TestControllerWeightsApply(t *testing.T) {
	cfg, _ := Preset("rollout-10bins-ref") // prompt enabled, apply false
	c, _ := New(cfg)
	driveStep(t, c, 1, batchUIDs(1, 8))
	driveStep(t, c, 2, batchUIDs(2, 8))
	plan, _ := c.Plan(batchUIDs(3, 8))
	w, _ := c.Weights(plan)
	if w.Applied || len(w.Row) != plan.Rows() || len(w.BinMult) == 0 {
		t.Fatalf("weights %+v", w)
	}
	for _, m := range w.Row {
		if m != 1 {
			t.Fatal("unapplied weights must be ones")
		}
	}
	g, _ := New(DefaultConfig())
	plan, _ = g.Plan([]string{"x"})
	w, _ = g.Weights(plan)
	if len(w.Row) != 4 || w.Row[0] != 1 || g.Method() != "grpo" {
		t.Errorf("grpo weights %+v", w)
	}
}

// The record's shape follows the JSONL schema in the package doc.
func TestStepRecordSchema(t *testing.T) {
	cfg, _ := Preset("rollout-10bins")
	cfg.Prompt.Enabled = true
	c, _ := New(cfg)
	rec := driveStep(t, c, 1, batchUIDs(1, 8))
	b, _ := json.Marshal(rec)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	for _, k := range []string{"step", "method", "num_prompts", "num_rows", "bin_labels", "bin_count", "bin_share", "bin_acc", "bin_n_mean",
		"mean_bin", "acc", "wse", "wse_uniform", "wse_ratio", "bin_weight", "bin_mult", "bin_signal", "bin_score", "weight_entropy",
		"mult_min", "mult_mean", "mult_max", "weights_applied", "rollout_mode", "arms", "bin_n", "bin_n_unconstrained", "arm_prob",
		"arm_entropy", "mu", "dmu", "violation", "budget_target", "budget_total", "budget_exact"} {
		if _, ok := m[k]; !ok {
			t.Errorf("record lacks %q", k)
		}
	}
	if l := len(m["bin_share"].([]any)); l != 10 {
		t.Errorf("bin_share has %d entries, want 10", l)
	}
	if m["bin_labels"].([]any)[0] != "accbin_0" {
		t.Error("bin 0 must be accbin_0")
	}
	var back StepRecord
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, rec) {
		t.Errorf("record JSON round trip differs")
	}
	// absent controllers leave their fields out
	g, _ := New(DefaultConfig())
	b, _ = json.Marshal(driveStep(t, g, 1, batchUIDs(1, 4)))
	if strings.Contains(string(b), `"mu"`) || strings.Contains(string(b), `"bin_weight"`) {
		t.Errorf("grpo record carries controller fields: %s", b)
	}
}

// WSE of a hand example: classes 0 and 1, n = [2, 6], outcomes 1/2 and 3/6
// correct: pooled σ² = 0.5 and 0.3 → wse² = (0.5/2 + 0.3/6)/2 = 0.15,
// uniform (n̄ = 4): (0.5 + 0.3)/4/2 = 0.1.
func TestEstimatedWSE(t *testing.T) {
	wse, uni, ratio := estimatedWSE([]int{0, 1}, []int{2, 6}, []bool{true, false, true, true, true, false, false, false}, 2, 4)
	checkClose(t, "wse", wse*wse, 0.15, 1e-15)
	checkClose(t, "uniform", uni*uni, 0.1, 1e-15)
	checkClose(t, "ratio", ratio, wse/uni, 0)
}

// Plans edited by hand are checked before anything changes.
func TestControllerRejectsBadPlans(t *testing.T) {
	cfg, _ := Preset("rollout-10bins")
	c, _ := New(cfg)
	for _, edit := range []func(*Plan){
		func(p *Plan) { p.Classes[0] = 10 },
		func(p *Plan) { p.N[0] = 0 },
		func(p *Plan) { p.Alloc = nil },
		func(p *Plan) { p.N = p.N[:1] },
		func(p *Plan) { p.UIDs[1] = "" },
	} {
		plan, _ := c.Plan([]string{"a", "b"})
		edit(plan)
		R := 0
		for _, n := range plan.N {
			R += max(n, 0)
		}
		if _, err := c.Observe(plan, Rows{Correct: make([]bool, R)}); err == nil {
			t.Errorf("bad plan %+v accepted", plan)
		}
		if _, err := c.Weights(plan); err == nil {
			t.Errorf("Weights accepted bad plan %+v", plan)
		}
	}
	if c.Step() != 0 {
		t.Error("a rejected plan advanced the step")
	}
}
