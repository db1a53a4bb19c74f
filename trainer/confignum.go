package trainer

// yaml.v3 decodes a float into an integer field by truncating it:
// train.steps: 3.5 ran 3 steps without a word. Every integer key is
// therefore checked against the YAML before decoding: a float that is not a
// whole number (3.5, .nan, .inf) is an error naming the key and line; a
// whole one (3.0, 1e3) is taken as the integer it is.

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// wholeNumbers returns an error for every non-whole float n (a YAML
// document or node) gives an integer field of t.
func wholeNumbers(raw []byte, t reflect.Type) error {
	var doc yaml.Node
	if yaml.Unmarshal(raw, &doc) != nil {
		return nil // the decoder names the syntax error
	}
	var bad []error
	checkWhole(&doc, t, "", &bad)
	return errors.Join(bad...)
}

func checkWhole(n *yaml.Node, t reflect.Type, key string, bad *[]error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.DocumentNode {
		for _, c := range n.Content {
			checkWhole(c, t, key, bad)
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			name := n.Content[i].Value
			if ft, ok := fields[name]; ok {
				checkWhole(n.Content[i+1], ft, joinKey(key, name), bad)
			}
		}
	case reflect.Map:
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				checkWhole(n.Content[i+1], t.Elem(), joinKey(key, n.Content[i].Value), bad)
			}
		}
	case reflect.Slice, reflect.Array:
		if n.Kind == yaml.SequenceNode {
			for i, c := range n.Content {
				checkWhole(c, t.Elem(), fmt.Sprintf("%s[%d]", key, i), bad)
			}
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!float" {
			return
		}
		if f, err := strconv.ParseFloat(n.Value, 64); err != nil || f != math.Trunc(f) {
			*bad = append(*bad, fmt.Errorf("line %d: %s: %s is not a whole number (the key takes an integer)", n.Line, key, n.Value))
		}
	}
}

// yamlFields maps a struct's YAML keys to their types, inline fields'
// keys included.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case name == "-":
		case strings.Contains(opts, "inline"):
			for k, v := range yamlFields(f.Type) {
				out[k] = v
			}
		case name == "":
			out[strings.ToLower(f.Name)] = f.Type
		default:
			out[name] = f.Type
		}
	}
	return out
}

func joinKey(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}
