//go:build cgo

package fixeddot

/*
// No fused multiply-add, and no reassociation (no -ffast-math): the lanes
// below are added as fixeddot.go adds them.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize ("fp-contract=off")
#endif

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__GLIBC__)
#define GD_VECTOR __attribute__((target_clones("avx2", "default"), optimize("O3", "fp-contract=off")))
#else
#define GD_VECTOR
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

GD_VECTOR
static void gd_dots(float* out, long ldo, const float* a, long lda, long rows, const float* b, long ldb, long cols, long k) {
	for (long j = 0; j < cols; j++) {
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
