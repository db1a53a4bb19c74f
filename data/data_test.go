package data

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/tokenizer"
	"github.com/parquet-go/parquet-go"
)

// testdata/*.jsonl are copies of shared/data (dapo_math_sample.jsonl whole,
// the benchmarks whole or their first rows); GPQA rows are made up here.

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTemplatesVerbatim(t *testing.T) {
	// The literals of docs/algorithm.md §2.2 and §2.5, typed out again here on purpose.
	wantDAPO := "Solve the following math problem step by step. The last line of your response should be of the form Answer: $Answer (without quotes) where $Answer is the answer to the problem.\n\nWhat is $1+1$?\n\nRemember to put your answer on its own line after \"Answer:\". Let's think step by step and output the final answer within \\boxed{}."
	if got := DAPOPrompt("What is $1+1$?"); got != wantDAPO {
		t.Errorf("DAPOPrompt:\n%q\nwant\n%q", got, wantDAPO)
	}
	if got := DAPOPrompt("  What is $1+1$?\n"); got != strings.Replace(wantDAPO, "What is $1+1$?", "  What is $1+1$?\n", 1) {
		t.Errorf("DAPOPrompt strips only the whole message, not the problem inside the wrapper: %q", got)
	}
	if got := DAPOPromptFromWrapped(DAPOPrefix + "What is $1+1$?" + DAPOSuffix + "\n"); got != wantDAPO {
		t.Errorf("DAPOPromptFromWrapped = %q", got)
	}
	if got, want := MathPrompt("Find $x$.\n"), "Find $x$.\n Let's think step by step and output the final answer within \\boxed{}."; got != want {
		t.Errorf("MathPrompt = %q, want %q", got, want)
	}
	got, err := GPQAPrompt(" Which?\n", []string{"10^-8 eV\n", "b", "c", "d "})
	want := "Which?\n\nA: 10^-8 eV\n\nB: b\nC: c\nD: d \n\nPlease reason step by step, and put your final answer within \\boxed{}.\nPlease only provide the letter of the answer in the box."
	if err != nil || got != want {
		t.Errorf("GPQAPrompt = %q, %v\nwant %q", got, err, want)
	}
	if _, err := GPQAPrompt("q", []string{"a"}); err == nil {
		t.Error("GPQAPrompt with 1 choice: want an error")
	}
}

