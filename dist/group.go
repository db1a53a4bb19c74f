package dist

// The host control plane of a data-parallel run: a star of TCP connections
// with rank 0 as the hub. It carries what is small or must be exactly equal
// on every rank — the rows of a step, per-row signals, logging sums, the
// stop flag, state hashes, a barrier — and, on the CPU backend, the
// gradients themselves. (On GPUs the gradients go through NCCL.)
//
// Every collective is a round trip through rank 0: each other rank sends
// its contribution, rank 0 combines them in rank order and sends the same
// result back to all. Combining in rank order makes sums deterministic:
// every rank gets bitwise the same floats, whatever order the messages
// arrive in. Each call runs under the group's time limit; a rank that
// closes its connection (it died or failed) or does not arrive in time
// makes the others return an error naming the rank and the call, and the
// group is then broken: rank 0 closes every connection, so the ranks still
// waiting learn it at once rather than at their own time limit.
//
// Wire format (big-endian), after the handshake of auth.go: a call is
// uint64(sequence) byte(kind) uint16(name length) name uint64(payload
// length) payload; rank 0's answer is byte(0) uint64(length) payload, or
// byte(1) uint16(length) and why the call failed. In an authenticated group
// each message is followed by its tag (auth.go). Every length is checked
// against its limit before anything is allocated, and a payload's buffer
// grows only as its bytes arrive.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

var groupMagic = [4]byte{'G', 'D', 'R', 'G'}

// maxPayload bounds one message's payload (the CPU backend's gradients
// travel here). A payload's buffer grows only as its bytes arrive, so a
// length alone never allocates more than readChunk (auth.go).
const maxPayload = 1 << 36

// kind names a collective on the wire and in errors.
type kind byte

const (
	kindAllGather kind = iota + 1
	kindBroadcast
	kindSumF64
	kindMaxF64
	kindSumF32
	kindBarrier
)

func (k kind) String() string {
	switch k {
	case kindAllGather:
		return "all-gather"
	case kindBroadcast:
		return "broadcast"
	case kindSumF64, kindSumF32:
		return "all-reduce sum"
	case kindMaxF64:
		return "all-reduce max"
	case kindBarrier:
		return "barrier"
	}
	return fmt.Sprintf("collective %d", byte(k))
}

// Group is one rank's end of the control plane. Its methods are not safe
// for concurrent use: every rank calls the same collectives in the same
// order, as with NCCL.
type Group struct {
	w       World
	timeout time.Duration
	authed  bool
	peers   []*link // rank 0: peers[r] for r ≥ 1; others: peers[0] is rank 0
	seq     uint64
	step    int   // named in errors when > 0
	broken  error // the first failure; every later call returns it
}

// Rank is this process's rank; Size the number of ranks.
func (g *Group) Rank() int { return g.w.Rank }

// Size is the number of ranks.
func (g *Group) Size() int { return g.w.Size }

// Timeout is the time limit of each call.
func (g *Group) Timeout() time.Duration { return g.timeout }

// Authenticated reports whether the group was formed with a token: every
// rank proved it holds it and every message carries a tag.
func (g *Group) Authenticated() bool { return g.authed }

// SetStep names the training step in later errors (0: none).
func (g *Group) SetStep(step int) { g.step = step }

// Options say how a rank joins its group.
type Options struct {
	// Timeout limits forming the group and each later call.
	Timeout time.Duration
	// Token is the job's secret (TokenEnv): only ranks that prove they
	// hold it join. The zero Token forms an unauthenticated group, which
	// only ranks without a token join.
	Token Token
	// Bind is the address rank 0 listens on; "" is World.Addr, the address
	// the other ranks reach it at (so not every interface).
	Bind string
	// Logf, when set, reports on rank 0 where it listens and each
	// connection it refuses, as it happens.
	Logf func(format string, args ...any)
}

// Join connects this rank to the others: rank 0 listens on w.Port (at
// o.Bind) and waits for every other rank; the others connect, retrying
// until rank 0 is up. Setup and every later call run under o.Timeout. A
// world of one rank needs no connection.
func Join(w World, o Options) (*Group, error) { return JoinContext(context.Background(), w, o) }

