package trainer

// The run configuration: one typed struct, every default in Default(),
// decoded from YAML with unknown keys rejected, overridable key by key from
// the command line (--set optim.lr=1e-6), validated once, and written in
// full into the run folder.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/gdrotrain/gdrotrain/device"
	"github.com/gdrotrain/gdrotrain/dist"
	"github.com/gdrotrain/gdrotrain/gdro"
	"github.com/gdrotrain/gdrotrain/grpo"
	"github.com/gdrotrain/gdrotrain/optim"
	"github.com/gdrotrain/gdrotrain/reward"
)

// Methods.
const (
	MethodGRPO        = "grpo"
	MethodPromptGDRO  = "prompt_gdro"
	MethodRolloutGDRO = "rollout_gdro"
	// MethodPromptRolloutGDRO runs both controllers, Prompt-GDRO's weights
	// applied (gdro.prompt.apply as set).
	MethodPromptRolloutGDRO = "prompt_rollout_gdro"
)

// Config is a whole run.
type Config struct {
	Run        RunConfig        `yaml:"run" json:"run"`
	Precision  PrecisionConfig  `yaml:"precision" json:"precision"`
	Model      ModelConfig      `yaml:"model" json:"model"`
	Data       DataConfig       `yaml:"data" json:"data"`
	Sampling   SamplingConfig   `yaml:"sampling" json:"sampling"`
	Train      TrainConfig      `yaml:"train" json:"train"`
	Optim      OptimConfig      `yaml:"optim" json:"optim"`
	Loss       grpo.LossConfig  `yaml:"loss" json:"loss"`
	LoRA       LoRAConfig       `yaml:"lora" json:"lora"`
	GDRO       gdro.Config      `yaml:"gdro" json:"gdro"`
	Reward     RewardConfig     `yaml:"reward" json:"reward"`
	Validation ValidationConfig `yaml:"validation" json:"validation"`
	Checkpoint CheckpointConfig `yaml:"checkpoint" json:"checkpoint"`
	Dist       DistConfig       `yaml:"dist" json:"dist"`
	Log        LogConfig        `yaml:"log" json:"log"`
}

// RefBF16 reports whether the reference policy is held in bf16 on the GPU.
func (r PrecisionConfig) RefBF16() bool {
	return r.ReferenceDType == "bf16" || (r.ReferenceDType == "auto" && r.MatMul == "bf16")
}

// KVBF16 reports whether the sampler's KV cache is held in bf16 on a GPU
// (gpu) or on the CPU: bf16 asked for, or auto with bf16 products
// (precision.matmul bf16 on a GPU; the CPU's products are fp32, so auto
// keeps its cache fp32).
func (r PrecisionConfig) KVBF16(gpu bool) bool {
	return r.KVCacheDType == "bf16" || (r.KVCacheDType == "auto" && gpu && r.MatMul == "bf16")
}

// KVFP8 reports whether the sampler's KV cache is held in fp8 (e4m3).
func (r PrecisionConfig) KVFP8() bool { return r.KVCacheDType == "fp8" }

// RunConfig names the run and where it writes.
type RunConfig struct {
	Name   string `yaml:"name" json:"name"`       // run name (the folder under out_dir)
	OutDir string `yaml:"out_dir" json:"out_dir"` // parent folder of run folders
	Seed   uint64 `yaml:"seed" json:"seed"`       // one seed for shuffles, sampling and controllers
	Device string `yaml:"device" json:"device"`   // cpu, cuda, cuda:N or auto (GPU if present, else CPU)
}

