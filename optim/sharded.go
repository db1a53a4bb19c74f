package optim

// The ZeRO strategies' common part (zero1, and zero2 in zero2.go): the
// sharded AdamW, the clip over the ranks' parts, and the checkpoint's
// per-rank moments files and gathered masters.

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/gdrotrain/gdrotrain/model"
)

// sharded is a rank's state under ZeRO.
type sharded struct {
	m     *model.Model
	opt   *ShardedAdamW
	comm  ShardComm
	group Summer
	clip  float64
	grads *model.Params
	logf  func(string, ...any)
}

func (z *sharded) Grads() *model.Params { return z.grads }

func (z *sharded) Update(lr float64) error {
	return z.opt.Update(z.m.B, z.m.Cfg, z.m.Trainable(), z.grads, lr)
}

func (z *sharded) Steps() int     { return z.opt.Step }
func (z *sharded) SetSteps(n int) { z.opt.Step = n }

// clipViews clips the ranks' parts views of the gradient: each rank's sum
// of squares, added in rank order on the control plane.
func (z *sharded) clipViews(views []*model.Tensor) (float64, error) {
	across := func(local float64) (float64, error) {
		x := []float64{local}
		err := z.group.SumFloat64("gradient norm", x)
		return x[0], err
	}
	norm, err := ClipShardGradNorm(z.m.B, views, across, 0) // the norm alone: AdamW scales (clip.go)
	z.opt.GradScale = ClipCoef(norm, z.clip)
	return norm, err
}

// SaveRanks has every rank write its moments into the checkpoint folder
// and, with sharded masters, take part in gathering them: rank 0 gets the
// whole fp32 policy by name (the checkpoint's weights stay the whole fp32
// policy, so it resumes at any world size), the others nil.
func (z *sharded) SaveRanks(ck Checkpoint) (map[string][]float32, error) {
	o := z.opt
	err := ck.PerRank("optimizer shards", func(dir string) error {
		return WriteMomentShard(dir, o.MomentSlices(z.m.B), o.Shard)
	})
	if err != nil || !o.MastersSharded() {
		return nil, err
	}
	masters, err := o.GatherMasters(z.m.B, z.m.Cfg, z.m.P, z.comm, o.Shard.Rank == 0)
	if err := ck.Agree(fmt.Sprintf("fp32 masters of step %d", ck.Step()), err); err != nil {
		return nil, err
	}
	return masters, nil
}

// SaveShared: each rank wrote its moments (SaveRanks).
func (z *sharded) SaveShared(string) error { return nil }

// LoadWeights: with sharded masters the policy's matrices are bf16 only,
// so every rank reads the whole fp32 file, keeps its ranges as masters
// and rounds the rest; otherwise the whole fp32 policy is loaded.
func (z *sharded) LoadWeights(dir string) error {
	if z.opt.MastersSharded() {
		return z.opt.LoadMasters(z.m.B, z.m.Cfg, z.m.P, dir)
	}
	return loadParams(z.m, dir)
}

func (z *sharded) LoadMoments(dir string) error {
	return withMoments(dir, func(f MomentSource) error { return z.opt.LoadMoments(z.m.B, f) })
}

func (z *sharded) MastersSharded() bool { return z.opt.MastersSharded() }

// Fingerprint adds, with sharded masters, the bf16 values of every
// bf16-only matrix at the first element of each rank's range and at its
// last element: the norms the ranks' fingerprint hashes are updated by
// every rank itself, but each rank's part of a matrix reaches the others
// only through the all-gather, so a rank that missed one differs there.
// W + 1 values per matrix, not the gigabytes of the whole bf16 policy.
func (z *sharded) Fingerprint(w io.Writer) {
	o := z.opt
	if !o.MastersSharded() {
		return
	}
	hw := model.TrainerCapsOf(z.m.B).Half
	if hw == nil {
		return
	}
	s, one := o.Shard, make([]float32, 1)
	for i, np := range z.m.Trainable().Named(z.m.Cfg) {
		if i >= len(o.HalfOnly) || !o.HalfOnly[i] {
			continue
		}
		n := (*np.Ptr).Numel()
		flat := (*np.Ptr).View(n)
		for r := 0; r <= s.World; r++ {
			at := n - 1 // after the ranks' starts: the last element
			if r < s.World {
				if at, _ = (Shard{Rank: r, World: s.World}).Range(n); at >= n {
					continue
				}
			}
			hw.ReadHalf(flat.Rows(at, at+1), one)
			binary.Write(w, binary.LittleEndian, math.Float32bits(one[0]))
		}
	}
}

// zero1 is ZeRO-1: the gradients whole on every rank (micro-batches
// accumulate into them), reduce-scattered once per mini-batch, since each
// rank's optimizer updates only its ranges.
type zero1 struct{ sharded }

func (z *zero1) AllocGrads() error {
	z.grads = model.NewLike(z.m.B, z.m.Cfg, z.m.Trainable())
	return nil
}

func (z *zero1) Flush() model.GradFlush { return nil }
func (z *zero1) ZeroGrads()             { ZeroGrads(z.m.B, z.m.Cfg, z.grads) }

func (z *zero1) Reduce(int) error {
	if err := z.comm.ReduceScatterShards(tensors(z.m.Cfg, z.grads), z.opt.Shard); err != nil {
		return fmt.Errorf("gradient reduce-scatter: %w", err)
	}
	return nil
}

func (z *zero1) Clip() (float64, error) {
	return z.clipViews(ShardViews(tensors(z.m.Cfg, z.grads), z.opt.Shard))
}
