package dist

// Fuzz targets for what rank 0 and the other ranks read from the wire: the
// hello and the handshake (FuzzHandshake), a rank's call as rank 0 reads it
// (FuzzCall), rank 0's answer as a rank reads it (FuzzAnswer). Each feeds
// arbitrary bytes through a connection that ends where the bytes do, and
// checks that the reader returns (no panic, no hang), allocates no more
// than a bounded amount beyond the bytes it was given, and never accepts
// what it must not (a handshake without the token, a call that is not the
// expected one). `go test` runs them on their seeds; to search longer:
//
//	go test -run '^$' -fuzz '^FuzzCall$' -fuzztime 5m ./dist/
//
// (one target per run; likewise FuzzHandshake and FuzzAnswer). Failing
// inputs are written to testdata/fuzz/<target>/ and rerun by go test.

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"net"
	"runtime"
	"testing"
	"time"
)

// wireConn is a connection whose reads return the given bytes, then EOF,
// and whose writes are kept.
type wireConn struct {
	r   *bytes.Reader
	out bytes.Buffer
}

func (c *wireConn) Read(p []byte) (int, error)       { return c.r.Read(p) }
func (c *wireConn) Write(p []byte) (int, error)      { return c.out.Write(p) }
func (c *wireConn) Close() error                     { return nil }
func (c *wireConn) LocalAddr() net.Addr              { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }
func (c *wireConn) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 2} }
func (c *wireConn) SetDeadline(time.Time) error      { return nil }
func (c *wireConn) SetReadDeadline(time.Time) error  { return nil }
func (c *wireConn) SetWriteDeadline(time.Time) error { return nil }

// fuzzToken is the token of the fuzzed peers.
var fuzzToken = Token{key: "fuzz-token-fuzz-token-fuzz-token-fuzz"}

// allocBound is what one read may allocate beyond 4× its input: a
// payload's first chunk (readChunk) and small change.
const allocBound = readChunk + 1<<16

// checkAlloc runs f and fails t when it allocated more than allocBound +
// 4·n bytes, or took longer than a minute.
func checkAlloc(t *testing.T, n int, f func()) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	f()
	if d := time.Since(start); d > time.Minute {
		t.Fatalf("took %s on %d bytes", d, n)
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > uint64(allocBound+4*n) {
		t.Fatalf("allocated %d bytes reading %d", got, n)
	}
}

// seedHello is a well-formed hello of rank r of size.
func seedHello(r, size int, tok Token) []byte { return makeHello(World{Rank: r, Size: size}, tok) }

func FuzzHandshake(f *testing.F) {
	good := append(seedHello(1, 4, Token{}), append([]byte{0}, make([]byte, proofLen)...)...)
	f.Add(good, false)                                             // a complete unauthenticated handshake
	f.Add(append(seedHello(2, 4, fuzzToken), 0), true)             // the proof cut short
	f.Add(seedHello(3, 4, fuzzToken), true)                        // no proof
	f.Add(rawHello(1, 1, 2, 0)[:16], true)                         // issue 36's hello
	f.Add(rawHello(protoVersion, 1, 4, modeNone), true)            // no token
	f.Add(rawHello(protoVersion, 9, 4, modeHMAC), true)            // no such rank
	f.Add(rawHello(protoVersion, 1, 4, 7), false)                  // unknown mode
	f.Add(append(seedHello(1, 4, fuzzToken), 1, 0xff, 0xff), true) // refuses rank 0, long reason, cut
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"), false)
	f.Add([]byte{}, true)
	f.Fuzz(func(t *testing.T, data []byte, tokened bool) {
		tok := Token{}
		if tokened {
			tok = fuzzToken
		}
		h := &Hub{w: World{Rank: 0, Size: 4}, o: Options{Token: tok}}
		c := &wireConn{r: bytes.NewReader(data)}
		var r int
		var l *link
		var err error
		checkAlloc(t, len(data), func() { r, l, err = h.greet(c, time.Now().Add(time.Minute)) })
		if err != nil {
			return
		}
		// Admitted: only an unauthenticated hello of a rank in 1…3 with a
		// zero proof can get here (a proof under the token needs rank 0's
		// fresh nonce).
		if tokened {
			t.Fatalf("admitted rank %d with a token it cannot have proved", r)
		}
		if r < 1 || r > 3 || l == nil || len(data) < helloLen+1+proofLen {
			t.Fatalf("admitted rank %d from %d bytes", r, len(data))
		}
	})
}

// tagged appends the tag an authenticated peer would send after msg, as
// message number 0 in direction dir.
func tagged(msg []byte, key []byte, dir byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(header(dir, 0))
	m.Write(msg)
	return m.Sum(append([]byte(nil), msg...))
}