// PrecisionConfig holds the GPU's number formats. The CPU computes and
// stores fp32, but for a KV cache asked for in bf16 or fp8 (kv_cache).
type PrecisionConfig struct {
	// MatMul is the GPU's matrix-product precision: bf16 (tensor cores,
	// fp32 accumulation), tf32 or fp32.
	MatMul string `yaml:"matmul" json:"matmul"`
	// ReferenceDType is the GPU storage of the frozen reference policy:
	// bf16 (half the memory), fp32, or auto: bf16 when precision.matmul is
	// bf16 (the policy's products already round their inputs to bf16, so
	// policy and reference agree at step 0 and the KL starts at 0), else
	// fp32. A bf16 reference beside an fp32/tf32 policy puts a rounding
	// floor under the KL.
	ReferenceDType string `yaml:"reference" json:"reference"`
	// KVCacheDType is the sampler's KV cache storage: bf16 (half the
	// memory and decode bandwidth; keys and values rounded as written),
	// fp8 (e4m3 with a scale per token and KV head, as vLLM's
	// kv_cache_dtype=fp8: about a quarter of fp32's bytes; on a GPU, one
	// of compute capability 8.9 or newer with head_dim a multiple of 16),
	// fp32, or auto: bf16 on a GPU when precision.matmul is bf16, else
	// fp32 (always fp32 on the CPU, whose products are fp32). The CPU
	// holds bf16 and fp8 as the GPU does, bit for bit: the reference for
	// the GPU's formats. The trainer recomputes old log-probs, so this
	// only affects sampling (docs/gpu.md measures the mismatch it adds).
	KVCacheDType string `yaml:"kv_cache" json:"kv_cache"`
	// ExactLogProbs makes the sampler's log-probabilities the trainer's,
	// bit for bit: every op from a token to its log-probability runs in
	// the same order with the same roundings in decoding and in the
	// training forward (batch-invariant products), the sampler returns
	// the untempered log-probability of each drawn token, and the trainer
	// uses them as π_old, skipping the π_old forward (the mismatch metrics
	// are exactly 0). On the CPU and CUDA backends, with any KV cache (the
	// training forward reads keys and values as the cache holds them);
	// slower products and attention (docs/algorithm.md §5.10).
	ExactLogProbs bool `yaml:"exact_logprobs" json:"exact_logprobs"`
	// ExactLogProbsCheck (with exact_logprobs) still runs the π_old
	// forward and stops the run on the first token whose log-probability
	// or entropy differs from the sampler's in any bit: a debugging check.
	// It also compares the whole-vocabulary log-softmax rows of each
	// row's first and last response token with the sampler's and logs
	// how many differ (mismatch_vocab_rows, exactly 0).
	ExactLogProbsCheck bool `yaml:"exact_logprobs_check" json:"exact_logprobs_check"`
}

// ModelConfig says what to train.
type ModelConfig struct {
	Path      string `yaml:"path" json:"path"`           // Hugging Face folder (config.json + safetensors)
	Tokenizer string `yaml:"tokenizer" json:"tokenizer"` // folder with tokenizer.json; default: model.path
	Prompt    string `yaml:"prompt" json:"prompt"`       // chat (apply the chat template) or raw
}

// DataConfig says what to train on.
type DataConfig struct {
	Train           []string `yaml:"train" json:"train"`                         // Parquet / JSONL files
	Template        string   `yaml:"template" json:"template"`                   // auto|none|dapo|math|gpqa for {problem, answer} rows
	MaxPromptLength int      `yaml:"max_prompt_length" json:"max_prompt_length"` // tokens; longer prompts are an error unless drop_long_prompts
	DropLongPrompts bool     `yaml:"drop_long_prompts" json:"drop_long_prompts"` // drop (and count) instead of failing
	SkipBadRows     bool     `yaml:"skip_bad_rows" json:"skip_bad_rows"`         // skip (and count) malformed rows instead of failing
}

// SamplingConfig is the training sampler's settings.
type SamplingConfig struct {
	Temperature  float64 `yaml:"temperature" json:"temperature"`       // training sampling temperature (the reference's 1.0; docs/algorithm.md §5.1)
	TopP         float64 `yaml:"top_p" json:"top_p"`                   // nucleus sampling mass; 1 = off
	TopK         int     `yaml:"top_k" json:"top_k"`                   // sample among the k likeliest tokens; 0 = off
	MaxNewTokens int     `yaml:"max_new_tokens" json:"max_new_tokens"` // longer responses are truncated (and counted)
	// MaxSlots is the number of concurrent sequences in the sampler
	// (continuous batching: a finished rollout's slot is refilled at the
	// next step, and a prompt may have more rollouts than slots).
	MaxSlots int `yaml:"max_slots" json:"max_slots"`
	// CUDAGraphs replays decode steps as CUDA graphs with the draw on the
	// GPU (CUDA only; ignored on the CPU, for top-p without top-k and with
	// precision.exact_logprobs_check, whose digests need eager steps).
	CUDAGraphs bool `yaml:"cuda_graphs" json:"cuda_graphs"`
	// KVCacheGiB > 0 pages the sampler's KV cache within this many GiB:
	// memory follows the rollouts' actual lengths, and a rollout is
	// pre-empted (and later recomputed, with the same tokens) when the
	// pages run out (sampler.Generate). 0 sizes every slot at full length.
	// On CUDA it is the page pool (bf16 KV cache only); on the CPU the
	// cache keeps full storage and the scheduler obeys the budget.
	KVCacheGiB float64 `yaml:"kv_cache_gib" json:"kv_cache_gib"`
}

// KVBudgetBytes is sampling.kv_cache_gib in bytes (0: not paged).
func (s SamplingConfig) KVBudgetBytes() int64 { return int64(s.KVCacheGiB * (1 << 30)) }

