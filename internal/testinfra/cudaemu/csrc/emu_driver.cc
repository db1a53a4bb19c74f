// emu_driver.cc: the CUDA driver API subset of the CPU emulator.
//
// Device pointers are host pointers (256-byte aligned) so kernels use them
// directly. A table of live allocations lets every copy, memset, cuMemFree
// and cuBLAS call check its ranges, which real CUDA would only sometimes
// catch. Everything runs synchronously; streams and events are bookkeeping.
//
// Each allocation is a mapping of its own whose end abuts an inaccessible
// guard page, with another guard page in front: the allocation, rounded up
// to 256 bytes (cuMemAlloc's alignment), ends where the guard begins, so a
// kernel reading or writing past the end faults at once (the runtime turns
// the fault into CUDA_ERROR_ILLEGAL_ADDRESS, naming the kernel). The bytes
// between the end and the 256-byte boundary, and those between the front
// guard and the start, hold a canary (0xfe) that is checked after every
// launch for the allocations its pointer arguments point into, and at
// cuMemFree: a kernel that wrote there fails the same way, as
// compute-sanitizer's memcheck would report it. An error from a kernel is
// sticky: every later call that needs the context returns it, as on a GPU.
//
// Stream capture records instead of running: while a stream captures, its
// launches (argument values copied, as a kernel node keeps them), async
// copies and memsets, and cuBLAS products on it, are appended to a graph;
// cuGraphLaunch of the instantiated graph runs them in order, each checked
// again (a copy whose memory was freed since fails with an illegal
// address). The capture modes' rules are modelled
// (cuThreadExchangeStreamCaptureMode's documentation): allocation, freeing
// and synchronisation that a capture under way forbids the calling thread
// invalidate it (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED for the call,
// CUDA_ERROR_STREAM_CAPTURE_INVALIDATED from cuStreamEndCapture), and a
// capture that is not relaxed must end on the OS thread that began it
// (CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD otherwise).
//
// Virtual memory management is real memory mapping: cuMemAddressReserve is
// an mmap of the range with no access, cuMemCreate a memfd of the size,
// cuMemMap an mmap of the memfd over part of the range (MAP_FIXED |
// MAP_SHARED), cuMemSetAccess an mprotect and cuMemUnmap an mmap with no
// access back over it. Sizes and addresses must be multiples of the
// granularity, 2 MiB as on current GPUs (GDROTRAIN_EMU_VMM_GRANULARITY, a
// multiple of the host page, makes it smaller for tests). The table of
// reservations knows which granules are mapped and accessible, so copies,
// memsets, cuBLAS and NCCL calls that touch an unmapped granule of a
// reserved range fail (copies and memsets with
// CUDA_ERROR_ILLEGAL_ADDRESS) instead of faulting; a kernel that touches
// one faults, and the runtime's fault handler fails its launch with
// CUDA_ERROR_ILLEGAL_ADDRESS (kernel arguments carry no extents to check).
#include <stdio.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "emu_internal.h"

