// Hopper's warpgroup MMA (PTX wgmma.mma_async, bf16 inputs, fp32
// accumulators), prepended after common.cuh to the kernel files that say
// they use it (kernels.go). sm_90a only: NVRTC compiles for sm_90a on a
// compute capability 9.0 device (compileOptions), the backend launches the
// kernels built on these only there, and every other build traps. The CPU
// emulator models each instruction (internal/testinfra/cudaemu: the asynchrony, the
// fences and the shared-memory descriptors, as an adversary).
//
// A warpgroup is 4 consecutive warps (threads 128w … 128w+127); every one
// of its threads calls each function here. wgmma shape m64nNk16: the
// warpgroup's warp w owns rows 16w … 16w+15 of A and D, and a lane holds
// them as mma.m16n8k16 does (g = lane/4, t = lane%4): A's 4 registers are
// rows g and g+8 at k 2t, 2t+1 and 2t+8, 2t+9 (as mma_bf16_16816's a); D's
// N/2 floats are, for each 8 columns j, d[4j] and d[4j+1] = row g, columns
// 8j+2t and 8j+2t+1, d[4j+2] and d[4j+3] = row g+8. So a float d[N/8][4]
// is the same registers as N/8 mma C fragments.
//
// B (and A when not in registers) is read from shared memory through a
// descriptor, in the no-swizzle layout: "core matrices" of 8 rows × 16
// bytes stored as 128 contiguous bytes. Our tiles (WG_TILE) store a tile of
// rows × 128 bf16 columns as core matrices of 8 rows × 8 columns, column
// block c of row block r at byte r·2048 + c·128. Read with K along the
// columns (K-major: keys as B of Q·Kᵀ) the descriptor's LBO (stride between
// core matrices along K) is 128 and its SBO (along M or N) 2048; read with
// K along the rows (MN-major, transposed: values as B of P·V) LBO is 2048
// and SBO 128 (PTX ISA 9.7.15.5.1.2, the canonical layouts).
//
// Issue order: wg_fence() before a group's first wgmma when its
// accumulators or A registers were written by ordinary code; wg_commit()
// after the group; wg_wait<0>() before reading the results, then
// wg_hold(d) so the compiler does not read the registers before the wait.
// Shared memory written by ordinary stores must be published to the
// wgmma's (async) proxy with wg_proxy_fence() before the barrier that
// precedes its use.

#define WG_THREADS 128
#define WG_ROWBLK 2048 // bytes between 8-row blocks of a WG tile (16 core matrices of 128 bytes)
#define WG_COLBLK 128  // bytes between 8-column blocks

// wg_tile_off is the byte offset of row r, columns c8 … c8+7 (c8 a
// multiple of 8) in a WG tile.
__device__ __forceinline__ int wg_tile_off(int r, int c8) { return (r >> 3) * WG_ROWBLK + (c8 >> 3) * WG_COLBLK + (r & 7) * 16; }

// wg_desc is the descriptor of a no-swizzle operand at p (shared, 16-byte
// aligned) with the given strides in bytes.
__device__ __forceinline__ unsigned long long wg_desc(const void* p, unsigned lbo, unsigned sbo) {
	unsigned a = (unsigned)__cvta_generic_to_shared(p);
	return (unsigned long long)((a & 0x3FFFFu) >> 4) | ((unsigned long long)((lbo & 0x3FFFFu) >> 4) << 16) |
	       ((unsigned long long)((sbo & 0x3FFFFu) >> 4) << 32);
}

// cp_async16 copies src_bytes (16, or 0 for none) bytes of global memory
// at src to shared memory at dst without the thread waiting (cp.async,
// sm_80 and later), zero-filling the rest of the 16; both 16-byte aligned.
// cp_async_commit closes the thread's copies issued since the last into a
// group; cp_async_wait<N>() waits until at most N of its groups are in
// flight. Other threads see the data after the barrier that follows the
// wait, and a wgmma after a wg_proxy_fence() too.
#if defined(GDROTRAIN_CUDA_EMULATOR)
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) { emu_cp_async16(dst, src, src_bytes); }
__device__ __forceinline__ void cp_async_commit() { emu_cp_async_commit(); }
template <int N> __device__ __forceinline__ void cp_async_wait() { emu_cp_async_wait(N); }
#elif __CUDA_ARCH__ >= 800
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
	unsigned a = (unsigned)__cvta_generic_to_shared(dst);
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(a), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }
#else
__device__ __forceinline__ void cp_async16(void*, const void*, int) { __trap(); }
__device__ __forceinline__ void cp_async_commit() { __trap(); }
template <int N> __device__ __forceinline__ void cp_async_wait() { __trap(); }
#endif

