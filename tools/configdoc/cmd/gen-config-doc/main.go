// Command gen-config-doc writes docs/config.md from the run config's
// structs (see package configdoc). Run from the repository root:
//
//	go run ./tools/configdoc/cmd/gen-config-doc      (make config-doc)
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/gdrotrain/gdrotrain/tools/configdoc"
)

func main() {
	secs, err := configdoc.Sections(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen-config-doc:", err)
		os.Exit(1)
	}
	if missing := configdoc.Undocumented(secs); len(missing) > 0 {
		fmt.Fprintf(os.Stderr, "gen-config-doc: keys without a field comment: %s\n", strings.Join(missing, ", "))
		os.Exit(1)
	}
	if err := os.WriteFile("docs/config.md", []byte(configdoc.Markdown(secs)), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gen-config-doc:", err)
		os.Exit(1)
	}
}
