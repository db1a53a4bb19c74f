// Package configdoc renders the run configuration's reference (docs/config.md)
// from the config structs themselves: every YAML key is found by reflection
// on trainer.Config, its default is trainer.Default()'s value, and its
// meaning is the Go field's own comment, read from the source with go/ast.
// The comments are therefore the one place a key is documented; the test
// fails when a key has none or when the committed page is out of date
// (`make config-doc` rewrites it).
package configdoc

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/gdrotrain/gdrotrain/trainer"
)

// modulePath is the module's import path: a struct's package path below it
// is the folder its source lives in.
const modulePath = "github.com/gdrotrain/gdrotrain"

// Key is one YAML key of the run config.
type Key struct {
	Path    string // dotted YAML path, e.g. "optim.lr"
	Type    string // the Go type as a reader needs it: number, string, bool, list…
	Default string // trainer.Default()'s value, in YAML
	Doc     string // the field's comment, one paragraph
}

// Section is a top-level or nested struct: its key prefix and the type's doc.
type Section struct {
	Path string
	Doc  string
	Keys []Key
}

// comments holds, per package folder, the doc of each struct type and of
// each of its fields.
type comments struct {
	root  string
	types map[string]string            // "pkgdir.Type" → doc
	field map[string]map[string]string // "pkgdir.Type" → field → doc
	seen  map[string]bool              // package folders parsed
}

func (c *comments) load(pkgPath string) (string, error) {
	rel := strings.TrimPrefix(strings.TrimPrefix(pkgPath, modulePath), "/")
	if c.seen[rel] {
		return rel, nil
	}
	c.seen[rel] = true
	dir := filepath.Join(c.root, rel)
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(paths) == 0 {
		return rel, fmt.Errorf("parse %s: no Go files (%v)", dir, err)
	}
	fset := token.NewFileSet()
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return rel, fmt.Errorf("parse %s: %w", path, err)
		}
		c.structs(rel, f)
	}
	return rel, nil
}

// structs records the doc comments of f's struct types and their fields.
func (c *comments) structs(rel string, f *ast.File) {
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.TYPE {
			continue
		}
		for _, s := range g.Specs {
			ts := s.(*ast.TypeSpec)
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				continue
			}
			key := rel + "." + ts.Name.Name
			doc := ts.Doc
			if doc == nil && len(g.Specs) == 1 {
				doc = g.Doc
			}
			c.types[key] = text(doc)
			fields := map[string]string{}
			for _, fl := range st.Fields.List {
				d := text(fl.Doc)
				if d == "" {
					d = text(fl.Comment)
				}
				for _, n := range fl.Names {
					fields[n.Name] = d
				}
			}
			c.field[key] = fields
		}
	}
}

// text joins a comment group into one paragraph.
func text(g *ast.CommentGroup) string {
	if g == nil {
		return ""
	}
	return strings.Join(strings.Fields(g.Text()), " ")
}

// Sections walks trainer.Config under root (the repository) and returns its
// sections in declaration order, each followed by its nested sections.
func Sections(root string) ([]Section, error) {
	c := &comments{root: root, types: map[string]string{}, field: map[string]map[string]string{}, seen: map[string]bool{}}
	secs, err := c.walk(reflect.ValueOf(trainer.Default()), "")
	if err != nil {
		return nil, err
	}
	return secs[1:], nil // the root holds only sections
}

// walk returns the section of struct value v (at YAML prefix), then the
// sections of its struct-valued fields.
func (c *comments) walk(v reflect.Value, prefix string) ([]Section, error) {
	t := v.Type()
	rel, err := c.load(t.PkgPath())
	if err != nil {
		return nil, err
	}
	sec := Section{Path: prefix, Doc: sentence(unname(c.types[rel+"."+t.Name()], t.Name(), prefix))}
	var nested []Section
	if err := c.fields(v, prefix, &sec, &nested); err != nil {
		return nil, err
	}
	return append([]Section{sec}, nested...), nil
}

