package cudaemu

// Finding the launchable kernels of a (preprocessed) CUDA C++ source: every
// definition of an extern "C" __global__ function at namespace scope.

import (
	"fmt"
	"strings"
)

// kernelDecl is one launchable kernel.
type kernelDecl struct {
	Name  string   // its C name, which cuModuleGetFunction looks up
	Scope []string // enclosing named namespaces, outermost first
}

// Qualified is the name by which the generated trampoline calls the kernel.
func (k kernelDecl) Qualified() string {
	return strings.Join(append(append([]string{}, k.Scope...), k.Name), "::")
}

type tokKind byte

const (
	tIdent tokKind = iota
	tString
	tChar
	tNumber
	tPunct
)

type token struct {
	kind tokKind
	text string
	line int
}

func (t token) is(kind tokKind, text string) bool { return t.kind == kind && t.text == text }

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}
func isIdentChar(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

// lex splits C++ source into tokens, dropping comments and preprocessor
// directives.
func lex(src string) ([]token, error) {
	var toks []token
	line, lineStart := 1, true
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '\n':
			line++
			lineStart = true
			i++
			continue
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			i++
			continue
		case c == '\\' && i+1 < len(src) && src[i+1] == '\n':
			i += 2
			line++
			continue
		case strings.HasPrefix(src[i:], "//"):
			for i < len(src) && src[i] != '\n' {
				i++
			}
			continue
		case strings.HasPrefix(src[i:], "/*"):
			end := strings.Index(src[i+2:], "*/")
			if end < 0 {
				return nil, fmt.Errorf("line %d: unterminated comment", line)
			}
			line += strings.Count(src[i:i+2+end], "\n")
			i += end + 4
			continue
		case c == '#' && lineStart:
			for i < len(src) && src[i] != '\n' {
				if src[i] == '\\' && i+1 < len(src) && src[i+1] == '\n' {
					line++
					i++
				} else if strings.HasPrefix(src[i:], "/*") {
					end := strings.Index(src[i+2:], "*/")
					if end < 0 {
						return nil, fmt.Errorf("line %d: unterminated comment", line)
					}
					line += strings.Count(src[i:i+2+end], "\n")
					i += end + 3
				}
				i++
			}
			continue
		}
		lineStart = false
		start, startLine := i, line
		switch {
		case isIdentStart(c):
			for i < len(src) && isIdentChar(src[i]) {
				i++
			}
			word := src[start:i]
			if i < len(src) && src[i] == '"' && strings.HasSuffix(word, "R") &&
				(word == "R" || word == "u8R" || word == "uR" || word == "UR" || word == "LR") {
				open := strings.IndexByte(src[i:], '(')
				if open < 0 {
					return nil, fmt.Errorf("line %d: bad raw string", line)
				}
				delim := src[i+1 : i+open]
				end := strings.Index(src[i+open:], ")"+delim+"\"")
				if end < 0 {
					return nil, fmt.Errorf("line %d: unterminated raw string", line)
				}
				i += open + end + len(delim) + 2
				line += strings.Count(src[start:i], "\n")
				toks = append(toks, token{tString, src[start:i], startLine})
				continue
			}
			if i < len(src) && (src[i] == '"' || src[i] == '\'') && (word == "u8" || word == "u" || word == "U" || word == "L") {
				start = i // an encoding prefix: lex the literal below
				c = src[i]
				break
			}
			toks = append(toks, token{tIdent, word, startLine})
			continue
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(src) && src[i+1] >= '0' && src[i+1] <= '9':
			for i < len(src) {
				d := src[i]
				if (d == '+' || d == '-') && strings.ContainsRune("eEpP", rune(src[i-1])) {
					i++
				} else if isIdentChar(d) || d == '.' || d == '\'' {
					i++
				} else {
					break
				}
			}
			toks = append(toks, token{tNumber, src[start:i], startLine})
			continue
		}
		if c == '"' || c == '\'' {
			i++
			for i < len(src) && src[i] != c {
				if src[i] == '\\' {
					i++
				}
				if i < len(src) && src[i] == '\n' {
					return nil, fmt.Errorf("line %d: unterminated literal", line)
				}
				i++
			}
			if i >= len(src) {
				return nil, fmt.Errorf("line %d: unterminated literal", line)
			}
			i++
			kind := tString
			if c == '\'' {
				kind = tChar
			}
			toks = append(toks, token{kind, src[start:i], startLine})
			continue
		}
		toks = append(toks, token{tPunct, string(c), startLine})
		i++
	}
	return toks, nil
}

// skipParens returns the index just past the parenthesis group opening at i.
func skipParens(toks []token, i int) (int, bool) {
	depth := 0
	for ; i < len(toks); i++ {
		switch {
		case toks[i].is(tPunct, "("):
			depth++
		case toks[i].is(tPunct, ")"):
			depth--
			if depth == 0 {
				return i + 1, true
			}
		}
	}
	return i, false
}

// attributeWords are followed by a parenthesised argument list that is not
// the kernel's parameter list.
var attributeWords = map[string]bool{
	"__launch_bounds__": true, "__attribute__": true, "__declspec": true, "alignas": true,
	"__align__": true, "__maxnreg__": true, "__cluster_dims__": true, "decltype": false,
}

const (
	scopeOther = iota
	scopeExternC
	scopeNamespace
)

type scope struct {
	kind int
	name string
}

