package reward

// Parsing for the symbolic mode: LaTeX and plain math into a small tree.
//
// Grammar, loosest first:
//
//	answer   := element ((',' | ';' | "and" | "or") element)*
//	element  := relation unit*
//	relation := union (relop union)*            relop: = < > ≤ ≥ ≠ ∈
//	union    := expr ('\cup' expr)*
//	expr     := term (('+' | '-' | '\pm' | '\mp') term)*
//	term     := unary (('*' | '\cdot' | '\times' | '/' | '\div') unary | power)*
//	unary    := ('-' | '+' | '\pm' | '\mp') unary | power
//	power    := postfix ('^' exponent)?         right-associative
//	postfix  := primary ('!' | "'" | '%')*
//
// Juxtaposition is multiplication (`2\sqrt{3}`, `11(\sqrt5+1)`), except that
// an integer followed by `\frac{p}{q}` with integers p < q is a mixed number.
// `(a, b)` and `[a, b)` are tuples or intervals (the brackets are kept),
// `\{…\}` a set, `\begin{pmatrix}` a matrix. A function without parentheses
// takes the juxtaposed factors after it (`\sin 2x`, `\log_2 n`) up to the
// next function. Trailing unit words and `\text{…}` are recorded, not
// evaluated. Anything else is an error, and the caller falls back to string
// comparison.

import (
	"errors"
	"fmt"
	"math/big"
	"strings"
)

type nodeKind uint8

const (
	nNum     nodeKind = iota // val
	nVar                     // name
	nConst                   // name: "pi", "e", "i", "inf"
	nAdd                     // kids[0] + kids[1]
	nSub                     // kids[0] - kids[1]
	nMul                     // kids[0] * kids[1]
	nDiv                     // kids[0] / kids[1]
	nPow                     // kids[0] ^ kids[1]
	nNeg                     // -kids[0]
	nPM                      // kids[0] ± kids[1]; kids[0] nil for a leading ±
	nFunc                    // name(kids...)
	nPercent                 // kids[0] %
	nTuple                   // open, close: brackets; kids: elements
	nSet                     // kids: elements
	nList                    // kids: answers given as a list
	nUnion                   // kids: parts
	nMatrix                  // rows × cols, kids row-major
	nRel                     // name: operators joined by " "; kids: operands
	nText                    // name: normalized text
	nNumeral                 // name: digits, open: base (52_8)
)

type node struct {
	kind        nodeKind
	name        string
	val         value
	kids        []*node
	open, close string
	rows, cols  int
	unit        string // a trailing unit, normalized
	sigDigits   int    // for a decimal literal: significant digits of its mantissa
	sci         bool   // a literal in e-notation
}

func (n *node) String() string {
	if n == nil {
		return "nil"
	}
	switch n.kind {
	case nNum:
		return n.val.String()
	case nVar, nConst, nText:
		return n.name
	case nNumeral:
		return n.name + "_" + n.open
	}
	parts := make([]string, len(n.kids))
	for i, k := range n.kids {
		parts[i] = k.String()
	}
	names := map[nodeKind]string{nAdd: "+", nSub: "-", nMul: "*", nDiv: "/", nPow: "^", nNeg: "neg",
		nPM: "±", nPercent: "%", nTuple: "tuple" + n.open + n.close, nSet: "set", nList: "list",
		nUnion: "union", nMatrix: fmt.Sprintf("matrix%dx%d", n.rows, n.cols), nRel: "rel " + n.name, nFunc: n.name}
	return "(" + names[n.kind] + " " + strings.Join(parts, " ") + ")"
}

// errParse marks input the parser does not understand.
var errParse = errors.New("cannot parse")

func parseErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errParse, fmt.Sprintf(format, args...))
}

type parser struct {
	lx       *lexer
	m        *meter
	depth    int
	brackets int // enclosing ( [ \{ groups: thousands merging is off inside
	merge    bool
	absOpen  int // open |…| bars
}

// parseAnswer parses a canonicalized answer. merge reads "1,234" as 1234.
func parseAnswer(s string, m *meter, merge bool) (*node, error) {
	p := &parser{m: m, merge: merge}
	return p.sub(s, 0, p.answer)
}

