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
// A preemption point: the calling thread yields to the scheduler, always
// (one_in <= 1) or one time in one_in.
void emu_preempt(int one_in);
}

#pragma GCC visibility pop
