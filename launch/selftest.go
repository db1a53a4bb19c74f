package launch

import (
	"fmt"
	"io"

	"github.com/gdrotrain/gdrotrain/cuda"
	"github.com/gdrotrain/gdrotrain/cuda/selftest"
	"github.com/gdrotrain/gdrotrain/device"
)

// SelfTest runs the GPU self-test when name names a GPU (or is auto and a
// GPU is usable), once per process and precision, logging to log. Without
// a GPU it does nothing: opening the backend then says why.
func SelfTest(name, matmul string, skip bool, log io.Writer) error {
	kind, gpu, err := device.Parse(name)
	if err != nil || kind == device.CPU || skip {
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
	if selfTested[prec] {
		return nil
	}
	r, err := selftest.Run(d, prec, nil)
	if err != nil {
		return fmt.Errorf("%w\n(--skip-self-test runs anyway, at your own risk)", err)
	}
	selfTested[prec] = true
	fmt.Fprintln(log, r.Summary())
	return nil
}

// selfTested records the precisions this process has self-tested.
var selfTested = map[cuda.Precision]bool{}
