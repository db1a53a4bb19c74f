package gdro

import (
	"encoding/json"
	"github.com/gdrotrain/gdrotrain/internal/rng"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// windowWith returns a window of n indicators with k ones (ones first).
func windowWith(k, n int) string { return strings.Repeat("1", k) + strings.Repeat("0", n-k) }

func newTestClassifier(t *testing.T, cfg ClassifierConfig) *Classifier {
	t.Helper()
	c, err := NewClassifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// docs/algorithm.md §4.5 worked example: edges 0.1…0.9, δ = 0.03, remembered bin 2.
func TestHysteresisSpecExample(t *testing.T) {
	for _, c := range []struct {
		ones int // of 100 → acc = ones/100
		want int
	}{
		{31, 2}, // needs ≥ 0.33
		{35, 3},
		{18, 2}, // needs ≤ 0.17
		{5, 0},  // needs ≤ 0.07
		{33, 3}, // exactly e[2] + δ moves up
		{17, 1}, // exactly e[1] − δ moves down
		{25, 2}, // inside the bin
	} {
		cl := newTestClassifier(t, ClassifierConfig{Edges: Edges10, HistoryLen: 100, Hysteresis: 0.03})
		if err := cl.Restore(ClassifierState{UIDs: map[string]UIDHistory{"u": {Seen: 100, Correct: c.ones, Window: windowWith(c.ones, 100), Last: 2}}}); err != nil {
			t.Fatal(err)
		}
		got, err := cl.Bins([]string{"u"})
		if err != nil {
			t.Fatal(err)
		}
		if got[0] != c.want {
			t.Errorf("acc %.2f from bin 2: got bin %d, want %d", float64(c.ones)/100, got[0], c.want)
		}
		if last := cl.State().UIDs["u"].Last; last != c.want {
			t.Errorf("acc %.2f: remembered bin %d, want %d", float64(c.ones)/100, last, c.want)
		}
	}
}

// Multi-bin jumps are all-or-nothing and asymmetric (docs/algorithm.md §4.5).
func TestHysteresisMultiBinJumps(t *testing.T) {
	for _, c := range []struct {
		last, ones, want int
	}{
		{2, 55, 5}, // up 3 bins: only acc ≥ e[2]+δ = 0.33 is needed
		{7, 25, 2}, // down 5 bins: acc ≤ e[2]−δ = 0.27 holds
		{7, 28, 7}, // down: 0.28 > e[2]−δ = 0.27 → stays, all or nothing
		{0, 12, 0}, // 0.12 < e[0]+δ = 0.13
		{0, 13, 1},
		{9, 88, 9}, // 0.88 > e[8]−δ = 0.87
		{9, 87, 8},
	} {
		cl := newTestClassifier(t, ClassifierConfig{Edges: Edges10, HistoryLen: 100, Hysteresis: 0.03})
		_ = cl.Restore(ClassifierState{UIDs: map[string]UIDHistory{"u": {Seen: 100, Correct: c.ones, Window: windowWith(c.ones, 100), Last: c.last}}})
		got, _ := cl.Bins([]string{"u"})
		if got[0] != c.want {
			t.Errorf("from bin %d at acc %.2f: got %d, want %d", c.last, float64(c.ones)/100, got[0], c.want)
		}
	}
}

func TestRawBinsAndSpecialClasses(t *testing.T) {
	cl := newTestClassifier(t, ClassifierConfig{Edges: Edges3, HistoryLen: 0})
	for _, c := range []struct {
		acc  float64
		want int
	}{{0, 0}, {0.39, 0}, {0.4, 1}, {0.749, 1}, {0.75, 2}, {1, 2}} {
		if got := cl.rawBin(c.acc); got != c.want {
			t.Errorf("rawBin(%v) = %d, want %d", c.acc, got, c.want)
		}
	}
	// never-seen → bin 0 (acc 0), or excl with exclude_extremes
	got, _ := cl.Bins([]string{"new"})
	if got[0] != 0 {
		t.Errorf("never-seen prompt: bin %d, want 0", got[0])
	}
	ex := newTestClassifier(t, ClassifierConfig{Edges: Edges3, HistoryLen: 50, Hysteresis: 0.03, ExcludeExtremes: true})
	_ = ex.Observe([]string{"solved", "unsolved", "mid"}, []bool{true, false, true})
	_ = ex.Observe([]string{"solved", "unsolved", "mid"}, []bool{true, false, false})
	got, _ = ex.Bins([]string{"solved", "unsolved", "mid", "new"})
	if !slices.Equal(got, []int{3, 3, 1, 3}) || ex.ExclClass() != 3 {
		t.Errorf("exclude_extremes: got %v (excl class %d), want [3 3 1 3]", got, ex.ExclClass())
	}
	// excl neither reads nor writes hysteresis memory
	st := ex.State()
	if st.UIDs["solved"].Last != -1 || st.UIDs["mid"].Last != 1 {
		t.Errorf("hysteresis memory: solved %d (want −1), mid %d (want 1)", st.UIDs["solved"].Last, st.UIDs["mid"].Last)
	}
	if l := ex.Labels(); !reflect.DeepEqual(l, []string{"accbin_0", "accbin_1", "accbin_2", "accbin_excl"}) {
		t.Errorf("labels %v", l)
	}
}

func TestWindowAndCumulative(t *testing.T) {
	cl := newTestClassifier(t, ClassifierConfig{Edges: Edges10, HistoryLen: 3})
	seq := []bool{true, true, false, false, false, true}
	wantAcc := []float64{1, 1, 2.0 / 3, 1.0 / 3, 0, 1.0 / 3}
	for i, ok := range seq {
		_ = cl.Observe([]string{"u"}, []bool{ok})
		checkClose(t, "acc", cl.Acc("u"), wantAcc[i], 1e-15)
	}
	if w := cl.State().UIDs["u"].Window; w != "001" {
		t.Errorf("window %q, want 001", w)
	}
	cum := newTestClassifier(t, ClassifierConfig{Edges: Edges10, HistoryLen: 0})
	for _, ok := range seq {
		_ = cum.Observe([]string{"u"}, []bool{ok})
	}
	checkClose(t, "cumulative acc", cum.Acc("u"), 0.5, 1e-15)
	if cum.Acc("never") != 0 {
		t.Error("never-seen acc should be 0")
	}
}

// A UID listed twice in one step gets one indicator, the OR of its entries.
func TestObserveDuplicateUID(t *testing.T) {
	cl := newTestClassifier(t, ClassifierConfig{Edges: Edges10, HistoryLen: 10})
	_ = cl.Observe([]string{"a", "a", "b"}, []bool{false, true, false})
	st := cl.State()
	if st.UIDs["a"].Seen != 1 || st.UIDs["a"].Window != "1" || st.UIDs["b"].Window != "0" {
		t.Errorf("state %+v", st)
	}
}

// Uniform-bin mode uses edges j/B through the same rule, so downward moves
// work (the reference's uniform mode could not move down, docs/algorithm.md §11 item 10).
func TestUniformModeMovesDown(t *testing.T) {
	cl := newTestClassifier(t, ClassifierConfig{NumBins: 10, HistoryLen: 100, Hysteresis: 0.03})
	_ = cl.Restore(ClassifierState{UIDs: map[string]UIDHistory{"u": {Seen: 100, Correct: 15, Window: windowWith(15, 100), Last: 5}}})
	got, _ := cl.Bins([]string{"u"})
	if got[0] != 1 {
		t.Errorf("uniform mode from bin 5 at acc 0.15: bin %d, want 1", got[0])
	}
}

// Bins is idempotent within a step: calling it again changes nothing.
func TestBinsIdempotent(t *testing.T) {
	cl := newTestClassifier(t, ClassifierConfig{Edges: Edges10, HistoryLen: 100, Hysteresis: 0.03})
	for ones := 0; ones <= 100; ones += 7 {
		_ = cl.Restore(ClassifierState{UIDs: map[string]UIDHistory{"u": {Seen: 100, Correct: ones, Window: windowWith(ones, 100), Last: 4}}})
		a, _ := cl.Bins([]string{"u"})
		b, _ := cl.Bins([]string{"u"})
		if a[0] != b[0] {
			t.Errorf("acc %.2f: first call %d, second %d", float64(ones)/100, a[0], b[0])
		}
	}
}

// Hysteresis stops oscillation: a prompt whose true any-correct rate sits on
// an edge (0.5) flips bins far less often with δ > 0.
func TestHysteresisStopsOscillation(t *testing.T) {
	switches := func(delta float64) int {
		cl := newTestClassifier(t, ClassifierConfig{Edges: Edges10, HistoryLen: 20, Hysteresis: delta})
		s := rng.NewStream(7, 99)
		n, prev := 0, -1
		for step := 0; step < 2000; step++ {
			b, _ := cl.Bins([]string{"u"})
			if step >= 20 && b[0] != prev {
				n++
			}
			prev = b[0]
			_ = cl.Observe([]string{"u"}, []bool{s.Float64() < 0.5})
		}
		return n
	}
	s0, s3, s10 := switches(0), switches(0.03), switches(0.1)
	t.Logf("bin switches over 2000 steps: δ=0 %d, δ=0.03 %d, δ=0.1 %d", s0, s3, s10)
	if !(s3 < s0*6/10 && s10 < s3 && s10 < s0/4) {
		t.Errorf("hysteresis does not damp oscillation: δ=0 %d, δ=0.03 %d, δ=0.1 %d", s0, s3, s10)
	}
}

func TestClassifierErrors(t *testing.T) {
	cl := newTestClassifier(t, ClassifierConfig{Edges: Edges10, HistoryLen: 5})
	if _, err := cl.Bins([]string{"a", ""}); err == nil || !strings.Contains(err.Error(), "prompt 1") {
		t.Errorf("empty UID: %v", err)
	}
	if err := cl.Observe([]string{"a"}, []bool{true, false}); err == nil {
		t.Error("length mismatch accepted")
	}
	for _, bad := range []UIDHistory{
		{Seen: 1, Correct: 2, Last: -1},
		{Seen: 1, Last: 10},
		{Seen: 9, Window: "010101", Last: -1},
		{Seen: 2, Window: "1x", Last: -1},
	} {
		if err := cl.Restore(ClassifierState{UIDs: map[string]UIDHistory{"u": bad}}); err == nil {
			t.Errorf("Restore accepted %+v", bad)
		}
	}
}

func TestClassifierStateRoundTrip(t *testing.T) {
	cl := newTestClassifier(t, ClassifierConfig{Edges: Edges10, HistoryLen: 4, Hysteresis: 0.03})
	s := rng.NewStream(3)
	for step := 0; step < 30; step++ {
		uids := []string{"a", "b", "c", "d"}
		if _, err := cl.Bins(uids); err != nil {
			t.Fatal(err)
		}
		ok := []bool{s.Float64() < 0.3, s.Float64() < 0.6, s.Float64() < 0.9, false}
		_ = cl.Observe(uids, ok)
	}
	b, err := json.Marshal(cl.State())
	if err != nil {
		t.Fatal(err)
	}
	var st ClassifierState
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	cl2 := newTestClassifier(t, ClassifierConfig{Edges: Edges10, HistoryLen: 4, Hysteresis: 0.03})
	if err := cl2.Restore(st); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cl.State(), cl2.State()) {
		t.Error("state differs after JSON round trip")
	}
	b2, _ := json.Marshal(cl2.State())
	if string(b) != string(b2) {
		t.Error("JSON bytes differ after round trip")
	}
}
