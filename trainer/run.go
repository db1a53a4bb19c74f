package trainer

// Setting up a run: loading the policy, the frozen reference, the tokenizer,
// the datasets and the scorers, and opening the run folder.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gdrotrain/gdrotrain/checkpoint"
	"github.com/gdrotrain/gdrotrain/data"
	"github.com/gdrotrain/gdrotrain/gdro"
	"github.com/gdrotrain/gdrotrain/memplan"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/optim"
	"github.com/gdrotrain/gdrotrain/reward"
	"github.com/gdrotrain/gdrotrain/tokenizer"
)

// promptSet is a dataset with its prompts tokenized.
type promptSet struct {
	ds    *data.Dataset
	ids   map[string][]int32     // by UID
	byUID map[string]data.Prompt // the prompts by UID
}

// Trainer holds a run's state.
type Trainer struct {
	Cfg    Config
	Dir    string // the run folder
	Log    *log.Logger
	Policy *model.Model
	Ref    *model.Model // frozen initial policy; nil when no KL is needed
	Tok    *tokenizer.Tokenizer
	Ctrl   *gdro.Controller
	// Opt updates the policy: AdamW and clipping, spread over the ranks
	// by the strategy setup chose (optim.New).
	Opt    optim.Strategy
	Memory memplan.Plan // estimated before the run starts
	refID  checkpoint.Identity

	train   promptSet
	val     promptSet
	loader  *data.Loader
	stops   []int32
	scorers map[string]reward.Scorer // by data_source
	rmet    reward.Metrics
	metrics io.Writer // metrics.jsonl on rank 0; discarded on the others
	valLog  io.Writer // validation.jsonl likewise
	step    int
	updates int // optimizer steps taken
	closers []io.Closer
	// valDue: the validation of the current step is owed (before training,
	// at a validation step, at the last step), also across a stop and resume.
	valDue bool
	// allowConfigChange: Options.AllowConfigChange (the training data's
	// content may change too, restoreCursor).
	allowConfigChange bool
	// firstStep is the first step of the run folder's metrics.jsonl
	// (State.FirstStep).
	firstStep int
	// savedStep is the step of the newest checkpoint this run wrote or
	// resumed from (-1: none), so a stop does not write it twice.
	savedStep int
	// onPhase, when set (tests), is called as each phase of the loop starts.
	onPhase func(Phase)
	// backend opens run.device (Options.Backend).
	backend BackendOpener
	scorer  reward.Scorer // Options.Scorer
	// group is the training ranks' group (ranks.go): one process, or data
	// parallel (dp.go); chosen in openFolder.
	group rankGroup
	// rollouts is where the steps' rows come from (rollouts.go): this
	// process's sampler, or the generation ranks (dist.rollout_ranks,
	// async.go); chosen in openFolder.
	rollouts rolloutSource
}

// Phase names a unit of the loop's work, for tests that stop a run at each.
type Phase string

// The loop's phases.
const (
	PhaseGenerate   Phase = "generate"
	PhaseScore      Phase = "score"
	PhaseLogProbs   Phase = "logprobs"
	PhaseUpdate     Phase = "update"
	PhaseValidate   Phase = "validate"
	PhaseCheckpoint Phase = "checkpoint"
)

func (t *Trainer) phase(p Phase) {
	if t.onPhase != nil {
		t.onPhase(p)
	}
}

// New prepares a run: it validates cfg, creates the run folder, writes the
// resolved config there and loads everything the loop needs. resume is ""
// (a new run), "auto" (continue from the newest complete checkpoint in the
// run folder, if any) or a checkpoint folder. It opens run.device with
// CPUOnly; Open with Options.Backend set (backend.Open) reaches a GPU.
func New(cfg Config, logw io.Writer, resume string) (*Trainer, error) {
	return Open(cfg, logw, Options{Resume: resume})
}

