package report

// data.go: reading a run folder (metrics.jsonl, validation.jsonl,
// config.yaml) and every number a figure draws. The figure files only lay
// out what the functions here return, so the tests check the plotted values
// here, on hand-computed fixtures, without looking at pixels.
//
// Schema: metrics.jsonl is one gdro.StepRecord per line (gdro-sim,
// gdro-replay) or one trainer.StepMetrics (the same record plus training
// fields). Per-class arrays have length C = len(bin_labels), index 0 =
// accbin_0 = hardest, then easier bins, then accbin_excl when the classifier
// excludes extremes. Fields a run does not have (no Prompt-GDRO, no training)
// are simply absent from its lines; the extraction reports them absent and
// the figure is skipped, never drawn empty.
//
// Dimension legend: T steps in the run, C classes, K arms.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/gdrotrain/gdrotrain/gdro"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// File names inside a run folder.
const (
	MetricsFile    = "metrics.jsonl"
	ValidationFile = "validation.jsonl"
	ConfigFile     = "config.yaml"
)

// ExclLabel is the label of the class of prompts the classifier excludes
// (always or never solved) when classifier.exclude_extremes is on.
const ExclLabel = "accbin_excl"

// Record is one line of metrics.jsonl: the per-class arrays the figures use,
// and every top-level number of the line by its JSON name.
type Record struct {
	Step      int
	Method    string               // "" when not logged
	Labels    []string             // (C) bin_labels
	Arrays    map[string][]float64 // per-class arrays by JSON name, each (C)
	Arms      []float64            // (K) arms, nil when absent
	Scalars   map[string]float64
	Flags     map[string]bool // every top-level true/false of the line by its JSON name
	HasFields map[string]bool // every top-level key of the line
}

// perClassKeys are the per-class arrays read from metrics lines.
var perClassKeys = []string{"bin_share", "bin_count", "bin_acc", "bin_n_mean", "bin_weight", "bin_mult",
	"bin_signal", "bin_score", "bin_n", "bin_n_unconstrained"}

// BenchRecord is one benchmark of a validation line.
type BenchRecord struct {
	Prompts int                `json:"prompts"`
	MeanAcc *float64           `json:"mean_acc"`
	PassAtK map[string]float64 `json:"pass_at_k"`
}

// ValRecord is one line of validation.jsonl (trainer.ValResult).
type ValRecord struct {
	Step       *int                    `json:"step"`
	N          int                     `json:"n"`
	MeanAcc    *float64                `json:"mean_acc"`
	PooledPass *float64                `json:"pooled_pass_at_n"`
	WorstGroup string                  `json:"worst_group"`
	WorstAcc   *float64                `json:"worst_group_acc"`
	Benchmarks map[string]*BenchRecord `json:"benchmarks"`
	// PromptCorrect is each validation prompt's correct count of N, in the
	// order of the validation files (absent in older runs).
	PromptCorrect []int `json:"prompt_correct"`
}

// Run is one run's data.
type Run struct {
	Name        string // shown in legends and titles
	Dir         string // the run folder ("" when a metrics file was given)
	MetricsPath string
	Records     []Record // (T) in step order
	Labels      []string // (C) bin labels (from the first line)

	ValPath string      // "" when the run has no validation.jsonl
	Val     []ValRecord // in step order

	ConfigPath string // "" when the run has no config.yaml
	Config     string // config.yaml as written by the trainer

	// Notes says what was not found (validation, config, replaced steps).
	Notes []string
}

