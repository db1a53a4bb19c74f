package reward

// Lexing for the symbolic mode: canonMath rewrites Unicode math and strips
// delimiters and decorations that never change a value; the lexer then
// produces numbers, letters, words, commands, \text-like groups and symbols.
// Sizing and spacing commands (\left, \right, \big, \, \! \quad …) are
// dropped here, so the parser never sees them.

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

var unicodeMath = strings.NewReplacer(
	"−", "-", "–", "-", "—", "-", "﹣", "-", "－", "-",
	"×", `\times `, "·", `\cdot `, "⋅", `\cdot `, "∙", `\cdot `, "÷", "/",
	"π", `\pi `, "∞", `\infty `, "√", `\sqrt`, "°", "", "º", "",
	"≤", `\le `, "≥", `\ge `, "≠", `\ne `, "±", `\pm `, "∓", `\mp `,
	"∪", `\cup `, "∈", `\in `, "′", "'", "″", "''", "∅", `\emptyset `,
	"\u00a0", " ", "\u2009", " ", "\u202f", " ", "\u2002", " ", "\u2003", " ",
	"\u200b", "", "\u2061", "", "\u2062", "",
	"θ", `\theta `, "α", `\alpha `, "β", `\beta `, "γ", `\gamma `, "λ", `\lambda `,
	"ω", `\omega `, "φ", `\phi `, "μ", `\mu `, "σ", `\sigma `, "τ", `\tau `,
	"²", "^2", "³", "^3", "¹", "^1", "⁴", "^4", "½", `\frac{1}{2}`, "¼", `\frac{1}{4}`, "¾", `\frac{3}{4}`,
	// degree signs and delimiters never change a value
	`^{\circ}`, "", `^\circ`, "", `^{\circ }`, "", `\circ`, "", `\degree`, "",
	`\%`, "%", `\$`, "", "$", "", `\(`, "", `\)`, "", `\[`, "", `\]`, "",
	"np.", "", "math.", "",
)

// canonMath prepares an answer for lexing.
func canonMath(s string) string {
	return strings.TrimSpace(unicodeMath.Replace(groupDigits(s)))
}

// groupDigits reads thousands separators written with LaTeX or Unicode
// spacing: `1\,000`, `1{,}000`, `11,\! 111`, `1\!,\!000`, `1 000` (thin
// space), `1~000` all become 1000. A separator is a comma (`,` or `{,}`)
// and/or spacing (space, `~`, `\,` `\!` `\;` `\:` `\ `, U+00A0, U+2009, U+202F);
// a bare `,` is left alone (it may separate a list; readings tries both), and
// so is a comma followed only by plain spaces (`1, 000` is a list).
//
// Digits are joined only in a well-formed grouping: one to three digits not
// preceded by a digit, a decimal point, a letter, `^` or `_`, then groups of
// exactly three digits. Otherwise the separator is not one: `{,}` becomes a
// plain comma (so `1{,}00` is the list 1, 00 and never 100, and a decimal
// comma `3{,}14` is not 3.14), and spacing between two digits becomes a NUL
// byte, which no parse accepts and no normalization removes (so `1\,00` is
// neither 100 nor the product 1·00, and `12 34` is not 408), except after a
// subscript or an exponent (`\log_2 8`).
func groupDigits(s string) string {
	if !hasDigitSep(s) && !strings.Contains(s, "{,}") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	// A chain of separated digit runs that is not a well-formed grouping is
	// not one from any later run either: skip to where the failed scan
	// ended, so that the pass stays linear.
	noGroupBefore := 0
	for i := 0; i < len(s); {
		if !isDigit(s[i]) || (i > 0 && !groupStart(s[i-1])) || i < noGroupBefore {
			if n, comma := sepAt(s, i); n > 0 && i > 0 && isDigit(s[i-1]) && i+n < len(s) && isDigit(s[i+n]) {
				// A separator that is not part of a well-formed grouping.
				switch {
				case comma:
					b.WriteByte(',')
				case numberRun(s, i):
					b.WriteByte(0)
				default: // `\log_2 8`: the space ends a subscript
					b.WriteString(s[i : i+n])
				}
				i += n
				continue
			}
			if strings.HasPrefix(s[i:], "{,}") {
				b.WriteByte(',')
				i += 3
				continue
			}
			b.WriteByte(s[i])
			i++
			continue
		}
		// A digit run that may start a grouped number.
		j := i
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		end, ok := groupedEnd(s, i, j)
		if !ok {
			b.WriteString(s[i:j])
			i, noGroupBefore = j, end
			continue
		}
		for k := i; k < end; {
			if isDigit(s[k]) {
				b.WriteByte(s[k])
				k++
				continue
			}
			n, _ := sepAt(s, k)
			k += n
		}
		i = end
	}
	return b.String()
}

