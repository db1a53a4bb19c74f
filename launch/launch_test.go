package launch

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gdrotrain/gdrotrain/configs"
	"github.com/gdrotrain/gdrotrain/dist"
	"github.com/gdrotrain/gdrotrain/internal/testinfra/testfix"
	"github.com/gdrotrain/gdrotrain/trainer"
)

// taskConfig is the shipped demo config on the tiny task, on the CPU.
func taskConfig(t *testing.T, task testfix.Task, sets ...string) trainer.Config {
	t.Helper()
	raw, err := configs.Get("demo")
	if err != nil {
		t.Fatal(err)
	}
	sets = append(append(task.Sets(), "run.device=cpu", "run.name=launch", "validation.every=0", "dist.timeout_s=60"), sets...)
	cfg, err := trainer.LoadBytes(raw, "built-in demo", sets)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// freePorts is a port p with p+1 also free: the world's group listens on
// p, the training ranks' own group on p+1.
func freePorts(t *testing.T) int {
	t.Helper()
	for range 20 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := ln.Addr().(*net.TCPAddr).Port
		next, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+1))
		ln.Close()
		if err == nil {
			next.Close()
			return p
		}
	}
	t.Fatal("no two consecutive free ports")
	return 0
}

// TestRunGenerationRanks launches a job from a test, as train does: three
// ranks of one process (two training ranks, one generation rank) each call
// Run with their Place; every rank finishes, the generation rank says its
// role, and rank 0 logs every step.
func TestRunGenerationRanks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three ranks")
	}
	task := testfix.TinyTask(t)
	cfg := taskConfig(t, task, "dist.rollout_ranks=1", "train.max_off_policy_steps=1", "loss.rollout_correction.mode=token_tis")
	port := freePorts(t)
	const size = 3
	errs, logs := make([]error, size), make([]bytes.Buffer, size)
	var wg sync.WaitGroup
	for r := range size {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = Run(context.Background(), Options{Config: cfg, Insecure: true, Log: &logs[r],
				Place:  Place{Rank: r, Size: size, LocalRank: -1, Addr: "127.0.0.1", Port: port},
				Getenv: func(string) string { return "" }})
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v\n%s", r, err, logs[r].String())
		}
	}
	if !strings.Contains(logs[2].String(), "rank 2 is the generation rank 2 (2 training, 1 generation ranks)") {
		t.Errorf("rank 2's log does not name its role:\n%s", logs[2].String())
	}
	raw, err := os.ReadFile(filepath.Join(cfg.RunDir(), "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(raw), "\n"); n != cfg.Train.Steps {
		t.Errorf("metrics.jsonl has %d lines, want %d (train.steps)", n, cfg.Train.Steps)
	}
}

// TestRunNeedsToken: several ranks without the job token, and without
// Insecure, are refused before any rank joins, naming the variable.
func TestRunNeedsToken(t *testing.T) {
	task := testfix.TinyTask(t)
	err := Run(context.Background(), Options{Config: taskConfig(t, task), Log: &bytes.Buffer{},
		Place:  Place{Rank: 0, Size: 2, LocalRank: -1, Port: freePorts(t)},
		Getenv: func(string) string { return "" }})
	if err == nil || !strings.Contains(err.Error(), dist.TokenEnv+" is not set") {
		t.Fatalf("%v, want an error naming %s", err, dist.TokenEnv)
	}
}
