package tbevents

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gdrotrain/gdrotrain/gdro"
	"github.com/gdrotrain/gdrotrain/tools/tbevents/tbpb"
)

// TestCRC: CRC-32C's check value (RFC 3720 B.4: "123456789" → e3069283)
// and the mask of crc32c.h, inverted by hand.
func TestCRC(t *testing.T) {
	if got := crc32.Checksum([]byte("123456789"), castagnoli); got != 0xe3069283 {
		t.Fatalf("crc32c = %08x, want e3069283", got)
	}
	m := MaskedCRC([]byte("123456789"))
	rot := m - maskDelta
	if unmasked := (rot >> 17) | (rot << 15); unmasked != 0xe3069283 {
		t.Fatalf("unmask(mask) = %08x", unmasked)
	}
}

func TestRecordsDetectDamage(t *testing.T) {
	var buf []byte
	for _, s := range []string{"a", "", strings.Repeat("x", 300)} {
		buf = AppendRecord(buf, []byte(s))
	}
	got, err := ReadRecords(bytes.NewReader(buf))
	if err != nil || len(got) != 3 || len(got[2]) != 300 {
		t.Fatalf("read back %d records, %v", len(got), err)
	}
	// A torn tail: the good records before it come back with ErrTorn.
	got, err = ReadRecords(bytes.NewReader(buf[:len(buf)-3]))
	if !errors.Is(err, ErrTorn) || len(got) != 2 {
		t.Errorf("torn: %d records, %v", len(got), err)
	}
	// One flipped bit in the data, then in a length.
	for _, at := range []int{12 + 1 + 4 + 12 + 4 + 12 + 5, 12 + 1 + 4} {
		bad := bytes.Clone(buf)
		bad[at] ^= 0x10
		got, err = ReadRecords(bytes.NewReader(bad))
		if err == nil || !strings.Contains(err.Error(), "CRC") {
			t.Errorf("flip at %d: %d records, err %v; want a CRC error", at, len(got), err)
		}
	}
}

func scalarEvent(step int64, tag string, x float32) *tbpb.Event {
	return &tbpb.Event{Step: step, What: &tbpb.Event_Summary{Summary: &tbpb.Summary{Value: []*tbpb.Summary_Value{
		{Tag: tag, Value: &tbpb.Summary_Value_SimpleValue{SimpleValue: x}}}}}}
}

// TestTruncate: a resume at step 2 keeps steps ≤ 2 of every file (and a
// file holding none of them goes), drops a torn tail, and a run from step
// 0 (keep −1) removes the files.
func TestTruncate(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1700000000, 0)
	a, err := Create(dir, now)
	if err != nil {
		t.Fatal(err)
	}
	for s := int64(1); s <= 4; s++ {
		a.Write(scalarEvent(s, "train/x", float32(s)))
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := Create(dir, now) // same second: a suffixed name, read after a's
	if err != nil {
		t.Fatal(err)
	}
	b.Write(scalarEvent(3, "train/x", 30))
	b.Close()
	if filepath.Base(b.Path()) != filepath.Base(a.Path())+".1" {
		t.Errorf("second file %s", b.Path())
	}
	// Tear a's last record.
	raw, _ := os.ReadFile(a.Path())
	os.WriteFile(a.Path(), raw[:len(raw)-2], 0o644)

	note, err := Truncate(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(note)
	files, _ := Files(dir)
	if len(files) != 1 || files[0] != a.Path() {
		t.Fatalf("files after truncate: %v", files)
	}
	events, err := ReadFile(a.Path())
	if err != nil {
		t.Fatal(err)
	}
	var steps []int64
	for _, e := range events {
		if e.GetFileVersion() == fileVersion {
			continue
		}
		steps = append(steps, e.Step)
	}
	if !reflect.DeepEqual(steps, []int64{1, 2}) {
		t.Errorf("steps kept %v, want [1 2]", steps)
	}
	if note, err := Truncate(dir, 2); err != nil || note != "" {
		t.Errorf("second truncate changed %q, %v", note, err)
	}
	if _, err := Truncate(dir, -1); err != nil {
		t.Fatal(err)
	}
	if files, _ := Files(dir); len(files) != 0 {
		t.Errorf("keep -1 left %v", files)
	}
}

// TestGroups: every key of gdro's step record goes under gdro/, and the
// trainer's own keys under train/, perf/ or memory/ as named.
func TestGroups(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeFor[gdro.StepRecord](), reflect.TypeFor[gdro.PromptRecord](),
		reflect.TypeFor[gdro.RolloutRecord](), reflect.TypeFor[gdro.SimRecord]()} {
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if f.Anonymous || name == "" || name == "step" {
				continue
			}
			if g := Group(name); g != "gdro" {
				t.Errorf("gdro.%s.%s (%s) goes to %s/", typ.Name(), f.Name, name, g)
			}
		}
	}
	for key, want := range map[string]string{"reward_mean": "train", "kl": "train", "grad_norm": "train",
		"mismatch_kl": "train", "ds_kept_rows": "train", "time_gen_s": "perf", "gen_tokens_per_s": "perf",
		"gpu_mem_peak_gib": "memory", "lr": "train"} {
		if g := Group(key); g != want {
			t.Errorf("%s goes to %s/, want %s/", key, g, want)
		}
	}
}