// hasDigitSep reports a digit followed by something sepAt might read, so
// that most answers skip groupDigits' copy.
func hasDigitSep(s string) bool {
	for i := 0; i+1 < len(s); i++ {
		if isDigit(s[i]) {
			switch s[i+1] {
			case ' ', '~', '\\', '{', ',', 0xc2, 0xe2:
				return true
			}
		}
	}
	return false
}

// numberRun reports whether the digits that end at s[i-1] are a number
// literal or its decimals, not a subscript, an exponent or part of a name.
func numberRun(s string, i int) bool {
	r := i
	for r > 0 && isDigit(s[r-1]) {
		r--
	}
	return r == 0 || groupStart(s[r-1]) || s[r-1] == '.'
}

func groupStart(c byte) bool {
	return !isDigit(c) && c != '.' && !isLetter(c) && c != '^' && c != '_'
}

// groupedEnd returns the end of a well-formed grouped number whose first
// digit run is s[i:j], if there is one with at least one explicit (not bare
// comma) separator; else false and where its scan stopped.
func groupedEnd(s string, i, j int) (int, bool) {
	if j-i > 3 {
		return j, false
	}
	k, explicit, groups := j, false, 0
	for {
		n, comma := sepAt(s, k)
		if n == 0 || k+n >= len(s) || !isDigit(s[k+n]) {
			break
		}
		d := k + n
		e := d
		for e < len(s) && isDigit(s[e]) {
			e++
		}
		if e-d != 3 {
			return e, false // `1\,00`, `1{,}0000`: not thousands
		}
		explicit = explicit || !comma || s[k:k+n] != ","
		k, groups = e, groups+1
	}
	return k, groups > 0 && explicit
}

// sepAt returns the length of a thousands separator at s[i] (0 if none) and
// whether it has a comma. A comma with only plain spaces around it is not
// one (`1, 000` is a list); a bare `,` is, for groupedEnd to see through.
func sepAt(s string, i int) (int, bool) {
	k, comma, fancy := i, false, false
	for k < len(s) {
		if n := spaceAt(s, k); n > 0 {
			fancy = fancy || s[k] != ' '
			k += n
			continue
		}
		if !comma && s[k] == ',' {
			comma, k = true, k+1
			continue
		}
		if !comma && strings.HasPrefix(s[k:], "{,}") {
			comma, fancy, k = true, true, k+3
			continue
		}
		break
	}
	if comma && !fancy && k-i > 1 {
		return 0, false
	}
	return k - i, comma
}

// spaceAt returns the length of a spacing token at s[i], or 0.
func spaceAt(s string, i int) int {
	switch s[i] {
	case ' ', '~':
		return 1
	case '\\':
		if i+1 < len(s) {
			switch s[i+1] {
			case ',', '!', ';', ':', ' ':
				return 2
			}
		}
	case 0xc2:
		if strings.HasPrefix(s[i:], "\u00a0") {
			return 2
		}
	case 0xe2:
		if strings.HasPrefix(s[i:], "\u2009") || strings.HasPrefix(s[i:], "\u202f") {
			return 3
		}
	}
	return 0
}

func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

type tokKind uint8

const (
	tEOF    tokKind = iota
	tNum            // text: digits, maybe thousands commas, a decimal point, an exponent
	tLetter         // one letter
	tWord           // two or more ASCII letters
	tCmd            // text: command name without the backslash ("frac", "{", "\\")
	tSym            // text: one symbol, or "<=", ">=", "!="
	tText           // text: the content of \text{…} and kin; cmd: the command
)

type token struct {
	kind tokKind
	text string
	cmd  string
	pos  int
	end  int
}

func (t token) sym(text string) bool   { return t.kind == tSym && t.text == text }
func (t token) cmdIs(name string) bool { return t.kind == tCmd && t.text == name }