// JoinContext is Join, given up as soon as ctx is done (the run's signal
// context): a rank waiting for a rank that never comes, or for rank 0,
// stops at once rather than at o.Timeout. The error then wraps ctx's
// (context.Canceled for a signal).
func JoinContext(ctx context.Context, w World, o Options) (*Group, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	if w.Size == 1 {
		return &Group{w: w, timeout: o.Timeout, authed: !o.Token.IsZero(), peers: make([]*link, 1)}, nil
	}
	if w.Rank == 0 {
		h, err := ListenGroup(w, o)
		if err != nil {
			return nil, err
		}
		defer h.Close()
		return h.AcceptContext(ctx)
	}
	return DialGroupContext(ctx, w, o)
}

// NewGroup forms an unauthenticated group (any process that reaches rank
// 0's port may join as a missing rank): for tests whose ranks run on one
// machine. A job joins with its token (Join).
func NewGroup(w World, timeout time.Duration) (*Group, error) {
	return Join(w, Options{Timeout: timeout})
}

// Hub is rank 0's listener while the group forms.
type Hub struct {
	w  World
	o  Options
	ln net.Listener
}

// handshakeLimit bounds one connection's handshake (a rank sends its hello
// as soon as it connects), so that silent connections do not pile up.
const handshakeLimit = 30 * time.Second

// Refusals beyond these counts are counted, not listed or logged.
const (
	maxListedRefusals = 8
	maxLoggedRefusals = 32
)

