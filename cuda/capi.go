package cuda

// The cgo shim: dlopen/dlsym plus one typed trampoline per CUDA entry point
// we call. Prototypes are our own, written from the public API documentation
// (no CUDA headers at build time), so the binary builds anywhere and loads
// whatever CUDA 12 or 13 libraries the node has (docs/architecture.md decision 2).
//
// Handles are opaque pointers, CUdeviceptr is a 64-bit integer, every status
// is an int; the Go side turns non-zero statuses into errors naming the call.

/*
#cgo LDFLAGS: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include "shim.h"

static void* gd_dlopen(const char* path) { return dlopen(path, RTLD_NOW | RTLD_LOCAL); }
static const char* gd_dlerror(void) { return dlerror(); }
static void* gd_dlsym(void* lib, const char* name) { return dlsym(lib, name); }
static int gd_dlclose(void* lib) { return dlclose(lib); }
// gd_dlpath returns the file the dynamic linker mapped for lib (its search
// result for a bare name), or NULL.
static const char* gd_dlpath(void* lib) {
	struct link_map* lm = NULL;
	if (dlinfo(lib, RTLD_DI_LINKMAP, &lm) != 0 || lm == NULL) return NULL;
	return lm->l_name;
}

// The context is made current lazily on each OS thread that calls in, since
// Go moves goroutines between threads; one device per process.
static handle gd_ctx;
static void* gd_set_current;
static __thread int gd_bound;
static void gd_set_context(handle ctx, void* setCurrent) { gd_ctx = ctx; gd_set_current = setCurrent; }
static int gd_bind(void) {
	if (gd_bound || gd_ctx == NULL) return 0;
	int rc = ((pf_cuCtxSetCurrent)gd_set_current)(gd_ctx);
	if (rc == 0) gd_bound = 1;
	return rc;
}
#define BIND do { int rc_ = gd_bind(); if (rc_) return rc_; } while (0)

// ---- driver API (prototypes in shim.h) ----
static int cu_init(void* f, unsigned a) { return ((pf_cuInit)f)(a); }
static int cu_pi(void* f, int* a) { return ((pf_cuDriverGetVersion)f)(a); } // also cuDeviceGetCount
static int cu_device(void* f, int* a, int b) { return ((pf_cuDeviceGet)f)(a, b); }
static int cu_name(void* f, char* s, int n, int dev) { return ((pf_cuDeviceGetName)f)(s, n, dev); }
static int cu_attr(void* f, int* v, int attr, int dev) { return ((pf_cuDeviceGetAttribute)f)(v, attr, dev); }
static int cu_totalmem(void* f, size_t* v, int dev) { return ((pf_cuDeviceTotalMem_v2)f)(v, dev); }
static int cu_ctx_retain(void* f, handle* ctx, int dev) { return ((pf_cuDevicePrimaryCtxRetain)f)(ctx, dev); }
static int cu_event(void* f, handle h) { BIND; return ((pf_cuEventSynchronize)f)(h); } // also cuEventDestroy_v2
static int cu_sync(void* f) { BIND; return ((pf_cuCtxSynchronize)f)(); }
static int cu_alloc(void* f, devptr* p, size_t n) { BIND; return ((pf_cuMemAlloc_v2)f)(p, n); }
static int cu_free(void* f, devptr p) { BIND; return ((pf_cuMemFree_v2)f)(p); }
static int cu_meminfo(void* f, size_t* fr, size_t* tot) { BIND; return ((pf_cuMemGetInfo_v2)f)(fr, tot); }
static int cu_htod(void* f, devptr d, const void* s, size_t n) { BIND; return ((pf_cuMemcpyHtoD_v2)f)(d, s, n); }
static int cu_dtoh(void* f, void* d, devptr s, size_t n) { BIND; return ((pf_cuMemcpyDtoH_v2)f)(d, s, n); }
static int cu_dtod(void* f, devptr d, devptr s, size_t n) { BIND; return ((pf_cuMemcpyDtoD_v2)f)(d, s, n); }
static int cu_memset32(void* f, devptr d, unsigned v, size_t n) { BIND; return ((pf_cuMemsetD32_v2)f)(d, v, n); }
static int cu_host_alloc(void* f, void** p, size_t n) { BIND; return ((pf_cuMemHostAlloc)f)(p, n, 0); }
static int cu_host_free(void* f, void* p) { BIND; return ((pf_cuMemFreeHost)f)(p); }
static int cu_stream_create(void* f, handle* s, unsigned flags) { BIND; return ((pf_cuStreamCreate)f)(s, flags); }
static int cu_stream_sync(void* f, handle s) { BIND; return ((pf_cuStreamSynchronize)f)(s); }
static int cu_htod_async(void* f, devptr d, const void* s, size_t n, handle st) { BIND; return ((pf_cuMemcpyHtoDAsync_v2)f)(d, s, n, st); }
static int cu_dtoh_async(void* f, void* d, devptr s, size_t n, handle st) { BIND; return ((pf_cuMemcpyDtoHAsync_v2)f)(d, s, n, st); }
static int cu_dtod_async(void* f, devptr d, devptr s, size_t n, handle st) { BIND; return ((pf_cuMemcpyDtoDAsync_v2)f)(d, s, n, st); }
static int cu_memset32_async(void* f, devptr d, unsigned v, size_t n, handle st) { BIND; return ((pf_cuMemsetD32Async)f)(d, v, n, st); }
static int cu_event_create(void* f, handle* h, unsigned flags) { BIND; return ((pf_cuEventCreate)f)(h, flags); }
static int cu_record(void* f, handle ev, handle st) { BIND; return ((pf_cuEventRecord)f)(ev, st); }
static int cu_elapsed(void* f, float* ms, handle a, handle b) { BIND; return ((pf_cuEventElapsedTime)f)(ms, a, b); }
static int cu_modload(void* f, handle* m, const void* img) { BIND; return ((pf_cuModuleLoadData)f)(m, img); }
static int cu_getfunc(void* f, handle* fn, handle m, const char* name) { BIND; return ((pf_cuModuleGetFunction)f)(fn, m, name); }
static int cu_launch(void* f, handle fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                     unsigned smem, handle st, void** params) {
	BIND;
	return ((pf_cuLaunchKernel)f)(fn, gx, gy, gz, bx, by, bz, smem, st, params, NULL);
}
static int cu_begin_capture(void* f, handle st, int mode) { BIND; return ((pf_cuStreamBeginCapture_v2)f)(st, mode); }
static int cu_end_capture(void* f, handle st, handle* g) { BIND; return ((pf_cuStreamEndCapture)f)(st, g); }
static int cu_is_capturing(void* f, handle st, int* status) { BIND; return ((pf_cuStreamIsCapturing)f)(st, status); }
static int cu_instantiate(void* f, handle* x, handle g) { BIND; return ((pf_cuGraphInstantiateWithFlags)f)(x, g, 0); }
static int cu_graph_launch(void* f, handle x, handle st) { BIND; return ((pf_cuGraphLaunch)f)(x, st); }
static int cu_graph_free(void* f, handle h) { BIND; return ((pf_cuGraphDestroy)f)(h); } // also cuGraphExecDestroy
// Virtual memory management: one device's pinned memory, read-write.
static void gd_mem_prop_init(gd_mem_prop* p, int dev) {
	memset(p, 0, sizeof *p);
	p->type = GD_CU_MEM_ALLOCATION_TYPE_PINNED;
	p->requestedHandleTypes = GD_CU_MEM_HANDLE_TYPE_NONE;
	p->location.type = GD_CU_MEM_LOCATION_TYPE_DEVICE;
	p->location.id = dev;
}
static int cu_mem_granularity(void* f, size_t* g, int dev) {
	BIND;
	gd_mem_prop p;
	gd_mem_prop_init(&p, dev);
	return ((pf_cuMemGetAllocationGranularity)f)(g, &p, GD_CU_MEM_ALLOC_GRANULARITY_MINIMUM);
}
static int cu_mem_reserve(void* f, devptr* p, size_t size, size_t align) {
	BIND;
	return ((pf_cuMemAddressReserve)f)(p, size, align, 0, 0);
}
static int cu_mem_addr_free(void* f, devptr p, size_t size) { BIND; return ((pf_cuMemAddressFree)f)(p, size); }
static int cu_mem_create(void* f, gd_u64* h, size_t size, int dev) {
	BIND;
	gd_mem_prop p;
	gd_mem_prop_init(&p, dev);
	return ((pf_cuMemCreate)f)(h, size, &p, 0);
}
static int cu_mem_release(void* f, gd_u64 h) { BIND; return ((pf_cuMemRelease)f)(h); }
static int cu_mem_map(void* f, devptr p, size_t size, gd_u64 h) { BIND; return ((pf_cuMemMap)f)(p, size, 0, h, 0); }
static int cu_mem_unmap(void* f, devptr p, size_t size) { BIND; return ((pf_cuMemUnmap)f)(p, size); }
static int cu_mem_access(void* f, devptr p, size_t size, int dev) {
	BIND;
	gd_mem_access a;
	memset(&a, 0, sizeof a);
	a.location.type = GD_CU_MEM_LOCATION_TYPE_DEVICE;
	a.location.id = dev;
	a.flags = GD_CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	return ((pf_cuMemSetAccess)f)(p, size, &a, 1);
}
static int cu_errstr(void* f, int code, const char** s) { return ((pf_cuGetErrorName)f)(code, s); } // also cuGetErrorString

// ---- NVRTC ----
static int nv_version(void* f, int* a, int* b) { return ((pf_nvrtcVersion)f)(a, b); }
static const char* nv_errstr(void* f, int code) { return ((pf_nvrtcGetErrorString)f)(code); }
static int nv_create(void* f, handle* p, const char* src, const char* name) {
	return ((pf_nvrtcCreateProgram)f)(p, src, name, 0, NULL, NULL);
}
static int nv_compile(void* f, handle p, int n, const char** opts) { return ((pf_nvrtcCompileProgram)f)(p, n, (const char* const*)opts); }
static int nv_size(void* f, handle p, size_t* n) { return ((pf_nvrtcGetSize)f)(p, n); }
static int nv_get(void* f, handle p, char* out) { return ((pf_nvrtcGetText)f)(p, out); }
static int nv_destroy(void* f, handle* p) { return ((pf_nvrtcDestroyProgram)f)(p); }
static int nv_num_archs(void* f, int* n) { return ((pf_nvrtcGetNumSupportedArchs)f)(n); }
static int nv_archs(void* f, int* out) { return ((pf_nvrtcGetSupportedArchs)f)(out); }

// ---- cuBLAS ----
static int cb_create(void* f, handle* h) { BIND; return ((pf_cublasCreate_v2)f)(h); }
static int cb_version(void* f, handle h, int* v) { return ((pf_cublasGetVersion_v2)f)(h, v); }
static int cb_set_stream(void* f, handle h, handle s) { BIND; return ((pf_cublasSetStream_v2)f)(h, s); }
static int cb_gemm_batched(void* f, handle h, int ta, int tb, int m, int n, int k, const float* alpha,
                           devptr A, int at, int lda, long long sa, devptr B, int bt, int ldb, long long sb,
                           const float* beta, devptr C, int ct, int ldc, long long sc, int batch, int compute, int algo) {
	BIND;
	return ((pf_cublasGemmStridedBatchedEx)f)(h, ta, tb, m, n, k, alpha, (const void*)A, at, lda, sa, (const void*)B, bt,
	                                          ldb, sb, beta, (void*)C, ct, ldc, sc, batch, compute, algo);
}
static int cb_gemm(void* f, handle h, int ta, int tb, int m, int n, int k, const float* alpha,
                   devptr A, int at, int lda, devptr B, int bt, int ldb, const float* beta,
                   devptr C, int ct, int ldc, int compute, int algo) {
	BIND;
	return ((pf_cublasGemmEx)f)(h, ta, tb, m, n, k, alpha, (const void*)A, at, lda, (const void*)B, bt, ldb, beta,
	                            (void*)C, ct, ldc, compute, algo);
}

// ---- NCCL ----
// A failing call copies ncclGetLastError into last on the thread that made
// it (NCCL may keep the message per thread).
#define NC_LAST(rc, comm) do { if ((rc) != 0 && last) gd_nc_last(lastf, (comm), last, lastn); } while (0)
static void gd_nc_last(void* f, handle comm, char* buf, int n) {
	const char* s = f ? ((pf_ncclGetLastError)f)(comm) : NULL;
	buf[0] = 0;
	if (s) { strncpy(buf, s, n - 1); buf[n - 1] = 0; }
}
static int cu_stream_query(void* f, handle s) { BIND; return ((pf_cuStreamQuery)f)(s); }
static int nc_version(void* f, int* v) { return ((pf_ncclGetVersion)f)(v); }
static const char* nc_errstr(void* f, int rc) { return ((pf_ncclGetErrorString)f)(rc); }
static int nc_unique_id(void* f, gd_nccl_id* id, void* lastf, char* last, int lastn) {
	int rc = ((pf_ncclGetUniqueId)f)(id);
	NC_LAST(rc, NULL);
	return rc;
}
static int nc_init(void* f, handle* comm, int n, const gd_nccl_id* id, int rank, void* lastf, char* last, int lastn) {
	BIND;
	int rc = ((pf_ncclCommInitRank)f)(comm, n, *id, rank);
	NC_LAST(rc, NULL);
	return rc;
}
static int nc_comm(void* f, handle comm, void* lastf, char* last, int lastn) { // ncclCommDestroy, ncclCommAbort
	BIND;
	int rc = ((pf_ncclCommDestroy)f)(comm);
	NC_LAST(rc, NULL);
	return rc;
}
static int nc_async(void* f, handle comm, int* err) { return ((pf_ncclCommGetAsyncError)f)(comm, err); }
// nc_coll runs one collective: kind 0 all-reduce (sum), 1 reduce-scatter
// (sum), 2 all-gather, 3 broadcast; count is per rank for 1 and 2.
static int nc_coll(void* f, int kind, devptr send, devptr recv, size_t count, int type, int root, handle comm,
                   handle stream, void* lastf, char* last, int lastn) {
	BIND;
	const void* s = (const void*)send;
	void* r = (void*)recv;
	int rc;
	switch (kind) {
	case 0: rc = ((pf_ncclAllReduce)f)(s, r, count, type, GD_ncclSum, comm, stream); break;
	case 1: rc = ((pf_ncclReduceScatter)f)(s, r, count, type, GD_ncclSum, comm, stream); break;
	case 2: rc = ((pf_ncclAllGather)f)(s, r, count, type, comm, stream); break;
	default: rc = ((pf_ncclBroadcast)f)(s, r, count, type, root, comm, stream); break;
	}
	NC_LAST(rc, comm);
	return rc;
}
*/
import "C"

