package watch

// Following a JSONL file that another process appends to, and that a
// resumed run rewrites (truncated to the resumed step and renamed into
// place): a new file, or one shorter than what was read, is read again
// from the start.

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"time"
)

// follower reads the complete lines added to a file since the last poll.
type follower struct {
	path    string
	off     int64
	info    os.FileInfo // the file last read
	pending []byte      // a line not yet ended
}

// poll returns the new complete lines as JSON objects; reset is true when
// the file was replaced or shortened, so what was read before is void.
// A missing file is no lines. Lines that do not parse are skipped (a run
// never writes one; a reader must not stop on it).
func (f *follower) poll() (lines []map[string]any, reset bool, err error) {
	info, err := os.Stat(f.path)
	if os.IsNotExist(err) {
		if f.info != nil {
			f.off, f.info, f.pending, reset = 0, nil, nil, true
		}
		return nil, reset, nil
	}
	if err != nil {
		return nil, false, err
	}
	if f.info != nil && (!os.SameFile(f.info, info) || info.Size() < f.off) {
		f.off, f.pending, reset = 0, nil, true
	}
	f.info = info
	if info.Size() == f.off {
		return nil, reset, nil
	}
	fh, err := os.Open(f.path)
	if err != nil {
		return nil, reset, err
	}
	defer fh.Close()
	if _, err := fh.Seek(f.off, io.SeekStart); err != nil {
		return nil, reset, err
	}
	raw, err := io.ReadAll(fh)
	if err != nil {
		return nil, reset, err
	}
	f.off += int64(len(raw))
	f.pending = append(f.pending, raw...)
	for {
		i := bytes.IndexByte(f.pending, '\n')
		if i < 0 {
			break
		}
		var m map[string]any
		if json.Unmarshal(f.pending[:i], &m) == nil {
			lines = append(lines, m)
		}
		f.pending = f.pending[i+1:]
	}
	return lines, reset, nil
}

// modTime is when the file last changed (zero before the first poll).
func (f *follower) modTime() time.Time {
	if f.info == nil {
		return time.Time{}
	}
	return f.info.ModTime()
}
