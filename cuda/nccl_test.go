package cuda

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gdrotrain/gdrotrain/dist"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/optim"
)

// The NCCL tests run each rank as a process of its own (this test binary
// re-executed with TestNCCLWorker and the rank in the environment), wired as
// training is: rank 0 makes the id, dist carries it over TCP, every rank
// opens a Comm on its device's stream. On the emulator every rank has an
// emulated GPU of its own and the emulator's NCCL; on GPUs (the GPU kit runs
// them where two or more are visible) each rank gets one GPU through
// CUDA_VISIBLE_DEVICES and real NCCL, and a test needing more ranks than
// GPUs is skipped.

const (
	workerEnv = "GDROTRAIN_TEST_NCCL_WORKER" // role,rank,world,port,timeout
	slotEnv   = "GDROTRAIN_EMU_NCCL_SLOT_BYTES"
	emuWait   = "GDROTRAIN_EMU_NCCL_TIMEOUT_MS"
)

// ncclSizes are per-rank element counts: odd, and with 4 KiB slots (1024
// floats; 1024/world for reduce-scatter) crossing chunk boundaries.
var ncclSizes = []int{1, 31, 33, 1025, 3001}

// ncclInput is rank r's element i: magnitudes spread over six decades so
// that float32 sums depend on their order.
func ncclInput(r, i, salt int) float32 {
	return float32(math.Sin(float64(i*31+r*17+salt))) * float32(math.Pow(10, float64((i+r)%7-3)))
}

// ncclSum is Σ_r in(r, i) added in rank order in float32, the emulator's
// (and the test's) definition of the reduction.
func ncclSum(world, i, salt int) float32 {
	acc := ncclInput(0, i, salt)
	for r := 1; r < world; r++ {
		acc += ncclInput(r, i, salt)
	}
	return acc
}

// ncclSumOK says whether got is an acceptable sum of element i over world
// ranks. The emulator adds in rank order, so there it must be bitwise
// ncclSum; so must real NCCL's for 2 ranks (one addition, and a+b is b+a
// exactly). With more ranks NCCL's rings and trees add in other orders, so
// on GPUs the sum only has to be within the bound of any order of adding
// world float32 values: γ(world−1)·Σ|x| of the exact sum, γ(n) = n·u/(1−n·u),
// u = 2⁻²⁴.
func ncclSumOK(got float32, world, i, salt int) bool {
	if devKind != "gpu" || world <= 2 {
		return math.Float32bits(got) == math.Float32bits(ncclSum(world, i, salt))
	}
	var exact, abs float64
	for r := 0; r < world; r++ {
		x := float64(ncclInput(r, i, salt))
		exact, abs = exact+x, abs+math.Abs(x)
	}
	nu := float64(world-1) * 0x1p-24
	return math.Abs(float64(got)-exact) <= nu/(1-nu)*abs
}

// sumsMatch says how ncclSumOK compared, for the workers' logs.
func sumsMatch(world int) string {
	if devKind != "gpu" || world <= 2 {
		return "bitwise"
	}
	return "within the rounding bound of any summation order"
}

// TestNCCLCollectives: 2 and 4 processes (2 under -short) all-reduce,
// reduce-scatter, all-gather and broadcast odd sizes and get bitwise the
// expected values.
func TestNCCLCollectives(t *testing.T) {
	for _, world := range []int{2, 4} {
		t.Run(fmt.Sprintf("world%d", world), func(t *testing.T) {
			shortWorld(t, world)
			needNCCL(t, world)
			roles := make([]string, world)
			for r := range roles {
				roles[r] = "collectives"
			}
			runRanks(t, roles, 60*time.Second, slotEnv+"=4096")
		})
	}
}

// TestNCCLShardedAdamW: ZeRO-1 between 2 and 3 processes (2 under -short)
// — AdamW on each rank's shard of the moments, then GatherShards through
// NCCL — leaves every rank's weights bitwise equal to an unsharded AdamW's
// on the same device (3 ranks: ranges of unequal length, and empty ones for small
// tensors); ReduceScatterShards leaves each rank's range the rank-order
// sum, bitwise.
func TestNCCLShardedAdamW(t *testing.T) {
	for _, world := range []int{2, 3} {
		t.Run(fmt.Sprintf("world%d", world), func(t *testing.T) {
			shortWorld(t, world)
			needNCCL(t, world)
			roles := make([]string, world)
			for r := range roles {
				roles[r] = "zero"
			}
			runRanks(t, roles, 60*time.Second)
		})
	}
}

