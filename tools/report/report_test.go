package report

// report_test.go: every figure rendered from a small simulator run (made
// in-process with gdro.Simulate) and from the hand-written trainer fixture;
// the files must exist, decode as PNG / parse as SVG of the stated size,
// and index.html must link them with relative paths.

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"image"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/gdro"
)

// simRun simulates a small run with a controller preset into a run
// folder and returns the folder and the simulator's summary.
func simRun(t *testing.T, preset string) (string, *gdro.SimSummary) {
	t.Helper()
	cfg, err := gdro.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	sc := gdro.SimConfig{Steps: 30, BatchSize: 48, Population: 384, Domains: 3, Seed: 7, LR: 0.3, Transfer: 0.1, RatioNoise: 0.02}
	var buf bytes.Buffer
	sum, err := gdro.Simulate(cfg, sc, &buf, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), preset)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, MetricsFile), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, sum
}

// checkFiles checks every figure's PNG and SVG and the index.
func checkFiles(t *testing.T, rep *Report, dir string, files []string) {
	t.Helper()
	if want := 2*len(rep.Figures) + 1; len(files) != want {
		t.Errorf("Write returned %d files, want %d", len(files), want)
	}
	index, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	html := string(index)
	for _, f := range rep.Figures {
		pngName, svgName := f.Files()
		wpx, hpx := f.PixelSize()
		raw, err := os.ReadFile(filepath.Join(dir, pngName))
		if err != nil {
			t.Fatalf("figure %s: %v", f.Name, err)
		}
		img, err := png.Decode(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("%s: not a PNG: %v", pngName, err)
		}
		if b := img.Bounds(); b.Dx() != wpx || b.Dy() != hpx {
			t.Errorf("%s: %d×%d pixels, want %d×%d", pngName, b.Dx(), b.Dy(), wpx, hpx)
		}
		if !hasInk(img) {
			t.Errorf("%s is blank", pngName)
		}
		svg, err := os.ReadFile(filepath.Join(dir, svgName))
		if err != nil {
			t.Fatalf("figure %s: %v", f.Name, err)
		}
		var root struct {
			XMLName xml.Name
			Width   string `xml:"width,attr"`
			Height  string `xml:"height,attr"`
		}
		if err := xml.Unmarshal(svg, &root); err != nil {
			t.Fatalf("%s: not XML: %v", svgName, err)
		}
		wantW, wantH := fmt.Sprintf("%gpt", f.Width.Points()), fmt.Sprintf("%gpt", f.Height.Points())
		if root.XMLName.Local != "svg" || root.Width != wantW || root.Height != wantH {
			t.Errorf("%s: <%s width=%q height=%q>, want <svg width=%q height=%q>", svgName, root.XMLName.Local, root.Width, root.Height, wantW, wantH)
		}
		if !bytes.Contains(svg, []byte("sans-serif")) {
			t.Errorf("%s: no sans-serif font fallback", svgName)
		}
		if !strings.Contains(html, `src="`+pngName+`"`) || !strings.Contains(html, `href="`+svgName+`"`) {
			t.Errorf("index.html does not show %s / link %s", pngName, svgName)
		}
		if f.Title == "" || f.Caption == "" {
			t.Errorf("figure %s has no title or caption", f.Name)
		}
	}
	// offline: every src/href is a relative path inside the folder
	for _, m := range regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllStringSubmatch(html, -1) {
		u := m[1]
		if strings.Contains(u, ":") || strings.HasPrefix(u, "/") || strings.Contains(u, "..") {
			t.Errorf("index.html links %q (not a relative path)", u)
		}
		if !strings.HasPrefix(u, "#") {
			if _, err := os.Stat(filepath.Join(dir, u)); err != nil {
				t.Errorf("index.html links %q: %v", u, err)
			}
		}
	}
	for _, s := range rep.Skipped {
		if !strings.Contains(html, s.Reason) && !strings.Contains(html, templateEscape(s.Reason)) {
			t.Errorf("index.html lacks the note for %s: %q", s.Name, s.Reason)
		}
	}
}

// templateEscape is what html/template makes of s in text.
func templateEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;").Replace(s)
}

// hasInk reports whether an image has a non-white pixel (some drawing).
func hasInk(img image.Image) bool {
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 3 {
		for x := b.Min.X; x < b.Max.X; x += 3 {
			if r, g, bl, _ := img.At(x, y).RGBA(); r < 0xf000 || g < 0xf000 || bl < 0xf000 {
				return true
			}
		}
	}
	return false
}

func names(figs []Figure) []string {
	var n []string
	for _, f := range figs {
		n = append(n, f.Name)
	}
	return n
}

func skippedNames(s []Skipped) []string {
	var n []string
	for _, x := range s {
		n = append(n, x.Name)
	}
	sort.Strings(n)
	return n
}

func checkNames(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("%s:\n got  %v\n want %v", what, got, want)
	}
}

// TestRenderTrainerFixture: the hand-written trainer run has every field,
// so every figure is drawn and none skipped.
func TestRenderTrainerFixture(t *testing.T) {
	run := loadFixture(t)
	rep := Build(run)
	checkNames(t, "figures", names(rep.Figures), []string{
		"heat_share", "heat_weight", "heat_acc", "heat_rollouts",
		"dyn_mean_bin", "dyn_mass", "dyn_weight_entropy", "dyn_lead_lag_corr", "dyn_wse_step", "dyn_mu",
		"dyn_lead_lag", "dyn_wse", "paper_tail_weight", "paper_tail_rollouts", "dyn_high_bin_budget",
		"snap_weight", "snap_rollout",
		"train_reward", "train_acc", "train_response_len", "train_truncation", "train_kl", "train_entropy",
		"train_clip", "train_grad_norm", "train_throughput",
		"val_all", "val_01_aime24", "val_02_math500",
	})
	// the fixture's validation has no prompt_correct and no AIME 2025
	checkNames(t, "skipped", skippedNames(rep.Skipped), []string{"val_aime", "val_bins"})
	dir := t.TempDir()
	files, err := rep.Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkFiles(t, rep, dir, files)
	html, _ := os.ReadFile(filepath.Join(dir, "index.html"))
	if !strings.Contains(string(html), "a&lt;b &amp; c&gt;d") {
		t.Error("index.html does not show config.yaml (escaped)")
	}
	if !strings.Contains(string(html), "prompt&#43;rollout") { // html/template escapes +
		t.Error("index.html does not name the method")
	}
}

