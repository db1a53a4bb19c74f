package reward

// Evaluation of parsed expressions at a point. Variables are bound to exact
// rationals; constants π and e are floating point, i is exact. Functions stay
// exact where the result is rational (see symbolic_value.go) and otherwise
// use float64 for real arguments inside the real domain and complex128
// elsewhere, so that ln(−2) is complex rather than NaN.

import (
	"math"
	"math/big"
	"math/cmplx"
)

type evaluator struct {
	arith
	percentScale bool // read x% as x/100 (true) or as x (false)
}

func (e *evaluator) eval(n *node, env map[string]value) (value, error) {
	if err := e.m.charge(1); err != nil {
		return value{}, err
	}
	switch n.kind {
	case nNum:
		return n.val, nil
	case nVar:
		v, ok := env[n.name]
		if !ok {
			return value{}, errNotScalar
		}
		return v, nil
	case nConst:
		switch n.name {
		case "pi":
			return floatValue(complex(math.Pi, 0)), nil
		case "e":
			return floatValue(complex(math.E, 0)), nil
		case "i":
			return value{exact: true, re: new(big.Rat), im: big.NewRat(1, 1)}, nil
		}
		return value{}, errNotScalar
	case nNeg:
		x, err := e.eval(n.kids[0], env)
		if err != nil {
			return value{}, err
		}
		return e.neg(x), nil
	case nPercent:
		x, err := e.eval(n.kids[0], env)
		if err != nil || !e.percentScale {
			return x, err
		}
		return e.div(x, intValue(100))
	case nAdd, nSub, nMul, nDiv, nPow:
		x, err := e.eval(n.kids[0], env)
		if err != nil {
			return value{}, err
		}
		y, err := e.eval(n.kids[1], env)
		if err != nil {
			return value{}, err
		}
		switch n.kind {
		case nAdd:
			return e.add(x, y)
		case nSub:
			return e.sub(x, y)
		case nMul:
			return e.mul(x, y)
		case nDiv:
			return e.div(x, y)
		}
		return e.pow(x, y)
	case nFunc:
		args := make([]value, len(n.kids))
		for i, k := range n.kids {
			v, err := e.eval(k, env)
			if err != nil {
				return value{}, err
			}
			args[i] = v
		}
		return e.call(n.name, args)
	}
	return value{}, errNotScalar
}

var half = big.NewRat(1, 2)