func values(s *tbpb.Summary) map[string]*tbpb.Summary_Value {
	out := map[string]*tbpb.Summary_Value{}
	for _, v := range s.Value {
		k := v.Tag
		if v.GetHisto() != nil {
			k += " (histogram)"
		}
		out[k] = v
	}
	return out
}

func TestMetricsSummary(t *testing.T) {
	step, s, err := MetricsSummary([]byte(`{"step":7,"reward_mean":0.5,"method":"prompt","bin_labels":["a","b"],
		"bin_weight":[0.25,0.75],"arm_prob":[[0.5,0.5],[1,0]],"weights_applied":true,"time_step_s":2,"gpu_mem_peak_gib":1.5}`))
	if err != nil || step != 7 {
		t.Fatal(step, err)
	}
	v := values(s)
	for tag, want := range map[string]float32{"train/reward_mean": 0.5, "gdro/bin_weight/b1": 0.75, "gdro/arm_prob/b1/0": 1,
		"gdro/weights_applied": 1, "perf/time_step_s": 2, "memory/gpu_mem_peak_gib": 1.5} {
		if got := v[tag].GetSimpleValue(); got != want {
			t.Errorf("%s = %v, want %v", tag, got, want)
		}
	}
	h := v["gdro/bin_weight (histogram)"].GetHisto()
	if h == nil || !reflect.DeepEqual(h.Bucket, []float64{0.25, 0.75}) || !reflect.DeepEqual(h.BucketLimit, []float64{1, 2}) || h.Max != 2 {
		t.Errorf("bin_weight histogram %v", h)
	}
	if len(v) != 11 { // 10 scalars (4 of arm_prob, 2 of bin_weight) and the histogram; not the strings
		t.Errorf("%d values: %v", len(v), v)
	}
	if _, _, err := MetricsSummary([]byte(`{"reward_mean":1}`)); err == nil {
		t.Error("a line without a step was accepted")
	}
}

func TestValidationSummary(t *testing.T) {
	step, s, err := ValidationSummary([]byte(`{"step":3,"n":2,"mean_acc":0.5,"worst_group":"aime",
		"benchmarks":{"aime":{"prompts":2,"mean_acc":0.25,"pass_at_k":{"pass@1":0.25,"pass@2":0.5},"first_k_any":{"first_k_any@1":0}}},
		"prompt_correct":[0,2,1,2]}`))
	if err != nil || step != 3 {
		t.Fatal(step, err)
	}
	v := values(s)
	for tag, want := range map[string]float32{"validation/mean_acc": 0.5, "validation/n": 2, "validation/aime/mean_acc": 0.25,
		"validation/aime/pass@2": 0.5, "validation/aime/first_k_any@1": 0, "validation/aime/prompts": 2} {
		if x, ok := v[tag]; !ok || x.GetSimpleValue() != want {
			t.Errorf("%s = %v, want %v", tag, x, want)
		}
	}
	h := v["validation/prompt_correct (histogram)"].GetHisto()
	if h == nil || !reflect.DeepEqual(h.Bucket, []float64{1, 1, 2}) || h.Num != 4 || h.Sum != 5 {
		t.Errorf("prompt_correct histogram %v", h)
	}
}

