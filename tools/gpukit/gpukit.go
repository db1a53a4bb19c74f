// Package gpukit reads the folder a run of the GPU kit (scripts/gpu_kit.sh,
// run.sh in the kit) left behind and makes its summary: one JSON object
// (summary.json) with every phase's and step's outcome and duration (a
// phase the kit's deadline cut is "cut", with what it finished), the GPU, driver
// and libraries with where each was found, the tests' counts and the
// measured benchmark numbers, and the same as a readable report
// (report.md). It also holds the record `gdrotrain cuda-info --json`
// writes, so the two agree on its fields.
package gpukit

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// CudaInfo is what `gdrotrain cuda-info --json` prints.
type CudaInfo struct {
	GPU      string  `json:"gpu"`
	Ordinal  int     `json:"ordinal"`
	Arch     string  `json:"arch"`
	SMs      int     `json:"sms"`
	Devices  int     `json:"devices"` // visible to the process
	TotalGiB float64 `json:"memory_total_gib"`
	FreeGiB  float64 `json:"memory_free_gib"`
	// Emulator is true on the project's CPU emulator of the CUDA libraries,
	// whose timings mean nothing.
	Emulator    bool      `json:"emulator"`
	Driver      string    `json:"driver"`
	Libraries   []Library `json:"libraries"`
	KernelCache string    `json:"kernel_cache"`
}

// Library is one CUDA library: its file, where the search found it and its
// version; Error says why an optional one (NCCL) is missing.
type Library struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	Path    string `json:"path,omitempty"`
	From    string `json:"from,omitempty"`
	Error   string `json:"error,omitempty"`
}

// Step is one step of the kit's run (a line of steps.tsv).
type Step struct {
	Phase   string  `json:"phase"` // the phase it belongs to (Phase.Name)
	Name    string  `json:"name"`
	Status  string  `json:"status"` // pass, fail, skip, or cut (by the kit's deadline)
	RC      int     `json:"rc"`
	Seconds float64 `json:"seconds"`
	Log     string  `json:"log,omitempty"`  // in the results folder
	Note    string  `json:"note,omitempty"` // why skipped, or "timed out"
	// Detail is the line that says what the step found (the self-test's
	// count, the tests' counts), or a failed step's last lines.
	Detail string `json:"detail,omitempty"`
}

// Phase is one of the kit's phases (library discovery and compile,
// self-test, bench, CUDA tests, Python checks, profile tests, PyTorch
// baseline), made of the steps that carry its name, in the order run.sh
// recorded them; run.sh records a phase it could not start as one cut or
// skipped step of the phase's name, so every phase is listed.
type Phase struct {
	Name    string   `json:"name"`
	Status  string   `json:"status"` // fail if a step failed, else cut if one was cut, else pass if one passed, else skip
	Seconds float64  `json:"seconds"`
	Steps   []string `json:"steps"`
	// Finished names what a cut phase completed before the deadline: its
	// steps that ended, and for a cut test step the tests that passed.
	Finished string `json:"finished,omitempty"`
}

// TestRun counts a `go test -v` log's tests (subtests included).
type TestRun struct {
	Device  string   `json:"device,omitempty"` // where they ran, as the tests logged it
	Passed  int      `json:"passed"`
	Failed  int      `json:"failed"`
	Skipped int      `json:"skipped"`
	Failing []string `json:"failing,omitempty"`
	// SkippedTests name each skipped test and why, so a GPU run that
	// skipped what it should have run is visible.
	SkippedTests []string `json:"skipped_tests,omitempty"`
	// Running names the tests a -test.timeout stopped (the deadline).
	Running []string `json:"running,omitempty"`
}