// ListenGroup opens rank 0's port (port 0: a free port, which Port
// reports; for tests) at o.Bind, else at w.Addr.
func ListenGroup(w World, o Options) (*Hub, error) {
	if w.Rank != 0 {
		return nil, fmt.Errorf("dist: rank %d cannot be the hub; rank 0 is", w.Rank)
	}
	host := o.Bind
	if host == "" {
		host = w.Addr
	}
	addr := net.JoinHostPort(host, strconv.Itoa(w.Port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dist: rank 0 cannot listen on %s (port in use? set --master-port or MASTER_PORT; not an address of this host? set dist.bind): %w", addr, err)
	}
	h := &Hub{w: w, o: o, ln: ln}
	at := ln.Addr().(*net.TCPAddr)
	h.logf("rank 0 listens on %s", at)
	if at.IP.IsLoopback() && host != "localhost" && !isLoopbackIP(host) {
		h.logf("warning: %s is %s on this host, a loopback address: ranks on other nodes cannot reach it (set dist.bind to this node's address on the network the ranks share)", host, at.IP)
	}
	return h, nil
}

func isLoopbackIP(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (h *Hub) logf(format string, args ...any) {
	if h.o.Logf != nil {
		h.o.Logf(format, args...)
	}
}

// Port is the port the hub listens on.
func (h *Hub) Port() int { return h.ln.Addr().(*net.TCPAddr).Port }

// Close stops listening; connections already accepted stay open.
func (h *Hub) Close() error { return h.ln.Close() }

// Accept waits until every other rank has joined, or fails after the time
// limit naming the ranks that did not. A connection that fails the
// handshake (wrong or missing token, wrong world, not a gdrotrain rank) or
// names a rank that has already joined is refused and logged, and the wait
// goes on for the real rank.
func (h *Hub) Accept() (*Group, error) { return h.AcceptContext(context.Background()) }

// AcceptContext is Accept, given up as soon as ctx is done: the ranks that
// joined are let go (their connections closed) and the error, naming the
// ranks still missing, wraps ctx's.
func (h *Hub) AcceptContext(ctx context.Context) (*Group, error) {
	timeout := h.o.Timeout
	g := &Group{w: h.w, timeout: timeout, authed: !h.o.Token.IsZero(), peers: make([]*link, h.w.Size)}
	if h.w.Size == 1 {
		return g, nil
	}
	type arrival struct {
		rank int
		l    *link
		conn net.Conn
		err  error
	}
	arrivals := make(chan arrival)
	done := make(chan struct{})
	deadline := time.Now().Add(timeout)
	go func() {
		for {
			conn, err := h.ln.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil {
				// Out of file descriptors, say, under a flood of
				// connections: wait for some to be dropped.
				select {
				case <-done:
					return
				case <-time.After(50 * time.Millisecond):
				}
				continue
			}
			go func() {
				r, l, err := h.greet(conn, deadline)
				select {
				case arrivals <- arrival{r, l, conn, err}:
				case <-done:
					conn.Close()
				}
			}()
		}
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var refused []string
	nRefused := 0
	refuse := func(why string) {
		nRefused++
		if len(refused) < maxListedRefusals {
			refused = append(refused, why)
		}
		switch {
		case nRefused <= maxLoggedRefusals:
			h.logf("refused %s", why)
		case nRefused == maxLoggedRefusals+1:
			h.logf("refused more connections; further refusals are counted, not logged")
		}
	}
	from := make([]string, h.w.Size)
	missing := func() string {
		var m []string
		for r := 1; r < h.w.Size; r++ {
			if g.peers[r] == nil {
				m = append(m, strconv.Itoa(r))
			}
		}
		return strings.Join(m, ", ")
	}
	for n := 1; n < h.w.Size; {
		select {
		case <-ctx.Done():
			close(done)
			m := missing()
			g.Close()
			return nil, fmt.Errorf("dist: rank 0: stopped while waiting for rank(s) %s of %d to join the group on port %d: %w",
				m, h.w.Size, h.Port(), context.Cause(ctx))
		case a := <-arrivals:
			switch {
			case a.err != nil:
				a.conn.Close()
				refuse(a.err.Error())
			case g.peers[a.rank] != nil:
				why := fmt.Sprintf("rank %d has already joined (from %s): a second connection for it is refused", a.rank, from[a.rank])
				a.conn.Write(refusal(why))
				a.conn.Close()
				refuse(fmt.Sprintf("%s (rank %d): %s", a.conn.RemoteAddr(), a.rank, why))
			default:
				if _, err := a.conn.Write([]byte{0}); err != nil {
					a.conn.Close()
					refuse(fmt.Sprintf("%s (rank %d): admitting it: %v", a.conn.RemoteAddr(), a.rank, err))
					continue
				}
				a.conn.SetDeadline(time.Time{})
				g.peers[a.rank] = a.l
				from[a.rank] = a.conn.RemoteAddr().String()
				n++
			}
		case <-timer.C:
			close(done)
			m := missing()
			g.Close()
			extra := ""
			if len(refused) > 0 {
				more := ""
				if nRefused > len(refused) {
					more = fmt.Sprintf("; and %d more", nRefused-len(refused))
				}
				extra = " (refused: " + strings.Join(refused, "; ") + more + ")"
			}
			return nil, fmt.Errorf("dist: rank 0: %w after %s: rank(s) %s of %d did not join the group on port %d%s",
				ErrTimeout, timeout, m, h.w.Size, h.Port(), extra)
		}
	}
	close(done)
	return g, nil
}

// greet runs rank 0's side of one connection's handshake (auth.go) up to
// the admission, which Accept decides: it returns the rank the connection
// proved to be, with its link.
func (h *Hub) greet(conn net.Conn, deadline time.Time) (int, *link, error) {
	conn.SetDeadline(earliest(deadline, time.Now().Add(handshakeLimit)))
	from := conn.RemoteAddr()
	hello := make([]byte, helloLen)
	if _, err := io.ReadFull(conn, hello[:16]); err != nil {
		return 0, nil, fmt.Errorf("%s: reading its hello: %v", from, err)
	}
	if !bytes.Equal(hello[:4], groupMagic[:]) {
		return 0, nil, fmt.Errorf("%s: not a gdrotrain rank", from)
	}
	ver := binary.BigEndian.Uint32(hello[4:])
	rank := int64(binary.BigEndian.Uint32(hello[8:]))
	size := int64(binary.BigEndian.Uint32(hello[12:]))
	refuse := func(why string) (int, *link, error) {
		conn.Write(refusal(why))
		return 0, nil, fmt.Errorf("%s (rank %d): %s", from, rank, why)
	}
	if ver != protoVersion {
		return refuse(fmt.Sprintf("protocol version %d, rank 0 speaks %d (mixed gdrotrain binaries?)", ver, protoVersion))
	}
	if _, err := io.ReadFull(conn, hello[16:]); err != nil {
		return 0, nil, fmt.Errorf("%s (rank %d): reading its hello: %v", from, rank, err)
	}
	mode, tok := hello[16], h.o.Token
	switch {
	case size != int64(h.w.Size):
		return refuse(fmt.Sprintf("world size %d, rank 0 has %d", size, h.w.Size))
	case rank < 1 || rank >= int64(h.w.Size):
		return refuse(fmt.Sprintf("rank %d is not in 1…%d", rank, h.w.Size-1))
	case mode != modeNone && mode != modeHMAC:
		return refuse(fmt.Sprintf("unknown authentication mode %d", mode))
	case mode == modeNone && !tok.IsZero():
		return refuse(fmt.Sprintf("no %s: rank 0 admits only ranks that hold the job's token (give every rank of the job the same %s)", TokenEnv, TokenEnv))
	case mode == modeHMAC && tok.IsZero():
		return refuse(fmt.Sprintf("the rank holds a %s but rank 0 runs unauthenticated (--insecure-dist): give every rank the token, or none", TokenEnv))
	}
	nonce0 := make([]byte, nonceLen)
	rand.Read(nonce0)
	if _, err := conn.Write(slices.Concat([]byte{0}, nonce0, tok.proof("rank 0", hello, nonce0))); err != nil {
		return 0, nil, fmt.Errorf("%s (rank %d): %v", from, rank, err)
	}
	var st [1]byte
	if _, err := io.ReadFull(conn, st[:]); err != nil {
		return 0, nil, fmt.Errorf("%s (rank %d): reading its proof: %v", from, rank, err)
	}
	switch st[0] {
	case 0:
	case 1:
		return 0, nil, fmt.Errorf("%s (rank %d) refused rank 0: %s", from, rank, readRefusal(conn))
	default:
		return 0, nil, fmt.Errorf("%s (rank %d): not a gdrotrain rank (status %d)", from, rank, st[0])
	}
	proof := make([]byte, proofLen)
	if _, err := io.ReadFull(conn, proof); err != nil {
		return 0, nil, fmt.Errorf("%s (rank %d): reading its proof: %v", from, rank, err)
	}
	if !hmac.Equal(proof, tok.proof("rank", hello, nonce0)) {
		return refuse(fmt.Sprintf("wrong %s: the rank's proof does not match rank 0's token", TokenEnv))
	}
	return int(rank), newLink(conn, tok, hello, nonce0, true), nil
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func refusal(msg string) []byte {
	if len(msg) > math.MaxUint16 {
		msg = msg[:math.MaxUint16]
	}
	return append([]byte{1, byte(len(msg) >> 8), byte(len(msg))}, msg...)
}

// readRefusal reads the uint16-prefixed reason after a status byte of 1
// during the handshake.
func readRefusal(r io.Reader) string {
	var n [2]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return "(no reason given)"
	}
	msg := make([]byte, int(n[0])<<8|int(n[1]))
	io.ReadFull(r, msg)
	return strings.ToValidUTF8(string(msg), "?")
}

// DialGroup connects a rank other than 0 to rank 0, retrying until the
// time limit.
func DialGroup(w World, o Options) (*Group, error) {
	return DialGroupContext(context.Background(), w, o)
}

// DialGroupContext is DialGroup, given up as soon as ctx is done (between
// attempts or during one); the error wraps ctx's.
func DialGroupContext(ctx context.Context, w World, o Options) (*Group, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	if w.Rank == 0 {
		return nil, errors.New("dist: rank 0 listens (Join or ListenGroup), it does not dial")
	}
	deadline := time.Now().Add(o.Timeout)
	addr := w.Endpoint()
	var last error
	stopped := func() error {
		return fmt.Errorf("dist: rank %d: stopped while joining rank 0 at %s: %w", w.Rank, addr, context.Cause(ctx))
	}
	for delay := 20 * time.Millisecond; ; delay = min(2*delay, 500*time.Millisecond) {
		l, err, retry := dialOnce(ctx, w, o.Token, addr, deadline)
		if ctx.Err() != nil {
			if err == nil {
				l.Close()
			}
			return nil, stopped()
		}
		if err == nil {
			return &Group{w: w, timeout: o.Timeout, authed: !o.Token.IsZero(), peers: []*link{l}}, nil
		}
		if !retry {
			return nil, fmt.Errorf("dist: rank %d: %w", w.Rank, err)
		}
		last = err
		if time.Now().Add(delay).After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, stopped()
		case <-time.After(delay):
		}
	}
	return nil, fmt.Errorf("dist: rank %d: %w after %s: could not join rank 0 at %s (is rank 0 running and the port reachable?); last error: %v",
		w.Rank, ErrTimeout, o.Timeout, addr, last)
}

// dialOnce runs one connection's handshake from rank w.Rank's side; retry
// says whether another attempt may succeed. ctx's end breaks the
// connection (the caller checks ctx).
func dialOnce(ctx context.Context, w World, tok Token, addr string, deadline time.Time) (*link, error, bool) {
	d := net.Dialer{Deadline: deadline}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err, true
	}
	defer context.AfterFunc(ctx, func() { conn.Close() })()
	fail := func(err error, retry bool) (*link, error, bool) {
		conn.Close()
		return nil, err, retry
	}
	conn.SetDeadline(earliest(deadline, time.Now().Add(handshakeLimit))) // a silent listener is retried
	hello := makeHello(w, tok)
	if _, err := conn.Write(hello); err != nil {
		return fail(err, true)
	}
	var st [1]byte
	if _, err := io.ReadFull(conn, st[:]); err != nil {
		return fail(err, true) // a stale listener, or rank 0 restarting
	}
	if st[0] != 0 {
		return fail(fmt.Errorf("rank 0 at %s refused: %s", addr, readRefusal(conn)), false)
	}
	challenge := make([]byte, nonceLen+proofLen)
	if _, err := io.ReadFull(conn, challenge); err != nil {
		return fail(err, true)
	}
	nonce0, proof0 := challenge[:nonceLen], challenge[nonceLen:]
	if !hmac.Equal(proof0, tok.proof("rank 0", hello, nonce0)) {
		conn.Write(refusal(fmt.Sprintf("rank 0's proof of %s is wrong: the ranks' tokens differ", TokenEnv)))
		return fail(fmt.Errorf("the process at %s did not prove it holds this job's %s: the ranks' tokens differ, or it is not this job's rank 0 (another job's, or a stranger's, on this port)", addr, TokenEnv), false)
	}
	if _, err := conn.Write(append([]byte{0}, tok.proof("rank", hello, nonce0)...)); err != nil {
		return fail(err, true)
	}
	if _, err := io.ReadFull(conn, st[:]); err != nil {
		return fail(err, true)
	}
	if st[0] != 0 {
		return fail(fmt.Errorf("rank 0 at %s refused: %s", addr, readRefusal(conn)), false)
	}
	conn.SetDeadline(time.Time{})
	return newLink(conn, tok, hello, nonce0, false), nil, false
}

// Close closes this rank's connections; the other ranks' next call fails,
// naming this rank.
func (g *Group) Close() error {
	var errs []error
	for i, c := range g.peers {
		if c != nil {
			errs = append(errs, c.Close())
			g.peers[i] = nil
		}
	}
	if g.broken == nil {
		g.broken = errors.New("the group is closed")
	}
	return errors.Join(errs...)
}

// AllGather returns every rank's blob, in rank order.
func (g *Group) AllGather(name string, blob []byte) ([][]byte, error) {
	out, err := g.call(kindAllGather, name, blob, func(parts [][]byte) ([]byte, error) {
		return packBlobs(parts), nil
	})
	if err != nil {
		return nil, err
	}
	parts, err := unpackBlobs(out, g.w.Size)
	if err != nil {
		return nil, g.fail(kindAllGather, name, err)
	}
	return parts, nil
}

// Broadcast returns rank 0's blob on every rank (the others' blob is
// ignored).
func (g *Group) Broadcast(name string, blob []byte) ([]byte, error) {
	if g.w.Rank != 0 {
		blob = nil
	}
	return g.call(kindBroadcast, name, blob, func(parts [][]byte) ([]byte, error) { return parts[0], nil })
}

// Barrier returns once every rank has called it.
func (g *Group) Barrier(name string) error {
	_, err := g.call(kindBarrier, name, nil, func([][]byte) ([]byte, error) { return nil, nil })
	return err
}

// SumFloat64 replaces xs by its sum over the ranks, added in rank order
// (so the result is bitwise the same on every rank and in every run).
func (g *Group) SumFloat64(name string, xs []float64) error {
	return g.reduce64(kindSumF64, name, xs, func(acc, x float64) float64 { return acc + x })
}

// MaxFloat64 replaces xs by its element-wise maximum over the ranks.
func (g *Group) MaxFloat64(name string, xs []float64) error {
	return g.reduce64(kindMaxF64, name, xs, math.Max)
}

// SumFloat32 replaces xs by its sum over the ranks, accumulated in float64
// in rank order and rounded once.
func (g *Group) SumFloat32(name string, xs []float32) error {
	in := make([]byte, 4*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint32(in[4*i:], math.Float32bits(x))
	}
	out, err := g.call(kindSumF32, name, in, func(parts [][]byte) ([]byte, error) {
		acc := make([]float64, len(xs))
		for r, p := range parts {
			if len(p) != len(in) {
				return nil, fmt.Errorf("rank %d sent %d float32s, rank 0 has %d", r, len(p)/4, len(xs))
			}
			for i := range acc {
				acc[i] += float64(math.Float32frombits(binary.LittleEndian.Uint32(p[4*i:])))
			}
		}
		res := make([]byte, len(in))
		for i, a := range acc {
			binary.LittleEndian.PutUint32(res[4*i:], math.Float32bits(float32(a)))
		}
		return res, nil
	})
	if err != nil {
		return err
	}
	if len(out) != len(in) {
		return g.fail(kindSumF32, name, fmt.Errorf("rank 0 answered %d float32s for %d", len(out)/4, len(xs)))
	}
	for i := range xs {
		xs[i] = math.Float32frombits(binary.LittleEndian.Uint32(out[4*i:]))
	}
	return nil
}

func (g *Group) reduce64(k kind, name string, xs []float64, op func(acc, x float64) float64) error {
	in := make([]byte, 8*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint64(in[8*i:], math.Float64bits(x))
	}
	out, err := g.call(k, name, in, func(parts [][]byte) ([]byte, error) {
		for r, p := range parts {
			if len(p) != len(in) {
				return nil, fmt.Errorf("rank %d sent %d values, rank 0 has %d", r, len(p)/8, len(xs))
			}
		}
		res := slices.Clone(parts[0])
		for _, p := range parts[1:] {
			for i := 0; i < len(res); i += 8 {
				a := math.Float64frombits(binary.LittleEndian.Uint64(res[i:]))
				b := math.Float64frombits(binary.LittleEndian.Uint64(p[i:]))
				binary.LittleEndian.PutUint64(res[i:], math.Float64bits(op(a, b)))
			}
		}
		return res, nil
	})
	if err != nil {
		return err
	}
	if len(out) != len(in) {
		return g.fail(k, name, fmt.Errorf("rank 0 answered %d values for %d", len(out)/8, len(xs)))
	}
	for i := range xs {
		xs[i] = math.Float64frombits(binary.LittleEndian.Uint64(out[8*i:]))
	}
	return nil
}

// call runs one collective: rank 0 gathers every rank's payload (its own
// first), combines them and sends the result to every rank.
func (g *Group) call(k kind, name string, payload []byte, combine func(parts [][]byte) ([]byte, error)) ([]byte, error) {
	if g.broken != nil {
		return nil, g.wrap(k, name, g.broken)
	}
	g.seq++
	if g.w.Size == 1 {
		out, err := combine([][]byte{payload})
		if err != nil {
			return nil, g.fail(k, name, err)
		}
		return out, nil
	}
	if g.w.Rank != 0 {
		return g.callLeaf(k, name, payload)
	}
	return g.callHub(k, name, payload, combine)
}

func (g *Group) callLeaf(k kind, name string, payload []byte) ([]byte, error) {
	l := g.peers[0]
	l.conn.SetDeadline(time.Now().Add(g.timeout))
	if err := writeCall(l, g.seq, k, name, payload); err != nil {
		return nil, g.fail(k, name, peerErr(0, err, g.timeout))
	}
	out, why, err := readAnswer(l)
	if err != nil {
		return nil, g.fail(k, name, peerErr(0, err, g.timeout))
	}
	if why != "" {
		return nil, g.fail(k, name, fmt.Errorf("rank 0 failed the call: %s", why))
	}
	return out, nil
}

func (g *Group) callHub(k kind, name string, payload []byte, combine func(parts [][]byte) ([]byte, error)) ([]byte, error) {
	deadline := time.Now().Add(g.timeout)
	parts := make([][]byte, g.w.Size)
	parts[0] = payload
	errs := make([]error, g.w.Size)
	var wg sync.WaitGroup
	for r := 1; r < g.w.Size; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			parts[r], errs[r] = g.readFrom(r, deadline, k, name)
		}()
	}
	wg.Wait()
	if err := firstErr(errs); err != nil {
		g.tellAll(err.Error(), deadline)
		return nil, g.fail(k, name, err)
	}
	out, err := combine(parts)
	if err != nil {
		g.tellAll(err.Error(), deadline)
		return nil, g.fail(k, name, err)
	}
	for r := 1; r < g.w.Size; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := g.peers[r]
			l.conn.SetDeadline(deadline)
			hdr := binary.BigEndian.AppendUint64([]byte{0}, uint64(len(out)))
			if err := l.send(hdr, out); err != nil {
				errs[r] = peerErr(r, err, g.timeout)
			}
		}()
	}
	wg.Wait()
	if err := firstErr(errs); err != nil {
		return nil, g.fail(k, name, err)
	}
	return out, nil
}

