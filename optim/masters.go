package optim

// ZeRO-1 with sharded fp32 masters. Under bf16 products a policy matrix is
// read only by products, which see its bf16 rounding; its fp32 values are
// needed only by AdamW. So where the backend can hold a weight as bf16
// storage alone (model.HalfPrecision: the CUDA backend under bf16 products),
// each rank keeps, beside the moments of its Range of every parameter, the
// fp32 master of that range only (ShardedAdamW.ShardMasters), and the
// matrix itself becomes bf16: 2 bytes per element on every rank plus 4/W
// for the master, instead of 4 + 2 (fp32 weight and its bf16 copy).
// Qwen3-8B at W = 8 (7.57 G elements in those matrices): 28.2 + 14.1 GiB
// per rank become 14.1 + 3.5.
//
// AdamW on the owned range reads the gradient, updates the master and the
// moments, and writes the master's bf16 rounding into the weight's range
// (model.HalfPrecision.AdamWHalf: the same kernel and rounding that write a
// bf16 copy in the replicated update); the ranks then all-gather the bf16
// ranges. Products read exactly the bf16 operands they read before, so the
// training is bitwise that of moment-only ZeRO-1 (on the emulator, whose
// FAST_16BF products round their inputs to bf16 as explicit bf16 operands
// are; a GPU's cuBLAS may pick other kernels for the two input types).
//
// What stays fp32 and whole: the RMSNorm gains (tiny; read by RMSNorm,
// hashed across ranks) and the input embedding, whose rows the forward
// looks up unrounded (see model.Model.Freeze): rounding it would change
// the model. An untied LM head is a matrix read by products, so it is
// sharded; a tied one is the embedding.
//
// Checkpoints keep their format: the ranks gather each master through one
// padded buffer (GatherMasters) and rank 0 writes the whole fp32 policy;
// resume reads the whole fp32 file on every rank, keeps the rank's range
// as master and rounds the rest into the bf16 weight (LoadMasters), so a
// checkpoint still resumes at any world size.

import (
	"fmt"
	"slices"

	"github.com/gdrotrain/gdrotrain/model"
)

// MasterSharded reports whether ZeRO keeps only a rank's part of np's
// fp32 master where the policy's matrices are bf16 for products: every
// matrix but the input embedding, whose rows the lookup reads in fp32
// (the norms, vectors, stay whole too; see the file comment). The memory
// plan counts by the same rule.
func MasterSharded(np model.NamedParam) bool {
	return len(np.Shape) >= 2 && np.Name != "model.embed_tokens.weight"
}

// ShardMasters turns a sharded optimizer into one that also holds the fp32
// masters of its ranges, and the policy p's matrices (but the embedding)
// into bf16-only weights. It copies each master from the fp32 weight
// before the weight is converted. It reports false, changing nothing, where
// the backend cannot hold bf16-only weights.
//
// Padding: NCCL's all-gather needs equal blocks, and the last ranks'
// ranges of a parameter are shorter or empty. A standalone matrix (o_proj,
// down_proj, the LM head) gets bf16 storage of W·⌈n/W⌉ elements, so the
// gather runs in place on the weight (at most W−1 spare elements: nothing,
// against a scratch copy of the largest parameter every step). The fused
// storages (q/k/v, gate/up) are one matrix to the products, so only their
// last view (v_proj, up_proj) can own a tail; an earlier view whose n is
// not a multiple of W (never for Qwen3's sizes at W a power of two, but
// possible in tests) is gathered through a scratch buffer instead, since
// its padding would overlap the next view.
func (o *ShardedAdamW) ShardMasters(b model.Backend, mc *model.Config, p *model.Params) (bool, error) {
	hw := model.TrainerCapsOf(b).Half
	if hw == nil {
		return false, nil
	}
	pn := p.Named(mc)
	if len(pn) != len(o.Names) {
		return false, fmt.Errorf("sharded fp32 masters: %d parameters but moments for %d", len(pn), len(o.Names))
	}
	index := make(map[**model.Tensor]int, len(pn))
	for i, np := range pn {
		index[np.Ptr] = i
	}
	// Storage by storage, each padded for its last view: the masters of its
	// views are copied, then it goes bf16 (its fp32 and bf16 copy freed), so
	// the setup never holds more than today's weights plus one storage's
	// bf16 and masters.
	type storage struct {
		whole *model.Tensor    // a fused storage, or nil for a standalone matrix
		views []**model.Tensor // its parameters, the last one owning the padding
	}
	var groups []storage
	for i := range p.Layers {
		l := &p.Layers[i]
		groups = append(groups, storage{l.QKV, []**model.Tensor{&l.Q, &l.K, &l.V}}, storage{nil, []**model.Tensor{&l.O}},
			storage{l.GateUp, []**model.Tensor{&l.Gate, &l.Up}}, storage{nil, []**model.Tensor{&l.Down}})
	}
	if !p.Tied {
		groups = append(groups, storage{nil, []**model.Tensor{&p.LMHead}})
	}
	o.Master, o.HalfOnly = make([]*model.Tensor, len(pn)), make([]bool, len(pn))
	pad := func(t *model.Tensor) int { return o.Shard.PaddedLen(t.Numel()) - t.Numel() }
	for _, g := range groups {
		for _, v := range g.views {
			i, ok := index[v]
			if !ok || !MasterSharded(pn[i]) {
				return false, fmt.Errorf("sharded fp32 masters: a matrix of the layout is not in the name table")
			}
			t := *v
			o.HalfOnly[i] = true
			if lo, hi := o.Shard.Range(t.Numel()); hi > lo {
				o.Master[i] = b.New(hi - lo)
				b.Copy(o.Master[i], t.View(t.Numel()).Rows(lo, hi))
			}
		}
		if err := b.Err(); err != nil {
			b.ResetErr()
			return false, fmt.Errorf("sharded fp32 masters: copying rank %d's ranges: %w", o.Shard.Rank, err)
		}
		last := *g.views[len(g.views)-1]
		if g.whole != nil {
			if err := hw.HalfOnly(g.whole, pad(last)); err != nil {
				return false, fmt.Errorf("sharded fp32 masters: the storage of %s: %w", pn[index[g.views[0]]].Name, err)
			}
		}
		for _, v := range g.views {
			if err := hw.HalfOnly(*v, pad(*v)); err != nil { // a view: pointed at its storage's bf16
				return false, fmt.Errorf("sharded fp32 masters: %s: %w", pn[index[v]].Name, err)
			}
		}
	}
	for i, np := range pn {
		if MasterSharded(np) && !o.HalfOnly[i] {
			return false, fmt.Errorf("sharded fp32 masters: %s is a matrix the layout does not list", np.Name)
		}
	}
	return true, nil
}

