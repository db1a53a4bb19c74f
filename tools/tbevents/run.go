package tbevents

// Run mirrors a training run's per-step logs into event files in RUN/tb:
// the trainer hands it the writers of metrics.jsonl and validation.jsonl
// (Tee) and every line written there is written here too, so the event
// files hold exactly what the JSONL files hold. On a resume at step k the
// JSONL files keep their lines of steps ≤ k; OpenRun does the same to the
// event files (Truncate) and opens a new file that begins with a
// SessionLog START at step k+1 (TensorBoard's marker of a restart) and the
// resolved config as text. A failure to write an event is logged once and
// ends the mirror; the run and its JSONL files go on.

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/gdrotrain/gdrotrain/tools/tbevents/tbpb"
)

// Dir is the event files' folder inside a run folder.
const Dir = "tb"

// Kind says which JSONL file a Tee mirrors.
type Kind int

// The mirrored files.
const (
	Metrics    Kind = iota // metrics.jsonl (MetricsSummary)
	Validation             // validation.jsonl (ValidationSummary)
)

// Run is an open mirror.
type Run struct {
	mu     sync.Mutex
	w      *Writer
	logf   func(string, ...any)
	now    func() time.Time
	failed bool
}

// OpenRun prepares dir (the run's tb/ folder) for a run that continues
// after step keep (-1: a run from step 0), opens a new event file and
// writes config, the resolved config's YAML, as text at step keep+1. logf
// receives what Truncate changed and a write failure.
func OpenRun(dir string, keep int, config []byte, logf func(string, ...any)) (*Run, error) {
	note, err := Truncate(dir, int64(keep))
	if err != nil {
		return nil, err
	}
	if note != "" {
		logf("tensorboard: %s: %s (the resumed run writes those steps again)", dir, note)
	}
	r := &Run{logf: logf, now: time.Now}
	if r.w, err = Create(dir, r.now()); err != nil {
		return nil, err
	}
	first := int64(keep + 1)
	wall := wallTime(r.now())
	if keep >= 0 {
		if err := r.w.Write(&tbpb.Event{WallTime: wall, Step: first,
			What: &tbpb.Event_SessionLog{SessionLog: &tbpb.SessionLog{Status: tbpb.SessionLog_START,
				Msg: fmt.Sprintf("resumed after step %d", keep)}}}); err != nil {
			r.w.Close()
			return nil, err
		}
	}
	text := "```yaml\n" + string(bytes.TrimRight(config, "\n")) + "\n```"
	if err := r.w.Write(&tbpb.Event{WallTime: wall, Step: first,
		What: &tbpb.Event_Summary{Summary: TextSummary("config", text)}}); err != nil {
		r.w.Close()
		return nil, err
	}
	if err := r.w.Flush(); err != nil {
		r.w.Close()
		return nil, err
	}
	logf("tensorboard: writing %s", r.w.Path())
	return r, nil
}

// Tee returns a writer that writes to w and mirrors each complete line
// (one JSON object) into the event file.
func (r *Run) Tee(w io.Writer, kind Kind) io.Writer {
	return &tee{w: w, r: r, kind: kind}
}

// Close flushes and closes the event file.
func (r *Run) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.w.Close()
}

// line writes one JSON line's summary as an event and flushes it, so a
// TensorBoard reading the folder sees each step as it ends.
func (r *Run) line(kind Kind, line []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failed {
		return
	}
	conv := MetricsSummary
	if kind == Validation {
		conv = ValidationSummary
	}
	step, s, err := conv(line)
	if err == nil {
		err = r.w.Write(&tbpb.Event{WallTime: wallTime(r.now()), Step: step, What: &tbpb.Event_Summary{Summary: s}})
	}
	if err == nil {
		err = r.w.Flush()
	}
	if err != nil {
		r.failed = true
		r.logf("tensorboard: %v; no more events are written to %s (metrics.jsonl and validation.jsonl go on)", err, r.w.Path())
	}
}

type tee struct {
	w       io.Writer
	r       *Run
	kind    Kind
	pending []byte // a line not yet ended
}

func (t *tee) Write(p []byte) (int, error) {
	n, err := t.w.Write(p)
	if err != nil {
		return n, err
	}
	t.pending = append(t.pending, p...)
	for {
		i := bytes.IndexByte(t.pending, '\n')
		if i < 0 {
			break
		}
		if line := bytes.TrimSpace(t.pending[:i]); len(line) > 0 {
			t.r.line(t.kind, line)
		}
		t.pending = t.pending[i+1:]
	}
	return n, nil
}
