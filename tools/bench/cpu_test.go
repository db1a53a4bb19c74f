package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/backend/cpu"
)

// fakeTorch is a stand-in for Python with the baseline script: an OpenBLAS
// that runs core $OPENBLAS_CORETYPE, or the core given when it is unset (or
// always that core when ignores), at 100 tokens/s forward and 50 trained.
func fakeTorch(t *testing.T, kind, core string, ignores bool) string {
	t.Helper()
	coreExpr := `${OPENBLAS_CORETYPE:-` + core + `}`
	if ignores {
		coreExpr = core
	}
	py := filepath.Join(t.TempDir(), "python")
	script := `#!/bin/sh
[ "$1" = -c ] && exit 0
read shapes
echo "{\"info\": {\"torch\": \"fake\", \"threads\": 1, \"blas_kind\": \"` + kind + `\", \"blas_core\": \"` + coreExpr + `\"}}"
while read name; do echo "{\"name\": \"$name\", \"fwd_tok_s\": 100, \"train_tok_s\": 50}"; done
`
	if err := os.WriteFile(py, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return py
}

// TestBenchSameCore: PyTorch runs with its default kernels and, when its
// OpenBLAS picks another core than gdrotrain's, again with
// OPENBLAS_CORETYPE set to ours; where the same kernels cannot be had, the
// output says so instead of printing a second ratio.
func TestCompareCPUSameCore(t *testing.T) {
	core := cpu.NewBackend().BLASCore()
	if core == "" {
		t.Skip("no OpenBLAS core to match")
	}
	shapes := Shapes()[:1]
	shapes[0].Iters = 1
	script := filepath.Join(t.TempDir(), "bench.py")
	if err := os.WriteFile(script, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OPENBLAS_CORETYPE", "")
	if err := os.Unsetenv("OPENBLAS_CORETYPE"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, kind, core string
		ignores          bool
		want, notWant    []string
	}{
		{"older core", "OpenBLAS", "Prescott", false,
			[]string{"core Prescott", "against PyTorch's default kernels:", "against OPENBLAS_CORETYPE=" + core + " (gdrotrain's core):",
				"python) with OPENBLAS_CORETYPE=" + core + ": 1 threads (); BLAS: OpenBLAS, core " + core, "tiny per round against OPENBLAS_CORETYPE=" + core},
			nil},
		{"same core", "OpenBLAS", core, false, []string{"runs core " + core + " by itself, as gdrotrain does"}, []string{"against"}},
		{"ignored", "OpenBLAS", "Prescott", true, []string{"ignores OPENBLAS_CORETYPE=" + core + " (it runs core Prescott)"}, []string{"against"}},
		{"MKL", "MKL", "", false, []string{"PyTorch calls MKL, not OpenBLAS"}, []string{"against"}},
	} {
		var out bytes.Buffer
		err := CompareCPU(&out, shapes, CPUOptions{Python: fakeTorch(t, c.kind, c.core, c.ignores), Script: script, Rounds: 2, Threads: 1})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		t.Logf("%s:\n%s", c.name, out.String())
		for _, w := range c.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%s: no %q in\n%s", c.name, w, out.String())
			}
		}
		for _, w := range c.notWant {
			if strings.Contains(out.String(), w) {
				t.Errorf("%s: %q in\n%s", c.name, w, out.String())
			}
		}
	}
}