// skipCmds are commands that carry no value.
var skipCmds = map[string]bool{
	"left": true, "right": true, "big": true, "Big": true, "bigg": true, "Bigg": true,
	"bigl": true, "bigr": true, "Bigl": true, "Bigr": true, "biggl": true, "biggr": true,
	"Biggl": true, "Biggr": true, "middle": true, "displaystyle": true, "textstyle": true,
	"scriptstyle": true, "limits": true, "nolimits": true, ",": true, "!": true, ";": true,
	":": true, " ": true, "quad": true, "qquad": true, "mathstrut": true, "strut": true,
	"hfill": true, "enspace": true, "thinspace": true, "medspace": true, "thickspace": true,
	"negthinspace": true, "allowbreak": true, "nobreak": true, "rm": true, "bf": true, "it": true,
}

// textCmds read a raw brace group.
var textCmds = map[string]bool{
	"text": true, "textrm": true, "textbf": true, "textit": true, "textsf": true, "texttt": true,
	"textnormal": true, "mbox": true, "hbox": true, "mathrm": true, "operatorname": true,
	"textup": true, "emph": true,
}

type lexer struct {
	src    string
	pos    int
	m      *meter
	merge  bool // read "1,234,567" as one number
	peeked bool
	tok    token
	err    error
}

func newLexer(src string, m *meter, merge bool) *lexer {
	return &lexer{src: src, m: m, merge: merge}
}

// peek returns the next token without consuming it.
func (lx *lexer) peek() token {
	if !lx.peeked {
		lx.tok = lx.lex()
		lx.peeked = true
	}
	return lx.tok
}

// next consumes and returns the next token.
func (lx *lexer) next() token {
	t := lx.peek()
	lx.peeked = false
	lx.pos = t.end
	return t
}

// unread forgets a peeked token so that raw reading starts before it.
func (lx *lexer) unread() { lx.peeked = false }

// lex reads one token starting at lx.pos (without moving lx.pos).
func (lx *lexer) lex() token {
	s := lx.src
	i := lx.pos
	for {
		if lx.err == nil {
			lx.err = lx.m.charge(1)
		}
		if lx.err != nil {
			return token{kind: tEOF, pos: i, end: i}
		}
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r' || s[i] == '~') {
			i++
		}
		if i >= len(s) {
			return token{kind: tEOF, pos: i, end: i}
		}
		c := s[i]
		switch {
		case isDigit(c) || (c == '.' && i+1 < len(s) && isDigit(s[i+1])):
			return lx.number(i)
		case isLetter(c):
			j := i + 1
			for j < len(s) && isLetter(s[j]) {
				j++
			}
			if j-i == 1 {
				return token{kind: tLetter, text: s[i:j], pos: i, end: j}
			}
			return token{kind: tWord, text: s[i:j], pos: i, end: j}
		case c == '\\':
			name, j := commandAt(s, i)
			if skipCmds[name] {
				if (name == "left" || name == "right" || strings.HasPrefix(name, "big") ||
					strings.HasPrefix(name, "Big")) && j < len(s) && s[j] == '.' {
					j++
				}
				i = j
				continue
			}
			if textCmds[name] {
				k := j
				for k < len(s) && s[k] == ' ' {
					k++
				}
				if k < len(s) && s[k] == '{' {
					if body, ok := braceGroup(s, k); ok {
						return token{kind: tText, text: body, cmd: name, pos: i, end: k + len(body) + 2}
					}
				}
				return token{kind: tText, text: "", cmd: name, pos: i, end: j}
			}
			return token{kind: tCmd, text: name, pos: i, end: j}
		case c < utf8.RuneSelf:
			if i+1 < len(s) {
				switch two := s[i : i+2]; two {
				case "<=", ">=", "!=", "=<", "=>":
					return token{kind: tSym, text: two, pos: i, end: i + 2}
				}
			}
			return token{kind: tSym, text: s[i : i+1], pos: i, end: i + 1}
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if unicode.IsLetter(r) {
				return token{kind: tLetter, text: s[i : i+size], pos: i, end: i + size}
			}
			return token{kind: tSym, text: s[i : i+size], pos: i, end: i + size}
		}
	}
}