// call evaluates a named function.
func (e *evaluator) call(name string, args []value) (value, error) {
	if len(args) == 0 {
		return value{}, errNotScalar
	}
	x := args[0]
	if len(args) != 1 && name != "root" && name != "binom" && name != "logb" && name != "max" && name != "min" {
		return value{}, errNotScalar
	}
	switch name {
	case "sqrt":
		return e.pow(x, ratValue(half))
	case "root":
		if len(args) != 2 {
			return value{}, errNotScalar
		}
		inv, err := e.div(intValue(1), args[1])
		if err != nil {
			return value{}, err
		}
		return e.pow(x, inv)
	case "abs":
		if x.realExact() {
			return ratValue(new(big.Rat).Abs(x.re)), nil
		}
		if x.exact {
			sq, err := e.add(ratValue(new(big.Rat).Mul(x.re, x.re)), ratValue(new(big.Rat).Mul(x.im, x.im)))
			if err != nil {
				return value{}, err
			}
			return e.pow(sq, ratValue(half))
		}
		return floatValue(complex(cmplx.Abs(x.z), 0)), nil
	case "floor", "ceil":
		return roundValue(x, name == "ceil")
	case "fact":
		return e.factorial(x)
	case "binom":
		if len(args) != 2 {
			return value{}, errNotScalar
		}
		return e.binomial(x, args[1])
	case "ln":
		if x.realExact() && x.re.Cmp(big.NewRat(1, 1)) == 0 {
			return intValue(0), nil
		}
		return realOrComplex(x, math.Log, cmplx.Log, func(r float64) bool { return r > 0 })
	case "log10":
		return e.logBase(intValue(10), x)
	case "logb":
		if len(args) != 2 {
			return value{}, errNotScalar
		}
		return e.logBase(args[0], args[1])
	case "exp":
		if x.isZero() {
			return intValue(1), nil
		}
		return realOrComplex(x, math.Exp, cmplx.Exp, nil)
	case "max", "min":
		best := math.NaN()
		var bestV value
		for _, a := range args {
			if !a.realish() {
				return value{}, errDomain
			}
			r := real(a.complex())
			if math.IsNaN(best) || (name == "max") == (r > best) {
				best, bestV = r, a
			}
		}
		return bestV, nil
	}
	if x.isZero() {
		switch name {
		case "sin", "tan", "arcsin", "arctan", "sinh", "tanh":
			return intValue(0), nil
		case "cos", "cosh":
			return intValue(1), nil
		}
	}
	inUnit := func(r float64) bool { return r >= -1 && r <= 1 }
	switch name {
	case "sin":
		return realOrComplex(x, math.Sin, cmplx.Sin, nil)
	case "cos":
		return realOrComplex(x, math.Cos, cmplx.Cos, nil)
	case "tan":
		return realOrComplex(x, math.Tan, cmplx.Tan, nil)
	case "cot":
		return reciprocal(realOrComplex(x, math.Tan, cmplx.Tan, nil))
	case "sec":
		return reciprocal(realOrComplex(x, math.Cos, cmplx.Cos, nil))
	case "csc":
		return reciprocal(realOrComplex(x, math.Sin, cmplx.Sin, nil))
	case "arcsin":
		return realOrComplex(x, math.Asin, cmplx.Asin, inUnit)
	case "arccos":
		return realOrComplex(x, math.Acos, cmplx.Acos, inUnit)
	case "arctan":
		return realOrComplex(x, math.Atan, cmplx.Atan, nil)
	case "arccot":
		return realOrComplex(x, func(r float64) float64 { return math.Atan(1 / r) }, func(z complex128) complex128 { return cmplx.Atan(1 / z) }, nil)
	case "arcsec":
		return realOrComplex(x, func(r float64) float64 { return math.Acos(1 / r) }, func(z complex128) complex128 { return cmplx.Acos(1 / z) }, func(r float64) bool { return math.Abs(r) >= 1 })
	case "arccsc":
		return realOrComplex(x, func(r float64) float64 { return math.Asin(1 / r) }, func(z complex128) complex128 { return cmplx.Asin(1 / z) }, func(r float64) bool { return math.Abs(r) >= 1 })
	case "sinh":
		return realOrComplex(x, math.Sinh, cmplx.Sinh, nil)
	case "cosh":
		return realOrComplex(x, math.Cosh, cmplx.Cosh, nil)
	case "tanh":
		return realOrComplex(x, math.Tanh, cmplx.Tanh, nil)
	}
	return value{}, errNotScalar
}

// realOrComplex applies f to a real argument inside dom (nil: everywhere)
// and g otherwise.
func realOrComplex(x value, f func(float64) float64, g func(complex128) complex128, dom func(float64) bool) (value, error) {
	z := x.complex()
	if x.realish() && (dom == nil || dom(real(z))) {
		return floatValue(complex(f(real(z)), 0)), nil
	}
	return floatValue(g(z)), nil
}

func reciprocal(v value, err error) (value, error) {
	if err != nil {
		return v, err
	}
	if v.isZero() {
		return value{}, errDomain
	}
	return floatValue(1 / v.complex()), nil
}

// roundValue is floor or ceil. A float within 1e-9 of an integer is taken as
// that integer, so floor(log2 8) is 3 even when log2 8 evaluates to 2.9999….
func roundValue(x value, ceil bool) (value, error) {
	if !x.realish() {
		return value{}, errDomain
	}
	if x.realExact() {
		q, m := new(big.Int).DivMod(x.re.Num(), x.re.Denom(), new(big.Int)) // floor division
		if ceil && m.Sign() != 0 {
			q.Add(q, big.NewInt(1))
		}
		return ratValue(new(big.Rat).SetInt(q)), nil
	}
	r := real(x.z)
	if math.IsInf(r, 0) || math.IsNaN(r) {
		return value{}, errDomain
	}
	near := math.Round(r)
	if math.Abs(r-near) <= 1e-9*math.Max(1, math.Abs(r)) {
		r = near
	} else if ceil {
		r = math.Ceil(r)
	} else {
		r = math.Floor(r)
	}
	if math.Abs(r) < 1<<53 {
		return intValue(int64(r)), nil
	}
	return floatValue(complex(r, 0)), nil
}