func TestReadSharedSamples(t *testing.T) {
	tests := []struct {
		file       string
		rows       int
		firstUID   string
		dataSource string
		template   func(problem string) string
		answer0    string
	}{
		{"dapo_math_sample.jsonl", 77, "dapo_math_17k-0", "open-r1/DAPO-Math-17k-Processed", DAPOPrompt, "34"},
		{"math500_head60.jsonl", 60, "math500-0", "HuggingFaceH4/MATH-500", MathPrompt, "\\left( 3, \\frac{\\pi}{2} \\right)"},
		{"aime24.jsonl", 30, "aime24-0", "HuggingFaceH4/aime_2024", MathPrompt, ""},
		{"aime25.jsonl", 30, "aime25-0", "MathArena/aime_2025", MathPrompt, ""},
		{"amc23.jsonl", 40, "amc23-0", "math-ai/amc23", MathPrompt, ""},
		{"minerva_math_head40.jsonl", 40, "minerva_math-0", "math-ai/minervamath", MathPrompt, ""},
		{"olympiadbench_head40.jsonl", 40, "olympiadbench-0", "math-ai/olympiadbench", MathPrompt, ""},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join("testdata", tc.file)
			ds, err := ReadFile(path, ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(ds.Prompts) != tc.rows || ds.Format != "jsonl-simple" {
				t.Fatalf("%d rows format %s, want %d jsonl-simple", len(ds.Prompts), ds.Format, tc.rows)
			}
			p := ds.Prompts[0]
			if p.UID != tc.firstUID || p.DataSource != tc.dataSource || p.File != path || p.Row != 0 {
				t.Errorf("first prompt: uid %q source %q file %q row %d", p.UID, p.DataSource, p.File, p.Row)
			}
			var raw struct{ Problem, Answer string }
			line, _, _ := strings.Cut(mustRead(t, path), "\n")
			if err := json.Unmarshal([]byte(line), &raw); err != nil {
				t.Fatal(err)
			}
			if len(p.Messages) != 1 || p.Messages[0].Role != "user" || p.Messages[0].Content != tc.template(raw.Problem) {
				t.Errorf("message = %+v", p.Messages)
			}
			if p.GroundTruth != raw.Answer || (tc.answer0 != "" && p.GroundTruth != tc.answer0) {
				t.Errorf("ground truth %q, want %q", p.GroundTruth, raw.Answer)
			}
		})
	}
	// All the benchmarks concatenated: UIDs are unique across files.
	var paths []string
	for _, tc := range tests[1:] {
		paths = append(paths, filepath.Join("testdata", tc.file))
	}
	ds, err := ReadFiles(paths, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Prompts) != 240 {
		t.Errorf("concatenated benchmarks: %d prompts", len(ds.Prompts))
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestGPQARow(t *testing.T) {
	path := writeFile(t, "gpqa_diamond.jsonl",
		`{"id": "gpqa_diamond-0", "source": "gpqa_diamond", "problem": "Which is right?\n", "answer": "C", "choices": ["w1\n", "w2", "right", "w3"]}`+"\n")
	ds, err := ReadFile(path, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := ds.Prompts[0]
	want := "Which is right?\n\nA: w1\n\nB: w2\nC: right\nD: w3\n\n" + GPQASuffix
	if p.Messages[0].Content != want || p.GroundTruth != "C" || p.DataSource != "Idavidrein/gpqa" || p.Ability != "science" {
		t.Errorf("GPQA prompt %+v", p)
	}
}

func TestVerlJSONL(t *testing.T) {
	rows := strings.Join([]string{
		// chat messages, index → data_source:split:index
		`{"data_source": "open-r1/DAPO-Math-17k-Processed", "prompt": [{"role": "user", "content": "Q0"}], "ability": "math", "reward_model": {"style": "rule", "ground_truth": "34"}, "extra_info": {"split": "train", "index": 0}}`,
		// plain-text prompt, numeric ground truth with .0, index as float
		`{"data_source": "open-r1/DAPO-Math-17k-Processed", "prompt": "Q1", "reward_model": {"ground_truth": 27.0}, "extra_info": {"split": "train", "index": 1.0}}`,
		// list ground truth, system + user messages, no split (default train)
		`{"data_source": "d", "prompt": [{"role": "system", "content": "S"}, {"role": "user", "content": "Q2"}], "reward_model": {"ground_truth": ["x", "y"]}, "extra_info": {"index": 2}}`,
		// no index, explicit uid
		`{"uid": "my-uid", "prompt": [{"role": "user", "content": "Q3"}], "reward_model": {"ground_truth": "3"}}`,
		// no index, no uid, no id: content hash; no data_source: file name
		`{"prompt": [{"role": "user", "content": "Q4"}], "reward_model": {"ground_truth": "-1"}}`,
	}, "\n") + "\n\n"
	path := writeFile(t, "train.jsonl", rows)
	ds, err := ReadFile(path, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ds.Format != "jsonl-verl" || len(ds.Prompts) != 5 {
		t.Fatalf("format %s, %d prompts", ds.Format, len(ds.Prompts))
	}
	want := []struct {
		uid, gt string
		msgs    int
	}{
		{"open-r1/DAPO-Math-17k-Processed:train:0", "34", 1},
		{"open-r1/DAPO-Math-17k-Processed:train:1", "27", 1},
		{"d:train:2", "x", 2},
		{"my-uid", "3", 1},
		{ContentUID("train", &Prompt{Messages: []tokenizer.Message{{Role: "user", Content: "Q4"}}}), "-1", 1},
	}
	for i, w := range want {
		p := ds.Prompts[i]
		if p.UID != w.uid || p.GroundTruth != w.gt || len(p.Messages) != w.msgs || p.Row != i {
			t.Errorf("row %d: uid %q gt %q msgs %d row %d; want %q %q %d", i, p.UID, p.GroundTruth, len(p.Messages), p.Row, w.uid, w.gt, w.msgs)
		}
	}
	if !strings.HasPrefix(ds.Prompts[4].UID, "sha256:") || ds.Prompts[4].DataSource != "train" {
		t.Errorf("content-hash row: %+v", ds.Prompts[4])
	}
	if !strings.Contains(ds.Schema, "reward_model:") || !strings.Contains(ds.Schema, "prompt: list<") {
		t.Errorf("schema:\n%s", ds.Schema)
	}
	if _, err := ReadFile(path, ReadOptions{Template: TemplateDAPO}); err == nil {
		t.Error("a template on verl rows: want an error")
	}
}

// pyarrowRow mimics a verl Parquet file written by pyarrow: optional
// columns, int32 index in one variant, plain-text prompt in another.
type pyarrowMessage struct {
	Content *string `parquet:"content,optional"`
	Role    *string `parquet:"role,optional"`
}

type pyarrowRow struct {
	DataSource  *string          `parquet:"data_source,optional"`
	Prompt      []pyarrowMessage `parquet:"prompt,list,optional"`
	Ability     *string          `parquet:"ability,optional"`
	RewardModel *struct {
		GroundTruth *string `parquet:"ground_truth,optional"`
		Style       *string `parquet:"style,optional"`
	} `parquet:"reward_model,optional"`
	ExtraInfo *struct {
		Index *int64  `parquet:"index,optional"`
		Split *string `parquet:"split,optional"`
	} `parquet:"extra_info,optional"`
}

type textPromptRow struct {
	DataSource  string `parquet:"data_source"`
	Prompt      string `parquet:"prompt"`
	RewardModel struct {
		GroundTruth string `parquet:"ground_truth"`
	} `parquet:"reward_model"`
	ExtraInfo struct {
		Index int32 `parquet:"index"`
	} `parquet:"extra_info"`
}

func sp(s string) *string { return &s }

func pyarrowVerl(i int, content, gt string) pyarrowRow {
	idx := int64(i)
	r := pyarrowRow{DataSource: sp("open-r1/DAPO-Math-17k-Processed"), Ability: sp("math")}
	if content != "" {
		r.Prompt = []pyarrowMessage{{Content: sp(content), Role: sp("user")}}
	}
	r.RewardModel = &struct {
		GroundTruth *string `parquet:"ground_truth,optional"`
		Style       *string `parquet:"style,optional"`
	}{Style: sp("rule")}
	if gt != "" {
		r.RewardModel.GroundTruth = sp(gt)
	}
	r.ExtraInfo = &struct {
		Index *int64  `parquet:"index,optional"`
		Split *string `parquet:"split,optional"`
	}{Index: &idx, Split: sp("train")}
	return r
}

func writeParquet[T any](t *testing.T, name string, rows []T) string {
	t.Helper()
	var buf bytes.Buffer
	if err := parquet.Write(&buf, rows); err != nil {
		t.Fatal(err)
	}
	return writeFile(t, name, buf.String())
}

func TestParquet(t *testing.T) {
	t.Run("verl messages", func(t *testing.T) {
		path := writeParquet(t, "train.parquet", []pyarrowRow{pyarrowVerl(0, "Q0", "34"), pyarrowVerl(1, "Q1", "113")})
		ds, err := ReadFile(path, ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ds.Format != "parquet-verl" || len(ds.Prompts) != 2 || !strings.Contains(ds.Schema, "prompt (LIST)") {
			t.Fatalf("format %s, %d prompts, schema\n%s", ds.Format, len(ds.Prompts), ds.Schema)
		}
		p := ds.Prompts[1]
		if p.UID != "open-r1/DAPO-Math-17k-Processed:train:1" || p.GroundTruth != "113" || p.Messages[0].Content != "Q1" || p.Row != 1 {
			t.Errorf("prompt %+v", p)
		}
	})
	t.Run("plain text prompt, int32 index", func(t *testing.T) {
		rows := make([]textPromptRow, 3)
		for i := range rows {
			rows[i].DataSource, rows[i].Prompt = "x", fmt.Sprintf("problem %d", i)
			rows[i].RewardModel.GroundTruth, rows[i].ExtraInfo.Index = "1", int32(10+i)
		}
		ds, err := ReadFile(writeParquet(t, "text.parquet", rows), ReadOptions{Split: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if p := ds.Prompts[2]; p.UID != "x:test:12" || p.Messages[0].Content != "problem 2" {
			t.Errorf("prompt %+v", p)
		}
	})
	t.Run("round trip through WriteVerlParquet", func(t *testing.T) {
		src, err := ReadFile(filepath.Join("testdata", "dapo_math_sample.jsonl"), ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := WriteVerlParquet(&buf, src.Prompts); err != nil {
			t.Fatal(err)
		}
		ds, err := ReadFile(writeFile(t, "dapo.parquet", buf.String()), ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range ds.Prompts {
			a, b := src.Prompts[i], ds.Prompts[i]
			if !slices.Equal(a.Messages, b.Messages) || a.GroundTruth != b.GroundTruth || b.UID != fmt.Sprintf("open-r1/DAPO-Math-17k-Processed:train:%d", i) {
				t.Fatalf("row %d differs: %+v vs %+v", i, a, b)
			}
		}
	})
	t.Run("bad rows", func(t *testing.T) {
		rows := []pyarrowRow{pyarrowVerl(0, "Q0", "1"), pyarrowVerl(1, "", "2"), pyarrowVerl(2, "Q2", "")}
		path := writeParquet(t, "bad.parquet", rows)
		_, err := ReadFile(path, ReadOptions{})
		var re *RowError
		if !errors.As(err, &re) || re.Row != 1 || re.File != path || !strings.Contains(err.Error(), "row 1") {
			t.Fatalf("err = %v, want a RowError for row 1", err)
		}
		var logged []string
		ds, err := ReadFile(path, ReadOptions{SkipBadRows: true, Logf: func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }})
		if err != nil || len(ds.Prompts) != 1 || ds.Skipped != 2 {
			t.Fatalf("skip: %v, %+v", err, ds)
		}
		if !strings.Contains(strings.Join(logged, "\n"), "skipped 2 bad rows of 3") {
			t.Errorf("log: %q", logged)
		}
	})
	t.Run("not parquet", func(t *testing.T) {
		if _, err := ReadFile(writeFile(t, "junk.parquet", "PAR1 this is not parquet"), ReadOptions{}); err == nil {
			t.Error("want an error")
		}
	})
}

func TestBadRowsJSONL(t *testing.T) {
	good := `{"id": "a-0", "problem": "P", "answer": "1"}`
	tests := []struct {
		name, row, want string
	}{
		{"invalid JSON", `{"problem": "P", "answer": }`, "invalid JSON"},
		{"not an object", `["P", "1"]`, "want a JSON object"},
		{"two values", `{"problem": "P", "answer": "1"} {}`, "more than one value"},
		{"missing question", `{"id": "a-1", "answer": "1"}`, "no question"},
		{"empty question", `{"id": "a-1", "problem": "  ", "answer": "1"}`, "no question"},
		{"missing answer", `{"id": "a-1", "problem": "P"}`, "no answer"},
		{"empty answer list", `{"id": "a-1", "problem": "P", "answer": []}`, "empty list"},
		{"answer object", `{"id": "a-1", "problem": "P", "answer": {"x": 1}}`, "unsupported type"},
		{"prompt wrong type", `{"prompt": 5, "reward_model": {"ground_truth": "1"}}`, "prompt is json.Number"},
		{"message without role", `{"prompt": [{"content": "x"}], "reward_model": {"ground_truth": "1"}}`, "role and content"},
		{"empty message list", `{"prompt": [], "reward_model": {"ground_truth": "1"}}`, "empty message list"},
		{"missing ground truth", `{"prompt": [{"role": "user", "content": "x"}], "reward_model": {}}`, "missing reward_model.ground_truth"},
		{"fractional index", `{"prompt": "x", "reward_model": {"ground_truth": "1"}, "extra_info": {"index": 1.5}}`, "extra_info.index"},
		{"choices not strings", `{"id": "a-1", "problem": "P", "answer": "A", "choices": [1, 2, 3, 4]}`, "choices"},
		{"gpqa with 3 choices", `{"id": "a-1", "problem": "P", "answer": "A", "choices": ["a", "b", "c"]}`, "4 choices"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "d.jsonl", good+"\n\n"+tc.row+"\n")
			_, err := ReadFile(path, ReadOptions{})
			var re *RowError
			if !errors.As(err, &re) {
				t.Fatalf("err = %v, want a RowError", err)
			}
			if re.Line != 3 || re.Row != 1 || !strings.Contains(err.Error(), path+":3 (row 1)") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want file:3 (row 1) and %q", err, tc.want)
			}
			n := 0
			ds, err := ReadFile(path, ReadOptions{SkipBadRows: true, Logf: func(string, ...any) { n++ }})
			if err != nil || len(ds.Prompts) != 1 || ds.Skipped != 1 || n == 0 {
				t.Errorf("skip: err %v, skipped %d, logged %d", err, ds.Skipped, n)
			}
		})
	}
	if _, err := ReadFile(writeFile(t, "only-bad.jsonl", "{}\n"), ReadOptions{SkipBadRows: true, Logf: func(string, ...any) {}}); err == nil {
		t.Error("a file with no usable rows: want an error")
	}
	if _, err := ReadFile(writeFile(t, "x.csv", "a,b\n"), ReadOptions{}); err == nil {
		t.Error("unknown extension: want an error")
	}
}

func TestUIDCollisions(t *testing.T) {
	tests := []struct {
		name string
		rows []string
	}{
		{"same id", []string{`{"id": "x-0", "problem": "P", "answer": "1"}`, `{"id": "x-0", "problem": "Q", "answer": "1"}`}},
		{"same index", []string{
			`{"data_source": "d", "prompt": "P", "reward_model": {"ground_truth": "1"}, "extra_info": {"index": 7}}`,
			`{"data_source": "d", "prompt": "Q", "reward_model": {"ground_truth": "1"}, "extra_info": {"index": 7}}`}},
		{"duplicate content, no id", []string{`{"problem": "P", "answer": "1"}`, `{"problem": "P", "answer": "2"}`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "c.jsonl", strings.Join(tc.rows, "\n"))
			_, err := ReadFile(path, ReadOptions{})
			if !errors.Is(err, ErrUIDCollision) || !strings.Contains(err.Error(), "row 0") || !strings.Contains(err.Error(), "row 1") {
				t.Errorf("err = %v, want a collision naming rows 0 and 1", err)
			}
		})
	}
	a := writeFile(t, "a.jsonl", `{"id": "x-0", "problem": "P", "answer": "1"}`)
	b := writeFile(t, "b.jsonl", `{"id": "x-0", "problem": "Q", "answer": "1"}`)
	if _, err := ReadFiles([]string{a, b}, ReadOptions{}); !errors.Is(err, ErrUIDCollision) {
		t.Errorf("collision across files: err = %v", err)
	}
	// Distinct content without ids gets distinct, stable hash UIDs.
	path := writeFile(t, "h.jsonl", `{"problem": "P", "answer": "1"}`+"\n"+`{"problem": "Q", "answer": "1"}`)
	d1, err := ReadFile(path, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d2, _ := ReadFile(path, ReadOptions{})
	if d1.Prompts[0].UID == d1.Prompts[1].UID || d1.Prompts[0].UID != d2.Prompts[0].UID {
		t.Errorf("hash UIDs %q %q", d1.Prompts[0].UID, d1.Prompts[1].UID)
	}
}
