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
// Wire format (big-endian). Setup: hello = "GDRG" uint32(version)
// uint32(rank) uint32(size); reply = byte(0), or byte(1) uint16(length) and
// a refusal. A call: uint64(sequence) byte(kind) uint16(name length) name
// uint64(payload length) payload. Rank 0's answer: byte(0) uint64(length)
// payload, or byte(1) uint16(length) and why the call failed.

import (
	"bytes"
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

// maxPayload bounds one message, so that a stray connection cannot make a
// rank allocate without bound.
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
	peers   []net.Conn // rank 0: peers[r] for r ≥ 1; others: peers[0] is rank 0
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

// SetStep names the training step in later errors (0: none).
func (g *Group) SetStep(step int) { g.step = step }

// NewGroup connects this rank to the others: rank 0 listens on w.Port and
// waits for every other rank; the others connect, retrying until rank 0 is
// up. Setup and every later call run under timeout. A world of one rank
// needs no connection.
func NewGroup(w World, timeout time.Duration) (*Group, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	if w.Rank == 0 {
		h, err := ListenGroup(w)
		if err != nil {
			return nil, err
		}
		defer h.Close()
		return h.Accept(timeout)
	}
	return DialGroup(w, timeout)
}

// Hub is rank 0's listener while the group forms.
type Hub struct {
	w  World
	ln net.Listener
}

// ListenGroup opens rank 0's port (port 0: a free port, which Port
// reports; for tests).
func ListenGroup(w World) (*Hub, error) {
	if w.Rank != 0 {
		return nil, fmt.Errorf("dist: rank %d cannot be the hub; rank 0 is", w.Rank)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(w.Port)))
	if err != nil {
		return nil, fmt.Errorf("dist: rank 0 cannot listen on port %d (in use? set --master-port or MASTER_PORT): %w", w.Port, err)
	}
	return &Hub{w: w, ln: ln}, nil
}

// Port is the port the hub listens on.
func (h *Hub) Port() int { return h.ln.Addr().(*net.TCPAddr).Port }

// Close stops listening; connections already accepted stay open.
func (h *Hub) Close() error { return h.ln.Close() }

// Accept waits until every other rank has connected, or fails after timeout
// naming the ranks that did not.
func (h *Hub) Accept(timeout time.Duration) (*Group, error) {
	g := &Group{w: h.w, timeout: timeout, peers: make([]net.Conn, h.w.Size)}
	if h.w.Size == 1 {
		return g, nil
	}
	type arrival struct {
		rank int
		conn net.Conn
		err  error
	}
	arrivals := make(chan arrival)
	done := make(chan struct{})
	deadline := time.Now().Add(timeout)
	go func() {
		for {
			conn, err := h.ln.Accept()
			if err != nil {
				return // closed
			}
			go func() {
				r, err := h.greet(conn, deadline)
				select {
				case arrivals <- arrival{r, conn, err}:
				case <-done:
					conn.Close()
				}
			}()
		}
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var refused []string
	for n := 1; n < h.w.Size; {
		select {
		case a := <-arrivals:
			switch {
			case a.err != nil:
				a.conn.Close()
				refused = append(refused, a.err.Error())
			case g.peers[a.rank] != nil:
				a.conn.Close()
				refused = append(refused, fmt.Sprintf("rank %d connected twice", a.rank))
			default:
				a.conn.SetDeadline(time.Time{})
				g.peers[a.rank] = a.conn
				n++
			}
		case <-timer.C:
			close(done)
			g.Close()
			var missing []string
			for r := 1; r < h.w.Size; r++ {
				if g.peers[r] == nil {
					missing = append(missing, strconv.Itoa(r))
				}
			}
			extra := ""
			if len(refused) > 0 {
				extra = " (refused: " + strings.Join(refused, "; ") + ")"
			}
			return nil, fmt.Errorf("dist: rank 0: %w after %s: rank(s) %s of %d did not join the group on port %d%s",
				ErrTimeout, timeout, strings.Join(missing, ", "), h.w.Size, h.Port(), extra)
		}
	}
	close(done)
	return g, nil
}

// greet reads and answers one rank's hello.
func (h *Hub) greet(conn net.Conn, deadline time.Time) (int, error) {
	conn.SetDeadline(deadline)
	var hello [16]byte
	if _, err := io.ReadFull(conn, hello[:]); err != nil {
		return 0, fmt.Errorf("%s: reading hello: %v", conn.RemoteAddr(), err)
	}
	if !bytes.Equal(hello[:4], groupMagic[:]) {
		return 0, fmt.Errorf("%s: not a gdrotrain rank", conn.RemoteAddr())
	}
	ver := binary.BigEndian.Uint32(hello[4:])
	rank := int(binary.BigEndian.Uint32(hello[8:]))
	size := int(binary.BigEndian.Uint32(hello[12:]))
	var why string
	switch {
	case ver != protoVersion:
		why = fmt.Sprintf("protocol version %d, rank 0 speaks %d (mixed gdrotrain binaries?)", ver, protoVersion)
	case size != h.w.Size:
		why = fmt.Sprintf("world size %d, rank 0 has %d", size, h.w.Size)
	case rank < 1 || rank >= h.w.Size:
		why = fmt.Sprintf("rank %d is not in 1…%d", rank, h.w.Size-1)
	}
	if why != "" {
		conn.Write(refusal(why))
		return 0, fmt.Errorf("%s (rank %d): %s", conn.RemoteAddr(), rank, why)
	}
	if _, err := conn.Write([]byte{0}); err != nil {
		return 0, fmt.Errorf("rank %d at %s: %v", rank, conn.RemoteAddr(), err)
	}
	return rank, nil
}

func refusal(msg string) []byte {
	if len(msg) > math.MaxUint16 {
		msg = msg[:math.MaxUint16]
	}
	return append([]byte{1, byte(len(msg) >> 8), byte(len(msg))}, msg...)
}

// readRefusal reads the uint16-prefixed message after a status byte of 1.
func readRefusal(r io.Reader) string {
	var n [2]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return "(no reason given)"
	}
	msg := make([]byte, int(n[0])<<8|int(n[1]))
	io.ReadFull(r, msg)
	return string(msg)
}