// sub parses s completely with rule f, as a nested group at the current depth.
func (p *parser) sub(s string, brackets int, f func() (*node, error)) (*node, error) {
	if err := p.m.depth(p.depth + 1); err != nil {
		return nil, err
	}
	saved, savedBr := p.lx, p.brackets
	p.depth++
	p.brackets = brackets
	p.lx = newLexer(s, p.m, p.merge && brackets == 0)
	defer func() { p.lx, p.brackets = saved, savedBr; p.depth-- }()
	n, err := f()
	if err != nil {
		return nil, err
	}
	if p.lx.err != nil {
		return nil, p.lx.err
	}
	if t := p.lx.peek(); t.kind != tEOF {
		return nil, parseErr("unexpected %q", t.text)
	}
	return n, p.lx.err
}

// enter guards recursion depth.
func (p *parser) enter() error {
	p.depth++
	if err := p.m.depth(p.depth); err != nil {
		return err
	}
	return p.m.charge(1)
}

func (p *parser) leave() { p.depth-- }

func (p *parser) peek() token { return p.lx.peek() }
func (p *parser) next() token { return p.lx.next() }

// setBrackets updates thousands merging when entering or leaving a group.
func (p *parser) setBrackets(n int) {
	p.brackets = n
	p.lx.merge = p.merge && n == 0
}

func isSeparator(t token) bool {
	switch t.kind {
	case tSym:
		return t.text == "," || t.text == ";"
	case tWord:
		return t.text == "and" || t.text == "or"
	case tText:
		w := strings.TrimSpace(t.text)
		return w == "and" || w == "or" || w == "," || w == ", and" || w == ";"
	}
	return false
}

// answer := element (separator element)*
func (p *parser) answer() (*node, error) {
	var items []*node
	for {
		if len(items) >= p.m.b.MaxItems {
			return nil, fmt.Errorf("%w: more than %d answers", errBudget, p.m.b.MaxItems)
		}
		el, err := p.element()
		if err != nil {
			return nil, err
		}
		items = append(items, el)
		if !isSeparator(p.peek()) {
			break
		}
		for isSeparator(p.peek()) {
			p.next()
		}
		if p.peek().kind == tEOF {
			break
		}
	}
	if len(items) == 1 {
		return items[0], nil
	}
	return &node{kind: nList, kids: items}, nil
}

// element := relation unit*
func (p *parser) element() (*node, error) {
	n, err := p.relation()
	if err != nil {
		return nil, err
	}
	unit := p.units()
	if unit != "" {
		if n.kind == nRel && len(n.kids) > 0 {
			n.kids[len(n.kids)-1].unit = unit
		} else {
			n.unit = unit
		}
	}
	return n, nil
}

var relOps = map[string]string{
	"=": "=", "<": "<", ">": ">", "<=": "<=", ">=": ">=", "=<": "<=", "=>": ">=", "!=": "!=",
	"le": "<=", "leq": "<=", "leqslant": "<=", "ge": ">=", "geq": ">=", "geqslant": ">=",
	"ne": "!=", "neq": "!=", "lt": "<", "gt": ">", "in": "in", "equiv": "=", "coloneqq": "=",
}

func relOp(t token) (string, bool) {
	switch t.kind {
	case tSym, tCmd:
		op, ok := relOps[t.text]
		return op, ok
	}
	return "", false
}

// relation := union (relop union)*; `\approx …` ends the answer's value.
func (p *parser) relation() (*node, error) {
	lhs, err := p.union()
	if err != nil {
		return nil, err
	}
	op, ok := relOp(p.peek())
	if !ok {
		p.skipApprox()
		return lhs, nil
	}
	rel := &node{kind: nRel, kids: []*node{lhs}}
	var ops []string
	for ok {
		p.next()
		rhs, err := p.union()
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
		rel.kids = append(rel.kids, rhs)
		if len(rel.kids) > p.m.b.MaxItems {
			return nil, fmt.Errorf("%w: relation chain too long", errBudget)
		}
		op, ok = relOp(p.peek())
	}
	p.skipApprox()
	rel.name = strings.Join(ops, " ")
	return rel, nil
}

