// emu_cublas.cc: cublasGemmEx and cublasGemmStridedBatchedEx for the CPU
// emulator, column-major exactly as documented. Each C element is one fp32
// running sum over k in order, as a GPU thread of an fp32 GEMM keeps it
// (tensor cores also accumulate in fp32): sum = sum + a·b, one fused step
// each in a GDROTRAIN_EMU_FMA=1 build, a product and a sum rounded
// separately otherwise. CUBLAS_COMPUTE_32F_FAST_TF32 first rounds every A
// and B element to tf32, CUBLAS_COMPUTE_32F_FAST_16BF to bf16 (or to tf32
// with GDROTRAIN_EMU_FAST16BF=tf32), nearest even, so tests see the
// precision a GPU would give. A bf16 C is written rounded to nearest even.
// GDROTRAIN_EMU_FAULT=gemm perturbs every result (see fault()).
// GDROTRAIN_EMU_GEMM_ORDER=shape makes the order of the K sum depend on the
// product's shape, as cuBLAS's choice of algorithm (split-K among others)
// does on a GPU: see gemm_slices().
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <set>
#include <thread>
#include <vector>

#include "emu_internal.h"

namespace emu {
namespace {

enum {
	CUBLAS_STATUS_SUCCESS = 0,
	CUBLAS_STATUS_NOT_INITIALIZED = 1,
	CUBLAS_STATUS_ALLOC_FAILED = 3,
	CUBLAS_STATUS_INVALID_VALUE = 7,
	CUBLAS_STATUS_ARCH_MISMATCH = 8,
	CUBLAS_STATUS_MAPPING_ERROR = 11,
	CUBLAS_STATUS_EXECUTION_FAILED = 13,
	CUBLAS_STATUS_INTERNAL_ERROR = 14,
	CUBLAS_STATUS_NOT_SUPPORTED = 15,
	CUBLAS_STATUS_LICENSE_ERROR = 16,
};
enum { CUDA_R_32F = 0, CUDA_R_16BF = 14 };
enum {
	CUBLAS_COMPUTE_32F = 68,
	CUBLAS_COMPUTE_32F_PEDANTIC = 69,
	CUBLAS_COMPUTE_32F_FAST_16BF = 75,
	CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
};
enum { ROUND_NONE, ROUND_BF16, ROUND_TF32 };

struct Handle {
	void* stream = nullptr;
	int math_mode = 0;
};
std::set<Handle*> g_handles;

inline unsigned f2u(float f) {
	unsigned u;
	memcpy(&u, &f, 4);
	return u;
}
inline float u2f(unsigned u) {
	float f;
	memcpy(&f, &u, 4);
	return f;
}
// Round to a float with only the top `keep` mantissa bits, nearest even.
inline float round_mantissa(float f, int drop) {
	unsigned u = f2u(f);
	if ((u & 0x7f800000u) == 0x7f800000u) return f;  // Inf and NaN unchanged
	unsigned half = (1u << (drop - 1)) - 1, lsb = (u >> drop) & 1u;
	u = (u + half + lsb) & ~((1u << drop) - 1);
	return u2f(u);
}
inline unsigned short to_bf16(float f) {
	unsigned u = f2u(f);
	if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu)) return (unsigned short)((u >> 16) | 0x40);  // quiet NaN
	return (unsigned short)(f2u(round_mantissa(f, 16)) >> 16);
}
inline float from_bf16(unsigned short h) { return u2f((unsigned)h << 16); }

inline size_t elem_size(int t) { return t == CUDA_R_16BF ? 2 : 4; }
inline float load(const void* p, int t, size_t i) {
	if (t == CUDA_R_16BF) return from_bf16(((const unsigned short*)p)[i]);
	return ((const float*)p)[i];
}

struct Gemm {
	int ta, tb, m, n, k;
	float alpha, beta;
	const void* A;
	int at, lda;
	const void* B;
	int bt, ldb;
	void* C;
	int ct, ldc;
	int rounding;
	int slices;  // gemm_slices
};

// Bytes an operand of rows x cols with leading dimension ld spans.
inline size_t extent(int rows, int cols, int ld, size_t es) {
	if (rows == 0 || cols == 0) return 0;
	return ((size_t)(cols - 1) * (size_t)ld + (size_t)rows) * es;
}