import (
	"fmt"
	"sort"
	"sync/atomic"
	"unsafe"
)

// Constants from shim.h, checked against NVIDIA's headers by
// headers_test.go.
const (
	errOutOfMemory         = C.GD_CUDA_ERROR_OUT_OF_MEMORY
	errNoDevice            = C.GD_CUDA_ERROR_NO_DEVICE
	attrMultiprocessors    = C.GD_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
	attrCCMajor            = C.GD_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
	attrCCMinor            = C.GD_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
	cudaR32F               = C.GD_CUDA_R_32F
	cudaR16BF              = C.GD_CUDA_R_16BF
	blasCompute32F         = C.GD_CUBLAS_COMPUTE_32F
	blasCompute32FFast16BF = C.GD_CUBLAS_COMPUTE_32F_FAST_16BF
	blasCompute32FFastTF32 = C.GD_CUBLAS_COMPUTE_32F_FAST_TF32
	blasOpN, blasOpT       = C.GD_CUBLAS_OP_N, C.GD_CUBLAS_OP_T
	blasGemmDefault        = C.GD_CUBLAS_GEMM_DEFAULT
)

// library is one dlopen'ed shared object.
type library struct {
	path       string
	h          unsafe.Pointer
	major      int        // CUDA major version, 0 if unknown
	companions []*library // loaded with it and kept (NVRTC's builtins, cuBLAS's libcublasLt)
	from       string     // where the search found it (libs.go), for cuda-info
}

