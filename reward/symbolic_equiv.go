package reward

// Equivalence of parsed answers. Structure first (tuples by position with
// their brackets, sets and answer lists unordered, unions unordered,
// matrices by shape and cell, equations up to a constant factor), then
// scalars by value: every variable of either side is bound to the same eight
// points, each side is evaluated there, and the values must agree — exactly
// when both are exact, within 1e-8 relative otherwise. Points where either
// side is undefined are skipped; so are points where either side is not real
// when neither side mentions i, since an answer means its real branch.

import (
	"errors"
	"math"
	"math/big"
	"sort"
	"strings"
)

// pointTable holds the values variables take: integers (including 1, 2, 4
// for floor/ceil and logarithms of powers), fractions and negatives.
// Variable j at point k takes pointTable[(k+5j) % len].
var pointTable = []*big.Rat{
	big.NewRat(2, 1), big.NewRat(7, 3), big.NewRat(-3, 2), big.NewRat(5, 1),
	big.NewRat(3, 7), big.NewRat(4, 1), big.NewRat(-2, 1), big.NewRat(11, 5),
	big.NewRat(1, 2), big.NewRat(8, 1), big.NewRat(13, 4), big.NewRat(-5, 3),
	big.NewRat(3, 1), big.NewRat(6, 1), big.NewRat(17, 6), big.NewRat(9, 4),
}

const numPoints = 8

// stepPoints are added for step functions (floor, ceil, factorials,
// binomials), which agree on small arguments more often: ⌊(2n−1)/5⌋ and
// ⌊(2n−1)/6⌋ differ first at n = 9.
var stepPoints = []*big.Rat{
	big.NewRat(10, 1), big.NewRat(17, 1), big.NewRat(23, 1), big.NewRat(31, 1),
	big.NewRat(64, 1), big.NewRat(100, 1), big.NewRat(243, 1), big.NewRat(1000, 1),
}

// minPoints is how many points must be comparable for a verdict.
const minPoints = 3

type sample struct {
	v  value
	ok bool // defined and finite
}

type comparer struct {
	ev    evaluator
	envs  []map[string]value
	hasI  bool
	cache map[*node][]sample
}

func newComparer(m *meter, pred, truth *node, percentScale bool) *comparer {
	c := &comparer{
		ev:    evaluator{arith: arith{m: m, maxBits: m.b.MaxBits}, percentScale: percentScale},
		cache: map[*node][]sample{},
	}
	vars := map[string]bool{}
	collectVars(pred, vars)
	collectVars(truth, vars)
	c.hasI = usesConst(pred, "i") || usesConst(truth, "i")
	names := make([]string, 0, len(vars))
	for v := range vars {
		names = append(names, v)
	}
	sort.Strings(names)
	if len(names) == 0 {
		c.envs = []map[string]value{nil}
		return c
	}
	for k := range numPoints {
		env := make(map[string]value, len(names))
		for j, name := range names {
			env[name] = ratValue(pointTable[(k+5*j)%len(pointTable)])
		}
		c.envs = append(c.envs, env)
	}
	if hasStep(pred) || hasStep(truth) {
		for k := range stepPoints {
			env := make(map[string]value, len(names))
			for j, name := range names {
				env[name] = ratValue(stepPoints[(k+3*j)%len(stepPoints)])
			}
			c.envs = append(c.envs, env)
		}
	}
	return c
}

func hasStep(n *node) bool {
	if n == nil {
		return false
	}
	if n.kind == nFunc && (n.name == "floor" || n.name == "ceil" || n.name == "fact" || n.name == "binom") {
		return true
	}
	for _, k := range n.kids {
		if hasStep(k) {
			return true
		}
	}
	return false
}

func collectVars(n *node, vars map[string]bool) {
	if n == nil {
		return
	}
	if n.kind == nVar {
		vars[n.name] = true
	}
	for _, k := range n.kids {
		collectVars(k, vars)
	}
}

