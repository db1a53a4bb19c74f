package trainer

// ZeRO-1 in a data-parallel run (train.zero_stage: 1, the default with
// several ranks): each rank keeps the AdamW moments of its 1/W of every
// parameter (model.NewShardedOptimizer), runs AdamW on that part after the
// gradient all-reduce, and the ranks all-gather the updated parts. The
// update is bitwise the replicated one (AdamW is element-wise), so ranks
// stay identical; a checkpoint holds one moments file per rank and resumes
// at any world size (model.OpenMoments reads any range of any parameter).
//
// Under bf16 products each rank also keeps only the fp32 masters of its
// parts (dist.shard_masters; model/masters.go): the policy's matrices are
// bf16 alone, the ranks all-gather bf16 parts, a checkpoint gathers the
// masters so rank 0 still writes the whole fp32 policy (gatherMasters), and
// a resume reads it back into masters and bf16 weights (model.LoadMasters).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/gdrotrain/gdrotrain/checkpoint"
	"github.com/gdrotrain/gdrotrain/model"
)

// newOptimizer makes AdamW: sharded under ZeRO-1 when several ranks run
// with dist.zero_stage 1, the gatherer being the reducer where it can
// gather (cuda.Comm, NCCL) and the control plane otherwise; with sharded
// fp32 masters where the backend's products read bf16 weights. It runs
// before the policy's bf16 copies are made, so a matrix that goes bf16
// only never gets one.
func (t *Trainer) newOptimizer(b model.Backend) (*model.Optimizer, error) {
	cfg := t.Cfg.Optim.AdamWConfig
	if t.dp == nil || t.dp.size <= 1 || t.Cfg.Dist.ZeROStage < 1 {
		return model.NewOptimizer(b, t.Policy.Cfg, cfg), nil
	}
	o, err := model.NewShardedOptimizer(b, t.Policy.Cfg, t.Policy.P, cfg, model.Shard{Rank: t.dp.rank, World: t.dp.size})
	if err != nil {
		return nil, err
	}
	if g, ok := t.dp.red.(model.ShardGatherer); ok {
		o.Gather = g
	} else {
		o.Gather = HostReducer{B: b, G: t.dp.g}
	}
	t.Log.Printf("ZeRO-1: this rank keeps the AdamW moments of 1/%d of every parameter", t.dp.size)
	if !t.Cfg.Dist.ShardMasters {
		return o, nil
	}
	// Only where products read bf16 copies of the weights (a backend that
	// makes one: the embedding always gets one under bf16 products) may
	// the matrices be bf16 alone.
	s, ok := b.(model.Shadower)
	if !ok {
		return o, nil
	}
	if copies, err := s.Shadow(t.Policy.P.Embed); err != nil {
		return nil, fmt.Errorf("policy: bf16 copy of the embedding: %w", err)
	} else if !copies {
		return o, nil
	}
	if _, ok := o.Gather.(model.BlockGatherer); !ok {
		return nil, fmt.Errorf("sharded fp32 masters: the gatherer %T cannot gather padded blocks", o.Gather)
	}
	done, err := o.ShardMasters(b, t.Policy.Cfg, t.Policy.P)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	if done {
		t.Log.Printf("ZeRO-1: this rank keeps the fp32 master weights of 1/%d of every matrix but the input embedding; the matrices are bf16 only (dist.shard_masters)", t.dp.size)
	}
	return o, nil
}

// halfFingerprint adds to the ranks' weight fingerprint, with sharded
// masters, the bf16 values of every bf16-only matrix at the first element
// of each rank's range and at its last element: the norms the fingerprint
// hashes are updated by every rank itself, but each rank's part of a
// matrix reaches the others only through the all-gather, so a rank that
// missed one differs there. W + 1 values per matrix, not the gigabytes of
// the whole bf16 policy. Errors are the backend's, which the caller reads.
func (t *Trainer) halfFingerprint(w io.Writer) {
	if t.Opt == nil || !t.Opt.MastersSharded() {
		return
	}
	hw, ok := t.Policy.B.(model.HalfWeights)
	if !ok {
		return
	}
	s, one := t.Opt.Sharded.Shard, make([]float32, 1)
	for i, np := range t.Policy.P.Named(t.Policy.Cfg) {
		if i >= len(t.Opt.Sharded.HalfOnly) || !t.Opt.Sharded.HalfOnly[i] {
			continue
		}
		n := (*np.Ptr).Numel()
		flat := (*np.Ptr).View(n)
		for r := 0; r <= s.World; r++ {
			at := n - 1 // after the ranks' starts: the last element
			if r < s.World {
				if at, _ = (model.Shard{Rank: r, World: s.World}).Range(n); at >= n {
					continue
				}
			}
			hw.ReadHalf(flat.Rows(at, at+1), one)
			binary.Write(w, binary.LittleEndian, math.Float32bits(one[0]))
		}
	}
}