// LoadRun reads a run: path is a run folder holding metrics.jsonl (and
// optionally validation.jsonl and config.yaml), or a metrics JSONL file
// itself (such as gdro-sim --out), in which case only that file is read.
func LoadRun(path string) (*Run, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", path, err)
	}
	r := &Run{Name: runName(path)}
	if !st.IsDir() {
		r.MetricsPath = path
		if err := r.readMetrics(); err != nil {
			return nil, err
		}
		r.Notes = append(r.Notes, fmt.Sprintf("%s is a metrics file, not a run folder: no %s or %s read", path, ValidationFile, ConfigFile))
		return r, nil
	}
	r.Dir = path
	r.MetricsPath = filepath.Join(path, MetricsFile)
	if _, err := os.Stat(r.MetricsPath); err != nil {
		return nil, fmt.Errorf("run %s: no %s (HINT: --run takes a training run folder or a gdro-sim --out file): %w", path, MetricsFile, err)
	}
	if err := r.readMetrics(); err != nil {
		return nil, err
	}
	vp := filepath.Join(path, ValidationFile)
	switch _, err := os.Stat(vp); {
	case err == nil:
		r.ValPath = vp
		if err := r.readValidation(); err != nil {
			return nil, err
		}
	case errors.Is(err, fs.ErrNotExist):
		r.Notes = append(r.Notes, "no "+ValidationFile+" in "+path)
	default:
		return nil, fmt.Errorf("run %s: %w", path, err)
	}
	cp := filepath.Join(path, ConfigFile)
	switch b, err := os.ReadFile(cp); {
	case err == nil:
		r.ConfigPath, r.Config = cp, string(b)
	case errors.Is(err, fs.ErrNotExist):
		r.Notes = append(r.Notes, "no "+ConfigFile+" in "+path)
	default:
		return nil, fmt.Errorf("run %s: %w", path, err)
	}
	return r, nil
}

// runName is the last element of the path, without a .jsonl extension.
func runName(path string) string {
	p := filepath.Clean(path)
	base := filepath.Base(p)
	if strings.HasSuffix(base, ".jsonl") {
		base = strings.TrimSuffix(base, ".jsonl")
		if base == "metrics" {
			base = filepath.Base(filepath.Dir(p))
		}
	}
	return base
}

// forEachLine calls fn with each non-blank line and its 1-based number.
func forEachLine(path string, fn func(line []byte, n int) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<28)
	n := 0
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if err := fn(line, n); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s:%d: %w", path, n+1, err)
	}
	return nil
}

func (r *Run) readMetrics() error {
	err := forEachLine(r.MetricsPath, func(line []byte, n int) error {
		rec, err := parseRecord(line)
		if err != nil {
			return err
		}
		if r.Labels == nil {
			r.Labels = rec.Labels
		} else if !slices.Equal(rec.Labels, r.Labels) {
			return fmt.Errorf("bin_labels %v differ from the first line's %v", rec.Labels, r.Labels)
		}
		// A resumed run re-logs the steps after its checkpoint: the later
		// lines replace the earlier ones from that step on.
		if k := len(r.Records); k > 0 && rec.Step <= r.Records[k-1].Step {
			i := sort.Search(k, func(i int) bool { return r.Records[i].Step >= rec.Step })
			r.Notes = append(r.Notes, fmt.Sprintf("%s:%d: step %d logged again (resumed run): %d earlier line(s) from step %d on replaced",
				r.MetricsPath, n, rec.Step, k-i, rec.Step))
			r.Records = r.Records[:i]
		}
		r.Records = append(r.Records, rec)
		return nil
	})
	if err != nil {
		return err
	}
	if len(r.Records) == 0 {
		return fmt.Errorf("%s: no step records", r.MetricsPath)
	}
	return nil
}

// parseRecord decodes one metrics line and checks the per-class arrays.
func parseRecord(line []byte) (Record, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(line, &raw); err != nil {
		return Record{}, fmt.Errorf("not a JSON object: %w", err)
	}
	rec := Record{Arrays: map[string][]float64{}, Scalars: map[string]float64{}, Flags: map[string]bool{}, HasFields: map[string]bool{}}
	for k, v := range raw {
		rec.HasFields[k] = true
		if b := string(v); b == "true" || b == "false" {
			rec.Flags[k] = b == "true"
		}
		if len(v) > 0 && (v[0] == '-' || (v[0] >= '0' && v[0] <= '9')) {
			x, err := strconv.ParseFloat(string(v), 64)
			if err != nil {
				return rec, fmt.Errorf("field %s: %w", k, err)
			}
			rec.Scalars[k] = x
		}
	}
	st, ok := raw["step"]
	if !ok {
		return rec, fmt.Errorf("no \"step\" field")
	}
	if err := json.Unmarshal(st, &rec.Step); err != nil {
		return rec, fmt.Errorf("field step: %w", err)
	}
	if v, ok := raw["method"]; ok {
		_ = json.Unmarshal(v, &rec.Method) // informational only: a non-string is ignored
	}
	lb, ok := raw["bin_labels"]
	if !ok {
		return rec, fmt.Errorf("no \"bin_labels\" field (is this a gdro-sim or trainer metrics file?)")
	}
	if err := json.Unmarshal(lb, &rec.Labels); err != nil {
		return rec, fmt.Errorf("field bin_labels: %w", err)
	}
	C := len(rec.Labels)
	if C == 0 {
		return rec, fmt.Errorf("bin_labels is empty")
	}
	for _, k := range perClassKeys {
		v, ok := raw[k]
		if !ok || string(v) == "null" {
			continue
		}
		var a []float64
		if err := json.Unmarshal(v, &a); err != nil {
			return rec, fmt.Errorf("field %s: %w", k, err)
		}
		if len(a) != C {
			return rec, fmt.Errorf("field %s has %d values but bin_labels has %d", k, len(a), C)
		}
		rec.Arrays[k] = a
	}
	if _, ok := rec.Arrays["bin_share"]; !ok {
		return rec, fmt.Errorf("no \"bin_share\" field")
	}
	if v, ok := raw["arms"]; ok && string(v) != "null" {
		if err := json.Unmarshal(v, &rec.Arms); err != nil {
			return rec, fmt.Errorf("field arms: %w", err)
		}
	}
	return rec, nil
}

