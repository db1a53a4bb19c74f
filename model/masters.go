package model

// ZeRO-1 with sharded fp32 masters. Under bf16 products a policy matrix is
// read only by products, which see its bf16 rounding; its fp32 values are
// needed only by AdamW. So where the backend can hold a weight as bf16
// storage alone (HalfWeights: the CUDA backend under bf16 products), each
// rank keeps, beside the moments of its Range of every parameter, the fp32
// master of that range only (Optimizer.ShardMasters), and the matrix
// itself becomes bf16: 2 bytes per element on every rank plus 4/W for the
// master, instead of 4 + 2 (fp32 weight and its bf16 copy). Qwen3-8B at
// W = 8 (7.57 G elements in those matrices): 28.2 + 14.1 GiB per rank
// become 14.1 + 3.5.
//
// AdamW on the owned range reads the gradient, updates the master and the
// moments, and writes the master's bf16 rounding into the weight's range
// (HalfWeights.AdamWHalf: the same kernel and rounding that write a bf16
// copy in the replicated update); the ranks then all-gather the bf16
// ranges. Products read exactly the bf16 operands they read before, so the
// training is bitwise that of moment-only ZeRO-1 (on the emulator, whose
// FAST_16BF products round their inputs to bf16 as explicit bf16 operands
// are; a GPU's cuBLAS may pick other kernels for the two input types).
//
// What stays fp32 and whole: the RMSNorm gains (tiny; read by RMSNorm,
// hashed across ranks) and the input embedding, whose rows the forward
// looks up unrounded (see Freeze): rounding it would change the model. An
// untied LM head is a matrix read by products, so it is sharded; a tied
// one is the embedding.
//
// Checkpoints keep their format: the ranks gather each master through one
// padded buffer (GatherMasters) and rank 0 writes the whole fp32 policy;
// resume reads the whole fp32 file on every rank, keeps the rank's range
// as master and rounds the rest into the bf16 weight (LoadMasters), so a
// checkpoint still resumes at any world size.

import (
	"fmt"
	"slices"
)

// HalfWeights is implemented by backends that can keep a weight matrix as
// writable bf16 storage alone, its fp32 master living elsewhere (the CUDA
// backend under bf16 products). Such a weight is read by MatMul (as a
// bf16 operand) and ReadHalf, written by AdamWHalf, WriteHalf and the
// ranks' gathers; Download of it is an error, since its fp32 values are
// not there.
type HalfWeights interface {
	// HalfOnly replaces t's float32 storage by bf16 storage holding its
	// values rounded to nearest even, with pad spare elements after the
	// storage's end. Views convert with their storage: converting the
	// storage first, then each view, points the views at the new storage.
	HalfOnly(t *Tensor, pad int) error
	// IsHalfOnly reports whether t is such a weight.
	IsHalfOnly(t *Tensor) bool
	// AdamWHalf is AdamW on the fp32 master that also writes the bf16
	// rounding of the updated master into half (equal sizes).
	AdamWHalf(master, half, g, m, v *Tensor, h AdamWParams)
	// ReadHalf downloads a bf16-only weight, widened (exact).
	ReadHalf(t *Tensor, dst []float32)
	// WriteHalf uploads src rounded to bf16 into a bf16-only weight.
	WriteHalf(t *Tensor, src []float32)
}

// BlockGatherer all-gathers in place: buf (float32, or bf16 storage) holds
// World blocks of equal size, and afterwards every rank's block r holds
// what rank r's block r held. With blocks of ⌈n/W⌉ elements, block r
// starts with rank r's Range of a parameter of n elements, so a buffer
// padded to W·⌈n/W⌉ gathers a sharded parameter without another copy.
type BlockGatherer interface {
	GatherBlocks(buf *Tensor, s Shard) error
}

// PaddedLen is W·⌈n/W⌉: the elements of a padded buffer whose block r
// holds rank r's Range of a parameter of n elements.
func (s Shard) PaddedLen(n int) int {
	if !s.Sharded() {
		return n
	}
	return s.World * ((n + s.World - 1) / s.World)
}

