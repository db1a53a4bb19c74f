package gpukit

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteReport: kit-report writes summary.json and report.md into the
// results folder and says what it found; a folder that is not a kit's is
// refused, naming the file it looked for.
func TestWriteReport(t *testing.T) {
	dir := t.TempDir()
	steps := "step\tstatus\trc\tseconds\tlog\tnote\ninfo\tpass\t0\t3\tcuda-info.log\t\nbench\tfail\t1\t9\tbench.log\t\n"
	for name, body := range map[string]string{"steps.tsv": steps, "cuda-info.log": "", "bench.log": "out of luck\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out strings.Builder
	if err := WriteReport(ReportOptions{Dir: dir, Size: "full", Version: "gdrotrain abc123", Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "kit-report: fail: 1 steps passed, 1 failed, 0 skipped") {
		t.Errorf("output %q", out.String())
	}
	raw, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Kit    struct{ Version, Size string }
		Result string
		Steps  []struct{ Name, Status, Detail string }
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	if s.Result != "fail" || s.Kit.Version != "gdrotrain abc123" || s.Kit.Size != "full" || len(s.Steps) != 2 || s.Steps[1].Detail != "out of luck" {
		t.Errorf("summary.json: %+v", s)
	}
	if md, err := os.ReadFile(filepath.Join(dir, "report.md")); err != nil || !strings.HasPrefix(string(md), "# gdrotrain GPU kit: FAIL") {
		t.Errorf("report.md (%v): %.80q", err, md)
	}
	if err := WriteReport(ReportOptions{Dir: t.TempDir(), Stdout: io.Discard}); err == nil || !strings.Contains(err.Error(), "steps.tsv: no such file") {
		t.Errorf("a folder without steps.tsv: %v", err)
	}
}
