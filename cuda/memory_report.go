package cuda

// The backend's memory figures through model.MemoryReporter, so the trainer
// plans memory and logs the peak without importing this package.

import "github.com/gdrotrain/gdrotrain/model"

var _ model.MemoryReporter = (*Backend)(nil)

// DeviceName is the GPU's name.
func (b *Backend) DeviceName() string { return b.d.Info.Name }

// MemInfo returns the GPU's free and total memory in bytes.
func (b *Backend) MemInfo() (free, total int64, err error) { return b.d.MemInfo() }

// MemPeak returns the allocator's peak bytes in use since ResetMemPeak.
func (b *Backend) MemPeak() int64 { return b.d.MemStats().Peak }

// ResetMemPeak restarts the allocator's peak from the bytes in use now.
func (b *Backend) ResetMemPeak() { b.d.ResetPeak() }
