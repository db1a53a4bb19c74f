package launch

import (
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/dist"
)

// TestPlaceWorld: the flags, Slurm's variables or one process, and the
// errors naming the flag or variable at fault.
func TestPlaceWorld(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	for _, c := range []struct {
		name string
		p    Place
		env  func(string) string
		want dist.World
		err  string
	}{
		{"alone", Place{LocalRank: -1}, env(), dist.World{Size: 1}, ""},
		{"one Slurm task", Place{LocalRank: -1}, env("SLURM_NTASKS", "1", "SLURM_PROCID", "0"), dist.World{Size: 1}, ""},
		{"flags", Place{Rank: 1, Size: 2, LocalRank: -1}, env(), dist.World{Rank: 1, Size: 2, LocalRank: 1, Addr: "127.0.0.1", Port: dist.DefaultPort}, ""},
		{"flags and MASTER_*", Place{Rank: 3, Size: 4, LocalRank: 1}, env("MASTER_ADDR", "n1", "MASTER_PORT", "4242"),
			dist.World{Rank: 3, Size: 4, LocalRank: 1, Addr: "n1", Port: 4242}, ""},
		{"flags win", Place{Rank: 0, Size: 2, LocalRank: -1, Addr: "h", Port: 7}, env("MASTER_ADDR", "n1", "MASTER_PORT", "4242"),
			dist.World{Size: 2, Addr: "h", Port: 7}, ""},
		{"Slurm", Place{LocalRank: -1}, env("SLURM_NTASKS", "8", "SLURM_PROCID", "5", "SLURM_LOCALID", "1", "SLURM_JOB_NODELIST", "gpu[07-08]", "SLURM_JOB_ID", "7"),
			dist.World{Rank: 5, Size: 8, LocalRank: 1, Addr: "gpu07", Port: 20007}, ""},
		{"rank out of range", Place{Rank: 2, Size: 2, LocalRank: -1}, env(), dist.World{}, "--rank/--world-size"},
		{"bad MASTER_PORT", Place{Rank: 0, Size: 2, LocalRank: -1}, env("MASTER_PORT", "x"), dist.World{}, "MASTER_PORT"},
	} {
		got, err := c.p.World(c.env)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, want an error with %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
}

// TestRankDevice: a rank's GPU from its local rank and CUDA_VISIBLE_DEVICES.
func TestRankDevice(t *testing.T) {
	w := dist.World{Rank: 5, Size: 8, LocalRank: 1}
	for _, c := range []struct {
		name, dev, visible, want, err string
		world                         dist.World
	}{
		{"one process keeps cuda", "cuda", "", "cuda", "", dist.World{Size: 1}},
		{"local rank picks the GPU", "cuda", "", "cuda:1", "", w},
		{"one visible GPU", "cuda", "3", "cuda:0", "", w},
		{"several visible", "cuda", "4,5", "cuda:1", "", w},
		{"too few visible", "cuda", "4", "cuda:0", "", w},
		{"explicit ordinal kept", "cuda:2", "", "cuda:2", "", w},
		{"cpu kept", "cpu", "", "cpu", "", w},
		{"local rank beyond the visible GPUs", "cuda", "0,1", "", "local rank 3 has no GPU", dist.World{Rank: 3, Size: 4, LocalRank: 3}},
	} {
		got, err := RankDevice(c.dev, c.world, func(k string) string {
			if k == "CUDA_VISIBLE_DEVICES" {
				return c.visible
			}
			return ""
		})
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %q, %v; want an error with %q", c.name, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}
