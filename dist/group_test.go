package dist

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
)

// startGroup forms a group of size ranks over loopback, one per goroutine's
// use, with the given time limit.
func startGroup(t *testing.T, size int, timeout time.Duration) []*Group {
	t.Helper()
	groups, err := Loopback(size, timeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, g := range groups {
			g.Close()
		}
	})
	return groups
}

// onAll runs f on every rank concurrently and returns the errors by rank.
func onAll(groups []*Group, f func(g *Group) error) []error {
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	for r, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = f(g)
		}()
	}
	wg.Wait()
	return errs
}

func TestGroupCollectives(t *testing.T) {
	for _, size := range []int{1, 2, 4} {
		t.Run(fmt.Sprint(size, " ranks"), func(t *testing.T) {
			groups := startGroup(t, size, 10*time.Second)
			var mu sync.Mutex
			got := map[int][]string{}
			errs := onAll(groups, func(g *Group) error {
				r := g.Rank()
				g.SetStep(7)
				parts, err := g.AllGather("names", []byte(strings.Repeat("x", r)))
				if err != nil {
					return err
				}
				b, err := g.Broadcast("id", []byte(fmt.Sprintf("from rank %d", r)))
				if err != nil {
					return err
				}
				// 0.1 + 0.2 + 0.3 + … in rank order: the rounding is the
				// hub's, so every rank holds the same bits.
				xs := []float64{0.1 * float64(r+1), float64(r)}
				if err := g.SumFloat64("sum", xs); err != nil {
					return err
				}
				mx := []float64{float64(r), -float64(r + 1)}
				if err := g.MaxFloat64("max", mx); err != nil {
					return err
				}
				fs := []float32{1, float32(r) / 3}
				if err := g.SumFloat32("grads", fs); err != nil {
					return err
				}
				if err := g.Barrier("end"); err != nil {
					return err
				}
				var s []string
				for _, p := range parts {
					s = append(s, string(p))
				}
				mu.Lock()
				got[r] = []string{strings.Join(s, ","), string(b), fmt.Sprint(math.Float64bits(xs[0]), xs[1]), fmt.Sprint(mx), fmt.Sprint(fs)}
				mu.Unlock()
				return nil
			})
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			var names []string
			sum0, sum1 := 0.0, 0.0
			var f1 float64
			for r := 0; r < size; r++ {
				names = append(names, strings.Repeat("x", r))
				sum0 += 0.1 * float64(r+1)
				sum1 += float64(r)
				f1 += float64(float32(r) / 3)
			}
			want := []string{strings.Join(names, ","), "from rank 0", fmt.Sprint(math.Float64bits(sum0), sum1),
				fmt.Sprint([]float64{float64(size - 1), -1}), fmt.Sprint([]float32{float32(size), float32(f1)})}
			for r := 0; r < size; r++ {
				if strings.Join(got[r], "|") != strings.Join(want, "|") {
					t.Errorf("rank %d got %q, want %q", r, got[r], want)
				}
			}
		})
	}
}

// A rank that closes its connection, one that never calls, and ranks at
// different calls make every other rank return an error naming the culprit
// and the call, well within the time limit's order (never a hang).
func TestGroupFailures(t *testing.T) {
	// 5 s, not less: the ranks that behave must all reach the call within
	// it even on a loaded 2-core machine (only "never arrives" waits it out).
	const timeout = 5 * time.Second
	cases := []struct {
		name   string
		bad    int                  // the misbehaving rank
		badDo  func(g *Group) error // what it does instead of the all-gather
		want   map[int]string       // error text by rank (the bad rank aside)
		isTime bool                 // the others fail by the time limit
	}{
		{"rank 2 closes", 2, func(g *Group) error { return g.Close() },
			map[int]string{0: `dist: rank 0: all-gather "rows" of step 7: rank 2 closed the connection`,
				1: "rank 0", 3: "rank 0"}, false},
		{"rank 1 never arrives", 1, func(g *Group) error { time.Sleep(timeout + 200*time.Millisecond); return nil },
			map[int]string{0: `all-gather "rows" of step 7: rank 1 did not answer within 5s`, 2: "rank 0", 3: "rank 0"}, true},
		{"rank 3 at another call", 3, func(g *Group) error { return g.Barrier("elsewhere") },
			map[int]string{0: `rank 3 is at barrier "elsewhere"`, 1: `rank 3 is at barrier "elsewhere"`, 2: "diverged"}, false},
		{"rank 0 closes", 0, func(g *Group) error { return g.Close() },
			map[int]string{1: "rank 0 closed the connection", 2: "rank 0 closed the connection", 3: "rank 0 closed the connection"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			groups := startGroup(t, 4, timeout)
			errs := onAll(groups, func(g *Group) error {
				g.SetStep(7)
				if g.Rank() == c.bad {
					return c.badDo(g)
				}
				_, err := g.AllGather("rows", []byte{byte(g.Rank())})
				return err
			})
			for r, want := range c.want {
				if errs[r] == nil || !strings.Contains(errs[r].Error(), want) {
					t.Errorf("rank %d: %v, want an error with %q", r, errs[r], want)
				}
				if c.isTime && r == 0 && !errors.Is(errs[r], ErrTimeout) {
					t.Errorf("rank 0: %v does not wrap ErrTimeout", errs[r])
				}
			}
			// The group stays broken: a later call fails at once.
			for r, g := range groups {
				if r == c.bad {
					continue
				}
				if err := g.Barrier("after"); err == nil {
					t.Errorf("rank %d: a call after the failure succeeded", r)
				}
			}
		})
	}
}

func TestGroupSetup(t *testing.T) {
	// Nobody joins: rank 0 names the missing ranks.
	hub, err := ListenGroup(World{Rank: 0, Size: 3, Addr: "127.0.0.1", Port: 0}, Options{Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = hub.Accept()
	hub.Close()
	if err == nil || !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "rank(s) 1, 2 of 3 did not join") {
		t.Errorf("no ranks joined: %v", err)
	}
	// No rank 0: the others give up naming the address.
	_, err = DialGroup(World{Rank: 1, Size: 2, Addr: "127.0.0.1", Port: hub.Port()}, Options{Timeout: 200 * time.Millisecond})
	if err == nil || !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "could not join rank 0 at 127.0.0.1") {
		t.Errorf("no rank 0: %v", err)
	}
	// A world-size mismatch is refused with both sizes.
	hub, err = ListenGroup(World{Rank: 0, Size: 2, Addr: "127.0.0.1", Port: 0}, Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer hub.Close()
	go hub.Accept()
	_, err = DialGroup(World{Rank: 1, Size: 3, Addr: "127.0.0.1", Port: hub.Port()}, Options{Timeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "world size 3, rank 0 has 2") {
		t.Errorf("size mismatch: %v", err)
	}
}