func usesConst(n *node, name string) bool {
	if n == nil {
		return false
	}
	if n.kind == nConst && n.name == name {
		return true
	}
	for _, k := range n.kids {
		if usesConst(k, name) {
			return true
		}
	}
	return false
}

func hasKind(n *node, kind nodeKind) bool {
	if n == nil {
		return false
	}
	if n.kind == kind {
		return true
	}
	for _, k := range n.kids {
		if hasKind(k, kind) {
			return true
		}
	}
	return false
}

// isScalar reports a node that evaluates to a number (± expanded first).
func isScalar(n *node) bool {
	switch n.kind {
	case nNum, nVar, nAdd, nSub, nMul, nDiv, nPow, nNeg, nFunc, nPercent, nPM:
		return true
	case nConst:
		return n.name != "inf"
	}
	return false
}

// infSign is +1 for ∞, −1 for −∞, 0 otherwise.
func infSign(n *node) int {
	switch {
	case n.kind == nConst && n.name == "inf":
		return 1
	case n.kind == nNeg:
		return -infSign(n.kids[0])
	case n.kind == nPM && n.kids[0] == nil:
		return 0
	}
	return 0
}

// samples evaluates a scalar node at every point.
func (c *comparer) samples(n *node) ([]sample, error) {
	if s, ok := c.cache[n]; ok {
		return s, nil
	}
	out := make([]sample, len(c.envs))
	for k, env := range c.envs {
		v, err := c.ev.eval(n, env)
		switch {
		case err == nil:
			out[k] = sample{v: v, ok: v.finite()}
		case errors.Is(err, errDomain):
		case errors.Is(err, errBudget):
			return nil, err
		default:
			return nil, err // not a scalar
		}
	}
	c.cache[n] = out
	return out, nil
}

// scalarEqual compares two scalars by their samples.
func (c *comparer) scalarEqual(pred, truth *node) (bool, error) {
	if sp, st := infSign(pred), infSign(truth); sp != 0 || st != 0 {
		return sp == st, nil
	}
	a, err := c.samples(pred)
	if err != nil {
		return false, notScalarIsFalse(err)
	}
	b, err := c.samples(truth)
	if err != nil {
		return false, notScalarIsFalse(err)
	}
	if len(c.envs) == 1 && a[0].ok && b[0].ok {
		// A decimal is a rational number: it never equals an irrational
		// truth (3.14 ≠ π, 1.4142 ≠ √2), whatever the tolerance.
		if decimalLiteral(pred) != nil && !b[0].v.exact {
			return false, nil
		}
		// A decimal ground truth is rounded: an irrational prediction, or any
		// prediction against e-notation (Minerva's convention), is accepted
		// when it rounds to the truth at the truth's precision.
		if lit := decimalLiteral(truth); lit != nil && (lit.sci || !a[0].v.exact) {
			if roundsTo(a[0].v, b[0].v, lit.sigDigits) {
				return true, nil
			}
		}
	}
	return c.samplesEqual(a, b, func(x, y value) bool { return valuesEqual(x, y) }), nil
}

func notScalarIsFalse(err error) error {
	if errors.Is(err, errBudget) {
		return err
	}
	return nil
}

// samplesEqual applies eq at the comparable points: real points when there
// are enough of them (or when i is used), else all finite points.
func (c *comparer) samplesEqual(a, b []sample, eq func(x, y value) bool) bool {
	// A budget overrun here surfaces at the next charge (the meter is sticky).
	_ = c.ev.m.charge(int64(len(a)))
	need := minPoints
	if len(c.envs) == 1 {
		need = 1
	}
	realN, allN := 0, 0
	realOK, allOK := true, true
	for k := range a {
		if !a[k].ok || !b[k].ok {
			continue
		}
		same := eq(a[k].v, b[k].v)
		allN++
		allOK = allOK && same
		if c.hasI || (a[k].v.realish() && b[k].v.realish()) {
			realN++
			realOK = realOK && same
		}
	}
	if realN >= need {
		return realOK
	}
	return allN >= need && allOK
}

