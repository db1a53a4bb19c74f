package selftest

// The self-test a command runs before it opens a GPU.

import (
	"fmt"
	"io"

	"github.com/gdrotrain/gdrotrain/cuda"
	devname "github.com/gdrotrain/gdrotrain/device"
)

// ForDevice runs the self-test (Run) when the device name names a GPU (or
// is auto and a GPU is usable), once per process and precision, logging to
// log. Without a GPU it does nothing: opening the backend then says why.
// Every command that opens a device calls it first (launch for training
// and generation ranks, the model commands). exact (a run with
// precision.exact_logprobs) also refuses a failed exact log-probs check,
// which fails no other run (Report.ExactErr).
func ForDevice(name, matmul string, exact, skip bool, log io.Writer) error {
	kind, gpu, err := devname.Parse(name)
	if err != nil || kind == devname.CPU || skip {
		return nil // a bad name is reported by the backend's selection
	}
	prec, err := cuda.ParsePrecision(matmul)
	if err != nil {
		return nil
	}
	d, err := cuda.Open(gpu, func(format string, a ...any) { fmt.Fprintf(log, format+"\n", a...) })
	if err != nil {
		return nil
	}
	r := selfTested[prec]
	if r == nil {
		if r, err = Run(d, prec, nil); err != nil {
			return fmt.Errorf("%w\n(--skip-self-test runs anyway, at your own risk)", err)
		}
		selfTested[prec] = r
		fmt.Fprintln(log, r.Summary())
	}
	if err := r.ExactErr(); exact && err != nil {
		return fmt.Errorf("precision.exact_logprobs: %w\n(--skip-self-test runs anyway, at your own risk)", err)
	}
	return nil
}

// selfTested holds the reports of the precisions this process has
// self-tested.
var selfTested = map[cuda.Precision]*Report{}
