package optim

// One interface for every way of spreading the update over the ranks.
// New picks the strategy once, at setup, from the world size and the ZeRO
// stage; the trainer then runs each mini-batch the same way whichever it
// is:
//
//	ZeroGrads ─► micro-batches: model.BackwardFlush(…, Grads(), Flush())
//	  ─► Reduce ─► Clip ─► Update
//
// and checkpoints and resumes through SaveRanks, SaveShared, LoadWeights
// and LoadMoments. The strategies:
//
//	single      one process: whole gradients and moments, nothing to reduce
//	replicated  data parallel, dist.zero_stage 0: the gradients all-reduced,
//	            every rank runs the whole AdamW
//	zero1       the moments (and, under bf16 products, the fp32 masters)
//	            of 1/W of every parameter per rank; the gradients
//	            reduce-scattered, the updated ranges all-gathered (zero.go,
//	            masters.go)
//	zero2       zero1 with the gradients sharded too: a one-layer window
//	            reduce-scattered part by part during the backward into
//	            accumulators of the rank's ranges (zero2.go)
//
// A strategy owns the parameters it updates (today every parameter of the
// policy; an adapters-only optimizer would own its adapters), their
// gradients and their optimizer state, and where the fp32 values of those
// parameters live (on the backend, or in sharded masters).

import (
	"fmt"
	"io"

	"github.com/gdrotrain/gdrotrain/model"
)

// Strategy updates a model's parameters from the gradients of its
// micro-batches. Every rank of a data-parallel run calls the same methods
// in the same order (several are collectives).
type Strategy interface {
	// AllocGrads allocates the gradients, once, after the rest of the run
	// is loaded (so the setup's peak does not hold them beside the fp32
	// policy that sharded masters convert).
	AllocGrads() error
	// Grads is what the backward accumulates the micro-batches' gradients
	// into, and Flush its model.GradFlush (nil where none is needed).
	Grads() *model.Params
	Flush() model.GradFlush
	// ZeroGrads clears the gradients before a mini-batch.
	ZeroGrads()
	// Reduce completes the mini-batch's gradient over the ranks. missing
	// is how many rounds of the mini-batch's micro-batches this rank ran
	// none in while another rank ran one (the micro-batches are dealt
	// round-robin), so the strategy can match the others' collectives.
	Reduce(missing int) error
	// Clip scales the gradient to a global norm of at most optim.grad_clip
	// and returns the norm before clipping; a non-finite norm is an error
	// (the step must not be applied).
	Clip() (float64, error)
	// Update applies one AdamW step with learning rate lr.
	Update(lr float64) error
	// Steps is the number of AdamW steps taken (the bias correction's
	// count, checkpointed); SetSteps restores it.
	Steps() int
	SetSteps(n int)

	// SaveRanks is every rank's part of writing a checkpoint, before rank
	// 0 writes the rest: a sharded strategy writes its moments file into
	// the folder (ck.PerRank) and, with sharded masters, gathers them. It
	// returns, on rank 0, the fp32 values of the parameters that are not
	// on the backend, by name (nil when all are).
	SaveRanks(ck Checkpoint) (map[string][]float32, error)
	// SaveShared writes, on rank 0 into the checkpoint folder dir, the
	// optimizer state every rank holds alike (the whole moments; nothing
	// when each rank wrote its own).
	SaveShared(dir string) error
	// LoadWeights sets the parameters' fp32 values from the Hugging Face
	// folder dir (a checkpoint written at any world size).
	LoadWeights(dir string) error
	// LoadMoments sets this rank's moments from checkpoint folder dir,
	// written by one process or by any number of ranks.
	LoadMoments(dir string) error

	// Fingerprint writes, for the ranks' weight check, samples of what
	// only the strategy's gathers keep equal across the ranks (with
	// sharded masters, each rank's range of every bf16-only matrix);
	// nothing otherwise. Backend errors are left for the caller to read.
	Fingerprint(w io.Writer)
	// MastersSharded reports whether the policy's matrices are bf16 only,
	// their fp32 masters sharded over the ranks (dist.shard_masters).
	MastersSharded() bool
}