func (r *Run) readValidation() error {
	err := forEachLine(r.ValPath, func(line []byte, n int) error {
		var v ValRecord
		if err := json.Unmarshal(line, &v); err != nil {
			return fmt.Errorf("not a validation record: %w", err)
		}
		if v.Step == nil {
			return fmt.Errorf("no \"step\" field")
		}
		if k := len(r.Val); k > 0 && *v.Step <= *r.Val[k-1].Step {
			i := sort.Search(k, func(i int) bool { return *r.Val[i].Step >= *v.Step })
			r.Val = r.Val[:i]
		}
		r.Val = append(r.Val, v)
		return nil
	})
	if err != nil {
		return err
	}
	if len(r.Val) == 0 {
		r.Notes = append(r.Notes, r.ValPath+" has no records")
	}
	return nil
}

// ---------------------------------------------------------------------------
// Extraction: what each figure plots.

// Series is one line of a figure: Y against X (steps), the steps where the
// field is present.
type Series struct {
	Label string
	X, Y  []float64
}

// Len is the number of points.
func (s Series) Len() int { return len(s.X) }

// XY implements plotter.XYer.
func (s Series) XY(i int) (float64, float64) { return s.X[i], s.Y[i] }

// SmoothWindow is the moving-average window drawn over a series of n
// points: none (0) under 100 points, else the odd number nearest n/50
// (at least 3), so that a long noisy curve shows its trend.
func SmoothWindow(n int) int {
	if n < 100 {
		return 0
	}
	w := n / 50
	if w%2 == 0 {
		w++
	}
	return max(3, w)
}

// MovingAverage is the centred moving average over w points (w odd); near
// the ends the window shrinks to the points available.
func (s Series) MovingAverage(w int) Series {
	h := w / 2
	out := Series{Label: s.Label, X: s.X, Y: make([]float64, len(s.Y))}
	for i := range s.Y {
		lo, hi := max(0, i-h), min(len(s.Y)-1, i+h)
		sum := 0.0
		for j := lo; j <= hi; j++ {
			sum += s.Y[j]
		}
		out.Y[i] = sum / float64(hi-lo+1)
	}
	return out
}

// Method is the "method" of the run's last record (grpo, prompt, rollout,
// prompt+rollout), or inferred from its fields when not logged.
func (r *Run) Method() string {
	if len(r.Records) == 0 {
		return "unknown (no step records)"
	}
	last := r.Records[len(r.Records)-1]
	if last.Method != "" {
		return last.Method
	}
	_, p := last.Arrays["bin_weight"]
	_, o := last.Arrays["bin_n"]
	switch {
	case p && o:
		return "prompt+rollout"
	case p:
		return "prompt"
	case o:
		return "rollout"
	}
	return "grpo"
}

// Has reports whether any record has the top-level field key.
func (r *Run) Has(key string) bool {
	for _, rec := range r.Records {
		if rec.HasFields[key] {
			return true
		}
	}
	return false
}

// Scalar is the series of the top-level number key over the steps that have
// it.
func (r *Run) Scalar(key string) Series {
	s := Series{Label: key}
	for _, rec := range r.Records {
		if v, ok := rec.Scalars[key]; ok {
			s.X = append(s.X, float64(rec.Step))
			s.Y = append(s.Y, v)
		}
	}
	return s
}