// realPath is the file the dynamic linker mapped (path when unknown).
func (l *library) realPath() string {
	if p := C.gd_dlpath(l.h); p != nil && C.GoString(p) != "" {
		return C.GoString(p)
	}
	return l.path
}

// close unloads a library that was rejected.
func (l *library) close() { C.gd_dlclose(l.h) }

// dlopen loads path (a file name searched by the dynamic linker, or a path).
func dlopen(path string) (*library, error) {
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	h := C.gd_dlopen(cs)
	if h == nil {
		return nil, fmt.Errorf("dlopen %s: %s", path, C.GoString(C.gd_dlerror()))
	}
	return &library{path: path, h: h}, nil
}

// sym resolves one entry point.
func (l *library) sym(name string) (unsafe.Pointer, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	p := C.gd_dlsym(l.h, cs)
	if p == nil {
		return nil, fmt.Errorf("%s: symbol %s not found", l.path, name)
	}
	return p, nil
}

// syms resolves every named entry point into the given pointers.
func (l *library) syms(table map[string]*unsafe.Pointer) error {
	for name, dst := range table {
		p, err := l.sym(name)
		if err != nil {
			return err
		}
		*dst = p
	}
	return nil
}

// ---- driver API ----

// driver holds libcuda's entry points.
type driver struct {
	lib                                                                 *library
	init, driverVersion, deviceCount, deviceGet, deviceName, deviceAttr unsafe.Pointer
	totalMem, ctxRetain, ctxRelease, ctxSetCurrent, ctxSync             unsafe.Pointer
	memAlloc, memFree, memInfo, htod, dtoh, dtod, memsetD32             unsafe.Pointer
	eventCreate, eventRecord, eventSync, eventElapsed, eventDestroy     unsafe.Pointer
	moduleLoad, moduleGetFunc, funcSetAttr, launch                      unsafe.Pointer
	errName, errString                                                  unsafe.Pointer
	hostAlloc, hostFree, streamCreate, streamSync                       unsafe.Pointer
	htodAsync, dtohAsync, dtodAsync, memsetD32Async                     unsafe.Pointer
	beginCapture, endCapture, isCapturing, instantiate                  unsafe.Pointer
	graphLaunch, graphExecDestroy, graphDestroy                         unsafe.Pointer
	// Virtual memory management, nil where the driver lacks it (vmm.go).
	memReserve, memAddrFree, memCreate, memRelease, memMap, memUnmap unsafe.Pointer
	memSetAccess, memGranularity                                     unsafe.Pointer
	n                                                                calls // what was asked of the device
}

// calls counts the driver calls a profile reports (profile.go, tools/profile).
type calls struct {
	launches, syncs, allocs, memsets       atomic.Int64
	h2d, d2h, d2d                          atomic.Int64 // copies (h2d and d2h: synchronous ones)
	h2dAsync, d2hAsync                     atomic.Int64
	graphLaunches                          atomic.Int64
	pageMaps, pageUnmaps                   atomic.Int64 // cuMemMap / cuMemUnmap (paged KV cache)
	physBytes, physPeak                    atomic.Int64 // cuMemCreate memory held now, and its peak since MemPeak's reset
	h2dBytes, d2hBytes, d2dBytes, memBytes atomic.Int64
}

