// Package dist says where this process stands in a multi-GPU job (its rank,
// the world size, its rank on its node, the address of rank 0) and forms
// the job's control plane over TCP (group.go), which carries NCCL's
// 128-byte unique id from rank 0 to every rank and everything else that is
// small; its ranks prove they hold the job's token (auth.go). It is pure
// Go: the cuda package makes the id and opens the communicator.
//
// Under Slurm (srun, one task per GPU) everything comes from the task's
// environment: SLURM_PROCID is the rank, SLURM_NTASKS the world size,
// SLURM_LOCALID the rank on the node (the GPU to use) and rank 0 runs on the
// first host of the step's node list (SLURM_STEP_NODELIST, else
// SLURM_JOB_NODELIST), or on 127.0.0.1 when that list holds one host. MASTER_ADDR and MASTER_PORT override the address and
// port as with torchrun; without MASTER_PORT the port is derived from
// SLURM_JOB_ID so that two jobs sharing a node do not collide. Elsewhere
// the values are given explicitly (flags --rank, --world-size,
// --master-addr, --master-port).
package dist

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// World is this process's place in the job.
type World struct {
	Rank      int    // 0 … Size−1
	Size      int    // number of processes (GPUs)
	LocalRank int    // rank among the processes on this node: its GPU ordinal
	Addr      string // host where rank 0 listens
	Port      int    // TCP port where rank 0 listens
}

// DefaultPort is rank 0's port when nothing sets one and there is no
// Slurm job id to derive it from.
const DefaultPort = 29500

// Explicit checks values given on the command line and returns the World.
func Explicit(rank, size, localRank int, addr string, port int) (World, error) {
	w := World{Rank: rank, Size: size, LocalRank: localRank, Addr: addr, Port: port}
	return w, w.Validate()
}

// Validate reports the first inconsistent field.
func (w World) Validate() error {
	switch {
	case w.Size < 1:
		return fmt.Errorf("dist: world size %d: want ≥ 1", w.Size)
	case w.Rank < 0 || w.Rank >= w.Size:
		return fmt.Errorf("dist: rank %d is not in 0…%d (world size %d)", w.Rank, w.Size-1, w.Size)
	case w.LocalRank < 0 || w.LocalRank > w.Rank:
		return fmt.Errorf("dist: local rank %d of rank %d: want 0 ≤ local rank ≤ rank", w.LocalRank, w.Rank)
	case w.Size > 1 && w.Addr == "":
		return fmt.Errorf("dist: world size %d needs the address of rank 0 (--master-addr or MASTER_ADDR)", w.Size)
	case w.Port < 0 || w.Port > 65535 || (w.Size > 1 && w.Port == 0):
		return fmt.Errorf("dist: port %d: want 1…65535", w.Port)
	}
	return nil
}

// Endpoint is rank 0's host:port.
func (w World) Endpoint() string { return net.JoinHostPort(w.Addr, strconv.Itoa(w.Port)) }

func (w World) String() string {
	return fmt.Sprintf("rank %d of %d (local rank %d, rank 0 at %s)", w.Rank, w.Size, w.LocalRank, w.Endpoint())
}

// FromSlurm reads the World from a Slurm task's environment (getenv is
// os.Getenv, or a map's lookup in tests).
func FromSlurm(getenv func(string) string) (World, error) {
	num := func(names ...string) (int, error) {
		for _, name := range names {
			if v := getenv(name); v != "" {
				n, err := strconv.Atoi(strings.TrimSpace(v))
				if err != nil {
					return 0, fmt.Errorf("dist: %s=%q is not an integer", name, v)
				}
				return n, nil
			}
		}
		return 0, fmt.Errorf("dist: %s is not set: not a Slurm task (run under srun, or give --rank, --world-size, --master-addr and --master-port)", names[0])
	}
	var w World
	var err error
	if w.Rank, err = num("SLURM_PROCID"); err != nil {
		return w, err
	}
	if w.Size, err = num("SLURM_NTASKS", "SLURM_NPROCS"); err != nil {
		return w, err
	}
	if w.LocalRank, err = num("SLURM_LOCALID"); err != nil {
		return w, err
	}
	w.Addr = getenv("MASTER_ADDR")
	if w.Addr == "" {
		list, name := getenv("SLURM_STEP_NODELIST"), "SLURM_STEP_NODELIST"
		if list == "" {
			list, name = getenv("SLURM_JOB_NODELIST"), "SLURM_JOB_NODELIST"
		}
		if list == "" {
			list, name = getenv("SLURM_NODELIST"), "SLURM_NODELIST"
		}
		if list == "" {
			return w, fmt.Errorf("dist: neither MASTER_ADDR nor SLURM_JOB_NODELIST is set")
		}
		hosts, err := ExpandHostlist(list)
		if err != nil {
			return w, fmt.Errorf("dist: %s: %w", name, err)
		}
		w.Addr = hosts[0]
		if len(hosts) == 1 {
			// Every task runs on this node: rank 0 listens on loopback
			// only, out of reach of other hosts.
			w.Addr = "127.0.0.1"
		}
	}
	w.Port = DefaultPort
	if v := getenv("MASTER_PORT"); v != "" {
		if w.Port, err = strconv.Atoi(v); err != nil {
			return w, fmt.Errorf("dist: MASTER_PORT=%q is not a port", v)
		}
	} else if v := getenv("SLURM_JOB_ID"); v != "" {
		id, err := strconv.Atoi(v)
		if err != nil {
			return w, fmt.Errorf("dist: SLURM_JOB_ID=%q is not an integer", v)
		}
		w.Port = 20000 + id%20000
	}
	return w, w.Validate()
}

// CheckBind checks an address for rank 0 to listen on (dist.bind): empty
// (the address rank 0 is reached at), a host name, or an IP address, with no
// port.
func CheckBind(host string) error {
	if host == "" || net.ParseIP(host) != nil {
		return nil
	}
	if strings.Contains(host, ":") {
		return fmt.Errorf("not a host name or an IP address (no port: rank 0's port is --master-port)")
	}
	for _, c := range host {
		if !(c == '-' || c == '.' || c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return fmt.Errorf("not a host name or an IP address (%q)", c)
		}
	}
	return nil
}
