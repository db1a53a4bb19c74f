package gpukit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gdrotrain/gdrotrain/tools/benchreport"
)

// readBench fills s.Bench from the measured bench (bench.json, --no-torch)
// and, when the baseline phase finished, PyTorch's rows (bench-baseline.json,
// --torch-only), merged by row name (benchreport.Merge). A file that is there
// but half written (a phase cut by the deadline) is listed in s.Unreadable;
// the other is still used.
func (s *Summary) readBench(dir string) {
	read := func(name string) *benchreport.Report {
		raw, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || len(bytes.TrimSpace(raw)) == 0 {
			return nil
		}
		var r benchreport.Report
		if err := json.Unmarshal(raw, &r); err != nil {
			s.Unreadable = append(s.Unreadable, fmt.Sprintf("%s: %v", name, err))
			return nil
		}
		return &r
	}
	ours, torch := read("bench.json"), read("bench-baseline.json")
	var from []string
	switch {
	case ours != nil && torch != nil:
		merged := benchreport.Merge(*ours, *torch)
		ours, from = &merged, []string{"bench.json", "bench-baseline.json"}
	case ours != nil:
		from = []string{"bench.json"}
	case torch != nil:
		ours, from = torch, []string{"bench-baseline.json"}
	default:
		return
	}
	raw, err := json.Marshal(ours)
	if err != nil {
		s.Unreadable = append(s.Unreadable, fmt.Sprintf("bench: %v", err))
		return
	}
	s.Bench, s.BenchFrom = raw, strings.Join(from, " + ")
}
