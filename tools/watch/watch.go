// Package watch is `gdrotrain watch RUN_DIR`: a terminal view of a running
// or finished run, read from its run folder alone (metrics.jsonl,
// validation.jsonl, config.yaml), so it works from a login node over SSH
// while the job runs elsewhere and writes to a shared file system. On a
// terminal it redraws one frame per poll (plain ANSI: cursor home, clear to
// end of line); elsewhere (a pipe, a Slurm log) it prints one line per new
// step and per validation. It never writes into the run folder.
package watch

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Options say what to watch and how to show it.
type Options struct {
	Dir string    // the run folder
	Out io.Writer // where frames or lines go
	// TTY redraws frames on Out (a terminal); otherwise plain lines.
	TTY bool
	// Size reports the terminal's columns and rows (nil or an error: 100×40).
	Size func() (int, int, error)
	// Interval between polls of the run folder (0: 1 s).
	Interval time.Duration
	// Once shows the run as it is now — one frame, or the lines so far —
	// and returns.
	Once bool
	// Now is the clock (nil: time.Now), for tests.
	Now func() time.Time
}

// kept are the keys of each metrics line the view keeps for its
// sparklines and estimates (the newest line is kept whole).
var kept = []string{"step", "reward_mean", "acc_mean", "kl", "grad_norm", "gen_tokens_per_s", "time_step_s",
	"bin_share", "bin_weight", "bin_n_mean"}

// state is what the view knows of the run.
type state struct {
	steps    []map[string]any // the metrics lines read, oldest first, with the kept keys
	newest   map[string]any   // the last metrics line, whole
	val      map[string]any   // the last validation line
	total    int              // train.steps
	method   string           // train.method
	hasVal   bool             // validation.files is set
	name     string
	updated  time.Time       // metrics.jsonl's last change
	resets   int             // times the metrics file was rewritten (a resume)
	printed  map[string]bool // the plain view's lines already printed
	finished bool
	// wait says what the view waits for while no step is read;
	// waitShown is the last such line the plain view printed.
	wait, waitShown string
}

// waiting is the line shown while a run folder holds no step yet: what is
// missing and what that usually means, so that a watch started before the
// run (or on the wrong folder) does not wait without a word.
func waiting(dir string, metrics, config bool) string {
	m := filepath.Join(dir, "metrics.jsonl")
	switch {
	case !metrics && !config:
		return fmt.Sprintf("waiting for %s: no metrics.jsonl or config.yaml yet (the run has not started here; "+
			"is this the run's folder, run.out_dir/run.name?); Ctrl-C to stop", m)
	case !metrics:
		return fmt.Sprintf("waiting for the first step: %s does not exist yet (the run is starting: loading the model, "+
			"generating the first rollouts); Ctrl-C to stop", m)
	}
	return fmt.Sprintf("waiting for the first step in %s (the file has no complete line yet); Ctrl-C to stop", m)
}

// runConfig is the part of config.yaml the view reads.
type runConfig struct {
	Run struct {
		Name string `yaml:"name"`
	} `yaml:"run"`
	Train struct {
		Method string `yaml:"method"`
		Steps  int    `yaml:"steps"`
	} `yaml:"train"`
	Validation struct {
		Files []string `yaml:"files"`
	} `yaml:"validation"`
}