// NumBins is B, the number of accuracy bins (classes without accbin_excl).
func (r *Run) NumBins() int {
	B := len(r.Labels)
	if B > 0 && r.Labels[B-1] == ExclLabel {
		B--
	}
	return B
}

// MassAtLeast is Σ_{k ≤ b < B} bin_share[b] per step: the share of the
// step's prompts in bins k and above (easier), accbin_excl not counted. ok
// is false when the run has no bin k.
func (r *Run) MassAtLeast(k int) (s Series, ok bool) {
	B := r.NumBins()
	if k < 0 || k >= B {
		return Series{}, false
	}
	s.Label = fmt.Sprintf("bins ≥ %d", k)
	for _, rec := range r.Records {
		m := 0.0
		for b := k; b < B; b++ {
			m += rec.Arrays["bin_share"][b]
		}
		s.X = append(s.X, float64(rec.Step))
		s.Y = append(s.Y, m)
	}
	return s, true
}

// PresentClasses is the number of classes with prompts at each step (the
// number of classes Prompt-GDRO's weights spread over).
func (r *Run) PresentClasses() Series {
	s := Series{Label: "present classes"}
	for _, rec := range r.Records {
		n := 0
		for _, q := range rec.Arrays["bin_share"] {
			if q > 0 {
				n++
			}
		}
		s.X = append(s.X, float64(rec.Step))
		s.Y = append(s.Y, float64(n))
	}
	return s
}

// MaxEntropy is ln(number of present classes) per step: the weight entropy
// of uniform weights over the classes present.
func (r *Run) MaxEntropy() Series {
	s := r.PresentClasses()
	s.Label = "uniform over present bins: ln(#bins)"
	for i, n := range s.Y {
		s.Y[i] = math.Log(math.Max(n, 1))
	}
	return s
}

// Grid is a per-class array over steps. Z[t][c] is NaN where class c had no
// prompts at step t (its value there is a placeholder 0 in the JSONL).
type Grid struct {
	Key    string
	Steps  []float64   // (T)
	Labels []string    // (C)
	Z      [][]float64 // (T, C)
}

// Grid returns the per-class array key over steps; ok is false when no
// record has it. Steps without the field are NaN columns.
func (r *Run) Grid(key string) (g Grid, ok bool) {
	g = Grid{Key: key, Labels: r.Labels}
	for _, rec := range r.Records {
		a, has := rec.Arrays[key]
		ok = ok || has
		row := make([]float64, len(r.Labels))
		share := rec.Arrays["bin_share"]
		for c := range row {
			row[c] = math.NaN()
			if has && share[c] > 0 && !math.IsInf(a[c], 0) {
				row[c] = a[c] // ±Inf (not from JSON) has no colour: no value
			}
		}
		g.Steps = append(g.Steps, float64(rec.Step))
		g.Z = append(g.Z, row)
	}
	return g, ok
}