// TestNCCLGradientReducer: the data-parallel gradient reducer (Comm as a
// trainer.Reducer, its id carried by dist.Group) sums a set of tensors of
// odd sizes over 2 processes bitwise as the host does.
func TestNCCLGradientReducer(t *testing.T) {
	needNCCL(t, 2)
	runRanks(t, []string{"group-reducer", "group-reducer"}, 60*time.Second, slotEnv+"=4096")
}

// TestNCCLMissingRank: a rank that never joins, or joins and never calls
// the collective, makes the others fail within the limit, naming ranks
// (the second only under -short).
func TestNCCLMissingRank(t *testing.T) {
	t.Run("init", func(t *testing.T) {
		shortWorld(t, 3)
		needNCCL(t, 3)
		if devKind != "emulator" {
			t.Skip("skipped: the message checked is the emulator's NCCL's own")
		}
		// The emulator's own wait (1.5 s) ends the join; its message names rank 2.
		runRanks(t, []string{"init-fails", "init-fails", "sleep-before-init"}, 30*time.Second, emuWait+"=1500")
	})
	t.Run("collective", func(t *testing.T) {
		needNCCL(t, 2)
		// The Comm's watchdog (1.5 s) aborts the all-reduce rank 1 never
		// joins. The limit also bounds joining, which real NCCL takes
		// seconds to do.
		limit := 1500 * time.Millisecond
		if devKind == "gpu" {
			limit = 20 * time.Second
		}
		runRanks(t, []string{"collective-times-out", "sleep-before-collective"}, limit)
	})
}

// shortWorld skips, under -short, the runs of more than 2 ranks.
func shortWorld(t *testing.T, world int) {
	if testing.Short() && world > 2 {
		t.Skipf("-short: %d ranks (2 only)", world)
	}
}

// needNCCL skips a test of world ranks that cannot run here: on GPUs each
// rank needs a GPU of its own.
func needNCCL(t *testing.T, world int) {
	t.Helper()
	d := testDevice(t)
	if devKind == "gpu" && d.Info.Devices < world {
		t.Skipf("skipped: %d ranks need %d GPUs, %d visible (the emulator runs them with one)", world, world, d.Info.Devices)
	}
}

// rankGPU is the CUDA_VISIBLE_DEVICES of rank r of world on GPUs: one of
// this process's visible GPUs. This process holds the first; with a spare
// GPU for every rank the ranks leave it alone, so they also run under the
// exclusive-process compute mode.
func rankGPU(r, world int) string {
	var visible []string
	if v := os.Getenv("CUDA_VISIBLE_DEVICES"); v != "" {
		visible = strings.Split(v, ",")
	} else {
		for i := range testDev.Info.Devices {
			visible = append(visible, strconv.Itoa(i))
		}
	}
	if len(visible) > world {
		return visible[r+1]
	}
	return visible[r]
}

// runRanks starts one worker per role and waits for those that do not
// sleep; sleepers are killed at the end.
func runRanks(t *testing.T, roles []string, timeout time.Duration, env ...string) {
	t.Helper()
	port := freePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	type worker struct {
		cmd *exec.Cmd
		out bytes.Buffer
	}
	ws := make([]*worker, len(roles))
	for r, role := range roles {
		w := &worker{}
		w.cmd = exec.CommandContext(ctx, os.Args[0], "-test.run=^TestNCCLWorker$", "-test.v", "-test.count=1")
		w.cmd.Env = append(append(os.Environ(), env...),
			fmt.Sprintf("%s=%s,%d,%d,%d,%d", workerEnv, role, r, len(roles), port, timeout.Milliseconds()))
		if devKind == "gpu" {
			w.cmd.Env = append(w.cmd.Env, "CUDA_VISIBLE_DEVICES="+rankGPU(r, len(roles)))
		}
		w.cmd.Stdout, w.cmd.Stderr = &w.out, &w.out
		if err := w.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ws[r] = w
	}
	var wg sync.WaitGroup
	for r, w := range ws {
		if strings.HasPrefix(roles[r], "sleep") {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.cmd.Wait(); err != nil {
				t.Errorf("rank %d (%s): %v\n%s", r, roles[r], err, w.out.String())
			} else if !strings.Contains(w.out.String(), "PASS: TestNCCLWorker") {
				t.Errorf("rank %d (%s) did not run:\n%s", r, roles[r], w.out.String())
			} else {
				t.Logf("rank %d (%s): %s", r, roles[r], tailLines(w.out.String(), 3))
			}
		}()
	}
	wg.Wait()
	for r, w := range ws {
		if strings.HasPrefix(roles[r], "sleep") {
			w.cmd.Process.Kill()
			w.cmd.Wait()
		}
	}
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}

