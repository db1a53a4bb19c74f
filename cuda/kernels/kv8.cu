// uses fp8.cuh
//
// Writing and reading an fp8 (e4m3) KV cache (fp8.cuh's layout): new keys
// and values are quantised as they are written, with a scale per (token,
// KV head); reads widen codes·scale to fp32. The attention kernels that
// read the cache directly (split-K decode, the fused prefill) dequantise in
// their own loads; these serve everything else (Download, and the
// attention routes that read fp32 keys).

// scatter_rows_fp8: cache row rows[k] = e4m3(src[from[k]]) with its scales,
// for k < n; src is (·, G, D) fp32. Grid (n), 128 threads: warp w takes
// heads w, w+4, …; amax over the head's finite values (fmaxf drops NaN),
// scale amax/448, codes of x·(448/amax), as model.QuantizeE4M3 computes.
extern "C" __global__ void scatter_rows_fp8(unsigned char* dst, const float* src, const int* rows, const int* from,
                                            int n, int G, int D) {
	int k = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	if (k >= n) return;
	long long row = rows[k], rb = kv8_row_bytes(G, D);
	for (int g = warp; g < G; g += blockDim.x >> 5) {
		const float* x = src + ((long long)from[k] * G + g) * D;
		float amax = 0.f;
		for (int d = lane; d < D; d += 32) amax = fmaxf(amax, fabsf(x[d]));
		amax = warp_max(amax);
		float inv = amax > 0.f ? KV8_MAX / amax : 0.f;
		unsigned char* q = dst + row * rb + (long long)g * D;
		for (int d = lane; d < D; d += 32) q[d] = f32_to_e4m3(x[d] * inv);
		if (lane == 0) *(float*)(dst + row * rb + kv8_pad16((long long)G * D) + 4ll * g) = amax / KV8_MAX;
	}
}

// kv8_gather_f32: dst[k] = codes·scale of cache row rows[k] (row k when
// rows is null), for k < n; dst is (n, G, D) fp32. Grid (n, G), 128 threads.
extern "C" __global__ void kv8_gather_f32(float* dst, const unsigned char* src, const int* rows, int n, int G, int D) {
	int k = blockIdx.x, g = blockIdx.y;
	if (k >= n) return;
	long long row = rows ? rows[k] : k;
	const unsigned char* q = kv8_head(src, row, G, g, D);
	float s = kv8_scale(src, row, G, g, D);
	for (int d = threadIdx.x; d < D; d += blockDim.x) dst[((long long)k * G + g) * D + d] = e4m3_to_f32(q[d]) * s;
}

// e4m3_round_trip: y[i] = the code of x[i] widened back (no scale), for the
// test of the device conversions against model.F32ToE4M3 on every float.
extern "C" __global__ void e4m3_round_trip(float* y, unsigned char* codes, const float* x, long long n) {
	for (long long i = gtid(); i < n; i += gstride()) {
		unsigned char c = f32_to_e4m3(x[i]);
		codes[i] = c;
		y[i] = e4m3_to_f32(c);
	}
}
