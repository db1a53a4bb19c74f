package data

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/tokenizer"
)

// TestInvalidUTF8Counted: rows with invalid UTF-8 are read (each invalid
// byte as U+FFFD), counted and reported, in JSONL and Parquet alike; they
// used to pass silently.
func TestInvalidUTF8Counted(t *testing.T) {
	dir := t.TempDir()
	jsonl := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(jsonl, []byte(`{"id": "a", "problem": "1+1=", "answer": "2"}`+"\n"+
		`{"id": "b", "problem": "caf`+"\xe9"+` 2+2=", "answer": "4"}`+"\n"+
		`{"id": "c", "problem": "3+3=", "answer": "6`+"\xff"+`"}`+"\n"), 0o644)
	prompts := []Prompt{
		{UID: "x", Messages: []tokenizer.Message{{Role: "user", Content: "ok"}}, GroundTruth: "1", DataSource: "s", Index: 0},
		{UID: "y", Messages: []tokenizer.Message{{Role: "user", Content: "bad \xc3"}}, GroundTruth: "2", DataSource: "s", Index: 1},
	}
	var buf bytes.Buffer
	if err := WriteVerlParquet(&buf, prompts); err != nil {
		t.Fatal(err)
	}
	pq := filepath.Join(dir, "bad.parquet")
	os.WriteFile(pq, buf.Bytes(), 0o644)
	for _, c := range []struct {
		path        string
		rows, first int
	}{{jsonl, 2, 1}, {pq, 1, 1}} {
		var logs []string
		ds, err := ReadFile(c.path, ReadOptions{Template: TemplateNone, Logf: func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }})
		if err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		if ds.InvalidUTF8 != c.rows {
			t.Errorf("%s: InvalidUTF8 = %d, want %d", c.path, ds.InvalidUTF8, c.rows)
		}
		want := fmt.Sprintf("%d rows hold invalid UTF-8 (the first is row %d)", c.rows, c.first)
		if len(logs) != 1 || !strings.Contains(logs[0], want) {
			t.Errorf("%s: logged %q, want %q", c.path, logs, want)
		}
		if got := ds.Prompts[1].Messages[0].Content; !strings.Contains(got, "\uFFFD") {
			t.Errorf("%s: row 1 reads %q, want U+FFFD in place of the invalid byte", c.path, got)
		}
	}
	// ReadFiles adds the counts up.
	ds, err := ReadFiles([]string{jsonl, pq}, ReadOptions{Template: TemplateNone, Logf: func(string, ...any) {}})
	if err != nil || ds.InvalidUTF8 != 3 {
		t.Fatalf("ReadFiles: %v, InvalidUTF8 %d, want 3", err, ds.InvalidUTF8)
	}
}
