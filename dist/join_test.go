package dist

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// Joining stops as soon as the run's context ends (a signal), in each
// place a rank can wait while the group forms, rather than at the group's
// time limit: before, a rank whose peer died at start-up waited out
// dist.timeout_s (30 minutes by default), deaf to SIGTERM and SIGUSR1. The
// time limit here is far beyond the test's own.
func TestJoinStopsWithItsContext(t *testing.T) {
	const limit = time.Hour
	tok := NewToken()
	cases := []struct {
		name string
		// join starts the wait under ctx and returns its error; ready is
		// closed once the rank is waiting.
		join func(t *testing.T, ctx context.Context, ready chan<- struct{}) error
		want string
	}{
		{"rank 0 waits for a rank that never comes", func(t *testing.T, ctx context.Context, ready chan<- struct{}) error {
			hub, err := ListenGroup(World{Rank: 0, Size: 3, Addr: "127.0.0.1"}, Options{Timeout: limit, Token: tok})
			if err != nil {
				t.Fatal(err)
			}
			defer hub.Close()
			// Rank 1 joins; rank 2 never does.
			joined := make(chan *Group, 1)
			go func() {
				g, err := DialGroup(World{Rank: 1, Size: 3, Addr: "127.0.0.1", Port: hub.Port()}, Options{Timeout: limit, Token: tok})
				if err != nil {
					t.Error(err)
				}
				joined <- g
				close(ready)
			}()
			_, err = hub.AcceptContext(ctx)
			// Rank 1, admitted, learns that the group is gone.
			if g := <-joined; g != nil {
				if berr := g.Barrier("first"); berr == nil {
					t.Error("rank 1: a call after rank 0 gave up succeeded")
				}
				g.Close()
			}
			return err
		}, "stopped while waiting for rank(s) 2 of 3 to join"},
		{"a rank waits for rank 0 to listen", func(t *testing.T, ctx context.Context, ready chan<- struct{}) error {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			port := ln.Addr().(*net.TCPAddr).Port
			ln.Close() // nobody listens: every dial is refused and retried
			close(ready)
			_, err = DialGroupContext(ctx, World{Rank: 1, Size: 2, Addr: "127.0.0.1", Port: port}, Options{Timeout: limit, Token: tok})
			return err
		}, "stopped while joining rank 0 at 127.0.0.1"},
		{"a rank waits for a silent rank 0's handshake", func(t *testing.T, ctx context.Context, ready chan<- struct{}) error {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept() // accepts, reads nothing, answers nothing
				if err != nil {
					return
				}
				close(ready)
				defer c.Close()
				var b [1]byte
				c.Read(b[:]) // until the rank gives up and closes
			}()
			_, err = JoinContext(ctx, World{Rank: 1, Size: 2, Addr: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port}, Options{Timeout: limit, Token: tok})
			return err
		}, "stopped while joining rank 0 at 127.0.0.1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ready := make(chan struct{})
			errc := make(chan error, 1)
			go func() { errc <- c.join(t, ctx, ready) }()
			<-ready
			cancel()
			err := <-errc
			if !errors.Is(err, context.Canceled) || errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v; want an error wrapping context.Canceled saying %q", err, c.want)
			}
		})
	}
}
