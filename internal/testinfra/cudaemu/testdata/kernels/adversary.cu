// Planted bugs: each kernel has one of the defects the emulator must catch
// (see the package doc and driver.cc's tests of the same names).

#define FULL_MASK 0xffffffffu

// hazard_shuffle: each thread writes its element of shared memory, then the
// warps meet only at a shuffle (no __syncthreads) before each thread reads
// an element another warp wrote. Blocks of 64 threads (two warps).
extern "C" __global__ void hazard_shuffle(int* out) {
	__shared__ int sh[64];
	const int t = threadIdx.x;
	sh[t] = (int)blockIdx.x * 100 + t;
	const int x = __shfl_xor_sync(FULL_MASK, t, 1);
	out[blockIdx.x * 64 + t] = sh[63 - t] + (x ^ t ^ 1);
}

// hazard_fixed: hazard_shuffle with the __syncthreads it needs.
extern "C" __global__ void hazard_fixed(int* out) {
	__shared__ int sh[64];
	const int t = threadIdx.x;
	sh[t] = (int)blockIdx.x * 100 + t;
	const int x = __shfl_xor_sync(FULL_MASK, t, 1);
	__syncthreads();
	out[blockIdx.x * 64 + t] = sh[63 - t] + (x ^ t ^ 1);
}

// shfl_exited: lanes 16 to 31 return; the rest shuffle with the full mask
// (legal: exited lanes are not waited for). out[0..15]: down by 8 (lanes 8
// to 15 read exited lanes: undefined); out[16..31]: idx lane 20 with mask
// 0xffff (outside the mask: undefined); out[32..47]: down by 8 in segments
// of 16 with mask 0xffff (lanes 8 to 15 fall out of their segment and keep
// their own value: defined).
extern "C" __global__ void shfl_exited(int* out) {
	const int lane = threadIdx.x & 31;
	if (lane >= 16) return;
	const int v = lane * 10;
	out[lane] = __shfl_down_sync(FULL_MASK, v, 8);
	out[16 + lane] = __shfl_sync(0xffffu, v, 20);
	out[32 + lane] = __shfl_down_sync(0xffffu, v, 8, 16);
}

// shfl_unreached: lane 5 goes to __syncthreads while the rest of its warp
// waits for it at a full-mask shuffle.
extern "C" __global__ void shfl_unreached(int* out) {
	int v = threadIdx.x;
	if (threadIdx.x == 5)
		__syncthreads();
	else
		v = __shfl_xor_sync(FULL_MASK, v, 1);
	out[threadIdx.x] = v;
}

// shfl_mismatch: the lanes of a warp meet with the full mask at different
// warp operations (a shuffle and a vote).
extern "C" __global__ void shfl_mismatch(int* out) {
	int v = threadIdx.x;
	if (threadIdx.x & 1)
		v = __shfl_xor_sync(FULL_MASK, v, 1);
	else
		v = (int)__ballot_sync(FULL_MASK, v > 3);
	out[threadIdx.x] = v;
}

// shfl_not_in_mask: lane 3 calls a shuffle whose mask leaves it out.
extern "C" __global__ void shfl_not_in_mask(int* out) {
	const unsigned mask = threadIdx.x == 3 ? 0xfffffff0u : FULL_MASK;
	out[threadIdx.x] = __shfl_xor_sync(mask, (int)threadIdx.x, 1);
}

// A helper with a __shared__ variable of its own, not inlined: the build
// must find it through the call.
__device__ __noinline__ float helper_scratch(int t, float v) {
	__shared__ float scratch[32];
	if (t < 16) scratch[t] = v;
	__syncthreads();
	return scratch[t & 31];
}

// shared_uninit: odd blocks write every element of sh, even blocks only
// the first 32; every thread reads its own. The even blocks' threads 32 to
// 63 read memory no thread of their block wrote (on a GPU: whatever the
// block before left there). out2 gets helper_scratch's value, which lanes
// 16 to 31 read unwritten likewise.
extern "C" __global__ void shared_uninit(float* out, float* out2) {
	__shared__ float sh[64];
	const int t = threadIdx.x;
	const int limit = blockIdx.x & 1 ? 64 : 32;
	if (t < limit) sh[t] = (float)(blockIdx.x * 100 + t);
	__syncthreads();
	out[blockIdx.x * 64 + t] = sh[t];
	out2[blockIdx.x * 64 + t] = helper_scratch(t, (float)t);
}

// misaligned_load reads a float4 at x + off: misaligned unless off is a
// multiple of 4.
extern "C" __global__ void misaligned_load(const float* x, float* y, int off) {
	const float4 v = *(const float4*)(x + off);
	y[0] = v.x + v.y + v.z + v.w;
}

// write_at and read_at touch element i of p, wherever that is.
extern "C" __global__ void write_at(float* p, long long i) {
	if (threadIdx.x == 0 && blockIdx.x == gridDim.x - 1) p[i] = 1.0f;
}
extern "C" __global__ void read_at(const float* p, long long i, float* out) {
	if (threadIdx.x == 0) out[0] = p[i];
}

// spin_flag: thread 0 waits, spinning on an atomic, for a flag thread 32
// (another warp) sets: it only ends if the other thread gets to run while
// it spins (atomics are preemption points).
extern "C" __global__ void spin_flag(int* flag, int* out) {
	if (threadIdx.x == 32) atomicExch(flag, 1);
	if (threadIdx.x == 0) {
		int spins = 0;
		while (atomicAdd(flag, 0) == 0) spins++;
		out[0] = spins;
	}
}