// skipApprox drops "\approx 2.83" after an exact answer.
func (p *parser) skipApprox() {
	t := p.peek()
	if !(t.cmdIs("approx") || t.cmdIs("simeq") || t.cmdIs("sim")) {
		return
	}
	for t.kind != tEOF && !isSeparator(t) {
		p.next()
		t = p.peek()
	}
}

// union := expr ('\cup' expr)*
func (p *parser) union() (*node, error) {
	first, err := p.expr()
	if err != nil {
		return nil, err
	}
	if !p.peek().cmdIs("cup") {
		return first, nil
	}
	u := &node{kind: nUnion, kids: []*node{first}}
	for p.peek().cmdIs("cup") {
		p.next()
		part, err := p.expr()
		if err != nil {
			return nil, err
		}
		u.kids = append(u.kids, part)
		if len(u.kids) > p.m.b.MaxItems {
			return nil, fmt.Errorf("%w: union too long", errBudget)
		}
	}
	return u, nil
}

// expr := term (('+' | '-' | '\pm' | '\mp') term)*
func (p *parser) expr() (*node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	left, err := p.term()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		var kind nodeKind
		switch {
		case t.sym("+"):
			kind = nAdd
		case t.sym("-"):
			kind = nSub
		case t.cmdIs("pm"), t.cmdIs("mp"):
			kind = nPM
		default:
			return left, nil
		}
		p.next()
		right, err := p.term()
		if err != nil {
			return nil, err
		}
		left = &node{kind: kind, kids: []*node{left, right}}
	}
}

// term := unary (op unary | power)*
func (p *parser) term() (*node, error) {
	left, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		if err := p.m.charge(1); err != nil {
			return nil, err
		}
		t := p.peek()
		switch {
		case t.sym("*") || t.cmdIs("cdot") || t.cmdIs("times") || t.cmdIs("ast"):
			p.next()
			right, err := p.unary()
			if err != nil {
				return nil, err
			}
			left = &node{kind: nMul, kids: []*node{left, right}}
		case t.sym("/") || t.cmdIs("div") || t.cmdIs("over"):
			p.next()
			right, err := p.unary()
			if err != nil {
				return nil, err
			}
			left = &node{kind: nDiv, kids: []*node{left, right}}
		case p.startsFactor(t):
			if mixed, ok := p.mixedNumber(left); ok {
				left = mixed
				continue
			}
			right, err := p.power()
			if err != nil {
				return nil, err
			}
			left = &node{kind: nMul, kids: []*node{left, right}}
		default:
			return left, nil
		}
	}
}

// mixedNumber reads `1\frac{4}{5}` (and `-1\frac{1}{2}`) after the integer
// left: an integer followed by a \frac of integers p < q is their sum.
func (p *parser) mixedNumber(left *node) (*node, bool) {
	t := p.peek()
	if t.kind != tCmd || !fracCmds[t.text] {
		return nil, false
	}
	whole, neg := left, false
	if whole.kind == nNeg {
		whole, neg = whole.kids[0], true
	}
	if whole.kind != nNum || whole.name != "int" {
		return nil, false
	}
	f, ok := p.tryProperFraction()
	if !ok {
		return nil, false
	}
	sum := &node{kind: nAdd, kids: []*node{whole, f}}
	if neg {
		return &node{kind: nNeg, kids: []*node{sum}}, true
	}
	return sum, true
}

// tryProperFraction reads `\frac{p}{q}` with integer literals 0 < p < q
// without consuming anything when it is not one.
func (p *parser) tryProperFraction() (*node, bool) {
	save := p.lx.pos
	p.lx.next() // the \frac token
	a, ok1 := p.lx.rawArg()
	b, ok2 := p.lx.rawArg()
	pa, okA := new(big.Int).SetString(strings.TrimSpace(a), 10)
	pb, okB := new(big.Int).SetString(strings.TrimSpace(b), 10)
	if ok1 && ok2 && okA && okB && pa.Sign() > 0 && pa.Cmp(pb) < 0 {
		return &node{kind: nNum, val: ratValue(new(big.Rat).SetFrac(pa, pb))}, true
	}
	p.lx.pos = save
	p.lx.unread()
	return nil, false
}