// Summary is summary.json.
type Summary struct {
	Kit struct {
		Version  string `json:"version,omitempty"`  // the kit's VERSION, or the checkout's commit
		Revision string `json:"revision,omitempty"` // of the binary (its build information, when stamped)
		Size     string `json:"size"`
		Host     string `json:"host"`
		Dir      string `json:"dir"`
	} `json:"kit"`
	// Result is pass when every step passed or was skipped, fail when one
	// failed, else cut when the deadline cut one.
	Result  string         `json:"result"`
	Counts  map[string]int `json:"counts"` // steps by status
	Seconds float64        `json:"seconds"`
	Phases  []Phase        `json:"phases"`
	Steps   []Step         `json:"steps"`
	// Notes are run.sh's lines about the run as a whole (notes.txt), such
	// as the self-test's fallback to the mma.sync attention kernels.
	Notes     []string            `json:"notes,omitempty"`
	CudaInfo  *CudaInfo           `json:"cuda_info,omitempty"`
	NvidiaSMI []map[string]string `json:"nvidia_smi,omitempty"` // one row per GPU
	Python    string              `json:"python,omitempty"`     // the versions, or why the Python steps were skipped
	SelfTest  map[string]string   `json:"self_test,omitempty"`  // by precision: the summary line
	// SelfTestExact is, by precision, the self-test's exact log-probs
	// check (docs/algorithm.md §5.10): how many whole-vocabulary rows of
	// the sampler's decode differ from the training forward's, and the
	// first difference.
	SelfTestExact map[string]string   `json:"self_test_exact,omitempty"`
	Tests         map[string]*TestRun `json:"tests,omitempty"` // cuda-tests, profile-tests, nccl-tests
	HF            map[string]any      `json:"hf,omitempty"`    // by precision: scripts/hf_check.py's line
	// Checks are scripts/kit_checks.py's lines: peft's load of our exported
	// adapter, tensorboard's read of our event files.
	Checks map[string]any `json:"checks,omitempty"`
	// Bench is `gdrotrain bench --device cuda --json --no-torch`'s object
	// (bench.json): measured training step time, tokens/s and MFU, decode
	// tokens/s; when the baseline phase completed (`bench --torch-only`,
	// bench-baseline.json), PyTorch's columns are merged into its rows by
	// name, each with its ratio.
	Bench json.RawMessage `json:"bench,omitempty"`
	// BenchFrom names the file(s) Bench came from.
	BenchFrom string `json:"bench_from,omitempty"`
	// Unreadable lists the records that are there but could not be read
	// (a failed step may leave half of one); the rest is summarized.
	Unreadable []string `json:"unreadable,omitempty"`
}

// Summarize reads the results folder dir of a kit run.
func Summarize(dir string) (*Summary, error) {
	s := &Summary{Counts: map[string]int{}}
	s.Kit.Dir = dir
	s.Kit.Host, _ = os.Hostname()
	steps, err := readSteps(filepath.Join(dir, "steps.tsv"))
	if err != nil {
		return nil, err
	}
	s.Steps = steps
	for i := range s.Steps {
		st := &s.Steps[i]
		s.Counts[st.Status]++
		s.Seconds += st.Seconds
		st.Detail = detail(dir, *st)
	}
	s.Result = worst(s.Steps)
	if s.Result == "skip" {
		s.Result = "pass" // nothing failed or was cut
	}
	s.Phases = phases(s.Steps)
	if raw, err := os.ReadFile(filepath.Join(dir, "notes.txt")); err == nil {
		for _, l := range strings.Split(string(raw), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				s.Notes = append(s.Notes, l)
			}
		}
	}
	if raw, err := os.ReadFile(filepath.Join(dir, "cuda-info.json")); err == nil && len(bytes.TrimSpace(raw)) > 0 {
		var ci CudaInfo
		if err := json.Unmarshal(raw, &ci); err != nil {
			s.Unreadable = append(s.Unreadable, fmt.Sprintf("cuda-info.json: %v", err))
		} else {
			s.CudaInfo = &ci
			for i := range s.Steps {
				if st := &s.Steps[i]; st.Name == "info" && st.Status == "pass" {
					st.Detail = fmt.Sprintf("%s (%s), %d visible, driver for CUDA %s", ci.GPU, ci.Arch, ci.Devices, ci.Driver)
				}
			}
		}
	}
	s.NvidiaSMI = readCSV(filepath.Join(dir, "nvidia-smi.csv"))
	if raw, err := os.ReadFile(filepath.Join(dir, "python.txt")); err == nil {
		s.Python = lastLines(string(raw), 1)
	}
	for _, prec := range []string{"fp32", "bf16"} {
		if line := findLine(filepath.Join(dir, "selftest-"+prec+".log"), selfTestLine); line != "" {
			if s.SelfTest == nil {
				s.SelfTest = map[string]string{}
			}
			s.SelfTest[prec] = line
		}
		if line := findLine(filepath.Join(dir, "selftest-"+prec+".log"), exactCheckLine); line != "" {
			if s.SelfTestExact == nil {
				s.SelfTestExact = map[string]string{}
			}
			s.SelfTestExact[prec] = exactCheckLine.FindStringSubmatch(line)[1]
		}
		if raw, err := os.ReadFile(filepath.Join(dir, "hf-"+prec+".log")); err == nil {
			if v := lastJSON(raw); v != nil {
				if s.HF == nil {
					s.HF = map[string]any{}
				}
				s.HF[prec] = v
			}
		}
	}
	for _, name := range []string{"cuda-tests", "profile-tests", "nccl-tests"} {
		raw, err := os.ReadFile(filepath.Join(dir, name+".log"))
		if err != nil {
			continue
		}
		if s.Tests == nil {
			s.Tests = map[string]*TestRun{}
		}
		s.Tests[name] = countTests(raw)
	}
	for _, name := range []string{"peft", "tensorboard"} {
		if raw, err := os.ReadFile(filepath.Join(dir, name+".log")); err == nil {
			if v := lastJSON(raw); v != nil {
				if s.Checks == nil {
					s.Checks = map[string]any{}
				}
				s.Checks[name] = v
			}
		}
	}
	s.readBench(dir)
	return s, nil
}

