package trainer

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/checkpoint"
)

// TestResumeNoticesChangedAnswers: a resume after the training rows'
// answers changed (same ids) is refused, naming what changed, unless
// --allow-config-change, which logs it (before, the fingerprint covered
// the ids only and the run went on, silently, on other answers); a
// checkpoint from before content fingerprints resumes with a log line
// saying what could not be checked.
func TestResumeNoticesChangedAnswers(t *testing.T) {
	cfg, _ := fixture(t)
	cfg.Train.Steps = 2
	cfg.Checkpoint.Every, cfg.Checkpoint.Keep = 1, 0
	dir := runFixture(t, cfg)
	train := cfg.Data.Train[0]
	orig, err := os.ReadFile(train)
	if err != nil {
		t.Fatal(err)
	}
	var changed []byte
	for _, line := range bytes.Split(bytes.TrimSpace(orig), []byte("\n")) {
		var row map[string]any
		if err := json.Unmarshal(line, &row); err != nil {
			t.Fatal(err)
		}
		row["answer"] = row["answer"].(string) + "0"
		raw, _ := json.Marshal(row)
		changed = append(append(changed, raw...), '\n')
	}
	os.WriteFile(train, changed, 0o644)

	_, err = Open(cfg, io.Discard, Options{Resume: "auto"})
	if err == nil || !strings.Contains(err.Error(), "the training data changed") || !strings.Contains(err.Error(), "prompts or answers differ") || !strings.Contains(err.Error(), "--allow-config-change") {
		t.Fatalf("resume on changed answers: %v", err)
	}
	var log bytes.Buffer
	tr, err := Open(cfg, &log, Options{Resume: "auto", AllowConfigChange: true})
	if err != nil {
		t.Fatalf("--allow-config-change: %v", err)
	}
	tr.Close()
	if !strings.Contains(log.String(), "the prompts or answers of data.train changed") {
		t.Errorf("--allow-config-change resumed on changed answers without a word:\n%s", log.String())
	}

	// A checkpoint of an older gdrotrain: no content fingerprint (nor a
	// manifest checksum, which it predates too).
	os.WriteFile(train, orig, 0o644)
	ckpt := filepath.Join(dir, "checkpoints", checkpoint.Name(2))
	path := filepath.Join(ckpt, checkpoint.ManifestName)
	raw, _ := os.ReadFile(path)
	var man map[string]any
	if err := json.Unmarshal(raw, &man); err != nil {
		t.Fatal(err)
	}
	delete(man, "manifest_sha256")
	delete(man["state"].(map[string]any)["data_cursor"].(map[string]any), "content_fingerprint")
	raw, _ = json.Marshal(man)
	os.WriteFile(path, raw, 0o644)
	log.Reset()
	if tr, err = Open(cfg, &log, Options{Resume: "auto"}); err != nil {
		t.Fatalf("resume from an old checkpoint: %v", err)
	}
	tr.Close()
	if !strings.Contains(log.String(), "predates content fingerprints of the training data") {
		t.Errorf("an old checkpoint resumed without a word on its data check:\n%s", log.String())
	}
}
