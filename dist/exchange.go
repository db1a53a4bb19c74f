package dist

// The exchange of NCCL's unique id: rank 0 listens on its port; every other
// rank connects (retrying until rank 0 is up), says who it is, receives the
// 128 bytes and acknowledges. Rank 0 returns once every rank has
// acknowledged, so a successful exchange also means all ranks are alive
// and agree on the world size. Everything runs under one time limit, and a
// timeout names the ranks and the address involved.
//
// Wire format (big-endian): hello = "GDRO" uint32(version) uint32(rank)
// uint32(size); reply = byte(0) and the id, or byte(1), uint16(length) and
// a refusal message; ack = byte(0).

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// IDBytes is the size of NCCL's unique id.
const IDBytes = 128

// ID is the payload the exchange carries.
type ID [IDBytes]byte

const protoVersion = 1

var magic = [4]byte{'G', 'D', 'R', 'O'}

// ErrTimeout is wrapped by an exchange that ran out of time.
var ErrTimeout = errors.New("timed out")

// ExchangeID gives every rank rank 0's id: rank 0 passes the id it made and
// serves it on w.Port; the others pass anything and receive it.
func ExchangeID(w World, id ID, timeout time.Duration) (ID, error) {
	if err := w.Validate(); err != nil {
		return ID{}, err
	}
	if w.Size == 1 {
		return id, nil
	}
	if w.Rank != 0 {
		return Receive(w, timeout)
	}
	s, err := Listen(w)
	if err != nil {
		return ID{}, err
	}
	defer s.Close()
	return id, s.Send(id, timeout)
}

// Server is rank 0's side of the exchange.
type Server struct {
	w  World
	ln net.Listener
}

// Listen opens rank 0's port on every interface (port 0: any free port,
// which Port then reports; for tests).
func Listen(w World) (*Server, error) {
	if w.Rank != 0 {
		return nil, fmt.Errorf("dist: rank %d cannot serve the id; rank 0 does", w.Rank)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(w.Port)))
	if err != nil {
		return nil, fmt.Errorf("dist: rank 0 cannot listen on port %d (in use? set --master-port or MASTER_PORT): %w", w.Port, err)
	}
	return &Server{w: w, ln: ln}, nil
}

// Port is the port the server listens on.
func (s *Server) Port() int { return s.ln.Addr().(*net.TCPAddr).Port }

// Close stops listening.
func (s *Server) Close() error { return s.ln.Close() }

// Send serves id until every other rank has acknowledged it, or fails after
// timeout naming the ranks that did not.
func (s *Server) Send(id ID, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	type result struct {
		rank int
		err  error
	}
	results := make(chan result)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			conn, err := s.ln.Accept()
			if err != nil {
				return // closed
			}
			go func() {
				r, err := s.serve(conn, id, deadline)
				select {
				case results <- result{r, err}:
				case <-done:
				}
			}()
		}
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	got := map[int]bool{0: true}
	var refused []string
	for len(got) < s.w.Size {
		select {
		case r := <-results:
			if r.err != nil {
				refused = append(refused, r.err.Error())
				continue
			}
			got[r.rank] = true
		case <-timer.C:
			var missing []string
			for r := 1; r < s.w.Size; r++ {
				if !got[r] {
					missing = append(missing, strconv.Itoa(r))
				}
			}
			extra := ""
			if len(refused) > 0 {
				extra = " (refused: " + strings.Join(refused, "; ") + ")"
			}
			return fmt.Errorf("dist: rank 0: %w after %s: rank(s) %s of %d did not fetch the NCCL id from port %d%s",
				ErrTimeout, timeout, strings.Join(missing, ", "), s.w.Size, s.Port(), extra)
		}
	}
	return nil
}