// worst is the status that sums up steps: fail if one failed, else cut if
// one was cut, else pass if one passed, else skip.
func worst(steps []Step) string {
	rank := map[string]int{"skip": 0, "pass": 1, "cut": 2, "fail": 3}
	w := "skip"
	for _, st := range steps {
		if rank[st.Status] > rank[w] {
			w = st.Status
		}
	}
	return w
}

// phases groups steps by phase, in the order each phase first appears.
func phases(steps []Step) []Phase {
	var out []Phase
	at := map[string]int{}
	var members [][]Step
	for _, st := range steps {
		i, ok := at[st.Phase]
		if !ok {
			i = len(out)
			at[st.Phase] = i
			out = append(out, Phase{Name: st.Phase})
			members = append(members, nil)
		}
		out[i].Steps = append(out[i].Steps, st.Name)
		out[i].Seconds += st.Seconds
		members[i] = append(members[i], st)
	}
	for i := range out {
		out[i].Status = worst(members[i])
		if out[i].Status == "cut" {
			out[i].Finished = finished(members[i])
		}
	}
	return out
}

// finished says what a cut phase's steps completed: the steps that ended
// (passed, failed or skipped) and the cut steps' own details (a test
// step's counts so far).
func finished(steps []Step) string {
	var done, cut []string
	for _, st := range steps {
		switch {
		case st.Status != "cut":
			done = append(done, st.Name+" "+st.Status)
		case st.Detail != "":
			cut = append(cut, st.Name+": "+st.Detail)
		}
	}
	var parts []string
	if len(done) > 0 {
		parts = append(parts, "ended: "+strings.Join(done, ", "))
	}
	parts = append(parts, cut...)
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, "; ")
}

// readSteps reads steps.tsv: a header, then one tab-separated line per
// step (phase, step, status, rc, seconds, log, note). Lines of six
// fields, without the phase (kits before phases), are read as their own
// step's phase.
func readSteps(path string) ([]Step, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: no such file: is this a GPU kit results folder?", path)
	}
	if err != nil {
		return nil, err
	}
	var steps []Step
	for n, line := range strings.Split(strings.TrimRight(string(raw), "\n"), "\n") {
		if n == 0 || line == "" {
			continue // the header
		}
		f := strings.Split(line, "\t")
		if len(f) == 6 {
			f = append([]string{f[0]}, f...)
		}
		if len(f) != 7 {
			return nil, fmt.Errorf("%s:%d: %d fields, want 7 (phase, step, status, rc, seconds, log, note)", path, n+1, len(f))
		}
		phase := f[0]
		f = f[1:]
		rc, err1 := strconv.Atoi(f[2])
		secs, err2 := strconv.ParseFloat(f[3], 64)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n+1, err)
		}
		switch f[1] {
		case "pass", "fail", "skip", "cut":
		default:
			return nil, fmt.Errorf("%s:%d: status %q, want pass, fail, skip or cut", path, n+1, f[1])
		}
		steps = append(steps, Step{Phase: phase, Name: f[0], Status: f[1], RC: rc, Seconds: secs, Log: f[4], Note: f[5]})
	}
	return steps, nil
}

