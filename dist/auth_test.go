package dist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// logLines collects a hub's log (Options.Logf).
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// waitLog waits until the log holds n lines containing s.
func (l *logLines) waitLog(t *testing.T, s string, n int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); strings.Count(l.String(), s) < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("rank 0 never logged %q %d times; its log:\n%s", s, n, l)
		}
	}
}

// hubOf starts rank 0 of size ranks with options o on a free loopback port
// and returns its port and the outcome of Accept.
func hubOf(t *testing.T, size int, o Options) (int, <-chan groupOrErr) {
	t.Helper()
	h, err := ListenGroup(World{Rank: 0, Size: size, Addr: "127.0.0.1"}, o)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan groupOrErr, 1)
	go func() {
		defer h.Close()
		g, err := h.Accept()
		out <- groupOrErr{g, err}
	}()
	return h.Port(), out
}

type groupOrErr struct {
	g   *Group
	err error
}

// rawHello is a hello as any program could write it: version ver, rank r
// of size, mode, and a nonce of zeros.
func rawHello(ver uint32, r, size int, mode byte) []byte {
	h := make([]byte, helloLen)
	copy(h, "GDRG")
	binary.BigEndian.PutUint32(h[4:], ver)
	binary.BigEndian.PutUint32(h[8:], uint32(r))
	binary.BigEndian.PutUint32(h[12:], uint32(size))
	h[16] = mode
	return h
}

// impostor connects to port, writes b and returns what rank 0 answers
// before it closes the connection.
func impostor(t *testing.T, port int, b []byte) string {
	t.Helper()
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(c)
	return string(got)
}

