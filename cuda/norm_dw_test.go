package cuda

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/gdrotrain/gdrotrain/model"
)

// TestConformanceNormDWInPass: the norm backward that sums dw's column
// partials in its dx pass (rmsnorm_bwd_dxdw, rmsnorm_bwd_dxdw_res) gives
// dx, dx's bf16 copy and dw bit for bit what the dx kernel followed by the
// second dw pass (rmsnorm_bwd_dw_partial) gives, over several chunks of 64
// rows (the last one short) and rows that do not fill a block's columns.
func TestConformanceNormDWInPass(t *testing.T) {
	d := testDevice(t)
	b := NewBackend(d, BF16)
	rng := rand.New(rand.NewPCG(5, 9))
	randn := func(n int, scale float64) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(scale * rng.NormFloat64())
		}
		return out
	}
	get := func(x *model.Tensor) []float32 {
		out := make([]float32, x.Numel())
		b.Download(x, out)
		return out
	}
	for _, sh := range [][2]int{{200, 300}, {130, 2048}, {64, 8}, {3, 1000}} {
		R, n := sh[0], sh[1]
		dout, x, w, res, dw0 := randn(R*n, 1), randn(R*n, 2), randn(n, 1), randn(R*n, 1), randn(n, 0.5)
		rstd := make([]float32, R)
		for i := range rstd {
			rstd[i] = float32(0.5 + rng.Float64())
		}
		for _, add := range []bool{false, true} {
			type out struct{ dx, dw, dx16 []float32 }
			run := func(twoPass bool) out {
				b.normTwoPass = twoPass
				defer func() { b.normTwoPass = false }()
				up := func(v []float32, shape ...int) *model.Tensor {
					x := b.New(shape...)
					b.Upload(x, v)
					return x
				}
				tdx, tdw := b.New(R, n), up(dw0, n)
				if add {
					if ok, err := b.Shadow(tdx); err != nil || !ok {
						t.Fatalf("shadow: %v %v", ok, err)
					}
					b.RMSNormBackwardAdd(tdx, tdw, up(dout, R, n), up(x, R, n), up(w, n), up(rstd, R), up(res, R, n))
				} else {
					b.RMSNormBackward(tdx, tdw, up(dout, R, n), up(x, R, n), up(w, n), up(rstd, R))
				}
				o := out{dx: get(tdx), dw: get(tdw)}
				if buf := tdx.Store.(*buffer); buf.shadow != nil {
					h := make([]uint16, R*n)
					if err := d.copyOut(unsafe.Pointer(&h[0]), buf.shadow.ptr, int64(2*R*n)); err != nil {
						t.Fatal(err)
					}
					for _, v := range h {
						o.dx16 = append(o.dx16, float32(v))
					}
				}
				if err := b.Err(); err != nil {
					t.Fatal(err)
				}
				return o
			}
			kernel := "rmsnorm_bwd_dxdw"
			if add {
				kernel += "_res"
			}
			before := d.Launches()[kernel]
			one := run(false)
			if d.Launches()[kernel] == before {
				t.Fatalf("%s not launched", kernel)
			}
			two := run(true)
			what := fmt.Sprintf("%d×%d add=%v", R, n, add)
			if !slices.Equal(one.dx, two.dx) || !slices.Equal(one.dx16, two.dx16) {
				t.Errorf("%s: dx differs between the one-pass and two-pass norm backward", what)
			}
			if !slices.Equal(one.dw, two.dw) {
				t.Errorf("%s: dw differs between the one-pass and two-pass norm backward", what)
			}
			if add && len(one.dx16) == 0 {
				t.Errorf("%s: no bf16 copy of dx written", what)
			}
		}
	}
}
