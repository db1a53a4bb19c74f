package reward

// Numbers for the symbolic mode. A value is exact (a Gaussian rational,
// re + im·i with math/big rationals) for as long as every operation on it
// can stay exact; otherwise it is a complex128. Integer powers, perfect
// roots, floor/ceil, factorials, binomials and logarithms of exact powers
// stay exact. An exact value whose size passes Budget.MaxBits is demoted to
// floating point, and every operation charges the meter in proportion to the
// size of its operands, so no input can make arithmetic slow.

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/cmplx"
)

// errDomain marks an evaluation that is undefined at this point (division by
// zero, factorial of a negative integer …): the point is skipped.
var errDomain = errors.New("outside the domain")

// errNotScalar marks a node that has no numeric value (a tuple inside a sum,
// text, infinity in arithmetic): scalar comparison fails.
var errNotScalar = errors.New("not a scalar")

type value struct {
	exact  bool
	re, im *big.Rat // exact: re non-nil, im nil means 0
	z      complex128
}

func ratValue(r *big.Rat) value { return value{exact: true, re: r} }
func intValue(n int64) value    { return value{exact: true, re: new(big.Rat).SetInt64(n)} }
func floatValue(z complex128) value {
	return value{z: z}
}

func (v value) complex() complex128 {
	if !v.exact {
		return v.z
	}
	re, _ := v.re.Float64()
	if v.im == nil {
		return complex(re, 0)
	}
	im, _ := v.im.Float64()
	return complex(re, im)
}

// realExact reports an exact value with no imaginary part.
func (v value) realExact() bool { return v.exact && (v.im == nil || v.im.Sign() == 0) }

func (v value) isZero() bool {
	if v.exact {
		return v.re.Sign() == 0 && (v.im == nil || v.im.Sign() == 0)
	}
	return v.z == 0
}

func (v value) finite() bool {
	if v.exact {
		return true
	}
	return !cmplx.IsInf(v.z) && !cmplx.IsNaN(v.z)
}

// realish reports whether v is real up to rounding noise.
func (v value) realish() bool {
	if v.exact {
		return v.im == nil || v.im.Sign() == 0
	}
	return math.Abs(imag(v.z)) <= 1e-9*math.Abs(real(v.z))+1e-12
}

func (v value) String() string {
	if !v.exact {
		return fmt.Sprint(v.z)
	}
	if v.im == nil || v.im.Sign() == 0 {
		return v.re.RatString()
	}
	return v.re.RatString() + "+" + v.im.RatString() + "i"
}

func ratBits(r *big.Rat) int {
	if r == nil {
		return 0
	}
	return r.Num().BitLen() + r.Denom().BitLen()
}

func (v value) bits() int { return ratBits(v.re) + ratBits(v.im) }

// arith performs arithmetic under a meter.
type arith struct {
	m       *meter
	maxBits int
}

// cost charges an operation on operands of the given total size. Big
// rational arithmetic (with its GCD normalization) is roughly quadratic in
// size; one step per 32 bits keeps the worst call within a few tens of
// milliseconds at the default budget.
func (a *arith) cost(bits int) error { return a.m.charge(1 + int64(bits)/32) }

// fit demotes an exact value that has grown past the size limit.
func (a *arith) fit(v value) value {
	if v.exact && v.bits() > a.maxBits {
		return a.demote(v.complex())
	}
	return v
}

// demote is the floating-point stand-in for an exact value past the size
// limit. One too large or too small for float64 is unusable, NaN, and
// counted on the meter: an underflow to 0 would compare equal to 0
// (2^{-9000} = 0), and an overflow to ±Inf would make 1/2^{9000} = 0 and
// 2^{9000} − 2^{9000} undefined; equivalent then reports the comparison
// as undecided (over budget) instead of a confident verdict.
func (a *arith) demote(z complex128) value {
	if z == 0 || cmplx.IsInf(z) || cmplx.IsNaN(z) {
		a.m.overflows++
		return floatValue(complex(math.NaN(), 0))
	}
	return floatValue(z)
}

