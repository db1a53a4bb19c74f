package main

// Data-parallel training from the command line: where this process stands
// in the job (flags, else Slurm's variables, else alone), the control plane
// to the other ranks, the GPU of this rank, and the gradient reducer (NCCL
// on CUDA, the control plane's fixed-order sum on the CPU).

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/cuda"
	"github.com/gdrotrain/gdrotrain/device"
	"github.com/gdrotrain/gdrotrain/dist"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/optim"
	"github.com/gdrotrain/gdrotrain/trainer"
)

// distFlags are --rank, --world-size, --local-rank, --master-addr,
// --master-port, --bind-addr and --insecure-dist.
type distFlags struct {
	rank, size, localRank int
	addr                  string
	port                  int
	bind                  string // sets dist.bind
	insecure              bool   // no token: an unauthenticated group
}

func addDistFlags(cmd *cobra.Command, f *distFlags) {
	cmd.Flags().IntVar(&f.size, "world-size", 0, "number of data-parallel ranks (processes); unset: Slurm's SLURM_NTASKS under srun, else 1")
	cmd.Flags().IntVar(&f.rank, "rank", 0, "this process's rank, 0 … world-size−1 (with --world-size)")
	cmd.Flags().IntVar(&f.localRank, "local-rank", -1, "this process's rank on its node, which picks its GPU (default: --rank, one node)")
	cmd.Flags().StringVar(&f.addr, "master-addr", "", "host of rank 0 (default: MASTER_ADDR, else 127.0.0.1)")
	cmd.Flags().IntVar(&f.port, "master-port", 0, fmt.Sprintf("TCP port of rank 0 (default: MASTER_PORT, else %d)", dist.DefaultPort))
	cmd.Flags().StringVar(&f.bind, "bind-addr", "", "address rank 0 listens on (sets dist.bind; default: the address of rank 0 the others dial, not every interface)")
	cmd.Flags().BoolVar(&f.insecure, "insecure-dist", false, "form the ranks' group without "+dist.TokenEnv+": any process that reaches rank 0's port can join it (give it to every rank)")
}

// world resolves this process's place: the flags when --world-size is
// given, else Slurm's variables when SLURM_NTASKS > 1, else one process.
func (f distFlags) world(getenv func(string) string) (dist.World, error) {
	if f.size == 0 {
		if n := strings.TrimSpace(getenv("SLURM_NTASKS")); n != "" && n != "1" && n != "0" {
			return dist.FromSlurm(getenv)
		}
		return dist.World{Size: 1}, nil
	}
	addr, port := f.addr, f.port
	if addr == "" {
		if addr = getenv("MASTER_ADDR"); addr == "" {
			addr = "127.0.0.1"
		}
	}
	if port == 0 {
		port = dist.DefaultPort
		if v := getenv("MASTER_PORT"); v != "" {
			if _, err := fmt.Sscan(v, &port); err != nil {
				return dist.World{}, fmt.Errorf("MASTER_PORT=%q is not a port", v)
			}
		}
	}
	local := f.localRank
	if local < 0 {
		local = f.rank
	}
	w, err := dist.Explicit(f.rank, f.size, local, addr, port)
	if err != nil {
		return w, fmt.Errorf("--rank/--world-size/--local-rank/--master-addr/--master-port: %w", err)
	}
	return w, nil
}

// rankDevice is the device of a rank: run.device "cuda" or "auto" becomes
// cuda:LOCAL_RANK, or cuda:0 when CUDA_VISIBLE_DEVICES leaves one GPU (as
// srun --gpus-per-task does); cpu and an explicit cuda:N stay.
func rankDevice(name string, w dist.World, getenv func(string) string) (string, error) {
	if w.Size == 1 || (name != device.CUDA && name != device.Auto) {
		return name, nil
	}
	gpu := w.LocalRank
	if v := strings.TrimSpace(getenv("CUDA_VISIBLE_DEVICES")); v != "" {
		visible := strings.Split(v, ",")
		switch {
		case len(visible) == 1:
			gpu = 0
		case gpu >= len(visible):
			return "", fmt.Errorf("local rank %d has no GPU: CUDA_VISIBLE_DEVICES=%s shows %d", w.LocalRank, v, len(visible))
		}
	}
	if name == device.Auto {
		if _, err := cuda.Open(gpu, func(string, ...any) {}); err != nil {
			if cuda.IsNoGPU(err) {
				return device.CPU, nil // as backend.Open's auto chooses
			}
			return "", fmt.Errorf("device auto, local rank %d: %w", w.LocalRank, err)
		}
	}
	return fmt.Sprintf("cuda:%d", gpu), nil
}

// joinGroup forms the control plane of a world of several ranks (nil for
// one process). Its ranks prove they hold the job's token, read from the
// environment (dist.TokenEnv), unless --insecure-dist opts out; without
// either it refuses to start. The token is never printed.
func joinGroup(cmd *cobra.Command, w dist.World, cfg trainer.Config, insecure bool, getenv func(string) string) (*dist.Group, error) {
	if w.Size == 1 {
		return nil, nil
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(cmd.ErrOrStderr(), "data parallel: "+format+"\n", args...)
	}
	o := dist.Options{Timeout: cfg.DistTimeout(), Bind: cfg.Dist.Bind, Logf: logf}
	how := "ranks prove they hold " + dist.TokenEnv
	switch v := getenv(dist.TokenEnv); {
	case insecure:
		how = "unauthenticated"
		ignored := ""
		if v != "" {
			ignored = "; " + dist.TokenEnv + " is ignored"
		}
		logf("--insecure-dist: the group is unauthenticated: any process that reaches rank 0's port can join it as a missing rank, read what it sends and add to its sums%s", ignored)
	case v == "":
		return nil, fmt.Errorf("data parallel: %s is not set: the ranks of a job prove to each other that they hold this secret, so that no other process joins the job (the Slurm scripts set it; by hand, run export %s=$(openssl rand -hex 32) once and start every rank from that shell), or give every rank --insecure-dist for an unauthenticated group", dist.TokenEnv, dist.TokenEnv)
	default:
		tok, err := dist.ParseToken(v)
		if err != nil {
			return nil, fmt.Errorf("data parallel: %w", err)
		}
		o.Token = tok
	}
	logf("%s: joining the group (%s)", w, how)
	// A signal while the group forms (a rank that died at start-up leaves
	// the others waiting for it up to dist.timeout_s) stops the wait: exit
	// status 3 with nothing to checkpoint, as a signal while loading.
	g, err := dist.JoinContext(cmd.Context(), w, o)
	if err != nil && cmd.Context().Err() != nil {
		return nil, fmt.Errorf("data parallel: %v (before any step: nothing to save): %w", err, trainer.ErrStopped)
	}
	return g, err
}

// reducerFor makes the gradient reducer of backend b: NCCL on CUDA (the id
// travels over the control plane), the control plane's fixed-order sum on
// the CPU (optim.HostComm).
func reducerFor(g *dist.Group, timeout time.Duration) func(model.Backend) (trainer.Reducer, error) {
	return func(b model.Backend) (trainer.Reducer, error) {
		cb, ok := b.(*cuda.Backend)
		if !ok {
			return optim.HostComm{B: b, G: g}, nil
		}
		comm, err := cuda.OpenCommOver(cb, g, timeout)
		if err != nil {
			return nil, err
		}
		// Its AllReduceSum and Close make it the trainer's reducer, its ZeRO
		// collectives (optim.ShardComm) the optimizer's.
		return comm, nil
	}
}
