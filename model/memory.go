package model

// MemoryReporter is the optional interface of a backend that holds its
// tensors in a device's own memory (the CUDA backend): the trainer plans a
// run against the device's free memory and logs the peak a step held
// through it, without importing the backend's package. The CPU backend
// does not implement it (the trainer reads /proc/meminfo instead).
type MemoryReporter interface {
	// DeviceName names the device in logs (e.g. "NVIDIA H100 80GB HBM3").
	DeviceName() string
	// MemInfo returns the device's free and total memory, in bytes.
	MemInfo() (free, total int64, err error)
	// MemPeak returns the most bytes the backend held at once since the
	// last ResetMemPeak.
	MemPeak() int64
	// ResetMemPeak restarts the peak from the bytes held now.
	ResetMemPeak()
}