// fields adds v's keys to sec; struct fields (and pointers to structs,
// optional sections) become nested sections. Inline fields add their keys
// to sec itself.
func (c *comments) fields(v reflect.Value, prefix string, sec *Section, nested *[]Section) error {
	t := v.Type()
	rel, err := c.load(t.PkgPath())
	if err != nil {
		return err
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		fv := v.Field(i)
		if strings.Contains(opts, "inline") {
			if err := c.fields(fv, prefix, sec, nested); err != nil {
				return err
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		path := join(prefix, name)
		doc := unname(c.field[rel+"."+t.Name()][f.Name], f.Name, name)
		sv, optional := structValue(fv)
		if sv.IsValid() {
			secs, err := c.walk(sv, path)
			if err != nil {
				return err
			}
			if secs[0].Doc == "" || optional {
				secs[0].Doc = strings.TrimSpace(doc + " " + secs[0].Doc)
			}
			if optional {
				secs[0].Doc += " (Optional: absent by default.)"
			}
			*nested = append(*nested, secs...)
			continue
		}
		sec.Keys = append(sec.Keys, Key{Path: path, Type: typeName(f.Type), Default: yamlValue(fv), Doc: doc})
	}
	return nil
}

// structValue returns the struct a field holds (a zero one for a nil
// pointer to a struct: an optional section), or an invalid Value.
func structValue(v reflect.Value) (reflect.Value, bool) {
	switch {
	case v.Kind() == reflect.Struct:
		return v, false
	case v.Kind() == reflect.Pointer && v.Type().Elem().Kind() == reflect.Struct:
		if v.IsNil() {
			return reflect.New(v.Type().Elem()).Elem(), true
		}
		return v.Elem(), true
	}
	return reflect.Value{}, false
}

// typeName says what a key takes, in the user's words.
func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return typeName(t.Elem())
	case reflect.Bool:
		return "bool"
	case reflect.String:
		return "string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "list of " + typeName(t.Elem())
	case reflect.Map:
		return "map " + typeName(t.Key()) + " → " + typeName(t.Elem())
	}
	return t.String()
}

// yamlValue renders a default as the YAML a user would write ("—" for an
// unset one: nil, an empty string or list).
func yamlValue(v reflect.Value) string {
	if (v.Kind() == reflect.Pointer || v.Kind() == reflect.Map || v.Kind() == reflect.Slice) && (v.IsNil() || v.Len() == 0 && v.Kind() != reflect.Pointer) {
		return "—"
	}
	if v.Kind() == reflect.String && v.String() == "" {
		return "—"
	}
	if v.Kind() == reflect.Slice {
		items := make([]string, v.Len())
		for i := range items {
			items[i] = yamlValue(v.Index(i))
		}
		return "[" + strings.Join(items, ", ") + "]"
	}
	if v.Kind() == reflect.Map {
		return fmt.Sprint(v.Interface())
	}
	b, err := yaml.Marshal(v.Interface())
	if err != nil {
		return fmt.Sprint(v.Interface())
	}
	return strings.TrimSpace(string(b))
}

// unname drops the Go name a doc comment starts with, which means nothing
// to a YAML user: "MatMul is the GPU's precision" → "the GPU's precision",
// "ShareNorm divides …" → "divides …".
func unname(doc, name, key string) string {
	rest, ok := strings.CutPrefix(doc, name+" ")
	if !ok {
		return doc
	}
	if r, _ := utf8.DecodeRuneInString(rest); !unicode.IsLetter(r) { // "KVCacheGiB > 0 pages …"
		return "`" + key + "` " + rest
	}
	for _, verb := range []string{"is ", "are "} {
		if r, ok := strings.CutPrefix(rest, verb); ok {
			rest = r
			break
		}
	}
	return rest
}

// sentence capitalises a section's doc, which stands alone as a paragraph.
func sentence(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// Undocumented lists the keys whose field has no comment.
func Undocumented(secs []Section) []string {
	var out []string
	for _, s := range secs {
		for _, k := range s.Keys {
			if k.Doc == "" {
				out = append(out, k.Path)
			}
		}
	}
	sort.Strings(out)
	return out
}

// Markdown renders the reference page.
func Markdown(secs []Section) string {
	var b strings.Builder
	b.WriteString("# Config reference\n\n")
	b.WriteString("<!-- Generated by `make config-doc` (tools/configdoc) from the config structs' field\n")
	b.WriteString("comments and trainer.Default(); edit the comments in the Go source, not this page. -->\n\n")
	b.WriteString("A run config is YAML with unknown keys rejected; `--set section.key=value` overrides any key\n")
	b.WriteString("(the value in YAML syntax), `--print-config` shows the resolved config. Every default below is\n")
	b.WriteString("`trainer.Default()`'s; `train.method` then switches the GDRO controllers on or off\n")
	b.WriteString("(`Config.Resolved`). `—` marks a key with no default (a path the run must be given, or an\n")
	b.WriteString("optional setting that is off). A key renamed before the first release is an error naming\n")
	b.WriteString("its new name.\n")
	for _, s := range secs {
		fmt.Fprintf(&b, "\n## `%s`\n\n", s.Path)
		if s.Doc != "" {
			b.WriteString(s.Doc + "\n\n")
		}
		if len(s.Keys) == 0 {
			continue
		}
		b.WriteString("| key | type | default | meaning |\n|---|---|---|---|\n")
		for _, k := range s.Keys {
			fmt.Fprintf(&b, "| `%s` | %s | `%s` | %s |\n", k.Path, k.Type, k.Default, strings.ReplaceAll(k.Doc, "|", "\\|"))
		}
	}
	return b.String()
}