func loadDriver(lib *library) (*driver, error) {
	d := &driver{lib: lib}
	err := lib.syms(map[string]*unsafe.Pointer{
		"cuInit": &d.init, "cuDriverGetVersion": &d.driverVersion, "cuDeviceGetCount": &d.deviceCount,
		"cuDeviceGet": &d.deviceGet, "cuDeviceGetName": &d.deviceName, "cuDeviceGetAttribute": &d.deviceAttr,
		"cuDeviceTotalMem_v2": &d.totalMem, "cuDevicePrimaryCtxRetain": &d.ctxRetain,
		"cuDevicePrimaryCtxRelease_v2": &d.ctxRelease, "cuCtxSetCurrent": &d.ctxSetCurrent,
		"cuCtxSynchronize": &d.ctxSync, "cuMemAlloc_v2": &d.memAlloc, "cuMemFree_v2": &d.memFree,
		"cuMemGetInfo_v2": &d.memInfo, "cuMemcpyHtoD_v2": &d.htod, "cuMemcpyDtoH_v2": &d.dtoh,
		"cuMemcpyDtoD_v2": &d.dtod, "cuMemsetD32_v2": &d.memsetD32, "cuEventCreate": &d.eventCreate,
		"cuEventRecord": &d.eventRecord, "cuEventSynchronize": &d.eventSync,
		"cuEventDestroy_v2": &d.eventDestroy,
		"cuModuleLoadData":  &d.moduleLoad, "cuModuleGetFunction": &d.moduleGetFunc,
		"cuFuncSetAttribute": &d.funcSetAttr, "cuLaunchKernel": &d.launch,
		"cuGetErrorName": &d.errName, "cuGetErrorString": &d.errString,
		"cuMemHostAlloc": &d.hostAlloc, "cuMemFreeHost": &d.hostFree, "cuStreamCreate": &d.streamCreate,
		"cuStreamSynchronize": &d.streamSync, "cuMemcpyHtoDAsync_v2": &d.htodAsync,
		"cuMemcpyDtoHAsync_v2": &d.dtohAsync, "cuMemcpyDtoDAsync_v2": &d.dtodAsync, "cuMemsetD32Async": &d.memsetD32Async,
		"cuStreamBeginCapture_v2": &d.beginCapture, "cuStreamEndCapture": &d.endCapture,
		"cuStreamIsCapturing": &d.isCapturing, "cuGraphInstantiateWithFlags": &d.instantiate,
		"cuGraphLaunch": &d.graphLaunch, "cuGraphExecDestroy": &d.graphExecDestroy, "cuGraphDestroy": &d.graphDestroy,
	})
	if err != nil {
		return d, err
	}
	// Virtual memory management is optional: without it a paged KV cache
	// is refused with an error (vmm.go), everything else works.
	vmm := map[string]*unsafe.Pointer{
		"cuMemAddressReserve": &d.memReserve, "cuMemAddressFree": &d.memAddrFree, "cuMemCreate": &d.memCreate,
		"cuMemRelease": &d.memRelease, "cuMemMap": &d.memMap, "cuMemUnmap": &d.memUnmap,
		"cuMemSetAccess": &d.memSetAccess, "cuMemGetAllocationGranularity": &d.memGranularity,
	}
	if lib.syms(vmm) != nil {
		for _, p := range vmm {
			*p = nil
		}
	}
	// CUDA 13's header has only the _v2 name; older drivers only the other.
	if d.eventElapsed, err = lib.sym("cuEventElapsedTime_v2"); err != nil {
		d.eventElapsed, err = lib.sym("cuEventElapsedTime")
	}
	return d, err
}

// check turns a CUresult into an error naming the call.
func (d *driver) check(call string, rc C.int) error {
	if rc == 0 {
		return nil
	}
	name, msg := "CUDA_ERROR_UNKNOWN", "unknown error"
	var s *C.char
	if C.cu_errstr(d.errName, rc, &s) == 0 && s != nil {
		name = C.GoString(s)
	}
	if C.cu_errstr(d.errString, rc, &s) == 0 && s != nil {
		msg = C.GoString(s)
	}
	return &Error{Call: call, Code: int(rc), Name: name, Msg: msg}
}

func (d *driver) Init() error { return d.check("cuInit", C.cu_init(d.init, 0)) }

func (d *driver) Version() (int, error) {
	var v C.int
	return int(v), d.check("cuDriverGetVersion", C.cu_pi(d.driverVersion, &v))
}

func (d *driver) DeviceCount() (int, error) {
	var n C.int
	return int(n), d.check("cuDeviceGetCount", C.cu_pi(d.deviceCount, &n))
}

func (d *driver) Device(ordinal int) (int, error) {
	var dev C.int
	return int(dev), d.check("cuDeviceGet", C.cu_device(d.deviceGet, &dev, C.int(ordinal)))
}

func (d *driver) DeviceName(dev int) (string, error) {
	buf := (*C.char)(C.malloc(256))
	defer C.free(unsafe.Pointer(buf))
	if err := d.check("cuDeviceGetName", C.cu_name(d.deviceName, buf, 256, C.int(dev))); err != nil {
		return "", err
	}
	return C.GoString(buf), nil
}

func (d *driver) Attribute(dev, attr int) (int, error) {
	var v C.int
	return int(v), d.check("cuDeviceGetAttribute", C.cu_attr(d.deviceAttr, &v, C.int(attr), C.int(dev)))
}

func (d *driver) TotalMem(dev int) (int64, error) {
	var v C.size_t
	return int64(v), d.check("cuDeviceTotalMem", C.cu_totalmem(d.totalMem, &v, C.int(dev)))
}

// UsePrimaryContext retains dev's primary context and makes it current on
// every thread that calls in from now on.
func (d *driver) UsePrimaryContext(dev int) error {
	var ctx C.handle
	if err := d.check("cuDevicePrimaryCtxRetain", C.cu_ctx_retain(d.ctxRetain, &ctx, C.int(dev))); err != nil {
		return err
	}
	C.gd_set_context(ctx, d.ctxSetCurrent)
	return d.check("cuCtxSetCurrent", C.gd_bind())
}

func (d *driver) Synchronize() error {
	d.n.syncs.Add(1)
	return d.check("cuCtxSynchronize", C.cu_sync(d.ctxSync))
}

func (d *driver) MemAlloc(bytes int64) (uint64, error) {
	d.n.allocs.Add(1)
	var p C.devptr
	err := d.check(fmt.Sprintf("cuMemAlloc(%d bytes)", bytes), C.cu_alloc(d.memAlloc, &p, C.size_t(bytes)))
	return uint64(p), err
}

func (d *driver) MemFree(p uint64) error {
	return d.check("cuMemFree", C.cu_free(d.memFree, C.devptr(p)))
}

// errNoVMM is returned by the virtual memory calls on a driver without them.
var errNoVMM = fmt.Errorf("cuda: the driver has no virtual memory management (cuMemAddressReserve etc., CUDA ≥ 10.2)")

// MemGranularity is the minimum page of cuMemCreate and cuMemMap on dev.
func (d *driver) MemGranularity(dev int) (int64, error) {
	if d.memGranularity == nil {
		return 0, errNoVMM
	}
	var g C.size_t
	err := d.check("cuMemGetAllocationGranularity", C.cu_mem_granularity(d.memGranularity, &g, C.int(dev)))
	return int64(g), err
}

// MemReserve reserves bytes of device address space (nothing mapped).
func (d *driver) MemReserve(bytes, align int64) (uint64, error) {
	if d.memReserve == nil {
		return 0, errNoVMM
	}
	var p C.devptr
	err := d.check(fmt.Sprintf("cuMemAddressReserve(%d bytes)", bytes), C.cu_mem_reserve(d.memReserve, &p, C.size_t(bytes), C.size_t(align)))
	return uint64(p), err
}

// MemAddressFree gives a reserved range back (nothing may be mapped in it).
func (d *driver) MemAddressFree(p uint64, bytes int64) error {
	return d.check("cuMemAddressFree", C.cu_mem_addr_free(d.memAddrFree, C.devptr(p), C.size_t(bytes)))
}

// MemCreate allocates bytes of physical memory on dev, unmapped.
func (d *driver) MemCreate(bytes int64, dev int) (uint64, error) {
	if d.memCreate == nil {
		return 0, errNoVMM
	}
	var h C.gd_u64
	err := d.check(fmt.Sprintf("cuMemCreate(%d bytes)", bytes), C.cu_mem_create(d.memCreate, &h, C.size_t(bytes), C.int(dev)))
	if err == nil {
		now := d.n.physBytes.Add(bytes)
		for p := d.n.physPeak.Load(); now > p && !d.n.physPeak.CompareAndSwap(p, now); p = d.n.physPeak.Load() {
		}
	}
	return uint64(h), err
}