// DialGroup connects a rank other than 0 to rank 0, retrying until timeout.
func DialGroup(w World, timeout time.Duration) (*Group, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	if w.Rank == 0 {
		return nil, errors.New("dist: rank 0 listens (NewGroup or ListenGroup), it does not dial")
	}
	deadline := time.Now().Add(timeout)
	addr := w.Endpoint()
	var last error
	for delay := 20 * time.Millisecond; ; delay = min(2*delay, 500*time.Millisecond) {
		conn, err, retry := dialOnce(w, addr, deadline)
		if err == nil {
			g := &Group{w: w, timeout: timeout, peers: []net.Conn{conn}}
			return g, nil
		}
		if !retry {
			return nil, fmt.Errorf("dist: rank %d: %w", w.Rank, err)
		}
		last = err
		if time.Now().Add(delay).After(deadline) {
			break
		}
		time.Sleep(delay)
	}
	return nil, fmt.Errorf("dist: rank %d: %w after %s: could not join rank 0 at %s (is rank 0 running and the port reachable?); last error: %v",
		w.Rank, ErrTimeout, timeout, addr, last)
}

func dialOnce(w World, addr string, deadline time.Time) (net.Conn, error, bool) {
	d := net.Dialer{Deadline: deadline}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err, true
	}
	conn.SetDeadline(deadline)
	var hello [16]byte
	copy(hello[:], groupMagic[:])
	binary.BigEndian.PutUint32(hello[4:], protoVersion)
	binary.BigEndian.PutUint32(hello[8:], uint32(w.Rank))
	binary.BigEndian.PutUint32(hello[12:], uint32(w.Size))
	var status [1]byte
	if _, err := conn.Write(hello[:]); err != nil {
		conn.Close()
		return nil, err, true
	}
	if _, err := io.ReadFull(conn, status[:]); err != nil {
		conn.Close()
		return nil, err, true
	}
	if status[0] != 0 {
		msg := readRefusal(conn)
		conn.Close()
		return nil, fmt.Errorf("rank 0 at %s refused: %s", addr, msg), false
	}
	conn.SetDeadline(time.Time{})
	return conn, nil, false
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
	c := g.peers[0]
	c.SetDeadline(time.Now().Add(g.timeout))
	if err := writeCall(c, g.seq, k, name, payload); err != nil {
		return nil, g.fail(k, name, peerErr(0, err, g.timeout))
	}
	var status [1]byte
	if _, err := io.ReadFull(c, status[:]); err != nil {
		return nil, g.fail(k, name, peerErr(0, err, g.timeout))
	}
	if status[0] != 0 {
		return nil, g.fail(k, name, fmt.Errorf("rank 0 failed the call: %s", readRefusal(c)))
	}
	out, err := readBlob(c)
	if err != nil {
		return nil, g.fail(k, name, peerErr(0, err, g.timeout))
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
			c := g.peers[r]
			c.SetDeadline(deadline)
			hdr := make([]byte, 9)
			binary.BigEndian.PutUint64(hdr[1:], uint64(len(out)))
			if _, err := c.Write(append(hdr, out...)); err != nil {
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
	c := g.peers[r]
	c.SetDeadline(deadline)
	var hdr [11]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return nil, peerErr(r, err, g.timeout)
	}
	seq, rk := binary.BigEndian.Uint64(hdr[:]), kind(hdr[8])
	nm := make([]byte, int(hdr[9])<<8|int(hdr[10]))
	if _, err := io.ReadFull(c, nm); err != nil {
		return nil, peerErr(r, err, g.timeout)
	}
	p, err := readBlob(c)
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
		if c := g.peers[r]; c != nil {
			c.SetDeadline(deadline)
			c.Write(refusal(why))
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

func writeCall(w io.Writer, seq uint64, k kind, name string, payload []byte) error {
	if len(name) > math.MaxUint16 {
		name = name[:math.MaxUint16]
	}
	buf := make([]byte, 0, 19+len(name)+len(payload))
	buf = binary.BigEndian.AppendUint64(buf, seq)
	buf = append(buf, byte(k), byte(len(name)>>8), byte(len(name)))
	buf = append(buf, name...)
	buf = binary.BigEndian.AppendUint64(buf, uint64(len(payload)))
	buf = append(buf, payload...)
	_, err := w.Write(buf)
	return err
}

func readBlob(r io.Reader) ([]byte, error) {
	var n [8]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint64(n[:])
	if size > maxPayload {
		return nil, fmt.Errorf("message of %d bytes: over the %d-byte limit (not a gdrotrain rank?)", size, uint64(maxPayload))
	}
	b := make([]byte, size)
	_, err := io.ReadFull(r, b)
	return b, err
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