// TrainConfig shapes the loop. Rollouts per prompt are gdro.rollout.n_mean
// (fixed unless Rollout-GDRO is on).
type TrainConfig struct {
	Method           string `yaml:"method" json:"method"`                         // grpo | prompt_gdro | rollout_gdro | prompt_rollout_gdro
	Steps            int    `yaml:"steps" json:"steps"`                           // optimizer-step batches of prompts
	PromptsPerStep   int    `yaml:"prompts_per_step" json:"prompts_per_step"`     // N
	MiniBatchPrompts int    `yaml:"mini_batch_prompts" json:"mini_batch_prompts"` // prompts per optimizer step (rows = their rollouts)
	MicroBatchRows   int    `yaml:"micro_batch_rows" json:"micro_batch_rows"`     // rows per forward/backward
	PPOEpochs        int    `yaml:"ppo_epochs" json:"ppo_epochs"`                 // passes over each step's rollouts
	LogEvery         int    `yaml:"log_every" json:"log_every"`                   // print a summary line every k steps
	// Recompute keeps only each layer's input in the training forward and
	// recomputes the rest in the backward (activation checkpointing, verl's
	// enable_gradient_checkpointing): far less memory for one more forward.
	Recompute bool `yaml:"recompute" json:"recompute"`
	// FusedHead runs the LM head's backward inside the training forward, on
	// the logits it has just made, with the loss's per-token derivative
	// computed where the logits are (model.ForwardLoss, docs/algorithm.md
	// §5.15): no logits chunk is recomputed. false keeps the two-pass head
	// (the derivative from the host, the logits recomputed in the backward).
	FusedHead bool `yaml:"fused_head" json:"fused_head"`
	// DynamicSampling drops groups whose rewards are all equal and draws
	// more prompts until the step has prompts_per_step informative groups
	// (dynamic.go).
	DynamicSampling DynamicSamplingConfig `yaml:"dynamic_sampling" json:"dynamic_sampling"`
	// MaxOffPolicySteps is how many optimizer steps the generating weights
	// may lag the trained ones (async.go, docs/algorithm.md §5.13): 0 (the
	// default) generates each step with the weights of the step before, as
	// a synchronous run does; 1 generates step t+1 on the generation ranks
	// (dist.rollout_ranks) with the weights of step t−1 while step t trains,
	// and needs loss.rollout_correction.mode other than none. Larger
	// values are not built.
	MaxOffPolicySteps int `yaml:"max_off_policy_steps" json:"max_off_policy_steps"`
}

// OptimConfig is AdamW plus the schedule and clipping.
type OptimConfig struct {
	optim.AdamWConfig `yaml:",inline" json:",inline"`
	WarmupSteps       int     `yaml:"warmup_steps" json:"warmup_steps"` // linear warm-up, then constant
	GradClip          float64 `yaml:"grad_clip" json:"grad_clip"`       // global norm; 0 disables
}

// RewardConfig selects the verifier.
type RewardConfig struct {
	// Mode: auto (dispatch by data_source as the reference does), dapo,
	// boxed, gpqa or symbolic.
	Mode string `yaml:"mode" json:"mode"`
}

// ValidationConfig configures held-out evaluation.
type ValidationConfig struct {
	Files          []string `yaml:"files" json:"files"`                     // benchmark files (concatenated)
	Every          int      `yaml:"every" json:"every"`                     // steps; 0 = only at the end
	BeforeTraining bool     `yaml:"before_training" json:"before_training"` // also evaluate at step 0
	N              int      `yaml:"n" json:"n"`                             // samples per prompt (k of pass@k)
	MaxPrompts     int      `yaml:"max_prompts" json:"max_prompts"`         // 0 = all
	Temperature    float64  `yaml:"temperature" json:"temperature"`         // validation sampling temperature
	TopP           float64  `yaml:"top_p" json:"top_p"`                     // nucleus sampling mass; 1 = off
	TopK           int      `yaml:"top_k" json:"top_k"`                     // sample among the k likeliest tokens; 0 = off
	MaxNewTokens   int      `yaml:"max_new_tokens" json:"max_new_tokens"`   // longer responses are truncated
}

// CheckpointConfig says how often to checkpoint and how many to keep.
type CheckpointConfig struct {
	Every int `yaml:"every" json:"every"` // checkpoint every k steps (0: only at the end and on a signal)
	Keep  int `yaml:"keep" json:"keep"`   // newest complete checkpoints kept (0: all); permanent ones are never pruned
	// PermanentEvery marks every k-th step's checkpoint permanent (0: none).
	PermanentEvery int `yaml:"permanent_every" json:"permanent_every"`
}

