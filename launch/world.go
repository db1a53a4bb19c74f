package launch

// Where a process stands in the job and which GPU it drives.

import (
	"fmt"
	"strings"

	"github.com/gdrotrain/gdrotrain/cuda"
	"github.com/gdrotrain/gdrotrain/device"
	"github.com/gdrotrain/gdrotrain/dist"
)

// Place is a process's place as the flags give it: --rank, --world-size,
// --local-rank, --master-addr and --master-port. Size 0 leaves it to
// Slurm's variables (or one process); LocalRank < 0 means Rank (one
// node); an empty Addr or a zero Port falls back to MASTER_ADDR /
// MASTER_PORT, then to 127.0.0.1 / dist.DefaultPort.
type Place struct {
	Rank, Size, LocalRank int
	Addr                  string
	Port                  int
}

// World resolves this process's place: the flags when Size is given, else
// Slurm's variables when SLURM_NTASKS > 1, else one process.
func (p Place) World(getenv func(string) string) (dist.World, error) {
	if p.Size == 0 {
		if n := strings.TrimSpace(getenv("SLURM_NTASKS")); n != "" && n != "1" && n != "0" {
			return dist.FromSlurm(getenv)
		}
		return dist.World{Size: 1}, nil
	}
	addr, port := p.Addr, p.Port
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
	local := p.LocalRank
	if local < 0 {
		local = p.Rank
	}
	w, err := dist.Explicit(p.Rank, p.Size, local, addr, port)
	if err != nil {
		return w, fmt.Errorf("--rank/--world-size/--local-rank/--master-addr/--master-port: %w", err)
	}
	return w, nil
}

// RankDevice is the device of a rank: run.device "cuda" or "auto" becomes
// cuda:LOCAL_RANK, or cuda:0 when CUDA_VISIBLE_DEVICES leaves one GPU (as
// srun --gpus-per-task does); cpu and an explicit cuda:N stay.
func RankDevice(name string, w dist.World, getenv func(string) string) (string, error) {
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