// MemRelease frees a physical allocation of bytes (once it is unmapped
// everywhere).
func (d *driver) MemRelease(h uint64, bytes int64) error {
	err := d.check("cuMemRelease", C.cu_mem_release(d.memRelease, C.gd_u64(h)))
	if err == nil {
		d.n.physBytes.Add(-bytes)
	}
	return err
}

// MemMap maps physical allocation h at p and makes it readable and
// writable from dev.
func (d *driver) MemMap(p uint64, bytes int64, h uint64, dev int) error {
	d.n.pageMaps.Add(1)
	if err := d.check("cuMemMap", C.cu_mem_map(d.memMap, C.devptr(p), C.size_t(bytes), C.gd_u64(h))); err != nil {
		return err
	}
	return d.check("cuMemSetAccess", C.cu_mem_access(d.memSetAccess, C.devptr(p), C.size_t(bytes), C.int(dev)))
}

// MemUnmap unmaps bytes at p.
func (d *driver) MemUnmap(p uint64, bytes int64) error {
	d.n.pageUnmaps.Add(1)
	return d.check("cuMemUnmap", C.cu_mem_unmap(d.memUnmap, C.devptr(p), C.size_t(bytes)))
}

func (d *driver) MemInfo() (free, total int64, err error) {
	var f, t C.size_t
	err = d.check("cuMemGetInfo", C.cu_meminfo(d.memInfo, &f, &t))
	return int64(f), int64(t), err
}

// HtoD copies bytes from host memory src (no Go pointers inside) to dst.
func (d *driver) HtoD(dst uint64, src unsafe.Pointer, bytes int64) error {
	d.n.h2d.Add(1)
	d.n.h2dBytes.Add(bytes)
	return d.check("cuMemcpyHtoD", C.cu_htod(d.htod, C.devptr(dst), src, C.size_t(bytes)))
}

func (d *driver) DtoH(dst unsafe.Pointer, src uint64, bytes int64) error {
	d.n.d2h.Add(1)
	d.n.d2hBytes.Add(bytes)
	return d.check("cuMemcpyDtoH", C.cu_dtoh(d.dtoh, dst, C.devptr(src), C.size_t(bytes)))
}

func (d *driver) DtoD(dst, src uint64, bytes int64) error {
	d.n.d2d.Add(1)
	d.n.d2dBytes.Add(bytes)
	return d.check("cuMemcpyDtoD", C.cu_dtod(d.dtod, C.devptr(dst), C.devptr(src), C.size_t(bytes)))
}

func (d *driver) MemsetD32(dst uint64, v uint32, n int64) error {
	d.n.memsets.Add(1)
	d.n.memBytes.Add(4 * n)
	return d.check("cuMemsetD32", C.cu_memset32(d.memsetD32, C.devptr(dst), C.unsigned(v), C.size_t(n)))
}

// Stream is a CUDA stream: work issued on it runs in order, and (created
// non-blocking) without waiting for the legacy default stream.
type Stream struct{ h C.handle }

// handle is the stream's handle; nil is the legacy default stream.
func (s *Stream) handle() C.handle {
	if s == nil {
		return nil
	}
	return s.h
}

// NewStream creates a non-blocking stream.
func (d *driver) NewStream() (*Stream, error) {
	var h C.handle
	return &Stream{h}, d.check("cuStreamCreate", C.cu_stream_create(d.streamCreate, &h, C.GD_CU_STREAM_NON_BLOCKING))
}

// StreamSync waits until everything issued on s has run: a host sync.
func (d *driver) StreamSync(s *Stream) error {
	d.n.syncs.Add(1)
	return d.check("cuStreamSynchronize", C.cu_stream_sync(d.streamSync, s.h))
}

// HostAlloc allocates page-locked host memory, which copies read and write
// asynchronously.
func (d *driver) HostAlloc(bytes int64) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	return p, d.check(fmt.Sprintf("cuMemHostAlloc(%d bytes)", bytes), C.cu_host_alloc(d.hostAlloc, &p, C.size_t(bytes)))
}

// HostFree releases HostAlloc's memory.
func (d *driver) HostFree(p unsafe.Pointer) error {
	return d.check("cuMemFreeHost", C.cu_host_free(d.hostFree, p))
}

// HtoDAsync queues a copy from page-locked memory src to dst on s.
func (d *driver) HtoDAsync(dst uint64, src unsafe.Pointer, bytes int64, s *Stream) error {
	d.n.h2dAsync.Add(1)
	d.n.h2dBytes.Add(bytes)
	return d.check("cuMemcpyHtoDAsync", C.cu_htod_async(d.htodAsync, C.devptr(dst), src, C.size_t(bytes), s.h))
}

// DtoHAsync queues a copy from src to page-locked memory dst on s.
func (d *driver) DtoHAsync(dst unsafe.Pointer, src uint64, bytes int64, s *Stream) error {
	d.n.d2hAsync.Add(1)
	d.n.d2hBytes.Add(bytes)
	return d.check("cuMemcpyDtoHAsync", C.cu_dtoh_async(d.dtohAsync, dst, C.devptr(src), C.size_t(bytes), s.h))
}

// DtoDAsync queues a device-to-device copy on s.
func (d *driver) DtoDAsync(dst, src uint64, bytes int64, s *Stream) error {
	d.n.d2d.Add(1)
	d.n.d2dBytes.Add(bytes)
	return d.check("cuMemcpyDtoDAsync", C.cu_dtod_async(d.dtodAsync, C.devptr(dst), C.devptr(src), C.size_t(bytes), s.h))
}

// MemsetD32Async queues a fill of n 32-bit words on s.
func (d *driver) MemsetD32Async(dst uint64, v uint32, n int64, s *Stream) error {
	d.n.memsets.Add(1)
	d.n.memBytes.Add(4 * n)
	return d.check("cuMemsetD32Async", C.cu_memset32_async(d.memsetD32Async, C.devptr(dst), C.unsigned(v), C.size_t(n), s.h))
}

// Graph is a captured CUgraph; GraphExec its instantiation.
type (
	Graph     struct{ h C.handle }
	GraphExec struct{ h C.handle }
)

// Capture status codes (CUstreamCaptureStatus) and the errors capture
// raises.
const (
	captureUnsupported = C.GD_CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
	captureInvalidated = C.GD_CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
)

// BeginCapture starts recording s's work into a graph (the global mode:
// allocations and synchronisations anywhere invalidate the capture).
func (d *driver) BeginCapture(s *Stream) error {
	return d.check("cuStreamBeginCapture", C.cu_begin_capture(d.beginCapture, s.h, C.GD_CU_STREAM_CAPTURE_MODE_GLOBAL))
}

// EndCapture ends s's capture and returns the graph.
func (d *driver) EndCapture(s *Stream) (*Graph, error) {
	var g C.handle
	if err := d.check("cuStreamEndCapture", C.cu_end_capture(d.endCapture, s.h, &g)); err != nil {
		return nil, err
	}
	return &Graph{g}, nil
}