// decimalLiteral returns the literal of a (negated) decimal number such as
// 1.25, -0.33 or 2.7778e-6, else nil.
func decimalLiteral(n *node) *node {
	if n.kind == nNeg {
		return decimalLiteral(n.kids[0])
	}
	if n.kind == nNum && n.sigDigits > 0 {
		return n
	}
	return nil
}

// roundsTo reports whether p rounds to t at sig significant digits.
func roundsTo(p, t value, sig int) bool {
	if !p.realish() || !t.realish() {
		return false
	}
	pv, tv := real(p.complex()), real(t.complex())
	if tv == 0 || math.IsInf(tv, 0) {
		return false
	}
	e := math.Floor(math.Log10(math.Abs(tv)))
	unit := math.Pow(10, e-float64(sig)+1)
	return math.Abs(pv-tv) <= unit/2*(1+1e-9)
}

// expandPM returns the readings of a scalar with ± signs, at most limit.
func expandPM(n *node, limit int) []*node {
	if n == nil {
		return []*node{nil}
	}
	if !hasKind(n, nPM) {
		return []*node{n}
	}
	if n.kind == nPM {
		var out []*node
		rights := expandPM(n.kids[1], limit)
		lefts := expandPM(n.kids[0], limit)
		for _, l := range lefts {
			for _, r := range rights {
				if len(out)+2 > limit {
					return out
				}
				if l == nil {
					out = append(out, r, &node{kind: nNeg, kids: []*node{r}})
				} else {
					out = append(out, &node{kind: nAdd, kids: []*node{l, r}}, &node{kind: nSub, kids: []*node{l, r}})
				}
			}
		}
		return out
	}
	out := []*node{{kind: n.kind, name: n.name, val: n.val, open: n.open, close: n.close, unit: n.unit}}
	for _, kid := range n.kids {
		variants := expandPM(kid, limit)
		var next []*node
		for _, o := range out {
			for _, v := range variants {
				if len(next) >= limit {
					break
				}
				cp := *o
				cp.kids = append(append([]*node(nil), o.kids...), v)
				next = append(next, &cp)
			}
		}
		out = next
	}
	return out
}

// elements returns the members of an unordered answer: a list, a set, or a
// scalar with ± that reads as several values.
func (c *comparer) elements(n *node) ([]*node, bool) {
	limit := c.ev.m.b.MaxItems
	switch n.kind {
	case nList, nSet:
		var out []*node
		for _, k := range n.kids {
			if isScalar(k) {
				out = append(out, expandPM(k, limit)...)
			} else {
				out = append(out, k)
			}
		}
		return out, true
	}
	if isScalar(n) && hasKind(n, nPM) {
		return expandPM(n, limit), true
	}
	return nil, false
}

// simpleLHS: `x`, `f(x)`, `a_1`, `∠ABC`, `(x, y, z)` — a name (or a tuple
// of names) that `x = 3` may drop.
func simpleLHS(n *node) bool {
	switch n.kind {
	case nVar:
		return true
	case nTuple:
		if n.open != "(" || n.close != ")" {
			return false
		}
		for _, k := range n.kids {
			if k.kind != nVar {
				return false
			}
		}
		return true
	case nMul:
		if n.kids[0].kind != nVar {
			return false
		}
		arg := n.kids[1]
		if arg.kind == nVar {
			return true
		}
		if arg.kind == nTuple {
			for _, k := range arg.kids {
				if k.kind != nVar {
					return false
				}
			}
			return true
		}
	}
	return false
}

