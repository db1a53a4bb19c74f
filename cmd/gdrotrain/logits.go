package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/memplan"
	"github.com/gdrotrain/gdrotrain/model"
)

// logitsOutput is the JSON that `gdrotrain logits` writes.
type logitsOutput struct {
	Model     string      `json:"model"`
	IDs       []int32     `json:"ids"`
	VocabSize int         `json:"vocab_size"`
	Logits    []float32   `json:"logits"`              // final position
	Positions [][]float32 `json:"positions,omitempty"` // every position, with --all
}

func newLogitsCmd() *cobra.Command {
	var dir, ids, out string
	var all bool
	var dev deviceFlags
	cmd := &cobra.Command{
		Use:   "logits --model DIR --ids 1,2,3",
		Short: "Print the logits of a token sequence as JSON (for comparison with other implementations)",
		Long: `logits runs a Hugging Face Qwen3 folder on the given token ids (CPU, float32)
and prints the final-position logits, or those of every position with --all,
as JSON to stdout or --out.`,
		Example:      "  gdrotrain logits --model /tmp/tiny --ids 1,2,3 --all --out logits.json",
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if dir == "" {
				return fmt.Errorf("--model is required")
			}
			tokens, err := parseIDs(ids)
			if err != nil {
				return fmt.Errorf("--ids: %w", err)
			}
			if err := model.VerifyModelFolder(dir); err != nil {
				return err
			}
			mc, err := model.FolderConfig(dir)
			if err != nil {
				return err
			}
			if err := mc.CheckContext("--ids", len(tokens), 0, ""); err != nil {
				return err
			}
			plan := memplan.Logits(mc, len(tokens))
			m, err := loadModel(cmd, dir, dev, &plan)
			if err != nil {
				return err
			}
			rows, err := m.Logits(tokens)
			if err != nil {
				return err
			}
			res := logitsOutput{Model: dir, IDs: tokens, VocabSize: m.Cfg.VocabSize, Logits: rows[len(rows)-1]}
			if all {
				res.Positions = rows
			}
			raw, err := json.Marshal(res)
			if err != nil {
				return err
			}
			if out == "" {
				_, err = fmt.Fprintln(cmd.OutOrStdout(), string(raw))
				return err
			}
			return model.WriteFileAtomic(out, append(raw, '\n'))
		},
	}
	addDeviceFlags(cmd, &dev, "fp32")
	f := cmd.Flags()
	f.StringVar(&dir, "model", "", "Hugging Face model folder")
	f.StringVar(&ids, "ids", "", "comma-separated token ids")
	f.StringVar(&out, "out", "", "write JSON here instead of stdout")
	f.BoolVar(&all, "all", false, "include the logits of every position")
	return cmd
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
