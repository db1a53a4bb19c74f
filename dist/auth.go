package dist

// Who may join a job's control plane, and how its messages are checked.
//
// Every rank of a job holds the job's token (GDROTRAIN_DIST_TOKEN, which
// the Slurm scripts generate per job and srun passes to every task). The
// token never crosses the wire: a joining rank and rank 0 each prove they
// hold it by an HMAC-SHA256, keyed by the token, of the rank's hello (its
// rank, the world size and a fresh nonce of its own) and a fresh nonce of
// rank 0's. Rank 0 proves first, bound to the rank's nonce, so a process
// that took rank 0's port (another job's rank 0, an impostor) learns no
// proof of the real rank's and cannot feed it data; the rank proves second,
// bound to rank 0's nonce, so a recorded hello does not replay. After the
// handshake every message carries an HMAC-SHA256 tag under a key derived
// from the token and both nonces, over its direction and its number on the
// connection: a message altered, injected, replayed, reordered or dropped
// in transit fails the call. Nothing is encrypted: whoever can read the
// traffic reads it (docs/data-parallel.md says what is protected).
//
// Handshake (after the TCP connection; big-endian):
//
//	rank r → 0: hello  = "GDRG" uint32(version) uint32(r) uint32(size) byte(mode) nonce_r[32]
//	0 → rank r: byte(0) nonce_0[32] proof_0[32]      or a refusal
//	rank r → 0: byte(0) proof_r[32]                  or a refusal (rank 0's proof is wrong)
//	0 → rank r: byte(0): admitted                    or a refusal (wrong proof, rank taken)
//
// mode is 1 when the rank holds a token, 0 when it runs unauthenticated;
// rank 0 refuses a rank whose mode differs from its own. proof_0 =
// HMAC(token, "gdrotrain dist v2 rank 0\x00" ‖ hello ‖ nonce_0), proof_r the
// same with "rank" for "rank 0", and the connection's key the same with
// "session". Unauthenticated, both proofs are zeros and messages carry no
// tag. A refusal is byte(1) uint16(length) and the reason.

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"slices"
)

// TokenEnv is the environment variable that holds a job's token.
const TokenEnv = "GDROTRAIN_DIST_TOKEN"

// MinTokenLen is the shortest token accepted, in characters (128 bits as
// hex).
const MinTokenLen = 32

const (
	nonceLen  = 32
	proofLen  = sha256.Size
	tagLen    = sha256.Size
	helloLen  = 16 + 1 + nonceLen
	modeNone  = 0
	modeHMAC  = 1
	dirToHub  = 'L' // a rank's messages to rank 0
	dirToLeaf = 'H' // rank 0's messages to a rank
)

// Token is a job's shared secret. It prints as "[token]" whatever the verb,
// so it cannot reach a log or an error by accident; the zero Token means an
// unauthenticated group.
type Token struct{ key string }

// ParseToken checks a token's value (from TokenEnv). Its errors name the
// variable, never the value.
func ParseToken(s string) (Token, error) {
	if len(s) < MinTokenLen {
		return Token{}, fmt.Errorf("dist: %s holds %d characters: want at least %d (e.g. $(openssl rand -hex 32))", TokenEnv, len(s), MinTokenLen)
	}
	return Token{key: s}, nil
}

// NewToken makes a random token (64 hex digits), e.g. for a group formed
// inside one process.
func NewToken() Token {
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand panics rather than return short)
	return Token{key: hex.EncodeToString(b[:])}
}

// IsZero reports whether t is the zero Token (no authentication).
func (t Token) IsZero() bool { return t.key == "" }

func (t Token) String() string { return "[token]" }

// Format prints "[token]" for every verb (%v, %+v, %#v, %s, %q, %x…).
func (t Token) Format(f fmt.State, _ rune) { io.WriteString(f, "[token]") }

// proof is HMAC(token, "gdrotrain dist v2 <role>\x00" ‖ hello ‖ nonce_0).
func (t Token) proof(role string, hello []byte, nonce0 []byte) []byte {
	if t.IsZero() {
		return make([]byte, proofLen)
	}
	m := hmac.New(sha256.New, []byte(t.key))
	m.Write([]byte("gdrotrain dist v2 " + role + "\x00"))
	m.Write(hello)
	m.Write(nonce0)
	return m.Sum(nil)
}

