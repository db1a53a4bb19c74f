package dist

import (
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestExpandHostlist(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
		err  string
	}{
		{in: "node01", want: []string{"node01"}},
		{in: "node[01-04,7]", want: []string{"node01", "node02", "node03", "node04", "node7"}},
		{in: "node[08-11]", want: []string{"node08", "node09", "node10", "node11"}},
		{in: "n[9-11]", want: []string{"n9", "n10", "n11"}},
		{in: "a,b[1-2],c", want: []string{"a", "b1", "b2", "c"}},
		{in: "rack[1-2]-gpu[0-1]", want: []string{"rack1-gpu0", "rack1-gpu1", "rack2-gpu0", "rack2-gpu1"}},
		{in: "x[3]y", want: []string{"x3y"}},
		{in: "gpu-[001-002].cluster", want: []string{"gpu-001.cluster", "gpu-002.cluster"}},
		{in: "", err: "empty"},
		{in: "a,,b", err: "empty entry"},
		{in: "node[1-", err: "without ']'"},
		{in: "node1]", err: "without '['"},
		{in: "node[4-2]", err: "bad range"},
		{in: "node[a-b]", err: "bad range"},
		{in: "node[]", err: "bad range"},
		{in: "node[1-99999999]", err: "more than"},
		{in: "n[[1]]", err: "unbalanced"},
	} {
		got, err := ExpandHostlist(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: got %v, %v; want error with %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: got %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestFromSlurm(t *testing.T) {
	base := map[string]string{"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1",
		"SLURM_JOB_NODELIST": "gpu[07-08]", "SLURM_JOB_ID": "123456"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(m, kv[i])
			} else {
				m[kv[i]] = kv[i+1]
			}
		}
		return m
	}
	for _, c := range []struct {
		name string
		env  map[string]string
		want World
		err  string
	}{
		{"job", base, World{Rank: 5, Size: 8, LocalRank: 1, Addr: "gpu07", Port: 20000 + 123456%20000}, ""},
		{"step nodelist first", with("SLURM_STEP_NODELIST", "gpu[08-09]"), World{5, 8, 1, "gpu08", 23456}, ""},
		{"one node: loopback", with("SLURM_STEP_NODELIST", "gpu08"), World{5, 8, 1, "127.0.0.1", 23456}, ""},
		{"one node, MASTER_ADDR kept", with("SLURM_JOB_NODELIST", "gpu08", "MASTER_ADDR", "gpu08"), World{5, 8, 1, "gpu08", 23456}, ""},
		{"torchrun overrides", with("MASTER_ADDR", "10.0.0.1", "MASTER_PORT", "1234"), World{5, 8, 1, "10.0.0.1", 1234}, ""},
		{"no job id", with("SLURM_JOB_ID", ""), World{5, 8, 1, "gpu07", DefaultPort}, ""},
		{"npross", with("SLURM_NTASKS", "", "SLURM_NPROCS", "8"), World{5, 8, 1, "gpu07", 23456}, ""},
		{"not slurm", map[string]string{}, World{}, "SLURM_PROCID is not set"},
		{"bad rank", with("SLURM_PROCID", "x"), World{}, `SLURM_PROCID="x"`},
		{"rank too big", with("SLURM_PROCID", "8"), World{}, "rank 8 is not in 0…7"},
		{"bad list", with("SLURM_JOB_NODELIST", "gpu[1-"), World{}, "SLURM_JOB_NODELIST"},
		{"no list", with("SLURM_JOB_NODELIST", ""), World{}, "MASTER_ADDR"},
		{"bad port", with("MASTER_PORT", "99999"), World{}, "port 99999"},
	} {
		got, err := FromSlurm(func(k string) string { return c.env[k] })
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: got %+v, %v; want error with %q", c.name, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: got %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
}

func TestExplicit(t *testing.T) {
	if _, err := Explicit(0, 1, 0, "", 0); err != nil {
		t.Errorf("single process: %v", err)
	}
	for _, c := range []struct {
		rank, size, local int
		addr              string
		port              int
		err               string
	}{
		{0, 0, 0, "h", 1, "world size 0"},
		{2, 2, 0, "h", 1, "rank 2"},
		{1, 2, 2, "h", 1, "local rank 2"},
		{1, 2, 0, "", 1, "address of rank 0"},
		{1, 2, 0, "h", 0, "port 0"},
	} {
		if _, err := Explicit(c.rank, c.size, c.local, c.addr, c.port); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%+v: %v; want error with %q", c, err, c.err)
		}
	}
}

// world is rank r of n with rank 0 on localhost:port.
func world(r, n, port int) World { return World{Rank: r, Size: n, Addr: "127.0.0.1", Port: port} }

// TestExchange: ranks 1…n−1 (goroutines, some starting before rank 0
// listens) all receive rank 0's id.
func TestExchange(t *testing.T) {
	for _, n := range []int{2, 4} {
		port := freePort(t)
		var id ID
		for i := range id {
			id[i] = byte(i*7 + n)
		}
		got := make([]ID, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for r := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				mine := ID{}
				if r == 0 {
					time.Sleep(100 * time.Millisecond) // the others dial first and retry
					mine = id
				}
				got[r], errs[r] = ExchangeID(world(r, n, port), mine, 10*time.Second)
			}()
		}
		wg.Wait()
		for r := range n {
			if errs[r] != nil || got[r] != id {
				t.Errorf("%d ranks: rank %d: %v (id matches: %v)", n, r, errs[r], got[r] == id)
			}
		}
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func TestCheckBind(t *testing.T) {
	for _, ok := range []string{"", "127.0.0.1", "0.0.0.0", "::1", "::", "gpu07", "node-1.cluster_a"} {
		if err := CheckBind(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"gpu07:29500", "[::1]", "a b", "host/24", "10.0.0.1:1"} {
		if err := CheckBind(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
