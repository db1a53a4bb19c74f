package main

import (
	"bytes"
	"strings"
	"testing"
)

// runCmd executes the root command with args and stdin, and returns what it
// wrote to stdout and stderr.
func runCmd(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}
