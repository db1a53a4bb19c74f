package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestCommandFilesAreThin: a command file is its flags and one call into a
// package (docs/architecture.md, "The command line"): at most 200 lines,
// no functions but the command's constructor (newXCmd) and shared flag
// helpers (addXFlags), no types, and a RunE of a few statements (setting
// the writers, a flag given or not) before its call. main.go keeps the
// signals and the exit status, which only a program has. Logic put back
// in package main fails here, naming the file and the function.
func TestCommandFilesAreThin(t *testing.T) {
	const maxLines, maxRunE = 200, 6
	allowed := regexp.MustCompile(`^(new[A-Z]\w*Cmd|add\w*Flags?)$`)
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || name == "main.go" {
			continue
		}
		raw, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(raw), "\n"); n > maxLines {
			t.Errorf("%s: %d lines, want at most %d", name, n, maxLines)
		}
		f, err := parser.ParseFile(fset, name, raw, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv != nil || !allowed.MatchString(d.Name.Name) {
					t.Errorf("%s: func %s: a command file holds only newXCmd and addXFlags; move it into the package the command calls", name, d.Name.Name)
				}
			case *ast.GenDecl:
				if d.Tok == token.TYPE {
					t.Errorf("%s: a type declaration: the command's options are the package's type", name)
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			kv, ok := n.(*ast.KeyValueExpr)
			if !ok {
				return true
			}
			key, _ := kv.Key.(*ast.Ident)
			fl, _ := kv.Value.(*ast.FuncLit)
			if key != nil && key.Name == "RunE" && fl != nil && len(fl.Body.List) > maxRunE {
				t.Errorf("%s:%d: RunE has %d statements, want at most %d (flags, then one call)", name, fset.Position(fl.Pos()).Line, len(fl.Body.List), maxRunE)
			}
			return true
		})
	}
}