// commandAt reads the command starting with the backslash at s[i].
func commandAt(s string, i int) (string, int) {
	j := i + 1
	if j >= len(s) {
		return "", j
	}
	if !isLetter(s[j]) {
		_, size := utf8.DecodeRuneInString(s[j:])
		return s[j : j+size], j + size
	}
	for j < len(s) && isLetter(s[j]) {
		j++
	}
	return s[i+1 : j], j
}

// number reads a numeric literal at s[i].
func (lx *lexer) number(i int) token {
	s := lx.src
	j := i
	for j < len(s) && isDigit(s[j]) {
		j++
	}
	if lx.merge && j-i <= 3 {
		j = thousandsEnd(s, j)
	}
	if j < len(s) && s[j] == '.' {
		k := j + 1
		for k < len(s) && isDigit(s[k]) {
			k++
		}
		// "1." is a number unless a letter follows ("1.x" is not a number).
		if k > j+1 || k >= len(s) || !isLetter(s[k]) {
			j = k
		}
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		k := j + 1
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			k++
		}
		d := k
		for k < len(s) && isDigit(s[k]) {
			k++
		}
		if k > d && (k >= len(s) || !isLetter(s[k])) {
			j = k
		}
	}
	return token{kind: tNum, text: s[i:j], pos: i, end: j}
}

// thousandsEnd returns the end of a digit run whose first group ends at j
// when the run reads as `\d{1,3}(,\d{3})+`, or j if the comma run is not a
// well-formed thousands number.
func thousandsEnd(s string, j int) int {
	k, groups := j, 0
	for k+3 < len(s) && s[k] == ',' && isDigit(s[k+1]) && isDigit(s[k+2]) && isDigit(s[k+3]) {
		if k+4 < len(s) && isDigit(s[k+4]) {
			return j // a group of four or more digits: a list, not thousands
		}
		k += 4
		groups++
	}
	if groups == 0 || (k+1 < len(s) && s[k] == ',' && isDigit(s[k+1])) {
		return j // "1,234,5" is not a thousands number either
	}
	return k
}

// rawArg reads one macro argument from the source: a brace group's content,
// or a single character, or a command with its name. Any peeked token is
// discarded first. ok is false at the end of input.
func (lx *lexer) rawArg() (arg string, ok bool) {
	lx.unread()
	s := lx.src
	i := lx.pos
	for i < len(s) && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t') {
		i++
	}
	if i >= len(s) {
		lx.pos = i
		return "", false
	}
	switch {
	case s[i] == '{':
		body, ok := braceGroup(s, i)
		if !ok {
			lx.pos = len(s)
			return "", false
		}
		lx.pos = i + len(body) + 2
		return body, true
	case s[i] == '\\':
		_, j := commandAt(s, i)
		lx.pos = j
		return s[i:j], true
	default:
		_, size := utf8.DecodeRuneInString(s[i:])
		lx.pos = i + size
		return s[i : i+size], true
	}
}

// rawOptional reads an optional `[…]` argument (as after \sqrt).
func (lx *lexer) rawOptional() (string, bool) {
	lx.unread()
	s := lx.src
	i := lx.pos
	for i < len(s) && s[i] == ' ' {
		i++
	}
	if i >= len(s) || s[i] != '[' {
		return "", false
	}
	depth := 0
	for k := i; k < len(s); k++ {
		switch s[k] {
		case '[':
			depth++
		case ']':
			depth--
			if depth == 0 {
				lx.pos = k + 1
				return s[i+1 : k], true
			}
		}
	}
	return "", false
}

// rawUntilEnd reads the body of \begin{env} up to the matching \end{env}.
func (lx *lexer) rawUntilEnd(env string) (string, bool) {
	lx.unread()
	s := lx.src
	begin, end := `\begin{`+env+"}", `\end{`+env+"}"
	depth := 1
	for k := lx.pos; k < len(s); {
		nb := strings.Index(s[k:], begin)
		ne := strings.Index(s[k:], end)
		if ne < 0 {
			return "", false
		}
		if nb >= 0 && nb < ne {
			depth++
			k += nb + len(begin)
			continue
		}
		depth--
		if depth == 0 {
			body := s[lx.pos : k+ne]
			lx.pos = k + ne + len(end)
			return body, true
		}
		k += ne + len(end)
	}
	return "", false
}