// IsCapturing reports s's capture status: 0 none, 1 active, 2 invalidated.
func (d *driver) IsCapturing(s *Stream) (int, error) {
	var st C.int
	return int(st), d.check("cuStreamIsCapturing", C.cu_is_capturing(d.isCapturing, s.h, &st))
}

// Instantiate makes a launchable graph.
func (d *driver) Instantiate(g *Graph) (*GraphExec, error) {
	var x C.handle
	return &GraphExec{x}, d.check("cuGraphInstantiate", C.cu_instantiate(d.instantiate, &x, g.h))
}

// GraphLaunch queues x on s.
func (d *driver) GraphLaunch(x *GraphExec, s *Stream) error {
	d.n.graphLaunches.Add(1)
	return d.check("cuGraphLaunch", C.cu_graph_launch(d.graphLaunch, x.h, s.h))
}

// DestroyGraphExec and DestroyGraph free what Instantiate and EndCapture made.
func (d *driver) DestroyGraphExec(x *GraphExec) error {
	return d.check("cuGraphExecDestroy", C.cu_graph_free(d.graphExecDestroy, x.h))
}
func (d *driver) DestroyGraph(g *Graph) error {
	return d.check("cuGraphDestroy", C.cu_graph_free(d.graphDestroy, g.h))
}

// Event is a CUDA event used for timing.
type Event struct{ h C.handle }

func (d *driver) NewEvent() (*Event, error) {
	var h C.handle
	return &Event{h}, d.check("cuEventCreate", C.cu_event_create(d.eventCreate, &h, 0))
}

func (d *driver) Record(e *Event, s *Stream) error {
	return d.check("cuEventRecord", C.cu_record(d.eventRecord, e.h, s.handle()))
}

// Elapsed waits for end and returns the milliseconds between the events.
func (d *driver) Elapsed(start, end *Event) (float64, error) {
	if err := d.check("cuEventSynchronize", C.cu_event(d.eventSync, end.h)); err != nil {
		return 0, err
	}
	var ms C.float
	return float64(ms), d.check("cuEventElapsedTime", C.cu_elapsed(d.eventElapsed, &ms, start.h, end.h))
}

func (d *driver) DestroyEvent(e *Event) error {
	return d.check("cuEventDestroy", C.cu_event(d.eventDestroy, e.h))
}

// module is a loaded kernel image; function is one of its kernels.
type module struct{ h C.handle }
type function struct {
	h    C.handle
	name string
}

func (d *driver) LoadModule(image []byte) (*module, error) {
	img := C.CBytes(image) // the driver reads the image during the call only
	defer C.free(img)
	var m C.handle
	return &module{m}, d.check("cuModuleLoadData", C.cu_modload(d.moduleLoad, &m, img))
}

func (d *driver) Function(m *module, name string) (*function, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var f C.handle
	return &function{f, name}, d.check("cuModuleGetFunction("+name+")", C.cu_getfunc(d.moduleGetFunc, &f, m.h, cs))
}

// Launch runs f on grid × block with the given arguments, each one of
// uint64 (device pointers), int32, uint32, int64, float32 or float64. Arguments are
// copied into C memory, as cuLaunchKernel wants a void** of pointers to them.
func (d *driver) Launch(f *function, grid, block [3]int, s *Stream, args ...any) error {
	d.n.launches.Add(1)
	const slot = 8
	buf := C.malloc(C.size_t(len(args) * slot * 2))
	defer C.free(buf)
	vals := unsafe.Slice((*uint64)(buf), len(args))
	ptrs := unsafe.Slice((*unsafe.Pointer)(unsafe.Add(buf, len(args)*slot)), len(args))
	for i, a := range args {
		p := unsafe.Pointer(&vals[i])
		switch v := a.(type) {
		case uint64:
			*(*uint64)(p) = v
		case int64:
			*(*int64)(p) = v
		case int32:
			*(*int32)(p) = v
		case uint32:
			*(*uint32)(p) = v
		case float32:
			*(*float32)(p) = v
		case float64:
			*(*float64)(p) = v
		default:
			return fmt.Errorf("launch %s: argument %d has unsupported type %T", f.name, i, a)
		}
		ptrs[i] = p
	}
	var params unsafe.Pointer
	if len(args) > 0 {
		params = unsafe.Pointer(&ptrs[0])
	}
	rc := C.cu_launch(d.launch, f.h, C.unsigned(grid[0]), C.unsigned(grid[1]), C.unsigned(grid[2]),
		C.unsigned(block[0]), C.unsigned(block[1]), C.unsigned(block[2]), 0, s.handle(), (*unsafe.Pointer)(params))
	return d.check("cuLaunchKernel("+f.name+")", rc)
}

// ---- NVRTC ----

// nvrtc holds libnvrtc's entry points.
type nvrtc struct {
	lib                                          *library
	version, errString, create, compile, destroy unsafe.Pointer
	logSize, log, ptxSize, ptx, cubinSize, cubin unsafe.Pointer
	numArchs, archs                              unsafe.Pointer // nil before NVRTC 11.2
}

func loadNVRTC(lib *library) (*nvrtc, error) {
	n := &nvrtc{lib: lib}
	err := lib.syms(map[string]*unsafe.Pointer{
		"nvrtcVersion": &n.version, "nvrtcGetErrorString": &n.errString,
		"nvrtcCreateProgram": &n.create, "nvrtcCompileProgram": &n.compile,
		"nvrtcDestroyProgram": &n.destroy, "nvrtcGetProgramLogSize": &n.logSize,
		"nvrtcGetProgramLog": &n.log, "nvrtcGetPTXSize": &n.ptxSize, "nvrtcGetPTX": &n.ptx,
		"nvrtcGetCUBINSize": &n.cubinSize, "nvrtcGetCUBIN": &n.cubin,
	})
	n.numArchs, _ = lib.sym("nvrtcGetNumSupportedArchs")
	n.archs, _ = lib.sym("nvrtcGetSupportedArchs")
	return n, err
}

// SupportedArchs lists the architectures NVRTC compiles for, as 10·major +
// minor (90 for sm_90), oldest first; nil when this NVRTC cannot say
// (before 11.2), in which case it is trusted to know the GPU.
func (n *nvrtc) SupportedArchs() ([]int, error) {
	if n.numArchs == nil || n.archs == nil {
		return nil, nil
	}
	var count C.int
	if err := n.check("nvrtcGetNumSupportedArchs", C.nv_num_archs(n.numArchs, &count)); err != nil {
		return nil, err
	}
	if count <= 0 {
		return nil, nil
	}
	buf := make([]C.int, count)
	if err := n.check("nvrtcGetSupportedArchs", C.nv_archs(n.archs, &buf[0])); err != nil {
		return nil, err
	}
	out := make([]int, count)
	for i, a := range buf {
		out[i] = int(a)
	}
	sort.Ints(out)
	return out, nil
}

func (n *nvrtc) check(call string, rc C.int) error {
	if rc == 0 {
		return nil
	}
	return &Error{Call: call, Code: int(rc), Name: C.GoString(C.nv_errstr(n.errString, rc))}
}

