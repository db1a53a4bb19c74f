package cuda

// A Device is one GPU with its libraries, compiled kernels, cuBLAS handle
// and a caching allocator with byte accounting. All work goes to one
// non-blocking stream (stream.go), so every launch, copy and cuBLAS call
// runs in issue order and a scratch buffer may be reused as soon as the
// host has issued the last op that reads it.

import (
	"fmt"
	"sync"
	"time"
)

// Info describes the device in hand.
type Info struct {
	Name                  string
	Ordinal               int
	Major, Minor          int
	SMs                   int
	TotalBytes            int64
	DriverVersion         int
	NVRTCVersion          string
	CublasVersion         int
	CudaLib, NVRTCLib     string
	CublasLib, KernelsDir string
	// Where each library was found (libs.go): GDROTRAIN_CUDA_LIB_DIR, the
	// dynamic linker, a pip wheel or a toolkit folder.
	CudaFrom, NVRTCFrom, CublasFrom string
	Devices                         int // GPUs visible to this process
	// What the kernels were compiled to (arch.go): sm_90a, sm_80, or
	// compute_90 (PTX) on a GPU the NVRTC at hand does not know, where
	// KernelsPTX is set and architecture-specific kernels are not used.
	KernelTarget string
	KernelsPTX   bool
}

// HasWGMMA reports whether the warpgroup-MMA kernels (sm_90a code) run
// here: a compute capability 9.0 device whose kernels were compiled for
// sm_90a, not PTX.
func (i Info) HasWGMMA() bool { return i.Major == 9 && i.Minor == 0 && !i.KernelsPTX }

func (i Info) String() string {
	return fmt.Sprintf("%s (GPU %d, sm_%d%d, %d SMs, %.1f GiB; driver %d.%d, NVRTC %s, cuBLAS %d)",
		i.Name, i.Ordinal, i.Major, i.Minor, i.SMs, float64(i.TotalBytes)/(1<<30),
		i.DriverVersion/1000, i.DriverVersion%1000/10, i.NVRTCVersion, i.CublasVersion)
}

// Device is an opened GPU.
type Device struct {
	Info  Info
	drv   *driver
	blas  *cublas
	funcs map[string]*function
	alloc *allocator

	countMu  sync.Mutex
	launches map[string]int // per kernel, for tests and profiles
	prof     profiler
	stream   *Stream // every op of the device runs on it (stream.go)
	stage    staging
	// rec, while a graph step runs (graph.go), fingerprints every op and,
	// when replaying, keeps ops from being issued.
	rec *recorder
}

var (
	openMu sync.Mutex
	opened *Device
)

// Open loads the CUDA libraries, opens GPU ordinal and compiles (or loads
// from the cache) every kernel. One process drives one GPU; a second Open of
// the same ordinal returns the same Device. logf receives progress lines.
func Open(ordinal int, logf func(string, ...any)) (*Device, error) {
	openMu.Lock()
	defer openMu.Unlock()
	if opened != nil {
		if opened.Info.Ordinal != ordinal {
			return nil, fmt.Errorf("cuda: GPU %d already in use by this process; one process drives one GPU", opened.Info.Ordinal)
		}
		return opened, nil
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	d, err := open(ordinal, logf)
	if err != nil {
		return nil, err
	}
	opened = d
	return d, nil
}

func open(ordinal int, logf func(string, ...any)) (*Device, error) {
	lib, err := openLibrary("cuda", 0)
	if err != nil {
		return nil, err
	}
	drv, err := loadDriver(lib)
	if err != nil {
		return nil, fmt.Errorf("%s is not a usable CUDA driver: %w", lib.path, err)
	}
	if err := drv.Init(); err != nil {
		return nil, err
	}
	n, err := drv.DeviceCount()
	if err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("cuda: GPU %d requested but %d visible (check CUDA_VISIBLE_DEVICES)", ordinal, n)
	}
	dev, err := drv.Device(ordinal)
	if err != nil {
		return nil, err
	}
	d := &Device{drv: drv, funcs: map[string]*function{}, launches: map[string]int{}}
	d.Info.Ordinal, d.Info.CudaLib, d.Info.CudaFrom, d.Info.Devices = ordinal, lib.path, lib.from, n
	if err := d.readInfo(dev); err != nil {
		return nil, err
	}
	if err := drv.UsePrimaryContext(dev); err != nil {
		return nil, err
	}
	d.alloc = newAllocator(drv)
	if err := d.initStream(); err != nil {
		return nil, err
	}
	if err := d.loadCublas(); err != nil {
		return nil, err
	}
	if err := d.blas.SetStream(d.stream); err != nil {
		return nil, err
	}
	if err := d.loadKernels(logf); err != nil {
		return nil, err
	}
	logf("cuda: %s", d.Info)
	return d, nil
}

