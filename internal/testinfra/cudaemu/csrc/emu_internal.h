// emu_internal.h: state shared by the emulator's runtime files (driver API,
// cuBLAS, NVRTC, kernel execution). All of it lives in one shared library;
// libcublas.so.13 and libnvrtc.so.13 are symlinks to libcuda.so.1, so the
// dynamic loader maps a single copy and the three "libraries" share it.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <functional>
#include <mutex>
#include <string>

#include "emu_abi.h"

#define EMU_API extern "C" __attribute__((visibility("default")))

#pragma GCC visibility push(hidden)

namespace emu {

// CUresult values.
enum {
	CUDA_SUCCESS = 0,
	CUDA_ERROR_INVALID_VALUE = 1,
	CUDA_ERROR_OUT_OF_MEMORY = 2,
	CUDA_ERROR_NOT_INITIALIZED = 3,
	CUDA_ERROR_DEINITIALIZED = 4,
	CUDA_ERROR_NO_DEVICE = 100,
	CUDA_ERROR_INVALID_DEVICE = 101,
	CUDA_ERROR_INVALID_IMAGE = 200,
	CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
	CUDA_ERROR_INVALID_CONTEXT = 201,
	CUDA_ERROR_INVALID_HANDLE = 400,
	CUDA_ERROR_ILLEGAL_STATE = 401,
	CUDA_ERROR_NOT_FOUND = 500,
	CUDA_ERROR_NOT_READY = 600,
	CUDA_ERROR_ILLEGAL_ADDRESS = 700,
	CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
	CUDA_ERROR_CONTEXT_IS_DESTROYED = 709,
	CUDA_ERROR_MISALIGNED_ADDRESS = 716,
	CUDA_ERROR_LAUNCH_FAILED = 719,
	CUDA_ERROR_NOT_SUPPORTED = 801,
	CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
	CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
	CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD = 908,
	CUDA_ERROR_UNKNOWN = 999,
};

// Every exported entry point holds this lock for its whole duration, so
// calls from several host threads are serialised.
std::mutex& api_mutex();

// True when [p, p+n) lies inside one live device allocation, or inside
// one reserved range (virtual memory management) where every granule is
// mapped and accessible (n > 0).
bool dev_range_ok(uintptr_t p, size_t n);

// dev_range_ok as a CUresult: CUDA_ERROR_ILLEGAL_ADDRESS for a range of a
// reservation that touches an unmapped or inaccessible granule,
// CUDA_ERROR_INVALID_VALUE for one outside device memory.
int dev_range_check(uintptr_t p, size_t n);

// The virtual memory calls' structs, laid out as cuda.h's
// CUmemAllocationProp and CUmemAccessDesc.
struct CUmemLocation_emu {
	int type;
	int id;
};
struct CUmemAllocationProp_emu {
	int type;
	int requestedHandleTypes;
	CUmemLocation_emu location;
	void* win32HandleMetaData;
	unsigned char allocFlags[8];
};
struct CUmemAccessDesc_emu {
	CUmemLocation_emu location;
	int flags;
};

// True when s is the default stream or a live stream.
bool stream_ok(void* s);

// Stream capture (emu_driver.cc). An op issued on a capturing stream is
// recorded into its graph instead of run, and a launch of the instantiated
// graph runs the recorded ops in order (so a host-to-device copy reads its
// host source then, as on a GPU). capture returns false when stream is not
// capturing (the caller runs the op now); otherwise it has recorded op, or
// refused it with *rc (the capture was invalidated earlier).
typedef std::function<int()> GraphOp;
bool capture(void* stream, GraphOp op, int* rc);

// forbidden_in_capture is for the calls CUDA calls potentially unsafe
// during a capture (allocation, synchronisation, synchronous copies): when
// a capture under way forbids the calling thread such calls (by the modes
// of cuStreamBeginCapture and cuThreadExchangeStreamCaptureMode), it
// invalidates that capture and returns true, and the caller returns
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED. s is the stream named by the call
// (nullptr for context-wide calls); its own capture is refused in any mode.
bool forbidden_in_capture(void* s);

// Kernel registry (filled by the kernel files' static constructors).
const emu_kernel_desc* find_kernel(const char* name);

// Runs a kernel synchronously. Exactly one of params and packed is used.
// A fault in the kernel (an illegal or misaligned address) ends it with
// that CUresult, reported on stderr; the caller makes it sticky. sm90a
// false: the kernel's module was not compiled for sm_90a, so a warpgroup
// MMA in it fails the launch, as its build traps on a GPU.
int launch(const emu_kernel_desc* k, const unsigned grid[3], const unsigned block[3], void** params,
           const char* packed, bool sm90a = true);

// The bytes of a kernel's __shared__ variables (its static shared memory).
size_t static_shared_bytes(const emu_kernel_desc* k);

// describe_address says where an address a kernel faulted at lies
// relative to device memory ("8 bytes past the end of the 1024-byte
// allocation at 0x..."), or "" (emu_driver.cc). Call with api_mutex held.
std::string describe_address(uintptr_t a);

// sticky_error is the error a fault in a kernel left on the context (0
// when none): every later call that needs the context returns it, as on a
// GPU, until the primary context's last reference goes.
int sticky_error();

// Reads a non-negative integer from the environment (dflt when unset or bad).
unsigned long long env_u64(const char* name, unsigned long long dflt);

// True when name (a kernel, or "gemm") is listed in GDROTRAIN_EMU_FAULT,
// read now. The first time a name is faulted a line goes to stderr. Call
// with api_mutex held.
bool fault_listed(const char* name);

// True when GDROTRAIN_EMU_COUNT_ONLY=1, read now: launches and GEMMs are
// checked but not computed, fresh memory is not filled and memsets and
// device-to-device copies move nothing, so a full-size model's step can be
// counted (cuda's step profile) without its arithmetic. Results are garbage.
bool count_only();

// The device's compute capability: GDROTRAIN_EMU_CC ("10.0", "12.0"; read
// now), 9.0 when unset. False when the variable is malformed.
bool device_cc(int* major, int* minor);

// Images from the emulator's NVRTC start with kImageTag and the target
// they were compiled for ("sm_90a", "compute_90") on one line, then the
// source; cuModuleLoadData checks the target against the device as the
// driver does (emu_driver.cc).
constexpr const char kImageTag[] = "//gdrotrain-emu-image ";

// A compilation target: sm_XY (CUBIN) or compute_XY (PTX), with the
// architecture-specific suffix a.
struct Target {
	int cc = 0;             // 10·major + minor
	bool virt = false;      // compute_XY: PTX the driver JITs
	bool specific = false;  // the a suffix: runs on exactly this compute capability
};

// parse_target reads "sm_90a", "compute_100" and the like.
bool parse_target(const std::string& s, Target* t);

}  // namespace emu

#pragma GCC visibility pop
