package wheels

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// mkfiles creates each path under root (a folder when it ends in /, else
// an empty file), with its parents.
func mkfiles(t *testing.T, root string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		full := filepath.Join(root, p)
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// fakePyEnv is an environment with vars set, python3 at python (relative
// to root; "" for none), and a python3 that answers asked when asked.
func fakePyEnv(root string, vars map[string]string, python string, asked []string, calls *int) Env {
	return Env{
		Getenv: func(k string) string {
			if v, ok := vars[k]; ok {
				return filepath.Join(root, v)
			}
			return ""
		},
		LookPath: func(string) (string, error) {
			if python == "" {
				return "", errors.New("no python3")
			}
			return filepath.Join(root, python), nil
		},
		AskPython: func(string) []string {
			*calls++
			var out []string
			for _, a := range asked {
				out = append(out, filepath.Join(root, a))
			}
			return out
		},
	}
}

// TestFindSitePackages: the site-packages folders of the active Python
// environments, most specific first, each once, and python3 asked only
// when no globbed folder holds NVIDIA's wheels.
func TestFindSitePackages(t *testing.T) {
	for _, c := range []struct {
		name   string
		files  []string
		links  map[string]string // link → target, relative to the root
		vars   map[string]string // environment, relative to the root
		python string            // python3 on PATH
		asked  []string          // what python3 answers
		want   []string          // site-packages, relative to the root
		what   []string          // how each is named
		asks   int               // python3 calls
	}{
		{name: "venv with wheels, then the base interpreter it links to, then ~/.local",
			files: []string{"venv/lib/python3.12/site-packages/nvidia/cu13/lib/", "venv/bin/", "base/bin/python3.12",
				"base/lib/python3.12/site-packages/", "home/.local/lib/python3.12/site-packages/"},
			links: map[string]string{"venv/bin/python3": "base/bin/python3.12", "venv/lib64": "venv/lib"},
			vars:  map[string]string{"VIRTUAL_ENV": "venv", "HOME": "home"}, python: "venv/bin/python3",
			want: []string{"venv/lib/python3.12/site-packages", "base/lib/python3.12/site-packages", "home/.local/lib/python3.12/site-packages"},
			what: []string{"VIRTUAL_ENV", "python3 on PATH", "~/.local"}},
		{name: "conda environment before python3 on PATH",
			files: []string{"conda/lib/python3.11/site-packages/nvidia/nccl/lib/", "usr/bin/python3", "usr/lib/python3/dist-packages/",
				"usr/local/lib/python3.11/dist-packages/"},
			vars: map[string]string{"CONDA_PREFIX": "conda"}, python: "usr/bin/python3",
			want: []string{"conda/lib/python3.11/site-packages", "usr/lib/python3/dist-packages", "usr/local/lib/python3.11/dist-packages"},
			what: []string{"CONDA_PREFIX", "python3 on PATH", "python3 on PATH"}},
		{name: "Fedora's lib64 and Debian's pip folder under the same prefix",
			files:  []string{"usr/bin/python3", "usr/lib64/python3.9/site-packages/", "usr/local/lib/python3.9/site-packages/nvidia/"},
			python: "usr/bin/python3",
			want:   []string{"usr/lib64/python3.9/site-packages", "usr/local/lib/python3.9/site-packages"},
			what:   []string{"python3 on PATH", "python3 on PATH"}},
		{name: "a pyenv shim: python3 is asked, once",
			files:  []string{"pyenv/shims/python3", "pyenv/versions/3.11/lib/python3.11/site-packages/nvidia/"},
			python: "pyenv/shims/python3", asked: []string{"pyenv/versions/3.11/lib/python3.11/site-packages", "missing/site-packages"},
			want: []string{"pyenv/versions/3.11/lib/python3.11/site-packages"}, what: []string{"python3 on PATH (asked)"}, asks: 1},
		{name: "site-packages without wheels: python3 is asked too",
			files: []string{"venv/lib/python3.12/site-packages/"}, vars: map[string]string{"VIRTUAL_ENV": "venv"},
			python: "venv/bin/python3", want: []string{"venv/lib/python3.12/site-packages"}, what: []string{"VIRTUAL_ENV"}, asks: 1},
		{name: "no Python at all", want: nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			mkfiles(t, root, c.files...)
			for link, target := range c.links {
				if err := os.Symlink(filepath.Join(root, target), filepath.Join(root, link)); err != nil {
					t.Fatal(err)
				}
			}
			calls := 0
			got := Find(fakePyEnv(root, c.vars, c.python, c.asked, &calls))
			var dirs, whats []string
			for _, sp := range got {
				rel, err := filepath.Rel(root, sp.Dir)
				if err != nil {
					t.Fatal(err)
				}
				dirs, whats = append(dirs, rel), append(whats, sp.What)
			}
			if !slices.Equal(dirs, c.want) || !slices.Equal(whats, c.what) {
				t.Errorf("got %q (%q), want %q (%q)", dirs, whats, c.want, c.what)
			}
			if calls != c.asks {
				t.Errorf("python3 asked %d times, want %d", calls, c.asks)
			}
		})
	}
}