func (d *Device) readInfo(dev int) error {
	var err error
	get := func(attr int) int {
		v, e := d.drv.Attribute(dev, attr)
		if err == nil {
			err = e
		}
		return v
	}
	d.Info.Major, d.Info.Minor, d.Info.SMs = get(attrCCMajor), get(attrCCMinor), get(attrMultiprocessors)
	if err != nil {
		return err
	}
	if d.Info.Name, err = d.drv.DeviceName(dev); err != nil {
		return err
	}
	if d.Info.TotalBytes, err = d.drv.TotalMem(dev); err != nil {
		return err
	}
	d.Info.DriverVersion, err = d.drv.Version()
	return err
}

func (d *Device) loadCublas() error {
	lib, err := openLibrary("cublas", maxCudaMajor(d.Info.DriverVersion))
	if err != nil {
		return err
	}
	if d.blas, err = loadCublas(lib); err != nil {
		return err
	}
	d.Info.CublasLib, d.Info.CublasFrom = lib.path, lib.from
	d.Info.CublasVersion, err = d.blas.Version()
	return err
}

func (d *Device) loadKernels(logf func(string, ...any)) error {
	lib, err := openLibrary("nvrtc", maxCudaMajor(d.Info.DriverVersion))
	if err != nil {
		return err
	}
	nv, err := loadNVRTC(lib)
	if err != nil {
		return err
	}
	c, err := newCompiler(nv, logf)
	if err != nil {
		return err
	}
	d.Info.NVRTCLib, d.Info.NVRTCFrom, d.Info.NVRTCVersion, d.Info.KernelsDir = lib.path, lib.from, c.version, c.cacheDir
	t, err := c.plan(d.Info.Major, d.Info.Minor)
	if err != nil {
		return err
	}
	d.Info.KernelTarget, d.Info.KernelsPTX = t.String(), t.ptx
	start := time.Now()
	srcs := Sources()
	for _, name := range sortedNames(srcs) {
		img, err := c.compile(name, srcs[name], d.Info.Major, d.Info.Minor)
		if err != nil {
			return err
		}
		mod, err := d.drv.LoadModule(img)
		if err != nil {
			return fmt.Errorf("load kernels/%s: %w", name, err)
		}
		for _, k := range KernelNames(srcs[name]) {
			if d.funcs[k], err = d.drv.Function(mod, k); err != nil {
				return err
			}
		}
	}
	logf("cuda: %d kernels ready for %s in %s (cache %s)", len(d.funcs), t, time.Since(start).Round(time.Millisecond), c.cacheDir)
	return nil
}

// launch runs kernel name over grid × block threads.
func (d *Device) launch(name string, grid [3]int, block int, args ...any) error {
	f, ok := d.funcs[name]
	if !ok {
		return fmt.Errorf("cuda: no kernel %q", name)
	}
	for i := range grid {
		if grid[i] == 0 {
			grid[i] = 1
		}
	}
	if d.rec != nil {
		d.rec.str(name)
		for _, a := range args {
			d.rec.arg(a)
		}
		if !d.rec.op("launch", uint64(grid[0]), uint64(grid[1]), uint64(grid[2]), uint64(block)) {
			return nil // a graph node, replayed by the graph
		}
	}
	d.countMu.Lock()
	d.launches[name]++
	d.countMu.Unlock()
	return d.drv.Launch(f, grid, [3]int{block, 1, 1}, d.stream, args...)
}

// Launches returns how many times each kernel has been launched.
func (d *Device) Launches() map[string]int {
	d.countMu.Lock()
	defer d.countMu.Unlock()
	out := make(map[string]int, len(d.launches))
	for k, v := range d.launches {
		out[k] = v
	}
	return out
}

// MemStats reports the allocator's accounting.
func (d *Device) MemStats() MemStats { return d.alloc.stats() }

// ResetPeak restarts the peak from the bytes in use now.
func (d *Device) ResetPeak() {
	d.alloc.mu.Lock()
	d.alloc.peak = d.alloc.inUse
	d.alloc.mu.Unlock()
}

// ReleaseCache gives the allocator's idle blocks back to the driver (the
// step profile starts each depth from an empty cache; the benchmark frees
// what a failed measurement left).
func (d *Device) ReleaseCache() { d.alloc.release() }

// MemInfo reports the driver's free and total device memory.
func (d *Device) MemInfo() (free, total int64, err error) { return d.drv.MemInfo() }

// MemStats is the allocator's accounting: bytes held by live buffers, their
// peak and the pool's idle bytes; Live counts live buffers and Leaked the
// buffers the garbage collector returned because nobody released them.
type MemStats struct {
	InUse, Peak, Cached int64
	Live, Leaked        int64
}