// fast16bf_rounding is what CUBLAS_COMPUTE_32F_FAST_16BF rounds its inputs
// to, from GDROTRAIN_EMU_FAST16BF (read at every call), or -1 for a bad value.
int fast16bf_rounding() {
	const char* v = getenv("GDROTRAIN_EMU_FAST16BF");
	if (!v || !*v || strcmp(v, "bf16") == 0) return ROUND_BF16;
	if (strcmp(v, "tf32") == 0) return ROUND_TF32;
	static bool told = false;
	if (!told) {
		told = true;
		fprintf(stderr, "gdrotrain CUDA emulator: GDROTRAIN_EMU_FAST16BF=%s: want bf16 or tf32\n", v);
	}
	return -1;
}

int validate(const Handle* h, int ta, int tb, int m, int n, int k, const void* alpha, int at, int lda, int bt,
             int ldb, const void* beta, int ct, int ldc, int compute, int algo, int* rounding) {
	if (!h || !g_handles.count((Handle*)h)) return CUBLAS_STATUS_NOT_INITIALIZED;
	if (ta < 0 || ta > 2 || tb < 0 || tb > 2) return CUBLAS_STATUS_INVALID_VALUE;
	if (m < 0 || n < 0 || k < 0) return CUBLAS_STATUS_INVALID_VALUE;
	int rowsA = ta == 0 ? m : k, rowsB = tb == 0 ? k : n;
	if (lda < (rowsA > 1 ? rowsA : 1) || ldb < (rowsB > 1 ? rowsB : 1) || ldc < (m > 1 ? m : 1))
		return CUBLAS_STATUS_INVALID_VALUE;
	if (!alpha || !beta) return CUBLAS_STATUS_INVALID_VALUE;
	for (int t : {at, bt, ct})
		if (t != CUDA_R_32F && t != CUDA_R_16BF) return CUBLAS_STATUS_INVALID_VALUE;
	if (!((algo >= -1 && algo <= 23) || (algo >= 99 && algo <= 115))) return CUBLAS_STATUS_INVALID_VALUE;
	switch (compute) {
	case CUBLAS_COMPUTE_32F:
	case CUBLAS_COMPUTE_32F_PEDANTIC:
		// A and B of one type; C fp32, or bf16 with bf16 inputs.
		if (at != bt || (at == CUDA_R_32F && ct != CUDA_R_32F)) return CUBLAS_STATUS_NOT_SUPPORTED;
		*rounding = ROUND_NONE;
		// CUBLAS_TF32_TENSOR_OP_MATH lets plain fp32 GEMMs use TF32.
		if (compute == CUBLAS_COMPUTE_32F && at == CUDA_R_32F && (h->math_mode & 0xf) == 3) *rounding = ROUND_TF32;
		break;
	case CUBLAS_COMPUTE_32F_FAST_16BF:
	case CUBLAS_COMPUTE_32F_FAST_TF32:
		if (at != CUDA_R_32F || bt != CUDA_R_32F || ct != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
		*rounding = compute == CUBLAS_COMPUTE_32F_FAST_16BF ? fast16bf_rounding() : ROUND_TF32;
		if (*rounding < 0) return CUBLAS_STATUS_INVALID_VALUE;
		break;
	default:
		return CUBLAS_STATUS_NOT_SUPPORTED;
	}
	return CUBLAS_STATUS_SUCCESS;
}

inline bool reads_ab(const Gemm& g) { return g.k > 0 && g.alpha != 0.0f; }

bool ranges_ok(const Gemm& g) {
	if (g.m == 0 || g.n == 0) return true;
	if (reads_ab(g)) {
		if (!dev_range_ok((uintptr_t)g.A,
		                  extent(g.ta == 0 ? g.m : g.k, g.ta == 0 ? g.k : g.m, g.lda, elem_size(g.at))))
			return false;
		if (!dev_range_ok((uintptr_t)g.B,
		                  extent(g.tb == 0 ? g.k : g.n, g.tb == 0 ? g.n : g.k, g.ldb, elem_size(g.bt))))
			return false;
	}
	return dev_range_ok((uintptr_t)g.C, extent(g.m, g.n, g.ldc, elem_size(g.ct)));
}

inline float rounded(float v, int r) {
	if (r == ROUND_BF16) v = round_mantissa(v, 16);
	if (r == ROUND_TF32) v = round_mantissa(v, 13);
	return v;
}

// mad is a·b + c: fused in a GDROTRAIN_EMU_FMA=1 build (the build contracts
// too, but an explicit fmaf leaves no choice of which product fuses), two
// roundings otherwise (g++ -std=c++17 does not contract).
#if GDROTRAIN_EMU_FMA
inline float mad(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
#else
inline float mad(float a, float b, float c) { return a * b + c; }
#endif

// gemm_slices is how many slices of K each C element's sum is split into:
// 1 (one running sum over k in order) unless GDROTRAIN_EMU_GEMM_ORDER=shape
// (read at every call), which splits K the way a split-K algorithm does,
// more slices for fewer output elements (8 for m·n ≤ 64, 4 for ≤ 1024, 2
// for ≤ 16384), at most one per 32 k. The slices are summed in order
// inside and then added last to first, so an element's bits depend on m·n:
// on how many rows share the product, as on a GPU. Tests of the
// batch-invariant products set it to prove a product left on cuBLAS fails
// them. Other values than shape and in (the default) are refused.
int gemm_slices(int m, int n, int k, bool* bad) {
	const char* v = getenv("GDROTRAIN_EMU_GEMM_ORDER");
	*bad = false;
	if (!v || !*v || strcmp(v, "in") == 0) return 1;
	if (strcmp(v, "shape") != 0) {
		*bad = true;
		return 1;
	}
	long long mn = (long long)m * n;
	int s = mn <= 64 ? 8 : mn <= 1024 ? 4 : mn <= 16384 ? 2 : 1;
	while (s > 1 && k < 32 * s) s /= 2;
	return s;
}

void run(const Gemm& g) {
	const int m = g.m, n = g.n, k = g.k;
	if (m == 0 || n == 0) return;
	const bool ab = reads_ab(g);
	// op(A) row-major (m x k) and op(B) column-major (k x n), so every dot
	// product walks contiguous memory.
	std::vector<float> Ap, Bp;
	if (ab) {
		Ap.resize((size_t)m * k);
		Bp.resize((size_t)k * n);
		for (int i = 0; i < m; i++)
			for (int p = 0; p < k; p++) {
				size_t idx = g.ta == 0 ? (size_t)i + (size_t)p * g.lda : (size_t)p + (size_t)i * g.lda;
				Ap[(size_t)i * k + p] = rounded(load(g.A, g.at, idx), g.rounding);
			}
		for (int j = 0; j < n; j++)
			for (int p = 0; p < k; p++) {
				size_t idx = g.tb == 0 ? (size_t)p + (size_t)j * g.ldb : (size_t)j + (size_t)p * g.ldb;
				Bp[(size_t)j * k + p] = rounded(load(g.B, g.bt, idx), g.rounding);
			}
	}
	const int slices = g.slices;
	auto columns = [&](int j0, int j1) {
		for (int j = j0; j < j1; j++)
			for (int i = 0; i < m; i++) {
				float acc = 0;
				if (ab) {
					const float* a = &Ap[(size_t)i * k];
					const float* b = &Bp[(size_t)j * k];
					// Slice s sums k in [s·k/S, (s+1)·k/S) in order; the
					// partials are added last to first.
					for (int s = slices - 1; s >= 0; s--) {
						int p0 = (int)((long long)k * s / slices), p1 = (int)((long long)k * (s + 1) / slices);
						float part = 0;
						for (int p = p0; p < p1; p++) part = mad(a[p], b[p], part);
						acc = s == slices - 1 ? part : part + acc;
					}
				}
				size_t ci = (size_t)i + (size_t)j * g.ldc;
				// CUTLASS's epilogue: alpha·acc + (beta·C), the first product fused.
				float r = g.beta != 0.0f ? mad(g.alpha, acc, g.beta * load(g.C, g.ct, ci)) : g.alpha * acc;
				if (g.ct == CUDA_R_16BF)
					((unsigned short*)g.C)[ci] = to_bf16(r);
				else
					((float*)g.C)[ci] = r;
			}
	};
	double work = (double)m * n * (k + 1);
	unsigned nt = 1;
	if (work > (1 << 21)) {
		long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
		nt = (unsigned)(ncpu < 1 ? 1 : ncpu > 16 ? 16 : ncpu);
		if (nt > (unsigned)n) nt = (unsigned)n;
	}
	if (nt <= 1) {
		columns(0, n);
		return;
	}
	std::vector<std::thread> th;
	for (unsigned t = 0; t < nt; t++) th.emplace_back(columns, (int)((long long)n * t / nt), (int)((long long)n * (t + 1) / nt));
	for (auto& t : th) t.join();
}

// fault applies GDROTRAIN_EMU_FAULT=gemm to a computed C: C(0,0) += 1 + |C(0,0)|,
// which any comparison with a tolerance below 1 (absolute) or 100%
// (relative) catches.
void fault(const Gemm& g) {
	if (g.m == 0 || g.n == 0) return;
	float c = load(g.C, g.ct, 0);
	c += 1.0f + fabsf(c);
	if (g.ct == CUDA_R_16BF)
		((unsigned short*)g.C)[0] = to_bf16(c);
	else
		((float*)g.C)[0] = c;
}

}  // namespace
}  // namespace emu

