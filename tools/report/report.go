// Package report renders a gdrotrain run (or several, overlaid) as PNG and
// SVG figures and an index.html that shows them with the run's config,
// readable offline (relative paths, no external assets).
//
// Files: data.go reads metrics.jsonl / validation.jsonl / config.yaml and
// extracts every plotted number, paper.go the paper's measurements
// (docs/algorithm.md §8.1); figure.go renders and styles; heatmap.go,
// dynamics.go, paperfig.go, training.go and compare.go build the figures;
// html.go writes index.html; this file puts a report together.
//
// Usage:
//
//	run, err := report.LoadRun("runs/prompt-gdro")   // or a gdro-sim --out file
//	rep := report.Build(run)
//	files, err := rep.Write("runs/prompt-gdro/plots")
//
//	rep, err := report.BuildCompare([]*report.Run{a, b})
package report

import (
	"fmt"
	"os"
	"path/filepath"
)

// Skipped records a figure that was not drawn and why (shown in
// index.html).
type Skipped struct {
	Section string
	Name    string
	Title   string
	Reason  string
}

// Report is a set of figures with their notes.
type Report struct {
	Title   string
	Runs    []*Run
	Compare bool
	Figures []Figure
	Skipped []Skipped
	// Measures are the key numbers of the paper's measurements (one run).
	Measures []Measure
}

// Sections in display order.
var sections = []string{secHeatmaps, secDynamics, secPaper, secSnapshots, secTraining, secValidation}

// Build makes the report of one run: every figure the run has data for.
func Build(run *Run) *Report {
	rep := &Report{Title: "gdrotrain run " + run.Name, Runs: []*Run{run}}
	if len(run.Records) == 0 {
		// LoadRun refuses such a run; one built otherwise gets a page
		// that says why it holds no figure.
		for _, sec := range sections {
			rep.Skipped = append(rep.Skipped, Skipped{Section: sec, Name: sec, Title: "every figure", Reason: "the run has no step records"})
		}
		return rep
	}
	for _, part := range []func(*Run) ([]Figure, []Skipped){
		heatmapFigures, dynamicsFigures, paperFigures, snapshotFigures, trainingFigures, validationFigures, paperValidationFigures,
	} {
		f, s := part(run)
		rep.Figures = append(rep.Figures, f...)
		rep.Skipped = append(rep.Skipped, s...)
	}
	rep.Measures = paperMeasures(run)
	// The validation overview (training.go) names the peak checkpoint.
	if pk, ok := run.PeakCheckpoint(); ok {
		for i := range rep.Figures {
			if rep.Figures[i].Name == "val_all" {
				rep.Figures[i].Caption += " " + peakSentence(run, pk)
			}
		}
	}
	return rep
}

// peakSentence names the peak checkpoint and whether the run kept it.
func peakSentence(run *Run, pk Peak) string {
	s := fmt.Sprintf("Peak: step %d, mean accuracy %.4f (the best validation; docs/algorithm.md §8.1);", pk.Step, pk.MeanAcc)
	switch {
	case run.Dir == "":
		return s + " no run folder to look for its checkpoint in."
	case pk.Exists:
		return s + " its checkpoint is " + pk.Checkpoint + "."
	}
	return s + " no checkpoint " + pk.Checkpoint + " (not saved at that step, or pruned)."
}

// BuildCompare makes the overlay report of several runs. Run names must be
// distinct (they label the lines); duplicates get their folder's parent
// prepended.
func BuildCompare(runs []*Run) (*Report, error) {
	if len(runs) == 0 {
		return nil, fmt.Errorf("report: compare needs at least one run")
	}
	seen := map[string]int{}
	for _, r := range runs {
		seen[r.Name]++
	}
	for _, r := range runs {
		if seen[r.Name] > 1 {
			src := r.Dir
			if src == "" {
				src = r.MetricsPath
			}
			r.Name = filepath.ToSlash(filepath.Join(filepath.Base(filepath.Dir(filepath.Clean(src))), r.Name))
		}
	}
	names := map[string]bool{}
	for _, r := range runs {
		if names[r.Name] {
			return nil, fmt.Errorf("report: two runs are both named %q (HINT: compare runs from different folders)", r.Name)
		}
		names[r.Name] = true
	}
	rep := &Report{Title: "gdrotrain comparison", Runs: runs, Compare: true}
	rep.Figures, rep.Skipped = compareFigures(runs)
	return rep, nil
}

// Write renders every figure into dir (created if needed) as PNG and SVG
// and writes index.html; it returns the paths written.
func (r *Report) Write(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	seen := map[string]bool{}
	var files []string
	for _, f := range r.Figures {
		if seen[f.Name] {
			return nil, fmt.Errorf("report: two figures named %q (bug)", f.Name)
		}
		seen[f.Name] = true
		if err := f.Write(dir); err != nil {
			return files, fmt.Errorf("report %s: %w", dir, err)
		}
		png, svg := f.Files()
		files = append(files, filepath.Join(dir, png), filepath.Join(dir, svg))
	}
	index := filepath.Join(dir, "index.html")
	if err := os.WriteFile(index, []byte(r.HTML()), 0o644); err != nil {
		return files, fmt.Errorf("report: %w", err)
	}
	return append(files, index), nil
}