// Checkpoint is a checkpoint being written, as SaveRanks sees it: the
// trainer's checkpoint folder and its agreement between the ranks.
type Checkpoint interface {
	// Step is the step the checkpoint holds.
	Step() int
	// PerRank has rank 0 begin the checkpoint folder and every rank run
	// write in it; it returns nil on every rank when every write
	// succeeded, else every rank's failures. what names the files.
	PerRank(what string, write func(dir string) error) error
	// Agree returns nil on every rank when no rank's err is set, else on
	// every rank an error naming each failed rank and its error.
	Agree(what string, err error) error
}

// Setup is how a run updates its policy.
type Setup struct {
	AdamW    AdamWConfig
	GradClip float64 // the global norm's bound; 0 disables clipping
	// Shard is this process's rank of the data-parallel world (World ≤ 1:
	// one process).
	Shard Shard
	// ZeRO is dist.zero_stage: 0 replicated, 1 the moments (and masters)
	// sharded, 2 the gradients too.
	ZeRO int
	// ShardMasters (dist.shard_masters): under ZeRO and bf16 products,
	// keep only the fp32 masters of this rank's ranges.
	ShardMasters bool
	// Reducer all-reduces the gradients of a replicated run; Comm runs
	// ZeRO's collectives; Group sums the gradient norm's parts. Unused in
	// one process.
	Reducer AllReducer
	Comm    ShardComm
	Group   Summer
	// Logf receives what the strategy keeps where (nil: nothing).
	Logf func(format string, args ...any)
}

// New makes the strategy of s for m (its backend, config and parameters;
// m.P may be replaced by LoadWeights, and is read at every update). With
// sharded masters the policy's matrices become bf16 only here, so New
// must run before any bf16 copy of them is made (model.ShadowWeights).
func New(m *model.Model, s Setup) (Strategy, error) {
	logf := s.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	w := whole{m: m, clip: s.GradClip}
	switch {
	case !s.Shard.Sharded():
		w.opt = NewAdamWFor(m.B, m.Cfg, m.Trainable(), s.AdamW)
		return &single{w}, nil
	case s.ZeRO < 1:
		if s.Reducer == nil {
			return nil, fmt.Errorf("replicated data parallel over %d ranks: no gradient reducer", s.Shard.World)
		}
		w.opt = NewAdamWFor(m.B, m.Cfg, m.Trainable(), s.AdamW)
		return &replicated{whole: w, red: s.Reducer}, nil
	}
	if s.Comm == nil || s.Group == nil {
		return nil, fmt.Errorf("ZeRO over %d ranks: no collectives", s.Shard.World)
	}
	o, err := NewShardedAdamW(m.B, m.Cfg, m.Trainable(), s.AdamW, s.Shard)
	if err != nil {
		return nil, err
	}
	o.Gather = s.Comm
	logf("ZeRO-1: this rank keeps the AdamW moments of 1/%d of every parameter", s.Shard.World)
	if s.ShardMasters && m.A != nil {
		logf("dist.shard_masters: nothing to shard with LoRA (the base weights are frozen, the adapters' fp32 values are small)")
	} else if s.ShardMasters {
		if err := shardMasters(m, o, logf); err != nil {
			return nil, err
		}
	}
	z := sharded{m: m, opt: o, comm: s.Comm, group: s.Group, clip: s.GradClip, logf: logf}
	if s.ZeRO >= 2 {
		return &zero2{sharded: z}, nil
	}
	return &zero1{sharded: z}, nil
}

