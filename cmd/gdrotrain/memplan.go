package main

// memplan.go: the memory plan `train` has (trainer/memory.go), for the
// other commands that load or make a model (generate, logits, init-tiny,
// export): what they will hold, from config.json and the flags alone, set
// against the memory of the device before anything large is allocated, so
// that `generate -n 1000000000` or `init-tiny --hidden 1000000` stops at
// once naming the flag instead of dying with "fatal error: out of memory".
// Sizes are float64 bytes: a hidden size of 10⁹ must not overflow int64.

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gdrotrain/gdrotrain/checkpoint"
	"github.com/gdrotrain/gdrotrain/memplan"
	"github.com/gdrotrain/gdrotrain/model"
)

// memPart is one thing a command holds: what, its bytes and the flags that
// size it ("" when none does).
type memPart struct {
	what  string
	bytes float64
	flags string
}

// memPlan is a command's plan.
type memPlan struct {
	command string
	parts   []memPart
}

func (p memPlan) total() float64 {
	t := 0.0
	for _, x := range p.parts {
		t += x.bytes
	}
	return t
}

// check refuses the plan when it needs more than avail bytes (0: unknown,
// nothing refused), naming every part, the largest first, and its flags.
func (p memPlan) check(avail int64, device string) error {
	need := p.total()
	if avail <= 0 || need <= float64(avail) {
		return nil
	}
	var parts, flags []string
	for _, x := range p.parts {
		parts = append(parts, fmt.Sprintf("%s %s", x.what, fmtBytes(x.bytes)))
	}
	// The flags of the parts that matter (an eighth of the need or more),
	// the largest first.
	big := slices.Clone(p.parts)
	slices.SortStableFunc(big, func(a, b memPart) int { return cmp.Compare(b.bytes, a.bytes) })
	for _, x := range big {
		if x.flags != "" && x.bytes >= need/8 && !slices.Contains(flags, x.flags) {
			flags = append(flags, x.flags)
		}
	}
	hint := "use a smaller model"
	if len(flags) > 0 {
		hint = "lower " + strings.Join(flags, ", or ")
	}
	return fmt.Errorf("%s: out of memory before starting: needs about %s (%s) but %s has %s available (%d bytes needed, %d available); %s",
		p.command, fmtBytes(need), strings.Join(parts, ", "), device, fmtBytes(float64(avail)), int64(math.Min(need, math.MaxInt64)), avail, hint)
}

// fmtBytes writes a size in GiB, or in TiB/PiB when it is huge.
func fmtBytes(b float64) string {
	switch {
	case b >= 1<<50:
		return fmt.Sprintf("%.3g PiB", b/(1<<50))
	case b >= 1<<40:
		return fmt.Sprintf("%.3g TiB", b/(1<<40))
	}
	return fmt.Sprintf("%.2f GiB", b/(1<<30))
}

// paramBytes is the model's float32 parameters (the backends hold fp32).
func paramBytes(c *model.Config) float64 {
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

// hostMemory is the host's available memory (MemAvailable; 0: unknown).
func hostMemory() int64 { return memplan.Available() }

// deviceMemory is the free memory of the device b computes on: its own for
// a GPU, the host's otherwise, and the name to say.
func deviceMemory(b model.Backend) (int64, string) {
	if mr := model.MemoryCapsOf(b).Reporter; mr != nil {
		if free, _, err := mr.MemInfo(); err == nil {
			return free, fmt.Sprintf("%s (%s)", b.Name(), mr.DeviceName())
		}
	}
	return hostMemory(), "this machine"
}

// checkContext refuses a sequence longer than the model's context: prompt
// tokens of the prompt, plus newTokens to generate (flag names the flag
// that sets them; "" for none).
func checkContext(c *model.Config, what string, prompt int, newTokens int, flag string) error {
	maxPos := c.MaxPositionEmbeddings
	switch {
	case prompt > maxPos:
		return fmt.Errorf("%s has %d tokens, more than the model's max_position_embeddings %d", what, prompt, maxPos)
	case newTokens > 0 && prompt == maxPos:
		return fmt.Errorf("%s has %d tokens, the model's whole max_position_embeddings: no room to generate (%s %d)", what, prompt, flag, newTokens)
	case newTokens > 0 && int64(prompt)+int64(newTokens) > int64(maxPos):
		return fmt.Errorf("%s has %d tokens and %s %d would take the sequence to %d, past the model's max_position_embeddings %d (HINT: %s %d at most)",
			what, prompt, flag, newTokens, int64(prompt)+int64(newTokens), maxPos, flag, maxPos-prompt)
	}
	return nil
}

// modelConfig reads the config.json of a model folder, or of an adapter
// folder's base (the base its manifest records, else adapter_config.json's).
func modelConfig(dir string) (*model.Config, error) {
	if !model.IsAdapterFolder(dir) {
		return model.LoadConfig(dir)
	}
	var m *checkpoint.Manifest
	if raw, err := os.ReadFile(filepath.Join(dir, checkpoint.ManifestName)); err == nil {
		m = &checkpoint.Manifest{} // verified when the model loads
		if json.Unmarshal(raw, m) != nil {
			m = nil
		}
	}
	base, err := model.AdapterBase(dir, m, "", "")
	if err != nil {
		return nil, err
	}
	return model.LoadConfig(base)
}

// exportPlan is what export holds: the fp32 model and one shard encoded in
// dtype (the whole model when unsharded).
func exportPlan(c *model.Config, dt model.DType, shardBytes float64) memPlan {
	w := paramBytes(c)
	out := w / 4 * float64(dt.Size())
	if shardBytes > 0 {
		out = math.Min(out, shardBytes)
	}
	return memPlan{command: "export", parts: []memPart{
		{"weights (fp32)", w, ""}, {"a shard being written", out, "--shard-gb"}}}
}
