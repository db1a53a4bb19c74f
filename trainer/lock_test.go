package trainer

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

const lockChildEnv = "GDROTRAIN_LOCK_CHILD_DIR"

// TestLockChild is the child process of TestRunFolderLock: it takes the
// lock of the folder the environment names, says so, and holds it until
// its stdin closes (or it is killed).
func TestLockChild(t *testing.T) {
	dir := os.Getenv(lockChildEnv)
	if dir == "" {
		t.Skip("child process of TestRunFolderLock")
	}
	l, err := lockRun(dir, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("locked")
	io.Copy(io.Discard, os.Stdin)
	l.Close()
}

// TestRunFolderLock: while another process (this test binary re-executed)
// holds a run folder, a new run, a resume and even --overwrite are refused,
// naming that process's PID and host, and nothing in the folder is touched;
// once it is killed (kill -9: its lock file stays behind), a start takes
// the stale lock over with a log line, and a clean end removes the file.
// Before the lock, --overwrite cleared the files of the live run.
func TestRunFolderLock(t *testing.T) {
	cfg, _ := fixture(t)
	cfg.Train.Steps = 1
	dir := cfg.RunDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	metrics := filepath.Join(dir, "metrics.jsonl")
	os.WriteFile(metrics, []byte(`{"step":1}`+"\n"), 0o644) // the other run's

	child := exec.Command(os.Args[0], "-test.run=^TestLockChild$")
	child.Env = append(os.Environ(), lockChildEnv+"="+dir)
	stdin, _ := child.StdinPipe()
	stdout, _ := child.StdoutPipe()
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	sc := bufio.NewScanner(stdout)
	for sc.Scan() && sc.Text() != "locked" {
	}
	go io.Copy(io.Discard, stdout)

	want := fmt.Sprintf("is in use by PID %d on %s", child.Process.Pid, hostname())
	for _, o := range []Options{{}, {Resume: "auto"}, {Overwrite: true}} {
		_, err := Open(cfg, io.Discard, o)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("start %+v while another process holds the folder: %v, want %q", o, err, want)
		}
		if raw, _ := os.ReadFile(metrics); string(raw) != `{"step":1}`+"\n" {
			t.Fatalf("start %+v changed the other run's metrics.jsonl: %q", o, raw)
		}
	}
	// Past Preflight too (the probe and the lock race in real life).
	if _, err := lockRun(dir, t.Logf); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("lockRun while another process holds the folder: %v", err)
	}

	child.Process.Signal(syscall.SIGKILL)
	child.Wait()
	stdin.Close()
	if _, err := os.Stat(filepath.Join(dir, LockName)); err != nil {
		t.Fatalf("the killed process's lock file: %v", err)
	}
	var log bytes.Buffer
	tr, err := Open(cfg, &log, Options{Overwrite: true})
	if err != nil {
		t.Fatalf("start after the holder was killed: %v", err)
	}
	if stale := fmt.Sprintf("taking over a stale lock: %s, PID %d on %s", filepath.Join(dir, LockName), child.Process.Pid, hostname()); !strings.Contains(log.String(), stale) {
		t.Errorf("the log does not say %q:\n%s", stale, log.String())
	}
	// In the same process, a second start is refused as well.
	if _, err := lockRun(dir, t.Logf); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("PID %d", os.Getpid())) {
		t.Errorf("a second lock in the same process: %v", err)
	}
	tr.Close()
	if _, err := os.Stat(filepath.Join(dir, LockName)); !os.IsNotExist(err) {
		t.Errorf("the lock file outlives the run: %v", err)
	}
}

// TestRunFolderLockWithoutFlock: on a filesystem without flock the lock
// file's PID decides: a live process on this host, or any on another host,
// holds the folder; a dead process's lock is taken over with a log line.
func TestRunFolderLockWithoutFlock(t *testing.T) {
	flock = func(int, int) error { return syscall.ENOLCK }
	defer func() { flock = syscall.Flock }()
	done := exec.Command("true")
	if err := done.Run(); err != nil {
		t.Skip(err)
	}
	cases := []struct {
		name   string
		holder lockHolder
		want   string // in the error; "" for a take-over
	}{
		{"live here", lockHolder{PID: os.Getppid(), Host: hostname()}, fmt.Sprintf("in use by PID %d on %s", os.Getppid(), hostname())},
		{"elsewhere", lockHolder{PID: 12, Host: "other-node"}, "in use by PID 12 on other-node"},
		{"dead here", lockHolder{PID: done.Process.Pid, Host: hostname()}, ""},
		{"no holder", lockHolder{}, ""},
	}
	for _, c := range cases {
		dir := t.TempDir()
		if c.holder.PID != 0 {
			raw := fmt.Sprintf(`{"pid":%d,"host":%q}`, c.holder.PID, c.holder.Host)
			os.WriteFile(filepath.Join(dir, LockName), []byte(raw), 0o644)
		}
		var notes []string
		l, err := lockRun(dir, func(f string, a ...any) { notes = append(notes, fmt.Sprintf(f, a...)) })
		switch {
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want == "" && c.holder.PID != 0 && !strings.Contains(strings.Join(notes, "\n"), "taking over a stale lock"):
			t.Errorf("%s: taken over without a word: %q", c.name, notes)
		}
		l.Close()
	}
}
