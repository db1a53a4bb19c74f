package memplan

// commands.go: the plan `train` has (Estimate, For), for the other
// commands that load or make a model (generate, logits, init-tiny,
// export): what they will hold, from config.json and the flags alone, set
// against the memory of the device before anything large is allocated, so
// that `generate -n 1000000000` or `init-tiny --hidden 1000000` stops at
// once naming the flag instead of dying with "fatal error: out of memory".
// Sizes are float64 bytes: a hidden size of 10⁹ must not overflow int64.

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/gdrotrain/gdrotrain/model"
)

// Part is one thing a command holds: what, its bytes and the flags that
// size it ("" when none does).
type Part struct {
	What  string
	Bytes float64
	Flags string
}

// Command is a command's plan: its name (the errors start with it) and
// what it holds.
type Command struct {
	Name  string
	Parts []Part
}

// Total is the plan's bytes.
func (p Command) Total() float64 {
	t := 0.0
	for _, x := range p.Parts {
		t += x.Bytes
	}
	return t
}

// Check refuses the plan when it needs more than avail bytes (0: unknown,
// nothing refused), naming every part, the largest first, and its flags.
func (p Command) Check(avail int64, device string) error {
	need := p.Total()
	if avail <= 0 || need <= float64(avail) {
		return nil
	}
	var parts, flags []string
	for _, x := range p.Parts {
		parts = append(parts, fmt.Sprintf("%s %s", x.What, formatBytes(x.Bytes)))
	}
	// The flags of the parts that matter (an eighth of the need or more),
	// the largest first.
	big := slices.Clone(p.Parts)
	slices.SortStableFunc(big, func(a, b Part) int { return cmp.Compare(b.Bytes, a.Bytes) })
	for _, x := range big {
		if x.Flags != "" && x.Bytes >= need/8 && !slices.Contains(flags, x.Flags) {
			flags = append(flags, x.Flags)
		}
	}
	hint := "use a smaller model"
	if len(flags) > 0 {
		hint = "lower " + strings.Join(flags, ", or ")
	}
	return fmt.Errorf("%s: out of memory before starting: needs about %s (%s) but %s has %s available (%d bytes needed, %d available); %s",
		p.Name, formatBytes(need), strings.Join(parts, ", "), device, formatBytes(float64(avail)), int64(math.Min(need, math.MaxInt64)), avail, hint)
}

// formatBytes writes a size in GiB, or in TiB/PiB when it is huge.
func formatBytes(b float64) string {
	switch {
	case b >= 1<<50:
		return fmt.Sprintf("%.3g PiB", b/(1<<50))
	case b >= 1<<40:
		return fmt.Sprintf("%.3g TiB", b/(1<<40))
	}
	return fmt.Sprintf("%.2f GiB", b/(1<<30))
}

// ParamBytes is the model's float32 parameters (the backends hold fp32).
func ParamBytes(c *model.Config) float64 {
	C, F, V, L := float64(c.HiddenSize), float64(c.IntermediateSize), float64(c.VocabSize), float64(c.NumHiddenLayers)
	Q, KV, D := float64(c.NumAttentionHeads*c.HeadDim), float64(c.NumKeyValueHeads*c.HeadDim), float64(c.HeadDim)
	layer := C*Q + 2*C*KV + Q*C + 3*C*F + 2*C + 2*D
	n := L*layer + V*C + C
	if !c.TieWordEmbeddings {
		n += V * C
	}
	return 4 * n
}

// kvBytes is a float32 KV cache of slots sequences of length tokens.
func kvBytes(c *model.Config, slots, tokens float64) float64 {
	return slots * tokens * float64(c.NumHiddenLayers) * 2 * float64(c.NumKeyValueHeads*c.HeadDim) * 4
}

// DeviceMemory is the free memory of the device b computes on: its own for
// a GPU, the host's otherwise, and the name to say.
func DeviceMemory(b model.Backend) (int64, string) {
	if mr := model.MemoryCapsOf(b).Reporter; mr != nil {
		if free, _, err := mr.MemInfo(); err == nil {
			return free, fmt.Sprintf("%s (%s)", b.Name(), mr.DeviceName())
		}
	}
	return Available(), "this machine"
}

// Export is what export holds: the fp32 model and one shard encoded in
// dtype (the whole model when unsharded).
func Export(c *model.Config, dt model.DType, shardBytes float64) Command {
	w := ParamBytes(c)
	out := w / 4 * float64(dt.Size())
	if shardBytes > 0 {
		out = math.Min(out, shardBytes)
	}
	return Command{Name: "export", Parts: []Part{
		{"weights (fp32)", w, ""}, {"a shard being written", out, "--shard-gb"}}}
}

// InitTiny is what init-tiny holds: the fp32 weights and the file's
// encoded tensors.
func InitTiny(cfg *model.Config, dt model.DType) Command {
	w := ParamBytes(cfg)
	const sizes = "--hidden, --intermediate, --layers or --vocab"
	return Command{Name: "init-tiny", Parts: []Part{
		{"weights (fp32)", w, sizes}, {"model.safetensors (" + dt.TorchName() + ")", w / 4 * float64(dt.Size()), sizes}}}
}

// Generate is what generate holds: the weights (and their bf16 copies
// under bf16 products), the KV cache of n slots of the prompt and maxNew
// tokens (or the kvGiB pool), a decode step's logits and the completions'
// tokens.
func Generate(mc *model.Config, bf16Products bool, n, prompt, maxNew int, kvGiB float64) Command {
	w := ParamBytes(mc)
	parts := []Part{{"weights", w, ""}}
	if bf16Products {
		parts = append(parts, Part{"bf16 weight copies", w / 2, ""})
	}
	kv := kvBytes(mc, float64(n), float64(prompt)+float64(maxNew))
	if kvGiB > 0 {
		kv = math.Min(kv, kvGiB*(1<<30))
	}
	return Command{Name: "generate", Parts: append(parts,
		Part{fmt.Sprintf("KV cache (%d slots × %d tokens)", n, int64(prompt)+int64(maxNew)), kv, "-n or --max-new-tokens (or bound it with --kv-cache-gib)"},
		Part{"logits", float64(n) * float64(mc.VocabSize) * 4, "-n"},
		Part{"completions", float64(n) * (float64(maxNew)*8 + 256), "-n or --max-new-tokens"})}
}

// Logits is what logits holds for T tokens: the weights, their KV cache,
// one layer's activations and every position's logits (on the device and
// downloaded).
func Logits(mc *model.Config, T int) Command {
	t := float64(T)
	C, F := float64(mc.HiddenSize), float64(mc.IntermediateSize)
	Q, KV := float64(mc.NumAttentionHeads*mc.HeadDim), float64(mc.NumKeyValueHeads*mc.HeadDim)
	return Command{Name: "logits", Parts: []Part{
		{"weights", ParamBytes(mc), ""},
		{"KV cache", kvBytes(mc, 1, t), "--ids"},
		{"activations", t * (4*C + 3*F + Q + 2*KV) * 4, "--ids"},
		{"logits", 2 * t * float64(mc.VocabSize) * 4, "--ids"}}}
}