// startsFactor reports whether t can start an implicitly multiplied factor.
func (p *parser) startsFactor(t token) bool {
	switch t.kind {
	case tNum, tLetter:
		return true
	case tWord:
		return !isSeparator(t) && wordRole(t.text) != roleUnit
	case tCmd:
		if _, ok := relOps[t.text]; ok {
			return false
		}
		switch t.text {
		case "cdot", "times", "div", "pm", "mp", "cup", "cap", "approx", "simeq", "sim", "}", "rfloor",
			"rceil", "rvert", "rangle", "rbrace", "\\", "to", "rightarrow", "Rightarrow", "implies",
			"quad", "ast", "over", "end", "&", "|", "%":
			return false
		}
		return true
	case tSym:
		switch t.text {
		case "(", "[":
			return true
		case "|":
			return p.absOpen == 0
		}
	}
	return false
}

// unary := ('-' | '+' | '\pm' | '\mp') unary | power
func (p *parser) unary() (*node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	t := p.peek()
	switch {
	case t.sym("-"):
		p.next()
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		return &node{kind: nNeg, kids: []*node{x}}, nil
	case t.sym("+"):
		p.next()
		return p.unary()
	case t.cmdIs("pm"), t.cmdIs("mp"):
		p.next()
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		return &node{kind: nPM, kids: []*node{nil, x}}, nil
	}
	return p.power()
}

// power := postfix ('^' exponent)?
func (p *parser) power() (*node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	base, err := p.primary()
	if err != nil {
		return nil, err
	}
	base, err = p.postfix(base)
	if err != nil {
		return nil, err
	}
	if !p.peek().sym("^") {
		return base, nil
	}
	p.next()
	if t := p.peek(); t.cmdIs("prime") {
		p.next()
		return primed(base)
	}
	exp, err := p.exponent()
	if err != nil {
		return nil, err
	}
	if exp.kind == nText && exp.name == "'" {
		return primed(base)
	}
	return p.postfix(&node{kind: nPow, kids: []*node{base, exp}})
}

func primed(n *node) (*node, error) {
	if n.kind != nVar {
		return nil, parseErr("prime on a non-variable")
	}
	return &node{kind: nVar, name: n.name + "'"}, nil
}

// exponent reads what follows '^': a brace group, a signed exponent, a whole
// number, one letter, a parenthesized group or a command.
func (p *parser) exponent() (*node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	t := p.peek()
	switch {
	case t.sym("{"):
		body, ok := p.lx.rawArg()
		if !ok {
			return nil, parseErr("unclosed exponent")
		}
		if strings.TrimSpace(body) == `\prime` || strings.TrimSpace(body) == "'" {
			return &node{kind: nText, name: "'"}, nil
		}
		return p.sub(body, p.brackets, p.expr)
	case t.sym("-") || t.sym("+"):
		p.next()
		x, err := p.exponent()
		if err != nil {
			return nil, err
		}
		if t.sym("-") {
			return &node{kind: nNeg, kids: []*node{x}}, nil
		}
		return x, nil
	case t.kind == tWord:
		// e^ab is e^a·b: take one letter.
		p.lx.unread()
		p.lx.pos = t.pos + 1
		return letterNode(t.text[:1]), nil
	case t.kind == tNum, t.kind == tLetter, t.sym("("), t.kind == tCmd:
		x, err := p.primary()
		if err != nil {
			return nil, err
		}
		if p.peek().sym("^") { // right-associative
			p.next()
			e, err := p.exponent()
			if err != nil {
				return nil, err
			}
			return &node{kind: nPow, kids: []*node{x, e}}, nil
		}
		return x, nil
	}
	return nil, parseErr("bad exponent %q", t.text)
}

// postfix := primary ('!' | "'" | '%')*
func (p *parser) postfix(n *node) (*node, error) {
	for {
		t := p.peek()
		switch {
		case t.sym("!"):
			p.next()
			n = &node{kind: nFunc, name: "fact", kids: []*node{n}}
		case t.sym("'"):
			p.next()
			var err error
			if n, err = primed(n); err != nil {
				return nil, err
			}
		case t.sym("%"):
			p.next()
			n = &node{kind: nPercent, kids: []*node{n}}
		default:
			return n, nil
		}
	}
}

type wordRoleKind uint8