// TestNCCLWorker is one rank; it runs only when a test above starts it.
func TestNCCLWorker(t *testing.T) {
	spec := os.Getenv(workerEnv)
	if spec == "" {
		t.Skip("skipped: runs as a worker process of the NCCL tests")
	}
	f := strings.Split(spec, ",")
	role := f[0]
	num := func(i int) int {
		v, err := strconv.Atoi(f[i])
		if err != nil {
			t.Fatalf("%s=%q: %v", workerEnv, spec, err)
		}
		return v
	}
	rank, world, port, timeout := num(1), num(2), num(3), time.Duration(num(4))*time.Millisecond
	if role == "dp-train" {
		dpTrainWorker(t, rank, world, port)
		return
	}
	if role == "dp-masters" {
		mastersWorker(t, rank, world, port)
		return
	}
	if role == "weight-link" {
		weightLinkWorker(t, rank, world, port, timeout)
		return
	}
	if strings.HasPrefix(role, "async-") {
		asyncWorker(t, role, rank, world, port)
		return
	}
	b := NewBackend(testDevice(t), FP32)

	w, err := dist.Explicit(rank, world, rank, "127.0.0.1", port)
	if err != nil {
		t.Fatal(err)
	}
	var id UniqueID
	if rank == 0 {
		if id, err = NewUniqueID(); err != nil {
			t.Fatal(err)
		}
	}
	var got dist.ID
	if role == "group-reducer" {
		// As a data-parallel run does: the id is the control plane's first
		// broadcast.
		g, err := dist.NewGroup(w, 60*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		b, err := g.Broadcast("nccl id", id[:])
		if err != nil {
			t.Fatal(err)
		}
		copy(got[:], b)
	} else if got, err = dist.ExchangeID(w, dist.ID(id), 60*time.Second); err != nil {
		t.Fatal(err)
	}
	if role == "sleep-before-init" {
		time.Sleep(time.Minute)
		return
	}
	start := time.Now()
	c, err := OpenComm(b, UniqueID(got), rank, world, timeout)
	if role == "init-fails" {
		want := []string{fmt.Sprintf("nccl init (rank %d of %d)", rank, world), "ncclSystemError", "rank(s) 2 did not arrive"}
		if err == nil {
			t.Fatal("init succeeded without rank 2")
		}
		checkErr(t, err, start, 10*time.Second, want...)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	switch role {
	case "sleep-before-collective":
		time.Sleep(time.Minute)
	case "collective-times-out":
		tt := b.New(1001)
		start := time.Now()
		err := c.AllReduce(tt)
		if !errors.Is(err, ErrCommTimeout) {
			t.Fatalf("all-reduce without rank 1: %v; want a timeout", err)
		}
		checkErr(t, err, start, timeout+10*time.Second, "all-reduce of 1001 floats (rank 0 of 2)", "aborted", "rank(s) 1")
		if err2 := c.AllReduce(tt); err2 == nil || !strings.Contains(err2.Error(), "rank 0 of 2") {
			t.Errorf("a second call on the failed Comm: %v", err2)
		}
	case "collectives":
		ncclCollectives(t, b, c, rank, world)
	case "zero":
		ncclZeRO(t, b, c, rank, world)
	case "group-reducer":
		ncclReducer(t, b, c, rank, world)
	default:
		t.Fatalf("unknown role %q", role)
	}
}

func checkErr(t *testing.T, err error, start time.Time, limit time.Duration, want ...string) {
	t.Helper()
	if d := time.Since(start); d > limit {
		t.Errorf("failed after %s; limit %s", d, limit)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	t.Logf("got, as expected: %v", err)
}

// ncclCollectives runs the four collectives on every size and compares
// each element's bits with the host's.
func ncclCollectives(t *testing.T, b *Backend, c *Comm, rank, world int) {
	check := func(what string, got []float32, want func(i int) float32) {
		t.Helper()
		bad := 0
		for i, g := range got {
			if w := want(i); math.Float32bits(g) != math.Float32bits(w) {
				if bad < 5 {
					t.Errorf("rank %d %s: [%d] = %g (%#x), want %g (%#x)", rank, what, i, g, math.Float32bits(g), w, math.Float32bits(w))
				}
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("rank %d %s: %d of %d elements differ", rank, what, bad, len(got))
		}
	}
	// checkSum compares got[i] with the sum over the ranks of element
	// elem(i) of the inputs salted salt (ncclSumOK).
	checkSum := func(what string, got []float32, elem func(i int) int, salt int) {
		t.Helper()
		bad := 0
		for i, g := range got {
			if !ncclSumOK(g, world, elem(i), salt) {
				if bad < 5 {
					t.Errorf("rank %d %s: [%d] = %g, want %g (%s)", rank, what, i, g, ncclSum(world, elem(i), salt), sumsMatch(world))
				}
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("rank %d %s: %d of %d elements differ", rank, what, bad, len(got))
		}
	}
	upload := func(n, salt int, val func(i int) float32) *model.Tensor {
		tt := b.New(n)
		host := make([]float32, n)
		for i := range host {
			host[i] = val(i)
		}
		b.Upload(tt, host)
		return tt
	}
	download := func(tt *model.Tensor) []float32 {
		out := make([]float32, tt.Numel())
		b.Download(tt, out)
		if err := b.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, n := range ncclSizes {
		// All-reduce, in place.
		ar := upload(n, 1, func(i int) float32 { return ncclInput(rank, i, 1) })
		if err := c.AllReduce(ar); err != nil {
			t.Fatal(err)
		}
		checkSum(fmt.Sprintf("all-reduce(%d)", n), download(ar), func(i int) int { return i }, 1)

		// Reduce-scatter: world blocks of n; this rank keeps block rank.
		src := upload(world*n, 2, func(i int) float32 { return ncclInput(rank, i, 2) })
		dst := b.New(n)
		if err := c.ReduceScatter(dst, src); err != nil {
			t.Fatal(err)
		}
		checkSum(fmt.Sprintf("reduce-scatter(%d)", n), download(dst), func(i int) int { return rank*n + i }, 2)

		// All-gather: rank r's n values land at [r·n, (r+1)·n).
		part := upload(n, 3, func(i int) float32 { return ncclInput(rank, i, 3) })
		all := b.New(world * n)
		if err := c.AllGather(all, part); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("all-gather(%d)", n), download(all), func(i int) float32 { return ncclInput(i/n, i%n, 3) })

		// Broadcast from the last rank (not 0), in place.
		root := world - 1
		bc := upload(n, 4, func(i int) float32 { return ncclInput(rank, i, 4) })
		if err := c.Broadcast(bc, root); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("broadcast(%d)", n), download(bc), func(i int) float32 { return ncclInput(root, i, 4) })
		b.Release(ar, src, dst, part, all, bc)
	}
	// Wrong shapes are refused before any rank waits.
	if err := c.AllGather(b.New(3), b.New(2)); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("rank %d of %d", rank, world)) {
		t.Errorf("all-gather into a wrong size: %v", err)
	}
	t.Logf("rank %d of %d: collectives on sizes %v match (copies bitwise, sums %s)", rank, world, ncclSizes, sumsMatch(world))
}

// ncclReducer all-reduces one tensor of each size in a single
// AllReduceSum and compares every element's bits with the host's sum.
func ncclReducer(t *testing.T, b *Backend, c *Comm, rank, world int) {
	var ts []*model.Tensor
	for k, n := range ncclSizes {
		tt := b.New(n)
		host := make([]float32, n)
		for i := range host {
			host[i] = ncclInput(rank, i, 10+k)
		}
		b.Upload(tt, host)
		ts = append(ts, tt)
	}
	if err := c.AllReduceSum(ts); err != nil {
		t.Fatal(err)
	}
	for k, tt := range ts {
		got := make([]float32, tt.Numel())
		b.Download(tt, got)
		for i, g := range got {
			if !ncclSumOK(g, world, i, 10+k) {
				t.Fatalf("rank %d: tensor %d [%d] = %g, want %g (%s)", rank, k, i, g, ncclSum(world, i, 10+k), sumsMatch(world))
			}
		}
	}
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	b.Release(ts...)
	t.Logf("rank %d of %d: AllReduceSum of sizes %v matches %s", rank, world, ncclSizes, sumsMatch(world))
}

func freePort(t *testing.T) int {
	t.Helper()
	s, err := dist.Listen(dist.World{Rank: 0, Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	return s.Port()
}

// ncclZeRO runs three sharded AdamW steps with the Comm as gatherer and
// the same steps unsharded on this device, and compares the weights' bits.
func ncclZeRO(t *testing.T, b *Backend, c *Comm, rank, world int) {
	o := model.DefaultTiny()
	o.Layers = 1
	mc, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
	cfg := optim.AdamWConfig{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01}
	sp, up := model.RandomParams(b, mc, 3, 0.2, 0.3), model.RandomParams(b, mc, 3, 0.2, 0.3)
	so, err := optim.NewShardedAdamW(b, mc, sp, cfg, optim.Shard{Rank: rank, World: world})
	if err != nil {
		t.Fatal(err)
	}
	so.Gather = c
	uo := optim.NewAdamW(b, mc, cfg)
	for step := 0; step < 3; step++ {
		g := model.RandomParams(b, mc, uint64(100+step), 0.5, 0.5)
		if err := so.Update(b, mc, sp, g, 1e-2); err != nil {
			t.Fatal(err)
		}
		if err := uo.Update(b, mc, up, g, 1e-2); err != nil {
			t.Fatal(err)
		}
	}
	un, sn := up.Named(mc), sp.Named(mc)
	for i := range un {
		n := (*un[i].Ptr).Numel()
		want, got := make([]float32, n), make([]float32, n)
		b.Download(*un[i].Ptr, want)
		b.Download(*sn[i].Ptr, got)
		for j := range want {
			if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
				t.Fatalf("rank %d of %d: %s[%d] = %v, unsharded %v", rank, world, un[i].Name, j, got[j], want[j])
			}
		}
	}
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("rank %d of %d: sharded AdamW through NCCL matches the unsharded update bitwise", rank, world)

	// ReduceScatterShards: each rank's range holds the rank-order sum,
	// bitwise, on odd sizes (ranges of unequal length; empty ones for 1).
	var ts []*model.Tensor
	for _, n := range ncclSizes {
		x := b.New(n)
		host := make([]float32, n)
		for i := range host {
			host[i] = ncclInput(rank, i, 5)
		}
		b.Upload(x, host)
		ts = append(ts, x)
	}
	sh := optim.Shard{Rank: rank, World: world}
	if err := c.ReduceScatterShards(ts, sh); err != nil {
		t.Fatal(err)
	}
	for k, x := range ts {
		got := make([]float32, x.Numel())
		b.Download(x, got)
		lo, hi := sh.Range(x.Numel())
		for i := lo; i < hi; i++ {
			if !ncclSumOK(got[i], world, i, 5) {
				t.Fatalf("rank %d of %d: reduce-scatter of %d elements: [%d] = %g, want %g (%s)", rank, world, ncclSizes[k], i, got[i],
					ncclSum(world, i, 5), sumsMatch(world))
			}
		}
	}
	t.Logf("rank %d of %d: reduce-scatter of the shards matches the host's rank-order sums %s", rank, world, sumsMatch(world))
}

// The communicator is every collective ZeRO and the replicated strategy
// need; checked here, since the package itself does not import optim
// (docs/architecture.md, the layers).
var (
	_ optim.ShardComm  = (*Comm)(nil)
	_ optim.AllReducer = (*Comm)(nil)
)