// DistConfig tunes data-parallel runs (several ranks; dp.go). It does not
// change the training trajectory, so a resumed run may change it.
type DistConfig struct {
	// StateCheckEvery compares a hash of the controller state and a weight
	// fingerprint across ranks every k steps (and at every checkpoint);
	// 0: only at checkpoints.
	StateCheckEvery int `yaml:"state_check_every" json:"state_check_every"`
	// TimeoutS is the time limit of each collective on the host control
	// plane, in seconds: it must exceed the longest wait of one rank for
	// another (the slowest rank's generation, rank 0's checkpoint write).
	TimeoutS float64 `yaml:"timeout_s" json:"timeout_s"`
	// ZeROStage shards training state over the ranks: 1 (the default)
	// keeps on each rank the AdamW moments of its 1/W of every parameter
	// (bitwise the same update, 8/W bytes per parameter instead of 8);
	// 2 also the gradients (a one-layer window plus 4/W bytes per
	// parameter instead of 4, for a reduce-scatter per micro-batch
	// instead of per optimizer step); 0 replicates both. Stage 3
	// (sharded weights) is not built.
	ZeROStage int `yaml:"zero_stage" json:"zero_stage"`
	// ShardMasters, under ZeRO-1 with bf16 products (CUDA), keeps on each
	// rank the fp32 master weights of its 1/W of every matrix but the
	// input embedding, the matrices themselves in bf16 only (4/W + 2 bytes
	// per element instead of 4 + 2; the same training: bitwise on the
	// emulator, on GPUs up to cuBLAS's choice of kernels for bf16
	// inputs). false keeps the whole fp32 policy on every rank. Elsewhere
	// it does nothing.
	ShardMasters bool `yaml:"shard_masters" json:"shard_masters"`
	// Bind is the address rank 0 listens on for the other ranks: empty
	// (the default) is the address they reach it at (--master-addr,
	// MASTER_ADDR or Slurm's first host; 127.0.0.1 when all ranks run on
	// one node), not every interface; 0.0.0.0 is every interface. Either
	// way a rank joins only by proving it holds the job's
	// GDROTRAIN_DIST_TOKEN (docs/data-parallel.md).
	Bind string `yaml:"bind" json:"bind"`
	// RolloutRanks splits the world of W ranks into W−R training ranks
	// (ranks 0 … W−R−1: log-probs and the update, ZeRO over them alone) and
	// R generation ranks (the last R: the sampler and the verifier, fed the
	// new weights after every step with a version number; async.go). 0
	// (the default): every rank does both, in turn.
	RolloutRanks int `yaml:"rollout_ranks" json:"rollout_ranks"`
}

// Default returns every default in one place: the paper's GRPO settings at
// the reference's values (docs/algorithm.md §10) with the decisions of §11, on a model
// path the user must set.
func Default() Config {
	g := gdro.DefaultConfig()
	// The trainer's Rollout-GDRO scores arms by the paper's utility, −mean
	// loss (docs/algorithm.md §7.6); gdro's own default, variance, serves
	// gdro-sim and gdro-replay, whose traces need carry no losses.
	g.Rollout.Utility = gdro.UtilityNegLoss
	return Config{
		Run:       RunConfig{Name: "run", OutDir: "runs", Seed: 1, Device: "auto"},
		Precision: PrecisionConfig{MatMul: "bf16", ReferenceDType: "auto", KVCacheDType: "auto"},
		Model:     ModelConfig{Prompt: "chat"},
		Data:      DataConfig{Template: "auto", MaxPromptLength: 3200},
		Sampling:  SamplingConfig{Temperature: 1, TopP: 1, MaxNewTokens: 4096, MaxSlots: 64, CUDAGraphs: true},
		Train: TrainConfig{Method: MethodGRPO, Steps: 1000, PromptsPerStep: 256, MiniBatchPrompts: 128,
			MicroBatchRows: 16, PPOEpochs: 1, LogEvery: 1, FusedHead: true, DynamicSampling: DynamicSamplingConfig{MaxRounds: 10}},
		Optim: OptimConfig{AdamWConfig: optim.AdamWConfig{LR: 1e-6, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01},
			GradClip: 1},
		Loss:       grpo.DefaultLoss(),
		LoRA:       DefaultLoRA(),
		GDRO:       g,
		Reward:     RewardConfig{Mode: "auto"},
		Validation: ValidationConfig{Every: 50, N: 8, Temperature: 0.6, TopP: 0.8, TopK: 20, MaxNewTokens: 4096},
		Checkpoint: CheckpointConfig{Every: 50, Keep: 3},
		Dist:       DistConfig{StateCheckEvery: 10, TimeoutS: 1800, ZeROStage: 1, ShardMasters: true},
	}
}

// Load reads a YAML config file over the defaults; see LoadBytes.
func Load(path string, sets []string) (Config, error) {
	var raw []byte
	if path != "" {
		var err error
		if raw, err = os.ReadFile(path); err != nil {
			return Default(), fmt.Errorf("config: %w", err)
		}
	}
	return LoadBytes(raw, path, sets)
}

// LoadBytes decodes YAML over the defaults (unknown keys are errors),
// applies --set overrides ("section.key=value", value in YAML syntax) and
// validates. source names the YAML in errors; a key renamed or removed
// before the first release is an error naming what replaced it (oldkeys.go).
func LoadBytes(raw []byte, source string, sets []string) (Config, error) {
	cfg, err := Resolve(raw, source, sets)
	if err != nil {
		return cfg, err
	}
	if err := cfg.requireInputs(); err != nil {
		return cfg, fmt.Errorf("config %s: %w", orDefaults(source), err)
	}
	return cfg, nil
}

