package trainer

// ZeRO-1 in a data-parallel run (train.zero_stage: 1, the default with
// several ranks): each rank keeps the AdamW moments of its 1/W of every
// parameter (model.NewShardedOptimizer), runs AdamW on that part after the
// gradient all-reduce, and the ranks all-gather the updated parts. The
// update is bitwise the replicated one (AdamW is element-wise), so ranks
// stay identical; a checkpoint holds one moments file per rank and resumes
// at any world size (model.OpenMoments reads any range of any parameter).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/gdrotrain/gdrotrain/checkpoint"
	"github.com/gdrotrain/gdrotrain/model"
)

// newOptimizer makes AdamW: sharded under ZeRO-1 when several ranks run
// with dist.zero_stage 1, the gatherer being the reducer where it can
// gather (cuda.Comm, NCCL) and the control plane otherwise.
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
	return o, nil
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
// NCCL.
func (h HostReducer) GatherShards(ts []*model.Tensor, s model.Shard) error {
	var mine []float32
	for _, t := range ts {
		lo, hi := s.Range(t.Numel())
		if hi > lo {
			part := make([]float32, hi-lo)
			h.B.Download(t.View(t.Numel()).Rows(lo, hi), part)
			mine = append(mine, part...)
		}
	}
	if err := h.B.Err(); err != nil {
		return fmt.Errorf("optimizer shards to the host: %w", err)
	}
	blob := make([]byte, 4*len(mine))
	for i, v := range mine {
		binary.LittleEndian.PutUint32(blob[4*i:], math.Float32bits(v))
	}
	all, err := h.G.AllGather("optimizer shards", blob)
	if err != nil {
		return err
	}
	for r, b := range all {
		if r == s.Rank {
			continue
		}
		q := model.Shard{Rank: r, World: s.World}
		off := 0
		for _, t := range ts {
			lo, hi := q.Range(t.Numel())
			if hi == lo {
				continue
			}
			if len(b) < 4*(off+hi-lo) {
				return fmt.Errorf("optimizer shards: rank %d sent %d bytes, fewer than its ranges need", r, len(b))
			}
			part := make([]float32, hi-lo)
			for i := range part {
				part[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*(off+i):]))
			}
			h.B.Upload(t.View(t.Numel()).Rows(lo, hi), part)
			off += hi - lo
		}
		if len(b) != 4*off {
			return fmt.Errorf("optimizer shards: rank %d sent %d bytes, its ranges hold %d", r, len(b), 4*off)
		}
	}
	return h.B.Err()
}