namespace emu {
namespace {

typedef unsigned long long CUdeviceptr;
typedef int CUresult;

struct Context {
	int refs = 0;
};
struct Graph {
	std::vector<GraphOp> ops;
};
struct GraphExec {
	std::vector<GraphOp> ops;
};
struct Stream {
	unsigned flags;
	Graph* capture = nullptr;  // the graph being captured, if any
	bool invalidated = false;  // the capture met a forbidden call
	int mode = 0;              // the capture's CUstreamCaptureMode: 0 global, 1 thread-local, 2 relaxed
	long thread = 0;           // the OS thread that began it
};
struct Event {
	unsigned flags;
	bool recorded = false;
	std::chrono::steady_clock::time_point t;
};
struct Function {
	const emu_kernel_desc* k;
	int static_shared;       // its __shared__ variables' bytes
	int max_dynamic_shared;  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
	bool sm90a;              // its module's
};
struct Module {
	std::map<std::string, Function*> funcs;
	// Compiled for sm_90a (or an image without a target: a test's): its
	// kernels may use warpgroup MMA.
	bool sm90a = true;
};

// A device allocation (see the file comment for its layout).
struct Alloc {
	void* base;       // the device pointer
	size_t size;      // the bytes asked for
	char* map;        // the mapping: guard page, canary, base … base+size, canary, guard page
	size_t map_size;
	bool guarded;     // the canaries were written (not in count-only mode)
};

// A reserved address range: per granule, the physical allocation mapped
// there (0: none) and whether access was granted.
struct Reservation {
	size_t size;
	size_t g;  // the granularity when it was reserved (tests change it between caches)
	std::vector<unsigned long long> handle;
	std::vector<bool> access;
};
// A physical allocation (cuMemCreate): a memfd, and how many granules of
// reserved ranges map it.
struct Physical {
	int fd;
	size_t size;
	int maps = 0;
	bool released = false;  // cuMemRelease came; freed when the last mapping goes
};

bool g_inited = false;
std::map<uintptr_t, Reservation> g_reserved;     // by base address
std::map<unsigned long long, Physical> g_phys;  // by handle
unsigned long long g_next_handle = 1;
unsigned long long g_total = 0, g_live = 0;
std::map<uintptr_t, Alloc> g_allocs;  // by address
Context g_ctx;
__thread Context* t_current = nullptr;
std::set<Stream*> g_streams;
std::set<Event*> g_events;
std::set<Module*> g_modules;
std::set<Function*> g_funcs;
std::set<Graph*> g_graphs;
std::set<GraphExec*> g_execs;
// The calling thread's capture interaction mode
// (cuThreadExchangeStreamCaptureMode): global by default.
__thread int t_capture_mode = 0;

constexpr unsigned long long kDefaultMem = 8ull << 30;
constexpr unsigned char kCanary = 0xfe;
int g_sticky = 0;  // the error a kernel's fault left on the context
constexpr int kMaxSharedOptin = 232448;

#define LOCK std::lock_guard<std::mutex> lock_(api_mutex())
#define NEED_INIT \
	do { if (!g_inited) return CUDA_ERROR_NOT_INITIALIZED; } while (0)
#define NEED_CTX \
	do { CUresult rc_ = need_ctx(); if (rc_) return rc_; } while (0)

CUresult need_ctx() {
	if (!g_inited) return CUDA_ERROR_NOT_INITIALIZED;
	if (!t_current) return CUDA_ERROR_INVALID_CONTEXT;
	if (t_current->refs == 0) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
	return g_sticky;
}

// find returns the allocation holding p, or nullptr.
const Alloc* find(uintptr_t p) {
	auto it = g_allocs.upper_bound(p);
	if (it == g_allocs.begin()) return nullptr;
	--it;
	if (p >= it->first && p - it->first < it->second.size) return &it->second;
	return nullptr;
}

size_t host_page() {
	static const size_t page = (size_t)sysconf(_SC_PAGESIZE);
	return page;
}

// map_alloc makes a guarded allocation of bytes (> 0) in a.
bool map_alloc(size_t bytes, Alloc* a) {
	const size_t page = host_page();
	const size_t rounded = (bytes + 255) / 256 * 256;
	if (rounded < bytes) return false;
	const size_t data = (rounded + page - 1) / page * page;
	if (data < rounded || data + 2 * page < data) return false;
	char* m = (char*)mmap(nullptr, data + 2 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED) return false;
	if (mprotect(m + page, data, PROT_READ | PROT_WRITE) != 0) {
		munmap(m, data + 2 * page);
		return false;
	}
	char* p = m + page + data - rounded;
	*a = Alloc{p, bytes, m, data + 2 * page, false};
	if (!count_only()) {
		// Count-only mode touches no page: a full-size model's memory is
		// only address space.
		memset(m + page, kCanary, (size_t)(p - (m + page)));
		memset(p, 0xff, bytes);  // all-NaN: reading memory never written shows up
		memset(p + bytes, kCanary, rounded - bytes);
		a->guarded = true;
	}
	return true;
}

// canary_break returns the offset from a's start of the first byte of its
// canaries that was overwritten (negative: in front), or 0 if none was.
long long canary_break(const Alloc& a) {
	if (!a.guarded) return 0;
	// Compared a block at a time (this runs after every launch), byte by
	// byte only where a block differs.
	static unsigned char ref[4096];
	if (ref[0] != kCanary) memset(ref, kCanary, sizeof ref);
	const unsigned char* p = (const unsigned char*)a.base;
	const size_t rounded = (a.size + 255) / 256 * 256;
	const unsigned char* ranges[2][2] = {{(const unsigned char*)a.map + host_page(), p},
	                                     {p + a.size, p + rounded}};
	for (auto& r : ranges)
		for (const unsigned char* q = r[0]; q < r[1]; q += sizeof ref) {
			const size_t n = (size_t)(r[1] - q) < sizeof ref ? (size_t)(r[1] - q) : sizeof ref;
			if (memcmp(q, ref, n) == 0) continue;
			for (size_t i = 0; i < n; i++)
				if (q[i] != kCanary) return q + i - p;
		}
	return 0;
}

// offset_words says where offset off of a lies: "at offset +1024 of the
// 1024-byte allocation at 0x…, past its end".
std::string offset_words(const Alloc& a, long long off) {
	char buf[160];
	snprintf(buf, sizeof buf, "at offset %+lld of the %zu-byte allocation at %p%s", off, a.size, a.base,
	         off < 0 ? ", before its start" : off >= (long long)a.size ? ", past its end" : "");
	return buf;
}

// after_launch checks the canaries of the allocations a launch's pointer
// arguments point into, and makes a kernel's error sticky.
int after_launch(const emu_kernel_desc* k, void** params, const char* packed, int rc) {
	if (rc == CUDA_SUCCESS && k->nparams > 0) {
		std::vector<unsigned long long> ptrs(k->nparams);
		k->pointers(params, packed, ptrs.data());
		for (unsigned long long p : ptrs) {
			if (!p) continue;
			const Alloc* a = find((uintptr_t)p);
			if (!a) a = find((uintptr_t)p - 1);  // an end pointer
			long long off = a ? canary_break(*a) : 0;
			if (off == 0) continue;
			fprintf(stderr,
			        "gdrotrain CUDA emulator: kernel %s wrote %s (over its canary); the launch fails with "
			        "CUDA_ERROR_ILLEGAL_ADDRESS\n",
			        k->name, offset_words(*a, off).c_str());
			fflush(stderr);
			rc = CUDA_ERROR_ILLEGAL_ADDRESS;
			break;
		}
	}
	if (rc == CUDA_ERROR_ILLEGAL_ADDRESS || rc == CUDA_ERROR_MISALIGNED_ADDRESS || rc == CUDA_ERROR_LAUNCH_FAILED)
		g_sticky = rc;
	return rc;
}

// granularity is the VMM page: 2 MiB, or GDROTRAIN_EMU_VMM_GRANULARITY when
// that is a multiple of the host page.
size_t granularity() {
	const size_t host = (size_t)sysconf(_SC_PAGESIZE);
	size_t g = (size_t)env_u64("GDROTRAIN_EMU_VMM_GRANULARITY", 2u << 20);
	if (g == 0 || g % host != 0) g = 2u << 20;
	return g;
}

// reservation returns the reserved range holding [p, p+n), or nullptr.
Reservation* reservation(uintptr_t p, size_t n, uintptr_t* base) {
	auto it = g_reserved.upper_bound(p);
	if (it == g_reserved.begin()) return nullptr;
	--it;
	if (p < it->first || p - it->first >= it->second.size || n > it->second.size - (p - it->first)) return nullptr;
	*base = it->first;
	return &it->second;
}

void unmap_physical(unsigned long long h) {
	auto it = g_phys.find(h);
	if (it == g_phys.end()) return;
	if (--it->second.maps == 0 && it->second.released) {
		close(it->second.fd);
		g_phys.erase(it);
	}
}

// The primary context's state goes when its last reference does.
void destroy_context_state() {
	for (auto& a : g_allocs) munmap(a.second.map, a.second.map_size);
	g_allocs.clear();
	g_sticky = 0;
	for (auto& r : g_reserved) munmap((void*)r.first, r.second.size);
	g_reserved.clear();
	for (auto& ph : g_phys) close(ph.second.fd);
	g_phys.clear();
	g_live = 0;
	for (Stream* s : g_streams) delete s;
	g_streams.clear();
	for (Event* e : g_events) delete e;
	g_events.clear();
	for (Function* f : g_funcs) delete f;
	g_funcs.clear();
	for (Module* m : g_modules) delete m;
	g_modules.clear();
	for (Graph* g : g_graphs) delete g;
	g_graphs.clear();
	for (GraphExec* x : g_execs) delete x;
	g_execs.clear();
}

struct ErrorInfo {
	int code;
	const char* name;
	const char* msg;
};
const ErrorInfo kErrors[] = {
	{0, "CUDA_SUCCESS", "no error"},
	{1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
	{2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
	{3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
	{4, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
	{100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
	{101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
	{200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
	{209, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"},
	{201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
	{400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
	{401, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"},
	{500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
	{600, "CUDA_ERROR_NOT_READY", "device not ready"},
	{700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
	{701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
	{709, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
	{716, "CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned address"},
	{719, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
	{801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
	{900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing"},
	{901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "operation failed due to a previous error during capture"},
	{908, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", "attempt to terminate a thread-local capture sequence from another thread"},
	{999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};
const ErrorInfo* error_info(int code) {
	for (const ErrorInfo& e : kErrors)
		if (e.code == code) return &e;
	return nullptr;
}

// image_fits_device checks an image of the emulator's NVRTC against the
// device as the driver does: a CUBIN for sm_XY runs on compute capability
// X.Z with Z ≥ Y, and PTX for compute_XY on any compute capability ≥ X.Y
// (the driver compiles it); one for sm_XYa or compute_XYa on X.Y only.
// Anything else is CUDA_ERROR_NO_BINARY_FOR_GPU. Images without the
// emulator's tag (a test's "image") load as before.
int image_fits_device(const char* image, bool* sm90a) {
	const size_t n = sizeof kImageTag - 1;
	*sm90a = true;
	if (strncmp(image, kImageTag, n) != 0) return CUDA_SUCCESS;
	const char* end = strchr(image + n, '\n');
	Target t;
	if (!end || !parse_target(std::string(image + n, end), &t)) return CUDA_ERROR_INVALID_IMAGE;
	*sm90a = t.specific && t.cc == 90;
	int major = 9, minor = 0;
	device_cc(&major, &minor);
	const int cc = 10 * major + minor;
	bool ok;
	if (t.specific) ok = t.cc == cc;
	else if (t.virt) ok = t.cc <= cc;
	else ok = t.cc / 10 == major && t.cc % 10 <= minor;
	return ok ? CUDA_SUCCESS : CUDA_ERROR_NO_BINARY_FOR_GPU;
}

int attribute(int a) {
	switch (a) {
	case 1: return 1024;        // MAX_THREADS_PER_BLOCK
	case 2: return 1024;        // MAX_BLOCK_DIM_X
	case 3: return 1024;        // MAX_BLOCK_DIM_Y
	case 4: return 64;          // MAX_BLOCK_DIM_Z
	case 5: return 2147483647;  // MAX_GRID_DIM_X
	case 6: return 65535;       // MAX_GRID_DIM_Y
	case 7: return 65535;       // MAX_GRID_DIM_Z
	case 8: return 49152;       // MAX_SHARED_MEMORY_PER_BLOCK
	case 9: return 65536;       // TOTAL_CONSTANT_MEMORY
	case 10: return 32;         // WARP_SIZE
	case 12: return 65536;      // MAX_REGISTERS_PER_BLOCK
	case 13: return 1980000;    // CLOCK_RATE (kHz)
	case 16: return 132;        // MULTIPROCESSOR_COUNT
	case 36: return 2619000;    // MEMORY_CLOCK_RATE (kHz)
	case 37: return 5120;       // GLOBAL_MEMORY_BUS_WIDTH
	case 38: return 52428800;   // L2_CACHE_SIZE
	case 39: return 2048;       // MAX_THREADS_PER_MULTIPROCESSOR
	case 75:                    // COMPUTE_CAPABILITY_MAJOR
	case 76: {                  // COMPUTE_CAPABILITY_MINOR
		int major = 9, minor = 0;
		device_cc(&major, &minor);
		return a == 75 ? major : minor;
	}
	case 81: return 233472;     // MAX_SHARED_MEMORY_PER_MULTIPROCESSOR
	case 82: return 65536;      // MAX_REGISTERS_PER_MULTIPROCESSOR
	case 97: return kMaxSharedOptin;  // MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
	default: return 0;
	}
}

}  // namespace

bool device_cc(int* major, int* minor) {
	*major = 9;
	*minor = 0;
	const char* s = getenv("GDROTRAIN_EMU_CC");
	if (!s || !*s) return true;
	int a = 0, b = 0, used = 0;
	if (sscanf(s, "%d.%d%n", &a, &b, &used) != 2 || s[used] != 0 || a < 1 || a > 99 || b < 0 || b > 9) return false;
	*major = a;
	*minor = b;
	return true;
}

bool parse_target(const std::string& s, Target* t) {
	std::string digits;
	if (s.compare(0, 3, "sm_") == 0) {
		digits = s.substr(3);
		t->virt = false;
	} else if (s.compare(0, 8, "compute_") == 0) {
		digits = s.substr(8);
		t->virt = true;
	} else {
		return false;
	}
	t->specific = !digits.empty() && digits.back() == 'a';
	if (t->specific) digits.pop_back();
	if (digits.size() < 2 || digits.size() > 3 || digits[0] == '0') return false;
	for (char c : digits)
		if (c < '0' || c > '9') return false;
	t->cc = atoi(digits.c_str());
	return true;
}

int dev_range_check(uintptr_t p, size_t n) {
	if (n == 0) return CUDA_SUCCESS;
	if (const Alloc* a = find(p)) {
		uintptr_t base = (uintptr_t)a->base;
		return n <= a->size - (p - base) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
	}
	uintptr_t base = 0;
	const Reservation* r = reservation(p, n, &base);
	if (!r) return CUDA_ERROR_INVALID_VALUE;
	const size_t g = r->g;
	for (size_t i = (p - base) / g; i <= (p - base + n - 1) / g; i++)
		if (!r->handle[i] || !r->access[i]) return CUDA_ERROR_ILLEGAL_ADDRESS;
	return CUDA_SUCCESS;
}

bool dev_range_ok(uintptr_t p, size_t n) { return dev_range_check(p, n) == CUDA_SUCCESS; }

int sticky_error() { return g_sticky; }

std::string describe_address(uintptr_t a) {
	char buf[200];
	for (const auto& e : g_allocs) {
		const Alloc& al = e.second;
		if (a >= (uintptr_t)al.map && a - (uintptr_t)al.map < al.map_size)
			return offset_words(al, (long long)(a - (uintptr_t)al.base));
	}
	uintptr_t base = 0;
	if (reservation(a, 1, &base)) {
		snprintf(buf, sizeof buf, "in a page of the range reserved at %#llx that is not mapped or not accessible",
		         (unsigned long long)base);
		return buf;
	}
	return a < 65536 ? "near a null pointer" : "";
}

bool capture(void* stream, GraphOp op, int* rc) {
	if ((uintptr_t)stream <= 2 || !g_streams.count((Stream*)stream)) return false;
	Stream* st = (Stream*)stream;
	if (!st->capture) return false;
	if (st->invalidated) {
		*rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
		return true;
	}
	st->capture->ops.push_back(std::move(op));
	*rc = CUDA_SUCCESS;
	return true;
}

long os_thread() { return syscall(SYS_gettid); }

bool forbidden_in_capture(void* s) {
	// cuThreadExchangeStreamCaptureMode's rules: a thread in the global
	// mode (the default) may not make a potentially unsafe call while it
	// has a capture of its own under way that is not relaxed, or while any
	// other thread has one begun in the global mode; a thread-local thread
	// only minds its own captures; a relaxed one none. A call that names
	// the capturing stream itself (synchronising it, say) conflicts with
	// its capture in every mode. A refused call invalidates the captures
	// that forbade it.
	const long me = os_thread();
	bool any = false;
	for (Stream* st : g_streams) {
		if (!st->capture) continue;
		bool forbids;
		if (st == (Stream*)s)
			forbids = true;
		else if (t_capture_mode == 2)
			forbids = false;
		else if (st->thread == me)
			forbids = st->mode != 2;
		else
			forbids = t_capture_mode == 0 && st->mode == 0;
		if (forbids) {
			st->invalidated = true;
			any = true;
		}
	}
	return any;
}

bool stream_ok(void* s) {
	// NULL is the default stream; 1 and 2 are CU_STREAM_LEGACY and CU_STREAM_PER_THREAD.
	return (uintptr_t)s <= 2 || g_streams.count((Stream*)s) > 0;
}

}  // namespace emu

using namespace emu;

// ---- initialisation and device ----

EMU_API CUresult cuInit(unsigned flags) {
	LOCK;
	if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
	if (env_u64("GDROTRAIN_EMU_NO_DEVICE", 0) != 0) return CUDA_ERROR_NO_DEVICE;
	int major, minor;
	if (!device_cc(&major, &minor)) {
		fprintf(stderr, "gdrotrain CUDA emulator: GDROTRAIN_EMU_CC=%s: want MAJOR.MINOR, e.g. 9.0 or 10.0\n",
		        getenv("GDROTRAIN_EMU_CC"));
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (!g_inited) {
		g_total = env_u64("GDROTRAIN_EMU_MEM_BYTES", kDefaultMem);
		g_inited = true;
	}
	return CUDA_SUCCESS;
}

EMU_API CUresult cuDriverGetVersion(int* v) {
	if (!v) return CUDA_ERROR_INVALID_VALUE;
	*v = 13000;
	return CUDA_SUCCESS;
}

EMU_API CUresult cuDeviceGetCount(int* n) {
	LOCK;
	NEED_INIT;
	if (!n) return CUDA_ERROR_INVALID_VALUE;
	*n = 1;
	return CUDA_SUCCESS;
}

EMU_API CUresult cuDeviceGet(int* dev, int ordinal) {
	LOCK;
	NEED_INIT;
	if (!dev) return CUDA_ERROR_INVALID_VALUE;
	if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
	*dev = 0;
	return CUDA_SUCCESS;
}

EMU_API CUresult cuDeviceGetName(char* name, int len, int dev) {
	LOCK;
	NEED_INIT;
	if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
	if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
	snprintf(name, (size_t)len, "%s", "gdrotrain CPU emulator");
	return CUDA_SUCCESS;
}

EMU_API CUresult cuDeviceGetAttribute(int* v, int attrib, int dev) {
	LOCK;
	NEED_INIT;
	if (!v) return CUDA_ERROR_INVALID_VALUE;
	if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
	*v = attribute(attrib);
	return CUDA_SUCCESS;
}

EMU_API CUresult cuDeviceTotalMem_v2(size_t* bytes, int dev) {
	LOCK;
	NEED_INIT;
	if (!bytes) return CUDA_ERROR_INVALID_VALUE;
	if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
	*bytes = g_total;
	return CUDA_SUCCESS;
}

// ---- context ----

EMU_API CUresult cuDevicePrimaryCtxRetain(void** ctx, int dev) {
	LOCK;
	NEED_INIT;
	if (!ctx) return CUDA_ERROR_INVALID_VALUE;
	if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
	g_ctx.refs++;
	*ctx = &g_ctx;
	return CUDA_SUCCESS;
}

EMU_API CUresult cuDevicePrimaryCtxRelease_v2(int dev) {
	LOCK;
	NEED_INIT;
	if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
	if (g_ctx.refs == 0) return CUDA_ERROR_INVALID_CONTEXT;
	if (--g_ctx.refs == 0) destroy_context_state();
	return CUDA_SUCCESS;
}

EMU_API CUresult cuCtxSetCurrent(void* ctx) {
	LOCK;
	NEED_INIT;
	if (ctx && ctx != &g_ctx) return CUDA_ERROR_INVALID_CONTEXT;
	t_current = (Context*)ctx;
	return CUDA_SUCCESS;
}

EMU_API CUresult cuCtxGetCurrent(void** ctx) {
	LOCK;
	NEED_INIT;
	if (!ctx) return CUDA_ERROR_INVALID_VALUE;
	*ctx = t_current;
	return CUDA_SUCCESS;
}

EMU_API CUresult cuCtxGetDevice(int* dev) {
	LOCK;
	NEED_CTX;
	if (!dev) return CUDA_ERROR_INVALID_VALUE;
	*dev = 0;
	return CUDA_SUCCESS;
}

EMU_API CUresult cuCtxSynchronize(void) {
	LOCK;
	NEED_CTX;
	if (forbidden_in_capture(nullptr)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	return CUDA_SUCCESS;
}

// ---- memory ----

EMU_API CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) {
	LOCK;
	NEED_CTX;
	if (!dptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
	if (forbidden_in_capture(nullptr)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	if (bytes > g_total - g_live) return CUDA_ERROR_OUT_OF_MEMORY;
	Alloc a;
	if (!map_alloc(bytes, &a)) return CUDA_ERROR_OUT_OF_MEMORY;
	g_allocs[(uintptr_t)a.base] = a;
	g_live += bytes;
	*dptr = (CUdeviceptr)(uintptr_t)a.base;
	return CUDA_SUCCESS;
}

EMU_API CUresult cuMemFree_v2(CUdeviceptr p) {
	LOCK;
	NEED_CTX;
	auto it = g_allocs.find((uintptr_t)p);
	if (it == g_allocs.end()) return CUDA_ERROR_INVALID_VALUE;
	if (forbidden_in_capture(nullptr)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	if (long long off = canary_break(it->second)) {
		// Written past its bounds by a kernel whose pointer arguments did
		// not lead to it (say, through a table of pointers).
		fprintf(stderr,
		        "gdrotrain CUDA emulator: cuMemFree: a kernel wrote %s (over its canary); "
		        "CUDA_ERROR_ILLEGAL_ADDRESS\n",
		        offset_words(it->second, off).c_str());
		g_sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
		return g_sticky;
	}
	g_live -= it->second.size;
	munmap(it->second.map, it->second.map_size);
	g_allocs.erase(it);
	return CUDA_SUCCESS;
}

EMU_API CUresult cuMemGetInfo_v2(size_t* freeb, size_t* total) {
	LOCK;
	NEED_CTX;
	if (!freeb || !total) return CUDA_ERROR_INVALID_VALUE;
	*freeb = g_total - g_live;
	*total = g_total;
	return CUDA_SUCCESS;
}

namespace {
CUresult htod_now(CUdeviceptr dst, const void* src, size_t n, void* stream) {
	NEED_CTX;
	if (!stream_ok(stream)) return CUDA_ERROR_INVALID_HANDLE;
	if (n == 0) return CUDA_SUCCESS;
	if (!src) return CUDA_ERROR_INVALID_VALUE;
	if (int rc = dev_range_check(dst, n)) return rc;
	memcpy((void*)(uintptr_t)dst, src, n);
	return CUDA_SUCCESS;
}
CUresult dtoh_now(void* dst, CUdeviceptr src, size_t n, void* stream) {
	NEED_CTX;
	if (!stream_ok(stream)) return CUDA_ERROR_INVALID_HANDLE;
	if (n == 0) return CUDA_SUCCESS;
	if (!dst) return CUDA_ERROR_INVALID_VALUE;
	if (int rc = dev_range_check(src, n)) return rc;
	if (count_only())
		memset(dst, 0, n);  // nothing was computed: the host sees zeros, never garbage
	else
		memcpy(dst, (const void*)(uintptr_t)src, n);
	return CUDA_SUCCESS;
}
CUresult dtod_now(CUdeviceptr dst, CUdeviceptr src, size_t n, void* stream) {
	NEED_CTX;
	if (!stream_ok(stream)) return CUDA_ERROR_INVALID_HANDLE;
	if (n == 0) return CUDA_SUCCESS;
	if (int rc = dev_range_check(dst, n)) return rc;
	if (int rc = dev_range_check(src, n)) return rc;
	if (!count_only()) memmove((void*)(uintptr_t)dst, (const void*)(uintptr_t)src, n);
	return CUDA_SUCCESS;
}
CUresult memset_now(CUdeviceptr dst, unsigned v, size_t n, size_t elem, void* stream) {
	NEED_CTX;
	if (!stream_ok(stream)) return CUDA_ERROR_INVALID_HANDLE;
	if (n == 0) return CUDA_SUCCESS;
	if (dst % elem != 0 || n * elem / elem != n) return CUDA_ERROR_INVALID_VALUE;
	if (int rc = dev_range_check(dst, n * elem)) return rc;
	unsigned char* p = (unsigned char*)(uintptr_t)dst;
	if (count_only()) return CUDA_SUCCESS;
	if (elem == 1) {
		memset(p, (int)(v & 0xff), n);
	} else if (elem == 2) {
		unsigned short w = (unsigned short)v;
		for (size_t i = 0; i < n; i++) memcpy(p + 2 * i, &w, 2);
	} else {
		for (size_t i = 0; i < n; i++) memcpy(p + 4 * i, &v, 4);
	}
	return CUDA_SUCCESS;
}

// The copies and fills as issued: on a capturing stream they are checked
// for the stream now and recorded; the legacy stream's synchronous forms
// are refused while any capture is under way.
CUresult issue(void* stream, bool sync, GraphOp op) {
	NEED_CTX;
	if (!stream_ok(stream)) return CUDA_ERROR_INVALID_HANDLE;
	if (sync && forbidden_in_capture(nullptr)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	int rc = 0;
	if (capture(stream, op, &rc)) return rc;
	return op();
}
CUresult htod(CUdeviceptr dst, const void* src, size_t n, void* stream, bool sync = false) {
	return issue(stream, sync, [=] { return htod_now(dst, src, n, stream); });
}
CUresult dtoh(void* dst, CUdeviceptr src, size_t n, void* stream, bool sync = false) {
	return issue(stream, sync, [=] { return dtoh_now(dst, src, n, stream); });
}
CUresult dtod(CUdeviceptr dst, CUdeviceptr src, size_t n, void* stream, bool sync = false) {
	return issue(stream, sync, [=] { return dtod_now(dst, src, n, stream); });
}
CUresult memset_n(CUdeviceptr dst, unsigned v, size_t n, size_t elem, void* stream, bool sync = false) {
	return issue(stream, sync, [=] { return memset_now(dst, v, n, elem, stream); });
}
}  // namespace

EMU_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) {
	LOCK;
	return htod(dst, src, n, nullptr, true);
}
EMU_API CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) {
	LOCK;
	return dtoh(dst, src, n, nullptr, true);
}
EMU_API CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
	LOCK;
	return dtod(dst, src, n, nullptr, true);
}
EMU_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, void* stream) {
	LOCK;
	return htod(dst, src, n, stream);
}
EMU_API CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, void* stream) {
	LOCK;
	return dtoh(dst, src, n, stream);
}
EMU_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, void* stream) {
	LOCK;
	return dtod(dst, src, n, stream);
}
EMU_API CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t n) {
	LOCK;
	return memset_n(dst, v, n, 1, nullptr, true);
}
EMU_API CUresult cuMemsetD16_v2(CUdeviceptr dst, unsigned short v, size_t n) {
	LOCK;
	return memset_n(dst, v, n, 2, nullptr, true);
}
EMU_API CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned v, size_t n) {
	LOCK;
	return memset_n(dst, v, n, 4, nullptr, true);
}
EMU_API CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, void* stream) {
	LOCK;
	return memset_n(dst, v, n, 1, stream);
}
EMU_API CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned v, size_t n, void* stream) {
	LOCK;
	return memset_n(dst, v, n, 4, stream);
}

// ---- virtual memory management ----

namespace {
// prop_ok accepts what the CUDA backend asks for: pinned device memory on
// device 0, no export handle.
bool prop_ok(const CUmemAllocationProp_emu* p) {
	return p && p->type == 1 && p->requestedHandleTypes == 0 && p->location.type == 1 && p->location.id == 0;
}
}  // namespace

EMU_API CUresult cuMemGetAllocationGranularity(size_t* g, const CUmemAllocationProp_emu* prop, int option) {
	LOCK;
	NEED_CTX;
	if (!g || !prop_ok(prop) || (option != 0 && option != 1)) return CUDA_ERROR_INVALID_VALUE;
	*g = granularity();
	return CUDA_SUCCESS;
}

EMU_API CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t align, CUdeviceptr addr,
                                     unsigned long long flags) {
	LOCK;
	NEED_CTX;
	const size_t g = granularity();
	(void)addr;  // a hint, free to ignore
	if (!ptr || size == 0 || size % g != 0 || flags != 0 || (align & (align - 1)) != 0) return CUDA_ERROR_INVALID_VALUE;
	align = align > g ? align : g;
	// Over-reserve by the alignment and trim both ends to it.
	void* raw = mmap(nullptr, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (raw == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
	uintptr_t r = (uintptr_t)raw, base = (r + align - 1) / align * align;
	if (base > r) munmap(raw, base - r);
	if (r + align > base) munmap((void*)(base + size), r + align - base);
	const size_t n = size / g;
	g_reserved[base] = Reservation{size, g, std::vector<unsigned long long>(n, 0), std::vector<bool>(n, false)};
	*ptr = base;
	return CUDA_SUCCESS;
}

EMU_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
	LOCK;
	NEED_CTX;
	auto it = g_reserved.find((uintptr_t)ptr);
	if (it == g_reserved.end() || it->second.size != size) return CUDA_ERROR_INVALID_VALUE;
	for (unsigned long long h : it->second.handle)
		if (h) return CUDA_ERROR_INVALID_VALUE;  // still mapped: unmap first, as CUDA requires
	munmap((void*)it->first, size);
	g_reserved.erase(it);
	return CUDA_SUCCESS;
}

EMU_API CUresult cuMemCreate(unsigned long long* handle, size_t size, const CUmemAllocationProp_emu* prop,
                             unsigned long long flags) {
	LOCK;
	NEED_CTX;
	if (!handle || size == 0 || size % granularity() != 0 || flags != 0 || !prop_ok(prop)) return CUDA_ERROR_INVALID_VALUE;
	if (size > g_total - g_live) return CUDA_ERROR_OUT_OF_MEMORY;
	int fd = memfd_create("gdrotrain-emu-page", MFD_CLOEXEC);
	if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
	if (ftruncate(fd, (off_t)size) != 0) {
		close(fd);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (!count_only()) {
		// All-NaN like cuMemAlloc's memory, so a read of a row never
		// written shows up.
		void* m = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (m == MAP_FAILED) {
			close(fd);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		memset(m, 0xff, size);
		munmap(m, size);
	}
	g_live += size;
	const unsigned long long h = g_next_handle++;
	g_phys[h] = Physical{fd, size};
	*handle = h;
	return CUDA_SUCCESS;
}

EMU_API CUresult cuMemRelease(unsigned long long handle) {
	LOCK;
	NEED_CTX;
	auto it = g_phys.find(handle);
	if (it == g_phys.end() || it->second.released) return CUDA_ERROR_INVALID_VALUE;
	g_live -= it->second.size;
	it->second.released = true;
	if (it->second.maps == 0) {
		close(it->second.fd);
		g_phys.erase(it);
	}
	return CUDA_SUCCESS;
}

EMU_API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, unsigned long long handle,
                          unsigned long long flags) {
	LOCK;
	NEED_CTX;
	uintptr_t base = 0;
	Reservation* r = reservation(ptr, size, &base);
	const size_t g = r ? r->g : granularity();
	if (!r || size == 0 || flags != 0 || ptr % g != 0 || size % g != 0 || offset % g != 0) return CUDA_ERROR_INVALID_VALUE;
	auto ph = g_phys.find(handle);
	if (ph == g_phys.end() || ph->second.released) return CUDA_ERROR_INVALID_HANDLE;
	if (offset > ph->second.size || size > ph->second.size - offset) return CUDA_ERROR_INVALID_VALUE;
	const size_t i0 = (ptr - base) / g, n = size / g;
	for (size_t i = i0; i < i0 + n; i++)
		if (r->handle[i]) return CUDA_ERROR_INVALID_VALUE;  // already mapped
	if (mmap((void*)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, ph->second.fd, (off_t)offset) == MAP_FAILED)
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (size_t i = i0; i < i0 + n; i++) {
		r->handle[i] = handle;
		r->access[i] = false;
		ph->second.maps++;
	}
	return CUDA_SUCCESS;
}

EMU_API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc_emu* desc, size_t count) {
	LOCK;
	NEED_CTX;
	uintptr_t base = 0;
	Reservation* r = reservation(ptr, size, &base);
	const size_t g = r ? r->g : granularity();
	if (!r || !desc || count == 0 || size == 0 || ptr % g != 0 || size % g != 0) return CUDA_ERROR_INVALID_VALUE;
	int flags = -1;
	for (size_t k = 0; k < count; k++) {
		if (desc[k].location.type != 1 || desc[k].location.id != 0) return CUDA_ERROR_INVALID_DEVICE;
		if (desc[k].flags != 0 && desc[k].flags != 1 && desc[k].flags != 3) return CUDA_ERROR_INVALID_VALUE;
		flags = desc[k].flags;
	}
	const size_t i0 = (ptr - base) / g, n = size / g;
	for (size_t i = i0; i < i0 + n; i++)
		if (!r->handle[i]) return CUDA_ERROR_INVALID_VALUE;  // nothing mapped there
	const int prot = flags == 3 ? PROT_READ | PROT_WRITE : flags == 1 ? PROT_READ : PROT_NONE;
	if (mprotect((void*)ptr, size, prot) != 0) return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = i0; i < i0 + n; i++) r->access[i] = flags != 0;
	return CUDA_SUCCESS;
}

EMU_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
	LOCK;
	NEED_CTX;
	uintptr_t base = 0;
	Reservation* r = reservation(ptr, size, &base);
	const size_t g = r ? r->g : granularity();
	if (!r || size == 0 || ptr % g != 0 || size % g != 0) return CUDA_ERROR_INVALID_VALUE;
	const size_t i0 = (ptr - base) / g, n = size / g;
	for (size_t i = i0; i < i0 + n; i++)
		if (!r->handle[i]) return CUDA_ERROR_INVALID_VALUE;
	if (mmap((void*)ptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) == MAP_FAILED)
		return CUDA_ERROR_UNKNOWN;
	for (size_t i = i0; i < i0 + n; i++) {
		unmap_physical(r->handle[i]);
		r->handle[i] = 0;
		r->access[i] = false;
	}
	return CUDA_SUCCESS;
}

// Page-locked host memory is ordinary host memory here: copies are
// synchronous, so nothing can tell the difference.
EMU_API CUresult cuMemHostAlloc(void** pp, size_t bytes, unsigned flags) {
	LOCK;
	NEED_CTX;
	(void)flags;
	if (!pp || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
	void* p = nullptr;
	if (posix_memalign(&p, 4096, bytes) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
	*pp = p;
	return CUDA_SUCCESS;
}

EMU_API CUresult cuMemFreeHost(void* p) {
	LOCK;
	NEED_CTX;
	free(p);
	return CUDA_SUCCESS;
}

// ---- streams and events ----

EMU_API CUresult cuStreamCreate(void** s, unsigned flags) {
	LOCK;
	NEED_CTX;
	if (!s || (flags & ~1u)) return CUDA_ERROR_INVALID_VALUE;
	Stream* st = new Stream{flags};
	g_streams.insert(st);
	*s = st;
	return CUDA_SUCCESS;
}

EMU_API CUresult cuStreamDestroy_v2(void* s) {
	LOCK;
	NEED_CTX;
	auto it = g_streams.find((Stream*)s);
	if (it == g_streams.end()) return CUDA_ERROR_INVALID_HANDLE;
	delete *it;
	g_streams.erase(it);
	return CUDA_SUCCESS;
}

EMU_API CUresult cuStreamSynchronize(void* s) {
	LOCK;
	NEED_CTX;
	if (!stream_ok(s)) return CUDA_ERROR_INVALID_HANDLE;
	if (forbidden_in_capture(s)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	return CUDA_SUCCESS;
}

EMU_API CUresult cuStreamQuery(void* s) {
	LOCK;
	NEED_CTX;
	if (!stream_ok(s)) return CUDA_ERROR_INVALID_HANDLE;
	if (forbidden_in_capture(s)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	return CUDA_SUCCESS;
}

// ---- stream capture and graphs ----

EMU_API CUresult cuStreamBeginCapture_v2(void* s, int mode) {
	LOCK;
	NEED_CTX;
	if (mode < 0 || mode > 2) return CUDA_ERROR_INVALID_VALUE;
	if ((uintptr_t)s <= 2) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // the legacy stream cannot capture
	if (!g_streams.count((Stream*)s)) return CUDA_ERROR_INVALID_HANDLE;
	Stream* st = (Stream*)s;
	if (st->capture) return CUDA_ERROR_ILLEGAL_STATE;
	st->capture = new Graph();
	st->invalidated = false;
	st->mode = mode;
	st->thread = os_thread();
	return CUDA_SUCCESS;
}

EMU_API CUresult cuStreamEndCapture(void* s, void** graph) {
	LOCK;
	NEED_CTX;
	if (!graph) return CUDA_ERROR_INVALID_VALUE;
	if ((uintptr_t)s <= 2 || !g_streams.count((Stream*)s)) return CUDA_ERROR_INVALID_HANDLE;
	Stream* st = (Stream*)s;
	if (!st->capture) return CUDA_ERROR_ILLEGAL_STATE;
	if (st->mode != 2 && st->thread != os_thread()) {
		// Only a relaxed capture may end on another thread. CUDA does not
		// say what becomes of the capture; the emulator keeps it under way
		// and invalidated, so the stream stays unusable until the thread
		// that began it ends it (and gets no graph).
		st->invalidated = true;
		*graph = nullptr;
		return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
	}
	Graph* g = st->capture;
	st->capture = nullptr;
	*graph = nullptr;
	if (st->invalidated) {
		st->invalidated = false;
		delete g;
		return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	}
	g_graphs.insert(g);
	*graph = g;
	return CUDA_SUCCESS;
}

EMU_API CUresult cuThreadExchangeStreamCaptureMode(int* mode) {
	LOCK;
	NEED_INIT;
	if (!mode || *mode < 0 || *mode > 2) return CUDA_ERROR_INVALID_VALUE;
	const int prev = t_capture_mode;
	t_capture_mode = *mode;
	*mode = prev;
	return CUDA_SUCCESS;
}

EMU_API CUresult cuStreamIsCapturing(void* s, int* status) {
	LOCK;
	NEED_CTX;
	if (!status) return CUDA_ERROR_INVALID_VALUE;
	if (!stream_ok(s)) return CUDA_ERROR_INVALID_HANDLE;
	Stream* st = (uintptr_t)s <= 2 ? nullptr : (Stream*)s;
	*status = !st || !st->capture ? 0 : st->invalidated ? 2 : 1;  // NONE, ACTIVE, INVALIDATED
	return CUDA_SUCCESS;
}

EMU_API CUresult cuGraphInstantiateWithFlags(void** exec, void* graph, unsigned long long flags) {
	LOCK;
	NEED_CTX;
	if (!exec || flags != 0) return CUDA_ERROR_INVALID_VALUE;
	if (!g_graphs.count((Graph*)graph)) return CUDA_ERROR_INVALID_HANDLE;
	GraphExec* x = new GraphExec{((Graph*)graph)->ops};
	g_execs.insert(x);
	*exec = x;
	return CUDA_SUCCESS;
}

EMU_API CUresult cuGraphLaunch(void* exec, void* s) {
	LOCK;
	NEED_CTX;
	if (!g_execs.count((GraphExec*)exec) || !stream_ok(s)) return CUDA_ERROR_INVALID_HANDLE;
	if ((uintptr_t)s > 2 && ((Stream*)s)->capture) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	for (const GraphOp& op : ((GraphExec*)exec)->ops)
		if (int rc = op()) return rc;
	return CUDA_SUCCESS;
}

EMU_API CUresult cuGraphExecDestroy(void* exec) {
	LOCK;
	NEED_CTX;
	auto it = g_execs.find((GraphExec*)exec);
	if (it == g_execs.end()) return CUDA_ERROR_INVALID_HANDLE;
	delete *it;
	g_execs.erase(it);
	return CUDA_SUCCESS;
}

EMU_API CUresult cuGraphDestroy(void* graph) {
	LOCK;
	NEED_CTX;
	auto it = g_graphs.find((Graph*)graph);
	if (it == g_graphs.end()) return CUDA_ERROR_INVALID_HANDLE;
	delete *it;
	g_graphs.erase(it);
	return CUDA_SUCCESS;
}

EMU_API CUresult cuEventCreate(void** e, unsigned flags) {
	LOCK;
	NEED_CTX;
	if (!e || (flags & ~7u)) return CUDA_ERROR_INVALID_VALUE;
	Event* ev = new Event();
	ev->flags = flags;
	g_events.insert(ev);
	*e = ev;
	return CUDA_SUCCESS;
}

EMU_API CUresult cuEventRecord(void* e, void* s) {
	LOCK;
	NEED_CTX;
	if (!g_events.count((Event*)e) || !stream_ok(s)) return CUDA_ERROR_INVALID_HANDLE;
	Event* ev = (Event*)e;
	ev->recorded = true;
	ev->t = std::chrono::steady_clock::now();
	return CUDA_SUCCESS;
}

EMU_API CUresult cuEventSynchronize(void* e) {
	LOCK;
	NEED_CTX;
	return g_events.count((Event*)e) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

EMU_API CUresult cuEventQuery(void* e) {
	LOCK;
	NEED_CTX;
	return g_events.count((Event*)e) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

EMU_API CUresult cuEventElapsedTime(float* ms, void* start, void* end) {
	LOCK;
	NEED_CTX;
	if (!ms) return CUDA_ERROR_INVALID_VALUE;
	Event *a = (Event*)start, *b = (Event*)end;
	if (!g_events.count(a) || !g_events.count(b)) return CUDA_ERROR_INVALID_HANDLE;
	if (!a->recorded || !b->recorded || ((a->flags | b->flags) & 2)) return CUDA_ERROR_INVALID_HANDLE;
	*ms = std::chrono::duration<float, std::milli>(b->t - a->t).count();
	return CUDA_SUCCESS;
}

EMU_API CUresult cuEventDestroy_v2(void* e) {
	LOCK;
	NEED_CTX;
	auto it = g_events.find((Event*)e);
	if (it == g_events.end()) return CUDA_ERROR_INVALID_HANDLE;
	delete *it;
	g_events.erase(it);
	return CUDA_SUCCESS;
}

// ---- modules and launches ----

EMU_API CUresult cuModuleLoadData(void** mod, const void* image) {
	LOCK;
	NEED_CTX;
	if (!mod || !image) return CUDA_ERROR_INVALID_VALUE;
	bool sm90a;
	if (int rc = image_fits_device((const char*)image, &sm90a)) return rc;
	Module* m = new Module();
	m->sm90a = sm90a;
	g_modules.insert(m);
	*mod = m;
	return CUDA_SUCCESS;
}

EMU_API CUresult cuModuleUnload(void* mod) {
	LOCK;
	NEED_CTX;
	auto it = g_modules.find((Module*)mod);
	if (it == g_modules.end()) return CUDA_ERROR_INVALID_HANDLE;
	for (auto& f : (*it)->funcs) {
		g_funcs.erase(f.second);
		delete f.second;
	}
	delete *it;
	g_modules.erase(it);
	return CUDA_SUCCESS;
}

EMU_API CUresult cuModuleGetFunction(void** fn, void* mod, const char* name) {
	LOCK;
	NEED_CTX;
	if (!fn || !name) return CUDA_ERROR_INVALID_VALUE;
	auto it = g_modules.find((Module*)mod);
	if (it == g_modules.end()) return CUDA_ERROR_INVALID_HANDLE;
	const emu_kernel_desc* k = find_kernel(name);
	if (!k) return CUDA_ERROR_NOT_FOUND;
	Function*& f = (*it)->funcs[name];
	if (!f) {
		// ptxas refuses more than 48 KiB of static shared memory (the
		// build checks it too), and dynamic shared memory may fill the
		// rest of 48 KiB unless the function opts into more.
		const int st = (int)static_shared_bytes(k);
		f = new Function{k, st, st < 48 * 1024 ? 48 * 1024 - st : 0, (*it)->sm90a};
		g_funcs.insert(f);
	}
	*fn = f;
	return CUDA_SUCCESS;
}

EMU_API CUresult cuFuncSetAttribute(void* fn, int attrib, int value) {
	LOCK;
	NEED_CTX;
	if (!g_funcs.count((Function*)fn)) return CUDA_ERROR_INVALID_HANDLE;
	if (attrib == 8) {  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
		Function* f = (Function*)fn;
		if (value < 0 || value > kMaxSharedOptin - f->static_shared) return CUDA_ERROR_INVALID_VALUE;
		f->max_dynamic_shared = value;
	}
	return CUDA_SUCCESS;
}

EMU_API CUresult cuLaunchKernel(void* fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                unsigned bz, unsigned shared, void* stream, void** params, void** extra) {
	LOCK;
	NEED_CTX;
	Function* f = (Function*)fn;
	if (!g_funcs.count(f) || !stream_ok(stream)) return CUDA_ERROR_INVALID_HANDLE;
	if (!gx || !gy || !gz || !bx || !by || !bz) return CUDA_ERROR_INVALID_VALUE;
	if (gx > 2147483647u || gy > 65535 || gz > 65535) return CUDA_ERROR_INVALID_VALUE;
	if (bx > 1024 || by > 1024 || bz > 64 || (unsigned long long)bx * by * bz > 1024) return CUDA_ERROR_INVALID_VALUE;
	if ((int)shared < 0 || (int)shared > f->max_dynamic_shared) return CUDA_ERROR_INVALID_VALUE;
	const char* packed = nullptr;
	if (extra) {
		// {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END}
		if (params) return CUDA_ERROR_INVALID_VALUE;
		const size_t* size = nullptr;
		for (void** e = extra; *e; e += 2) {
			if ((uintptr_t)e[0] == 1)
				packed = (const char*)e[1];
			else if ((uintptr_t)e[0] == 2)
				size = (const size_t*)e[1];
			else
				return CUDA_ERROR_INVALID_VALUE;
		}
		if (f->k->nparams > 0 && (!packed || !size || *size < f->k->packed_size)) return CUDA_ERROR_INVALID_VALUE;
		if (!packed) packed = "";
	} else if (!params) {
		if (f->k->nparams > 0) return CUDA_ERROR_INVALID_VALUE;
		static void* none[1];
		params = none;
	}
	const emu_kernel_desc* k = f->k;
	const bool sm90a = f->sm90a;
	const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
	if ((uintptr_t)stream > 2 && ((Stream*)stream)->capture) {
		// A kernel node keeps the argument values of the captured launch.
		std::vector<char> args(k->packed_size + 1);
		if (packed)
			memcpy(args.data(), packed, k->packed_size);
		else
			k->pack(params, args.data());
		int rc = 0;
		capture(stream, [=] {
			if (fault_listed(k->name) || count_only()) return (int)CUDA_SUCCESS;
			return after_launch(k, nullptr, args.data(), launch(k, grid, block, nullptr, args.data(), sm90a));
		}, &rc);
		return rc;
	}
	// GDROTRAIN_EMU_FAULT: a checked launch that leaves memory as it was.
	if (fault_listed(k->name) || count_only()) return CUDA_SUCCESS;
	return after_launch(k, params, packed, launch(k, grid, block, params, packed, sm90a));
}

// ---- errors ----

EMU_API CUresult cuGetErrorName(CUresult code, const char** s) {
	const ErrorInfo* e = error_info(code);
	if (!e || !s) return CUDA_ERROR_INVALID_VALUE;
	*s = e->name;
	return CUDA_SUCCESS;
}

EMU_API CUresult cuGetErrorString(CUresult code, const char** s) {
	const ErrorInfo* e = error_info(code);
	if (!e || !s) return CUDA_ERROR_INVALID_VALUE;
	*s = e->msg;
	return CUDA_SUCCESS;
}
