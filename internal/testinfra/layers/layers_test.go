package layers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLayers: the module's import graph keeps docs/architecture.md's
// layer table: no package imports from its own row or one above, every
// package has a row, and every entry is a package.
func TestLayers(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	md, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	table, err := Parse(string(md))
	if err != nil {
		t.Fatalf("docs/architecture.md: %v", err)
	}
	graph, err := Graph(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range table.Check(graph) {
		t.Error("docs/architecture.md: " + f)
	}
	if len(graph) < 40 {
		t.Errorf("go list reported %d packages; the module has more than 40", len(graph))
	}
}

// synthetic is a layer table of three rows in the page's format.
const synthetic = `# Layers

| layer | core | tools beside the core | test infrastructure | notes |
|---|---|---|---|---|
| 1 programs | ` + "`cmd/gdrotrain`" + ` | | | the binary |
| 2 applications | ` + "`trainer`" + ` | ` + "`report`" + ` | | |
| 3 parts | ` + "`data`, `reward`" + ` | | ` + "`internal/testinfra/numcheck`" + ` | not ` + "`notapackage`" + ` |
| 4 leaves | ` + "`device`" + ` | ` + "`tools/watch/`" + ` | | |

After the table.
`

// TestCheck: upward and same-row imports fail, naming both packages and
// their rows; downward imports pass; a package without a row and a row
// entry without a package fail.
func TestCheck(t *testing.T) {
	table, err := Parse(synthetic)
	if err != nil {
		t.Fatal(err)
	}
	all := func(extra map[string][]string) map[string][]string {
		g := map[string][]string{"cmd/gdrotrain": {"trainer", "device"}, "trainer": {"data", "reward", "device"},
			"report": {"tools/watch"}, "data": {"device"}, "reward": nil, "internal/testinfra/numcheck": nil, "device": nil, "tools/watch": nil}
		for p, imps := range extra {
			g[p] = imps
		}
		return g
	}
	for _, c := range []struct {
		name  string
		graph map[string][]string
		want  []string // one finding each, as substrings; none: no finding
	}{
		{"downward imports only", all(nil), nil},
		{"device imports report", all(map[string][]string{"device": {"report"}}),
			[]string{`device (row "4 leaves", line 8) imports report (row "2 applications", line 6)`}},
		{"same row: data imports reward", all(map[string][]string{"data": {"reward"}}),
			[]string{`data (row "3 parts", line 7) imports reward (row "3 parts", line 7)`}},
		{"a tool imports the program", all(map[string][]string{"tools/watch": {"cmd/gdrotrain"}}),
			[]string{`tools/watch (row "4 leaves", line 8) imports cmd/gdrotrain (row "1 programs", line 5)`}},
		{"a package without a row", all(map[string][]string{"grpo": nil}),
			[]string{"package grpo is in no row"}},
		{"an entry that is no package", func() map[string][]string { g := all(nil); delete(g, "internal/testinfra/numcheck"); return g }(),
			[]string{`names internal/testinfra/numcheck (row "3 parts", line 7), which is no package`}},
		{"two findings", all(map[string][]string{"device": {"trainer", "data"}}),
			[]string{"device (row \"4 leaves\", line 8) imports data", "device (row \"4 leaves\", line 8) imports trainer"}},
	} {
		got := table.Check(c.graph)
		if len(got) != len(c.want) {
			t.Errorf("%s: %d findings %q, want %d", c.name, len(got), got, len(c.want))
			continue
		}
		for i, w := range c.want {
			if !strings.Contains(got[i], w) {
				t.Errorf("%s: finding %q, want one containing %q", c.name, got[i], w)
			}
		}
	}
}

// TestParse: the notes column does not count, a trailing slash is
// dropped, and a missing table, a package in two rows and a row without
// packages are errors naming the line.
func TestParse(t *testing.T) {
	table, err := Parse(synthetic)
	if err != nil {
		t.Fatal(err)
	}
	if len(table.Rows) != 4 {
		t.Fatalf("%d rows, want 4", len(table.Rows))
	}
	if _, ok := table.Row("notapackage"); ok {
		t.Error("a name in the notes column counted as a package")
	}
	if r, ok := table.Row("tools/watch"); !ok || r.Name != "4 leaves" || r.Line != 8 {
		t.Errorf("tools/watch: %+v, %v", r, ok)
	}
	for _, c := range []struct{ name, md, want string }{
		{"no table", "# Layers\n\n| a | b |\n|---|---|\n", "no layer table"},
		{"package in two rows", strings.Replace(synthetic, "`device`", "`data`", 1), "line 8: package data is in row \"4 leaves\" and in row \"3 parts\""},
		{"row without packages", strings.Replace(synthetic, "| 4 leaves | `device` | `tools/watch/` | | |", "| 4 leaves | device | | | |", 1), `line 8: row "4 leaves" names no package`},
		{"too few cells", strings.Replace(synthetic, "| 4 leaves | `device` | `tools/watch/` | | |", "| 4 leaves | `device` |", 1), "line 8: 2 cells"},
	} {
		if _, err := Parse(c.md); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// TestAddImports: go list's lines keep the module's packages only, an
// import listed under both cgo settings once, and a package importing
// nothing of the module still has its entry.
func TestAddImports(t *testing.T) {
	g := map[string][]string{}
	addImports(g, "m/a m/b fmt m/c\nm/b\nother/x m/a\n", "m")
	addImports(g, "m/a m/c m/d\n", "m")
	if got := strings.Join(g["a"], " "); got != "b c d" {
		t.Errorf("a imports %q, want \"b c d\"", got)
	}
	if imps, ok := g["b"]; !ok || len(imps) != 0 {
		t.Errorf("b: %v, %v", imps, ok)
	}
	if len(g) != 2 {
		t.Errorf("graph %v: want a and b only", g)
	}
}
