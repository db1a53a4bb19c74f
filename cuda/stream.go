package cuda

// One non-blocking stream carries every launch, product, memset and copy
// of a device, so the GPU runs them back to back in issue order and the
// host waits only where it needs a value (a download). Host data goes
// through a page-locked staging buffer: an upload is copied into it and
// queued asynchronously, so it neither blocks the host nor drains the GPU
// as a copy from pageable memory does.
//
// The staging buffer is used front to back: a region written for an
// upload is not written again until the stream has been synchronised (by a
// download, or when the buffer is full), so no queued copy ever reads a
// region the host has reused. Buffers freed to the allocator's cache may
// be handed out again at once: every op that could still read them is
// queued before, on the same stream.

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"sync"
	"unsafe"
)

// StagingEnv sets the page-locked staging buffer's size in MiB (default 64).
const StagingEnv = "GDROTRAIN_STAGING_MIB"

// staging is the page-locked host buffer between Go memory and the device.
type staging struct {
	mu   sync.Mutex
	base unsafe.Pointer
	size int64
	off  int64 // bytes handed out since the last synchronisation
}

// initStream creates the device's stream, points cuBLAS at it and
// allocates the staging buffer.
func (d *Device) initStream() error {
	s, err := d.drv.NewStream()
	if err != nil {
		return err
	}
	d.stream = s
	mib := int64(64)
	if v, err := strconv.ParseInt(os.Getenv(StagingEnv), 10, 64); err == nil && v > 0 {
		mib = v
	}
	d.stage.size = mib << 20
	if d.stage.base, err = d.drv.HostAlloc(d.stage.size); err != nil {
		return fmt.Errorf("page-locked staging buffer of %d MiB (%s): %w", mib, StagingEnv, err)
	}
	return nil
}

// region returns n bytes of staging, synchronising the stream first when
// the buffer is used up. Call with d.stage.mu held.
func (d *Device) region(n int64) (unsafe.Pointer, error) {
	if d.stage.off+n > d.stage.size {
		if err := d.syncLocked(); err != nil {
			return nil, err
		}
	}
	p := unsafe.Add(d.stage.base, d.stage.off)
	d.stage.off += (n + 255) &^ 255
	return p, nil
}

// syncLocked waits for the stream and frees the whole staging buffer. Call
// with d.stage.mu held.
func (d *Device) syncLocked() error {
	if d.rec != nil {
		return notCapturable("a host synchronisation")
	}
	d.stage.off = 0
	return d.drv.StreamSync(d.stream)
}

// Synchronize waits for all issued work (a host sync).
func (d *Device) Synchronize() error {
	d.stage.mu.Lock()
	defer d.stage.mu.Unlock()
	if err := d.syncLocked(); err != nil {
		return err
	}
	d.alloc.flushLeaks() // between ops: see allocator.leak
	return nil
}

// copyIn queues a copy of bytes of host memory src (Go memory, read before
// copyIn returns) to dst, through the staging buffer.
func (d *Device) copyIn(dst uint64, src unsafe.Pointer, bytes int64) error {
	if d.rec != nil {
		return notCapturable("a copy from Go memory")
	}
	return d.staged(bytes, func(p unsafe.Pointer, off, n int64) error {
		copy(unsafe.Slice((*byte)(p), n), unsafe.Slice((*byte)(unsafe.Add(src, off)), n))
		return d.drv.HtoDAsync(dst+uint64(off), p, n, d.stream)
	})
}

// copyOut copies bytes from src to host memory dst, waiting for the stream
// (every queued op that writes src) first: the one place the host waits.
func (d *Device) copyOut(dst unsafe.Pointer, src uint64, bytes int64) error {
	if d.rec != nil {
		return notCapturable("a download")
	}
	return d.staged(bytes, func(p unsafe.Pointer, off, n int64) error {
		if err := d.drv.DtoHAsync(p, src+uint64(off), n, d.stream); err != nil {
			return err
		}
		if err := d.syncLocked(); err != nil {
			return err
		}
		// A download ends the op that asks for it (the host needs the
		// value to go on), so leaked blocks may serve the next ops.
		d.alloc.flushLeaks()
		copy(unsafe.Slice((*byte)(unsafe.Add(dst, off)), n), unsafe.Slice((*byte)(p), n))
		return nil
	})
}

// staged runs f over bytes in pieces of at most the staging buffer's size,
// each with its region of the buffer (p) and its offset, the buffer's lock
// held throughout.
func (d *Device) staged(bytes int64, f func(p unsafe.Pointer, off, n int64) error) error {
	d.stage.mu.Lock()
	defer d.stage.mu.Unlock()
	for done := int64(0); done < bytes; {
		n := min(bytes-done, d.stage.size)
		p, err := d.region(n)
		if err != nil {
			return err
		}
		if err := f(p, done, n); err != nil {
			return err
		}
		done += n
	}
	return nil
}

// memset32 queues a fill of n 32-bit words at dst.
func (d *Device) memset32(dst uint64, v uint32, n int64) error {
	if d.rec != nil && !d.rec.op("memset32", dst, uint64(v), uint64(n)) {
		return nil
	}
	return d.drv.MemsetD32Async(dst, v, n, d.stream)
}

// copyDevice queues a device-to-device copy.
func (d *Device) copyDevice(dst, src uint64, bytes int64) error {
	if d.rec != nil && !d.rec.op("d2d", dst, src, uint64(bytes)) {
		return nil
	}
	return d.drv.DtoDAsync(dst, src, bytes, d.stream)
}

// gemm is cublas.Gemm on the device's stream, fingerprinted in a graph step.
func (d *Device) gemm(transA, transB bool, m, n, k int, alpha float32, A uint64, aType, lda int,
	B uint64, bType, ldb int, beta float32, Cm uint64, cType, ldc, compute int) error {
	if d.rec != nil && !d.rec.op("gemm", b2u(transA), b2u(transB), uint64(m), uint64(n), uint64(k),
		uint64(math.Float32bits(alpha)), A, uint64(aType), uint64(lda), B, uint64(bType), uint64(ldb),
		uint64(math.Float32bits(beta)), Cm, uint64(cType), uint64(ldc), uint64(compute)) {
		return nil
	}
	return d.blas.Gemm(transA, transB, m, n, k, alpha, A, aType, lda, B, bType, ldb, beta, Cm, cType, ldc, compute)
}

// gemmBatched is cublas.GemmBatched, fingerprinted in a graph step.
func (d *Device) gemmBatched(transA, transB bool, m, n, k int, alpha float32, A uint64, aType, lda int, strideA int64,
	B uint64, bType, ldb int, strideB int64, beta float32, Cm uint64, cType, ldc int, strideC int64, batch, compute int) error {
	if d.rec != nil && !d.rec.op("gemm_batched", b2u(transA), b2u(transB), uint64(m), uint64(n), uint64(k),
		uint64(math.Float32bits(alpha)), A, uint64(aType), uint64(lda), uint64(strideA), B, uint64(bType), uint64(ldb),
		uint64(strideB), uint64(math.Float32bits(beta)), Cm, uint64(cType), uint64(ldc), uint64(strideC), uint64(batch), uint64(compute)) {
		return nil
	}
	return d.blas.GemmBatched(transA, transB, m, n, k, alpha, A, aType, lda, strideA, B, bType, ldb, strideB, beta,
		Cm, cType, ldc, strideC, batch, compute)
}

func b2u(v bool) uint64 {
	if v {
		return 1
	}
	return 0
}