// Resolve is LoadBytes without requiring the inputs a run needs
// (model.path, data.train): every value is still checked. It serves
// --print-config and --dry-run, which must work on a shipped config before
// those paths are filled in.
func Resolve(raw []byte, source string, sets []string) (Config, error) {
	cfg := Default()
	source = orDefaults(source)
	if err := decodeStrict(raw, &cfg); err != nil {
		return cfg, fmt.Errorf("config %s: %w", source, err)
	}
	if err := applySets(&cfg, sets); err != nil {
		return cfg, err
	}
	cfg = cfg.Resolved()
	if err := cfg.validateValues(); err != nil {
		return cfg, fmt.Errorf("config %s: %w", source, err)
	}
	return cfg, nil
}

func orDefaults(source string) string {
	if source == "" {
		return "defaults"
	}
	return source
}

// decodeStrict decodes one YAML document over cfg: unknown keys are
// errors, and an old key's error names what replaced it.
func decodeStrict(raw []byte, cfg *Config) error {
	if err := oldKeyError(raw); err != nil {
		return err
	}
	if err := wholeNumbers(raw, reflect.TypeOf(cfg)); err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) { // an empty document changes nothing
		return err
	}
	return nil
}

// applySets applies overrides such as "optim.lr=1e-6" or
// "data.train=[a.jsonl, b.jsonl]" through the same strict decoder.
func applySets(cfg *Config, sets []string) error {
	for _, s := range sets {
		key, value, ok := strings.Cut(s, "=")
		if !ok || key == "" {
			return fmt.Errorf("--set %q: want section.key=value", s)
		}
		if strings.TrimSpace(value) == "" {
			// Not "unset": a key=  left the value as it was, silently.
			return fmt.Errorf("--set %s: no value for %s (an empty string is %s=\"\", an empty list %s=[])", s, strings.TrimSpace(key), strings.TrimSpace(key), strings.TrimSpace(key))
		}
		parts := strings.Split(strings.TrimSpace(key), ".")
		doc := value
		for i := len(parts) - 1; i >= 0; i-- {
			doc = fmt.Sprintf("{%q: %s}", parts[i], doc)
		}
		if err := decodeStrict([]byte(doc), cfg); err != nil {
			return fmt.Errorf("--set %s: %w", s, err)
		}
	}
	return nil
}

// Resolved returns c with the settings that follow from others filled in.
// It is the one place a decoded config is changed (Resolve calls it, and so
// does Open for a Config built in code); Validate only checks.
//
// train.method alone decides which GDRO controllers run (gdro's
// Prompt.Enabled and Rollout.Enabled, which are not YAML keys): grpo runs
// neither, prompt_gdro runs Prompt-GDRO, rollout_gdro runs Rollout-GDRO
// and, when gdro.prompt.apply is false, Prompt-GDRO beside it, its weights
// computed and logged but not applied (the reference's Rollout-GDRO runs),
// and prompt_rollout_gdro runs both (Prompt-GDRO's weights applied unless
// gdro.prompt.apply is false).
// An unknown method changes nothing; Validate names it.
//
// The surrogate_kl signal's β_KL is loss.kl_coef (one β_KL for the loss and
// the signal).
func (c Config) Resolved() Config {
	switch c.Train.Method {
	case MethodGRPO:
		c.GDRO.Prompt.Enabled, c.GDRO.Rollout.Enabled = false, false
	case MethodPromptGDRO:
		c.GDRO.Prompt.Enabled, c.GDRO.Rollout.Enabled = true, false
	case MethodRolloutGDRO:
		c.GDRO.Prompt.Enabled, c.GDRO.Rollout.Enabled = !c.GDRO.Prompt.Apply, true
	case MethodPromptRolloutGDRO:
		c.GDRO.Prompt.Enabled, c.GDRO.Rollout.Enabled = true, true
	}
	c.GDRO.Prompt.KLCoef = c.Loss.KLCoef
	return c
}

// Validate checks the whole configuration without changing it.
func (c Config) Validate() error {
	return errors.Join(c.validateValues(), c.requireInputs())
}

// requireInputs checks that the inputs every run needs are named (whether
// they exist is CheckInputs' job, at the start of a run).
func (c Config) requireInputs() error {
	var errs []error
	if c.Model.Path == "" {
		errs = append(errs, errors.New("model.path is required (a Hugging Face model folder)"))
	}
	if len(c.Data.Train) == 0 {
		errs = append(errs, errors.New("data.train must list at least one Parquet or JSONL file"))
	}
	return errors.Join(errs...)
}