// twoRanksTrain checks that a formed group of two works: an all-gather, a
// sum and a barrier, as training does.
func twoRanksTrain(t *testing.T, g0, g1 *Group) {
	t.Helper()
	errs := onAll([]*Group{g0, g1}, func(g *Group) error {
		parts, err := g.AllGather("rows", []byte{byte(g.Rank())})
		if err != nil {
			return err
		}
		if len(parts) != 2 || parts[1][0] != 1 {
			return fmt.Errorf("all-gather: %v", parts)
		}
		xs := []float64{1}
		if err := g.SumFloat64("sum", xs); err != nil {
			return err
		}
		if xs[0] != 2 {
			return fmt.Errorf("sum: %v", xs)
		}
		return g.Barrier("end")
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// TestImpostorRefused: rank 0 of a job with a token refuses, one after the
// other, the hand-written 16-byte hello of issue 36 (the protocol before
// tokens), a current hello without a token, a rank holding another token,
// and a connection that never speaks; it logs each with a reason naming
// the variable, keeps waiting, and the real rank then joins and the two
// work as a group.
func TestImpostorRefused(t *testing.T) {
	tok, log := NewToken(), &logLines{}
	port, hub := hubOf(t, 2, Options{Timeout: time.Minute, Token: tok, Logf: log.logf})

	if got := impostor(t, port, rawHello(1, 1, 2, 0)[:16]); !strings.Contains(got, "protocol version 1, rank 0 speaks 2") {
		t.Errorf("issue 36's hello: rank 0 answered %q", got)
	}
	if got := impostor(t, port, rawHello(protoVersion, 1, 2, modeNone)); !strings.Contains(got, "no "+TokenEnv) {
		t.Errorf("a hello without a token: rank 0 answered %q", got)
	}
	_, err := DialGroup(World{Rank: 1, Size: 2, Addr: "127.0.0.1", Port: port}, Options{Timeout: 10 * time.Second, Token: NewToken()})
	if err == nil || !strings.Contains(err.Error(), TokenEnv) || errorsIsTimeout(err) {
		t.Errorf("a rank with another token: %v, want a refusal naming %s at once", err, TokenEnv)
	}
	silent, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	for _, s := range []string{"protocol version 1", "(rank 1): no " + TokenEnv, "refused rank 0"} {
		log.waitLog(t, s, 1)
	}

	g1, err := DialGroup(World{Rank: 1, Size: 2, Addr: "127.0.0.1", Port: port}, Options{Timeout: 10 * time.Second, Token: tok})
	if err != nil {
		t.Fatalf("the real rank 1: %v\nrank 0's log:\n%s", err, log)
	}
	defer g1.Close()
	res := <-hub
	if res.err != nil {
		t.Fatalf("rank 0: %v", res.err)
	}
	defer res.g.Close()
	if !res.g.Authenticated() || !g1.Authenticated() {
		t.Error("the group does not say it is authenticated")
	}
	twoRanksTrain(t, res.g, g1)
	out := log.String()
	for _, want := range []string{"(rank 1): protocol version 1", "(rank 1): no " + TokenEnv, "refused rank 0: rank 0's proof of " + TokenEnv + " is wrong"} {
		if !strings.Contains(out, want) {
			t.Errorf("rank 0's log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, tok.key) {
		t.Error("rank 0's log holds the token")
	}
}

func errorsIsTimeout(err error) bool { return errors.Is(err, ErrTimeout) }

// TestWrongTokenNamesTheVariable: the ranks' tokens differ. The rank learns
// it at once (rank 0's proof fails), in words that name the variable, and
// never sends its own proof; rank 0 logs the rank's refusal and, when its
// time runs out, lists it beside the missing rank.
func TestWrongTokenNamesTheVariable(t *testing.T) {
	t.Parallel()
	log := &logLines{}
	port, hub := hubOf(t, 2, Options{Timeout: 2 * time.Second, Token: NewToken(), Logf: log.logf})
	other := NewToken()
	_, err := DialGroup(World{Rank: 1, Size: 2, Addr: "127.0.0.1", Port: port}, Options{Timeout: time.Minute, Token: other})
	if err == nil || !strings.Contains(err.Error(), "did not prove it holds this job's "+TokenEnv) || errorsIsTimeout(err) {
		t.Errorf("rank 1: %v", err)
	}
	res := <-hub
	if res.err == nil || !strings.Contains(res.err.Error(), "rank(s) 1 of 2 did not join") || !strings.Contains(res.err.Error(), "tokens differ") {
		t.Errorf("rank 0: %v", res.err)
	}
	for _, s := range []string{fmt.Sprint(res.err), fmt.Sprint(err), log.String()} {
		if strings.Contains(s, other.key) {
			t.Errorf("a message holds the token: %s", s)
		}
	}
}

// TestRankProvesWithWrongToken: a rank whose proof is wrong (it passed rank
// 0's check by relaying rank 0's proof, say) is refused with a message
// naming the variable.
func TestRankProvesWithWrongToken(t *testing.T) {
	t.Parallel()
	tok := NewToken()
	port, hub := hubOf(t, 2, Options{Timeout: 2 * time.Second, Token: tok})
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	c.Write(rawHello(protoVersion, 1, 2, modeHMAC))
	challenge := make([]byte, 1+nonceLen+proofLen)
	if _, err := io.ReadFull(c, challenge); err != nil || challenge[0] != 0 {
		t.Fatalf("challenge %v, %v", challenge[:1], err)
	}
	c.Write(append([]byte{0}, make([]byte, proofLen)...)) // a proof of zeros
	got, _ := io.ReadAll(c)
	if !strings.Contains(string(got), "wrong "+TokenEnv) {
		t.Errorf("a wrong proof: rank 0 answered %q", got)
	}
	if res := <-hub; res.err == nil {
		res.g.Close()
		t.Error("rank 0 admitted a rank with a wrong proof")
	}
}

// proxy forwards one connection from its port to target's, recording what
// the client sent; flip, when ≥ 0, inverts that byte of the client's
// stream.
type proxy struct {
	ln   net.Listener
	mu   sync.Mutex
	sent []byte
}

func startProxy(t *testing.T, target int, flip int) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", target))
		if err != nil {
			c.Close()
			return
		}
		go func() { io.Copy(c, s); c.Close() }()
		buf := make([]byte, 4096)
		for n := 0; ; {
			k, err := c.Read(buf)
			if k > 0 {
				p.mu.Lock()
				p.sent = append(p.sent, buf[:k]...)
				p.mu.Unlock()
				if flip >= n && flip < n+k {
					buf[flip-n] ^= 0xff
				}
				n += k
				if _, err := s.Write(buf[:k]); err != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		s.Close()
	}()
	return p
}

func (p *proxy) port() int { return p.ln.Addr().(*net.TCPAddr).Port }

func (p *proxy) recorded() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]byte(nil), p.sent...)
}

// TestReplayedHandshakeRefused: the bytes a real rank sent to join (its
// hello and its proof), recorded on the way and played back to rank 0, do
// not join: rank 0's nonce is fresh, so the old proof is wrong.
func TestReplayedHandshakeRefused(t *testing.T) {
	tok, log := NewToken(), &logLines{}
	port, hub := hubOf(t, 3, Options{Timeout: time.Minute, Token: tok, Logf: log.logf})
	p := startProxy(t, port, -1)
	g1, err := DialGroup(World{Rank: 1, Size: 3, Addr: "127.0.0.1", Port: p.port()}, Options{Timeout: 10 * time.Second, Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	defer g1.Close()
	rec := p.recorded()
	if len(rec) != helloLen+1+proofLen {
		t.Fatalf("recorded %d bytes of handshake, want %d", len(rec), helloLen+1+proofLen)
	}
	// Played back as rank 1 (taken) and, rewritten, as rank 2 (free).
	if got := impostor(t, port, rec); !strings.Contains(got, "wrong "+TokenEnv) {
		t.Errorf("the replayed handshake: rank 0 answered %q", got)
	}
	as2 := append([]byte(nil), rec...)
	binary.BigEndian.PutUint32(as2[8:], 2)
	if got := impostor(t, port, as2); !strings.Contains(got, "wrong "+TokenEnv) {
		t.Errorf("the replayed handshake as rank 2: rank 0 answered %q", got)
	}
	g2, err := DialGroup(World{Rank: 2, Size: 3, Addr: "127.0.0.1", Port: port}, Options{Timeout: 10 * time.Second, Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	defer g2.Close()
	res := <-hub
	if res.err != nil {
		t.Fatal(res.err)
	}
	defer res.g.Close()
	if n := strings.Count(log.String(), "wrong "+TokenEnv); n != 2 {
		t.Errorf("rank 0 logged %d wrong proofs, want 2:\n%s", n, log)
	}
}

// TestDuplicateRankRefused: a second connection for a rank that has joined
// is refused and logged, with or without a token; the first stays the
// rank, and the group forms when the missing rank arrives.
func TestDuplicateRankRefused(t *testing.T) {
	for _, tok := range []Token{NewToken(), {}} {
		t.Run(fmt.Sprint("token ", !tok.IsZero()), func(t *testing.T) {
			log := &logLines{}
			port, hub := hubOf(t, 3, Options{Timeout: time.Minute, Token: tok, Logf: log.logf})
			o := Options{Timeout: 10 * time.Second, Token: tok}
			w := func(r int) World { return World{Rank: r, Size: 3, Addr: "127.0.0.1", Port: port} }
			g1, err := DialGroup(w(1), o)
			if err != nil {
				t.Fatal(err)
			}
			defer g1.Close()
			_, err = DialGroup(w(1), o)
			if err == nil || !strings.Contains(err.Error(), "rank 1 has already joined") || errorsIsTimeout(err) {
				t.Errorf("the second rank 1: %v", err)
			}
			g2, err := DialGroup(w(2), o)
			if err != nil {
				t.Fatal(err)
			}
			defer g2.Close()
			res := <-hub
			if res.err != nil {
				t.Fatal(res.err)
			}
			defer res.g.Close()
			if !strings.Contains(log.String(), "rank 1 has already joined") {
				t.Errorf("rank 0 did not log the duplicate:\n%s", log)
			}
			errs := onAll([]*Group{res.g, g1, g2}, func(g *Group) error {
				parts, err := g.AllGather("who", []byte{byte(g.Rank())})
				if err == nil && (parts[1][0] != 1 || parts[2][0] != 2) {
					err = fmt.Errorf("parts %v", parts)
				}
				return err
			})
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
		})
	}
}

// TestModesMustAgree: a rank with a token and rank 0 without one (or the
// reverse) do not form a group; the refusal names the variable.
func TestModesMustAgree(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		hub, rank Token
		want      string
	}{
		{NewToken(), Token{}, "no " + TokenEnv},
		{Token{}, NewToken(), "rank 0 runs unauthenticated"},
	} {
		port, hub := hubOf(t, 2, Options{Timeout: 2 * time.Second, Token: c.hub})
		_, err := DialGroup(World{Rank: 1, Size: 2, Addr: "127.0.0.1", Port: port}, Options{Timeout: time.Minute, Token: c.rank})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), TokenEnv) {
			t.Errorf("hub token %v, rank token %v: %v, want %q", !c.hub.IsZero(), !c.rank.IsZero(), err, c.want)
		}
		if res := <-hub; res.err == nil {
			res.g.Close()
			t.Error("rank 0 formed the group")
		}
	}
}

// TestTamperedMessageFails: a byte of a rank's first call altered in
// transit (after an honest handshake) fails the call on rank 0, naming the
// tag, and the group breaks.
func TestTamperedMessageFails(t *testing.T) {
	tok := NewToken()
	port, hub := hubOf(t, 2, Options{Timeout: 10 * time.Second, Token: tok})
	// The handshake is helloLen + 1 + proofLen bytes; a call's payload
	// starts 19 + len(name) bytes later.
	p := startProxy(t, port, helloLen+1+proofLen+19+len("rows")+1)
	g1, err := DialGroup(World{Rank: 1, Size: 2, Addr: "127.0.0.1", Port: p.port()}, Options{Timeout: 10 * time.Second, Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	defer g1.Close()
	res := <-hub
	if res.err != nil {
		t.Fatal(res.err)
	}
	defer res.g.Close()
	errs := onAll([]*Group{res.g, g1}, func(g *Group) error {
		_, err := g.AllGather("rows", []byte("abcdef"))
		return err
	})
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "rank 1: a message failed its authentication tag") {
		t.Errorf("rank 0: %v", errs[0])
	}
	if errs[1] == nil {
		t.Error("rank 1's call succeeded")
	}
}

// TestHostileFrames: on a formed group, a rank whose message claims more
// than the payload limit, or claims a large payload and stops sending, or
// sends a message rank 0 does not expect, fails the call promptly (no
// allocation of the claimed size, no wait past the time limit).
func TestHostileFrames(t *testing.T) {
	t.Parallel()
	const timeout = 3 * time.Second
	frame := func(seq uint64, k kind, name string, size uint64) []byte {
		b := binary.BigEndian.AppendUint64(nil, seq)
		b = append(b, byte(k), 0, byte(len(name)))
		b = append(b, name...)
		return binary.BigEndian.AppendUint64(b, size)
	}
	for _, c := range []struct {
		name  string
		bytes []byte
		want  string
	}{
		{"oversized", frame(1, kindAllGather, "rows", 1<<62), "over the"},
		{"claims 64 GiB then hangs", frame(1, kindAllGather, "rows", maxPayload), "did not answer within"},
		{"truncated header then hangs", frame(1, kindAllGather, "rows", 0)[:5], "did not answer within"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Unauthenticated, so the frame is read as it is (a tag would
			// fail first).
			groups, err := formUnauth(2, timeout)
			if err != nil {
				t.Fatal(err)
			}
			defer groups[1].Close()
			defer groups[0].Close()
			if _, err := groups[1].peers[0].conn.Write(c.bytes); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = groups[0].AllGather("rows", nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("rank 0: %v, want %q", err, c.want)
			}
			if d := time.Since(start); d > timeout+20*time.Second {
				t.Errorf("rank 0 failed after %s; limit %s", d, timeout)
			}
		})
	}
}

// formUnauth forms an unauthenticated group of size ranks on loopback.
func formUnauth(size int, timeout time.Duration) ([]*Group, error) {
	o := Options{Timeout: timeout}
	hub, err := ListenGroup(World{Rank: 0, Size: size, Addr: "127.0.0.1"}, o)
	if err != nil {
		return nil, err
	}
	defer hub.Close()
	groups := make([]*Group, size)
	errs := make(chan error, size)
	for r := 1; r < size; r++ {
		go func() {
			var err error
			groups[r], err = DialGroup(World{Rank: r, Size: size, Addr: "127.0.0.1", Port: hub.Port()}, o)
			errs <- err
		}()
	}
	if groups[0], err = hub.Accept(); err != nil {
		return nil, err
	}
	for r := 1; r < size; r++ {
		if err := <-errs; err != nil {
			return nil, err
		}
	}
	return groups, nil
}

// TestBindsOneAddress: rank 0 listens on the address it is reached at, or
// on dist.bind, never on every interface unless told.
func TestBindsOneAddress(t *testing.T) {
	for _, c := range []struct{ addr, bind, want string }{
		{"127.0.0.1", "", "127.0.0.1"},
		{"10.255.255.1", "127.0.0.1", "127.0.0.1"},
		{"127.0.0.1", "0.0.0.0", "every interface"},
	} {
		h, err := ListenGroup(World{Rank: 0, Size: 2, Addr: c.addr}, Options{Bind: c.bind})
		if err != nil {
			t.Fatal(err)
		}
		ip := h.ln.Addr().(*net.TCPAddr).IP
		got := ip.String()
		if ip.IsUnspecified() {
			got = "every interface"
		}
		if got != c.want {
			t.Errorf("addr %s, bind %q: listens on %s, want %s", c.addr, c.bind, got, c.want)
		}
		h.Close()
	}
	if _, err := ListenGroup(World{Rank: 0, Size: 2, Addr: "192.0.2.7"}, Options{}); err == nil || !strings.Contains(err.Error(), "dist.bind") {
		t.Errorf("an address not of this host: %v, want a hint at dist.bind", err)
	}
}

// TestTokenNeverPrinted: a Token prints as "[token]" under every verb, and
// ParseToken's error names the variable, not the value.
func TestTokenNeverPrinted(t *testing.T) {
	tok, err := ParseToken(strings.Repeat("s3cr3t", 8))
	if err != nil {
		t.Fatal(err)
	}
	s := fmt.Sprintf("%v %+v %#v %s %q %x %d", tok, tok, tok, tok, tok, tok, tok) +
		fmt.Sprintf("%+v %#v", Options{Token: tok}, struct{ T Token }{tok})
	if strings.Contains(s, "s3cr3t") {
		t.Errorf("a token printed: %s", s)
	}
	_, err = ParseToken("s3cr3t")
	if err == nil || !strings.Contains(err.Error(), TokenEnv) || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("short token: %v", err)
	}
}

// BenchmarkAllGather: a 16 MiB all-gather of two ranks over loopback, with
// tags (the job token) and without, to price the tags:
//
//	go test -run '^$' -bench AllGather -benchtime 20x ./dist/
func BenchmarkAllGather(b *testing.B) {
	for _, authed := range []bool{false, true} {
		b.Run(fmt.Sprint("token=", authed), func(b *testing.B) {
			var groups []*Group
			var err error
			if authed {
				groups, err = Loopback(2, time.Minute)
			} else {
				groups, err = formUnauth(2, time.Minute)
			}
			if err != nil {
				b.Fatal(err)
			}
			defer groups[1].Close()
			defer groups[0].Close()
			blob := make([]byte, 16<<20)
			b.SetBytes(int64(2 * len(blob)))
			b.ResetTimer()
			for range b.N {
				for r, err := range onAll(groups, func(g *Group) error { _, err := g.AllGather("rows", blob); return err }) {
					if err != nil {
						b.Fatalf("rank %d: %v", r, err)
					}
				}
			}
		})
	}
}