// TestGeneratedCurrent: the committed tbpb/*.pb.go are what
// scripts/gen_tbproto.sh makes from the vendored .proto files (the
// versions line aside: it names the protoc that ran). Needs protoc.
func TestGeneratedCurrent(t *testing.T) {
	if _, err := exec.LookPath("protoc"); err != nil {
		msg := "protoc not found (apt-get install protobuf-compiler): cannot check tbpb/*.pb.go"
		if os.Getenv("GDROTRAIN_REQUIRE_FIXTURES") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	_, self, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(self), "..", "..")
	out := t.TempDir()
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "gen_tbproto.sh"), out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gen_tbproto.sh: %v\n%s", err, b)
	}
	committed, _ := filepath.Glob(filepath.Join(filepath.Dir(self), "tbpb", "*.pb.go"))
	generated, _ := filepath.Glob(filepath.Join(out, "*.pb.go"))
	if len(committed) != len(generated) || len(committed) == 0 {
		t.Fatalf("%d committed .pb.go files, %d generated", len(committed), len(generated))
	}
	strip := func(b []byte) string {
		var keep []string
		for _, l := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(l, "// \tprotoc ") {
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "\n")
	}
	for _, c := range committed {
		want, _ := os.ReadFile(c)
		got, err := os.ReadFile(filepath.Join(out, filepath.Base(c)))
		if err != nil || strip(got) != strip(want) {
			t.Errorf("%s is out of date: run go generate ./tools/tbevents (%v)", c, err)
		}
	}
}

// BenchmarkMirrorLine: the cost of one metrics.jsonl line in the event
// file (decode, summary, encode, frame, write), on the demo's last line
// (5 bins; testdata/demo_metrics_line.json).
func BenchmarkMirrorLine(b *testing.B) {
	line, err := os.ReadFile(filepath.Join("testdata", "demo_metrics_line.json"))
	if err != nil {
		b.Fatal(err)
	}
	r, err := OpenRun(b.TempDir(), -1, []byte("run: {}\n"), func(string, ...any) {})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	w := r.Tee(io.Discard, Metrics)
	line = append(bytes.TrimSpace(line), '\n')
	b.ResetTimer()
	for range b.N {
		w.Write(line)
	}
	b.StopTimer()
	info, _ := os.Stat(r.w.Path())
	b.ReportMetric(float64(info.Size())/float64(b.N), "B/line")
}

// TestTee: lines split across writes are mirrored once complete; the JSONL
// writer gets every byte; a failing event file is logged once and the
// JSONL writes go on.
func TestTee(t *testing.T) {
	dir := t.TempDir()
	var logs []string
	logf := func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }
	r, err := OpenRun(dir, 4, []byte("train: {steps: 9}\n"), logf)
	if err != nil {
		t.Fatal(err)
	}
	var jsonl bytes.Buffer
	w := r.Tee(&jsonl, Metrics)
	for _, part := range []string{`{"step":5,"kl":0.`, "5}\n{\"step\":6,", `"kl":0.25}` + "\n"} {
		if _, err := w.Write([]byte(part)); err != nil {
			t.Fatal(err)
		}
	}
	events, err := ReadFile(r.w.Path())
	if err != nil {
		t.Fatal(err)
	}
	// file_version, SessionLog START at 5, the config text at 5, steps 5 and 6
	if len(events) != 5 || events[1].GetSessionLog().GetStatus() != tbpb.SessionLog_START || events[1].Step != 5 ||
		events[2].GetSummary().GetValue()[0].GetTag() != "config" || events[4].Step != 6 ||
		events[4].GetSummary().GetValue()[0].GetSimpleValue() != 0.25 {
		t.Fatalf("events: %v", events)
	}
	r.w.f.Close() // the next event write fails
	w.Write([]byte(`{"step":7,"kl":1}` + "\n"))
	w.Write([]byte(`{"step":8,"kl":1}` + "\n"))
	if n := strings.Count(jsonl.String(), "\n"); n != 4 {
		t.Errorf("the JSONL writer got %d lines, want 4", n)
	}
	failures := 0
	for _, l := range logs {
		if strings.Contains(l, "no more events") {
			failures++
		}
	}
	if failures != 1 {
		t.Errorf("%d failure messages, want 1: %q", failures, logs)
	}
}
