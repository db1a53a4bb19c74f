package reward

// The LaTeX vocabulary of the symbolic parser: commands in value position
// (\frac, \sqrt, \binom, \lfloor, \{…\}, \langle, \mathbb{R}, \vec{x}, \angle …),
// named functions and their arguments (\sin^2 x, \log_2 n, \sin^{-1}),
// matrices, text and units. The grammar itself is in symbolic_parse.go.

import (
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// fracCmds are the spellings of \frac.
var fracCmds = map[string]bool{"frac": true, "dfrac": true, "tfrac": true, "cfrac": true}

// funcNames maps function commands and words to evaluator names.
var funcNames = map[string]string{
	"sin": "sin", "cos": "cos", "tan": "tan", "cot": "cot", "sec": "sec", "csc": "csc",
	"arcsin": "arcsin", "arccos": "arccos", "arctan": "arctan", "asin": "arcsin",
	"acos": "arccos", "atan": "arctan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh",
	"ln": "ln", "log": "ln", "lg": "log10", "exp": "exp", "sqrt": "sqrt", "abs": "abs",
	"max": "max", "min": "min", "arcsec": "arcsec", "arccsc": "arccsc", "arccot": "arccot",
	"tg": "tan", "ctg": "cot",
}

// inverseTrig reads \sin^{-1} as \arcsin.
var inverseTrig = map[string]string{"sin": "arcsin", "cos": "arccos", "tan": "arctan",
	"sec": "arcsec", "csc": "arccsc", "cot": "arccot"}

// constCmds are the constants; other letter commands (Greek letters, \hbar,
// \ell) are variables named by the command.
var constCmds = map[string]string{"pi": "pi", "infty": "inf", "infin": "inf", "imath": "i", "jmath": "i"}

var subscriptCanon = strings.NewReplacer(" ", "", "{", "", "}", "", `\text`, "", `\mathrm`, "", `\rm`, "", `\`, "")

// subscriptName normalizes a subscript: `{0}`, `0`, `{\text {red}}` → "0", "red".
func subscriptName(s string) string {
	return subscriptCanon.Replace(s)
}

// text gathers a run of words (and \text groups) into a text node.
func (p *parser) text(first string) (*node, error) {
	words := []string{first}
	for {
		t := p.peek()
		if (t.kind == tWord || t.kind == tLetter) && !isSeparator(t) {
			p.next()
			words = append(words, t.text)
			continue
		}
		if t.kind == tText && !isSeparator(t) {
			p.next()
			words = append(words, t.text)
			continue
		}
		break
	}
	return &node{kind: nText, name: normText(strings.Join(words, " "))}, nil
}

// normText lower-cases text and keeps letters and digits only.
func normText(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127 {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// textCommand handles \text{…}, \mathrm{…}, \operatorname{…} in value position.
func (p *parser) textCommand(t token) (*node, error) {
	body := strings.TrimSpace(t.text)
	if f, ok := funcNames[body]; ok {
		return p.function(f)
	}
	if len(body) == 1 && isLetter(body[0]) {
		return p.variable(letterNode(body))
	}
	if body == "" {
		return nil, parseErr("empty text")
	}
	// \text{(C)}, \text{5}: the content may be math.
	if n, err := p.sub(canonMath(body), p.brackets, p.answer); err == nil && n.kind != nText {
		return n, nil
	} else if errors.Is(err, errBudget) {
		return nil, err
	}
	return p.text(body)
}

// units consumes trailing units: words, \text{…} groups, with ^2 and /unit.
func (p *parser) units() string {
	var parts []string
	for {
		t := p.peek()
		switch {
		case t.kind == tText && !isSeparator(t):
			p.next()
			parts = append(parts, t.text)
		case t.kind == tWord && wordRole(t.text) == roleUnit:
			p.next()
			parts = append(parts, t.text)
		case len(parts) > 0 && (t.kind == tWord || t.kind == tLetter) && !isSeparator(t):
			p.next()
			parts = append(parts, t.text)
		case len(parts) > 0 && t.sym("^"):
			p.next()
			if e, ok := p.lx.rawArg(); ok {
				parts = append(parts, "^"+e)
			}
		case len(parts) > 0 && t.sym("/"):
			p.next()
			parts = append(parts, "/")
		default:
			return normUnit(strings.Join(parts, " "))
		}
	}
}

var unitCanon = strings.NewReplacer("{", " ", "}", " ", ".", " ")

// normUnit reduces a unit to a comparable key: lower case, singular, with
// "square"/"cubic" written as powers ("square inches" = "inch^2").
func normUnit(u string) string {
	u = strings.ToLower(u)
	power := ""
	for _, w := range [][2]string{{"^{2}", "^2"}, {"^{3}", "^3"}, {"square ", "^2"}, {"sq. ", "^2"},
		{"sq ", "^2"}, {"cubic ", "^3"}, {"cu. ", "^3"}, {"cu ", "^3"}, {"^2", "^2"}, {"^3", "^3"}} {
		if strings.Contains(u, w[0]) {
			u = strings.ReplaceAll(u, w[0], " ")
			power = w[1]
		}
	}
	fields := strings.Fields(unitCanon.Replace(strings.ReplaceAll(u, `\`, " ")))
	for i, f := range fields {
		if len(f) > 3 && (strings.HasSuffix(f, "ches") || strings.HasSuffix(f, "shes")) {
			f = f[:len(f)-2]
		} else if len(f) > 3 && strings.HasSuffix(f, "s") && !strings.HasSuffix(f, "ss") {
			f = f[:len(f)-1]
		}
		switch f {
		case "feet", "ft":
			f = "foot"
		case "in":
			f = "inch"
		case "deg":
			f = "degree"
		}
		fields[i] = f
	}
	if len(fields) == 0 {
		return ""
	}
	return strings.Join(fields, " ") + power
}

// absValue parses |x| (or \lvert x \rvert, \lfloor x \rfloor …) with the
// given closer and wraps it in the function fn.
func (p *parser) absValue(fn string, isClose func(token) bool) (*node, error) {
	p.absOpen++
	defer func() { p.absOpen-- }()
	x, err := p.expr()
	if err != nil {
		return nil, err
	}
	if !isClose(p.peek()) {
		return nil, parseErr("unclosed %s", fn)
	}
	p.next()
	name := map[string]string{"|": "abs"}[fn]
	if name == "" {
		name = fn
	}
	return &node{kind: nFunc, name: name, kids: []*node{x}}, nil
}

// function parses the argument(s) of a named function.
func (p *parser) function(name string) (*node, error) {
	var power, base *node
	for {
		t := p.peek()
		if t.sym("^") && power == nil {
			p.next()
			e, err := p.exponent()
			if err != nil {
				return nil, err
			}
			power = e
			continue
		}
		if t.sym("_") && base == nil {
			p.next()
			b, err := p.arg()
			if err != nil {
				return nil, err
			}
			base = b
			continue
		}
		break
	}
	var args []*node
	t := p.peek()
	switch {
	case t.sym("("):
		p.next()
		g, err := p.group("(")
		if err != nil {
			return nil, err
		}
		if g.kind == nTuple && g.open == "(" && g.close == ")" {
			args = g.kids
		} else {
			args = []*node{g}
		}
	case t.sym("{"):
		g, err := p.arg()
		if err != nil {
			return nil, err
		}
		args = []*node{g}
	default:
		g, err := p.implicitArg()
		if err != nil {
			return nil, err
		}
		args = []*node{g}
	}
	if power != nil && name != "ln" {
		if inv, ok := inverseTrig[name]; ok && isMinusOne(power) {
			return &node{kind: nFunc, name: inv, kids: args}, nil
		}
	}
	f := &node{kind: nFunc, name: name, kids: args}
	if base != nil {
		if name != "ln" {
			return nil, parseErr("subscript on %s", name)
		}
		f = &node{kind: nFunc, name: "logb", kids: append([]*node{base}, args...)}
	}
	if power != nil {
		f = &node{kind: nPow, kids: []*node{f, power}}
	}
	return f, nil
}

func isMinusOne(n *node) bool {
	return n.kind == nNeg && n.kids[0].kind == nNum && n.kids[0].val.realExact() &&
		n.kids[0].val.re.Cmp(big.NewRat(1, 1)) == 0
}

// implicitArg reads the juxtaposed factors after a function name without
// parentheses (`\sin 2x`), stopping at the next function name.
func (p *parser) implicitArg() (*node, error) {
	x, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		if !p.startsFactor(t) || isFunctionToken(t) {
			return x, nil
		}
		y, err := p.power()
		if err != nil {
			return nil, err
		}
		x = &node{kind: nMul, kids: []*node{x, y}}
	}
}

func isFunctionToken(t token) bool {
	switch t.kind {
	case tCmd, tWord:
		_, ok := funcNames[t.text]
		return ok
	case tText:
		_, ok := funcNames[strings.TrimSpace(t.text)]
		return ok
	}
	return false
}

// matrixEnvs are the environments read as matrices.
var matrixEnvs = map[string]bool{"pmatrix": true, "bmatrix": true, "Bmatrix": true,
	"matrix": true, "smallmatrix": true, "array": true, "vmatrix": false}

// command parses a backslash command in value position.
func (p *parser) command(t token) (*node, error) {
	name := t.text
	if fracCmds[name] {
		a, err := p.arg()
		if err != nil {
			return nil, err
		}
		b, err := p.arg()
		if err != nil {
			return nil, err
		}
		return &node{kind: nDiv, kids: []*node{a, b}}, nil
	}
	if f, ok := funcNames[name]; ok && name != "sqrt" {
		return p.function(f)
	}
	if c, ok := constCmds[name]; ok {
		return &node{kind: nConst, name: c}, nil
	}
	switch name {
	case "sqrt":
		idx, hasIdx := p.lx.rawOptional()
		x, err := p.arg()
		if err != nil {
			return nil, err
		}
		if !hasIdx {
			return &node{kind: nFunc, name: "sqrt", kids: []*node{x}}, nil
		}
		k, err := p.sub(idx, p.brackets, p.expr)
		if err != nil {
			return nil, err
		}
		return &node{kind: nFunc, name: "root", kids: []*node{x, k}}, nil
	case "binom", "dbinom", "tbinom", "choose":
		a, err := p.arg()
		if err != nil {
			return nil, err
		}
		b, err := p.arg()
		if err != nil {
			return nil, err
		}
		return &node{kind: nFunc, name: "binom", kids: []*node{a, b}}, nil
	case "lfloor":
		return p.absValue("floor", func(t token) bool { return t.cmdIs("rfloor") })
	case "lceil":
		return p.absValue("ceil", func(t token) bool { return t.cmdIs("rceil") })
	case "lvert", "vert", "|":
		return p.absValue("abs", func(t token) bool {
			return t.cmdIs("rvert") || t.cmdIs("vert") || t.cmdIs("|") || t.sym("|")
		})
	case "{", "lbrace":
		elems, err := p.collection(func(t token) bool { return t.cmdIs("}") || t.cmdIs("rbrace") })
		if err != nil {
			return nil, err
		}
		return &node{kind: nSet, kids: elems}, nil
	case "langle":
		elems, err := p.collection(func(t token) bool { return t.cmdIs("rangle") })
		if err != nil {
			return nil, err
		}
		return &node{kind: nTuple, open: "(", close: ")", kids: elems}, nil
	case "emptyset", "varnothing":
		return &node{kind: nSet}, nil
	case "mathbb":
		a, ok := p.lx.rawArg()
		if ok && strings.TrimSpace(a) == "R" {
			inf := &node{kind: nConst, name: "inf"}
			return &node{kind: nTuple, open: "(", close: ")", kids: []*node{{kind: nNeg, kids: []*node{inf}}, inf}}, nil
		}
		return &node{kind: nText, name: "mathbb" + normText(a)}, nil
	case "begin":
		env, ok := p.lx.rawArg()
		if !ok {
			return nil, parseErr("\\begin without environment")
		}
		return p.matrix(env)
	case "boxed", "fbox", "mathbf", "boldsymbol", "bm", "mathit", "mathsf", "mathcal", "mathscr",
		"pmb", "textbf", "underline", "displaystyle":
		return p.arg()
	case "vec", "hat", "bar", "overline", "tilde", "dot", "ddot", "widehat", "widetilde",
		"overrightarrow", "check", "acute", "grave", "breve":
		x, err := p.arg()
		if err != nil {
			return nil, err
		}
		if x.kind == nVar {
			return p.variable(&node{kind: nVar, name: name + "(" + x.name + ")"})
		}
		return x, nil
	case "angle", "measuredangle", "triangle", "overarc", "arc":
		// ∠ABC, △ABC: a name.
		var b strings.Builder
		b.WriteString(name)
		for {
			t := p.peek()
			if t.kind == tLetter || t.kind == tWord || t.kind == tNum {
				p.next()
				b.WriteString(t.text)
				continue
			}
			if t.sym("_") {
				p.next()
				s, _ := p.lx.rawArg()
				b.WriteString("_" + subscriptName(s))
				continue
			}
			break
		}
		return &node{kind: nVar, name: b.String()}, nil
	case "prime":
		return nil, parseErr("stray prime")
	case "ldots", "cdots", "dots", "vdots", "ddots", "cap", "setminus", "sum", "prod", "int",
		"lim", "oint", "iint", "partial", "nabla", "forall", "exists", "to", "rightarrow",
		"Rightarrow", "implies", "iff", "mid", "cases", "end", "\\", "right", "left", "over":
		return nil, parseErr("unsupported \\%s", name)
	}
	if name != "" && isLetter(name[0]) {
		// Greek letters and other symbols (\alpha, \hbar, \ell): variables.
		return p.variable(&node{kind: nVar, name: `\` + name})
	}
	return nil, parseErr("unexpected \\%s", name)
}

// matrix parses the body of a matrix environment.
func (p *parser) matrix(env string) (*node, error) {
	env = strings.TrimSpace(env)
	if !matrixEnvs[env] {
		return nil, parseErr("unsupported environment %q", env)
	}
	if env == "array" {
		p.lx.rawArg() // the column specification
	}
	body, ok := p.lx.rawUntilEnd(env)
	if !ok {
		return nil, parseErr("unclosed %s", env)
	}
	rows := strings.Split(body, `\\`)
	if last := strings.TrimSpace(rows[len(rows)-1]); last == "" && len(rows) > 1 {
		rows = rows[:len(rows)-1]
	}
	mat := &node{kind: nMatrix, rows: len(rows)}
	for _, row := range rows {
		cells := strings.Split(row, "&")
		if mat.cols == 0 {
			mat.cols = len(cells)
		} else if mat.cols != len(cells) {
			return nil, parseErr("ragged matrix")
		}
		if len(mat.kids)+len(cells) > p.m.b.MaxItems {
			return nil, fmt.Errorf("%w: matrix larger than %d cells", errBudget, p.m.b.MaxItems)
		}
		for _, c := range cells {
			x, err := p.sub(c, p.brackets+1, p.element)
			if err != nil {
				return nil, err
			}
			mat.kids = append(mat.kids, x)
		}
	}
	return mat, nil
}