// makeHello is rank w.Rank's hello with a fresh nonce.
func makeHello(w World, t Token) []byte {
	h := make([]byte, helloLen)
	copy(h, groupMagic[:])
	binary.BigEndian.PutUint32(h[4:], protoVersion)
	binary.BigEndian.PutUint32(h[8:], uint32(w.Rank))
	binary.BigEndian.PutUint32(h[12:], uint32(w.Size))
	if !t.IsZero() {
		h[16] = modeHMAC
	}
	rand.Read(h[17:])
	return h
}

// errBadTag is a message whose tag does not match: altered, injected or
// out of order.
var errBadTag = errors.New("a message failed its authentication tag (altered or injected in transit, or not from this job's rank)")

// link is one connection of the control plane after its handshake. Each
// message it sends carries a tag under the connection's key; each message
// it receives is read between begin and end, which checks the tag. Without
// a key (unauthenticated) messages carry no tag.
type link struct {
	conn      net.Conn
	key       []byte    // the connection's key; nil: no tags
	out, in   byte      // direction of sent and of received messages
	nOut, nIn uint64    // messages sent, received
	mac       hash.Hash // the tag of the message being read
}

func newLink(conn net.Conn, t Token, hello, nonce0 []byte, hub bool) *link {
	l := &link{conn: conn, out: dirToHub, in: dirToLeaf}
	if hub {
		l.out, l.in = dirToLeaf, dirToHub
	}
	if !t.IsZero() {
		l.key = t.proof("session", hello, nonce0)
		l.mac = hmac.New(sha256.New, l.key)
	}
	return l
}

func (l *link) Close() error { return l.conn.Close() }

// header is what a tag covers before the message: its direction and number.
func header(dir byte, n uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{dir}, n)
}

// send writes one message (the concatenation of parts) and its tag.
func (l *link) send(parts ...[]byte) error {
	bufs := make(net.Buffers, 0, len(parts)+1)
	bufs = append(bufs, parts...)
	if l.key != nil {
		m := hmac.New(sha256.New, l.key)
		m.Write(header(l.out, l.nOut))
		for _, p := range parts {
			m.Write(p)
		}
		bufs = append(bufs, m.Sum(nil))
	}
	l.nOut++
	_, err := bufs.WriteTo(l.conn)
	return err
}

// begin starts reading one message.
func (l *link) begin() {
	if l.mac != nil {
		l.mac.Reset()
		l.mac.Write(header(l.in, l.nIn))
	}
}

// read fills p from the open message.
func (l *link) read(p []byte) error {
	if _, err := io.ReadFull(l.conn, p); err != nil {
		return err
	}
	if l.mac != nil {
		l.mac.Write(p)
	}
	return nil
}

// readBytes reads n bytes of the open message, allocating as they arrive
// (so a length that no bytes follow costs at most readChunk).
func (l *link) readBytes(n uint64) ([]byte, error) {
	b := make([]byte, 0, min(n, readChunk))
	for uint64(len(b)) < n {
		if len(b) == cap(b) {
			b = slices.Grow(b, int(min(n-uint64(len(b)), uint64(len(b)))))
		}
		k := int(min(uint64(cap(b)), n))
		if err := l.read(b[len(b):k]); err != nil {
			return nil, err
		}
		b = b[:k]
	}
	return b, nil
}

// readChunk is the most a message's length makes a reader allocate before
// the bytes arrive.
const readChunk = 1 << 20

// readBlob reads a uint64 length, bounded by limit, and that many bytes.
func (l *link) readBlob(limit uint64) ([]byte, error) {
	var n [8]byte
	if err := l.read(n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint64(n[:])
	if size > limit {
		return nil, fmt.Errorf("message of %d bytes: over the %d-byte limit (not a gdrotrain rank?)", size, limit)
	}
	return l.readBytes(size)
}

// readRefusal reads the uint16-prefixed reason after a status byte of 1.
func (l *link) readRefusal() (string, error) {
	var n [2]byte
	if err := l.read(n[:]); err != nil {
		return "", err
	}
	msg := make([]byte, int(n[0])<<8|int(n[1]))
	if err := l.read(msg); err != nil {
		return "", err
	}
	return string(msg), nil
}

// end finishes the open message: it reads its tag and checks it.
func (l *link) end() error {
	l.nIn++
	if l.mac == nil {
		return nil
	}
	var tag [tagLen]byte
	if _, err := io.ReadFull(l.conn, tag[:]); err != nil {
		return err
	}
	if !hmac.Equal(l.mac.Sum(nil), tag[:]) {
		return errBadTag
	}
	return nil
}