// TestRenderSimRuns: simulator runs have no training or validation
// fields; a Prompt-GDRO run has no Rollout-GDRO fields. Their figures are
// skipped with notes, the rest drawn.
func TestRenderSimRuns(t *testing.T) {
	both, sum := simRun(t, "rollout-10bins-ref") // Rollout-GDRO + Prompt-GDRO (not applied)
	prompt, _ := simRun(t, "prompt-10bins")

	rb, err := LoadRun(both)
	if err != nil {
		t.Fatal(err)
	}
	// The lead–lag extraction is the simulator summary's, step for step.
	_, corrs, ok := rb.LeadLagCorr(3)
	if !ok || len(corrs) != len(sum.LeadLag) {
		t.Fatalf("LeadLag %v %v, simulator %v", corrs, ok, sum.LeadLag)
	}
	for i := range corrs {
		if math.Abs(corrs[i]-sum.LeadLag[i]) > 1e-12 {
			t.Errorf("lead-lag[%d] = %v, simulator says %v", i, corrs[i], sum.LeadLag[i])
		}
	}
	mb := rb.Scalar("mean_bin")
	if first := (mb.Y[0] + mb.Y[1] + mb.Y[2]) / 3; math.Abs(first-sum.MeanBinFirst) > 1e-12 {
		t.Errorf("mean bin over the first tenth %v, simulator %v", first, sum.MeanBinFirst)
	}

	rep := Build(rb)
	checkNames(t, "figures (prompt+rollout sim)", names(rep.Figures), []string{
		"heat_share", "heat_weight", "heat_acc", "heat_rollouts",
		"dyn_mean_bin", "dyn_mass", "dyn_weight_entropy", "dyn_lead_lag_corr", "dyn_wse_step", "dyn_mu",
		"dyn_lead_lag", "dyn_wse", "paper_tail_weight", "paper_tail_rollouts", "dyn_high_bin_budget",
		"snap_weight", "snap_rollout", "train_acc",
	})
	checkNames(t, "skipped (prompt+rollout sim)", skippedNames(rep.Skipped), []string{"train_*", "val_*"})
	dir := filepath.Join(t.TempDir(), "plots")
	files, err := rep.Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkFiles(t, rep, dir, files)

	rp, err := LoadRun(prompt)
	if err != nil {
		t.Fatal(err)
	}
	rep = Build(rp)
	checkNames(t, "skipped (prompt sim)", skippedNames(rep.Skipped),
		[]string{"dyn_high_bin_budget", "dyn_lead_lag_corr", "dyn_mu", "heat_rollouts", "paper_tail_rollouts", "snap_rollout", "train_*", "val_*"})
	dir = t.TempDir()
	files, err = rep.Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkFiles(t, rep, dir, files)
	html, _ := os.ReadFile(filepath.Join(dir, "index.html"))
	for _, want := range []string{"Not drawn", "no Rollout-GDRO fields", "no config.yaml", "no validation.jsonl"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("index.html lacks %q", want)
		}
	}

	// a metrics file given directly (gdro-sim --out) is a run too
	rf, err := LoadRun(filepath.Join(prompt, MetricsFile))
	if err != nil || rf.Name != "prompt-10bins" || len(rf.Records) != 30 {
		t.Errorf("metrics file as run: %v, name %q", err, rf.Name)
	}
}

// TestRenderCompare overlays the trainer fixture and a simulator run.
func TestRenderCompare(t *testing.T) {
	simDir, _ := simRun(t, "prompt-10bins")
	a := loadFixture(t)
	b, err := LoadRun(simDir)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := BuildCompare([]*Run{a, b})
	if err != nil {
		t.Fatal(err)
	}
	got := names(rep.Figures)
	for _, want := range []string{"cmp_mean_bin", "cmp_mass_ge3", "cmp_mass_ge8", "cmp_weight_entropy", "cmp_mu", "cmp_wse_ratio", "cmp_wse_step_ratio",
		"cmp_lead_lag", "cmp_high_bin_budget",
		"cmp_reward", "cmp_acc", "cmp_kl", "cmp_val_mean_acc", "cmp_val_01_aime24_mean", "cmp_val_02_math500_pass"} {
		found := false
		for _, g := range got {
			found = found || g == want
		}
		if !found {
			t.Errorf("compare has no %s (has %v)", want, got)
		}
	}
	dir := t.TempDir()
	files, err := rep.Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkFiles(t, rep, dir, files)
	// the accuracy overlay has both runs (acc_mean for one, acc for the other)
	for _, f := range rep.Figures {
		if f.Name == "cmp_mu" && !strings.Contains(f.Caption, "Not available for: prompt-10bins") {
			t.Errorf("cmp_mu caption %q does not say which run lacks μ", f.Caption)
		}
	}
	if _, err := BuildCompare([]*Run{a, loadFixture(t)}); err == nil {
		t.Error("two runs with the same folder accepted")
	}
}
