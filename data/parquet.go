package data

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/parquet-go/parquet-go"
)

// readParquet reads a Parquet file of verl rows (or simple rows) row by row
// into generic records, so any column layout pyarrow writes is accepted:
// lists of structs for chat messages, nested structs for reward_model and
// extra_info, int32/int64/double indices.
func readParquet(path string, opts *ReadOptions) (ds *Dataset, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	// parquet-go panics on some malformed files; a bad file must be an error.
	defer func() {
		if r := recover(); r != nil {
			ds, err = nil, fmt.Errorf("data: %s: malformed Parquet file: %v", path, r)
		}
	}()
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("data: %s: %w", path, err)
	}
	base := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	ds = &Dataset{Files: []string{path}, Schema: pf.Schema().String(), Format: "parquet-verl"}
	r := parquet.NewReader(pf)
	defer r.Close()
	n := int(pf.NumRows())
	simple := 0
	for row := 0; row < n; row++ {
		var v any
		if err := r.Read(&v); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, &RowError{File: path, Row: row, Err: err}
		}
		v, bad := sanitizeUTF8(normalizeParquet(v))
		if bad {
			ds.utf8.add(row)
		}
		p, rowErr := parquetRow(v, opts, base)
		if rowErr != nil {
			re := &RowError{File: path, Row: row, Err: rowErr}
			if !opts.SkipBadRows {
				return nil, re
			}
			ds.Skipped++
			if ds.Skipped <= 3 {
				opts.logf("data: skipping bad row: %v", re)
			}
			continue
		}
		if obj, _ := v.(map[string]any); obj != nil {
			if _, rm := obj["reward_model"]; !rm && !isList(obj["prompt"]) {
				simple++
			}
		}
		p.File, p.Row = path, row
		ds.Prompts = append(ds.Prompts, p)
	}
	if simple == len(ds.Prompts) && simple > 0 {
		ds.Format = "parquet-simple"
	}
	return ds, nil
}

func parquetRow(v any, opts *ReadOptions, base string) (Prompt, error) {
	obj, ok := normalizeParquet(v).(map[string]any)
	if !ok {
		return Prompt{}, fmt.Errorf("row is %T, want a record", v)
	}
	return rowToPrompt(obj, opts, base)
}

// normalizeParquet turns reconstructed values into the shapes rowToPrompt
// reads (the same as encoding/json's): []byte → string, typed slices →
// []any, nested maps normalized.
func normalizeParquet(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeParquet(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = normalizeParquet(e)
		}
		return x
	case []byte:
		return string(x)
	case []string:
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = s
		}
		return out
	case []map[string]any:
		out := make([]any, len(x))
		for i, m := range x {
			out[i] = normalizeParquet(m)
		}
		return out
	case int32:
		return int64(x)
	}
	return v
}

// verl row layout for WriteVerlParquet (the columns the reference
// preprocessor writes, docs/algorithm.md §2.1).
type parquetMessage struct {
	Content string `parquet:"content"`
	Role    string `parquet:"role"`
}

type parquetRewardModel struct {
	GroundTruth string `parquet:"ground_truth"`
	Style       string `parquet:"style"`
}

type parquetExtraInfo struct {
	Index int64  `parquet:"index"`
	Split string `parquet:"split"`
}

type parquetVerlRow struct {
	DataSource  string             `parquet:"data_source"`
	Prompt      []parquetMessage   `parquet:"prompt,list"`
	Ability     string             `parquet:"ability"`
	RewardModel parquetRewardModel `parquet:"reward_model"`
	ExtraInfo   parquetExtraInfo   `parquet:"extra_info"`
}

// WriteVerlParquet writes prompts as a verl Parquet file (data_source,
// prompt as a list of {content, role}, ability, reward_model.{ground_truth,
// style}, extra_info.{index, split}). A prompt without an index gets its
// position.
func WriteVerlParquet(w io.Writer, prompts []Prompt) error {
	rows := make([]parquetVerlRow, len(prompts))
	for i, p := range prompts {
		idx := p.Index
		if idx < 0 {
			idx = int64(i)
		}
		msgs := make([]parquetMessage, len(p.Messages))
		for k, m := range p.Messages {
			msgs[k] = parquetMessage{Content: m.Content, Role: m.Role}
		}
		rows[i] = parquetVerlRow{
			DataSource:  p.DataSource,
			Prompt:      msgs,
			Ability:     p.Ability,
			RewardModel: parquetRewardModel{GroundTruth: p.GroundTruth, Style: "rule"},
			ExtraInfo:   parquetExtraInfo{Index: idx, Split: p.Split},
		}
	}
	if err := parquet.Write(w, rows); err != nil {
		return fmt.Errorf("data: write parquet: %w", err)
	}
	return nil
}