// factorial is exact for small non-negative integers, Γ(x+1) otherwise.
func (e *evaluator) factorial(x value) (value, error) {
	if x.realExact() && x.re.IsInt() {
		n := x.re.Num()
		if n.Sign() < 0 {
			return value{}, errDomain
		}
		if n.IsInt64() && n.Int64() <= 5000 {
			k := n.Int64()
			if bits := float64(k) * math.Log2(float64(k)+1); bits <= float64(e.maxBits) {
				if err := e.m.charge(k); err != nil {
					return value{}, err
				}
				return ratValue(new(big.Rat).SetInt(new(big.Int).MulRange(1, max(k, 1)))), nil
			}
		}
	}
	if !x.realish() {
		return value{}, errDomain
	}
	r := real(x.complex())
	if r < 0 && r == math.Trunc(r) {
		return value{}, errDomain
	}
	if x.realExact() && x.re.IsInt() {
		// An integer's factorial past the size limit (100000!): ±Inf in
		// floating point, so undecidable rather than a number.
		return e.demote(complex(math.Gamma(r+1), 0)), nil
	}
	return floatValue(complex(math.Gamma(r+1), 0)), nil
}

// binomial is exact for integers n, k whose result fits the size limit
// (big.Int.Binomial) and for a rational n with a small integer k (the
// falling-factorial product); Γ-based floating point otherwise.
func (e *evaluator) binomial(n, k value) (value, error) {
	if k.realExact() && k.re.IsInt() && n.realExact() {
		kk := k.re.Num()
		if kk.Sign() < 0 {
			return intValue(0), nil
		}
		if n.re.IsInt() && n.re.Num().IsInt64() && kk.IsInt64() {
			nv, kv := n.re.Num().Int64(), kk.Int64()
			if nv >= 0 && kv > nv {
				return intValue(0), nil
			}
			if nv >= 0 && log2Binomial(float64(nv), float64(kv)) <= float64(e.maxBits) {
				if err := e.m.charge(min(kv, nv-kv) + 1); err != nil {
					return value{}, err
				}
				return ratValue(new(big.Rat).SetInt(new(big.Int).Binomial(nv, kv))), nil
			}
		} else if kk.IsInt64() && kk.Int64() <= 64 {
			kv := kk.Int64()
			acc := intValue(1)
			for j := int64(0); j < kv && acc.exact; j++ {
				term, err := e.sub(n, intValue(j))
				if err != nil {
					return value{}, err
				}
				if acc, err = e.mul(acc, term); err != nil {
					return value{}, err
				}
				if acc, err = e.div(acc, intValue(j+1)); err != nil {
					return value{}, err
				}
			}
			if acc.exact {
				return acc, nil
			}
		}
	}
	if !n.realish() || !k.realish() {
		return value{}, errDomain
	}
	nr, kr := real(n.complex()), real(k.complex())
	lg := func(x float64) (float64, float64) { l, s := math.Lgamma(x + 1); return l, float64(s) }
	a, sa := lg(nr)
	b, sb := lg(kr)
	c, sc := lg(nr - kr)
	return e.demote(complex(sa*sb*sc*math.Exp(a-b-c), 0)), nil
}

// log2Binomial estimates log2 C(n, k) for 0 ≤ k ≤ n.
func log2Binomial(n, k float64) float64 {
	a, _ := math.Lgamma(n + 1)
	b, _ := math.Lgamma(k + 1)
	c, _ := math.Lgamma(n - k + 1)
	return (a - b - c) / math.Ln2
}

// logBase is log_b(x): exact when x^q = b^p for small q (log_8 4 = 2/3),
// floating point otherwise.
func (e *evaluator) logBase(b, x value) (value, error) {
	if b.realExact() && x.realExact() && b.re.Sign() > 0 && x.re.Sign() > 0 && b.re.Cmp(big.NewRat(1, 1)) != 0 {
		lb, lx := ratLog2(b.re), ratLog2(x.re)
		for q := int64(1); q <= 4; q++ {
			p := math.Round(float64(q) * lx / lb)
			if math.IsNaN(p) || math.Abs(p) > float64(e.maxBits) {
				break
			}
			bp, err := e.powInt(b, big.NewInt(int64(p)))
			if err != nil {
				return value{}, err
			}
			xq, err := e.powInt(x, big.NewInt(q))
			if err != nil {
				return value{}, err
			}
			if bp.exact && xq.exact && valuesEqual(bp, xq) {
				return ratValue(big.NewRat(int64(p), q)), nil
			}
		}
	}
	lx, err := e.call("ln", []value{x})
	if err != nil {
		return value{}, err
	}
	lb, err := e.call("ln", []value{b})
	if err != nil {
		return value{}, err
	}
	return e.div(lx, lb)
}
