package gpukit

import (
	"encoding/json"
	"fmt"
	"github.com/gdrotrain/gdrotrain/tools/benchreport"
	"io"
	"sort"
	"strings"
)

// WriteMarkdown writes the readable report.
func (s *Summary) WriteMarkdown(w io.Writer) error {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("# gdrotrain GPU kit: %s\n\n", strings.ToUpper(s.Result))
	p("%d steps passed, %d failed, %d skipped, %d cut by the deadline in %.0f s", s.Counts["pass"], s.Counts["fail"], s.Counts["skip"],
		s.Counts["cut"], s.Seconds)
	p(" on %s (size %s", orDash(s.Kit.Host), s.Kit.Size)
	if s.Kit.Version != "" {
		p(", %s", s.Kit.Version)
	}
	if s.Kit.Revision != "" {
		p(", binary at commit %s", s.Kit.Revision)
	}
	p(").\n\n")
	for _, n := range s.Notes {
		p("**Note:** %s\n\n", n)
	}
	if len(s.Phases) > 0 {
		p("## Phases\n\n| phase | result | seconds | steps | finished before the deadline |\n|---|---|---|---|---|\n")
		for _, ph := range s.Phases {
			p("| %s | %s | %.0f | %s | %s |\n", ph.Name, status(ph.Status), ph.Seconds, strings.Join(ph.Steps, ", "), cell(ph.Finished))
		}
		p("\n")
	}

	p("## Device\n\n")
	if ci := s.CudaInfo; ci != nil {
		p("%s (%s, %d SMs, %.1f GiB), %d GPU(s) visible; driver supports CUDA %s.\n\n", ci.GPU, ci.Arch, ci.SMs, ci.TotalGiB, ci.Devices, ci.Driver)
		if ci.Emulator {
			p("**This ran on the project's CPU emulator: its timings mean nothing.**\n\n")
		}
		p("| library | version | file | found through |\n|---|---|---|---|\n")
		for _, l := range ci.Libraries {
			if l.Error != "" {
				p("| %s | – | not loaded | %s |\n", l.Name, cell(l.Error))
				continue
			}
			p("| %s | %s | `%s` | %s |\n", l.Name, l.Version, l.Path, cell(l.From))
		}
		p("\n")
	} else {
		p("`gdrotrain cuda-info` reported nothing (see the info step).\n\n")
	}
	if len(s.NvidiaSMI) > 0 {
		keys := make([]string, 0, len(s.NvidiaSMI[0]))
		for k := range s.NvidiaSMI[0] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		p("nvidia-smi:\n\n| %s |\n|%s\n", strings.Join(keys, " | "), strings.Repeat("---|", len(keys)))
		for _, row := range s.NvidiaSMI {
			var cells []string
			for _, k := range keys {
				cells = append(cells, cell(row[k]))
			}
			p("| %s |\n", strings.Join(cells, " | "))
		}
		p("\n")
	}
	if s.Python != "" {
		p("Python: %s\n\n", s.Python)
	}

	p("## Steps\n\n| step | result | seconds | detail |\n|---|---|---|---|\n")
	for _, st := range s.Steps {
		d := st.Detail
		if st.Note != "" && d != "" {
			d = st.Note + "; " + d
		} else if st.Note != "" {
			d = st.Note
		}
		res := status(st.Status)
		if st.Status == "fail" {
			res = fmt.Sprintf("**FAIL** (exit %d)", st.RC)
		}
		p("| %s | %s | %.0f | %s |\n", st.Name, res, st.Seconds, cell(d))
	}
	p("\n")

	if len(s.Bench) > 0 {
		var b benchreport.Report
		if err := json.Unmarshal(s.Bench, &b); err != nil {
			return fmt.Errorf("bench.json: %w", err)
		}
		p("## Measured: `gdrotrain bench --device cuda --gpu-shape %s` (%s)\n\n", b.Shape, s.BenchFrom)
		p("%s, matmul %s; peak %.0f TFLOP/s and %.0f GB/s for MFU and the decode bound. %s.\n\n", b.GPU, b.Matmul, b.PeakTFLOPs, b.BandwidthGBs, b.Baseline)
		if b.Interrupted != "" {
			// A bench cut by its phase's limit, the deadline or a signal
			// wrote the rows it had measured; the others are absent.
			p("**Interrupted**: %s. The rows below were measured; the rows named were not.\n\n", cell(b.Interrupted))
		}
		p("Training (forward + backward of the batch; the optimizer step not included, on either side):\n\n")
		p("| shape | tokens | step s | tok/s | MFU | PyTorch step s | PyTorch tok/s | PyTorch MFU | × |\n|---|---|---|---|---|---|---|---|---|\n")
		for _, t := range b.Train {
			if t.Error != "" {
				p("| %s | %d×%d | – | – | – | %s | %s | %s | – (%s) |\n", t.Name, t.Batch, t.SeqLen, num(t.TorchStepSecs, "%.3f"),
					num(t.TorchTokPerS, "%.0f"), pct(t.TorchMFU), cell(t.Error))
				continue
			}
			p("| %s | %d×%d | %.3f | %.0f | %s | %s | %s | %s | %s |\n", t.Name, t.Batch, t.SeqLen, t.StepSeconds, t.TokPerS, pct(t.MFU),
				num(t.TorchStepSecs, "%.3f"), num(t.TorchTokPerS, "%.0f"), pct(t.TorchMFU), ratio(t.Ratio, t.TorchNote))
		}
		if len(b.Attention) > 0 {
			p("\nThe fused attention alone (TFLOP/s in FlashAttention's count: causal forward 2·B·H·S²·D, backward 2.5×; " +
				"the estimate's assumed rates beside; FA2 on an H100 at 2×8k: 306 / 166, FA3 660 / 474 deterministic):\n\n")
			p("| shape | route | fwd ms | fwd TFLOP/s | bwd ms | bwd TFLOP/s | assumed fwd / bwd |\n|---|---|---|---|---|---|---|\n")
			for _, a := range b.Attention {
				if a.Error != "" {
					p("| %s | %s | – (%s) | – | – | – | %.0f / %.0f |\n", a.Name, a.Route, cell(a.Error), a.AssumedFwdTFLOPs, a.AssumedBwdTFLOPs)
					continue
				}
				p("| %s | %s | %.3f | %.1f | %.3f | %.1f | %.0f / %.0f |\n", a.Name, a.Route, 1e3*a.FwdSeconds, a.FwdTFLOPs,
					1e3*a.BwdSeconds, a.BwdTFLOPs, a.AssumedFwdTFLOPs, a.AssumedBwdTFLOPs)
			}
		}
		p("\nDecode (tokens/s over the batch; %% of the bound of reading the weights and KV cache once a step):\n\n")
		p("| shape | tok/s | %% of bound | PyTorch tok/s | × |\n|---|---|---|---|---|\n")
		for _, d := range b.Decode {
			if d.Error != "" {
				p("| %s | – (%s) | – | %s | – |\n", d.Name, cell(d.Error), num(d.TorchTokPerS, "%.0f"))
				continue
			}
			p("| %s | %.0f | %s | %s | %s |\n", d.Name, d.TokPerS, pct(d.BoundFraction), num(d.TorchTokPerS, "%.0f"), ratio(d.Ratio, d.TorchNote))
		}
		p("\n× = gdrotrain / PyTorch (higher is better).\n\n")
	}

	if len(s.Tests) > 0 {
		p("## Tests\n\n")
		for _, name := range []string{"cuda-tests", "profile-tests", "nccl-tests"} {
			t := s.Tests[name]
			if t == nil {
				continue
			}
			p("**%s**: %d passed, %d failed, %d skipped", name, t.Passed, t.Failed, t.Skipped)
			if t.Device != "" {
				p(" on %s", t.Device)
			}
			p(".\n\n")
			for _, f := range t.Failing {
				p("- FAIL %s\n", f)
			}
			for _, sk := range t.SkippedTests {
				p("- skip %s\n", sk)
			}
			if len(t.Failing)+len(t.SkippedTests) > 0 {
				p("\n")
			}
		}
	}
	if len(s.SelfTestExact) > 0 {
		p("## Exact log-probs: the sampler's whole-vocabulary rows against the trainer's (self-test)\n\n")
		for _, prec := range []string{"fp32", "bf16"} {
			if line, ok := s.SelfTestExact[prec]; ok {
				verdict := "pass"
				if !strings.HasPrefix(line, "0 of ") {
					verdict = "**FAIL**"
				}
				p("- %s: %s: %s\n", prec, verdict, cell(line))
			}
		}
		p("\n")
	}
	writeLines(w, "Our logits against transformers", s.HF, "fp32", "bf16")
	writeLines(w, "The Python ecosystem's readers", s.Checks, "peft", "tensorboard")
	for _, u := range s.Unreadable {
		p("Not summarized (unreadable): %s\n\n", cell(u))
	}
	p("## Files\n\nsummary.json (all of this as JSON), this report, console.log (everything the run printed) and logs.tar.gz " +
		"(every step's log and record: `tar xzf logs.tar.gz`; `gdrotrain kit-report --dir` on the extracted folder makes this report again).\n")
	return nil
}

// status is a status as the tables show it.
func status(s string) string {
	switch s {
	case "fail":
		return "**FAIL**"
	case "cut":
		return "**CUT**"
	}
	return strings.ToUpper(s)
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

// cell makes s fit a table cell: one line, no column bars.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", "/")
	return strings.Join(strings.Fields(s), " ")
}

func num(v float64, format string) string {
	if v == 0 {
		return "–"
	}
	return fmt.Sprintf(format, v)
}

func pct(v float64) string {
	if v == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f %%", 100*v)
}

func ratio(r float64, note string) string {
	if r == 0 {
		if note != "" {
			return "– (PyTorch: " + cell(note) + ")"
		}
		return "–"
	}
	return fmt.Sprintf("%.2f", r)
}

// writeLines writes a section of one JSON line per key of lines, in keys'
// order (nothing when lines is empty).
func writeLines(w io.Writer, title string, lines map[string]any, keys ...string) {
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(w, "## %s\n\n", title)
	for _, k := range keys {
		if v, ok := lines[k]; ok {
			raw, _ := json.Marshal(v)
			fmt.Fprintf(w, "- %s: `%s`\n", k, raw)
		}
	}
	fmt.Fprintln(w)
}