// namedValue returns v for `x = v` and `x ∈ v` with a simple x (and the last
// member of a chain a = b = v).
func namedValue(n *node) (*node, bool) {
	if n.kind != nRel || len(n.kids) < 2 {
		return nil, false
	}
	for _, op := range splitOps(n.name) {
		if op != "=" && op != "in" {
			return nil, false
		}
	}
	if len(n.kids) > 2 && n.name != "in" {
		return n.kids[len(n.kids)-1], true
	}
	if simpleLHS(n.kids[0]) {
		return n.kids[len(n.kids)-1], true
	}
	return nil, false
}

// equationValue returns v for a prediction `lhs = v` whose left side is an
// expression, as in `a + b = 12` or `f(2) + f(3) = 7`: the answer is the
// value stated last, as math_dapo reads it (it keeps what follows the last
// `=`). It is used only against a truth that is not a relation, and not when
// v is 0 or mentions a variable of lhs: then `lhs = v` is an equation to
// solve (`x^2 - 4 = 0`, `x + y = 2x`), not a value.
func equationValue(n *node) (*node, bool) {
	if n.kind != nRel || n.name != "=" || len(n.kids) != 2 {
		return nil, false
	}
	lhs, v := n.kids[0], n.kids[1]
	if v.kind == nNum && v.val.isZero() {
		return nil, false
	}
	lv, vv := map[string]bool{}, map[string]bool{}
	collectVars(lhs, lv)
	collectVars(v, vv)
	for name := range vv {
		if lv[name] {
			return nil, false
		}
	}
	return v, true
}

// intervalValue reads an inequality about one variable as the interval it
// states: `1 \le x < 8` is [1, 8), `8 \ge x \ge 1` is [1, 8], `x > 2` and
// `2 < x` are (2, ∞), `x \le 5` is (−∞, 5]. The variable must stand alone
// and the bounds must not mention it: `1 \le x + 1 \le 8`, `x < 2x` and
// `1 \le x \ge 8` are not intervals.
func intervalValue(n *node) (*node, bool) {
	if n.kind != nRel || len(n.kids) < 2 || len(n.kids) > 3 {
		return nil, false
	}
	ops := splitOps(n.name)
	less := func(op string) bool { return op == "<" || op == "<=" }
	more := func(op string) bool { return op == ">" || op == ">=" }
	reverse := map[string]string{"<": ">", "<=": ">=", ">": "<", ">=": "<="}
	bound := func(b *node, x string) bool {
		if !isScalar(b) && infSign(b) == 0 {
			return false
		}
		vars := map[string]bool{}
		collectVars(b, vars)
		return !vars[x]
	}
	// interval builds (lo, hi) with a closed end where its operator is ≤.
	interval := func(lo, hi *node, loOp, hiOp string) *node {
		iv := &node{kind: nTuple, open: "(", close: ")", kids: []*node{lo, hi}}
		if loOp == "<=" {
			iv.open = "["
		}
		if hiOp == "<=" {
			iv.close = "]"
		}
		return iv
	}
	inf := &node{kind: nConst, name: "inf"}
	if len(n.kids) == 3 { // lo < x < hi, or hi > x > lo
		lo, x, hi := n.kids[0], n.kids[1], n.kids[2]
		o1, o2 := ops[0], ops[1]
		if more(o1) && more(o2) {
			lo, hi, o1, o2 = hi, lo, reverse[o2], reverse[o1]
		}
		if x.kind != nVar || !less(o1) || !less(o2) || !bound(lo, x.name) || !bound(hi, x.name) {
			return nil, false
		}
		return interval(lo, hi, o1, o2), true
	}
	x, op, b := n.kids[0], ops[0], n.kids[1] // x < b, or b < x read as x > b
	if !less(op) && !more(op) {
		return nil, false
	}
	if x.kind != nVar {
		x, op, b = b, reverse[op], x
	}
	if x.kind != nVar || !bound(b, x.name) {
		return nil, false
	}
	if less(op) {
		return interval(&node{kind: nNeg, kids: []*node{inf}}, b, "<", op), true
	}
	return interval(b, inf, reverse[op], "<"), true
}

