package report

// plot.go: `gdrotrain plot` as one call (Plot): a run's report, or several
// runs overlaid, written as figures and index.html.

import (
	"fmt"
	"io"
	"path/filepath"
)

// PlotOptions are plot's settings, the flags of `gdrotrain plot`.
type PlotOptions struct {
	// Run is a run folder or a gdro-sim --out file (--run).
	Run string
	// Compare are runs to overlay (--compare); the command's arguments
	// (Args) follow it, as --compare takes the runs after it.
	Compare, Args []string
	// Out is the output folder (--out; "" with Run: RUN/plots, or
	// NAME-plots beside a metrics file).
	Out string
	// Stdout gets what was written and the key measurements.
	Stdout io.Writer
}

// Plot writes the report of Run, or the comparison of Compare.
func Plot(o PlotOptions) error {
	// --compare takes the runs that follow it: the first as the flag's
	// value, the rest as arguments.
	compare := o.Compare
	if len(compare) > 0 {
		compare = append(compare[:len(compare):len(compare)], o.Args...)
	} else if len(o.Args) > 0 {
		return fmt.Errorf("plot: unexpected arguments %v (HINT: --run DIR, or --compare RUN_A RUN_B …)", o.Args)
	}
	switch {
	case o.Run != "" && len(compare) > 0:
		return fmt.Errorf("plot: give --run or --compare, not both")
	case o.Run != "":
		run, err := LoadRun(o.Run)
		if err != nil {
			return err
		}
		out := o.Out
		if out == "" {
			out = filepath.Join(o.Run, "plots")
			if run.Dir == "" { // a metrics file: plots beside it
				out = filepath.Join(filepath.Dir(o.Run), run.Name+"-plots")
			}
		}
		return Build(run).print(o.Stdout, out)
	case len(compare) > 0:
		if len(compare) < 2 {
			return fmt.Errorf("plot: --compare needs at least two runs, got %v", compare)
		}
		if o.Out == "" {
			return fmt.Errorf("plot: --compare needs --out DIR")
		}
		runs := make([]*Run, len(compare))
		for i, c := range compare {
			r, err := LoadRun(c)
			if err != nil {
				return err
			}
			runs[i] = r
		}
		rep, err := BuildCompare(runs)
		if err != nil {
			return err
		}
		return rep.print(o.Stdout, o.Out)
	}
	return fmt.Errorf("plot: nothing to plot (HINT: --run DIR, or --compare RUN_A RUN_B … --out DIR)")
}

// print writes the report into out and says so on w, with the key
// measurements.
func (r *Report) print(w io.Writer, out string) error {
	files, err := r.Write(out)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "plot: %d figures (PNG + SVG) in %s", len(r.Figures), out)
	if n := len(r.Skipped); n > 0 {
		fmt.Fprintf(w, ", %d skipped (no data; see index.html)", n)
	}
	fmt.Fprintf(w, "\n  open %s\n", files[len(files)-1])
	for _, m := range r.Measures {
		fmt.Fprintf(w, "  %s: %s\n", m.Name, m.Value)
	}
	return nil
}
