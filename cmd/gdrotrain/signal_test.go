package main

// A signal at any moment of `train` or `demo` ends in exit status 3 with the
// last complete state saved, so the Slurm script requeues the job: before
// the fix, a signal during validation (before training, or at a validation
// step) or during the demo's warm-up exited 1 with "context canceled".

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gdrotrain/gdrotrain/checkpoint"
	"github.com/gdrotrain/gdrotrain/internal/testinfra/testfix"
	"github.com/gdrotrain/gdrotrain/trainer"
)

// TestMain lets a test re-execute this binary as gdrotrain itself.
func TestMain(m *testing.M) {
	if os.Getenv("GDROTRAIN_TEST_MAIN") == "1" {
		os.Args = append([]string{"gdrotrain"}, strings.Split(os.Getenv("GDROTRAIN_TEST_ARGS"), "\n")...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// cancelOn is a log writer that cancels a context (as the first signal does)
// when a line containing marker is written.
type cancelOn struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	marker string
	cancel context.CancelFunc
}

func (w *cancelOn) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.marker != "" && strings.Contains(w.buf.String(), w.marker) {
		w.cancel()
	}
	return len(p), nil
}

// runCancelled runs the root command and cancels its context when marker is
// logged; it returns the log and the command's error.
func runCancelled(t *testing.T, marker string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &cancelOn{marker: marker, cancel: cancel}
	root := newRootCmd()
	root.SetOut(w)
	root.SetErr(w)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return w.buf.String(), err
}

func taskArgs(task testfix.Task, extra ...string) []string {
	var args []string
	for _, s := range append(task.Sets(), extra...) {
		args = append(args, "--set", s)
	}
	return args
}

func TestTrainSignalDuringValidation(t *testing.T) {
	task := testfix.TinyTask(t)
	args := append([]string{"train", "--config", "demo"}, taskArgs(task, "validation.before_training=true", "checkpoint.every=1", "train.log_every=1")...)
	// While the model loads (the validation before training then sees the
	// signal): nothing to checkpoint; the requeued job starts afresh.
	out, err := runCancelled(t, "policy ", args...)
	if !errors.Is(err, trainer.ErrStopped) {
		t.Fatalf("signal while loading: %v, want ErrStopped (exit 3)\n%s", err, out)
	}
	// During the validation before training: likewise.
	out, err = runCancelled(t, "validating at step 0", append(args, "--resume", "auto")...)
	if !errors.Is(err, trainer.ErrStopped) {
		t.Fatalf("signal during the validation before training: %v, want ErrStopped (exit 3)\n%s", err, out)
	}
	if !strings.Contains(out, "nothing to checkpoint yet") {
		t.Errorf("log does not say why no checkpoint was written:\n%s", out)
	}
	// After step 1, before its validation (a checkpoint step too).
	out, err = runCancelled(t, "step 1/", append(args, "--resume", "auto")...)
	if !errors.Is(err, trainer.ErrStopped) {
		t.Fatalf("signal during the validation at step 1: %v, want ErrStopped\n%s", err, out)
	}
	if !strings.Contains(out, "checkpoints/step_00000001") {
		t.Errorf("no checkpoint of step 1 written:\n%s", out)
	}
	// The requeued job validates step 1 first, then finishes.
	out, err = runCancelled(t, "", append(args, "--resume", "auto")...)
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	if !strings.Contains(out, "resumed from") || !strings.Contains(out, "validation step 1:") {
		t.Errorf("the resumed run did not redo step 1's validation:\n%s", out)
	}
}

func TestDemoSignalDuringWarmup(t *testing.T) {
	out := filepath.Join(t.TempDir(), "demo")
	args := []string{"demo", "--out", out, "--train-per-group", "2", "--val-per-group", "1", "--warmup-per-group", "2", "--warmup-epochs", "1",
		"--set", "train.steps=1", "--set", "train.prompts_per_step=4", "--set", "train.mini_batch_prompts=4", "--set", "validation.n=1"}
	log, err := runCancelled(t, "warm-up: ", args...)
	if !errors.Is(err, trainer.ErrStopped) || !strings.Contains(err.Error(), "--resume") {
		t.Fatalf("signal during the warm-up: %v, want ErrStopped (exit 3) with a --resume hint\n%s", err, log)
	}
	// --resume warms up again (nothing was kept) and finishes; a second
	// --resume reuses the finished warm-up.
	if log, err = runCancelled(t, "", append(args, "--resume")...); err != nil {
		t.Fatalf("demo --resume: %v\n%s", err, log)
	}
	if !strings.Contains(log, "warming up again") {
		t.Errorf("--resume after an interrupted warm-up:\n%s", log)
	}
	if log, err = runCancelled(t, "", append(args, "--resume")...); err != nil || !strings.Contains(log, "reusing the finished warm-up") {
		t.Fatalf("second demo --resume: %v\n%s", err, log)
	}
}

// TestHandleSignals: the first signal stops, named as kill(1) names it (a
// stopped bench's report says which); later ones never cut a checkpoint
// short, and only a second Ctrl-C outside one exits at once.
func TestHandleSignals(t *testing.T) {
	if a, b := signalName(syscall.SIGTERM), signalName(os.Interrupt); a != "SIGTERM" || b != "SIGINT" {
		t.Errorf("signal names %q, %q; want SIGTERM, SIGINT", a, b)
	}
	for _, c := range []struct {
		name    string
		sigs    []os.Signal
		writing bool // a checkpoint is being written when the later signals land
		exit    int  // -1: none
		log     string
	}{
		{"SIGHUP stops like SIGTERM", []os.Signal{syscall.SIGHUP}, false, -1, ""},
		{"USR1 then TERM mid-checkpoint", []os.Signal{syscall.SIGUSR1, syscall.SIGTERM}, true, -1, "terminated while a checkpoint is being written: it is finished first"},
		{"USR1 then TERM before the checkpoint", []os.Signal{syscall.SIGUSR1, syscall.SIGTERM}, false, -1, "terminated: already stopping"},
		{"TERM twice", []os.Signal{syscall.SIGTERM, syscall.SIGTERM, syscall.SIGHUP}, false, -1, "hangup: already stopping"},
		{"Ctrl-C twice", []os.Signal{os.Interrupt, os.Interrupt}, false, 130, "second interrupt: exiting now"},
		{"Ctrl-C twice mid-checkpoint", []os.Signal{os.Interrupt, os.Interrupt}, true, -1, "interrupt while a checkpoint is being written"},
	} {
		sigs := make(chan os.Signal, len(c.sigs))
		for _, s := range c.sigs {
			sigs <- s
		}
		close(sigs)
		var log bytes.Buffer
		stops, exit, stoppedBy := 0, -1, ""
		stop := func(sig os.Signal) { stops, stoppedBy = stops+1, signalName(sig) }
		handleSignals(sigs, stop, &log, func() bool { return c.writing }, func(code int) { exit = code })
		if want := signalName(c.sigs[0]); stoppedBy != want {
			t.Errorf("%s: stopped by %q, want %q (the first signal)", c.name, stoppedBy, want)
		}
		if stops != 1 || exit != c.exit || !strings.Contains(log.String(), c.log) || (c.log == "" && log.Len() > 0) {
			t.Errorf("%s: %d stops, exit %d, log %q; want 1 stop, exit %d, log with %q", c.name, stops, exit, log.String(), c.exit, c.log)
		}
	}
}

// TestStopSignalsReal sends real signals to gdrotrain (this test binary
// re-executed as main) during a run: SIGHUP (a closed SSH session) after a
// step checkpoints and exits 3 like SIGTERM; SIGUSR1 then SIGTERM as the
// stop's checkpoint begins (Slurm's warning, then its TERM at the time
// limit) still finishes that checkpoint and exits 3; each run resumes to
// the end. Before: 129 and 143, with no checkpoint.
func TestStopSignalsReal(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	type send struct {
		marker string
		sig    syscall.Signal
	}
	for _, c := range []struct {
		name  string
		nohup bool // started under nohup: SIGHUP ignored, the run goes on
		sends []send
	}{
		{"SIGHUP", false, []send{{"step 2/", syscall.SIGHUP}}},
		{"SIGUSR1 then SIGTERM", false, []send{{"step 2/", syscall.SIGUSR1}, {"stopping at step", syscall.SIGTERM}}},
		{"SIGHUP under nohup", true, []send{{"step 2/", syscall.SIGHUP}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			task := testfix.TinyTask(t)
			args := append([]string{"train", "--config", "demo", "--resume", "auto"}, taskArgs(task, "validation.every=0",
				"train.steps=5", "checkpoint.every=4", "train.log_every=1")...)
			code, log := runMain(t, c.nohup, args, func(line string, p *os.Process) {
				if len(c.sends) > 0 && strings.Contains(line, c.sends[0].marker) {
					p.Signal(c.sends[0].sig)
					c.sends = c.sends[1:]
				}
			})
			if c.nohup {
				if code != 0 || len(c.sends) > 0 || strings.Contains(log, "stopping at step") {
					t.Fatalf("under nohup, SIGHUP: exit status %d (signals left unsent: %v), want the run to go on to the end (0)\n%s", code, c.sends, log)
				}
				return
			}
			if code != exitRequeue || len(c.sends) > 0 {
				t.Fatalf("exit status %d (signals left unsent: %v), want %d\n%s", code, c.sends, exitRequeue, log)
			}
			m := regexp.MustCompile(`checkpoint: (\S+step_0000000(\d))`).FindAllStringSubmatch(log, -1)
			if len(m) == 0 {
				t.Fatalf("no checkpoint written:\n%s", log)
			}
			if _, err := checkpoint.Verify(m[len(m)-1][1]); err != nil {
				t.Fatalf("the stop's checkpoint: %v\n%s", err, log)
			}
			if code, log := runMain(t, false, args, nil); code != 0 || !strings.Contains(log, "resumed from") {
				t.Fatalf("resumed run: exit status %d\n%s", code, log)
			}
		})
	}
}

// startHangupDefault starts cmd with SIGHUP at its default disposition
// unless nohup: a child inherits an ignored signal, and the tests may
// themselves run under nohup (or a CI runner that ignores SIGHUP), where
// the child would rightly keep ignoring it. Catching SIGHUP here while the
// child starts makes exec reset it to the default in the child.
func startHangupDefault(cmd *exec.Cmd, nohup bool) error {
	if !nohup && signal.Ignored(syscall.SIGHUP) {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGHUP)
		defer signal.Stop(ch)
	}
	return cmd.Start()
}