// readFrom reads rank r's part of the current call and checks that r is at
// the same call.
func (g *Group) readFrom(r int, deadline time.Time, k kind, name string) ([]byte, error) {
	l := g.peers[r]
	l.conn.SetDeadline(deadline)
	seq, rk, nm, p, err := readCall(l)
	if err != nil {
		return nil, peerErr(r, err, g.timeout)
	}
	if seq != g.seq || rk != k || string(nm) != name {
		return nil, fmt.Errorf("rank %d is at %s %q (call %d) while rank 0 is at %s %q (call %d): the ranks diverged",
			r, rk, nm, seq, k, name, g.seq)
	}
	return p, nil
}

// tellAll sends a failure to every rank still connected (best effort), so
// they report rank 0's reason rather than a closed connection.
func (g *Group) tellAll(why string, deadline time.Time) {
	for r := 1; r < g.w.Size; r++ {
		if l := g.peers[r]; l != nil {
			l.conn.SetDeadline(deadline)
			l.send(refusal(why))
		}
	}
}

// fail breaks the group (closing every connection, so the ranks still
// waiting fail at once) and returns err with the rank and the call.
func (g *Group) fail(k kind, name string, err error) error {
	wrapped := g.wrap(k, name, err)
	if g.broken == nil {
		g.Close()
		g.broken = err
	}
	return wrapped
}