// Version returns NVRTC's major and minor version.
func (n *nvrtc) Version() (int, int, error) {
	var a, b C.int
	err := n.check("nvrtcVersion", C.nv_version(n.version, &a, &b))
	return int(a), int(b), err
}

// Compile compiles one CUDA C source with the given options and returns
// the CUBIN (cubin true) or PTX image, and NVRTC's log. A failed
// compilation returns an error that carries the log.
func (n *nvrtc) Compile(src, name string, opts []string, cubin bool) (image []byte, log string, err error) {
	csrc, cname := C.CString(src), C.CString(name)
	defer C.free(unsafe.Pointer(csrc))
	defer C.free(unsafe.Pointer(cname))
	var prog C.handle
	if err := n.check("nvrtcCreateProgram", C.nv_create(n.create, &prog, csrc, cname)); err != nil {
		return nil, "", err
	}
	defer C.nv_destroy(n.destroy, &prog)
	copts := C.malloc(C.size_t(len(opts)+1) * C.size_t(unsafe.Sizeof(uintptr(0))))
	defer C.free(copts)
	optv := unsafe.Slice((**C.char)(copts), len(opts)+1)
	for i, o := range opts {
		optv[i] = C.CString(o)
		defer C.free(unsafe.Pointer(optv[i]))
	}
	rc := C.nv_compile(n.compile, prog, C.int(len(opts)), (**C.char)(copts))
	log = n.read(prog, n.logSize, n.log)
	if err := n.check("nvrtcCompileProgram("+name+")", rc); err != nil {
		return nil, log, fmt.Errorf("%w\n%s", err, log)
	}
	size, get, what := n.ptxSize, n.ptx, "PTX"
	if cubin {
		size, get, what = n.cubinSize, n.cubin, "CUBIN"
	}
	img := n.read(prog, size, get)
	if img == "" {
		return nil, log, fmt.Errorf("nvrtc %s: empty %s", name, what)
	}
	return []byte(img), log, nil
}

// read fetches a sized program output (log, PTX, CUBIN).
func (n *nvrtc) read(prog C.handle, sizeFn, getFn unsafe.Pointer) string {
	var size C.size_t
	if C.nv_size(sizeFn, prog, &size) != 0 || size == 0 {
		return ""
	}
	buf := C.malloc(size)
	defer C.free(buf)
	if C.nv_get(getFn, prog, (*C.char)(buf)) != 0 {
		return ""
	}
	return string(C.GoBytes(buf, C.int(size)))
}

// ---- cuBLAS ----

// cublas holds libcublas's entry points and one handle.
type cublas struct {
	lib                                                *library
	create, destroy, setStream, setMath, version, gemm unsafe.Pointer
	gemmBatched                                        unsafe.Pointer
	h                                                  C.handle
}

func loadCublas(lib *library) (*cublas, error) {
	b := &cublas{lib: lib}
	err := lib.syms(map[string]*unsafe.Pointer{
		"cublasCreate_v2": &b.create, "cublasDestroy_v2": &b.destroy, "cublasSetStream_v2": &b.setStream,
		"cublasSetMathMode": &b.setMath, "cublasGetVersion_v2": &b.version, "cublasGemmEx": &b.gemm,
		"cublasGemmStridedBatchedEx": &b.gemmBatched,
	})
	if err != nil {
		return nil, err
	}
	if err := cublasCheck("cublasCreate", C.cb_create(b.create, &b.h)); err != nil {
		return nil, err
	}
	return b, nil
}

// cublasStatusNames are the documented cublasStatus_t values.
var cublasStatusNames = map[int]string{
	C.GD_CUBLAS_STATUS_NOT_INITIALIZED: "CUBLAS_STATUS_NOT_INITIALIZED", C.GD_CUBLAS_STATUS_ALLOC_FAILED: "CUBLAS_STATUS_ALLOC_FAILED",
	C.GD_CUBLAS_STATUS_INVALID_VALUE: "CUBLAS_STATUS_INVALID_VALUE", C.GD_CUBLAS_STATUS_ARCH_MISMATCH: "CUBLAS_STATUS_ARCH_MISMATCH",
	C.GD_CUBLAS_STATUS_MAPPING_ERROR: "CUBLAS_STATUS_MAPPING_ERROR", C.GD_CUBLAS_STATUS_EXECUTION_FAILED: "CUBLAS_STATUS_EXECUTION_FAILED",
	C.GD_CUBLAS_STATUS_INTERNAL_ERROR: "CUBLAS_STATUS_INTERNAL_ERROR", C.GD_CUBLAS_STATUS_NOT_SUPPORTED: "CUBLAS_STATUS_NOT_SUPPORTED",
	C.GD_CUBLAS_STATUS_LICENSE_ERROR: "CUBLAS_STATUS_LICENSE_ERROR",
}

func cublasCheck(call string, rc C.int) error {
	if rc == 0 {
		return nil
	}
	name, ok := cublasStatusNames[int(rc)]
	if !ok {
		name = fmt.Sprintf("cublasStatus %d", int(rc))
	}
	return &Error{Call: call, Code: int(rc), Name: name}
}

// SetStream makes later products run on s.
func (b *cublas) SetStream(s *Stream) error {
	return cublasCheck("cublasSetStream", C.cb_set_stream(b.setStream, b.h, s.handle()))
}

func (b *cublas) Version() (int, error) {
	var v C.int
	return int(v), cublasCheck("cublasGetVersion", C.cb_version(b.version, b.h, &v))
}

// Gemm is cublasGemmEx on column-major operands of the given data types.
func (b *cublas) Gemm(transA, transB bool, m, n, k int, alpha float32, A uint64, aType, lda int,
	B uint64, bType, ldb int, beta float32, Cm uint64, cType, ldc, compute int) error {
	ta, tb := blasOp(transA), blasOp(transB)
	// alpha and beta are read during the call only (host pointer mode), so
	// pointers to Go memory without Go pointers inside are allowed.
	ca, cb := C.float(alpha), C.float(beta)
	rc := C.cb_gemm(b.gemm, b.h, ta, tb, C.int(m), C.int(n), C.int(k), &ca, C.devptr(A), C.int(aType), C.int(lda),
		C.devptr(B), C.int(bType), C.int(ldb), &cb, C.devptr(Cm), C.int(cType), C.int(ldc), C.int(compute), blasGemmDefault)
	return cublasCheck("cublasGemmEx", rc)
}

// GemmBatched is cublasGemmStridedBatchedEx: batch products of column-major
// operands, the i-th reading A + i·strideA, B + i·strideB and writing
// C + i·strideC (strides in elements).
func (b *cublas) GemmBatched(transA, transB bool, m, n, k int, alpha float32, A uint64, aType, lda int, strideA int64,
	B uint64, bType, ldb int, strideB int64, beta float32, Cm uint64, cType, ldc int, strideC int64, batch, compute int) error {
	ta, tb := blasOp(transA), blasOp(transB)
	ca, cb := C.float(alpha), C.float(beta)
	rc := C.cb_gemm_batched(b.gemmBatched, b.h, ta, tb, C.int(m), C.int(n), C.int(k), &ca, C.devptr(A), C.int(aType),
		C.int(lda), C.longlong(strideA), C.devptr(B), C.int(bType), C.int(ldb), C.longlong(strideB), &cb, C.devptr(Cm),
		C.int(cType), C.int(ldc), C.longlong(strideC), C.int(batch), C.int(compute), blasGemmDefault)
	return cublasCheck("cublasGemmStridedBatchedEx", rc)
}

