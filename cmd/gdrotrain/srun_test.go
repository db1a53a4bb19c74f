package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gdrotrain/gdrotrain/internal/testinfra/testfix"
)

// TestSrunScriptTwoRanks runs scripts/slurm/srun_train.sh (the body of the
// multi-GPU batch scripts) under scripts/slurm/fake_srun.sh with two CPU ranks of the real
// binary, rendezvous from Slurm's variables: SIGUSR1 to the batch shell
// reaches both ranks, which checkpoint the same step and exit 3; the
// script requeues the job; the requeued job resumes from that checkpoint
// with both ranks and finishes. Per-rank logs land in LOG_DIR. The ranks
// hold the job token the script generates (the test's environment has
// none), so they form an authenticated group.
func TestSrunScriptTwoRanks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a batch script and two processes")
	}
	task := testfix.TinyTask(t)
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fake, err := os.ReadFile(filepath.Join("..", "..", "scripts", "slurm", "fake_srun.sh"))
	if err != nil {
		t.Fatal(err)
	}
	write("srun", string(fake))
	write("scontrol", "#!/usr/bin/env bash\necho \"scontrol $*\" >> \"$FAKE_LOG\"\n")
	// The "binary": this test executable as gdrotrain, arguments passed on.
	gdrotrain := write("gdrotrain", fmt.Sprintf("#!/usr/bin/env bash\nexport GDROTRAIN_TEST_MAIN=1\nexport GDROTRAIN_TEST_ARGS=\"$(printf '%%s\\n' \"$@\")\"\nexec %q\n", os.Args[0]))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "slurm", "srun_train.sh"))
	if err != nil {
		t.Fatal(err)
	}
	logs := filepath.Join(dir, "logs")
	run := func(restart int, steps string) (*exec.Cmd, error) {
		args := append([]string{script}, taskArgs(task, "run.name=srun", "validation.every=0", "train.log_every=1",
			"dist.timeout_s=60", "checkpoint.every=1000", "train.steps="+steps)...)
		cmd := exec.Command("bash", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GDROTRAIN_DIST_TOKEN=", "PATH="+dir+":"+os.Getenv("PATH"), "FAKE_LOG="+filepath.Join(dir, "fake.log"),
			"SRUN=srun", "GDROTRAIN="+gdrotrain, "CONFIG=demo", "DEVICE=cpu", "LOG_DIR="+logs,
			"SLURM_JOB_ID=4242", "SLURM_JOB_NAME=gt", "SLURM_NTASKS=2", "SLURM_JOB_NUM_NODES=1",
			"SLURM_JOB_NODELIST=localhost", "MASTER_ADDR=127.0.0.1", fmt.Sprintf("MASTER_PORT=%d", port),
			fmt.Sprintf("SLURM_RESTART_COUNT=%d", restart))
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		return cmd, cmd.Start()
	}
	cmd, err := run(0, "200")
	if err != nil {
		t.Fatal(err)
	}
	// Pre-empt once rank 1 has logged its second step.
	rank1 := filepath.Join(logs, "gt-4242-rank1.out")
	deadline := time.Now().Add(2 * time.Minute)
	for !fileHas(rank1, "step 2/") {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("rank 1 never reached step 2; its log:\n%s", readOr(rank1))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("batch script: %v (want exit 0 after requeueing)\nrank 0:\n%s", err, readOr(filepath.Join(logs, "gt-4242-rank0.out")))
	}
	if !fileHas(filepath.Join(dir, "fake.log"), "scontrol requeue 4242") {
		t.Fatal("the job was not requeued")
	}
	// The script made the job's token and srun passed it to both ranks,
	// which formed an authenticated group.
	for _, r := range []string{"0", "1"} {
		if log := filepath.Join(logs, "gt-4242-rank"+r+".out"); !fileHas(log, "joining the group (ranks prove they hold GDROTRAIN_DIST_TOKEN)") {
			t.Errorf("rank %s did not join an authenticated group:\n%s", r, readOr(log))
		}
	}
	runDir := filepath.Join(task.Dir, "srun")
	steps := lineCount(filepath.Join(runDir, "metrics.jsonl"))
	if steps < 2 || steps >= 200 {
		t.Fatalf("%d metrics lines: the stop did not land mid-run", steps)
	}
	if _, err := os.Stat(filepath.Join(runDir, "checkpoints", fmt.Sprintf("step_%08d", steps), "manifest.json")); err != nil {
		t.Fatalf("no checkpoint of step %d: %v", steps, err)
	}
	// The requeued job: both ranks resume and run to the end.
	cmd, err = run(1, fmt.Sprint(steps+2))
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("requeued job: %v\nrank 0:\n%s", err, readOr(filepath.Join(logs, "gt-4242-rank0.out")))
	}
	if n := lineCount(filepath.Join(runDir, "metrics.jsonl")); n != steps+2 {
		t.Fatalf("after the requeued job: %d metrics lines, want %d", n, steps+2)
	}
	for _, r := range []string{"0", "1"} {
		if !fileHas(filepath.Join(logs, "gt-4242-rank"+r+".out"), fmt.Sprintf("resumed from %s", filepath.Join(runDir, "checkpoints", fmt.Sprintf("step_%08d", steps)))) {
			t.Errorf("rank %s did not say it resumed from step %d:\n%s", r, steps, readOr(filepath.Join(logs, "gt-4242-rank"+r+".out")))
		}
	}
}

func fileHas(path, s string) bool {
	raw, err := os.ReadFile(path)
	return err == nil && strings.Contains(string(raw), s)
}

func readOr(path string) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return string(raw)
}

func lineCount(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		n++
	}
	return n
}
