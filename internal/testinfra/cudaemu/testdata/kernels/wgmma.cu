// Kernels of the wgmma tests (driver.cc's wgmma_*): products with
// emu_wgmma_bf16, the equality of a wgmma with n = 8 and mma.sync, and
// planted bugs the emulator must report.

__device__ unsigned long long wg_desc(const void* p, unsigned lbo, unsigned sbo) {
	const unsigned a = (unsigned)__cvta_generic_to_shared(p);
	return (unsigned long long)((a & 0x3FFFF) >> 4) | (unsigned long long)((lbo & 0x3FFFF) >> 4) << 16 |
	       (unsigned long long)((sbo & 0x3FFFF) >> 4) << 32;
}

__device__ unsigned wg_pack(unsigned short lo, unsigned short hi) { return (unsigned)lo | (unsigned)hi << 16; }

// wgmma_gemm: out (64 × n per warpgroup) = [Dinit +] A · B over ksteps
// k16 steps. cfg: n, ksteps, rs, tnsp_a, tnsp_b, scale_d of the first
// step, A's LBO, SBO and swizzle mode, B's LBO, SBO and swizzle mode, the
// bytes of the A and B images, K, mode (0: one commit group, waited for
// with 0; 1: a group per step, wait(ksteps-1) then wait(0)), then the
// start offsets of A's 4 k-steps and of B's. imgA and imgB are the
// shared-memory images the driver built; Alog is A (64 × 16·ksteps, bf16,
// row major), for RS.
extern "C" __global__ void wgmma_gemm(const int* cfg, const unsigned char* imgA, const unsigned char* imgB,
                                      const unsigned short* Alog, const float* Dinit, float* out) {
	__shared__ __align__(1024) unsigned char sA[12288];
	__shared__ __align__(1024) unsigned char sB[36864];
	const int n = cfg[0], ks = cfg[1], rs = cfg[2], ta = cfg[3], tb = cfg[4], scale0 = cfg[5];
	const int t = threadIdx.x, nt = blockDim.x;
	for (int i = t; i < cfg[12]; i += nt) sA[i] = imgA[i];
	for (int i = t; i < cfg[13]; i += nt) sB[i] = imgB[i];
	emu_fence_proxy_async();
	__syncthreads();
	const int wg = t / 128, w = (t / 32) % 4, lane = t % 32, g = lane / 4, q = lane % 4;
	float d[128];
	for (int i = 0; i < n / 2; i++) {
		const int row = 16 * w + g + 8 * ((i % 4) / 2), col = 8 * (i / 4) + 2 * q + (i % 2);
		d[i] = Dinit[row * n + col];
	}
	unsigned a[4][4];
	const int K = 16 * ks;
	if (rs)
		for (int s = 0; s < ks; s++) {
			const unsigned short* r0 = Alog + (16 * w + g) * K + 16 * s;
			const unsigned short* r1 = r0 + 8 * K;
			a[s][0] = wg_pack(r0[2 * q], r0[2 * q + 1]);
			a[s][1] = wg_pack(r1[2 * q], r1[2 * q + 1]);
			a[s][2] = wg_pack(r0[2 * q + 8], r0[2 * q + 9]);
			a[s][3] = wg_pack(r1[2 * q + 8], r1[2 * q + 9]);
		}
	emu_wgmma_fence();
	for (int s = 0; s < ks; s++) {
		const unsigned long long ad = rs ? 0 : wg_desc(sA + cfg[16 + s], cfg[6], cfg[7]) | (unsigned long long)cfg[8] << 62;
		const unsigned long long bd = wg_desc(sB + cfg[20 + s], cfg[9], cfg[10]) | (unsigned long long)cfg[11] << 62;
		emu_wgmma_bf16(d, n, rs ? a[s] : nullptr, ad, bd, s == 0 ? scale0 : 1, ta, tb);
		if (cfg[15] == 1) emu_wgmma_commit();
	}
	if (cfg[15] == 0) {
		emu_wgmma_commit();
		emu_wgmma_wait(0);
	} else {
		emu_wgmma_wait(ks - 1);
		emu_wgmma_wait(0);
	}
	for (int i = 0; i < n / 2; i++) {
		const int row = 16 * w + g + 8 * ((i % 4) / 2), col = 8 * (i / 4) + 2 * q + (i % 2);
		out[wg * 64 * n + row * n + col] = d[i];
	}
}