// blasOp is cuBLAS's operation for a transpose flag.
func blasOp(trans bool) C.int {
	if trans {
		return blasOpT
	}
	return blasOpN
}

// ---- NCCL ----

// ncclLib holds libnccl's entry points, and the driver's cuStreamQuery,
// which the communicator's watchdog polls (nccl.go).
type ncclLib struct {
	lib                                                         *library
	version, uniqueID, initRank, destroy, abort, asyncErr       unsafe.Pointer
	errString, lastErr                                          unsafe.Pointer
	allReduce, reduceScatter, allGather, broadcast, streamQuery unsafe.Pointer
}

// ncclComm is an ncclComm_t.
type ncclComm struct{ h C.handle }

// collective kinds, as nc_coll numbers them.
const (
	collAllReduce = iota
	collReduceScatter
	collAllGather
	collBroadcast
)

// Status codes the Go side tells apart (checked against nccl.h).
const (
	ncclInProgress = C.GD_ncclInProgress
	ncclIDBytes    = C.GD_NCCL_UNIQUE_ID_BYTES
	ncclFloat32    = C.GD_ncclFloat32
	ncclBfloat16   = C.GD_ncclBfloat16
	cuNotReady     = C.GD_CUDA_ERROR_NOT_READY
)

func loadNCCL(lib *library) (*ncclLib, error) {
	n := &ncclLib{lib: lib}
	err := lib.syms(map[string]*unsafe.Pointer{
		"ncclGetVersion": &n.version, "ncclGetUniqueId": &n.uniqueID, "ncclCommInitRank": &n.initRank,
		"ncclCommDestroy": &n.destroy, "ncclCommAbort": &n.abort, "ncclCommGetAsyncError": &n.asyncErr,
		"ncclGetErrorString": &n.errString, "ncclGetLastError": &n.lastErr, "ncclAllReduce": &n.allReduce,
		"ncclReduceScatter": &n.reduceScatter, "ncclAllGather": &n.allGather, "ncclBroadcast": &n.broadcast,
	})
	return n, err
}

// ncclStatusNames are the documented ncclResult_t values.
var ncclStatusNames = map[int]string{
	C.GD_ncclUnhandledCudaError: "ncclUnhandledCudaError", C.GD_ncclSystemError: "ncclSystemError",
	C.GD_ncclInternalError: "ncclInternalError", C.GD_ncclInvalidArgument: "ncclInvalidArgument",
	C.GD_ncclInvalidUsage: "ncclInvalidUsage", C.GD_ncclRemoteError: "ncclRemoteError",
	C.GD_ncclInProgress: "ncclInProgress",
}

// lastBuf receives ncclGetLastError on a failed call.
type lastBuf [512]C.char

// check turns an ncclResult_t into an error naming the call, with NCCL's
// description and its last error message.
func (n *ncclLib) check(call string, rc C.int, last *lastBuf) error {
	if rc == 0 {
		return nil
	}
	name, ok := ncclStatusNames[int(rc)]
	if !ok {
		name = fmt.Sprintf("ncclResult %d", int(rc))
	}
	msg := C.GoString(C.nc_errstr(n.errString, rc))
	if last != nil && last[0] != 0 {
		msg += "; " + C.GoString(&last[0])
	}
	return &Error{Call: call, Code: int(rc), Name: name, Msg: msg}
}

func (n *ncclLib) Version() (int, error) {
	var v C.int
	return int(v), n.check("ncclGetVersion", C.nc_version(n.version, &v), nil)
}

func (n *ncclLib) UniqueID() ([ncclIDBytes]byte, error) {
	var id C.gd_nccl_id
	var last lastBuf
	err := n.check("ncclGetUniqueId", C.nc_unique_id(n.uniqueID, &id, n.lastErr, &last[0], C.int(len(last))), &last)
	return *(*[ncclIDBytes]byte)(unsafe.Pointer(&id)), err
}

// InitRank is ncclCommInitRank: it returns once all world ranks have joined.
func (n *ncclLib) InitRank(world int, id [ncclIDBytes]byte, rank int) (ncclComm, error) {
	cid := (*C.gd_nccl_id)(unsafe.Pointer(&id))
	var h C.handle
	var last lastBuf
	rc := C.nc_init(n.initRank, &h, C.int(world), cid, C.int(rank), n.lastErr, &last[0], C.int(len(last)))
	return ncclComm{h}, n.check("ncclCommInitRank", rc, &last)
}

// Destroy frees a communicator whose work has finished; Abort one that may
// have work in flight, ending any call another thread is blocked in.
func (n *ncclLib) Destroy(c ncclComm) error { return n.free("ncclCommDestroy", n.destroy, c) }
func (n *ncclLib) Abort(c ncclComm) error   { return n.free("ncclCommAbort", n.abort, c) }

func (n *ncclLib) free(call string, f unsafe.Pointer, c ncclComm) error {
	var last lastBuf
	return n.check(call, C.nc_comm(f, c.h, n.lastErr, &last[0], C.int(len(last))), &last)
}

// AsyncError is ncclCommGetAsyncError: nil while the communicator is
// healthy (or still working: ncclInProgress), the error once it has failed.
func (n *ncclLib) AsyncError(c ncclComm) error {
	var e C.int
	if err := n.check("ncclCommGetAsyncError", C.nc_async(n.asyncErr, c.h, &e), nil); err != nil {
		return err
	}
	if e == ncclInProgress {
		return nil
	}
	return n.check("NCCL asynchronous error", e, nil)
}

// Collective queues one collective on s of count elements of dtype
// (ncclFloat32, or ncclBfloat16 for the copies of bf16 weights; see nc_coll
// for kind and count).
func (n *ncclLib) Collective(call string, kind int, c ncclComm, send, recv uint64, count, dtype, root int, s *Stream) error {
	f := map[int]unsafe.Pointer{collAllReduce: n.allReduce, collReduceScatter: n.reduceScatter,
		collAllGather: n.allGather, collBroadcast: n.broadcast}[kind]
	var last lastBuf
	rc := C.nc_coll(f, C.int(kind), C.devptr(send), C.devptr(recv), C.size_t(count), C.int(dtype), C.int(root),
		c.h, s.handle(), n.lastErr, &last[0], C.int(len(last)))
	return n.check(call, rc, &last)
}

// StreamQuery reports whether everything queued on s has run.
func (n *ncclLib) StreamQuery(d *driver, s *Stream) (bool, error) {
	rc := C.cu_stream_query(n.streamQuery, s.handle())
	if rc == cuNotReady {
		return false, nil
	}
	return rc == 0, d.check("cuStreamQuery", rc)
}

// valid reports whether c holds a communicator.
func (c ncclComm) valid() bool { return c.h != nil }