func (g *Group) wrap(k kind, name string, err error) error {
	at := ""
	if g.step > 0 {
		at = fmt.Sprintf(" of step %d", g.step)
	}
	return fmt.Errorf("dist: rank %d: %s %q%s: %w", g.w.Rank, k, name, at, err)
}

// peerErr says what happened to the connection with rank r.
func peerErr(r int, err error, timeout time.Duration) error {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("rank %d did not answer within %s: %w", r, timeout, ErrTimeout)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed), isReset(err):
		return fmt.Errorf("rank %d closed the connection: %w", r, ErrPeerGone)
	}
	return fmt.Errorf("rank %d: %w", r, err)
}

func isReset(err error) bool {
	s := err.Error()
	return strings.Contains(s, "connection reset") || strings.Contains(s, "broken pipe")
}

// ErrPeerGone is wrapped when another rank closed its connection.
var ErrPeerGone = errors.New("peer gone")

func firstErr(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// writeCall sends one call: uint64(seq) byte(kind) uint16(name length)
// name uint64(payload length) payload.
func writeCall(l *link, seq uint64, k kind, name string, payload []byte) error {
	if len(name) > math.MaxUint16 {
		name = name[:math.MaxUint16]
	}
	hdr := make([]byte, 0, 19+len(name))
	hdr = binary.BigEndian.AppendUint64(hdr, seq)
	hdr = append(hdr, byte(k), byte(len(name)>>8), byte(len(name)))
	hdr = append(hdr, name...)
	hdr = binary.BigEndian.AppendUint64(hdr, uint64(len(payload)))
	return l.send(hdr, payload)
}

// readCall reads one call from a rank (rank 0's side of writeCall).
func readCall(l *link) (seq uint64, k kind, name string, payload []byte, err error) {
	l.begin()
	var hdr [11]byte
	if err := l.read(hdr[:]); err != nil {
		return 0, 0, "", nil, err
	}
	nm := make([]byte, int(hdr[9])<<8|int(hdr[10]))
	if err := l.read(nm); err != nil {
		return 0, 0, "", nil, err
	}
	if payload, err = l.readBlob(maxPayload); err != nil {
		return 0, 0, "", nil, err
	}
	if err := l.end(); err != nil {
		return 0, 0, "", nil, err
	}
	return binary.BigEndian.Uint64(hdr[:]), kind(hdr[8]), strings.ToValidUTF8(string(nm), "?"), payload, nil
}

// readAnswer reads rank 0's answer to a call: its payload, or why rank 0
// failed the call.
func readAnswer(l *link) (out []byte, why string, err error) {
	l.begin()
	var status [1]byte
	if err := l.read(status[:]); err != nil {
		return nil, "", err
	}
	switch status[0] {
	case 0:
		out, err = l.readBlob(maxPayload)
	case 1:
		why, err = l.readRefusal()
		why = strings.ToValidUTF8(why, "?")
		if err == nil && why == "" {
			why = "(no reason given)"
		}
	default:
		err = fmt.Errorf("an answer of unknown status %d (not a gdrotrain rank 0?)", status[0])
	}
	if err != nil {
		return nil, "", err
	}
	if err := l.end(); err != nil {
		return nil, "", err
	}
	return out, why, nil
}

// packBlobs concatenates blobs, each with its uint64 length.
func packBlobs(parts [][]byte) []byte {
	var buf []byte
	for _, p := range parts {
		buf = binary.BigEndian.AppendUint64(buf, uint64(len(p)))
		buf = append(buf, p...)
	}
	return buf
}

func unpackBlobs(b []byte, n int) ([][]byte, error) {
	out := make([][]byte, 0, n)
	for len(b) > 0 {
		if len(out) == n {
			return nil, fmt.Errorf("all-gather answer holds more than %d parts", n)
		}
		if len(b) < 8 {
			return nil, errors.New("truncated all-gather answer")
		}
		size := binary.BigEndian.Uint64(b)
		b = b[8:]
		if size > uint64(len(b)) {
			return nil, errors.New("truncated all-gather answer")
		}
		out = append(out, b[:size])
		b = b[size:]
	}
	if len(out) != n {
		return nil, fmt.Errorf("all-gather answer holds %d parts, want %d", len(out), n)
	}
	return out, nil
}

// DifferingRanks lists the ranks whose value (one per rank, from an
// all-gather) differs from rank 0's, for errors.
func DifferingRanks(values []string) []int {
	var out []int
	for r, v := range values {
		if v != values[0] {
			out = append(out, r)
		}
	}
	return out
}
