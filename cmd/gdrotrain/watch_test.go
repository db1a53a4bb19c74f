package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gdrotrain/gdrotrain/internal/testinfra/testfix"
)

// fakeStep is a metrics.jsonl line of a 3-bin Prompt-GDRO run.
func fakeStep(step int) string {
	w := 0.2 + 0.05*float64(step%4)
	return fmt.Sprintf(`{"step":%d,"reward_mean":%.3f,"acc_mean":%.3f,"kl":%.4f,"grad_norm":%.3f,"time_step_s":10,"time_gen_s":6,`+
		`"gen_tokens_per_s":%d,"response_len_mean":300,"clip_frac":0.01,"bin_labels":["accbin_0","accbin_1","accbin_2"],`+
		`"bin_share":[0.3,0.4,0.3],"bin_weight":[%.3f,0.4,%.3f],"bin_n_mean":[8,8,8]}`+"\n",
		step, 0.1*float64(step), 0.05*float64(step), 0.001*float64(step), 1.0/float64(step), 1000+100*step, w, 0.6-w)
}

const fakeConfig = "run:\n  name: fake\ntrain:\n  method: prompt_gdro\n  steps: 6\nvalidation:\n  files: [v.jsonl]\n"

func fakeVal(step int) string {
	return fmt.Sprintf(`{"step":%d,"n":4,"mean_acc":0.42,"pooled_pass_at_n":0.6,"worst_group":"aime","worst_group_acc":0.1,`+
		`"benchmarks":{"aime":{"mean_acc":0.1},"math500":{"mean_acc":0.55}}}`+"\n", step)
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// TestWatchPlain: off a terminal, --once prints one line per step and
// validation; a finished run (last step and its validation written) ends
// watch by itself.
func TestWatchPlain(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(fakeConfig), 0o644)
	for s := 1; s <= 3; s++ {
		appendFile(t, filepath.Join(dir, "metrics.jsonl"), fakeStep(s))
	}
	appendFile(t, filepath.Join(dir, "validation.jsonl"), fakeVal(2))
	out, err := runCmd(t, "", "watch", "--once", dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"step 1/6 | acc 0.050", "step 3/6", "| eta 30s", "validation step 2: mean@4 0.420", "math500 0.550"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b[") {
		t.Errorf("escape sequences off a terminal:\n%q", out)
	}
	for s := 4; s <= 6; s++ {
		appendFile(t, filepath.Join(dir, "metrics.jsonl"), fakeStep(s))
	}
	appendFile(t, filepath.Join(dir, "validation.jsonl"), fakeVal(6))
	done := make(chan struct{})
	go func() {
		out, err = runCmd(t, "", "watch", "--interval", "20ms", dir)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("watch did not exit on a finished run")
	}
	if err != nil || !strings.Contains(out, "run finished: step 6 of 6") {
		t.Errorf("finished run: %v\n%s", err, out)
	}
	if _, err := runCmd(t, "", "watch", filepath.Join(dir, "nothing")); err == nil {
		t.Error("a missing run folder was accepted")
	}
}

// lockedBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *lockedBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *lockedBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestWatchLiveRun: watch follows a real (tiny, CPU) training run while it
// runs, and exits when the run has written its last step and validation.
func TestWatchLiveRun(t *testing.T) {
	task := testfix.TinyTask(t)
	const steps = 4
	cfg := filepath.Join(task.Dir, "live.yaml")
	if err := os.WriteFile(cfg, []byte("run: {device: cpu, name: live}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"train", "--config", cfg, "--set", fmt.Sprintf("train.steps=%d", steps)}
	for _, s := range task.Sets() {
		if !strings.HasPrefix(s, "train.steps=") {
			args = append(args, "--set", s)
		}
	}
	run := filepath.Join(task.Dir, "live")
	if err := os.MkdirAll(run, 0o755); err != nil {
		t.Fatal(err)
	}
	var out lockedBuffer
	watched := make(chan error, 1)
	go func() {
		root := newRootCmd()
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs([]string{"watch", "--interval", "10ms", run})
		watched <- root.Execute()
	}()
	trainOut, err := runCmd(t, "", args...)
	if err != nil {
		t.Fatalf("train: %v\n%s", err, trainOut)
	}
	atEnd := out.String()
	select {
	case err := <-watched:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("watch did not exit after the run ended:\n%s", out.String())
	}
	got := out.String()
	for s := 1; s <= steps; s++ {
		if !strings.Contains(got, fmt.Sprintf("step %d/%d |", s, steps)) {
			t.Errorf("watch did not show step %d:\n%s", s, got)
		}
	}
	if !strings.Contains(got, fmt.Sprintf("validation step %d:", steps)) || !strings.Contains(got, "run finished") {
		t.Errorf("watch output:\n%s", got)
	}
	if !strings.Contains(atEnd, "step 1/") {
		t.Errorf("watch showed nothing while the run ran (it only read the finished files):\n%s", got)
	}
}

const watchChildEnv = "GDROTRAIN_WATCH_CHILD_ARGS"

// watchStatusEnv names the file the child writes its exit status to (tmux's
// own record of a dead pane's status can stay empty).
const watchStatusEnv = "GDROTRAIN_WATCH_CHILD_STATUS"

// TestWatchChild is the process TestWatchTmux runs in a tmux pane: the
// gdrotrain command line with its own signal handling, as main sets it up.
func TestWatchChild(t *testing.T) {
	args := os.Getenv(watchChildEnv)
	if args == "" {
		t.Skip("child process of TestWatchTmux")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	root := newRootCmd()
	root.SetArgs(strings.Split(args, "\x1f"))
	status := 0
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		status = 1
	}
	if f := os.Getenv(watchStatusEnv); f != "" {
		os.WriteFile(f, []byte(fmt.Sprint(status)), 0o644)
	}
	os.Exit(status)
}

// TestWatchTmux: watch on a terminal (a tmux pane, read with
// capture-pane) redraws as a fake metrics.jsonl grows, starts again when
// the file is rewritten (a resumed run), and exits with status 0 on
// Ctrl-C. Needs tmux (Debian's tmux; .ci/run installs it): skipped without
// it unless GDROTRAIN_REQUIRE_FIXTURES is set.
func TestWatchTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("GDROTRAIN_REQUIRE_FIXTURES") != "" {
			t.Fatal("tmux not found (apt-get install tmux)")
		}
		t.Skip("tmux not found (apt-get install tmux): the terminal view is not tested")
	}
	dir := t.TempDir()
	metrics := filepath.Join(dir, "metrics.jsonl")
	os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(fakeConfig), 0o644)
	appendFile(t, metrics, fakeStep(1)+fakeStep(2))
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "tmux.sock")
	tmux := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("tmux", append([]string{"-S", sock, "-f", "/dev/null"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	childArgs := strings.Join([]string{"watch", "--interval", "50ms", dir}, "\x1f")
	statusFile := filepath.Join(dir, "status")
	tmux("new-session", "-d", "-s", "w", "-x", "110", "-y", "40", "-e", watchChildEnv+"="+childArgs, "-e", watchStatusEnv+"="+statusFile, "-e", "TERM=xterm-256color",
		self, "-test.run=^TestWatchChild$")
	defer exec.Command("tmux", "-S", sock, "kill-server").Run()
	tmux("set-option", "-t", "w", "remain-on-exit", "on")
	rawLog := filepath.Join(dir, "pane.raw")
	tmux("pipe-pane", "-t", "w", "cat > "+rawLog)
	screen := ""
	waitFor := func(what string, ok func(string) bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			screen = tmux("capture-pane", "-p", "-t", "w")
			if ok(screen) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the pane never showed %s:\n%s", what, screen)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	has := func(subs ...string) func(string) bool {
		return func(s string) bool {
			for _, sub := range subs {
				if !strings.Contains(s, sub) {
					return false
				}
			}
			return true
		}
	}
	waitFor("step 2", has("fake  (prompt_gdro)  step 2/6 (33%)", "reward", "GDRO weight", "no validation yet"))
	appendFile(t, metrics, fakeStep(3))
	appendFile(t, filepath.Join(dir, "validation.jsonl"), fakeVal(3))
	waitFor("step 3 and its validation", has("step 3/6 (50%)", "~30s to the end", "validation step 3: mean@4 0.420"))
	t.Logf("the pane at step 3:\n%s", screen)
	for _, want := range []string{"accuracy", "KL", "grad norm", "tokens/s", "rollouts/prompt", "▁"} {
		if !strings.Contains(screen, want) {
			t.Errorf("the frame lacks %q", want)
		}
	}
	// A resumed run rewrites metrics.jsonl (renamed into place) back to
	// its checkpoint's step.
	tmp := metrics + ".tmp"
	os.WriteFile(tmp, []byte(fakeStep(1)+fakeStep(2)), 0o644)
	os.Rename(tmp, metrics)
	waitFor("the resume", has("step 2/6", "resumed 1 times"))
	if c := strings.TrimSpace(tmux("display-message", "-p", "-t", "w", "#{cursor_flag}")); c != "0" {
		t.Errorf("cursor_flag %s while watching, want 0 (hidden)", c)
	}
	tmux("send-keys", "-t", "w", "C-c")
	// The child writes its exit status to a file as it exits (tmux's
	// pane_dead_status can stay empty).
	waitFor("the exit", func(string) bool {
		_, err := os.Stat(statusFile)
		return err == nil
	})
	if status, _ := os.ReadFile(statusFile); string(status) != "0" {
		t.Errorf("watch exited with status %q on Ctrl-C, want 0:\n%s", status, screen)
	}
	// (tmux hides the cursor of a dead pane, so the restore is read from
	// the pane's output stream.)
	restored := func() ([]byte, bool) {
		raw, _ := os.ReadFile(rawLog)
		raw = raw[max(len(raw)-100, 0):]
		return raw, strings.Contains(string(raw), "\x1b[?25h")
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		raw, ok := restored()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the cursor was not shown again on exit: the output ends %q", raw)
			break
		}
	}
}