// Range is the smallest and largest non-NaN value of the grid (0, 1 when
// all are NaN).
func (g Grid) Range() (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, row := range g.Z {
		for _, v := range row {
			if !math.IsNaN(v) {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if lo > hi {
		return 0, 1
	}
	return lo, hi
}

// Quantile is the q-quantile (nearest rank) of the non-NaN values (NaN
// when there are none).
func (g Grid) Quantile(q float64) float64 {
	var v []float64
	for _, row := range g.Z {
		for _, x := range row {
			if !math.IsNaN(x) {
				v = append(v, x)
			}
		}
	}
	if len(v) == 0 {
		return math.NaN()
	}
	sort.Float64s(v)
	i := int(math.Ceil(q*float64(len(v)))) - 1
	return v[max(0, min(len(v)-1, i))]
}

// Downsample averages the grid over consecutive windows of steps so that it
// has at most maxCols columns (NaNs ignored; a window with no value stays
// NaN). Step of a column = mean step of its window. A grid with ≤ maxCols
// columns is returned as is.
func (g Grid) Downsample(maxCols int) Grid {
	T := len(g.Steps)
	if maxCols < 1 || T <= maxCols {
		return g
	}
	out := Grid{Key: g.Key, Labels: g.Labels}
	C := len(g.Labels)
	for j := 0; j < maxCols; j++ {
		lo, hi := j*T/maxCols, (j+1)*T/maxCols
		sx := 0.0
		row := make([]float64, C)
		for c := 0; c < C; c++ {
			s, n := 0.0, 0
			for t := lo; t < hi; t++ {
				if v := g.Z[t][c]; !math.IsNaN(v) {
					s += v
					n++
				}
			}
			row[c] = math.NaN()
			if n > 0 {
				row[c] = s / float64(n)
			}
		}
		for t := lo; t < hi; t++ {
			sx += g.Steps[t]
		}
		out.Steps = append(out.Steps, sx/float64(hi-lo))
		out.Z = append(out.Z, row)
	}
	return out
}

// ArmRange is the smallest and largest arm of the run (from arms), ok false
// when the run logs no arms.
func (r *Run) ArmRange() (lo, hi float64, ok bool) {
	for _, rec := range r.Records {
		if len(rec.Arms) > 0 {
			return rec.Arms[0], rec.Arms[len(rec.Arms)-1], true
		}
	}
	return 0, 0, false
}

// DeltaMeanBin is mean_bin(t) − mean_bin(t−1), 0 at the first step.
func (r *Run) DeltaMeanBin() Series {
	m := r.Scalar("mean_bin")
	d := Series{Label: "Δ mean bin", X: m.X, Y: make([]float64, len(m.Y))}
	for t := 1; t < len(m.Y); t++ {
		d.Y[t] = m.Y[t] - m.Y[t-1]
	}
	return d
}

// LeadLagCorr returns corr(dmu_t, Δmean_bin_{t+k}) for k = −maxLag … maxLag
// (index k+maxLag; positive k: dmu leads), dmu the shadow price's step change
// μ(t+1) − μ(t), computed as gdro-sim's summary does: over steps t ≥ 2 with
// t+k ≥ 2 (1-based), Pearson correlation, 0 when either side is constant.
// ok is false without dmu. gdrotrain's own diagnostic, not the paper's
// lead–lag (LeadLagGap).
func (r *Run) LeadLagCorr(maxLag int) (lags, corrs []float64, ok bool) {
	if !r.Has("dmu") || !r.Has("mean_bin") {
		return nil, nil, false
	}
	T := len(r.Records)
	dmu := make([]float64, T)
	dbin := make([]float64, T)
	for t, rec := range r.Records {
		dmu[t] = rec.Scalars["dmu"]
		if t > 0 {
			dbin[t] = rec.Scalars["mean_bin"] - r.Records[t-1].Scalars["mean_bin"]
		}
	}
	for k := -maxLag; k <= maxLag; k++ {
		var a, b []float64
		for t := 1; t < T; t++ {
			if u := t + k; u >= 1 && u < T {
				a = append(a, dmu[t])
				b = append(b, dbin[u])
			}
		}
		lags = append(lags, float64(k))
		corrs = append(corrs, gdro.Pearson(a, b))
	}
	return lags, corrs, true
}

// SnapshotFractions place the paper's four snapshots in the run: start,
// early (a quarter of the way), mid (half way) and late (the last step)
// (docs/algorithm.md §8.1).
var SnapshotFractions = []float64{0, 0.25, 0.5, 1}

// SnapshotNames name the snapshots of SnapshotIndices in order.
var SnapshotNames = []string{"start", "early", "mid", "late"}

// SnapshotIndices are the record indices of the four snapshots,
// round(f·(T−1)) for f in SnapshotFractions, with repeats removed (runs
// shorter than 5 steps).
func SnapshotIndices(T int) []int {
	var idx []int
	for _, f := range SnapshotFractions {
		i := int(math.Round(f * float64(T-1)))
		if len(idx) == 0 || idx[len(idx)-1] != i {
			idx = append(idx, i)
		}
	}
	return idx
}

// Snapshot is one step's per-class shares for the paired bars.
type Snapshot struct {
	Step  int
	Name  string    // start, early, mid, late
	Share []float64 // (C) data share q̂_b
	// Weight is Prompt-GDRO's p_b (nil without Prompt-GDRO).
	Weight []float64 // (C)
	// Rollout is the share of the step's rollouts given to class b
	// (RolloutShare; nil without Rollout-GDRO).
	Rollout []float64 // (C)
}

// Snapshots returns the four snapshots.
func (r *Run) Snapshots() []Snapshot {
	idx := SnapshotIndices(len(r.Records))
	out := make([]Snapshot, len(idx))
	for j, i := range idx {
		rec := r.Records[i]
		s := Snapshot{Step: rec.Step, Name: SnapshotNames[j], Share: rec.Arrays["bin_share"]}
		if len(idx) < 4 && j == len(idx)-1 {
			s.Name = SnapshotNames[len(SnapshotNames)-1]
		}
		s.Weight = rec.Arrays["bin_weight"]
		s.Rollout = RolloutShare(rec)
		out[j] = s
	}
	return out
}

// RolloutShare is the share of the step's rollouts given to each class,
// q̂_b·n̄_b / Σ_c q̂_c·n̄_c with n̄_b = bin_n_mean (what was generated); nil
// when the record has no Rollout-GDRO fields (bin_n) or no bin_n_mean.
func RolloutShare(rec Record) []float64 {
	if _, ok := rec.Arrays["bin_n"]; !ok {
		return nil
	}
	nm := rec.Arrays["bin_n_mean"]
	if nm == nil {
		return nil
	}
	share := rec.Arrays["bin_share"]
	out := make([]float64, len(share))
	tot := 0.0
	for c, q := range share {
		out[c] = q * nm[c]
		tot += out[c]
	}
	for c := range out {
		if tot > 0 {
			out[c] /= tot
		}
	}
	return out
}

// BinTick is the axis label of class c: "0 hardest", "1", …, "B−1 easiest",
// "excl".
func BinTick(labels []string, c int) string {
	l := labels[c]
	if l == ExclLabel {
		return "excl"
	}
	s := strings.TrimPrefix(l, "accbin_")
	B := len(labels)
	if labels[B-1] == ExclLabel {
		B--
	}
	switch c {
	case 0:
		return s + " hardest"
	case B - 1:
		return s + " easiest"
	}
	return s
}

// ---------------------------------------------------------------------------
// Validation.

// ValScalar is a top-level validation number over the validation steps:
// "mean_acc", "pooled_pass_at_n" or "worst_group_acc".
func (r *Run) ValScalar(key string) Series {
	s := Series{Label: key}
	for _, v := range r.Val {
		var p *float64
		switch key {
		case "mean_acc":
			p = v.MeanAcc
		case "pooled_pass_at_n":
			p = v.PooledPass
		case "worst_group_acc":
			p = v.WorstAcc
		}
		if p != nil {
			s.X = append(s.X, float64(*v.Step))
			s.Y = append(s.Y, *p)
		}
	}
	return s
}

// Benchmarks lists the benchmark names seen in validation, sorted.
func (r *Run) Benchmarks() []string {
	seen := map[string]bool{}
	var names []string
	for _, v := range r.Val {
		for name := range v.Benchmarks {
			if !seen[name] {
				seen[name] = true
				names = append(names, name)
			}
		}
	}
	sort.Strings(names)
	return names
}

// BenchSeries returns a benchmark's mean@n series followed by one pass@k
// series per k, in increasing k. Labels: "mean@n", "pass@1", …
func (r *Run) BenchSeries(name string) []Series {
	mean := Series{Label: "mean@n"}
	pass := map[string]*Series{}
	for _, v := range r.Val {
		b := v.Benchmarks[name]
		if b == nil {
			continue
		}
		x := float64(*v.Step)
		if b.MeanAcc != nil {
			if v.N > 0 {
				mean.Label = fmt.Sprintf("mean@%d", v.N)
			}
			mean.X = append(mean.X, x)
			mean.Y = append(mean.Y, *b.MeanAcc)
		}
		for k, p := range b.PassAtK {
			s := pass[k]
			if s == nil {
				s = &Series{Label: k}
				pass[k] = s
			}
			s.X = append(s.X, x)
			s.Y = append(s.Y, p)
		}
	}
	keys := make([]string, 0, len(pass))
	for k := range pass {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		ki, kj := passK(keys[i]), passK(keys[j])
		if ki != kj {
			return ki < kj
		}
		return keys[i] < keys[j]
	})
	var out []Series
	if mean.Len() > 0 {
		out = append(out, mean)
	}
	for _, k := range keys {
		out = append(out, *pass[k])
	}
	return out
}

// passK parses the k of "pass@k" (a large number when it does not parse).
func passK(s string) int {
	k, err := strconv.Atoi(strings.TrimPrefix(s, "pass@"))
	if err != nil {
		return math.MaxInt
	}
	return k
}
