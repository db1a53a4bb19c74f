// Kernels of the cp.async tests (driver.cc's cpasync_*): a double-buffered
// tile copy with emu_cp_async16 / emu_cp_async_commit / emu_cp_async_wait,
// planted bugs the emulator must report, and a wgmma reading
// cp.async-landed shared memory.

// wgmma.cu's helpers (each kernel file is a translation unit of its own,
// its functions local to it).
__device__ unsigned long long wg_desc(const void* p, unsigned lbo, unsigned sbo) {
	const unsigned a = (unsigned)__cvta_generic_to_shared(p);
	return (unsigned long long)((a & 0x3FFFF) >> 4) | (unsigned long long)((lbo & 0x3FFFF) >> 4) << 16 |
	       (unsigned long long)((sbo & 0x3FFFF) >> 4) << 32;
}
__device__ unsigned wg_pack(unsigned short lo, unsigned short hi) { return (unsigned)lo | (unsigned)hi << 16; }

// cp_tile issues thread t's 4 copies of tile `tile` (64 rows of 32 floats,
// 8 chunks of 16 bytes a row) of in (nrows rows, ld 32, the first ncols
// columns valid) into buf: rows past nrows read nothing (src_bytes 0),
// columns past ncols are zero-filled.
__device__ void cp_tile(float* buf, const float* in, int tile, int nrows, int ncols, int t, int mode) {
	for (int j = 0; j < 4; j++) {
		const int c = t + 128 * j, r = c / 8, k = c % 8, row = 64 * tile + r;
		int bytes = ncols * 4 - 16 * k;
		bytes = bytes < 0 ? 0 : bytes > 16 ? 16 : bytes;
		if (row >= nrows) bytes = 0;
		const float* src = row < nrows ? in + row * 32 + 4 * k : in;  // not read when bytes is 0
		float* dst = buf + r * 32 + 4 * k;
		if (mode == 5 && t == 5 && j == 0) dst += 1;                   // misaligned dst
		if (mode == 6 && t == 6 && j == 0) src += 2;                   // misaligned src
		if (mode == 7 && t == 7 && j == 0) dst = (float*)in;           // dst in global memory
		if (mode == 8 && t == 8 && j == 0) bytes = 17;                 // src-size 17
		if (mode == 10 && t == 10 && j == 0) src = in + nrows * 32;    // past the end of in
		emu_cp_async16(dst, src, bytes);
	}
}

// cpasync_tiles copies in (nrows × 32 floats, ncols valid) to out (ntiles
// × 64 rows of 32) tile by tile through two shared buffers, the next
// tile's copies in flight while the current one is copied out; each
// thread copies out elements that other threads' copies brought in. mode
// plants a bug (see driver.cc's cpasync_* cases). early (mode 1): each
// thread's first destination word, read before its wait.
extern "C" __global__ void cpasync_tiles(int mode, const float* in, int nrows, int ncols, int ntiles, float* out,
                                         unsigned* early) {
	__shared__ __align__(16) float buf[2][64 * 32];
	const int t = threadIdx.x;
	int tile = blockIdx.x;
	if (tile >= ntiles) return;
	cp_tile(buf[0], in, tile, nrows, ncols, t, mode);
	if (mode == 1) early[blockIdx.x * 128 + t] = __float_as_uint(buf[0][4 * t]);  // read before the wait
	if (mode == 2 && t == 0) buf[0][1] = 1.0f;                                  // dst written in flight
	if (mode == 3 && t == 0 && nrows > 0) ((float*)in)[64 * tile * 32] += 1.0f;  // src modified in flight
	if (mode == 13 && t == 3) emu_cp_async16(buf[0], in, 16);                 // a second copy to thread 0's bytes
	if (mode != 11) emu_cp_async_commit();
	if (mode == 4) return;  // exits with the copies in flight
	if (mode == 14 && (int)gridDim.x >= ntiles) {
		// One tile a block: the empty group comes right after the first.
		emu_cp_async_commit();
		emu_cp_async_wait(1);
		__syncthreads();
		for (int e = t; e < 64 * 32; e += 128) out[(64 * tile + e / 32) * 32 + e % 32] = buf[0][e];
		emu_cp_async_wait(0);
		return;
	}
	for (int i = 0;; i++) {
		const int next = tile + (int)gridDim.x;
		if (next < ntiles) {
			cp_tile(buf[(i + 1) % 2], in, next, nrows, ncols, t, 0);
			if (mode != 11) emu_cp_async_commit();  // mode 11: wait_group does not wait for uncommitted copies
			emu_cp_async_wait(1);
		} else if (mode == 14) {
			// An empty newest group (a pipeline's last, with nothing left
			// to load): wait_group 1 still retires every older group.
			emu_cp_async_commit();
			emu_cp_async_wait(1);
		} else {
			emu_cp_async_wait(0);
		}
		if (mode != 12) __syncthreads();
		const float* b = buf[i % 2];
		for (int e = t; e < 64 * 32; e += 128) out[(64 * tile + e / 32) * 32 + e % 32] = b[e];
		__syncthreads();
		tile = next;
		if (tile >= ntiles) break;
	}
}