// gatherMasters has every rank take part in gathering the sharded fp32
// masters for a checkpoint; rank 0 gets the whole fp32 policy by name
// (the checkpoint's weights stay the whole fp32 policy, so it resumes at
// any world size), the others nil. Every rank returns every rank's
// failure.
func (t *Trainer) gatherMasters() (map[string][]float32, error) {
	bg, ok := t.Opt.Gather.(model.BlockGatherer)
	var masters map[string][]float32
	var err error
	if !ok {
		err = fmt.Errorf("the gatherer %T cannot gather padded blocks", t.Opt.Gather)
	} else {
		masters, err = t.Opt.GatherMasters(t.Policy.B, t.Policy.Cfg, t.Policy.P, bg, t.rank() == 0)
	}
	if err := t.agreeAll(fmt.Sprintf("fp32 masters of step %d", t.step), err); err != nil {
		return nil, err
	}
	return masters, nil
}

// writeMomentShards has every rank write its moments into the checkpoint
// folder rank 0 begins (checkpoint.Join), before rank 0 writes the rest and
// commits; it returns once every rank has written, or with every rank's
// failure.
func (t *Trainer) writeMomentShards() error {
	root := t.checkpointRoot()
	var err error
	if t.rank() == 0 {
		_, err = checkpoint.Begin(root, t.step)
	}
	if err := t.agree(fmt.Sprintf("checkpoint folder of step %d", t.step), err); err != nil {
		return err
	}
	w, err := checkpoint.Join(root, t.step)
	if err == nil {
		err = model.WriteMomentShard(w.Dir(), t.Opt.MomentSlices(t.Policy.B, t.Policy.Cfg), t.Opt.Sharded.Shard)
	}
	return t.agreeAll(fmt.Sprintf("optimizer shards of step %d", t.step), err)
}

// agreeAll returns nil on every rank when no rank's err is set, else on
// every rank an error naming each failed rank and its error.
func (t *Trainer) agreeAll(what string, err error) error {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	all, gerr := t.dp.g.AllGather(what, []byte(msg))
	if gerr != nil {
		return errors.Join(err, gerr)
	}
	var failed []string
	for r, m := range all {
		if len(m) > 0 {
			failed = append(failed, fmt.Sprintf("rank %d: %s", r, m))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%s: %s", what, strings.Join(failed, "; "))
	}
	return nil
}

// ReduceScatterShards implements model.ShardReducer through the control
// plane: the fixed-order sum of the whole gradients (every part is then
// summed, the rank's own included; on the host a reduce-scatter would move
// the same bytes through rank 0).
func (h HostReducer) ReduceScatterShards(ts []*model.Tensor, s model.Shard) error {
	return h.AllReduceSum(ts)
}

// GatherShards implements model.ShardGatherer through the control plane
// (download the owned ranges, exchange, upload the others'): the CPU
// backend's way; on CUDA the binary's reducer, cuda.Comm, gathers through
// NCCL. The bf16-only weights of sharded masters (model.HalfWeights)
// travel as 2-byte bf16, the rest as float32.
func (h HostReducer) GatherShards(ts []*model.Tensor, s model.Shard) error {
	return h.gather("optimizer shards", ts, s, func(t *model.Tensor, r int) (int, int) { return model.Shard{Rank: r, World: s.World}.Range(t.Numel()) })
}

// GatherBlocks implements model.BlockGatherer through the control plane:
// block r of buf's World equal blocks comes from rank r.
func (h HostReducer) GatherBlocks(buf *model.Tensor, s model.Shard) error {
	n := buf.Numel()
	if s.World < 1 || n%s.World != 0 {
		return fmt.Errorf("padded blocks: %d elements are not %d equal blocks", n, s.World)
	}
	chunk := n / s.World
	return h.gather("padded blocks", []*model.Tensor{buf}, s, func(_ *model.Tensor, r int) (int, int) { return r * chunk, (r + 1) * chunk })
}

// gather all-gathers, for every tensor of ts, the part [lo, hi) = part(t,
// r) from rank r: one round trip for all of them.
func (h HostReducer) gather(what string, ts []*model.Tensor, s model.Shard, part func(t *model.Tensor, r int) (lo, hi int)) error {
	hw, _ := h.B.(model.HalfWeights)
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

var (
	_ model.ShardGatherer = HostReducer{}
	_ model.BlockGatherer = HostReducer{}
)
