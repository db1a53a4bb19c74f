// Package configs embeds the shipped run configurations (the YAML files in
// this folder) so the binary can run them from anywhere: `gdrotrain train
// --config paper-grpo-1.7b` finds the built-in file when no such path exists.
package configs

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

//go:embed *.yaml
var files embed.FS

// Names lists the built-in configurations (file names without .yaml).
func Names() []string {
	entries, _ := fs.ReadDir(files, ".")
	var out []string
	for _, e := range entries {
		out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(out)
	return out
}

// Get returns a built-in configuration by name.
func Get(name string) ([]byte, error) {
	raw, err := files.ReadFile(strings.TrimSuffix(name, ".yaml") + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("no built-in config %q (built-in: %s)", name, strings.Join(Names(), ", "))
	}
	return raw, nil
}