func imOrZero(r *big.Rat) *big.Rat {
	if r == nil {
		return new(big.Rat)
	}
	return r
}

func (a *arith) add(x, y value) (value, error) {
	if err := a.cost(x.bits() + y.bits()); err != nil {
		return value{}, err
	}
	if x.exact && y.exact {
		v := value{exact: true, re: new(big.Rat).Add(x.re, y.re)}
		if x.im != nil || y.im != nil {
			v.im = new(big.Rat).Add(imOrZero(x.im), imOrZero(y.im))
		}
		return a.fit(v), nil
	}
	return floatValue(x.complex() + y.complex()), nil
}

func (a *arith) neg(x value) value {
	if x.exact {
		v := value{exact: true, re: new(big.Rat).Neg(x.re)}
		if x.im != nil {
			v.im = new(big.Rat).Neg(x.im)
		}
		return v
	}
	return floatValue(-x.z)
}

func (a *arith) sub(x, y value) (value, error) { return a.add(x, a.neg(y)) }

func (a *arith) mul(x, y value) (value, error) {
	if err := a.cost(x.bits() + y.bits()); err != nil {
		return value{}, err
	}
	if x.exact && y.exact {
		if x.im == nil && y.im == nil {
			return a.fit(value{exact: true, re: new(big.Rat).Mul(x.re, y.re)}), nil
		}
		xi, yi := imOrZero(x.im), imOrZero(y.im)
		re := new(big.Rat).Sub(new(big.Rat).Mul(x.re, y.re), new(big.Rat).Mul(xi, yi))
		im := new(big.Rat).Add(new(big.Rat).Mul(x.re, yi), new(big.Rat).Mul(xi, y.re))
		return a.fit(value{exact: true, re: re, im: im}), nil
	}
	if x.isZero() || y.isZero() {
		return intValue(0), nil
	}
	return floatValue(x.complex() * y.complex()), nil
}

func (a *arith) div(x, y value) (value, error) {
	if err := a.cost(x.bits() + y.bits()); err != nil {
		return value{}, err
	}
	if y.isZero() {
		return value{}, errDomain
	}
	if x.exact && y.exact {
		if x.im == nil && y.im == nil {
			return a.fit(value{exact: true, re: new(big.Rat).Quo(x.re, y.re)}), nil
		}
		// (a+bi)/(c+di) = ((ac+bd) + (bc−ad)i) / (c²+d²)
		xi, yi := imOrZero(x.im), imOrZero(y.im)
		den := new(big.Rat).Add(new(big.Rat).Mul(y.re, y.re), new(big.Rat).Mul(yi, yi))
		re := new(big.Rat).Add(new(big.Rat).Mul(x.re, y.re), new(big.Rat).Mul(xi, yi))
		im := new(big.Rat).Sub(new(big.Rat).Mul(xi, y.re), new(big.Rat).Mul(x.re, yi))
		return a.fit(value{exact: true, re: re.Quo(re, den), im: im.Quo(im, den)}), nil
	}
	return floatValue(x.complex() / y.complex()), nil
}