// validateValues checks every value: finite numbers first (a NaN passes
// every comparison, so "lr > 0" alone lets .nan through to the first
// step), then each section's own ranges (its Validate method, naming the
// key), then the rules that tie sections together.
func (c Config) validateValues() error {
	if bad := nonFinite(reflect.ValueOf(c), ""); len(bad) > 0 {
		var errs []error
		for _, b := range bad {
			errs = append(errs, fmt.Errorf("%s: must be a finite number", b))
		}
		return errors.Join(errs...)
	}
	errs := []error{c.methodAgrees(), c.Model.Validate(), c.Run.Validate(), c.Precision.Validate(), c.Data.Validate(),
		c.Sampling.Validate(), c.kvBudgetAgrees(), c.Train.Validate(), c.rlOptionsAgree(), c.Optim.Validate(), c.Loss.Validate(), c.LoRA.Validate()}
	if err := c.GDRO.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("gdro: %w", err))
	}
	errs = append(errs, c.Reward.Validate(), c.Validation.Validate(), c.Checkpoint.Validate(), c.Dist.Validate())
	return errors.Join(errs...)
}

// problems collects a section's range errors, each naming its key.
type problems []error

func (p *problems) add(format string, a ...any) { *p = append(*p, fmt.Errorf(format, a...)) }
func (p problems) err() error                   { return errors.Join(p...) }

// methodAgrees: train.method is known, and the fields Resolved derives (the
// controllers' Enabled flags, the signal's β_KL) are what it derives: a
// Config built in code and changed after Resolved is caught here.
func (c Config) methodAgrees() error {
	switch r := c.Resolved().GDRO; c.Train.Method {
	case MethodGRPO, MethodPromptGDRO, MethodRolloutGDRO, MethodPromptRolloutGDRO:
		if r.Prompt.Enabled != c.GDRO.Prompt.Enabled || r.Rollout.Enabled != c.GDRO.Rollout.Enabled {
			return fmt.Errorf("gdro: Prompt.Enabled = %v and Rollout.Enabled = %v disagree with train.method %s (Config.Resolved derives them from it)",
				c.GDRO.Prompt.Enabled, c.GDRO.Rollout.Enabled, c.Train.Method)
		}
		if r.Prompt.KLCoef != c.GDRO.Prompt.KLCoef {
			return fmt.Errorf("gdro: Prompt.KLCoef = %v differs from loss.kl_coef = %v (Config.Resolved sets it)", c.GDRO.Prompt.KLCoef, c.Loss.KLCoef)
		}
		return nil
	default:
		return fmt.Errorf("train.method %q: want grpo, prompt_gdro, rollout_gdro or prompt_rollout_gdro", c.Train.Method)
	}
}

// rlOptionsAgree: the rollout correction needs log-probs of the policy
// itself from the sampler, the overlong ramp must fit under the limit, and
// dynamic sampling needs controllers that can observe rows they did not
// train on (docs/algorithm.md §5.10–5.12).
func (c Config) rlOptionsAgree() error {
	var p problems
	if rc := c.Loss.RolloutCorrection; rc.Corrects() && !c.samplerIsPolicy() {
		p.add("loss.rollout_correction.mode %s needs the sampler to draw from the policy itself (sampling.temperature 1, top_p 1, top_k 0; got %v, %v, %d): the trainer's log-probs are at temperature 1 without filters",
			rc.Mode, c.Sampling.Temperature, c.Sampling.TopP, c.Sampling.TopK)
	}
	if err := c.Loss.Overlong.CheckLimit(c.Sampling.MaxNewTokens); err != nil {
		p = append(p, err)
	}
	if err := c.asyncAgrees(); err != nil {
		p = append(p, err)
	}
	if err := c.exactAgrees(); err != nil {
		p = append(p, err)
	}
	if c.Train.DynamicSampling.Enabled {
		r := c.Resolved().GDRO
		if r.Prompt.Enabled && r.Prompt.Signal == gdro.SignalSurrogateKL {
			p.add("train.dynamic_sampling with gdro.prompt.signal surrogate_kl: the KL of the rows a step drops is never computed; use signal surrogate")
		}
		if r.Rollout.Enabled && r.Rollout.Mode == gdro.ModeReferenceCompat {
			p.add("train.dynamic_sampling with gdro.rollout.mode reference_compat: its positional labels assume one batch of prompts per step; use gdro.rollout.mode paper")
		}
	}
	return p.err()
}

// errNotInvariant refuses precision.exact_logprobs on a backend without
// batch-invariant kernels (model.BatchInvariant).
var errNotInvariant = errors.New("precision.exact_logprobs needs a backend with batch-invariant kernels (the CPU and CUDA backends)")