#if defined(GDROTRAIN_CUDA_EMULATOR)
__device__ __forceinline__ void wg_fence() { emu_wgmma_fence(); }
__device__ __forceinline__ void wg_commit() { emu_wgmma_commit(); }
template <int N> __device__ __forceinline__ void wg_wait() { emu_wgmma_wait(N); }
__device__ __forceinline__ void wg_proxy_fence() { emu_fence_proxy_async(); }
template <int N, int TB> __device__ __forceinline__ void wg_mma_rs(float* d, const unsigned* a, unsigned long long b, int acc) {
	emu_wgmma_bf16(d, N, a, 0ull, b, acc, 0, TB);
}
template <int N, int TA, int TB>
__device__ __forceinline__ void wg_mma_ss(float* d, unsigned long long a, unsigned long long b, int acc) {
	emu_wgmma_bf16(d, N, (const unsigned*)0, a, b, acc, TA, TB);
}
template <int N> __device__ __forceinline__ void wg_hold(float* d) { (void)d; }
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> __device__ __forceinline__ void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory"); }
__device__ __forceinline__ void wg_proxy_fence() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// wg_hold ties the registers to this point: reads of d move no earlier.
template <int N> __device__ __forceinline__ void wg_hold(float* d) {
#pragma unroll
	for (int i = 0; i < N / 2; i++) asm volatile("" : "+f"(d[i])::"memory");
}
template <int TB> __device__ __forceinline__ void wg_mma_rs32(float* d, const unsigned* a, unsigned long long b, int acc) {
	asm volatile("{.reg .pred p; setp.ne.b32 p, %21, 0; wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, {%16, %17, %18, %19}, %20, p, 1, 1, %22;}"
	             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(acc), "n"(TB));
}
template <int TA, int TB> __device__ __forceinline__ void wg_mma_ss32(float* d, unsigned long long a, unsigned long long b, int acc) {
	asm volatile("{.reg .pred p; setp.ne.b32 p, %18, 0; wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, %19, %20;}"
	             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
	             : "l"(a), "l"(b), "r"(acc), "n"(TA), "n"(TB));
}
template <int TB> __device__ __forceinline__ void wg_mma_rs64(float* d, const unsigned* a, unsigned long long b, int acc) {
	asm volatile("{.reg .pred p; setp.ne.b32 p, %37, 0; wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, %38;}"
	             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(acc), "n"(TB));
}
template <int TA, int TB> __device__ __forceinline__ void wg_mma_ss64(float* d, unsigned long long a, unsigned long long b, int acc) {
	asm volatile("{.reg .pred p; setp.ne.b32 p, %34, 0; wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, %35, %36;}"
	             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
	             : "l"(a), "l"(b), "r"(acc), "n"(TA), "n"(TB));
}
template <int TB> __device__ __forceinline__ void wg_mma_rs128(float* d, const unsigned* a, unsigned long long b, int acc) {
	asm volatile("{.reg .pred p; setp.ne.b32 p, %69, 0; wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, %70;}"
	             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(acc), "n"(TB));
}
template <int TA, int TB> __device__ __forceinline__ void wg_mma_ss128(float* d, unsigned long long a, unsigned long long b, int acc) {
	asm volatile("{.reg .pred p; setp.ne.b32 p, %66, 0; wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, %67, %68;}"
	             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
	             : "l"(a), "l"(b), "r"(acc), "n"(TA), "n"(TB));
}
template <int N, int TB> __device__ __forceinline__ void wg_mma_rs(float* d, const unsigned* a, unsigned long long b, int acc) {
	if constexpr (N == 32) wg_mma_rs32<TB>(d, a, b, acc);
	else if constexpr (N == 64) wg_mma_rs64<TB>(d, a, b, acc);
	else wg_mma_rs128<TB>(d, a, b, acc);
}
template <int N, int TA, int TB>
__device__ __forceinline__ void wg_mma_ss(float* d, unsigned long long a, unsigned long long b, int acc) {
	if constexpr (N == 32) wg_mma_ss32<TA, TB>(d, a, b, acc);
	else if constexpr (N == 64) wg_mma_ss64<TA, TB>(d, a, b, acc);
	else wg_mma_ss128<TA, TB>(d, a, b, acc);
}
#else
// Not sm_90a: the backend never launches these kernels here.
__device__ __forceinline__ void wg_fence() { __trap(); }
__device__ __forceinline__ void wg_commit() { __trap(); }
template <int N> __device__ __forceinline__ void wg_wait() { __trap(); }
__device__ __forceinline__ void wg_proxy_fence() { __trap(); }
template <int N, int TB> __device__ __forceinline__ void wg_mma_rs(float*, const unsigned*, unsigned long long, int) { __trap(); }
template <int N, int TA, int TB> __device__ __forceinline__ void wg_mma_ss(float*, unsigned long long, unsigned long long, int) { __trap(); }
template <int N> __device__ __forceinline__ void wg_hold(float*) {}
#endif
