package cuda

// Choosing a backend from a --device / run.device value: cpu, cuda,
// cuda:N or auto (the GPU when one is present, else the CPU with a log line).

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gdrotrain/gdrotrain/model"
)

// ParseDevice splits a device name into its kind (cpu, cuda, auto) and GPU
// ordinal.
func ParseDevice(s string) (kind string, gpu int, err error) {
	switch {
	case s == "cpu" || s == "auto" || s == "cuda":
		return s, 0, nil
	case strings.HasPrefix(s, "cuda:"):
		n, err := strconv.Atoi(strings.TrimPrefix(s, "cuda:"))
		if err != nil || n < 0 {
			return "", 0, fmt.Errorf("device %q: want cpu, cuda, cuda:N or auto", s)
		}
		return "cuda", n, nil
	}
	return "", 0, fmt.Errorf("device %q: want cpu, cuda, cuda:N or auto", s)
}

// SelectBackend opens the backend a device name asks for; prec is the
// matrix-product precision on the GPU. logf receives the choice.
func SelectBackend(device, prec string, logf func(string, ...any)) (model.Backend, error) {
	kind, gpu, err := ParseDevice(device)
	if err != nil {
		return nil, err
	}
	p, err := ParsePrecision(prec)
	if err != nil {
		return nil, err
	}
	if kind == "cpu" {
		return model.NewCPU(), nil
	}
	d, err := Open(gpu, logf)
	if err != nil {
		if kind == "auto" && IsNoGPU(err) {
			logf("device auto: no GPU usable here (%v); using the CPU backend", err)
			return model.NewCPU(), nil
		}
		return nil, fmt.Errorf("device %s: %w", device, err)
	}
	return NewBackend(d, p), nil
}
