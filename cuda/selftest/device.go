package selftest

// The self-test a command runs before it opens a GPU.

import (
	"fmt"
	"io"
	"os"

	"github.com/gdrotrain/gdrotrain/cuda"
	devname "github.com/gdrotrain/gdrotrain/device"
)

// ForDevice runs the self-test (Run) when the device name names a GPU (or
// is auto and a GPU is usable), once per process and precision, logging to
// log. Without a GPU it does nothing: opening the backend then says why.
// Every command that opens a device calls it first (launch for training
// and generation ranks, the model commands). exact (a run with
// precision.exact_logprobs) also refuses a failed exact log-probs check,
// which fails no other run (Report.ExactRoute), and keeps its products on
// mma.sync where only those passed it (exactRoute).
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
	if exact {
		return exactRoute(r, log)
	}
	return nil
}

// exactRoute applies the self-test's exact checks to a run in exact mode:
// it refuses the run where no route passed, and where only the mma.sync
// products did, keeps them there for the whole process (ExactWGMMAEnv,
// read by every backend made after this, and inherited by the rank
// processes a launcher starts, so that all of them round alike).
func exactRoute(r *Report, log io.Writer) error {
	mma, err := r.ExactRoute()
	if err != nil {
		return fmt.Errorf("precision.exact_logprobs: %w\n(--skip-self-test runs anyway, at your own risk)", err)
	}
	if mma && os.Getenv(cuda.ExactWGMMAEnv) != "0" {
		if err := os.Setenv(cuda.ExactWGMMAEnv, "0"); err != nil {
			return fmt.Errorf("precision.exact_logprobs: keeping the products on mma.sync (%s=0): %w", cuda.ExactWGMMAEnv, err)
		}
		fmt.Fprintf(log, "precision.exact_logprobs: the sampler and the trainer disagreed on the warpgroup-MMA products and agreed on the mma.sync ones: "+
			"this run's exact products stay on mma.sync (%s=0)\n", cuda.ExactWGMMAEnv)
	}
	return nil
}

// selfTested holds the reports of the precisions this process has
// self-tested.
var selfTested = map[cuda.Precision]*Report{}