// exactAgrees: exact log-probs need a sampler with the trainer's weights
// (generation ranks, if any, not a step behind).
func (c Config) exactAgrees() error {
	if !c.Precision.ExactLogProbs {
		return nil
	}
	var p problems
	if c.Dist.RolloutRanks > 0 && c.Train.MaxOffPolicySteps > 0 {
		p.add("precision.exact_logprobs with dist.rollout_ranks = %d and train.max_off_policy_steps = %d: the generation ranks sample with the weights of an earlier step, so their log-probs are the behaviour policy's, not π_old; set train.max_off_policy_steps to 0 (the generation ranks then sample with the trainer's weights)", c.Dist.RolloutRanks, c.Train.MaxOffPolicySteps)
	}
	return p.err()
}

// kvBudgetAgrees: a paged KV cache is a bf16 or fp8 one.
func (c Config) kvBudgetAgrees() error {
	if k := c.Sampling.KVCacheGiB; k > 0 && c.Precision.KVCacheDType == "fp32" {
		return fmt.Errorf("sampling.kv_cache_gib = %v pages a bf16 or fp8 KV cache, but precision.kv_cache is fp32: set it to bf16 or fp8 (or auto with bf16 products), or sampling.kv_cache_gib to 0", k)
	}
	return nil
}

// Validate checks model.prompt.
func (m ModelConfig) Validate() error {
	if m.Prompt != "chat" && m.Prompt != "raw" {
		return fmt.Errorf("model.prompt %q: want chat or raw", m.Prompt)
	}
	return nil
}

