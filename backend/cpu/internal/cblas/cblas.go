//go:build cgo

// Package cblas loads a CBLAS library (OpenBLAS) at run time and calls its
// single-precision matrix product. Like the CUDA libraries (docs/architecture.md
// decision 2) it is opened with dlopen and called through our own
// prototypes, so the binary builds without BLAS headers and starts where no
// BLAS is installed; the fast CPU backend (backend/cpu) then falls back to its Go kernels.
// Loading it ourselves also lets Open choose OpenBLAS's kernels before the
// load where the library does not know the CPU (coretype.go, probe.go).
//
// Only the LP64 interface is used (32-bit integer arguments, as Debian's
// libopenblas0-pthread and Homebrew's openblas are built); shapes above
// 2³¹−1 elements per dimension are refused by the caller.
package cblas

/*
#cgo LDFLAGS: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>

// The CBLAS prototypes we call, from the reference CBLAS interface (enums
// are ints: CblasRowMajor 101, CblasNoTrans 111, CblasTrans 112).
typedef void (*pf_cblas_sgemm)(int order, int transa, int transb, int m, int n, int k,
                               float alpha, const float* a, int lda, const float* b, int ldb,
                               float beta, float* c, int ldc);
typedef void (*pf_set_threads)(int n);
typedef int (*pf_get_threads)(void);
typedef char* (*pf_get_string)(void);

static void* gd_dlopen(const char* path) { return dlopen(path, RTLD_NOW | RTLD_LOCAL); }
static const char* gd_dlerror(void) { return dlerror(); }
static void* gd_dlsym(void* lib, const char* name) { return dlsym(lib, name); }
static const char* gd_dlpath(void* lib) {
	struct link_map* lm = NULL;
	if (dlinfo(lib, RTLD_DI_LINKMAP, &lm) != 0 || lm == NULL) return NULL;
	return lm->l_name;
}

static void gd_sgemm(void* f, int ta, int tb, int m, int n, int k, float alpha, const float* a, int lda,
                     const float* b, int ldb, float beta, float* c, int ldc) {
	((pf_cblas_sgemm)f)(101, ta ? 112 : 111, tb ? 112 : 111, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
static void gd_set_threads(void* f, int n) { ((pf_set_threads)f)(n); }
static int gd_get_threads(void* f) { return ((pf_get_threads)f)(); }
static const char* gd_get_string(void* f) { return ((pf_get_string)f)(); }
*/
import "C"

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"unsafe"
)

// Lib is a loaded CBLAS library.
type Lib struct {
	Path   string // the file the dynamic linker mapped
	Config string // what the library says of itself (openblas_get_config), or ""
	Core   string // the core whose kernels it runs (openblas_get_corename), or ""
	Note   string // how that core was chosen, when not by the library alone (coretype.go), or ""

	sgemm, setThreads, getThreads unsafe.Pointer
}

// open loads one library by file name or path.
func open(name string) (*Lib, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	h := C.gd_dlopen(cs)
	if h == nil {
		return nil, fmt.Errorf("dlopen %s: %s", name, C.GoString(C.gd_dlerror()))
	}
	sym := func(s string) unsafe.Pointer {
		cs := C.CString(s)
		defer C.free(unsafe.Pointer(cs))
		return C.gd_dlsym(h, cs)
	}
	l := &Lib{Path: name, sgemm: sym("cblas_sgemm")}
	if l.sgemm == nil {
		return nil, fmt.Errorf("%s has no cblas_sgemm (not a CBLAS library)", name)
	}
	if p := C.gd_dlpath(h); p != nil && C.GoString(p) != "" {
		l.Path = C.GoString(p)
		if real, err := filepath.EvalSymlinks(l.Path); err == nil {
			l.Path = real // Debian's alternatives: which variant (pthread, openmp)
		}
	}
	l.setThreads, l.getThreads = sym("openblas_set_num_threads"), sym("openblas_get_num_threads")
	get := func(s string) string {
		if f := sym(s); f != nil {
			if cs := C.gd_get_string(f); cs != nil {
				return strings.TrimSpace(C.GoString(cs))
			}
		}
		return ""
	}
	l.Config, l.Core = get("openblas_get_config"), get("openblas_get_corename")
	return l, nil
}

// SetThreads sets the library's own thread count, where it has the OpenBLAS
// call for it, and reports whether it could.
func (l *Lib) SetThreads(n int) bool {
	if l.setThreads == nil {
		return false
	}
	C.gd_set_threads(l.setThreads, C.int(n))
	return true
}

// Threads returns the library's thread count (0 if it cannot say).
func (l *Lib) Threads() int {
	if l.getThreads == nil {
		return 0
	}
	return int(C.gd_get_threads(l.getThreads))
}

// Sgemm computes c = alpha·op(a)·op(b) + beta·c on row-major matrices: op(a)
// is (m, k), op(b) is (k, n), c is (m, n), with leading dimensions lda, ldb,
// ldc. The slices must hold every element the call reads or writes (it
// panics otherwise: a caller's bug, never a user's input); m, n, k > 0.
func (l *Lib) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int) {
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	if m <= 0 || n <= 0 || k <= 0 || m > math.MaxInt32 || n > math.MaxInt32 || k > math.MaxInt32 ||
		lda < ac || ldb < bc || ldc < n || len(a) < (ar-1)*lda+ac || len(b) < (br-1)*ldb+bc || len(c) < (m-1)*ldc+n {
		panic(fmt.Sprintf("cblas: sgemm m=%d n=%d k=%d lda=%d ldb=%d ldc=%d on %d, %d, %d elements",
			m, n, k, lda, ldb, ldc, len(a), len(b), len(c)))
	}
	C.gd_sgemm(l.sgemm, cbool(transA), cbool(transB), C.int(m), C.int(n), C.int(k), C.float(alpha),
		(*C.float)(unsafe.Pointer(&a[0])), C.int(lda), (*C.float)(unsafe.Pointer(&b[0])), C.int(ldb),
		C.float(beta), (*C.float)(unsafe.Pointer(&c[0])), C.int(ldc))
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
