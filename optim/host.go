package optim

// The collectives through the control plane (dist.Group): download, a
// fixed-order exchange on rank 0, upload. Deterministic, and slow for
// large models: the CPU backend's way, and the tests'. On CUDA the NCCL
// communicator (cuda.Comm) implements the same interfaces.

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gdrotrain/gdrotrain/dist"
	"github.com/gdrotrain/gdrotrain/model"
)

// HostComm runs the gradient and weight collectives over the control
// plane G for tensors on backend B.
type HostComm struct {
	B model.Backend
	G *dist.Group
}

var (
	_ AllReducer = HostComm{}
	_ ShardComm  = HostComm{}
)

// AllReduceSum implements AllReducer in one round trip for all of ts: a
// float64 sum in rank order on rank 0.
func (h HostComm) AllReduceSum(ts []*model.Tensor) error {
	n := 0
	for _, x := range ts {
		n += x.Numel()
	}
	buf := make([]float32, n)
	off := 0
	for _, x := range ts {
		h.B.Download(x, buf[off:off+x.Numel()])
		off += x.Numel()
	}
	if err := h.B.Err(); err != nil {
		return fmt.Errorf("gradients to the host: %w", err)
	}
	if err := h.G.SumFloat32("gradients", buf); err != nil {
		return err
	}
	off = 0
	for _, x := range ts {
		h.B.Upload(x, buf[off:off+x.Numel()])
		off += x.Numel()
	}
	return h.B.Err()
}

// ReduceScatterShards implements ShardReducer: the fixed-order sum of the
// whole gradients (every part is then summed, the rank's own included; on
// the host a reduce-scatter would move the same bytes through rank 0).
func (h HostComm) ReduceScatterShards(ts []*model.Tensor, s Shard) error {
	return h.AllReduceSum(ts)
}

// ReduceScatterAdd implements ShardAccumulator: the fixed-order sum of the
// whole tensors, of which each rank adds its range.
func (h HostComm) ReduceScatterAdd(ts, acc []*model.Tensor, s Shard) error {
	if err := h.AllReduceSum(ts); err != nil {
		return err
	}
	for i, v := range ShardViews(ts, s) {
		if v != nil && acc[i] != nil {
			h.B.Add(acc[i], v)
		}
	}
	return h.B.Err()
}

// GatherShards implements ShardGatherer (download the owned ranges,
// exchange, upload the others'). The bf16-only weights of sharded masters
// (model.HalfPrecision) travel as 2-byte bf16, the rest as float32.
func (h HostComm) GatherShards(ts []*model.Tensor, s Shard) error {
	return h.gather("optimizer shards", ts, s, func(t *model.Tensor, r int) (int, int) { return Shard{Rank: r, World: s.World}.Range(t.Numel()) })
}

// GatherBlocks implements BlockGatherer: block r of buf's World equal
// blocks comes from rank r.
func (h HostComm) GatherBlocks(buf *model.Tensor, s Shard) error {
	n := buf.Numel()
	if s.World < 1 || n%s.World != 0 {
		return fmt.Errorf("padded blocks: %d elements are not %d equal blocks", n, s.World)
	}
	chunk := n / s.World
	return h.gather("padded blocks", []*model.Tensor{buf}, s, func(_ *model.Tensor, r int) (int, int) { return r * chunk, (r + 1) * chunk })
}

// gather all-gathers, for every tensor of ts, the part [lo, hi) = part(t,
// r) from rank r: one round trip for all of them.
func (h HostComm) gather(what string, ts []*model.Tensor, s Shard, part func(t *model.Tensor, r int) (lo, hi int)) error {
	hw := model.TrainerCapsOf(h.B).Half
	half := func(t *model.Tensor) bool { return hw != nil && hw.IsHalfOnly(t) }
	var blob []byte
	for _, t := range ts {
		lo, hi := part(t, s.Rank)
		if hi == lo {
			continue
		}
		vals := make([]float32, hi-lo)
		if v := t.View(t.Numel()).Rows(lo, hi); half(t) {
			hw.ReadHalf(v, vals)
		} else {
			h.B.Download(v, vals)
		}
		blob = appendValues(blob, vals, half(t))
	}
	if err := h.B.Err(); err != nil {
		return fmt.Errorf("%s to the host: %w", what, err)
	}
	all, err := h.G.AllGather(what, blob)
	if err != nil {
		return err
	}
	for r, b := range all {
		if r == s.Rank {
			continue
		}
		off := 0
		for _, t := range ts {
			lo, hi := part(t, r)
			if hi == lo {
				continue
			}
			width := 4
			if half(t) {
				width = 2
			}
			if len(b) < off+width*(hi-lo) {
				return fmt.Errorf("%s: rank %d sent %d bytes, fewer than its parts need", what, r, len(b))
			}
			vals := readValues(b[off:off+width*(hi-lo)], width == 2)
			if v := t.View(t.Numel()).Rows(lo, hi); half(t) {
				hw.WriteHalf(v, vals) // exact: every value is bf16 already
			} else {
				h.B.Upload(v, vals)
			}
			off += width * (hi - lo)
		}
		if len(b) != off {
			return fmt.Errorf("%s: rank %d sent %d bytes, its parts hold %d", what, r, len(b), off)
		}
	}
	return h.B.Err()
}

// appendValues appends vals little-endian: float32, or as bf16 (the high
// 16 bits, exact for values read from bf16 storage).
func appendValues(blob []byte, vals []float32, half bool) []byte {
	for _, v := range vals {
		if half {
			blob = binary.LittleEndian.AppendUint16(blob, uint16(math.Float32bits(v)>>16))
		} else {
			blob = binary.LittleEndian.AppendUint32(blob, math.Float32bits(v))
		}
	}
	return blob
}

// readValues decodes appendValues' bytes.
func readValues(b []byte, half bool) []float32 {
	if half {
		out := make([]float32, len(b)/2)
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
		}
		return out
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}