// wgmma_vs_mma: each warp's rows of C + A·B (A 64 × 16, B 16 × 8, C 64 × 8)
// by mma.sync (out_mma) and by wgmma n = 8 with A from registers (out_rs)
// and from shared memory (out_ss), B K-major in shared memory.
extern "C" __global__ void wgmma_vs_mma(const unsigned short* A, const unsigned short* B, const float* C, float* out_mma,
                                        float* out_rs, float* out_ss) {
	__shared__ __align__(128) unsigned short sA[64 * 16];
	__shared__ __align__(128) unsigned short sB[2 * 64];
	const int t = threadIdx.x, w = t / 32, lane = t % 32, g = lane / 4, q = lane % 4;
	// A K-major: (m, k) at (m%8)·16 + (m/8)·256 + (k%8)·2 + (k/8)·128 bytes;
	// B K-major: (n, k) at n·16 + (k%8)·2 + (k/8)·128.
	for (int i = t; i < 64 * 16; i += 128) {
		const int m = i / 16, k = i % 16;
		sA[((m % 8) * 16 + (m / 8) * 256 + (k % 8) * 2 + (k / 8) * 128) / 2] = A[i];
	}
	if (t < 128) {
		const int k = t / 8, nn = t % 8;
		sB[(nn * 16 + (k % 8) * 2 + (k / 8) * 128) / 2] = B[k * 8 + nn];
	}
	emu_fence_proxy_async();
	__syncthreads();
	const unsigned short* r0 = A + (16 * w + g) * 16;
	const unsigned short* r1 = r0 + 8 * 16;
	unsigned a[4] = {wg_pack(r0[2 * q], r0[2 * q + 1]), wg_pack(r1[2 * q], r1[2 * q + 1]),
	                 wg_pack(r0[2 * q + 8], r0[2 * q + 9]), wg_pack(r1[2 * q + 8], r1[2 * q + 9])};
	unsigned b[2] = {wg_pack(B[(2 * q) * 8 + g], B[(2 * q + 1) * 8 + g]),
	                 wg_pack(B[(2 * q + 8) * 8 + g], B[(2 * q + 9) * 8 + g])};
	float c[4], drs[4], dss[4];
	for (int i = 0; i < 4; i++) {
		const int row = 16 * w + g + 8 * (i / 2), col = 2 * q + (i % 2);
		c[i] = drs[i] = dss[i] = C[row * 8 + col];
	}
	emu_mma_bf16_16816(c, a, b);
	const unsigned long long bd = wg_desc(sB, 128, 256);
	emu_wgmma_fence();
	emu_wgmma_bf16(drs, 8, a, 0, bd, 1, 0, 0);
	emu_wgmma_bf16(dss, 8, nullptr, wg_desc(sA, 128, 256), bd, 1, 0, 0);
	emu_wgmma_commit();
	emu_wgmma_wait(0);
	for (int i = 0; i < 4; i++) {
		const int row = 16 * w + g + 8 * (i / 2), col = 2 * q + (i % 2);
		out_mma[row * 8 + col] = c[i];
		out_rs[row * 8 + col] = drs[i];
		out_ss[row * 8 + col] = dss[i];
	}
}