// sameVars reports whether two relations mention the same variables.
func sameVars(a, b *node) bool {
	va, vb := map[string]bool{}, map[string]bool{}
	collectVars(a, va)
	collectVars(b, vb)
	if len(va) != len(vb) {
		return false
	}
	for v := range va {
		if !vb[v] {
			return false
		}
	}
	return true
}

func splitOps(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ' ' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}

// same decides whether pred and truth are equivalent answers.
func (c *comparer) same(pred, truth *node) (bool, error) {
	if err := c.ev.m.charge(1); err != nil {
		return false, err
	}
	if pred.unit != "" && truth.unit != "" && pred.unit != truth.unit {
		return false, nil
	}
	// `x = 3` against 3; `a + b = 12` against 12; `1 \le x < 8` against [1, 8).
	pv, pNamed := namedValue(pred)
	tv, tNamed := namedValue(truth)
	pIv, tIv := false, false
	if !pNamed && truth.kind != nRel {
		pv, pNamed = equationValue(pred)
	}
	if !pNamed {
		pv, pNamed = intervalValue(pred)
		pIv = pNamed
	}
	if !tNamed {
		tv, tNamed = intervalValue(truth)
		tIv = tNamed
	}
	if pNamed && truth.kind != nRel {
		return c.same(pv, truth)
	}
	if tNamed && pred.kind != nRel {
		return c.same(pred, tv)
	}
	if pred.kind == nRel && truth.kind == nRel {
		eq, err := c.relEqual(pred, truth)
		if err != nil || eq {
			return eq, err
		}
		// `x = 3` against `y = 3` compares the values; an inequality
		// against an interval statement only about the same variable.
		if pNamed && tNamed && (!pIv && !tIv || sameVars(pred, truth)) {
			return c.same(pv, tv)
		}
		return false, nil
	}
	// Unordered collections (a single value equals a one-element collection).
	pe, pColl := c.elements(pred)
	te, tColl := c.elements(truth)
	if pColl || tColl {
		if !pColl {
			pe = []*node{pred}
		}
		if !tColl {
			te = []*node{truth}
		}
		// Two answer lists (not sets) give as many answers: a repeated
		// answer counts, so `1,000` read as the list 1, 0 is not
		// `1,000,000` read as 1, 0, 0.
		if pred.kind == nList && truth.kind == nList && len(pe) != len(te) {
			return false, nil
		}
		return c.unordered(pe, te)
	}
	if pred.kind == nUnion || truth.kind == nUnion {
		pp, tp := []*node{pred}, []*node{truth}
		if pred.kind == nUnion {
			pp = pred.kids
		}
		if truth.kind == nUnion {
			tp = truth.kids
		}
		return c.unordered(pp, tp)
	}
	switch {
	case isScalar(pred) && isScalar(truth) || infSign(pred) != 0 && isScalar(truth) || isScalar(pred) && infSign(truth) != 0 ||
		infSign(pred) != 0 && infSign(truth) != 0:
		return c.scalarEqual(pred, truth)
	case pred.kind == nTuple && truth.kind == nTuple:
		if pred.open != truth.open || pred.close != truth.close || len(pred.kids) != len(truth.kids) {
			return false, nil
		}
		return c.pairwise(pred.kids, truth.kids)
	case pred.kind == nMatrix && truth.kind == nMatrix:
		if pred.rows != truth.rows || pred.cols != truth.cols {
			return false, nil
		}
		return c.pairwise(pred.kids, truth.kids)
	case pred.kind == nText && truth.kind == nText:
		return pred.name == truth.name, nil
	case pred.kind == nNumeral || truth.kind == nNumeral:
		return sameNumeral(pred, truth), nil
	}
	return false, nil
}

