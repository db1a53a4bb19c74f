package data

import (
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gdrotrain/gdrotrain/tokenizer"
)

// Prompt is one dataset row, ready for the trainer.
type Prompt struct {
	UID         string              `json:"uid"`
	Messages    []tokenizer.Message `json:"messages"` // the chat the model is prompted with
	GroundTruth string              `json:"ground_truth"`
	DataSource  string              `json:"data_source"` // selects the scorer (docs/algorithm.md §3.1)
	Split       string              `json:"split,omitempty"`
	Index       int64               `json:"index"` // extra_info.index, or -1
	Ability     string              `json:"ability,omitempty"`
	Choices     []string            `json:"choices,omitempty"` // multiple choice (GPQA)
	File        string              `json:"file"`              // where the row came from
	Row         int                 `json:"row"`               // 0-based data row in File
}

// Dataset is the prompts of one or more files.
type Dataset struct {
	Files   []string
	Format  string // "parquet-verl", "jsonl-verl", "jsonl-simple" or "mixed"
	Schema  string // the Parquet schema, or the JSONL columns and their JSON types
	Prompts []Prompt
	Skipped int // bad rows skipped (ReadOptions.SkipBadRows)
	// InvalidUTF8 counts rows that held invalid UTF-8; each invalid byte
	// was replaced by U+FFFD (ReadFile logs the count and the first row).
	InvalidUTF8 int
	utf8        utf8Tally
}

// ReadOptions configure ReadFile.
type ReadOptions struct {
	// Template turns simple {problem, answer} rows into a user message
	// (default TemplateAuto). verl rows are used as they are unless
	// Template is set to something other than auto or none, which is an error.
	Template Template
	// DataSource is used for rows without a data_source column (default: a
	// Hugging Face id from the row's source, see DataSourceFor, else the file
	// name without extension).
	DataSource string
	// Split is used for rows without extra_info.split (default "train").
	Split string
	// SkipBadRows skips malformed rows (counted and logged) instead of failing.
	SkipBadRows bool
	// Logf receives the skip summary; nil means log.Printf.
	Logf func(format string, args ...any)
}

func (o *ReadOptions) logf(format string, args ...any) {
	if o.Logf != nil {
		o.Logf(format, args...)
		return
	}
	log.Printf(format, args...)
}

// RowError is a malformed row.
type RowError struct {
	File string
	Row  int // 0-based data row
	Line int // 1-based line for JSONL, 0 for Parquet
	Err  error
}

func (e *RowError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d (row %d): %v", e.File, e.Line, e.Row, e.Err)
	}
	return fmt.Sprintf("%s: row %d: %v", e.File, e.Row, e.Err)
}

func (e *RowError) Unwrap() error { return e.Err }

// ErrUIDCollision is wrapped by the error for a dataset whose UIDs collide.
var ErrUIDCollision = errors.New("prompt UIDs collide")

// ReadFile reads a .parquet or .jsonl (.json lines) dataset.
func ReadFile(path string, opts ReadOptions) (*Dataset, error) {
	if opts.Template == "" {
		opts.Template = TemplateAuto
	}
	if _, err := ParseTemplate(string(opts.Template)); err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	var (
		ds  *Dataset
		err error
	)
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".parquet":
		ds, err = readParquet(path, &opts)
	case ".jsonl", ".json", ".ndjson":
		ds, err = readJSONL(path, &opts)
	default:
		return nil, fmt.Errorf("data: %s: unknown extension %q (want .parquet or .jsonl)", path, ext)
	}
	if err != nil {
		return nil, err
	}
	if ds.Skipped > 0 {
		opts.logf("data: %s: skipped %d bad rows of %d", path, ds.Skipped, ds.Skipped+len(ds.Prompts))
	}
	if ds.InvalidUTF8 = ds.utf8.rows; ds.InvalidUTF8 > 0 {
		opts.logf("data: %s: %d rows hold invalid UTF-8 (the first is row %d); each invalid byte is read as U+FFFD", path, ds.InvalidUTF8, ds.utf8.first)
	}
	if len(ds.Prompts) == 0 {
		return nil, fmt.Errorf("data: %s: no usable rows", path)
	}
	if err := checkUIDs(ds.Prompts); err != nil {
		return nil, fmt.Errorf("data: %s: %w", path, err)
	}
	return ds, nil
}