// serve answers one connection: reads the hello, checks it, sends the id
// and waits for the acknowledgement.
func (s *Server) serve(conn net.Conn, id ID, deadline time.Time) (int, error) {
	defer conn.Close()
	conn.SetDeadline(deadline)
	var hello [16]byte
	if _, err := io.ReadFull(conn, hello[:]); err != nil {
		return 0, fmt.Errorf("%s: reading hello: %v", conn.RemoteAddr(), err)
	}
	if !bytes.Equal(hello[:4], magic[:]) {
		return 0, fmt.Errorf("%s: not a gdrotrain rank", conn.RemoteAddr())
	}
	ver := binary.BigEndian.Uint32(hello[4:])
	rank := int(binary.BigEndian.Uint32(hello[8:]))
	size := int(binary.BigEndian.Uint32(hello[12:]))
	refuse := func(msg string) (int, error) {
		b := []byte(msg)
		out := append([]byte{1, byte(len(b) >> 8), byte(len(b))}, b...)
		conn.Write(out)
		return 0, fmt.Errorf("%s (rank %d): %s", conn.RemoteAddr(), rank, msg)
	}
	switch {
	case ver != protoVersion:
		return refuse(fmt.Sprintf("protocol version %d, rank 0 speaks %d (mixed gdrotrain binaries?)", ver, protoVersion))
	case size != s.w.Size:
		return refuse(fmt.Sprintf("world size %d, rank 0 has %d", size, s.w.Size))
	case rank < 1 || rank >= s.w.Size:
		return refuse(fmt.Sprintf("rank %d is not in 1…%d", rank, s.w.Size-1))
	}
	if _, err := conn.Write(append([]byte{0}, id[:]...)); err != nil {
		return 0, fmt.Errorf("rank %d at %s: sending the id: %v", rank, conn.RemoteAddr(), err)
	}
	var ack [1]byte
	if _, err := io.ReadFull(conn, ack[:]); err != nil || ack[0] != 0 {
		return 0, fmt.Errorf("rank %d at %s: no acknowledgement: %v", rank, conn.RemoteAddr(), err)
	}
	return rank, nil
}

// Receive fetches the id from rank 0, retrying the connection until
// timeout.
func Receive(w World, timeout time.Duration) (ID, error) {
	deadline := time.Now().Add(timeout)
	addr := w.Endpoint()
	var last error
	for delay := 20 * time.Millisecond; ; delay = min(2*delay, 500*time.Millisecond) {
		id, err, retry := receiveOnce(w, addr, deadline)
		if err == nil {
			return id, nil
		}
		if !retry {
			return ID{}, fmt.Errorf("dist: rank %d: %w", w.Rank, err)
		}
		last = err
		if time.Now().Add(delay).After(deadline) {
			break
		}
		time.Sleep(delay)
	}
	return ID{}, fmt.Errorf("dist: rank %d: %w after %s: no NCCL id from rank 0 at %s (is rank 0 running and the port reachable?); last error: %v",
		w.Rank, ErrTimeout, timeout, addr, last)
}

// receiveOnce makes one attempt; retry says whether another may succeed.
func receiveOnce(w World, addr string, deadline time.Time) (id ID, err error, retry bool) {
	d := net.Dialer{Deadline: deadline}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		return id, err, true
	}
	defer conn.Close()
	conn.SetDeadline(deadline)
	var hello [16]byte
	copy(hello[:], magic[:])
	binary.BigEndian.PutUint32(hello[4:], protoVersion)
	binary.BigEndian.PutUint32(hello[8:], uint32(w.Rank))
	binary.BigEndian.PutUint32(hello[12:], uint32(w.Size))
	if _, err := conn.Write(hello[:]); err != nil {
		return id, err, true
	}
	var status [1]byte
	if _, err := io.ReadFull(conn, status[:]); err != nil {
		return id, err, true // rank 0 may have been a stale listener, or restarting
	}
	if status[0] != 0 {
		var n [2]byte
		msg := make([]byte, 0)
		if _, err := io.ReadFull(conn, n[:]); err == nil {
			msg = make([]byte, int(n[0])<<8|int(n[1]))
			io.ReadFull(conn, msg)
		}
		return id, fmt.Errorf("rank 0 at %s refused: %s", addr, msg), false
	}
	if _, err := io.ReadFull(conn, id[:]); err != nil {
		return id, err, true
	}
	if _, err := conn.Write([]byte{0}); err != nil {
		return id, err, true
	}
	return id, nil, false
}