var (
	selfTestLine = regexp.MustCompile(`self-test: \d+ of \d+ checks passed`)
	// The exact check's figures, in the summary line when the self-test
	// passed and in the check's line of its error when it failed.
	exactCheckLine = regexp.MustCompile(`exact log-probs.*?(\d+ of \d+ whole-vocabulary log-softmax rows differ.*)`)
	// A failed check in the self-test's error: "  NAME (kernels: …".
	failedCheck = regexp.MustCompile(`(?m)^  (\S.*?) \(kernels: `)
)

// maxDetail bounds a failed step's detail (its log has the whole text).
const maxDetail = 800

// clip shortens s to about n bytes, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + " …"
}

// detail is what a step's log says in a line: a failure's failing
// checks, tests or kernels (else its last lines), the self-test's count,
// the tests' counts.
func detail(dir string, st Step) string {
	if st.Log == "" {
		return ""
	}
	path := filepath.Join(dir, st.Log)
	raw, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if strings.HasSuffix(st.Name, "-tests") {
		return testDetail(countTests(raw))
	}
	if st.Status == "fail" || st.Status == "cut" {
		if strings.HasPrefix(st.Name, "selftest") {
			var names []string
			for _, m := range failedCheck.FindAllStringSubmatch(string(raw), -1) {
				names = append(names, m[1])
			}
			if len(names) > 0 {
				return "failed checks: " + strings.Join(names, "; ")
			}
		}
		if k := failedKernels(raw); len(k) > 0 {
			return "kernels that did not compile: " + strings.Join(k, ", ")
		}
		return clip(lastLines(string(raw), 5), maxDetail)
	}
	if strings.HasPrefix(st.Name, "selftest") {
		return findLine(path, selfTestLine)
	}
	return ""
}

// testDetail is a test step's line: the failing tests by name first, the
// tests a timeout caught running, then the counts.
func testDetail(t *TestRun) string {
	var parts []string
	if f := leaves(t.Failing); len(f) > 0 {
		parts = append(parts, "FAILED "+clip(strings.Join(f, ", "), maxDetail))
	}
	if len(t.Running) > 0 {
		parts = append(parts, "stopped in "+strings.Join(t.Running, ", "))
	}
	parts = append(parts, fmt.Sprintf("%d passed, %d failed, %d skipped", t.Passed, t.Failed, t.Skipped))
	return strings.Join(parts, "; ")
}

// leaves drops the tests that failed only because a subtest did
// (TestA when TestA/b is listed too): the subtests name the failure.
func leaves(names []string) []string {
	var out []string
	for _, n := range names {
		parent := false
		for _, m := range names {
			if strings.HasPrefix(m, n+"/") {
				parent = true
				break
			}
		}
		if !parent {
			out = append(out, n)
		}
	}
	return out
}

// compileError matches the kernel file a compile error names
// ("compile kernels/attention.cu for sm_90 with NVRTC 13.0: …"), and
// TestKernelsCompile's per-kernel failures ("attention.cu sm_90: …").
var compileError = regexp.MustCompile(`compile kernels/(\S+\.cu) for (sm_\w+)`)

// failedKernels lists the kernel files (with their architecture) that a
// log says did not compile, each once, in the order met.
func failedKernels(raw []byte) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range compileError.FindAllStringSubmatch(string(raw), -1) {
		k := m[1] + " (" + m[2] + ")"
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// findLine is the last line of the file at path that re matches ("" for none).
func findLine(path string, re *regexp.Regexp) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	found := ""
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	for sc.Scan() {
		if re.MatchString(sc.Text()) {
			found = strings.TrimSpace(sc.Text())
		}
	}
	return found
}

