package cuda

// The backend's memory figures through model.MemoryReporter, so the trainer
// plans memory and logs the peak without importing this package.

import "github.com/gdrotrain/gdrotrain/model"

var _ model.MemoryReporter = (*Backend)(nil)

// DeviceName is the GPU's name.
func (b *Backend) DeviceName() string { return b.d.Info.Name }

// MemInfo returns the GPU's free and total memory in bytes.
func (b *Backend) MemInfo() (free, total int64, err error) { return b.d.MemInfo() }

// MemPeak returns the allocator's peak bytes in use since ResetMemPeak,
// plus the peak of the paged KV cache's physical pages (cuMemCreate, not
// the allocator's: vmm.go), which the sampler holds beside its tensors.
func (b *Backend) MemPeak() int64 { return b.d.MemStats().Peak + b.d.drv.n.physPeak.Load() }

// ResetMemPeak restarts both peaks from the bytes in use now.
func (b *Backend) ResetMemPeak() {
	b.d.ResetPeak()
	b.d.drv.n.physPeak.Store(b.d.drv.n.physBytes.Load())
}
