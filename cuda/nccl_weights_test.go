package cuda

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
	"time"
	"unsafe"

	"github.com/gdrotrain/gdrotrain/dist"
	"github.com/gdrotrain/gdrotrain/model"
)

// TestWeightLink: the weights' communicator (nccl_weights.go) between a
// training rank 0 and a generation rank, 2 processes under bf16 products.
// Each tensor kind the sync meets — a matrix with a bf16 copy (the
// replicated policy's), a matrix without one (rounded into scratch), a
// bf16-only matrix (sharded masters'), a norm and a tied embedding
// (float32, with a bf16 copy on both sides) — arrives bitwise as the
// payload rank 0 read; the receiver's bf16 copy is refreshed from the new
// values; a second send from the kept payload bytes delivers the first
// values again after rank 0's tensors changed.
func TestWeightLink(t *testing.T) {
	needNCCL(t, 2)
	runRanks(t, []string{"weight-link", "weight-link"}, 60*time.Second)
}

// weightLinkShapes are the test's tensors and whether each travels as
// bf16; odd sizes, crossing the emulator's NCCL chunks.
var weightLinkShapes = []struct {
	rows, cols int
	half       bool
}{{33, 31, true}, {17, 65, true}, {3, 1001, true}, {1, 31, false}, {37, 33, false}}

func weightLinkWorker(t *testing.T, rank, world, port int, timeout time.Duration) {
	b := NewBackend(testDevice(t), BF16)
	w, err := dist.Explicit(rank, world, rank, "127.0.0.1", port)
	if err != nil {
		t.Fatal(err)
	}
	g, err := dist.NewGroup(w, timeout)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	l, err := OpenWeightLink(b, g, 1, timeout)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if !l.HalfProducts() {
		t.Fatal("a bf16 backend's link sends fp32")
	}
	values := func(salt int) [][]float32 {
		var out [][]float32
		for k, s := range weightLinkShapes {
			v := make([]float32, s.rows*s.cols)
			for i := range v {
				v[i] = ncclInput(k, i, salt)
			}
			out = append(out, v)
		}
		return out
	}
	// want is the payload of vals: bf16 (rounded to nearest even) or float32.
	want := func(vals [][]float32) []byte {
		var out []byte
		for k, s := range weightLinkShapes {
			for _, x := range vals[k] {
				if s.half {
					out = binary.LittleEndian.AppendUint16(out, model.F32ToBF16(x))
				} else {
					out = binary.LittleEndian.AppendUint32(out, math.Float32bits(x))
				}
			}
		}
		return out
	}
	ts, half := make([]*model.Tensor, len(weightLinkShapes)), make([]bool, len(weightLinkShapes))
	first, second := values(1), values(2)
	for k, s := range weightLinkShapes {
		ts[k], half[k] = b.New(s.rows, s.cols), s.half
	}
	const tied = 4 // the embedding: float32 with a bf16 copy on both sides
	if rank == 0 {
		for k := range ts {
			b.Upload(ts[k], first[k])
		}
		// 0: a bf16 copy (stale after the upload); 1: none (scratch);
		// 2: bf16-only.
		for _, k := range []int{0, tied} {
			if _, err := b.Shadow(ts[k]); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.HalfOnly(ts[2], 0); err != nil {
			t.Fatal(err)
		}
		p, err := l.Payload(ts, half)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(p, want(first)) {
			t.Fatal("rank 0's payload is not the bf16 rounding (matrices) and float32 values of its tensors")
		}
		if err := l.Send(ts, half, nil); err != nil {
			t.Fatal(err)
		}
		for k := range ts {
			if k == 2 {
				b.WriteHalf(ts[k], second[k])
			} else {
				b.Upload(ts[k], second[k])
			}
		}
		if err := l.Send(ts, half, p); err != nil { // the kept payload, not the tensors
			t.Fatal(err)
		}
		if err := l.Send(ts, half, p[:len(p)-2]); err == nil {
			t.Fatal("a payload of the wrong size was sent")
		}
		return
	}
	for k, s := range weightLinkShapes {
		if s.half {
			if err := b.HalfOnly(ts[k], 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	b.Upload(ts[tied], second[tied])
	if _, err := b.Shadow(ts[tied]); err != nil {
		t.Fatal(err)
	}
	b.halfOf(ts[tied]) // current before the receive: the receive must make it stale
	for round := range 2 {
		if err := l.Receive(ts, half); err != nil {
			t.Fatal(err)
		}
		got, err := l.Payload(ts, half)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want(first)) {
			t.Fatalf("round %d: the generation rank received other bytes than rank 0's payload", round)
		}
		// The tied embedding's bf16 copy, read as products read it.
		n := ts[tied].Numel()
		sh := make([]uint16, n)
		if err := b.d.copyOut(unsafe.Pointer(&sh[0]), b.halfOf(ts[tied]), int64(2*n)); err != nil {
			t.Fatal(err)
		}
		for i, x := range first[tied] {
			if sh[i] != model.F32ToBF16(x) {
				t.Fatalf("round %d: the embedding's bf16 copy [%d] = %#04x after the receive, want %#04x (the rounding of the received %g): a stale copy", round, i, sh[i], model.F32ToBF16(x), x)
			}
		}
	}
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("rank 1: %d bytes received twice, bitwise rank 0's payload; the bf16 copy refreshed", len(want(first)))
}