// runMain runs gdrotrain with args in a child process (under nohup(1)
// with nohup), calls on with each line it logs, and returns its exit
// status and log.
func runMain(t *testing.T, nohup bool, args []string, on func(line string, p *os.Process)) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	if nohup {
		path, err := exec.LookPath("nohup")
		if err != nil {
			t.Skip("no nohup(1)")
		}
		cmd = exec.Command(path, os.Args[0])
	}
	cmd.Env = append(os.Environ(), "GDROTRAIN_TEST_MAIN=1", "GDROTRAIN_TEST_ARGS="+strings.Join(args, "\n"))
	stderr, _ := cmd.StderrPipe()
	if err := startHangupDefault(cmd, nohup); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if on != nil {
			on(sc.Text(), cmd.Process)
		}
	}
	io.Copy(io.Discard, stderr)
	err := cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), log.String()
		}
		return exit.ExitCode(), log.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, log.String()
}

// TestSIGTERMExitsRequeue sends a real SIGTERM to gdrotrain (this test
// binary re-executed as main) while it loads the model, before its
// validation: it must exit with status 3 whatever it is doing when the
// signal lands, and the next --resume auto must finish.
func TestSIGTERMExitsRequeue(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	task := testfix.TinyTask(t)
	args := append([]string{"train", "--config", "demo", "--resume", "auto"}, taskArgs(task, "validation.before_training=true",
		"validation.n=8", "validation.max_new_tokens=64", "validation.every=0", "train.steps=6", "checkpoint.every=3")...)
	run := func(signal bool) (int, string) {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "GDROTRAIN_TEST_MAIN=1", "GDROTRAIN_TEST_ARGS="+strings.Join(args, "\n"))
		stderr, _ := cmd.StderrPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var log strings.Builder
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if signal && !sent && strings.Contains(sc.Text(), "policy ") { // loading; validation next
				cmd.Process.Signal(syscall.SIGTERM)
				sent = true
			}
		}
		io.Copy(io.Discard, stderr)
		err := cmd.Wait()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode(), log.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, log.String()
	}
	start := time.Now()
	if code, log := run(true); code != exitRequeue {
		t.Fatalf("SIGTERM: exit status %d, want %d\n%s", code, exitRequeue, log)
	}
	if code, log := run(false); code != 0 {
		t.Fatalf("resumed run: exit status %d\n%s", code, log)
	}
	t.Logf("stopped and resumed in %v", time.Since(start))
}
