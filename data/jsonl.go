package data

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"
)

func readJSONL(path string, opts *ReadOptions) (*Dataset, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	defer f.Close()
	base := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	ds := &Dataset{Files: []string{path}}
	schema := map[string]map[string]int{} // column → JSON type → rows
	formats := map[string]bool{}
	r := bufio.NewReaderSize(f, 1<<20)
	row := 0
	for line := 1; ; line++ {
		b, err := r.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("data: %s:%d: %w", path, line, err)
		}
		if len(bytes.TrimSpace(b)) > 0 {
			if !utf8.Valid(b) { // encoding/json reads each invalid byte as U+FFFD
				ds.utf8.add(row)
			}
			p, rowErr := decodeJSONLRow(b, opts, base, schema, formats)
			if rowErr != nil {
				re := &RowError{File: path, Row: row, Line: line, Err: rowErr}
				if !opts.SkipBadRows {
					return nil, re
				}
				ds.Skipped++
				if ds.Skipped <= 3 {
					opts.logf("data: skipping bad row: %v", re)
				}
			} else {
				p.File, p.Row = path, row
				ds.Prompts = append(ds.Prompts, p)
			}
			row++
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	ds.Schema = describeJSONSchema(schema, row)
	ds.Format = "jsonl-simple"
	if formats["verl"] {
		ds.Format = "jsonl-verl"
		if formats["simple"] {
			ds.Format = "mixed"
		}
	}
	return ds, nil
}

func decodeJSONLRow(b []byte, opts *ReadOptions, base string, schema map[string]map[string]int, formats map[string]bool) (Prompt, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return Prompt{}, fmt.Errorf("invalid JSON: %w", err)
	}
	if dec.More() {
		return Prompt{}, errors.New("invalid JSON: more than one value on the line")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return Prompt{}, fmt.Errorf("want a JSON object, got %s", jsonType(v))
	}
	for k, x := range obj {
		if schema[k] == nil {
			schema[k] = map[string]int{}
		}
		schema[k][jsonType(x)]++
	}
	p, err := rowToPrompt(obj, opts, base)
	if err == nil {
		_, hasRM := obj["reward_model"]
		formats[map[bool]string{true: "verl", false: "simple"}[hasRM || isList(obj["prompt"])]] = true
	}
	return p, err
}

func isList(v any) bool { _, ok := v.([]any); return ok }

func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "bool"
	case []any:
		if len(x) > 0 {
			return "list<" + jsonType(x[0]) + ">"
		}
		return "list"
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k+": "+jsonType(x[k]))
		}
		sort.Strings(keys)
		return "{" + strings.Join(keys, ", ") + "}"
	}
	return fmt.Sprintf("%T", v)
}

func describeJSONSchema(schema map[string]map[string]int, rows int) string {
	cols := make([]string, 0, len(schema))
	for k := range schema {
		cols = append(cols, k)
	}
	sort.Strings(cols)
	var b strings.Builder
	for _, c := range cols {
		types := make([]string, 0, len(schema[c]))
		n := 0
		for t, k := range schema[c] {
			types = append(types, t)
			n += k
		}
		sort.Strings(types)
		fmt.Fprintf(&b, "  %s: %s", c, strings.Join(types, " | "))
		if n < rows {
			fmt.Fprintf(&b, " (in %d of %d rows)", n, rows)
		}
		b.WriteByte('\n')
	}
	return b.String()
}
