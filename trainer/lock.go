package trainer

// The run folder's lock. Two processes writing one run folder mix their
// checkpoints and metrics (a second start with --overwrite clears the files
// of a run that goes on writing; two plain starts race on the checkpoint
// folders), and Slurm may restart a job that still runs somewhere. So the
// process that writes the run folder (rank 0; the other ranks write only
// their files of a checkpoint rank 0 began) holds an exclusive flock on
// RUN/run.lock, which names its PID and host, for the whole run:
//   - a second process is refused, naming the holder; --overwrite never
//     takes a live lock;
//   - the kernel drops the flock when its holder dies (kill -9, a crash), so
//     a lock file left behind is stale and taken over with a log line;
//   - a clean end removes the lock file.
// On a filesystem without flock the file alone decides: a live PID on this
// host, or any PID on another host, refuses; a dead PID on this host is taken
// over.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// LockName is the run folder's lock file.
const LockName = "run.lock"

// lockHolder is what the lock file says.
type lockHolder struct {
	PID     int    `json:"pid"`
	Host    string `json:"host"`
	Started string `json:"started,omitempty"`
}

func (h lockHolder) String() string { return fmt.Sprintf("PID %d on %s", h.PID, h.Host) }

// runLock is a held lock; Release ends it.
type runLock struct {
	f    *os.File
	path string
}

// flock is syscall.Flock; a test replaces it to play a filesystem without
// flock.
var flock = syscall.Flock

// lockRun takes dir's lock (dir exists), logging a take-over of a stale
// one, or says which process holds it.
func lockRun(dir string, logf func(string, ...any)) (*runLock, error) {
	path := filepath.Join(dir, LockName)
	me := lockHolder{PID: os.Getpid(), Host: hostname(), Started: time.Now().UTC().Format(time.RFC3339)}
	for range 3 { // another process may remove the file between our open and flock: retry
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("run folder lock: %w", err)
		}
		prev, _ := readHolder(f)
		switch err := flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); {
		case errors.Is(err, syscall.EWOULDBLOCK):
			f.Close()
			return nil, inUse(dir, path, prev)
		case err != nil:
			// No flock here (some network filesystems): the file alone.
			if err := pidOnly(dir, path, prev, me, logf); err != nil {
				f.Close()
				return nil, err
			}
			logf("run folder %s: this filesystem does not lock files (flock: %v): %s is checked by PID only", dir, err, LockName)
		default:
			if !samePath(f, path) {
				f.Close() // its holder released and removed it meanwhile
				continue
			}
			if prev.PID != 0 && (prev.PID != me.PID || prev.Host != me.Host) {
				logf("run folder %s: taking over a stale lock: %s, %s, ended without releasing it", dir, path, prev)
			}
		}
		if err := writeHolder(f, me); err != nil {
			f.Close()
			return nil, fmt.Errorf("run folder lock %s: %w", path, err)
		}
		return &runLock{f: f, path: path}, nil
	}
	return nil, fmt.Errorf("run folder %s: could not take %s (removed each time by another process)", dir, path)
}

// Close removes the lock file and releases the lock (removed while held, so
// no process locks a file about to vanish; one that opened it before
// rechecks the path after its flock).
func (l *runLock) Close() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := os.Remove(l.path)
	if errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	err = errors.Join(err, l.f.Close())
	l.f = nil
	return err
}

func inUse(dir, path string, h lockHolder) error {
	who := "another process"
	if h.PID != 0 {
		who = h.String()
	}
	return fmt.Errorf("run folder %s is in use by %s (lock %s): two processes would mix their checkpoints and metrics. "+
		"HINT: wait for that run to end or stop it (--overwrite does not take a live lock), or set another run.name", dir, who, path)
}

// pidOnly decides without flock: prev, a live process on this host or a
// process on another host, holds the folder; a dead one's lock is stale.
func pidOnly(dir, path string, prev, me lockHolder, logf func(string, ...any)) error {
	switch {
	case prev.PID == 0 || (prev.PID == me.PID && prev.Host == me.Host):
		return nil
	case prev.Host != me.Host:
		return fmt.Errorf("%w (this filesystem has no flock, so whether it still runs cannot be told from %s: if it has ended, delete %s)", inUse(dir, path, prev), me.Host, path)
	case alive(prev.PID):
		return inUse(dir, path, prev)
	}
	logf("run folder %s: taking over a stale lock: %s, %s, has ended", dir, path, prev)
	return nil
}

// alive reports whether process pid exists on this host.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "unknown-host"
	}
	return h
}

func readHolder(f *os.File) (lockHolder, error) {
	var h lockHolder
	raw := make([]byte, 4096)
	n, err := f.ReadAt(raw, 0)
	if n == 0 {
		return h, err
	}
	return h, json.Unmarshal(raw[:n], &h)
}

func writeHolder(f *os.File, h lockHolder) error {
	raw, _ := json.Marshal(h)
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt(append(raw, '\n'), 0); err != nil {
		return err
	}
	return f.Sync()
}

// samePath reports whether f is still the file at path.
func samePath(f *os.File, path string) bool {
	a, err1 := f.Stat()
	b, err2 := os.Stat(path)
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

// probeLock says, without taking it, whether dir's lock is held by a live
// process (Preflight: before a GPU self-test or a model load).
func probeLock(dir string) error {
	path := filepath.Join(dir, LockName)
	f, err := os.Open(path)
	if err != nil {
		return nil // no lock file: free (or unreadable: lockRun says)
	}
	defer f.Close()
	h, _ := readHolder(f)
	if err := flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); errors.Is(err, syscall.EWOULDBLOCK) {
		return inUse(dir, path, h)
	} else if err == nil {
		flock(int(f.Fd()), syscall.LOCK_UN)
	}
	return nil
}