// wgmma_bug: a 64 × 64 product (A from registers: row m is all (m+1)/64, B
// K-major in shared memory, LBO 128, SBO 256), with the planted bug of
// mode (0 none; see driver.cc's wgmma_bug cases). out: 64 × 64.
extern "C" __global__ void wgmma_bug(int mode, const unsigned short* Bimg, float* out) {
	__shared__ __align__(128) unsigned char sB[2048];
	__shared__ __align__(128) unsigned char sPad[256];
	// Two variables not declared 1024-aligned: one of them is not (the
	// emulator places them as g++ does; a GPU, as ptxas does).
	__shared__ __align__(16) unsigned char sMis0[16];
	__shared__ __align__(16) unsigned char sMis1[2064];
	const int t = threadIdx.x, w = (t / 32) % 4, lane = t % 32, g = lane / 4, q = lane % 4;
	for (int i = t; i < 1024; i += blockDim.x) ((unsigned short*)sB)[i] = Bimg[i];
	sPad[t % 256] = 0;
	if (mode != 6) emu_fence_proxy_async();
	__syncthreads();
	float d[32];
	for (int i = 0; i < 32; i++) d[i] = 0.0f;
	const unsigned short r0 = (unsigned short)(__float_as_uint((float)(16 * w + g + 1) / 64.0f) >> 16),
	                     r1 = (unsigned short)(__float_as_uint((float)(16 * w + g + 9) / 64.0f) >> 16);
	unsigned a[4] = {wg_pack(r0, r0), wg_pack(r1, r1), wg_pack(r0, r0), wg_pack(r1, r1)};
	unsigned long long bd = wg_desc(sB, 128, 256);
	if (mode == 7 && w == 2) bd = wg_desc(sB, 64, 256);            // desc_mismatch
	if (mode == 8) bd |= 1ull << 62 | 1ull << 49;                 // base offset
	if (mode == 9) bd = wg_desc(sB + 16, 128, 256);               // past the end
	if (mode == 10) bd = 16 >> 4 | (bd & ~0x3FFFull);             // outside the window's variables
	if (mode == 13) (void)__cvta_generic_to_shared(out);           // cvta of global memory
	if (mode == 16) {                                               // swizzle_misaligned
		sMis0[t % 16] = sMis1[t] = 0;
		bd = wg_desc((unsigned long long)sMis0 % 1024 ? sMis0 : sMis1, 16, 1024) | 1ull << 62;
	}
	if (mode == 14 && lane == 31) return;                          // lane_missing
	if (mode == 15 && w == 3) return;                              // warp_missing
	if (mode != 5) emu_wgmma_fence();
	if (mode == 18) d[5] = 1.0f;                                  // acc_after_fence
	if (mode == 19) a[2] = wg_pack(r1, r0);                       // a_after_fence
	emu_wgmma_bf16(d, 64, a, 0, bd, 1, 0, 0);
	if (mode == 17) {  // wait1: a second accumulator in a later group is still in flight after wait(1)
		float d2[32];
		for (int i = 0; i < 32; i++) d2[i] = 0.0f;
		emu_wgmma_commit();
		emu_wgmma_fence();
		emu_wgmma_bf16(d2, 64, a, 0, bd, 1, 0, 0);
		emu_wgmma_commit();
		emu_wgmma_wait(1);
		out[64 * 64 + t] = d2[3];
		out[64 * 64 + 128 + t] = d[3];
		emu_wgmma_wait(0);
		out[64 * 64 + 256 + t] = d2[3];
	}
	if (mode == 1) out[64 * 64 + t] = d[3];                        // acc_read
	if (mode == 2) d[1] = d[1] * 2.0f;                             // acc_write
	if (mode == 3) a[0] ^= 1;                                      // a_changed
	if (mode == 4 && t == 0) sB[0] = (unsigned char)~sB[0];        // smem_inflight
	if (mode != 11 && mode != 17) emu_wgmma_commit();
	if (mode == 12) return;                                        // pending_exit
	emu_wgmma_wait(0);
	for (int i = 0; i < 32; i++) {
		const int row = 16 * w + g + 8 * ((i % 4) / 2), col = 8 * (i / 4) + 2 * q + (i % 2);
		out[row * 64 + col] = d[i];
	}
}

// wgmma_loop: the shape of an attention kernel's main loop, for timing
// (driver.cc's perf): 2 warpgroups, each iteration loads a 128 × 64 tile
// of B into shared memory with ordinary stores, fences, and accumulates 4
// chained k-steps of a 64 × 128 product (A: 64 × 64 in shared memory,
// 128B swizzle), then waits.
extern "C" __global__ void wgmma_loop(const unsigned* tiles, float* out, int iters) {
	__shared__ __align__(1024) unsigned char sA[64 * 128];
	__shared__ __align__(1024) unsigned char sB[128 * 128];
	const int t = threadIdx.x;
	for (int i = t; i < 64 * 128 / 4; i += blockDim.x) ((unsigned*)sA)[i] = tiles[i];
	float d[64];
	for (int i = 0; i < 64; i++) d[i] = 0.0f;
	for (int it = 0; it < iters; it++) {
		for (int i = t; i < 128 * 128 / 4; i += blockDim.x) ((unsigned*)sB)[i] = tiles[(it * 977 + i) % 8192];
		emu_fence_proxy_async();
		__syncthreads();
		emu_wgmma_fence();
		for (int s = 0; s < 4; s++)
			emu_wgmma_bf16(d, 128, nullptr, wg_desc(sA + 32 * s, 16, 1024) | 1ull << 62,
			               wg_desc(sB + 32 * s, 16, 1024) | 1ull << 62, 1, 0, 0);
		emu_wgmma_commit();
		emu_wgmma_wait(0);
		__syncthreads();
	}
	float sum = 0;
	for (int i = 0; i < 64; i++) sum += d[i];
	out[blockIdx.x * blockDim.x + t] = sum;
}