// Run shows the run until it finishes (its last step and, when it
// validates, that step's validation are written), until ctx is cancelled
// (Ctrl-C: a nil error), or once with Options.Once.
func Run(ctx context.Context, o Options) error {
	if st, err := os.Stat(o.Dir); err != nil {
		return fmt.Errorf("watch: %w", err)
	} else if !st.IsDir() {
		return fmt.Errorf("watch: %s is not a run folder", o.Dir)
	}
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	met := &follower{path: filepath.Join(o.Dir, "metrics.jsonl")}
	val := &follower{path: filepath.Join(o.Dir, "validation.jsonl")}
	s := &state{name: filepath.Base(filepath.Clean(o.Dir))}
	var cfgTime time.Time
	if o.TTY {
		fmt.Fprint(o.Out, "\x1b[?25l\x1b[2J") // hide the cursor, clear the screen
		defer fmt.Fprint(o.Out, "\x1b[?25h\n")
	}
	tick := time.NewTicker(o.Interval)
	defer tick.Stop()
	for {
		if info, err := os.Stat(filepath.Join(o.Dir, "config.yaml")); err == nil && !info.ModTime().Equal(cfgTime) {
			cfgTime = info.ModTime()
			s.readConfig(filepath.Join(o.Dir, "config.yaml"))
		}
		lines, reset, err := met.poll()
		if err != nil {
			return fmt.Errorf("watch: %w", err)
		}
		if reset {
			s.steps, s.newest, s.resets = nil, nil, s.resets+1
			if !o.TTY {
				fmt.Fprintln(o.Out, "metrics.jsonl was rewritten (the run resumed from a checkpoint); reading it again")
			}
		}
		vals, _, err := val.poll()
		if err != nil {
			return fmt.Errorf("watch: %w", err)
		}
		s.updated = met.modTime()
		s.add(lines)
		if len(s.steps) == 0 {
			s.wait = waiting(o.Dir, !s.updated.IsZero(), !cfgTime.IsZero())
			if !o.TTY && s.wait != s.waitShown {
				// Once per change (no folder content → config → an empty
				// metrics file), so a batch log says what it waits for.
				fmt.Fprintln(o.Out, s.wait)
				s.waitShown = s.wait
			}
		}
		if !o.TTY {
			s.printLines(o.Out, lines, vals)
		}
		if len(vals) > 0 {
			s.val = vals[len(vals)-1]
		}
		s.finished = s.done()
		if o.TTY {
			w, h := 100, 40
			if o.Size != nil {
				if cw, ch, err := o.Size(); err == nil && cw > 0 && ch > 0 {
					w, h = cw, ch
				}
			}
			draw(o.Out, s.frame(w, o.Now()), w, h)
		}
		if o.Once || s.finished {
			if s.finished && !o.TTY {
				fmt.Fprintf(o.Out, "run finished: step %d of %d\n", s.last(), s.total)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return nil // Ctrl-C (or the caller's deadline): a normal end
		case <-tick.C:
		}
	}
}

func (s *state) readConfig(path string) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return
	}
	var c runConfig
	if yaml.Unmarshal(raw, &c) != nil {
		return
	}
	s.total, s.method, s.hasVal = c.Train.Steps, c.Train.Method, len(c.Validation.Files) > 0
	if c.Run.Name != "" {
		s.name = c.Run.Name
	}
}

func (s *state) add(lines []map[string]any) {
	for _, m := range lines {
		small := make(map[string]any, len(kept))
		for _, k := range kept {
			if v, ok := m[k]; ok {
				small[k] = v
			}
		}
		s.steps = append(s.steps, small)
		s.newest = m
	}
}

// last is the newest step read (0: none).
func (s *state) last() int {
	if len(s.steps) == 0 {
		return 0
	}
	return int(num(s.steps[len(s.steps)-1], "step"))
}

// done: the last step is written and, when the run validates, so is that
// step's validation (the trainer validates after the last step).
func (s *state) done() bool {
	if s.total == 0 || s.last() < s.total {
		return false
	}
	return !s.hasVal || (s.val != nil && int(num(s.val, "step")) >= s.total)
}

// eta estimates the time to the last step from the mean step time of the
// last 20 steps (validations not counted).
func (s *state) eta() (time.Duration, bool) {
	if s.total == 0 || len(s.steps) == 0 {
		return 0, false
	}
	k := min(len(s.steps), 20)
	var sum float64
	for _, m := range s.steps[len(s.steps)-k:] {
		sum += num(m, "time_step_s")
	}
	left := s.total - s.last()
	if left <= 0 {
		return 0, true
	}
	return time.Duration(sum / float64(k) * float64(left) * float64(time.Second)), true
}