// shardMasters gives o the fp32 masters of its ranges where the backend's
// products read bf16 copies of the weights (a backend that makes one: the
// embedding always gets one under bf16 products); only there may the
// matrices be bf16 alone.
func shardMasters(m *model.Model, o *ShardedAdamW, logf func(string, ...any)) error {
	s := model.TrainerCapsOf(m.B).Half
	if s == nil {
		return nil
	}
	if copies, err := s.Shadow(m.P.Embed); err != nil {
		return fmt.Errorf("policy: bf16 copy of the embedding: %w", err)
	} else if !copies {
		return nil
	}
	done, err := o.ShardMasters(m.B, m.Cfg, m.P)
	if err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	if done {
		logf("ZeRO-1: this rank keeps the fp32 master weights of 1/%d of every matrix but the input embedding; the matrices are bf16 only (dist.shard_masters)", o.Shard.World)
	}
	return nil
}

// whole is the state of the strategies that keep every parameter's
// gradient and moments whole on every rank (single, replicated).
type whole struct {
	m     *model.Model
	opt   *AdamW
	grads *model.Params
	clip  float64
}

func (w *whole) AllocGrads() error {
	w.grads = model.NewLike(w.m.B, w.m.Cfg, w.m.Trainable())
	return nil
}

func (w *whole) Grads() *model.Params   { return w.grads }
func (w *whole) Flush() model.GradFlush { return nil }
func (w *whole) ZeroGrads()             { ZeroGrads(w.m.B, w.m.Cfg, w.grads) }

func (w *whole) Clip() (float64, error) {
	norm, err := ClipGradNorm(w.m.B, w.m.Cfg, w.grads, 0) // the norm alone: AdamW scales (clip.go)
	w.opt.GradScale = ClipCoef(norm, w.clip)
	return norm, err
}

func (w *whole) Update(lr float64) error {
	return w.opt.Update(w.m.B, w.m.Cfg, w.m.Trainable(), w.grads, lr)
}

func (w *whole) Steps() int     { return w.opt.Step }
func (w *whole) SetSteps(n int) { w.opt.Step = n }

// SaveRanks: rank 0 writes everything (SaveShared).
func (w *whole) SaveRanks(Checkpoint) (map[string][]float32, error) { return nil, nil }

func (w *whole) SaveShared(dir string) error { return w.opt.WriteMoments(w.m.B, w.m.Cfg, dir) }

func (w *whole) LoadWeights(dir string) error { return loadParams(w.m, dir) }

func (w *whole) LoadMoments(dir string) error {
	return withMoments(dir, func(f MomentSource) error { return w.opt.LoadMoments(w.m.B, w.m.Cfg, f) })
}

func (w *whole) Fingerprint(io.Writer) {}
func (w *whole) MastersSharded() bool  { return false }

// single is one process: its gradient is the whole gradient already.
type single struct{ whole }

func (*single) Reduce(int) error { return nil }

// replicated is data parallel with the optimizer state replicated
// (dist.zero_stage 0): the ranks' gradients are all-reduced, and every
// rank runs the same clip and AdamW on the same sum.
type replicated struct {
	whole
	red AllReducer
}

func (r *replicated) Reduce(int) error {
	if err := r.red.AllReduceSum(tensors(r.m.Cfg, r.grads)); err != nil {
		return fmt.Errorf("gradient all-reduce: %w", err)
	}
	return nil
}

// loadParams replaces m's trainable parameters by the fp32 values in
// folder dir: the weights of a Hugging Face folder, or, for a model with
// LoRA adapters, the PEFT adapter folder's adapters.
func loadParams(m *model.Model, dir string) error {
	if m.A != nil {
		a, err := model.LoadAdapters(m.B, m.Cfg, m.A.LoRA, dir)
		if err != nil {
			return err
		}
		m.A = a
		return nil
	}
	p, err := model.LoadParams(m.B, m.Cfg, dir)
	if err != nil {
		return err
	}
	m.P = p
	return nil
}

// withMoments runs load on checkpoint folder dir's moments, however many
// files they were written in.
func withMoments(dir string, load func(MomentSource) error) error {
	f, err := OpenMoments(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return load(f)
}

// tensors lists p's tensors in Params.Named order.
func tensors(mc *model.Config, p *model.Params) []*model.Tensor {
	named := p.Named(mc)
	ts := make([]*model.Tensor, len(named))
	for i, np := range named {
		ts[i] = *np.Ptr
	}
	return ts
}