// pow computes x^y, exactly where it can.
func (a *arith) pow(x, y value) (value, error) {
	if err := a.cost(x.bits() + y.bits()); err != nil {
		return value{}, err
	}
	if y.realExact() {
		e := y.re
		if e.IsInt() {
			return a.powInt(x, e.Num())
		}
		if x.realExact() && e.Denom().IsInt64() && e.Denom().Int64() <= 64 && e.Num().IsInt64() {
			if v, ok, err := a.powRatExact(x.re, e.Num().Int64(), e.Denom().Int64()); err != nil || ok {
				return v, err
			}
		}
	}
	if x.isZero() {
		if y.realish() && real(y.complex()) > 0 {
			return intValue(0), nil
		}
		return value{}, errDomain
	}
	xc, yc := x.complex(), y.complex()
	if x.realish() && y.realish() {
		xr, yr := real(xc), real(yc)
		if xr > 0 {
			return floatValue(complex(math.Pow(xr, yr), 0)), nil
		}
		// A negative base with an exponent p/q, q odd: the real root.
		if y.realExact() && y.re.Denom().IsInt64() && y.re.Denom().Int64()%2 == 1 && y.re.Num().IsInt64() {
			r := math.Pow(-xr, yr)
			if y.re.Num().Int64()%2 != 0 {
				r = -r
			}
			return floatValue(complex(r, 0)), nil
		}
	}
	return floatValue(cmplx.Pow(xc, yc)), nil
}

// powInt raises x to an integer power.
func (a *arith) powInt(x value, n *big.Int) (value, error) {
	if n.Sign() == 0 {
		if x.isZero() {
			return value{}, errDomain // 0^0
		}
		return intValue(1), nil
	}
	if x.isZero() {
		if n.Sign() < 0 {
			return value{}, errDomain
		}
		return intValue(0), nil
	}
	if x.realExact() && x.re.IsInt() && x.re.Num().CmpAbs(big.NewInt(1)) == 0 {
		if x.re.Sign() > 0 || n.Bit(0) == 0 {
			return intValue(1), nil
		}
		return intValue(-1), nil
	}
	// The result has |n|·log2|x| bits, numerator and denominator; compare
	// without overflowing (2^{8000} is 8001 bits, within the limit).
	if !n.IsInt64() || !x.exact || n.Int64() == math.MinInt64 ||
		absInt64(n.Int64()) > int64(a.maxBits) || powBits(x, absInt64(n.Int64())) > float64(a.maxBits) {
		// Too big to be exact: floating point (usually ±Inf or 0).
		nf, _ := new(big.Float).SetInt(n).Float64()
		xc := x.complex()
		if x.realish() {
			return a.demote(complex(math.Pow(real(xc), nf), 0)), nil
		}
		return a.demote(cmplx.Pow(xc, complex(nf, 0))), nil
	}
	k := absInt64(n.Int64())
	var v value
	if x.im == nil || x.im.Sign() == 0 {
		kk := big.NewInt(k)
		num := new(big.Int).Exp(x.re.Num(), kk, nil)
		den := new(big.Int).Exp(x.re.Denom(), kk, nil)
		if err := a.cost(num.BitLen() + den.BitLen()); err != nil {
			return value{}, err
		}
		v = value{exact: true, re: new(big.Rat).SetFrac(num, den)}
	} else {
		// Square and multiply; the size check above bounds the work.
		v = intValue(1)
		base := x
		for k > 0 {
			var err error
			if k&1 == 1 {
				if v, err = a.mul(v, base); err != nil {
					return value{}, err
				}
			}
			k >>= 1
			if k > 0 {
				if base, err = a.mul(base, base); err != nil {
					return value{}, err
				}
			}
		}
	}
	if n.Sign() < 0 {
		return a.div(intValue(1), v)
	}
	return a.fit(v), nil
}