// MasterSharded reports whether ZeRO keeps only a rank's part of np's
// fp32 master where the policy's matrices are bf16 for products: every
// matrix but the input embedding, whose rows the lookup reads in fp32
// (the norms, vectors, stay whole too; see the file comment). The memory
// plan counts by the same rule.
func MasterSharded(np NamedParam) bool {
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
func (o *Optimizer) ShardMasters(b Backend, mc *Config, p *Params) (bool, error) {
	sm := o.Sharded
	if sm == nil {
		return false, fmt.Errorf("sharded fp32 masters: the optimizer is not sharded (ZeRO-1 off or one rank)")
	}
	hw, ok := b.(HalfWeights)
	if !ok {
		return false, nil
	}
	pn := p.Named(mc)
	if len(pn) != len(sm.Names) {
		return false, fmt.Errorf("sharded fp32 masters: %d parameters but moments for %d", len(pn), len(sm.Names))
	}
	index := make(map[**Tensor]int, len(pn))
	for i, np := range pn {
		index[np.Ptr] = i
	}
	// Storage by storage, each padded for its last view: the masters of its
	// views are copied, then it goes bf16 (its fp32 and bf16 copy freed), so
	// the setup never holds more than today's weights plus one storage's
	// bf16 and masters.
	type storage struct {
		whole *Tensor    // a fused storage, or nil for a standalone matrix
		views []**Tensor // its parameters, the last one owning the padding
	}
	var groups []storage
	for i := range p.Layers {
		l := &p.Layers[i]
		groups = append(groups, storage{l.QKV, []**Tensor{&l.Q, &l.K, &l.V}}, storage{nil, []**Tensor{&l.O}},
			storage{l.GateUp, []**Tensor{&l.Gate, &l.Up}}, storage{nil, []**Tensor{&l.Down}})
	}
	if !p.Tied {
		groups = append(groups, storage{nil, []**Tensor{&p.LMHead}})
	}
	sm.Master, sm.HalfOnly = make([]*Tensor, len(pn)), make([]bool, len(pn))
	pad := func(t *Tensor) int { return sm.Shard.PaddedLen(t.Numel()) - t.Numel() }
	for _, g := range groups {
		for _, v := range g.views {
			i, ok := index[v]
			if !ok || !MasterSharded(pn[i]) {
				return false, fmt.Errorf("sharded fp32 masters: a matrix of the layout is not in the name table")
			}
			t := *v
			sm.HalfOnly[i] = true
			if lo, hi := sm.Shard.Range(t.Numel()); hi > lo {
				sm.Master[i] = b.New(hi - lo)
				b.Copy(sm.Master[i], t.View(t.Numel()).Rows(lo, hi))
			}
		}
		if err := b.Err(); err != nil {
			b.ResetErr()
			return false, fmt.Errorf("sharded fp32 masters: copying rank %d's ranges: %w", sm.Shard.Rank, err)
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
		if MasterSharded(np) && !sm.HalfOnly[i] {
			return false, fmt.Errorf("sharded fp32 masters: %s is a matrix the layout does not list", np.Name)
		}
	}
	return true, nil
}

// MastersSharded reports whether the optimizer holds sharded fp32 masters
// (ShardMasters), so the policy's matrices are bf16 only.
func (o *Optimizer) MastersSharded() bool { return o.Sharded != nil && o.Sharded.HalfOnly != nil }

// GatherMasters returns the whole fp32 policy p by name on the ranks where
// want is set (rank 0, which writes checkpoints) and nil elsewhere: every
// rank must call it, since each sharded master is all-gathered. The
// masters go one parameter at a time through one padded buffer of the
// largest parameter (W·⌈n/W⌉ elements, released at the end); the other
// parameters are downloaded as they are.
func (o *Optimizer) GatherMasters(b Backend, mc *Config, p *Params, g BlockGatherer, want bool) (map[string][]float32, error) {
	sm := o.Sharded
	if !o.MastersSharded() {
		return nil, fmt.Errorf("gather fp32 masters: the optimizer holds no sharded masters")
	}
	if g == nil {
		return nil, fmt.Errorf("gather fp32 masters: sharded over %d ranks but no gatherer", sm.Shard.World)
	}
	pn := p.Named(mc)
	if len(pn) != len(sm.Names) {
		return nil, fmt.Errorf("gather fp32 masters: %d parameters but masters for %d", len(pn), len(sm.Names))
	}
	longest := 0
	for i, n := range sm.Numel {
		if sm.HalfOnly[i] {
			longest = max(longest, sm.Shard.PaddedLen(n))
		}
	}
	var buf *Tensor
	if longest > 0 {
		buf = b.New(longest)
		if r, ok := b.(Releaser); ok {
			defer r.Release(buf)
		}
	}
	var out map[string][]float32
	if want {
		out = make(map[string][]float32, len(pn))
	}
	for i, np := range pn {
		n := sm.Numel[i]
		if !sm.HalfOnly[i] {
			if want {
				host := make([]float32, n)
				b.Download(*np.Ptr, host)
				out[np.Name] = host
			}
			continue
		}
		padded := sm.Shard.PaddedLen(n)
		chunk := padded / max(1, sm.Shard.World)
		if lo, hi := sm.Shard.Range(n); hi > lo {
			at := sm.Shard.Rank * chunk
			b.Copy(buf.Rows(at, at+hi-lo), sm.Master[i])
		}
		if err := b.Err(); err != nil {
			b.ResetErr()
			return nil, fmt.Errorf("gather fp32 master of %s: %w", np.Name, err)
		}
		if err := g.GatherBlocks(buf.Rows(0, padded), sm.Shard); err != nil {
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
func (o *Optimizer) LoadMasters(b Backend, mc *Config, p *Params, dir string) error {
	sm := o.Sharded
	if !o.MastersSharded() {
		return fmt.Errorf("load fp32 masters: the optimizer holds no sharded masters")
	}
	hw, ok := b.(HalfWeights)
	if !ok {
		return fmt.Errorf("load fp32 masters: backend %s has no bf16-only weights", b.Name())
	}
	pn := p.Named(mc)
	if len(pn) != len(sm.Names) {
		return fmt.Errorf("load fp32 masters: %d parameters but masters for %d", len(pn), len(sm.Names))
	}
	err := readParams(mc, p, dir, func(np NamedParam, host []float32) {
		i := slices.IndexFunc(pn, func(q NamedParam) bool { return q.Name == np.Name })
		if i < 0 || !sm.HalfOnly[i] {
			b.Upload(*np.Ptr, host)
			return
		}
		if lo, hi := sm.Shard.Range(len(host)); hi > lo {
			b.Upload(sm.Master[i], host[lo:hi])
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
