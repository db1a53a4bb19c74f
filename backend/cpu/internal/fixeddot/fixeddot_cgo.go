//go:build cgo

package fixeddot

/*
// No fused multiply-add, and no reassociation (no -ffast-math): the lanes
// below are added as fixeddot.go adds them. cgo's -O2 vectorizes the
// loops with the baseline SSE (two 4-wide vectors per 8 lanes); -O3 and
// the AVX2 and AVX-512 clones GCC makes of them (target_clones) measured
// four times slower here (BenchmarkMatMulExact), so there are none.
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

static void gd_dots(float* out, long ldo, const float* a, long lda, long rows, const float* b, long ldb, long cols, long k) {
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
*/
import "C"

import "unsafe"

// Dots overwrites out[i·ldo+j] = Dot(a[i·lda:][:k], b[j·ldb:][:k]) for
// i < rows, j < cols (DotsGo's bits).
func Dots(out []float32, ldo int, a []float32, lda, rows int, b []float32, ldb, cols, k int) {
	if rows == 0 || cols == 0 {
		return
	}
	if k == 0 {
		DotsGo(out, ldo, a, lda, rows, b, ldb, cols, k)
		return
	}
	_ = out[(rows-1)*ldo+cols-1]
	_ = a[(rows-1)*lda+k-1]
	_ = b[(cols-1)*ldb+k-1]
	C.gd_dots((*C.float)(unsafe.Pointer(&out[0])), C.long(ldo), (*C.float)(unsafe.Pointer(&a[0])), C.long(lda), C.long(rows),
		(*C.float)(unsafe.Pointer(&b[0])), C.long(ldb), C.long(cols), C.long(k))
}