func absInt64(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// powRatExact computes r^(p/q) exactly when r is a perfect q-th power (real
// roots for negative r and odd q; i·√|r| for q = 2). ok is false otherwise.
func (a *arith) powRatExact(r *big.Rat, p, q int64) (value, bool, error) {
	neg := r.Sign() < 0
	if neg && q%2 == 0 && q != 2 {
		return value{}, false, nil
	}
	abs := new(big.Rat).Abs(r)
	if err := a.cost(ratBits(abs) * int(q)); err != nil {
		return value{}, false, err
	}
	num, ok1 := intRoot(abs.Num(), q)
	if !ok1 {
		return value{}, false, nil
	}
	den, ok2 := intRoot(abs.Denom(), q)
	if !ok2 {
		return value{}, false, nil
	}
	root := value{exact: true, re: new(big.Rat).SetFrac(num, den)}
	if neg {
		if q == 2 {
			root = value{exact: true, re: new(big.Rat), im: root.re}
		} else {
			root = a.neg(root)
		}
	}
	v, err := a.powInt(root, big.NewInt(p))
	return v, err == nil, err
}

// intRoot returns the integer k-th root of n ≥ 0 and whether it is exact.
func intRoot(n *big.Int, k int64) (*big.Int, bool) {
	if n.Sign() == 0 || k == 1 {
		return new(big.Int).Set(n), true
	}
	if k == 2 {
		r := new(big.Int).Sqrt(n)
		return r, new(big.Int).Mul(r, r).Cmp(n) == 0
	}
	// Newton's iteration from above: x ← ((k−1)x + n/x^(k−1)) / k.
	kk := big.NewInt(k)
	km1 := big.NewInt(k - 1)
	x := new(big.Int).Lsh(big.NewInt(1), uint((int64(n.BitLen())+k-1)/k))
	for {
		t := new(big.Int).Exp(x, km1, nil)
		t.Quo(n, t)
		t.Add(t, new(big.Int).Mul(km1, x))
		t.Quo(t, kk)
		if t.Cmp(x) >= 0 {
			break
		}
		x = t
	}
	return x, new(big.Int).Exp(x, kk, nil).Cmp(n) == 0
}

// approxEqual compares two complex numbers with a relative tolerance of 1e-8
// and an absolute floor of 1e-12 (for values that should be exactly zero).
func approxEqual(x, y complex128) bool {
	d := cmplx.Abs(x - y)
	scale := math.Max(cmplx.Abs(x), cmplx.Abs(y))
	return d <= 1e-8*scale || d <= 1e-12
}

// valuesEqual compares exactly when both values are exact.
func valuesEqual(x, y value) bool {
	if x.exact && y.exact {
		return x.re.Cmp(y.re) == 0 && imOrZero(x.im).Cmp(imOrZero(y.im)) == 0
	}
	return approxEqual(x.complex(), y.complex())
}

// ratLog2 approximates log2 of a positive rational of any size.
func ratLog2(r *big.Rat) float64 {
	return intLog2(r.Num()) - intLog2(r.Denom())
}

func intLog2(n *big.Int) float64 {
	b := n.BitLen()
	if b <= 1000 {
		f, _ := new(big.Float).SetInt(n).Float64()
		return math.Log2(f)
	}
	top := new(big.Int).Rsh(n, uint(b-64))
	f, _ := new(big.Float).SetInt(top).Float64()
	return math.Log2(f) + float64(b-64)
}

// powBits bounds from above the size (numerator + denominator bits, as
// ratBits counts them) of x^k for an exact x and k ≥ 1.
func powBits(x value, k int64) float64 {
	parts := []*big.Rat{x.re}
	if x.im != nil && x.im.Sign() != 0 {
		// |re + im·i|^k is at most (|re| + |im|)^k.
		parts = []*big.Rat{new(big.Rat).Add(new(big.Rat).Abs(x.re), new(big.Rat).Abs(x.im))}
	}
	bits := 0.0
	for _, r := range parts {
		bits += float64(k)*log2Int(r.Num()) + 1 + float64(k)*log2Int(r.Denom()) + 1
	}
	if x.im != nil && x.im.Sign() != 0 {
		bits *= 2 // both parts of the result
	}
	return bits * (1 + 1e-12)
}

// log2Int is log2|n| (0 for 0 and ±1).
func log2Int(n *big.Int) float64 {
	if n.BitLen() <= 1 {
		return 0
	}
	mant := new(big.Float)
	exp := new(big.Float).SetInt(n).MantExp(mant) // |n| = mant·2^exp, mant in [0.5, 1)
	m, _ := mant.Float64()
	return float64(exp) + math.Log2(math.Abs(m))
}