// findKernels lists the extern "C" __global__ functions that src defines at
// namespace scope, in source order. Macros must already be expanded.
func findKernels(src string) ([]kernelDecl, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	var (
		stack     []scope
		kernels   []kernelDecl
		seen      = map[string]bool{}
		stmtStart = 0
	)
	atNamespaceLevel := func() bool {
		for _, s := range stack {
			if s.kind == scopeOther {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch {
		case t.is(tPunct, "{"):
			s := scope{kind: scopeOther}
			if atNamespaceLevel() {
				s = classify(toks[stmtStart:i])
			}
			stack = append(stack, s)
			stmtStart = i + 1
		case t.is(tPunct, "}"):
			if len(stack) == 0 {
				return nil, fmt.Errorf("line %d: unbalanced }", t.line)
			}
			stack = stack[:len(stack)-1]
			stmtStart = i + 1
		case t.is(tPunct, ";"):
			stmtStart = i + 1
		case t.is(tIdent, "__global__") && atNamespaceLevel():
			prefix := toks[stmtStart:i]
			externC := false
			for _, s := range stack {
				externC = externC || s.kind == scopeExternC
			}
			template := false
			for j, p := range prefix {
				if p.is(tIdent, "extern") && j+1 < len(prefix) && prefix[j+1].is(tString, `"C"`) {
					externC = true
				}
				template = template || p.is(tIdent, "template")
			}
			name, def, err := parseKernelHead(toks, i+1)
			if err != nil {
				return nil, err
			}
			if !externC || template || !def || seen[name] {
				continue
			}
			seen[name] = true
			var ns []string
			for _, s := range stack {
				if s.kind == scopeNamespace && s.name != "" {
					ns = append(ns, s.name)
				}
			}
			kernels = append(kernels, kernelDecl{Name: name, Scope: ns})
		}
	}
	if len(stack) != 0 {
		return nil, fmt.Errorf("unbalanced { at end of source")
	}
	return kernels, nil
}

// classify tells what a brace opened at namespace level after the tokens
// of prefix opens.
func classify(prefix []token) scope {
	n := len(prefix)
	if n >= 2 && prefix[n-2].is(tIdent, "extern") && prefix[n-1].is(tString, `"C"`) {
		return scope{kind: scopeExternC}
	}
	for j, p := range prefix {
		if !p.is(tIdent, "namespace") {
			continue
		}
		rest := prefix[j+1:]
		ok := j == 0 || j == 1 && prefix[0].is(tIdent, "inline")
		if ok && len(rest) == 0 {
			return scope{kind: scopeNamespace}
		}
		if ok && len(rest) == 1 && rest[0].kind == tIdent {
			return scope{kind: scopeNamespace, name: rest[0].text}
		}
		// namespace a::b { ... }
		if ok && len(rest)%3 == 1 {
			var parts []string
			good := true
			for k := 0; k < len(rest); k += 3 {
				good = good && rest[k].kind == tIdent
				if k+2 < len(rest) {
					good = good && rest[k+1].is(tPunct, ":") && rest[k+2].is(tPunct, ":")
				}
				parts = append(parts, rest[k].text)
			}
			if good {
				return scope{kind: scopeNamespace, name: strings.Join(parts, "::")}
			}
		}
	}
	return scope{kind: scopeOther}
}

// parseKernelHead reads a declaration from just after __global__: the
// kernel's name, and whether a body follows (a definition).
func parseKernelHead(toks []token, i int) (name string, definition bool, err error) {
	line := 0
	if i < len(toks) {
		line = toks[i].line
	}
	for i < len(toks) {
		t := toks[i]
		switch {
		case t.kind == tIdent && attributeWords[t.text] && i+1 < len(toks) && toks[i+1].is(tPunct, "("):
			end, ok := skipParens(toks, i+1)
			if !ok {
				return "", false, fmt.Errorf("line %d: unbalanced ( after %s", t.line, t.text)
			}
			i = end
		case t.is(tPunct, "[") && i+1 < len(toks) && toks[i+1].is(tPunct, "["):
			for i < len(toks) && !(toks[i].is(tPunct, "]") && i+1 < len(toks) && toks[i+1].is(tPunct, "]")) {
				i++
			}
			i += 2
		case t.kind == tIdent:
			name = t.text
			i++
		case t.is(tPunct, ":") && i+1 < len(toks) && toks[i+1].is(tPunct, ":"):
			i += 2 // a qualified name: the last part is the kernel's
		case t.is(tPunct, "("):
			if name == "" {
				return "", false, fmt.Errorf("line %d: __global__ function without a name", line)
			}
			end, ok := skipParens(toks, i)
			if !ok {
				return "", false, fmt.Errorf("line %d: unbalanced ( in the parameters of %s", line, name)
			}
			for i = end; i < len(toks); i++ {
				switch {
				case toks[i].is(tPunct, "{"):
					return name, true, nil
				case toks[i].is(tPunct, ";"):
					return name, false, nil
				case toks[i].is(tPunct, "("):
					e, ok := skipParens(toks, i)
					if !ok {
						return "", false, fmt.Errorf("line %d: unbalanced ( after %s", line, name)
					}
					i = e - 1
				}
			}
			return "", false, fmt.Errorf("line %d: %s: no body or ; after the parameters", line, name)
		default:
			// Not a plain function declaration (a template specialisation,
			// a function pointer...): not a launchable kernel.
			return "", false, nil
		}
	}
	return "", false, fmt.Errorf("line %d: incomplete __global__ declaration", line)
}
