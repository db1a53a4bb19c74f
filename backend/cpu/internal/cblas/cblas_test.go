package cblas

import (
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

// TestSgemm checks the prototype and the enum values against a plain loop,
// with leading dimensions wider than the matrices, in every transpose.
func TestSgemm(t *testing.T) {
	t.Setenv(Env, "")
	l, err := Open()
	if err != nil {
		if os.Getenv("GDROTRAIN_REQUIRE_BLAS") != "" {
			t.Fatalf("GDROTRAIN_REQUIRE_BLAS is set but: %v", err)
		}
		t.Skip(err)
	}
	t.Logf("%s: %s, %d threads", l.Path, l.Config, l.Threads())
	rng := rand.New(rand.NewPCG(1, 2))
	const m, n, k, pad = 5, 7, 3, 2
	for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
		ar, ac := m, k
		if tr[0] {
			ar, ac = k, m
		}
		br, bc := k, n
		if tr[1] {
			br, bc = n, k
		}
		lda, ldb, ldc := ac+pad, bc+pad, n+pad
		a, b, c := make([]float32, ar*lda), make([]float32, br*ldb), make([]float32, m*ldc)
		for _, x := range [][]float32{a, b, c} {
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
		}
		want := make([]float64, len(c))
		for i := 0; i < m; i++ {
			for j := 0; j < ldc; j++ {
				want[i*ldc+j] = float64(c[i*ldc+j])
				if j >= n {
					continue // padding must stay untouched
				}
				var s float64
				for p := 0; p < k; p++ {
					ai, bi := i*lda+p, p*ldb+j
					if tr[0] {
						ai = p*lda + i
					}
					if tr[1] {
						bi = j*ldb + p
					}
					av, bv := a[ai], b[bi]
					s += float64(av) * float64(bv)
				}
				want[i*ldc+j] = 2*s + 0.5*want[i*ldc+j]
			}
		}
		l.Sgemm(tr[0], tr[1], m, n, k, 2, a, lda, b, ldb, 0.5, c, ldc)
		for i := range c {
			if math.Abs(float64(c[i])-want[i]) > 1e-5*(1+math.Abs(want[i])) {
				t.Fatalf("trans %v: c[%d] = %v, want %v", tr, i, c[i], want[i])
			}
		}
	}
	if l.SetThreads(1) && l.Threads() != 1 {
		t.Errorf("threads %d after SetThreads(1)", l.Threads())
	}
}

func TestOpenErrors(t *testing.T) {
	t.Setenv(Env, "off")
	if _, err := Open(); err != ErrOff {
		t.Errorf("%s=off: %v", Env, err)
	}
	t.Setenv(Env, "/nonexistent/libopenblas.so.0")
	if _, err := Open(); err == nil || !strings.Contains(err.Error(), "/nonexistent/libopenblas.so.0") {
		t.Errorf("missing library: %v", err)
	}
	if _, err := open("libc.so.6"); err == errNoCgo {
		return
	}
	t.Setenv(Env, "libc.so.6") // loads, but is no CBLAS
	if _, err := Open(); err == nil || !strings.Contains(err.Error(), "cblas_sgemm") {
		t.Errorf("not a CBLAS: %v", err)
	}
}