using namespace emu;

#define LOCK std::lock_guard<std::mutex> lock_(api_mutex())

EMU_API int cublasCreate_v2(void** handle) {
	LOCK;
	if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
	if (env_u64("GDROTRAIN_EMU_NO_DEVICE", 0) != 0) return CUBLAS_STATUS_NOT_INITIALIZED;
	Handle* h = new Handle();
	g_handles.insert(h);
	*handle = h;
	return CUBLAS_STATUS_SUCCESS;
}

EMU_API int cublasDestroy_v2(void* handle) {
	LOCK;
	auto it = g_handles.find((Handle*)handle);
	if (it == g_handles.end()) return CUBLAS_STATUS_NOT_INITIALIZED;
	delete *it;
	g_handles.erase(it);
	return CUBLAS_STATUS_SUCCESS;
}

EMU_API int cublasSetStream_v2(void* handle, void* stream) {
	LOCK;
	if (!g_handles.count((Handle*)handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
	if (!stream_ok(stream)) return CUBLAS_STATUS_INVALID_VALUE;
	((Handle*)handle)->stream = stream;
	return CUBLAS_STATUS_SUCCESS;
}

EMU_API int cublasGetStream_v2(void* handle, void** stream) {
	LOCK;
	if (!g_handles.count((Handle*)handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
	if (!stream) return CUBLAS_STATUS_INVALID_VALUE;
	*stream = ((Handle*)handle)->stream;
	return CUBLAS_STATUS_SUCCESS;
}

EMU_API int cublasSetMathMode(void* handle, int mode) {
	LOCK;
	if (!g_handles.count((Handle*)handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
	// DEFAULT 0, TENSOR_OP 1, PEDANTIC 2, TF32_TENSOR_OP 3, optionally | 16
	// (DISALLOW_REDUCED_PRECISION_REDUCTION).
	if ((mode & ~16) < 0 || (mode & ~16) > 3) return CUBLAS_STATUS_INVALID_VALUE;
	((Handle*)handle)->math_mode = mode;
	return CUBLAS_STATUS_SUCCESS;
}

EMU_API int cublasGetMathMode(void* handle, int* mode) {
	LOCK;
	if (!g_handles.count((Handle*)handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
	if (!mode) return CUBLAS_STATUS_INVALID_VALUE;
	*mode = ((Handle*)handle)->math_mode;
	return CUBLAS_STATUS_SUCCESS;
}

EMU_API int cublasGetVersion_v2(void* handle, int* version) {
	(void)handle;
	if (!version) return CUBLAS_STATUS_INVALID_VALUE;
	*version = 130000;
	return CUBLAS_STATUS_SUCCESS;
}

namespace emu {
namespace {
// run_all computes a call's products (checked already), or nothing when
// only counting.
int run_all(const std::vector<Gemm>& batch) {
	if (count_only() || batch.empty()) return CUBLAS_STATUS_SUCCESS;
	const bool faulty = fault_listed("gemm");
	for (const Gemm& g : batch) {
		run(g);
		if (faulty) fault(g);
	}
	return CUBLAS_STATUS_SUCCESS;
}
// issue runs the products now, or records them when the handle's stream
// is capturing (alpha and beta were read at the call, as in host pointer
// mode); a refused capture is an execution failure.
int issue(void* stream, std::vector<Gemm> batch) {
	int rc = 0;
	if (capture(stream, [batch] { return run_all(batch) ? (int)CUDA_ERROR_LAUNCH_FAILED : 0; }, &rc))
		return rc ? CUBLAS_STATUS_EXECUTION_FAILED : CUBLAS_STATUS_SUCCESS;
	return run_all(batch);
}
}  // namespace
}  // namespace emu

EMU_API int cublasGemmEx(void* handle, int transa, int transb, int m, int n, int k, const void* alpha, const void* A,
                         int Atype, int lda, const void* B, int Btype, int ldb, const void* beta, void* C, int Ctype,
                         int ldc, int computeType, int algo) {
	LOCK;
	int rounding = 0;
	int rc = validate((Handle*)handle, transa, transb, m, n, k, alpha, Atype, lda, Btype, ldb, beta, Ctype, ldc,
	                  computeType, algo, &rounding);
	if (rc) return rc;
	if (sticky_error()) return CUBLAS_STATUS_EXECUTION_FAILED;  // a kernel's fault broke the context
	Gemm g{transa ? 1 : 0, transb ? 1 : 0, m, n, k, *(const float*)alpha, *(const float*)beta, A, Atype, lda, B, Btype,
	       ldb, C, Ctype, ldc, rounding, 1};
	bool bad;
	g.slices = gemm_slices(m, n, k, &bad);
	if (bad) return CUBLAS_STATUS_INVALID_VALUE;
	if (!ranges_ok(g)) return CUBLAS_STATUS_EXECUTION_FAILED;
	return issue(((Handle*)handle)->stream, std::vector<Gemm>{g});
}

EMU_API int cublasGemmStridedBatchedEx(void* handle, int transa, int transb, int m, int n, int k, const void* alpha,
                                       const void* A, int Atype, int lda, long long strideA, const void* B, int Btype,
                                       int ldb, long long strideB, const void* beta, void* C, int Ctype, int ldc,
                                       long long strideC, int batchCount, int computeType, int algo) {
	LOCK;
	int rounding = 0;
	int rc = validate((Handle*)handle, transa, transb, m, n, k, alpha, Atype, lda, Btype, ldb, beta, Ctype, ldc,
	                  computeType, algo, &rounding);
	if (rc) return rc;
	if (batchCount < 0) return CUBLAS_STATUS_INVALID_VALUE;
	if (sticky_error()) return CUBLAS_STATUS_EXECUTION_FAILED;
	Gemm g{transa ? 1 : 0, transb ? 1 : 0, m, n, k, *(const float*)alpha, *(const float*)beta, A, Atype, lda, B, Btype,
	       ldb, C, Ctype, ldc, rounding, 1};
	bool bad;
	g.slices = gemm_slices(m, n, k, &bad);
	if (bad) return CUBLAS_STATUS_INVALID_VALUE;
	std::vector<Gemm> batch;
	for (int b = 0; b < batchCount; b++) {
		Gemm gb = g;
		gb.A = (const char*)A + (long long)b * strideA * (long long)elem_size(Atype);
		gb.B = (const char*)B + (long long)b * strideB * (long long)elem_size(Btype);
		gb.C = (char*)C + (long long)b * strideC * (long long)elem_size(Ctype);
		if (!ranges_ok(gb)) return CUBLAS_STATUS_EXECUTION_FAILED;
		batch.push_back(gb);
	}
	return issue(((Handle*)handle)->stream, batch);
}

EMU_API const char* cublasGetStatusName(int status) {
	switch (status) {
	case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
	case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
	case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
	case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
	case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
	case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
	case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
	case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
	case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
	case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
	default: return "CUBLAS_STATUS_UNKNOWN";
	}
}