// allocator is a stream-ordered pool: released blocks wait in free lists by
// (rounded) size and serve the next request of that size. A training step
// allocates and releases the same shapes in the same order every time, so
// after the first step nothing reaches cuMemAlloc (the step profile checks
// it). With one stream, a block released once the host has issued the last
// op that reads it can be handed out at once: the ops of its next owner run
// after those. When cuMemAlloc reports the device full, the pool's idle
// blocks are freed and the request is tried once more; then the error names
// the config keys that bound memory.
type allocator struct {
	mu                  sync.Mutex
	drv                 *driver
	free                map[int64][]uint64
	inUse, peak, cached int64
	live, leaked        int64
	pending             [][2]int64 // leaked blocks (address, size) waiting for a synchronisation
}

// roundSize rounds a request up so nearby sizes share cache entries.
func roundSize(bytes int64) int64 {
	const small = 512
	if bytes <= 1<<20 {
		return (bytes + small - 1) / small * small
	}
	const big = 2 << 20
	return (bytes + big - 1) / big * big
}

func newAllocator(drv *driver) *allocator { return &allocator{drv: drv, free: map[int64][]uint64{}} }

// hit takes a cached block of bytes, reporting false where none is idle
// (a graph's capture and replays may not allocate).
func (a *allocator) hit(bytes int64) (uint64, int64, bool) {
	size := roundSize(max(bytes, 1))
	a.mu.Lock()
	defer a.mu.Unlock()
	l := a.free[size]
	if len(l) == 0 {
		return 0, 0, false
	}
	p := l[len(l)-1]
	a.free[size] = l[:len(l)-1]
	a.cached -= size
	a.used(size)
	return p, size, true
}

func (a *allocator) get(bytes int64) (uint64, int64, error) {
	size := roundSize(max(bytes, 1))
	a.mu.Lock()
	if l := a.free[size]; len(l) > 0 {
		p := l[len(l)-1]
		a.free[size] = l[:len(l)-1]
		a.cached -= size
		a.used(size)
		a.mu.Unlock()
		return p, size, nil
	}
	a.mu.Unlock()
	p, err := a.drv.MemAlloc(size)
	if isOOM(err) {
		// Blocks of other sizes may be idle in the pool: free them, and
		// try once more.
		a.release()
		p, err = a.drv.MemAlloc(size)
	}
	if err != nil {
		st := a.stats()
		hint := ""
		if isOOM(err) {
			hint = "; lower train.micro_batch_rows, sampling.max_slots or sampling.max_new_tokens, or page the KV cache with sampling.kv_cache_gib (gdrotrain train --dry-run shows the plan)"
		}
		return 0, 0, fmt.Errorf("%w (gdrotrain holds %.2f GiB in tensors, peak %.2f GiB%s)", err,
			float64(st.InUse)/(1<<30), float64(st.Peak)/(1<<30), hint)
	}
	a.mu.Lock()
	a.used(size)
	a.mu.Unlock()
	return p, size, nil
}

func (a *allocator) used(size int64) {
	a.inUse += size
	a.live++
	a.peak = max(a.peak, a.inUse)
}

func (a *allocator) put(p uint64, size int64) {
	a.mu.Lock()
	a.free[size] = append(a.free[size], p)
	a.inUse -= size
	a.live--
	a.cached += size
	a.mu.Unlock()
}

// leak takes back a buffer the garbage collector found unreleased. The
// block is not reused at once: a tensor can become unreachable while the
// op it was passed to is still running (the op holds only its raw
// address, and may allocate after its last use of the Go value), so a
// block handed out again within that op could be overwritten before the op
// has issued its last read of it. It waits in pending until the next
// stream synchronisation (flushLeaks), when every op that had it has
// returned and everything they issued has run.
func (a *allocator) leak(p uint64, size int64) {
	a.mu.Lock()
	a.pending = append(a.pending, [2]int64{int64(p), size})
	a.leaked++
	a.mu.Unlock()
}

// flushLeaks returns the blocks leak took back to the pool (at a stream
// synchronisation).
func (a *allocator) flushLeaks() {
	a.mu.Lock()
	pending := a.pending
	a.pending = nil
	a.mu.Unlock()
	for _, b := range pending {
		a.put(uint64(b[0]), b[1])
	}
}

// release frees every cached block.
func (a *allocator) release() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for size, l := range a.free {
		for _, p := range l {
			if a.drv.MemFree(p) == nil {
				a.cached -= size
			}
		}
		delete(a.free, size)
	}
}

func (a *allocator) stats() MemStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return MemStats{InUse: a.inUse, Peak: a.peak, Cached: a.cached, Live: a.live, Leaked: a.leaked}
}

func isOOM(err error) bool {
	e, ok := err.(*Error)
	return ok && e.Code == errOutOfMemory
}