// ReadFiles reads several files into one dataset (validation sets are the
// benchmarks concatenated, docs/algorithm.md §2.5) and checks UIDs across all of them.
func ReadFiles(paths []string, opts ReadOptions) (*Dataset, error) {
	out := &Dataset{}
	var schemas []string
	for _, p := range paths {
		ds, err := ReadFile(p, opts)
		if err != nil {
			return nil, err
		}
		out.Files = append(out.Files, ds.Files...)
		out.Prompts = append(out.Prompts, ds.Prompts...)
		out.Skipped += ds.Skipped
		out.InvalidUTF8 += ds.InvalidUTF8
		schemas = append(schemas, p+":\n"+ds.Schema)
		switch {
		case out.Format == "":
			out.Format = ds.Format
		case out.Format != ds.Format:
			out.Format = "mixed"
		}
	}
	out.Schema = strings.Join(schemas, "\n")
	if len(paths) == 1 {
		out.Schema = strings.TrimPrefix(out.Schema, paths[0]+":\n")
	}
	if len(out.Prompts) == 0 {
		return nil, errors.New("data: no files given")
	}
	if err := checkUIDs(out.Prompts); err != nil {
		return nil, fmt.Errorf("data: %s: %w", strings.Join(paths, ", "), err)
	}
	return out, nil
}

// dataSources maps the `source` names of the shared JSONL files to the
// Hugging Face ids the reward dispatch keys on (docs/algorithm.md §2.5, §3.1).
var dataSources = map[string]string{
	"math500":        "HuggingFaceH4/MATH-500",
	"aime24":         "HuggingFaceH4/aime_2024",
	"aime25":         "MathArena/aime_2025",
	"amc23":          "math-ai/amc23",
	"minerva_math":   "math-ai/minervamath",
	"olympiadbench":  "math-ai/olympiadbench",
	"gpqa_diamond":   GPQASource,
	"dapo_math_17k":  "open-r1/DAPO-Math-17k-Processed",
	"dapo_math":      "open-r1/DAPO-Math-17k-Processed",
	"dapo-math-17k":  "open-r1/DAPO-Math-17k-Processed",
	"math-dapo":      "open-r1/DAPO-Math-17k-Processed",
	"dapo_math_test": "open-r1/DAPO-Math-17k-Processed",
}

// DataSourceFor returns the Hugging Face id for a short source name, or the
// name itself.
func DataSourceFor(source string) string {
	if id, ok := dataSources[source]; ok {
		return id
	}
	return source
}

var (
	questionKeys = []string{"question", "problem", "input", "prompt", "instruction", "query", "stem"}
	answerKeys   = []string{"final_answer", "answer", "solution", "output", "response", "label"}
)

// rowToPrompt converts one decoded row (JSON object or Parquet record) to a
// Prompt. fileBase is the file name without extension.
func rowToPrompt(row map[string]any, opts *ReadOptions, fileBase string) (Prompt, error) {
	p := Prompt{Index: -1}
	_, hasRM := row["reward_model"]
	_, promptIsList := row["prompt"].([]any)
	if hasRM || promptIsList {
		return verlRow(row, opts, fileBase, p)
	}
	return simpleRow(row, opts, fileBase, p)
}

func verlRow(row map[string]any, opts *ReadOptions, fileBase string, p Prompt) (Prompt, error) {
	switch pr := row["prompt"].(type) {
	case []any:
		if len(pr) == 0 {
			return p, errors.New("prompt is an empty message list")
		}
		for i, m := range pr {
			mm, ok := m.(map[string]any)
			if !ok {
				return p, fmt.Errorf("prompt[%d] is %T, want {role, content}", i, m)
			}
			role, ok1 := mm["role"].(string)
			content, ok2 := mm["content"].(string)
			if !ok1 || !ok2 || role == "" {
				return p, fmt.Errorf("prompt[%d] needs string role and content", i)
			}
			p.Messages = append(p.Messages, tokenizer.Message{Role: role, Content: content})
		}
	case string:
		if strings.TrimSpace(pr) == "" {
			return p, errors.New("prompt is empty")
		}
		p.Messages = []tokenizer.Message{{Role: "user", Content: pr}}
	case nil:
		return p, errors.New("missing prompt")
	default:
		return p, fmt.Errorf("prompt is %T, want a message list or a string", pr)
	}
	switch opts.Template {
	case TemplateAuto, TemplateNone:
	default:
		return p, fmt.Errorf("template %q applies to {problem, answer} rows; verl rows carry their final prompt", opts.Template)
	}
	p.DataSource, _ = row["data_source"].(string)
	if p.DataSource == "" {
		p.DataSource = firstNonEmpty(opts.DataSource, fileBase)
	}
	if c, ok := row["choices"].([]any); ok {
		p.Choices, _ = stringList(c)
	}
	rm, _ := row["reward_model"].(map[string]any)
	gt, err := GroundTruth(rm["ground_truth"], MultipleChoice(p.DataSource, p.Choices))
	if errors.Is(err, ErrNoGroundTruth) {
		return p, errors.New("missing reward_model.ground_truth")
	}
	if err != nil {
		return p, fmt.Errorf("reward_model.ground_truth: %w", err)
	}
	p.GroundTruth = gt
	p.Ability, _ = row["ability"].(string)
	p.Split = opts.Split
	if ei, ok := row["extra_info"].(map[string]any); ok {
		if s, ok := ei["split"].(string); ok && s != "" {
			p.Split = s
		}
		if v, present := ei["index"]; present && v != nil {
			idx, err := toInt(v)
			if err != nil {
				return p, fmt.Errorf("extra_info.index: %w", err)
			}
			p.Index = idx
		}
	}
	if p.Split == "" {
		p.Split = "train"
	}
	p.UID = uidOf(row, &p, "")
	return p, nil
}