// cpasync_wgmma: B of a 64 × 64 product (K-major, LBO 128, SBO 256, as
// wgmma_bug's) brought into shared memory by cp.async, one chunk a thread,
// with fence.proxy.async after the wait (mode 0) or without (mode 1). A
// from registers: row m is all (m+1)/64. out: 64 × 64.
extern "C" __global__ void cpasync_wgmma(int mode, const unsigned short* Bimg, float* out) {
	__shared__ __align__(128) unsigned char sB[2048];
	const int t = threadIdx.x, w = (t / 32) % 4, lane = t % 32, g = lane / 4, q = lane % 4;
	emu_cp_async16(sB + 16 * t, Bimg + 8 * t, 16);
	emu_cp_async_commit();
	emu_cp_async_wait(0);
	if (mode == 0) emu_fence_proxy_async();
	__syncthreads();
	float d[32];
	for (int i = 0; i < 32; i++) d[i] = 0.0f;
	const unsigned short r0 = (unsigned short)(__float_as_uint((float)(16 * w + g + 1) / 64.0f) >> 16),
	                     r1 = (unsigned short)(__float_as_uint((float)(16 * w + g + 9) / 64.0f) >> 16);
	unsigned a[4] = {wg_pack(r0, r0), wg_pack(r1, r1), wg_pack(r0, r0), wg_pack(r1, r1)};
	emu_wgmma_fence();
	emu_wgmma_bf16(d, 64, a, 0, wg_desc(sB, 128, 256), 1, 0, 0);
	emu_wgmma_commit();
	emu_wgmma_wait(0);
	for (int i = 0; i < 32; i++) {
		const int row = 16 * w + g + 8 * ((i % 4) / 2), col = 8 * (i / 4) + 2 * q + (i % 2);
		out[row * 64 + col] = d[i];
	}
}

// cpasync_spin: thread 0 brings 4 floats into shared memory with cp.async
// and, after its wait, raises a flag that thread 1 spins on (atomics, a
// preemption point) before it reads them: the emulator must let the
// waiting thread go although thread 1 can always run. out: 4 floats.
extern "C" __global__ void cpasync_spin(const float* in, float* out) {
	__shared__ __align__(16) float buf[4];
	__shared__ int flag;
	const int t = threadIdx.x;
	if (t == 0) flag = 0;
	__syncthreads();
	if (t == 0) {
		emu_cp_async16(buf, in, 16);
		emu_cp_async_commit();
		emu_cp_async_wait(0);
		__threadfence_block();
		atomicExch(&flag, 1);
	} else if (t == 1) {
		while (atomicAdd(&flag, 0) == 0) {
		}
		__threadfence_block();
		for (int i = 0; i < 4; i++) out[i] = buf[i];
	}
}