// Validate checks the run section: device and the run name.
func (r RunConfig) Validate() error {
	var p problems
	if _, _, err := device.Parse(r.Device); err != nil {
		p.add("run.%v", err)
	}
	if r.Name == "" || r.Name == "." || r.Name == ".." || strings.ContainsAny(r.Name, `/\`) {
		p.add("run.name %q must be a plain folder name", r.Name)
	}
	return p.err()
}

// Validate checks the precision section.
func (r PrecisionConfig) Validate() error {
	var p problems
	if _, err := device.ParsePrecision(r.MatMul); err != nil {
		p.add("precision.matmul: %v", err)
	}
	if r.ReferenceDType != "auto" && r.ReferenceDType != "bf16" && r.ReferenceDType != "fp32" {
		p.add("precision.reference %q: want auto, bf16 or fp32", r.ReferenceDType)
	}
	if r.KVCacheDType != "auto" && r.KVCacheDType != "bf16" && r.KVCacheDType != "fp8" && r.KVCacheDType != "fp32" {
		p.add("precision.kv_cache %q: want auto, bf16, fp8 or fp32", r.KVCacheDType)
	}
	if r.ExactLogProbsCheck && !r.ExactLogProbs {
		p.add("precision.exact_logprobs_check checks precision.exact_logprobs, which is off")
	}
	return p.err()
}

// Validate checks data.max_prompt_length.
func (d DataConfig) Validate() error {
	if d.MaxPromptLength < 1 {
		return fmt.Errorf("data.max_prompt_length = %d must be ≥ 1", d.MaxPromptLength)
	}
	return nil
}

// checkSampling adds the sampling ranges of a section (sampling or
// validation) to p.
func checkSampling(p *problems, section string, temperature, topP float64, topK, maxNewTokens int) {
	if temperature < 0 {
		p.add("%s.temperature = %v must be ≥ 0 (0: greedy)", section, temperature)
	}
	if !(topP > 0 && topP <= 1) {
		p.add("%s.top_p = %v must be in (0, 1]", section, topP)
	}
	if topK < 0 {
		p.add("%s.top_k = %d must be ≥ 0 (0: off)", section, topK)
	}
	if maxNewTokens < 1 {
		p.add("%s.max_new_tokens = %d must be ≥ 1", section, maxNewTokens)
	}
}

// Validate checks the training sampler's section.
func (s SamplingConfig) Validate() error {
	var p problems
	checkSampling(&p, "sampling", s.Temperature, s.TopP, s.TopK, s.MaxNewTokens)
	if s.MaxSlots < 1 {
		p.add("sampling.max_slots = %d must be ≥ 1", s.MaxSlots)
	}
	if k := s.KVCacheGiB; !(k >= 0) || math.IsInf(k, 0) {
		p.add("sampling.kv_cache_gib = %v must be ≥ 0 (0: every slot at full length)", k)
	}
	return p.err()
}

// Validate checks the loop's sizes.
func (t TrainConfig) Validate() error {
	var p problems
	for _, k := range []struct {
		name string
		v    int
	}{{"steps", t.Steps}, {"prompts_per_step", t.PromptsPerStep}, {"mini_batch_prompts", t.MiniBatchPrompts},
		{"micro_batch_rows", t.MicroBatchRows}, {"ppo_epochs", t.PPOEpochs}} {
		if k.v < 1 {
			p.add("train.%s = %d must be ≥ 1", k.name, k.v)
		}
	}
	if t.MiniBatchPrompts > t.PromptsPerStep {
		p.add("train.mini_batch_prompts (%d) exceeds train.prompts_per_step (%d)", t.MiniBatchPrompts, t.PromptsPerStep)
	}
	if t.LogEvery < 0 {
		p.add("train.log_every = %d must be ≥ 0", t.LogEvery)
	}
	if err := t.DynamicSampling.Validate(); err != nil {
		p = append(p, err)
	}
	return p.err()
}

// Validate checks AdamW, the warm-up and the clip.
func (o OptimConfig) Validate() error {
	var p problems
	if o.LR <= 0 {
		p.add("optim.lr = %v must be > 0", o.LR)
	}
	if o.Beta1 < 0 || o.Beta1 >= 1 {
		p.add("optim.beta1 = %v must be in [0, 1)", o.Beta1)
	}
	if o.Beta2 < 0 || o.Beta2 >= 1 {
		p.add("optim.beta2 = %v must be in [0, 1)", o.Beta2)
	}
	if o.Eps <= 0 {
		p.add("optim.eps = %v must be > 0", o.Eps)
	}
	if o.WeightDecay < 0 {
		p.add("optim.weight_decay = %v must be ≥ 0", o.WeightDecay)
	}
	if o.GradClip < 0 {
		p.add("optim.grad_clip = %v must be ≥ 0 (0: off)", o.GradClip)
	}
	if o.WarmupSteps < 0 {
		p.add("optim.warmup_steps = %d must be ≥ 0", o.WarmupSteps)
	}
	return p.err()
}

// Validate checks reward.mode.
func (r RewardConfig) Validate() error {
	if r.Mode != "auto" {
		if _, err := reward.New(reward.Mode(r.Mode)); err != nil {
			return fmt.Errorf("reward.mode %q: want auto, dapo, boxed, gpqa or symbolic", r.Mode)
		}
	}
	return nil
}

// Validate checks the held-out evaluation's settings.
func (v ValidationConfig) Validate() error {
	var p problems
	if v.Every < 0 {
		p.add("validation.every = %d must be ≥ 0 (0: only at the end)", v.Every)
	}
	if v.N < 1 {
		p.add("validation.n = %d must be ≥ 1", v.N)
	}
	if v.MaxPrompts < 0 {
		p.add("validation.max_prompts = %d must be ≥ 0 (0: all)", v.MaxPrompts)
	}
	checkSampling(&p, "validation", v.Temperature, v.TopP, v.TopK, v.MaxNewTokens)
	return p.err()
}

// Validate checks the checkpoint cadence and retention.
func (ck CheckpointConfig) Validate() error {
	if ck.Every < 0 || ck.Keep < 0 || ck.PermanentEvery < 0 {
		return fmt.Errorf("checkpoint.every, checkpoint.keep and checkpoint.permanent_every must be ≥ 0 (got %d, %d, %d)", ck.Every, ck.Keep, ck.PermanentEvery)
	}
	return nil
}

// Validate checks the data-parallel settings.
func (d DistConfig) Validate() error {
	var p problems
	if d.ZeROStage < 0 || d.ZeROStage > 2 {
		p.add("dist.zero_stage = %d: 0 (replicated optimizer state), 1 (AdamW moments sharded over the ranks) or 2 (gradients too); stage 3 is not built", d.ZeROStage)
	}
	if d.StateCheckEvery < 0 || d.TimeoutS <= 0 {
		p.add("dist.state_check_every must be ≥ 0 and dist.timeout_s > 0 (got %d, %v)", d.StateCheckEvery, d.TimeoutS)
	}
	if d.RolloutRanks < 0 {
		p.add("dist.rollout_ranks = %d must be ≥ 0", d.RolloutRanks)
	}
	if err := dist.CheckBind(d.Bind); err != nil {
		p.add("dist.bind = %q: %v", d.Bind, err)
	}
	return p.err()
}

// nonFinite returns the dotted YAML key (e.g. "optim.lr",
// "gdro.classifier.edges[2]") of every float in v that is NaN or ±Inf.
func nonFinite(v reflect.Value, path string) []string {
	var out []string
	join := func(name string) string {
		if path == "" {
			return name
		}
		return path + "." + name
	}
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			out = append(out, fmt.Sprintf("%s = %v", path, f))
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			out = append(out, nonFinite(v.Elem(), path)...)
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			out = append(out, nonFinite(v.Index(i), fmt.Sprintf("%s[%d]", path, i))...)
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			out = append(out, nonFinite(iter.Value(), fmt.Sprintf("%s[%v]", path, iter.Key()))...)
		}
		sort.Strings(out)
	case reflect.Struct:
		typ := v.Type()
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			if !f.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			switch {
			case name == "-":
				continue
			case strings.Contains(opts, "inline"):
				out = append(out, nonFinite(v.Field(i), path)...)
				continue
			case name == "":
				name = strings.ToLower(f.Name)
			}
			out = append(out, nonFinite(v.Field(i), join(name))...)
		}
	}
	return out
}

// YAML renders the resolved configuration.
func (c Config) YAML() ([]byte, error) { return yaml.Marshal(c) }