var (
	testResult = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+)`)
	testDevice = regexp.MustCompile(`device: (.*\((gpu|emulator)\))\s*$`)
	// The line go test prints when a test starts or resumes, naming the
	// test the log lines after it belong to.
	testSwitch = regexp.MustCompile(`^=== (?:RUN|CONT|NAME|PAUSE)\s+(\S+)`)
	// A t.Log/t.Skip line: "    file_test.go:12: message".
	testLogLine = regexp.MustCompile(`^\s+\S+\.go:\d+: ?(.*)$`)
	// go test's -test.timeout panic lists the tests still running.
	testTimeout = regexp.MustCompile(`^panic: test timed out after`)
	runningTest = regexp.MustCompile(`^\s+(Test\S*) \(`)
)

// countTests counts the results in a `go test -v` log. Lines that quote a
// worker process's output (`rank 0 (…): … --- PASS: TestNCCLWorker`) do not
// start with the marker and are not counted. A skip's reason is the last
// line its test logged before the `--- SKIP` line: go test -v prints a
// test's log lines as they come, under its `=== RUN` line, and a
// subtest's result only when its parent ends.
func countTests(raw []byte) *TestRun {
	t := &TestRun{}
	lastLog := map[string]string{}
	current := ""
	timedOut := false
	var started []string
	ended := map[string]bool{}
	for _, line := range strings.Split(string(raw), "\n") {
		if m := testDevice.FindStringSubmatch(line); m != nil && t.Device == "" {
			t.Device = m[1]
		}
		if timedOut {
			if m := runningTest.FindStringSubmatch(line); m != nil {
				t.Running = append(t.Running, m[1])
			}
			continue
		}
		if testTimeout.MatchString(line) {
			timedOut = true
			continue
		}
		if m := testSwitch.FindStringSubmatch(line); m != nil {
			current = m[1]
			if strings.HasPrefix(line, "=== RUN") {
				started = append(started, m[1])
			}
			continue
		}
		if m := testLogLine.FindStringSubmatch(line); m != nil && current != "" {
			lastLog[current] = strings.TrimSpace(m[1])
			continue
		}
		m := testResult.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		ended[m[2]] = true
		switch m[1] {
		case "PASS":
			t.Passed++
		case "FAIL":
			t.Failed++
			t.Failing = append(t.Failing, m[2])
		case "SKIP":
			t.Skipped++
			why := ""
			if r := lastLog[m[2]]; r != "" {
				why = ": " + r
			}
			t.SkippedTests = append(t.SkippedTests, m[2]+why)
		}
	}
	// A log cut off (the deadline's SIGTERM, a crash) without the timeout's
	// list: the tests started and never ended were running.
	if len(t.Running) == 0 {
		for _, n := range started {
			if !ended[n] {
				t.Running = append(t.Running, n)
			}
		}
		t.Running = leaves(t.Running)
	}
	return t
}

// lastJSON is the last line of raw that is a JSON object.
func lastJSON(raw []byte) map[string]any {
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		var v map[string]any
		if json.Unmarshal([]byte(lines[i]), &v) == nil {
			return v
		}
	}
	return nil
}

// readCSV reads nvidia-smi's --format=csv output into one map per row
// (nil when absent or malformed: nvidia-smi is a record, not a step).
func readCSV(path string) []map[string]string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.TrimLeadingSpace = true
	rows, err := r.ReadAll()
	if err != nil || len(rows) < 2 {
		return nil
	}
	var out []map[string]string
	for _, row := range rows[1:] {
		m := map[string]string{}
		for i, k := range rows[0] {
			if i < len(row) {
				m[strings.TrimSpace(k)] = strings.TrimSpace(row[i])
			}
		}
		out = append(out, m)
	}
	return out
}

func lastLines(s string, n int) string {
	var keep []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if strings.TrimSpace(l) != "" {
			keep = append(keep, strings.TrimRight(l, " \r"))
		}
	}
	return strings.Join(keep[max(0, len(keep)-n):], "\n")
}
