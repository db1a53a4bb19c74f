// emu_abi.h: the interface between kernel translation units (which include
// emu.h) and the emulator runtime (emu_*.cc). Everything here is hidden
// inside the one shared library; nothing is exported to its loader.
#pragma once

#include <stddef.h>

#pragma GCC visibility push(hidden)

// CUDA's index types. threadIdx and blockIdx are per host thread; blockDim
// and gridDim are per launch (launches are serialised).
struct uint3 {
	unsigned x, y, z;
};
struct dim3 {
	unsigned x, y, z;
	constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
	constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
	constexpr operator uint3() const { return uint3{x, y, z}; }
};

extern __thread uint3 threadIdx;
extern __thread uint3 blockIdx;
extern dim3 blockDim;
extern dim3 gridDim;

// One launchable kernel: call unpacks a cuLaunchKernel kernelParams array,
// call_packed a CU_LAUNCH_PARAM_BUFFER_POINTER buffer of packed_size bytes;
// pack copies a kernelParams array into such a buffer (stream capture keeps
// a launch's argument values, as a graph's kernel node does). pointers
// writes, for each parameter, its value if it is a pointer and 0 if not,
// from params or (params null) a packed buffer: the driver checks the
// guard bytes of the allocations a launch was given.
struct emu_kernel_desc {
	const char* name;
	void (*call)(void** params);
	void (*call_packed)(const char* buf);
	unsigned nparams;
	size_t packed_size;
	void (*pack)(void** params, char* buf);
	void (*pointers)(void** params, const char* packed, unsigned long long* out);
};

// A kernel's __shared__ variables (thread_local statics, one copy per
// worker), which the build finds in the kernel's object code: each at an
// offset from an anchor, a thread_local of the same translation unit that
// anchor() returns the calling thread's address of. bytes is their total,
// the kernel's static shared memory.
struct emu_shared_var {
	long long offset;
	size_t size;
};
struct emu_kernel_shared {
	const char* kernel;
	char* (*anchor)(void);
	const emu_shared_var* vars;
	unsigned nvars;
	size_t bytes;
};

extern "C" {
void emu_register_kernel(const emu_kernel_desc* k);
void emu_register_shared(const emu_kernel_shared* s);

// Block- and warp-level operations used by kernel code. __syncthreads waits
// for every thread of the block that has not returned; a warp operation
// waits for the live lanes of its mask.
void emu_syncthreads(void);
int emu_syncthreads_count(int pred);
void emu_syncwarp(unsigned mask);
// mode: 0 idx, 1 up, 2 down, 3 xor (bfly); b and width as in CUDA.
unsigned long long emu_shfl(unsigned long long v, int mode, int b, int width, unsigned mask);
unsigned emu_ballot(int pred, unsigned mask);
// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 for the whole warp
// (every lane must call it): c (4 floats) += A·B with each lane's a (4
// registers of bf16 pairs) and b (2) laid out as the PTX ISA documents.
void emu_mma_bf16_16816(float* c, const unsigned* a, const unsigned* b);
unsigned emu_activemask(void);

// Hopper's warpgroup MMA (PTX wgmma, sm_90a), modelled adversarially (see
// the wgmma section of emu_runtime.cc). A warpgroup is 4 consecutive warps
// (threads 128w to 128w+127 of the block; the block size must be a multiple
// of 128), and every thread of it calls each of these, in the same order:
// wgmma.fence.sync.aligned, wgmma.commit_group.sync.aligned and
// wgmma.wait_group.sync.aligned n (until at most n committed groups are
// pending).
void emu_wgmma_fence(void);
void emu_wgmma_commit(void);
void emu_wgmma_wait(int n);
// fence.proxy.async.shared::cta: the shared memory written so far becomes
// visible to the async proxy (the wgmma operand reads).
void emu_fence_proxy_async(void);
// __cvta_generic_to_shared: the shared-window address of a __shared__
// variable's byte (the window holds the kernel's variables in a fixed
// order, each 1024-byte aligned, from address 1024); wgmma descriptors are
// decoded back through it.
unsigned emu_cvta_shared(const void* p);
// wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16 (n a multiple of 8
// from 8 to 256): d is this thread's n/2 fp32 accumulators, a its 4
// registers of A (from registers: "RS"; tnsp_a ignored) or null (A from
// shared memory through adesc: "SS"); bdesc is B's descriptor; scale_d 0
// gives D = A·B, 1 D = D + A·B; tnsp_a / tnsp_b: 0 K-major, 1 M-/N-major.
// d and a must point at the thread's own accumulator and A arrays (locals
// of the kernel or of a caller, not temporaries of a helper), which live
// until the wgmma_wait that retires the operation: its result is written
// to d then (d reads as NaN until then), a must be unchanged then, and
// both must be as they were at the thread's last emu_wgmma_fence.
void emu_wgmma_bf16(float* d, int n, const unsigned* a, unsigned long long adesc, unsigned long long bdesc,
                    int scale_d, int tnsp_a, int tnsp_b);
// Ampere's asynchronous global-to-shared copy (PTX cp.async, non-bulk),
// modelled adversarially (see the cp.async section of emu_runtime.cc).
// Per thread, not collective. emu_cp_async16 is cp.async.cg.shared.global
// [dst], [src], 16, src_bytes: it copies src_bytes (0 to 16) bytes from
// global src to shared dst and zero-fills the rest of the 16; dst and src
// are 16-byte aligned, src_bytes 0 reads nothing. The copy completes at the
// emu_cp_async_wait that retires its group, never before: its destination
// reads as poison (kCpPoison) until then, and neither it nor the source
// may be written meanwhile. emu_cp_async_commit is cp.async.commit_group
// (the thread's uncommitted copies become a group), emu_cp_async_wait
// cp.async.wait_group n (until at most the n newest committed groups of
// the thread are pending; uncommitted copies stay in flight).
void emu_cp_async16(void* dst, const void* src, int src_bytes);
void emu_cp_async_commit(void);
void emu_cp_async_wait(int n);
// A preemption point: the calling thread yields to the scheduler, always
// (one_in <= 1) or one time in one_in.
void emu_preempt(int one_in);
}

#pragma GCC visibility pop