func simpleRow(row map[string]any, opts *ReadOptions, fileBase string, p Prompt) (Prompt, error) {
	var question string
	for _, k := range questionKeys {
		if s, ok := row[k].(string); ok {
			question = s
			break
		}
	}
	if strings.TrimSpace(question) == "" {
		return p, fmt.Errorf("no question: want one of %s (a non-empty string), or a verl row with prompt and reward_model",
			strings.Join(questionKeys, "/"))
	}
	answerKey := ""
	for _, k := range answerKeys {
		if row[k] != nil {
			answerKey = k
			break
		}
	}
	if answerKey == "" {
		return p, fmt.Errorf("no answer: want one of %s", strings.Join(answerKeys, "/"))
	}
	source, _ := row["source"].(string)
	p.DataSource, _ = row["data_source"].(string)
	if p.DataSource == "" {
		p.DataSource = firstNonEmpty(opts.DataSource, DataSourceFor(source), fileBase)
	}
	p.Split = firstNonEmpty(opts.Split, "test")
	for _, k := range []string{"choices", "options", "endings"} {
		if c, ok := row[k].([]any); ok {
			list, err := stringList(c)
			if err != nil {
				return p, fmt.Errorf("%s: %w", k, err)
			}
			p.Choices = list
			break
		}
	}
	gt, err := GroundTruth(row[answerKey], MultipleChoice(p.DataSource, p.Choices))
	if err != nil {
		return p, fmt.Errorf("%s: %w", answerKey, err)
	}
	p.GroundTruth = gt
	tmpl := opts.Template
	if tmpl == TemplateAuto {
		switch {
		case len(p.Choices) > 0:
			tmpl = TemplateGPQA
		case strings.Contains(strings.ToLower(source+" "+p.DataSource), "dapo"):
			tmpl = TemplateDAPO
		default:
			tmpl = TemplateMath
		}
	}
	var content string
	switch tmpl {
	case TemplateNone:
		content = question
	case TemplateDAPO:
		content = DAPOPrompt(question)
		p.Split = firstNonEmpty(opts.Split, "train")
		p.Ability = "math"
	case TemplateMath:
		content = MathPrompt(question)
		p.Ability = "math"
	case TemplateGPQA:
		s, err := GPQAPrompt(question, p.Choices)
		if err != nil {
			return p, err
		}
		content = s
		p.Ability = "science"
	}
	p.Messages = []tokenizer.Message{{Role: "user", Content: content}}
	id, _ := row["id"].(string)
	p.UID = uidOf(row, &p, id)
	return p, nil
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

func stringList(v []any) ([]string, error) {
	out := make([]string, len(v))
	for i, x := range v {
		s, ok := x.(string)
		if !ok {
			return nil, fmt.Errorf("element %d is %T, want a string", i, x)
		}
		out[i] = s
	}
	return out, nil
}

func toInt(v any) (int64, error) {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, nil
		}
		f, err := x.Float64()
		if err != nil || f != math.Trunc(f) {
			return 0, fmt.Errorf("%q is not an integer", x.String())
		}
		return int64(f), nil
	case int64:
		return x, nil
	case int32:
		return int64(x), nil
	case int:
		return int64(x), nil
	case uint64:
		return int64(x), nil
	case float64:
		if x != math.Trunc(x) {
			return 0, fmt.Errorf("%v is not an integer", x)
		}
		return int64(x), nil
	case string:
		i, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not an integer", x)
		}
		return i, nil
	}
	return 0, fmt.Errorf("unsupported type %T", v)
}
