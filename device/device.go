// Package device names where the model runs: device names (cpu, cuda,
// cuda:N, auto) and GPU matrix-product precisions (bf16, tf32, fp32). It is
// plain Go with no cgo, so the configuration and the trainer validate these
// names without linking the CUDA bindings; opening a backend from them is
// package backend's job.
package device

import (
	"fmt"
	"strconv"
	"strings"
)

// Device kinds.
const (
	CPU  = "cpu"  // the float32 reference backend
	CUDA = "cuda" // a GPU (an error where there is none)
	Auto = "auto" // the GPU when one is usable, else the CPU (with a log line)
)

// Parse splits a device name into its kind (CPU, CUDA or Auto) and GPU
// ordinal: cpu, cuda (= cuda:0), cuda:N or auto.
func Parse(s string) (kind string, gpu int, err error) {
	switch {
	case s == CPU || s == Auto || s == CUDA:
		return s, 0, nil
	case strings.HasPrefix(s, CUDA+":"):
		n, err := strconv.Atoi(strings.TrimPrefix(s, CUDA+":"))
		if err != nil || n < 0 {
			return "", 0, fmt.Errorf("device %q: want cpu, cuda, cuda:N or auto", s)
		}
		return CUDA, n, nil
	}
	return "", 0, fmt.Errorf("device %q: want cpu, cuda, cuda:N or auto", s)
}

// Precision is the compute precision of the GPU's matrix products; all
// accumulate in fp32 (the CPU always computes in fp32).
type Precision string

// Matrix-product precisions: inputs rounded to bf16 or tf32 on the tensor
// cores, or full fp32.
const (
	BF16 Precision = "bf16"
	TF32 Precision = "tf32"
	FP32 Precision = "fp32"
)

// ParsePrecision validates a precision name.
func ParsePrecision(s string) (Precision, error) {
	switch p := Precision(s); p {
	case BF16, TF32, FP32:
		return p, nil
	}
	return "", fmt.Errorf("matmul precision %q: want bf16, tf32 or fp32", s)
}