// fuzzLink is a link over data; with a token, messages need tags under a
// fixed key, and fixTag appends the right tag to data (so the fuzzer
// reaches what follows the check).
func fuzzLink(data []byte, tokened, fixTag, hub bool) *link {
	l := &link{out: dirToHub, in: dirToLeaf}
	if hub {
		l.out, l.in = dirToLeaf, dirToHub
	}
	if tokened {
		l.key = []byte("fuzz session key")
		l.mac = hmac.New(sha256.New, l.key)
		if fixTag {
			data = tagged(data, l.key, l.in)
		}
	}
	l.conn = &wireConn{r: bytes.NewReader(data)}
	return l
}

// callFrame is a call as writeCall sends it, without a tag.
func callFrame(seq uint64, k kind, name string, payload []byte) []byte {
	b := binary.BigEndian.AppendUint64(nil, seq)
	b = append(b, byte(k), byte(len(name)>>8), byte(len(name)))
	b = append(b, name...)
	b = binary.BigEndian.AppendUint64(b, uint64(len(payload)))
	return append(b, payload...)
}

func FuzzCall(f *testing.F) {
	good := callFrame(1, kindAllGather, "rows", []byte("abc"))
	f.Add(good, false, false)
	f.Add(good, true, true)
	f.Add(good, true, false)                                         // no tag
	f.Add(good[:len(good)-2], false, false)                          // truncated
	f.Add(callFrame(1, kindAllGather, "rows", nil)[:11], true, true) // cut after the kind
	f.Add(callFrame(2, kindAllGather, "rows", nil), true, true)      // a later call
	f.Add(callFrame(1, kindBarrier, "rows", nil), true, true)        // another kind
	f.Add(callFrame(1, 0xee, "rows", nil), false, false)             // no such kind
	f.Add(callFrame(1, kindAllGather, "other", nil), true, true)     // another name
	over := binary.BigEndian.AppendUint64(callFrame(1, kindAllGather, "rows", nil)[:17], 1<<63)
	f.Add(over, true, true)                                                                                       // oversized
	f.Add(binary.BigEndian.AppendUint64(callFrame(1, kindAllGather, "rows", nil)[:17], maxPayload), false, false) // claims 64 GiB
	f.Fuzz(func(t *testing.T, data []byte, tokened, fixTag bool) {
		l := fuzzLink(data, tokened, fixTag, true)
		g := &Group{w: World{Rank: 0, Size: 2}, timeout: time.Minute, peers: []*link{nil, l}, seq: 1}
		var p []byte
		var err error
		checkAlloc(t, len(data)+tagLen, func() { p, err = g.readFrom(1, time.Now().Add(time.Minute), kindAllGather, "rows") })
		if err != nil {
			return
		}
		want := callFrame(1, kindAllGather, "rows", p)
		if !bytes.HasPrefix(data, want) {
			t.Fatalf("accepted %q from %q", p, data)
		}
	})
}

// answerFrame is rank 0's answer as callHub sends it, without a tag.
func answerFrame(payload []byte) []byte {
	return append(binary.BigEndian.AppendUint64([]byte{0}, uint64(len(payload))), payload...)
}

func FuzzAnswer(f *testing.F) {
	three := packBlobs([][]byte{[]byte("a"), nil, []byte("ccc")})
	f.Add(answerFrame(three), false, false)
	f.Add(answerFrame(three), true, true)
	f.Add(answerFrame(three)[:7], true, true)                               // truncated length
	f.Add(answerFrame(packBlobs([][]byte{nil, nil})), true, true)           // two parts for three ranks
	f.Add(answerFrame(packBlobs([][]byte{nil, nil, nil, nil})), true, true) // four
	f.Add(answerFrame(append(three[:8], 0xff)), false, false)               // a part longer than the answer
	f.Add(refusal("rank 2 closed the connection"), true, true)              // rank 0 failed the call
	f.Add([]byte{1, 0xff, 0xff, 'x'}, false, false)                         // a reason cut short
	f.Add([]byte{7}, true, true)                                            // unknown status
	f.Add(binary.BigEndian.AppendUint64([]byte{0}, 1<<40), true, true)      // oversized
	f.Fuzz(func(t *testing.T, data []byte, tokened, fixTag bool) {
		l := fuzzLink(data, tokened, fixTag, false)
		g := &Group{w: World{Rank: 1, Size: 3}, timeout: time.Minute, peers: []*link{l}}
		var parts [][]byte
		var err error
		checkAlloc(t, len(data)+tagLen, func() { parts, err = g.AllGather("rows", []byte("mine")) })
		if err != nil {
			if g.broken == nil {
				t.Fatal("a failed call left the group unbroken")
			}
			return
		}
		if len(parts) != 3 || data[0] != 0 {
			t.Fatalf("accepted %d parts from %q", len(parts), data)
		}
	})
}