// Open is New with every start option (see Options and runfolder.go): the
// config, the input paths and the run folder are checked, and the
// checkpoint to resume from is found and compared with the config, before
// the model is loaded or anything in the run folder is changed.
func Open(cfg Config, logw io.Writer, o Options) (*Trainer, error) {
	cfg = cfg.Resolved()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := Preflight(cfg, o); err != nil {
		return nil, err
	}
	t, err := openFolder(cfg, logw, o)
	if err != nil {
		return nil, err
	}
	if t.refID, err = checkpoint.ModelIdentity(cfg.Model.Path); err != nil {
		t.Close()
		return nil, fmt.Errorf("model.path: %w", err)
	}
	if cfg.LoRA.On() {
		// A LoRA checkpoint holds adapters only: its base is identified
		// by content, every byte.
		if t.refID.Weights, err = checkpoint.WeightsHash(cfg.Model.Path); err != nil {
			t.Close()
			return nil, fmt.Errorf("model.path: %w", err)
		}
	}
	var resumeDir string
	var m *checkpoint.Manifest
	if t.group.rank() == 0 {
		resumeDir, m, err = t.findResume(o)
	}
	if resumeDir, m, err = t.group.shareResume(resumeDir, m, err); err != nil {
		t.Close()
		return nil, err
	}
	if err := t.setup(); err != nil {
		t.Close()
		return nil, err
	}
	if err := t.start(resumeDir, m, o.RepairMetrics); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// openFolder makes the Trainer with its log: on rank 0 (and in one
// process) it clears the run folder if asked, creates it and opens
// train.log there; the other ranks write nothing in the run folder and log
// to logw with their rank as prefix.
func openFolder(cfg Config, logw io.Writer, o Options) (*Trainer, error) {
	dir := cfg.RunDir()
	t := &Trainer{Cfg: cfg, Dir: dir, savedStep: -1, backend: o.Backend, scorer: o.Scorer, allowConfigChange: o.AllowConfigChange}
	t.group = openRanks(o.Dist)
	var err error
	if t.rollouts, err = openRollouts(t, cfg, o.Dist); err != nil {
		return nil, err
	}
	if t.group.rank() != 0 {
		t.Log = log.New(logw, fmt.Sprintf("[rank %d] ", t.group.rank()), log.LstdFlags)
		return t, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create run folder: %w", err)
	}
	// The lock before anything in the folder changes (lock.go); its notes
	// wait for the log.
	var notes []string
	lock, err := lockRun(dir, func(format string, a ...any) { notes = append(notes, fmt.Sprintf(format, a...)) })
	if err != nil {
		return nil, err
	}
	t.closers = append(t.closers, lock) // closed last: after the files it guards
	var removed []string
	if o.Overwrite {
		if removed, err = clearRun(dir); err != nil {
			lock.Close()
			return nil, err
		}
	}
	trash, err := checkpoint.RemoveTrash(t.checkpointRoot())
	if err != nil {
		lock.Close()
		return nil, err
	}
	logFile, err := os.OpenFile(filepath.Join(dir, "train.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("open log: %w", err)
	}
	t.Log = log.New(io.MultiWriter(logw, logFile), "", log.LstdFlags)
	t.closers = append(t.closers, logFile)
	for _, n := range notes {
		t.Log.Print(n)
	}
	if len(removed) > 0 {
		t.Log.Printf("starting afresh (--overwrite): removed the earlier run's %s from %s", strings.Join(removed, ", "), dir)
	}
	if len(trash) > 0 {
		t.Log.Printf("removed the leftovers of an interrupted prune of old checkpoints: %s", strings.Join(trash, ", "))
	}
	if d := t.group.describe(); d != "" {
		t.Log.Print(d)
	}
	return t, nil
}

// start restores the checkpoint found by findResume, if any, and opens the
// per-step logs.
func (t *Trainer) start(dir string, m *checkpoint.Manifest, repair bool) error {
	keep := -1
	t.valDue = t.val.ds != nil && t.Cfg.Validation.BeforeTraining
	t.firstStep = 1
	if dir != "" {
		if err := t.resume(dir, m); err != nil {
			return err
		}
		keep = t.step
		if !within(dir, t.checkpointRoot()) {
			// A checkpoint from elsewhere starts this run folder's lines.
			t.firstStep = keep + 1
		}
	}
	if t.group.rank() != 0 {
		t.metrics, t.valLog = io.Discard, io.Discard
		return nil
	}
	c := logCheck{everyStep: true, first: t.firstStep, repair: repair, logf: t.Log.Printf}
	metrics, err := openJSONL(filepath.Join(t.Dir, "metrics.jsonl"), keep, c)
	if err != nil {
		return err
	}
	t.metrics = metrics
	t.closers = append(t.closers, metrics)
	c.everyStep = false
	valLog, err := openJSONL(filepath.Join(t.Dir, "validation.jsonl"), keep, c)
	if err != nil {
		return err
	}
	t.valLog = valLog
	t.closers = append(t.closers, valLog)
	return t.openTracking(keep)
}

// tokDir is the tokenizer folder (model.tokenizer, else model.path).
func (c Config) tokDir() string {
	if c.Model.Tokenizer != "" {
		return c.Model.Tokenizer
	}
	return c.Model.Path
}

func (t *Trainer) setup() error {
	cfg := t.Cfg
	if t.group.rank() == 0 {
		raw, err := cfg.YAML()
		if err != nil {
			return err
		}
		if err := model.WriteFileAtomic(filepath.Join(t.Dir, "config.yaml"), raw); err != nil {
			return err
		}
	}
	// Plan memory from config.json before loading anything large.
	b, plan, err := OpenBackend(cfg, t.backend, t.Log.Printf)
	if err != nil {
		return err
	}
	if err := t.group.open(b, &plan, cfg.Dist.ZeROStage); err != nil {
		return err
	}
	if err := t.rollouts.open(b); err != nil {
		return err
	}
	t.Memory = plan.Plan
	t.Log.Printf("backend %s; memory plan: %s", b.Name(), t.Memory)
	if err := plan.Check(); err != nil {
		return err
	}
	if err := t.loadPolicy(b); err != nil {
		return err
	}
	if err := t.loadReference(b, plan.NeedRef); err != nil {
		return err
	}
	if err := t.loadData(); err != nil {
		return err
	}
	if t.Ctrl, err = gdro.New(cfg.GDRO); err != nil {
		return fmt.Errorf("gdro: %w", err)
	}
	return t.Opt.AllocGrads()
}

// loadPolicy loads the policy on b (with LoRA its adapters), its
// optimizer and its bf16 copies.
func (t *Trainer) loadPolicy(b model.Backend) error {
	cfg := t.Cfg
	var err error
	if t.Policy, err = model.Load(b, cfg.Model.Path); err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	if lc := cfg.LoRA.Model(); lc != nil {
		if err := t.attachAdapters(lc); err != nil {
			return err
		}
	}
	// The optimizer before the bf16 copies: with sharded fp32 masters
	// (optim/masters.go) the matrices go bf16 only first, so no copy of
	// them is made and the rank never holds a matrix in fp32 and bf16
	// beside its master.
	if t.Opt, err = optim.New(t.Policy, t.optimSetup(b)); err != nil {
		return err
	}
	if copies, err := t.Policy.ShadowWeights(); err != nil {
		return fmt.Errorf("policy: %w", err)
	} else if copies && !t.Opt.MastersSharded() {
		t.Log.Printf("policy matrices also held in bf16 for products (precision.matmul bf16); fp32 stays the master copy")
	}
	t.Policy.Recompute = cfg.Train.Recompute
	t.Policy.KVCacheBF16 = cfg.Precision.KVBF16(kvCacheGPU(b))
	t.Policy.KVCacheFP8 = cfg.Precision.KVFP8()
	t.Policy.ExactKV = cfg.Precision.ExactLogProbs // the training forward reads k, v as the cache holds them
	if err := t.Policy.CheckKVCache(); err != nil {
		return err
	}
	t.Log.Printf("policy %s: %d layers, hidden %d, %.1fM parameters", cfg.Model.Path, t.Policy.Cfg.NumHiddenLayers, t.Policy.Cfg.HiddenSize, float64(t.Policy.Cfg.NumParams())/1e6)
	return nil
}

// loadReference loads the frozen reference policy when the run needs one
// (needRef: a KL term).
func (t *Trainer) loadReference(b model.Backend, needRef bool) error {
	cfg := t.Cfg
	var err error
	if needRef && t.Policy.A != nil {
		// With LoRA the reference is the base the adapters sit on.
		t.Ref = t.Policy.Base()
	} else if needRef {
		// The reference policy is the frozen initial checkpoint.
		if t.Ref, err = model.Load(b, cfg.Model.Path); err != nil {
			return fmt.Errorf("reference policy: %w", err)
		}
		if cfg.Precision.RefBF16() {
			frozen, err := t.Ref.Freeze()
			if err != nil {
				return fmt.Errorf("reference policy: %w", err)
			}
			if frozen {
				t.Log.Printf("reference policy held in bf16 (precision.reference)")
			}
		}
	}
	return nil
}

// loadData loads the tokenizer, the training and validation prompts, the
// data loader and the scorers.
func (t *Trainer) loadData() error {
	cfg := t.Cfg
	var err error
	tokDir := cfg.tokDir()
	if t.Tok, err = tokenizer.Load(tokDir); err != nil {
		return fmt.Errorf("tokenizer: %w", err)
	}
	if t.Tok.VocabSize() > t.Policy.Cfg.VocabSize {
		return fmt.Errorf("tokenizer in %s has %d tokens but the model's vocab_size is %d", tokDir, t.Tok.VocabSize(), t.Policy.Cfg.VocabSize)
	}
	t.stops = stopIDs(t.Tok, t.Policy.Cfg, cfg.Model.Path)
	if t.train, err = t.loadPrompts(cfg.Data.Train, "train"); err != nil {
		return err
	}
	if len(cfg.Validation.Files) > 0 {
		if t.val, err = t.loadPrompts(cfg.Validation.Files, "test"); err != nil {
			return err
		}
	}
	if t.loader, err = data.NewLoader(t.train.ds, cfg.Train.PromptsPerStep, cfg.Run.Seed); err != nil {
		return fmt.Errorf("train data: %w", err)
	}
	return t.buildScorers()
}

// optimSetup is how the run updates its policy (optim.New): in one
// process, or as this rank of its group (rankGroup.optimSetup).
func (t *Trainer) optimSetup(b model.Backend) optim.Setup {
	s := optim.Setup{AdamW: t.Cfg.Optim.AdamWConfig, GradClip: t.Cfg.Optim.GradClip,
		ZeRO: t.Cfg.Dist.ZeROStage, ShardMasters: t.Cfg.Dist.ShardMasters, Logf: t.Log.Printf}
	return t.group.optimSetup(s, b)
}

// loadPrompts is loadPrompts with t's config, tokenizer and log.
func (t *Trainer) loadPrompts(files []string, split string) (promptSet, error) {
	return loadPrompts(t.Cfg, t.Tok, t.Log.Printf, files, split)
}

// loadPrompts reads, tokenizes and length-checks a set of files.
func loadPrompts(cfg Config, tok *tokenizer.Tokenizer, logf func(string, ...any), files []string, split string) (promptSet, error) {
	tmpl, err := data.ParseTemplate(cfg.Data.Template)
	if err != nil {
		return promptSet{}, fmt.Errorf("data.template: %w", err)
	}
	ds, err := data.ReadFiles(files, data.ReadOptions{Template: tmpl, Split: split, SkipBadRows: cfg.Data.SkipBadRows, Logf: logf})
	if err != nil {
		return promptSet{}, err
	}
	for _, p := range ds.Prompts {
		if p.GroundTruth == "" {
			return promptSet{}, fmt.Errorf("%s: row %d (uid %s) has no ground truth", p.File, p.Row, p.UID)
		}
	}
	mode, err := tokenizer.ParsePromptMode(cfg.Model.Prompt)
	if err != nil {
		return promptSet{}, fmt.Errorf("model.prompt: %w", err)
	}
	toks, err := ds.Tokenize(tok, mode)
	if err != nil {
		return promptSet{}, err
	}
	ds, toks, rep, err := data.FilterByLength(ds, toks, cfg.Data.MaxPromptLength, cfg.Data.DropLongPrompts)
	if err != nil {
		return promptSet{}, fmt.Errorf("data.max_prompt_length: %w", err)
	}
	logf("%s data: %d prompts from %d files (%s)", split, len(ds.Prompts), len(files), rep)
	set := promptSet{ds: ds, ids: map[string][]int32{}, byUID: map[string]data.Prompt{}}
	for i, p := range ds.Prompts {
		set.ids[p.UID] = tokenizer.Int32s(toks[i].IDs)
		set.byUID[p.UID] = p
	}
	return set, nil
}

// buildScorers picks one scorer per data_source, by reward.mode or by the
// reference's dispatch; an unsupported source is an error before training.
func (t *Trainer) buildScorers() (err error) {
	t.scorers, err = buildScorers(t.Cfg, t.scorer, &t.rmet, t.Log.Printf, t.train, t.val)
	return err
}

// buildScorers is Trainer.buildScorers for the prompts of sets: the
// scorers count into rmet; override, when set, scores every source.
func buildScorers(cfg Config, override reward.Scorer, rmet *reward.Metrics, logf func(string, ...any), sets ...promptSet) (map[string]reward.Scorer, error) {
	scorers := map[string]reward.Scorer{}
	var sources []string
	seen := map[string]bool{}
	for _, set := range sets {
		if set.ds == nil {
			continue
		}
		for _, p := range set.ds.Prompts {
			if !seen[p.DataSource] {
				seen[p.DataSource] = true
				sources = append(sources, p.DataSource)
			}
		}
	}
	sort.Strings(sources)
	for _, src := range sources {
		var s reward.Scorer
		var err error
		if override != nil {
			s = override
		} else if cfg.Reward.Mode == "auto" {
			s, err = reward.ForDataSource(src)
		} else {
			s, err = reward.New(reward.Mode(cfg.Reward.Mode))
		}
		if err != nil {
			return nil, fmt.Errorf("reward for data_source %q: %w (set reward.mode to dapo, boxed, gpqa or symbolic)", src, err)
		}
		scorers[src] = reward.Counted{Scorer: s, M: rmet}
		logf("reward: %s → %s", src, s.Mode())
	}
	return scorers, nil
}

// stopIDs gathers every end-of-sequence id: the tokenizer's, config.json's
// and generation_config.json's (docs/algorithm.md §11 item 19).
func stopIDs(tok *tokenizer.Tokenizer, mc *model.Config, dir string) []int32 {
	set := map[int]bool{}
	for _, id := range tok.StopIDs() {
		set[id] = true
	}
	for _, id := range mc.EOSTokenIDs {
		set[id] = true
	}
	if raw, err := os.ReadFile(filepath.Join(dir, "generation_config.json")); err == nil {
		var gen struct {
			EOS model.TokenIDs `json:"eos_token_id"`
		}
		if json.Unmarshal(raw, &gen) == nil {
			for _, id := range gen.EOS {
				set[id] = true
			}
		}
	}
	var out []int32
	for id := range set {
		if id >= 0 && id < mc.VocabSize {
			out = append(out, int32(id))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Close flushes and closes the run's files.
func (t *Trainer) Close() error {
	var errs []error
	errs = append(errs, t.group.close())
	errs = append(errs, t.rollouts.close())
	for i := len(t.closers) - 1; i >= 0; i-- {
		errs = append(errs, t.closers[i].Close())
	}
	t.closers = nil
	return errors.Join(errs...)
}