// num reads a number from a JSON object (NaN when absent).
func num(m map[string]any, key string) float64 {
	if x, ok := m[key].(float64); ok {
		return x
	}
	return math.NaN()
}

// series is key's values over the steps read (NaN where absent).
func (s *state) series(key string) []float64 {
	out := make([]float64, len(s.steps))
	for i, m := range s.steps {
		out[i] = num(m, key)
	}
	return out
}

// binSeries is element b of the per-bin list key over the steps; NaN
// where the bin had no prompts (its weight and rollouts mean nothing
// there), except for bin_share itself.
func (s *state) binSeries(key string, b int) []float64 {
	out := make([]float64, len(s.steps))
	for i, m := range s.steps {
		out[i] = elem(m, key, b)
		if key != "bin_share" && elem(m, "bin_share", b) == 0 {
			out[i] = math.NaN()
		}
	}
	return out
}

// elem is element b of the list key of m (NaN when absent).
func elem(m map[string]any, key string, b int) float64 {
	if l, ok := m[key].([]any); ok && b < len(l) {
		if x, ok := l[b].(float64); ok {
			return x
		}
	}
	return math.NaN()
}

// stepLine is the one-line summary of a metrics line, as the trainer logs it.
func (s *state) stepLine(m map[string]any) string {
	total := "?"
	if s.total > 0 {
		total = fmt.Sprint(s.total)
	}
	return fmt.Sprintf("step %d/%s | acc %.3f reward %+.3f | len %.1f trunc %.2f | kl %.2e clip %.3f | gnorm %.3f | %.1fs (gen %.1fs, %.0f tok/s)",
		int(num(m, "step")), total, num(m, "acc_mean"), num(m, "reward_mean"), num(m, "response_len_mean"), num(m, "truncation_rate"),
		num(m, "kl"), num(m, "clip_frac"), num(m, "grad_norm"), num(m, "time_step_s"), num(m, "time_gen_s"), num(m, "gen_tokens_per_s"))
}

// valLine summarises a validation line.
func valLine(v map[string]any) string {
	n := int(num(v, "n"))
	line := fmt.Sprintf("validation step %d: mean@%d %.3f, pooled pass@%d %.3f", int(num(v, "step")), n, num(v, "mean_acc"), n, num(v, "pooled_pass_at_n"))
	if w, ok := v["worst_group"].(string); ok && w != "" {
		line += fmt.Sprintf(", worst %s %.3f", w, num(v, "worst_group_acc"))
	}
	if b, ok := v["benchmarks"].(map[string]any); ok {
		var parts []string
		for _, name := range sortedKeys(b) {
			if r, ok := b[name].(map[string]any); ok {
				parts = append(parts, fmt.Sprintf("%s %.3f", name, num(r, "mean_acc")))
			}
		}
		if len(parts) > 0 {
			line += " (" + strings.Join(parts, ", ") + ")"
		}
	}
	return line
}

// printLines is the plain view: one line per new step and validation, in
// step order (a validation after its step's line). A line printed before
// is not printed again, so after a resume (metrics.jsonl read again from
// its start) only the steps the resumed run redoes are printed.
func (s *state) printLines(w io.Writer, lines, vals []map[string]any) {
	if s.printed == nil {
		s.printed = map[string]bool{}
	}
	out := func(line, suffix string) {
		if !s.printed[line] {
			s.printed[line] = true
			fmt.Fprintln(w, line+suffix)
		}
	}
	for i, m := range lines {
		for len(vals) > 0 && num(vals[0], "step") < num(m, "step") {
			out(valLine(vals[0]), "")
			vals = vals[1:]
		}
		suffix := ""
		if d, ok := s.eta(); ok && i == len(lines)-1 && s.last() < s.total {
			suffix = " | eta " + dur(d)
		}
		out(s.stepLine(m), suffix)
	}
	for _, v := range vals {
		out(valLine(v), "")
	}
}
