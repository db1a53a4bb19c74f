// Package tbevents writes TensorBoard event files: a run's metrics.jsonl
// and validation.jsonl lines as scalars, histograms and text under grouped
// tags (metrics.go), in the TFRecord framing TensorBoard, W&B's
// `wandb sync --sync-tensorboard` and MLflow's TensorBoard import read
// (record.go). The Event and Summary messages are Go types generated from
// TensorBoard's own .proto files, vendored unmodified under proto/
// (`go generate ./tools/tbevents`, scripts/gen_tbproto.sh); nothing here
// encodes protobuf by hand.
//
// A resumed run mirrors what metrics.jsonl does on resume (run.go): the
// event files already in the folder lose every event after the resumed
// checkpoint's step, and a new file carries on from there, so no step is in
// the stream twice. docs/tracking.md shows how a resumed run looks.
package tbevents

//go:generate bash ../../scripts/gen_tbproto.sh

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/gdrotrain/gdrotrain/tools/tbevents/tbpb"
)

// FilePrefix starts the name of every event file: TensorBoard loads the
// files of a folder whose name contains "tfevents", in name order.
const FilePrefix = "events.out.tfevents."

// fileVersion is the first event of every file (event.proto).
const fileVersion = "brain.Event:2"

// Writer appends events to one event file. Events are buffered until
// Flush, which writes them with one write call.
type Writer struct {
	f    *os.File
	buf  []byte
	path string
}

// Create opens a new event file in dir (made if missing), named
// events.out.tfevents.<unix seconds>.<hostname> as TensorFlow's writer
// names them (".1", ".2" … appended if that name is taken), and writes
// its file_version event.
func Create(dir string, now time.Time) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("tensorboard: %w", err)
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	base := fmt.Sprintf("%s%010d.%s", FilePrefix, now.Unix(), host)
	name := base
	for i := 1; ; i++ {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if os.IsExist(err) && i < 1000 {
			name = fmt.Sprintf("%s.%d", base, i)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("tensorboard: %w", err)
		}
		w := &Writer{f: f, path: f.Name()}
		if err := w.Write(&tbpb.Event{WallTime: wallTime(now), What: &tbpb.Event_FileVersion{FileVersion: fileVersion},
			SourceMetadata: &tbpb.SourceMetadata{Writer: "gdrotrain"}}); err != nil {
			f.Close()
			return nil, err
		}
		return w, w.Flush()
	}
}

// Path is the event file's path.
func (w *Writer) Path() string { return w.path }

// Write appends one event to the buffer.
func (w *Writer) Write(e *tbpb.Event) error {
	data, err := proto.Marshal(e)
	if err != nil {
		return fmt.Errorf("tensorboard: encode event: %w", err)
	}
	w.buf = AppendRecord(w.buf, data)
	return nil
}

// Flush writes the buffered events to the file.
func (w *Writer) Flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	_, err := w.f.Write(w.buf)
	w.buf = w.buf[:0]
	if err != nil {
		return fmt.Errorf("tensorboard: %w", err)
	}
	return nil
}

// Close flushes and closes the file.
func (w *Writer) Close() error {
	err := w.Flush()
	if cerr := w.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("tensorboard: %w", cerr)
	}
	return err
}

// wallTime is t in seconds since the epoch, as Event.wall_time holds it.
func wallTime(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// Files lists the event files in dir in the order TensorBoard reads them.
func Files(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() && strings.HasPrefix(e.Name(), FilePrefix) {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(out)
	return out, nil
}

// ReadFile returns the events of one event file, checking every CRC. On a
// bad or torn record it returns the events before it and the error.
func ReadFile(path string) ([]*tbpb.Event, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	recs, rerr := ReadRecords(bytes.NewReader(raw))
	events := make([]*tbpb.Event, 0, len(recs))
	for i, r := range recs {
		e := new(tbpb.Event)
		if err := proto.Unmarshal(r, e); err != nil {
			return events, fmt.Errorf("%s: record %d: %w", path, i, err)
		}
		events = append(events, e)
	}
	if rerr != nil {
		return events, fmt.Errorf("%s: %w", path, rerr)
	}
	return events, nil
}

// Truncate makes the event files in dir hold only what a run resumed at
// step keep has written: every event of a later step is dropped, as are a
// torn or corrupt tail (a writer killed mid-record) and, for keep < 0 (a
// run starting from step 0), the files themselves. A file is rewritten
// (atomically) only when it changes, and removed when nothing but its
// file_version event is left. It returns a note for the log, "" when
// nothing changed.
func Truncate(dir string, keep int64) (string, error) {
	files, err := Files(dir)
	if err != nil {
		return "", fmt.Errorf("tensorboard: %w", err)
	}
	var notes []string
	dropped, removed := 0, 0
	for _, path := range files {
		if keep < 0 {
			if err := os.Remove(path); err != nil {
				return "", fmt.Errorf("tensorboard: %w", err)
			}
			removed++
			continue
		}
		events, rerr := ReadFile(path)
		if rerr != nil {
			notes = append(notes, fmt.Sprintf("dropped a damaged tail (%v)", rerr))
		}
		var buf []byte
		kept, data := 0, 0
		for _, e := range events {
			if e.Step > keep {
				dropped++
				continue
			}
			raw, err := proto.Marshal(e)
			if err != nil {
				return "", fmt.Errorf("tensorboard: %s: %w", path, err)
			}
			buf = AppendRecord(buf, raw)
			kept++
			if e.GetFileVersion() == "" {
				data++
			}
		}
		switch {
		case data == 0:
			if err := os.Remove(path); err != nil {
				return "", fmt.Errorf("tensorboard: %w", err)
			}
			removed++
		case kept < len(events) || rerr != nil:
			if err := writeFileAtomic(path, buf); err != nil {
				return "", fmt.Errorf("tensorboard: %w", err)
			}
		}
	}
	if dropped > 0 {
		notes = append([]string{fmt.Sprintf("dropped %d events after step %d", dropped, keep)}, notes...)
	}
	if removed > 0 {
		notes = append(notes, fmt.Sprintf("removed %d event files", removed))
	}
	return strings.Join(notes, "; "), nil
}

// writeFileAtomic replaces path with data through a temporary file in the
// same folder, named so that TensorBoard does not read it (it reads every
// name containing "tfevents").
func writeFileAtomic(path string, data []byte) error {
	tmp := filepath.Join(filepath.Dir(path), ".rewrite.tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
