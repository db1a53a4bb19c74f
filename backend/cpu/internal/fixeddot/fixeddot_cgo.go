//go:build cgo

package fixeddot

/*
// No fused multiply-add, and no reassociation (no -ffast-math): the lanes
// below are added as fixeddot.go adds them. The AVX kernel is compiled for
// AVX alone (a target attribute, not -mavx: the binary runs without it), a
// target without FMA, so a multiply and an add can never be fused there
// either. The portable loops are vectorized by cgo's -O2 with the baseline
// SSE (two 4-wide vectors per 8 lanes); GCC's own AVX2 and AVX-512 clones
// of them (target_clones) measured four times slower than SSE, so the AVX
// kernel is written with intrinsics.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize ("fp-contract=off")
#endif

static inline __attribute__((always_inline)) float gd_dot(const float* a, const float* b, long k) {
	float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
	long i = 0;
	for (; i + 8 <= k; i += 8) {
		for (int l = 0; l < 8; l++) {
			float p = a[i + l] * b[i + l];
			s[l] = s[l] + p;
		}
	}
	for (int l = 0; i < k; i++, l++) {
		float p = a[i] * b[i];
		s[l] = s[l] + p;
	}
	return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

// gd_dot4 is gd_dot of one row of a with four columns of b at once: a's
// eight terms are loaded once for four products. Each column keeps its own
// eight lanes, added in gd_dot's order: the same bits.
static inline __attribute__((always_inline)) void gd_dot4(const float* a, const float* b, long ldb, long k, float* out, long ldo) {
	float s0[8] = {0}, s1[8] = {0}, s2[8] = {0}, s3[8] = {0};
	const float *b0 = b, *b1 = b + ldb, *b2 = b + 2 * ldb, *b3 = b + 3 * ldb;
	long i = 0;
	for (; i + 8 <= k; i += 8) {
		for (int l = 0; l < 8; l++) {
			float x = a[i + l];
			float p0 = x * b0[i + l], p1 = x * b1[i + l], p2 = x * b2[i + l], p3 = x * b3[i + l];
			s0[l] = s0[l] + p0;
			s1[l] = s1[l] + p1;
			s2[l] = s2[l] + p2;
			s3[l] = s3[l] + p3;
		}
	}
	for (int l = 0; i < k; i++, l++) {
		float x = a[i];
		float p0 = x * b0[i], p1 = x * b1[i], p2 = x * b2[i], p3 = x * b3[i];
		s0[l] = s0[l] + p0;
		s1[l] = s1[l] + p1;
		s2[l] = s2[l] + p2;
		s3[l] = s3[l] + p3;
	}
	out[0] = ((s0[0] + s0[1]) + (s0[2] + s0[3])) + ((s0[4] + s0[5]) + (s0[6] + s0[7]));
	out[1] = ((s1[0] + s1[1]) + (s1[2] + s1[3])) + ((s1[4] + s1[5]) + (s1[6] + s1[7]));
	out[2] = ((s2[0] + s2[1]) + (s2[2] + s2[3])) + ((s2[4] + s2[5]) + (s2[6] + s2[7]));
	out[3] = ((s3[0] + s3[1]) + (s3[2] + s3[3])) + ((s3[4] + s3[5]) + (s3[6] + s3[7]));
}

// gd_dots_sse is the portable kernel (SSE on x86-64, whatever cgo's -O2
// makes of it elsewhere).
static void gd_dots_sse(float* out, long ldo, const float* a, long lda, long rows, const float* b, long ldb, long cols, long k) {
	long j = 0;
	for (; j + 4 <= cols; j += 4) {
		for (long i = 0; i < rows; i++) {
			gd_dot4(a + i * lda, b + j * ldb, ldb, k, out + i * ldo + j, ldo);
		}
	}
	for (; j < cols; j++) {
		for (long i = 0; i < rows; i++) {
			out[i * ldo + j] = gd_dot(a + i * lda, b + j * ldb, k);
		}
	}
}

// gd_dotsn_c is gd_dots_sse with b's vectors as columns: term p of
// column j is b[p·ldb + j] (a row-major K×N matrix, not packed).
static void gd_dotsn_c(float* out, long ldo, const float* a, long lda, long rows, const float* b, long ldb, long cols, long k) {
	for (long i = 0; i < rows; i++) {
		const float* ai = a + i * lda;
		for (long j = 0; j < cols; j++) {
			float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
			long p = 0;
			for (; p + 8 <= k; p += 8) {
				for (int l = 0; l < 8; l++) {
					float t = ai[p + l] * b[(p + l) * ldb + j];
					s[l] = s[l] + t;
				}
			}
			for (int l = 0; p < k; p++, l++) {
				float t = ai[p] * b[p * ldb + j];
				s[l] = s[l] + t;
			}
			out[i * ldo + j] = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
		}
	}
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define GD_HAVE_AVX 1
#define GD_AVX __attribute__((target("avx")))

// The AVX kernel: one ymm register holds a dot's eight lanes, so lane l of
// term chunk i is term 8i+l, as in gd_dot; a vmulps then a vaddps per
// chunk (AVX has no FMA). A tile of GD_R rows by GD_C columns is computed
// at once, so each loaded chunk of a row serves GD_C dots and each chunk
// of a column GD_R: 12 accumulators, 3 column chunks and one product fill
// the 16 ymm registers.
#ifndef GD_R
#define GD_R 4
#define GD_C 3
#endif

// gd_mask[8-r:][:8] keeps the first r lanes: the K tail's chunk, whose
// missing terms load as +0 and add +0 to lanes that are never −0 (they
// start at +0, and x + y is −0 only when both are).
static const int gd_mask[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

// gd_sum4 stores the sums of up to four accumulators' lanes, each in
// gd_dot's tree: the first hadd makes (s0+s1, s2+s3 | s4+s5, s6+s7), the
// second ((s0+s1)+(s2+s3) | (s4+s5)+(s6+s7)), the last add joins the two
// halves.
static inline __attribute__((always_inline)) GD_AVX void gd_sum4(int n, __m256 s0, __m256 s1, __m256 s2, __m256 s3, float* out) {
	__m256 h = _mm256_hadd_ps(_mm256_hadd_ps(s0, s1), _mm256_hadd_ps(s2, s3));
	__m128 t = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
	if (n == 4) {
		_mm_storeu_ps(out, t);
		return;
	}
	float v[4];
	_mm_storeu_ps(v, t);
	for (int c = 0; c < n; c++) {
		out[c] = v[c];
	}
}

// gd_tile_avx computes the R×C dots of rows a (lda apart) and columns b
// (ldb apart) into out (ldo apart); R ≤ GD_R and C ≤ GD_C are constants
// where it is inlined, so the loops unroll and the accumulators stay in
// registers.
static inline __attribute__((always_inline)) GD_AVX void gd_tile_avx(const int R, const int C, const float* a, long lda,
		const float* b, long ldb, long k, float* out, long ldo) {
	__m256 s[8][4];
#pragma GCC unroll 8
	for (int r = 0; r < R; r++) {
#pragma GCC unroll 8
		for (int c = 0; c < C; c++) {
			s[r][c] = _mm256_setzero_ps();
		}
	}
	long i = 0;
	for (; i + 8 <= k; i += 8) {
		__m256 bv[4];
#pragma GCC unroll 8
		for (int c = 0; c < C; c++) {
			bv[c] = _mm256_loadu_ps(b + c * ldb + i);
		}
#pragma GCC unroll 8
		for (int r = 0; r < R; r++) {
			__m256 av = _mm256_loadu_ps(a + r * lda + i);
#pragma GCC unroll 8
			for (int c = 0; c < C; c++) {
				s[r][c] = _mm256_add_ps(s[r][c], _mm256_mul_ps(av, bv[c]));
			}
		}
	}
	if (i < k) {
		__m256i m = _mm256_loadu_si256((const __m256i*)(gd_mask + 8 - (k - i)));
		__m256 bv[4];
#pragma GCC unroll 8
		for (int c = 0; c < C; c++) {
			bv[c] = _mm256_maskload_ps(b + c * ldb + i, m);
		}
#pragma GCC unroll 8
		for (int r = 0; r < R; r++) {
			__m256 av = _mm256_maskload_ps(a + r * lda + i, m);
#pragma GCC unroll 8
			for (int c = 0; c < C; c++) {
				s[r][c] = _mm256_add_ps(s[r][c], _mm256_mul_ps(av, bv[c]));
			}
		}
	}
	__m256 z = _mm256_setzero_ps();
#pragma GCC unroll 8
	for (int r = 0; r < R; r++) {
		gd_sum4(C, s[r][0], C > 1 ? s[r][1] : z, C > 2 ? s[r][2] : z, C > 3 ? s[r][3] : z, out + r * ldo);
	}
}

// gd_tile_avx_n is gd_tile_avx with R and C known only at run time (the
// edges of the block): one inlined copy per pair.
static GD_AVX void gd_tile_avx_n(int R, int C, const float* a, long lda, const float* b, long ldb, long k, float* out, long ldo) {
#define GD_T(r) \
	switch (C) { \
	case 1: gd_tile_avx(r, 1, a, lda, b, ldb, k, out, ldo); return; \
	case 2: gd_tile_avx(r, 2, a, lda, b, ldb, k, out, ldo); return; \
	case 3: gd_tile_avx(r, 3, a, lda, b, ldb, k, out, ldo); return; \
	default: gd_tile_avx(r, 4, a, lda, b, ldb, k, out, ldo); return; \
	}
	switch (R) {
	case 1: GD_T(1)
	case 2: GD_T(2)
	case 3: GD_T(3)
	case 4: GD_T(4)
	case 5: GD_T(5)
	case 6: GD_T(6)
	case 7: GD_T(7)
	default: GD_T(8)
	}
#undef GD_T
}

static GD_AVX void gd_dots_avx(float* out, long ldo, const float* a, long lda, long rows, const float* b, long ldb, long cols, long k) {
	for (long j = 0; j < cols; j += GD_C) {
		int C = cols - j < GD_C ? (int)(cols - j) : GD_C;
		for (long i = 0; i < rows; i += GD_R) {
			int R = rows - i < GD_R ? (int)(rows - i) : GD_R;
			const float* ai = a + i * lda;
			const float* bj = b + j * ldb;
			float* o = out + i * ldo + j;
			if (R == GD_R && C == GD_C) {
				gd_tile_avx(GD_R, GD_C, ai, lda, bj, ldb, k, o, ldo);
			} else {
				gd_tile_avx_n(R, C, ai, lda, bj, ldb, k, o, ldo);
			}
		}
	}
}

// gd_dotsn_avx8 computes one row of a with eight columns of a row-major
// b (the first n of them; the others are neither read nor written): lane
// l of the dots is a register s[l] over the eight columns, term p goes to
// s[p mod 8] as a broadcast a[p] times b's row p, and the sum is gd_dot's
// tree taken across the registers, column by column. No packing.
static inline __attribute__((always_inline)) GD_AVX void gd_dotsn_avx8(const int full, int n, const float* ai,
		const float* bj, long ldb, long k, float* out) {
	__m256i m = _mm256_loadu_si256((const __m256i*)(gd_mask + 8 - n));
	__m256 s[8];
#pragma GCC unroll 8
	for (int l = 0; l < 8; l++) {
		s[l] = _mm256_setzero_ps();
	}
	long p = 0;
	for (; p + 8 <= k; p += 8) {
#pragma GCC unroll 8
		for (int l = 0; l < 8; l++) {
			const float* row = bj + (p + l) * ldb;
			__m256 bv = full ? _mm256_loadu_ps(row) : _mm256_maskload_ps(row, m);
			s[l] = _mm256_add_ps(s[l], _mm256_mul_ps(_mm256_broadcast_ss(ai + p + l), bv));
		}
	}
#pragma GCC unroll 8
	for (int l = 0; l < 8; l++) {
		if (p + l < k) {
			const float* row = bj + (p + l) * ldb;
			__m256 bv = full ? _mm256_loadu_ps(row) : _mm256_maskload_ps(row, m);
			s[l] = _mm256_add_ps(s[l], _mm256_mul_ps(_mm256_broadcast_ss(ai + p + l), bv));
		}
	}
	__m256 t = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(s[0], s[1]), _mm256_add_ps(s[2], s[3])),
		_mm256_add_ps(_mm256_add_ps(s[4], s[5]), _mm256_add_ps(s[6], s[7])));
	if (full) {
		_mm256_storeu_ps(out, t);
	} else {
		_mm256_maskstore_ps(out, m, t);
	}
}

static GD_AVX void gd_dotsn_avx(float* out, long ldo, const float* a, long lda, long rows, const float* b, long ldb, long cols, long k) {
	for (long j = 0; j < cols; j += 8) {
		int n = cols - j < 8 ? (int)(cols - j) : 8;
		for (long i = 0; i < rows; i++) {
			if (n == 8) {
				gd_dotsn_avx8(1, 8, a + i * lda, b + j, ldb, k, out + i * ldo + j);
			} else {
				gd_dotsn_avx8(0, n, a + i * lda, b + j, ldb, k, out + i * ldo + j);
			}
		}
	}
}
#else
#define GD_HAVE_AVX 0
static void gd_dots_avx(float* out, long ldo, const float* a, long lda, long rows, const float* b, long ldb, long cols, long k) {
	gd_dots_sse(out, ldo, a, lda, rows, b, ldb, cols, k);
}

static void gd_dotsn_avx(float* out, long ldo, const float* a, long lda, long rows, const float* b, long ldb, long cols, long k) {
	gd_dotsn_c(out, ldo, a, lda, rows, b, ldb, cols, k);
}
#endif

static int gd_have_avx(void) { return GD_HAVE_AVX; }

// gd_dots runs a kernel: avx or the portable loop, on b's vectors as
// rows (colmajor 0, packed) or as columns (1, a row-major K×N matrix).
static void gd_dots(int avx, int colmajor, float* out, long ldo, const float* a, long lda, long rows, const float* b, long ldb, long cols, long k) {
	if (colmajor) {
		if (avx) {
			gd_dotsn_avx(out, ldo, a, lda, rows, b, ldb, cols, k);
		} else {
			gd_dotsn_c(out, ldo, a, lda, rows, b, ldb, cols, k);
		}
	} else if (avx) {
		gd_dots_avx(out, ldo, a, lda, rows, b, ldb, cols, k);
	} else {
		gd_dots_sse(out, ldo, a, lda, rows, b, ldb, cols, k);
	}
}
*/
import "C"

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// kernels lists the kernels this build and this machine can run, the
// fastest last: Go always, the portable C loop, and the AVX one where the
// CPU and the OS have AVX (CPUID and XGETBV, read by x/sys/cpu).
func kernels() []kernel {
	ks := []kernel{kernelGo, kernelSSE}
	if C.gd_have_avx() != 0 && cpu.X86.HasAVX {
		ks = append(ks, kernelAVX)
	}
	return ks
}

// dotsWith is Dots (cols false) or DotsN (cols true) computed by kernel kn.
func dotsWith(kn kernel, colB bool, out []float32, ldo int, a []float32, lda, rows int, b []float32, ldb, cols, k int) {
	if rows == 0 || cols == 0 {
		return
	}
	if k == 0 || kn == kernelGo {
		dotsGo(colB, out, ldo, a, lda, rows, b, ldb, cols, k)
		return
	}
	_ = out[(rows-1)*ldo+cols-1]
	_ = a[(rows-1)*lda+k-1]
	if colB {
		_ = b[(k-1)*ldb+cols-1]
	} else {
		_ = b[(cols-1)*ldb+k-1]
	}
	avx, cm := C.int(0), C.int(0)
	if kn == kernelAVX {
		avx = 1
	}
	if colB {
		cm = 1
	}
	C.gd_dots(avx, cm, (*C.float)(unsafe.Pointer(&out[0])), C.long(ldo), (*C.float)(unsafe.Pointer(&a[0])), C.long(lda), C.long(rows),
		(*C.float)(unsafe.Pointer(&b[0])), C.long(ldb), C.long(cols), C.long(k))
}
