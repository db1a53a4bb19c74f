package infer

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gdrotrain/gdrotrain/launch"
	"github.com/gdrotrain/gdrotrain/memplan"
	"github.com/gdrotrain/gdrotrain/model"
)

// LogitsOutput is the JSON that Logits writes.
type LogitsOutput struct {
	Model     string      `json:"model"`
	IDs       []int32     `json:"ids"`
	VocabSize int         `json:"vocab_size"`
	Logits    []float32   `json:"logits"`              // final position
	Positions [][]float32 `json:"positions,omitempty"` // every position, with --all
}

// LogitsOptions are logits' settings, the flags of `gdrotrain logits`.
type LogitsOptions struct {
	// Model is the model folder (--model), IDs the comma-separated token
	// ids (--ids), Out the JSON file to write (--out; "": Stdout).
	Model, IDs, Out string
	// All includes every position's logits (--all).
	All    bool
	Device launch.Device
	// Stdout gets the JSON without Out, Stderr the device's log.
	Stdout, Stderr io.Writer
}

// Logits runs the model on the ids and writes the final position's logits
// (every position's with All) as JSON.
func Logits(o LogitsOptions) error {
	if o.Model == "" {
		return fmt.Errorf("--model is required")
	}
	tokens, err := parseIDs(o.IDs)
	if err != nil {
		return fmt.Errorf("--ids: %w", err)
	}
	if err := model.VerifyModelFolder(o.Model); err != nil {
		return err
	}
	mc, err := model.FolderConfig(o.Model)
	if err != nil {
		return err
	}
	if err := mc.CheckContext("--ids", len(tokens), 0, ""); err != nil {
		return err
	}
	plan := memplan.Logits(mc, len(tokens))
	m, err := o.Device.LoadModel(o.Model, &plan, o.Stderr)
	if err != nil {
		return err
	}
	rows, err := m.Logits(tokens)
	if err != nil {
		return err
	}
	res := LogitsOutput{Model: o.Model, IDs: tokens, VocabSize: m.Cfg.VocabSize, Logits: rows[len(rows)-1]}
	if o.All {
		res.Positions = rows
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return err
	}
	if o.Out == "" {
		_, err = fmt.Fprintln(o.Stdout, string(raw))
		return err
	}
	return model.WriteFileAtomic(o.Out, append(raw, '\n'))
}

// parseIDs reads "1,2, 3" into token ids.
func parseIDs(s string) ([]int32, error) {
	var ids []int32
	for i, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		v, err := strconv.ParseInt(part, 10, 32)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("item %d %q is not a non-negative integer", i+1, part)
		}
		ids = append(ids, int32(v))
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("no token ids given")
	}
	return ids, nil
}
