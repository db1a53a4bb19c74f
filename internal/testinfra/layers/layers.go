// Package layers enforces the layering of docs/architecture.md. The table
// there gives every package of the module a row; a package imports only
// from the rows below its own, never from its own row or one above
// (TestLayers compares the table with the import graph `go list` reports,
// so the table is the layering's one statement and `make test` checks it).
// Only non-test imports count: a test may import what it needs to check
// its package (the CUDA tests compare with the trainer).
package layers

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Header is the first cells of the layer table's header row; the first
// table whose header starts so is the layer table.
const Header = "| layer | core | tools beside the core | test infrastructure |"

// Row is one layer: its name (the first cell) and the packages in its
// core, tools and test-infrastructure cells, relative to the module path.
type Row struct {
	Name     string
	Line     int // 1-based line in the Markdown file
	Packages []string
}

// Table is the layer table, its rows from the top (the programs) down.
type Table struct {
	Rows  []Row
	index map[string]int // package → row
}

var pkgName = regexp.MustCompile("`([^`]+)`")

// Parse reads the layer table from a Markdown page. Packages are the
// backquoted names of the second to fourth cells; a package in two rows
// is an error, as is a page without the table or a row without packages.
func Parse(md string) (*Table, error) {
	lines := strings.Split(md, "\n")
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), Header) {
			start = i
			break
		}
	}
	if start < 0 {
		return nil, fmt.Errorf("no layer table (a table whose header starts %q)", Header)
	}
	t := &Table{index: map[string]int{}}
	for i := start + 2; i < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i]), "|"); i++ {
		row, err := parseRow(lines[i], i+1)
		if err != nil {
			return nil, err
		}
		for _, p := range row.Packages {
			if j, dup := t.index[p]; dup {
				return nil, fmt.Errorf("line %d: package %s is in row %q and in row %q (line %d)", i+1, p, row.Name, t.Rows[j].Name, t.Rows[j].Line)
			}
			t.index[p] = len(t.Rows)
		}
		t.Rows = append(t.Rows, row)
	}
	if len(t.Rows) == 0 {
		return nil, fmt.Errorf("line %d: the layer table has no rows", start+1)
	}
	return t, nil
}

func parseRow(line string, n int) (Row, error) {
	cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
	if len(cells) < 4 {
		return Row{}, fmt.Errorf("line %d: %d cells, want at least 4 (layer, core, tools, test infrastructure)", n, len(cells))
	}
	r := Row{Name: strings.TrimSpace(cells[0]), Line: n}
	for _, c := range cells[1:4] {
		for _, m := range pkgName.FindAllStringSubmatch(c, -1) {
			r.Packages = append(r.Packages, strings.TrimSuffix(m[1], "/"))
		}
	}
	if len(r.Packages) == 0 {
		return Row{}, fmt.Errorf("line %d: row %q names no package", n, r.Name)
	}
	return r, nil
}

// Row returns the row of package p, and whether the table has it.
func (t *Table) Row(p string) (Row, bool) {
	i, ok := t.index[p]
	if !ok {
		return Row{}, false
	}
	return t.Rows[i], true
}

// Check compares the table with an import graph (package → the module's
// packages it imports, paths relative to the module) and returns one
// finding per upward or same-row import, per package the table lacks and
// per table entry that is no package, sorted.
func (t *Table) Check(graph map[string][]string) []string {
	var out []string
	for p, imports := range graph {
		i, ok := t.index[p]
		if !ok {
			out = append(out, fmt.Sprintf("package %s is in no row of the layer table: add it to the row of its layer", p))
			continue
		}
		for _, q := range imports {
			j, ok := t.index[q]
			if ok && j <= i { // rows run from the top down: below means a larger index
				where := "a row above"
				if j == i {
					where = "its own row (peers do not import each other)"
				}
				out = append(out, fmt.Sprintf("%s (row %q, line %d) imports %s (row %q, line %d), from %s: a package imports only from the rows below its own",
					p, t.Rows[i].Name, t.Rows[i].Line, q, t.Rows[j].Name, t.Rows[j].Line, where))
			}
		}
	}
	for p, i := range t.index {
		if _, ok := graph[p]; !ok {
			out = append(out, fmt.Sprintf("the layer table names %s (row %q, line %d), which is no package of the module", p, t.Rows[i].Name, t.Rows[i].Line))
		}
	}
	sort.Strings(out)
	return out
}

// Graph returns the module's import graph as `go list` reports it under
// root (the module's folder): every package, relative to the module path,
// with the module's packages its non-test files import, with cgo on and
// off (files built only one way count).
func Graph(root string) (map[string][]string, error) {
	mod, err := modulePath(root)
	if err != nil {
		return nil, err
	}
	graph := map[string][]string{}
	for _, cgo := range []string{"0", "1"} {
		cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...")
		cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED="+cgo)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("go list (CGO_ENABLED=%s) in %s: %v: %s", cgo, root, err, stderr.String())
		}
		addImports(graph, string(out), mod)
	}
	return graph, nil
}

// addImports adds go list's lines ("pkg import import …") to graph,
// keeping the module's packages only.
func addImports(graph map[string][]string, out, mod string) {
	rel := func(p string) (string, bool) {
		if p == mod {
			return ".", true
		}
		r, ok := strings.CutPrefix(p, mod+"/")
		return r, ok
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		p, ok := rel(f[0])
		if !ok {
			continue
		}
		seen := map[string]bool{}
		for _, q := range graph[p] {
			seen[q] = true
		}
		if _, ok := graph[p]; !ok {
			graph[p] = nil // a package that imports none of the module's still needs a row
		}
		for _, imp := range f[1:] {
			if q, ok := rel(imp); ok && !seen[q] {
				seen[q] = true
				graph[p] = append(graph[p], q)
			}
		}
	}
}

// modulePath reads the module path from root's go.mod.
func modulePath(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if m, ok := strings.CutPrefix(strings.TrimSpace(l), "module "); ok {
			return strings.Trim(strings.TrimSpace(m), `"`), nil
		}
	}
	return "", fmt.Errorf("%s: no module line", filepath.Join(root, "go.mod"))
}