const (
	roleLetters wordRoleKind = iota // a product of one-letter variables: "xy"
	roleFunc
	roleConst
	roleUnit // a unit or other text
)

var shortUnits = map[string]bool{
	"cm": true, "mm": true, "km": true, "kg": true, "mg": true, "ft": true, "in": true, "mi": true,
	"hr": true, "hrs": true, "yr": true, "yrs": true, "sec": true, "min": true, "mph": true, "kph": true,
	"lb": true, "lbs": true, "oz": true, "ml": true, "mL": true, "cc": true, "deg": true, "rad": true,
	"pts": true, "sq": true, "cu": true, "ms": true, "ns": true, "us": true, "Hz": true, "kHz": true,
	"MHz": true, "GHz": true, "eV": true, "keV": true, "MeV": true, "GeV": true, "nm": true, "pc": true,
	"kpc": true, "Mpc": true, "AU": true, "au": true, "yd": true, "gal": true, "mol": true, "kJ": true,
	"J": true, "kW": true, "mW": true, "Pa": true, "kPa": true, "atm": true, "erg": true, "dB": true,
	"st": true, "nd": true, "rd": true, "th": true,
}

func wordRole(w string) wordRoleKind {
	if _, ok := funcNames[w]; ok {
		return roleFunc
	}
	switch w {
	case "pi", "inf", "infty", "infinity":
		return roleConst
	}
	if shortUnits[w] || len(w) >= 4 {
		return roleUnit
	}
	return roleLetters
}

// letterNode is a one-letter variable, or e / i.
func letterNode(l string) *node {
	switch l {
	case "e":
		return &node{kind: nConst, name: "e"}
	case "i":
		return &node{kind: nConst, name: "i"}
	}
	return &node{kind: nVar, name: l}
}

// primary parses an atom.
func (p *parser) primary() (*node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	t := p.next()
	if p.lx.err != nil {
		return nil, p.lx.err
	}
	switch t.kind {
	case tEOF:
		return nil, parseErr("unexpected end")
	case tNum:
		if p.peek().sym("_") && !strings.ContainsAny(t.text, ".eE,") {
			// 52_8: a numeral in another base, compared by its digits.
			p.next()
			base, ok := p.lx.rawArg()
			if !ok {
				return nil, parseErr("empty base")
			}
			return &node{kind: nNumeral, name: t.text, open: subscriptName(base)}, nil
		}
		n, err := p.number(t.text)
		if err == nil && n.name == "int" {
			n.open = t.text // the digits, for comparison with a numeral
		}
		return n, err
	case tLetter:
		return p.variable(letterNode(t.text))
	case tWord:
		switch wordRole(t.text) {
		case roleFunc:
			return p.function(funcNames[t.text])
		case roleConst:
			if t.text == "pi" {
				return &node{kind: nConst, name: "pi"}, nil
			}
			return &node{kind: nConst, name: "inf"}, nil
		case roleUnit:
			return p.text(t.text)
		}
		// A product of letters: read the first one, leave the rest.
		p.lx.pos = t.pos + 1
		return p.variable(letterNode(t.text[:1]))
	case tText:
		return p.textCommand(t)
	case tCmd:
		return p.command(t)
	case tSym:
		switch t.text {
		case "(", "[":
			return p.group(t.text)
		case "{":
			p.lx.pos = t.pos
			body, ok := p.lx.rawArg()
			if !ok {
				return nil, parseErr("unclosed brace")
			}
			return p.sub(body, p.brackets, p.answer)
		case "|":
			return p.absValue("|", func(t token) bool { return t.sym("|") })
		}
	}
	return nil, parseErr("unexpected %q", t.text)
}