// MastersSharded reports whether the optimizer holds sharded fp32 masters
// (ShardMasters), so the policy's matrices are bf16 only.
func (o *ShardedAdamW) MastersSharded() bool { return o.HalfOnly != nil }

// GatherMasters returns the whole fp32 policy p by name on the ranks where
// want is set (rank 0, which writes checkpoints) and nil elsewhere: every
// rank must call it, since each sharded master is all-gathered. The
// masters go one parameter at a time through one padded buffer of the
// largest parameter (W·⌈n/W⌉ elements, released at the end); the other
// parameters are downloaded as they are.
func (o *ShardedAdamW) GatherMasters(b model.Backend, mc *model.Config, p *model.Params, g BlockGatherer, want bool) (map[string][]float32, error) {
	if !o.MastersSharded() {
		return nil, fmt.Errorf("gather fp32 masters: the optimizer holds no sharded masters")
	}
	if g == nil {
		return nil, fmt.Errorf("gather fp32 masters: sharded over %d ranks but no gatherer", o.Shard.World)
	}
	pn := p.Named(mc)
	if len(pn) != len(o.Names) {
		return nil, fmt.Errorf("gather fp32 masters: %d parameters but masters for %d", len(pn), len(o.Names))
	}
	longest := 0
	for i, n := range o.Numel {
		if o.HalfOnly[i] {
			longest = max(longest, o.Shard.PaddedLen(n))
		}
	}
	var buf *model.Tensor
	if longest > 0 {
		buf = b.New(longest)
		defer model.Release(b, buf)
	}
	var out map[string][]float32
	if want {
		out = make(map[string][]float32, len(pn))
	}
	for i, np := range pn {
		n := o.Numel[i]
		if !o.HalfOnly[i] {
			if want {
				host := make([]float32, n)
				b.Download(*np.Ptr, host)
				out[np.Name] = host
			}
			continue
		}
		padded := o.Shard.PaddedLen(n)
		chunk := padded / max(1, o.Shard.World)
		if lo, hi := o.Shard.Range(n); hi > lo {
			at := o.Shard.Rank * chunk
			b.Copy(buf.Rows(at, at+hi-lo), o.Master[i])
		}
		if err := b.Err(); err != nil {
			b.ResetErr()
			return nil, fmt.Errorf("gather fp32 master of %s: %w", np.Name, err)
		}
		if err := g.GatherBlocks(buf.Rows(0, padded), o.Shard); err != nil {
			return nil, fmt.Errorf("gather fp32 master of %s: %w", np.Name, err)
		}
		if want {
			host := make([]float32, n)
			b.Download(buf.Rows(0, n), host)
			out[np.Name] = host
		}
	}
	if err := b.Err(); err != nil {
		b.ResetErr()
		return nil, fmt.Errorf("gather fp32 masters: %w", err)
	}
	return out, nil
}

// LoadMasters sets the policy p and this rank's masters from the fp32
// weights of the Hugging Face folder dir (a checkpoint written at any world
// size): each sharded parameter's Range goes to its master and the whole
// parameter, rounded, to its bf16 weight; the other parameters are
// uploaded whole. The folder is checked as LoadParams checks it.
func (o *ShardedAdamW) LoadMasters(b model.Backend, mc *model.Config, p *model.Params, dir string) error {
	if !o.MastersSharded() {
		return fmt.Errorf("load fp32 masters: the optimizer holds no sharded masters")
	}
	hw := model.TrainerCapsOf(b).Half
	if hw == nil {
		return fmt.Errorf("load fp32 masters: backend %s has no bf16-only weights", b.Name())
	}
	pn := p.Named(mc)
	if len(pn) != len(o.Names) {
		return fmt.Errorf("load fp32 masters: %d parameters but masters for %d", len(pn), len(o.Names))
	}
	err := model.ReadParams(mc, p, dir, func(np model.NamedParam, host []float32) {
		i := slices.IndexFunc(pn, func(q model.NamedParam) bool { return q.Name == np.Name })
		if i < 0 || !o.HalfOnly[i] {
			b.Upload(*np.Ptr, host)
			return
		}
		if lo, hi := o.Shard.Range(len(host)); hi > lo {
			b.Upload(o.Master[i], host[lo:hi])
		}
		hw.WriteHalf(*np.Ptr, host)
	})
	if err != nil {
		return err
	}
	if err := b.Err(); err != nil {
		b.ResetErr()
		return fmt.Errorf("load fp32 masters from %s: %w", dir, err)
	}
	return nil
}