// sameNumeral compares numerals in a base (52_8): same digits and base, or
// the same digits written without the base. The decimal value (42) is not
// the numeral asked for.
func sameNumeral(pred, truth *node) bool {
	digits := func(n *node) (string, string, bool) {
		switch {
		case n.kind == nNumeral:
			return strings.TrimLeft(n.name, "0"), n.open, true
		case n.kind == nNum && n.name == "int" && n.open != "":
			return strings.TrimLeft(n.open, "0"), "", true
		}
		return "", "", false
	}
	dp, bp, ok1 := digits(pred)
	dt, bt, ok2 := digits(truth)
	return ok1 && ok2 && dp == dt && (bp == bt || bp == "" || bt == "")
}

func (c *comparer) pairwise(ps, ts []*node) (bool, error) {
	for i := range ps {
		eq, err := c.same(ps[i], ts[i])
		if err != nil || !eq {
			return false, err
		}
	}
	return true, nil
}

// unordered: every member of each side equals some member of the other.
func (c *comparer) unordered(ps, ts []*node) (bool, error) {
	matched := make([]bool, len(ts))
	for _, p := range ps {
		found := false
		for j, t := range ts {
			eq, err := c.same(p, t)
			if err != nil {
				return false, err
			}
			if eq {
				found, matched[j] = true, true
			}
		}
		if !found {
			return false, nil
		}
	}
	for _, m := range matched {
		if !m {
			return false, nil
		}
	}
	return true, nil
}

// normRel turns > and ≥ into < and ≤ by swapping sides.
func normRel(op string, l, r *node) (string, *node, *node) {
	switch op {
	case ">":
		return "<", r, l
	case ">=":
		return "<=", r, l
	}
	return op, l, r
}

// relEqual compares two relations: with scalar sides, lhs − rhs must be
// proportional (by a positive factor for inequalities); otherwise the
// sides are compared as they stand (or swapped, for = and ≠).
func (c *comparer) relEqual(pred, truth *node) (bool, error) {
	if len(pred.kids) != 2 || len(truth.kids) != 2 {
		if pred.name != truth.name || len(pred.kids) != len(truth.kids) {
			return false, nil
		}
		return c.pairwise(pred.kids, truth.kids)
	}
	opP, lp, rp := normRel(pred.name, pred.kids[0], pred.kids[1])
	opT, lt, rt := normRel(truth.name, truth.kids[0], truth.kids[1])
	if opP != opT {
		return false, nil
	}
	if isScalar(lp) && isScalar(rp) && isScalar(lt) && isScalar(rt) {
		dp := &node{kind: nSub, kids: []*node{lp, rp}}
		dt := &node{kind: nSub, kids: []*node{lt, rt}}
		a, err := c.samples(dp)
		if err != nil {
			return false, notScalarIsFalse(err)
		}
		b, err := c.samples(dt)
		if err != nil {
			return false, notScalarIsFalse(err)
		}
		return c.proportional(a, b, opP == "<" || opP == "<="), nil
	}
	eq, err := c.pairwise([]*node{lp, rp}, []*node{lt, rt})
	if err != nil || eq || (opP != "=" && opP != "!=") {
		return eq, err
	}
	return c.pairwise([]*node{lp, rp}, []*node{rt, lt})
}

// proportional reports a = λ·b at every comparable point for one λ ≠ 0
// (λ > 0 when positive is set).
func (c *comparer) proportional(a, b []sample, positive bool) bool {
	var ratio value
	have := false
	ok := c.samplesEqual(a, b, func(x, y value) bool {
		if x.isZero() || y.isZero() {
			return x.isZero() && y.isZero() || valuesEqual(x, y)
		}
		r, err := c.ev.div(x, y)
		if err != nil {
			return false
		}
		if !have {
			ratio, have = r, true
			return !positive || (r.realish() && real(r.complex()) > 0)
		}
		return valuesEqual(r, ratio)
	})
	return ok && have
}