// number converts a literal (thousands commas, decimal point, e-notation).
func (p *parser) number(text string) (*node, error) {
	lit := strings.ReplaceAll(text, ",", "")
	mant, exp := lit, ""
	if k := strings.IndexAny(lit, "eE"); k >= 0 {
		mant, exp = lit[:k], lit[k+1:]
	}
	r, ok := new(big.Rat).SetString(strings.TrimSuffix(mant, "."))
	if !ok {
		return nil, parseErr("bad number %q", text)
	}
	if err := p.m.charge(int64(len(lit)) / 16); err != nil {
		return nil, err
	}
	n := &node{kind: nNum}
	if !strings.ContainsAny(lit, ".eE") {
		n.name = "int"
	} else {
		n.sigDigits = significantDigits(mant)
	}
	if exp != "" {
		e, err := parseSmallInt(exp)
		if err != nil || e > int64(p.m.b.MaxBits) || e < -int64(p.m.b.MaxBits) {
			return nil, parseErr("exponent out of range in %q", text)
		}
		scale := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(absInt64(e)), nil))
		if e >= 0 {
			r.Mul(r, scale)
		} else {
			r.Quo(r, scale)
		}
		n.sci = true
	}
	a := arith{m: p.m, maxBits: p.m.b.MaxBits}
	n.val = a.fit(ratValue(r))
	return n, nil
}

func parseSmallInt(s string) (int64, error) {
	var v int64
	neg := false
	switch {
	case strings.HasPrefix(s, "-"):
		neg, s = true, s[1:]
	case strings.HasPrefix(s, "+"):
		s = s[1:]
	}
	if s == "" || len(s) > 9 {
		return 0, parseErr("bad exponent")
	}
	for i := 0; i < len(s); i++ {
		v = v*10 + int64(s[i]-'0')
	}
	if neg {
		v = -v
	}
	return v, nil
}

// significantDigits counts the significant digits of a decimal mantissa.
func significantDigits(m string) int {
	d := strings.TrimLeft(strings.ReplaceAll(m, ".", ""), "0")
	if strings.Contains(m, ".") {
		return len(d)
	}
	return len(strings.TrimRight(d, "0"))
}

// variable reads subscripts and primes after a letter.
func (p *parser) variable(n *node) (*node, error) {
	if n.kind == nConst && !p.peek().sym("_") {
		return n, nil
	}
	if p.peek().sym("_") {
		p.next()
		sub, ok := p.lx.rawArg()
		if !ok {
			return nil, parseErr("empty subscript")
		}
		n = &node{kind: nVar, name: n.name + "_" + subscriptName(sub)}
	}
	return n, nil
}

// group parses ( … ) or [ … ]: a parenthesized value, or a tuple/interval.
func (p *parser) group(open string) (*node, error) {
	saved := p.brackets
	p.setBrackets(saved + 1)
	defer p.setBrackets(saved)
	var elems []*node
	for {
		if len(elems) >= p.m.b.MaxItems {
			return nil, fmt.Errorf("%w: more than %d elements", errBudget, p.m.b.MaxItems)
		}
		el, err := p.element()
		if err != nil {
			return nil, err
		}
		elems = append(elems, el)
		t := p.peek()
		if t.sym(",") || t.sym(";") {
			p.next()
			continue
		}
		if t.sym(")") || t.sym("]") {
			p.next()
			closeTok := t.text
			if len(elems) == 1 && open+closeTok != "(]" && open+closeTok != "[)" {
				return elems[0], nil
			}
			return &node{kind: nTuple, open: open, close: closeTok, kids: elems}, nil
		}
		return nil, parseErr("expected ) or ], got %q", t.text)
	}
}

// collection parses the elements of \{…\} or \langle…\rangle up to the closer.
func (p *parser) collection(isClose func(token) bool) ([]*node, error) {
	saved := p.brackets
	p.setBrackets(saved + 1)
	defer p.setBrackets(saved)
	var elems []*node
	if isClose(p.peek()) {
		p.next()
		return elems, nil
	}
	for {
		if len(elems) >= p.m.b.MaxItems {
			return nil, fmt.Errorf("%w: more than %d elements", errBudget, p.m.b.MaxItems)
		}
		el, err := p.element()
		if err != nil {
			return nil, err
		}
		elems = append(elems, el)
		t := p.peek()
		if isSeparator(t) {
			p.next()
			continue
		}
		if isClose(t) {
			p.next()
			return elems, nil
		}
		return nil, parseErr("unclosed collection at %q", t.text)
	}
}

// arg parses a macro argument (a brace group or a single token).
func (p *parser) arg() (*node, error) {
	body, ok := p.lx.rawArg()
	if !ok {
		return nil, parseErr("missing argument")
	}
	return p.sub(body, p.brackets, p.answer)
}
