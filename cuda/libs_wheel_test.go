package cuda

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/internal/cudaemu"
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
func fakePyEnv(root string, vars map[string]string, python string, asked []string, calls *int) pyEnv {
	return pyEnv{
		getenv: func(k string) string {
			if v, ok := vars[k]; ok {
				return filepath.Join(root, v)
			}
			return ""
		},
		lookPath: func(string) (string, error) {
			if python == "" {
				return "", errors.New("no python3")
			}
			return filepath.Join(root, python), nil
		},
		askPython: func(string) []string {
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
			got := findSitePackages(fakePyEnv(root, c.vars, c.python, c.asked, &calls))
			var dirs, whats []string
			for _, sp := range got {
				rel, err := filepath.Rel(root, sp.dir)
				if err != nil {
					t.Fatal(err)
				}
				dirs, whats = append(dirs, rel), append(whats, sp.what)
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

// withTestKind registers a library kind whose files exist nowhere but in
// the test's folders, so the search order can be observed on any machine,
// a GPU node with real CUDA libraries included.
func withTestKind(t *testing.T, toolkit []string) {
	t.Helper()
	oldNames, oldSub, oldBefore, oldTK := libNames["gdtest"], wheelSubdirs["gdtest"], loadsBefore["gdtest"], toolkitDirs
	libNames["gdtest"] = []libCandidate{{"libgdtest.so.13", 13}, {"libgdtest.so.12", 12}}
	wheelSubdirs["gdtest"] = []string{"nvidia/cu13/lib", "nvidia/gdtest/lib"}
	loadsBefore["gdtest"] = "libgdtestLt.so."
	toolkitDirs = toolkit
	t.Cleanup(func() {
		libNames["gdtest"], wheelSubdirs["gdtest"], loadsBefore["gdtest"], toolkitDirs = oldNames, oldSub, oldBefore, oldTK
	})
}

// TestSearchOrder: GDROTRAIN_CUDA_LIB_DIR first; then, newest major first,
// the dynamic linker, the wheels (CUDA 13's shared folder before a
// library's own) and the toolkit folders; never a major above the
// driver's. The files are empty, so every dlopen fails and the error lists
// the attempts in order.
func TestSearchOrder(t *testing.T) {
	root := t.TempDir()
	sp := "venv/lib/python3.12/site-packages"
	mkfiles(t, root, "env/libgdtest.so.12", sp+"/nvidia/cu13/lib/libgdtest.so.13", sp+"/nvidia/gdtest/lib/libgdtest.so.12",
		sp+"/nvidia/gdtest/lib/libgdtestLt.so.12", "toolkit/libgdtest.so.13", "toolkit/libgdtest.so.12", "conda/lib/")
	withTestKind(t, []string{filepath.Join(root, "toolkit")})
	env := fakePyEnv(root, map[string]string{"VIRTUAL_ENV": "venv", "CONDA_PREFIX": "conda"}, "", nil, new(int))
	places := func() []place { return defaultPlaces("gdtest", findSitePackages(env), env) }
	for _, c := range []struct {
		dir  string
		want []string
	}{
		{dir: "env", want: []string{"env/libgdtest.so.13", "env/libgdtest.so.12",
			"libgdtest.so.13", sp + "/nvidia/cu13/lib/libgdtest.so.13", "toolkit/libgdtest.so.13",
			"libgdtest.so.12", sp + "/nvidia/gdtest/lib/libgdtest.so.12", "toolkit/libgdtest.so.12"}},
		{want: []string{"libgdtest.so.13", sp + "/nvidia/cu13/lib/libgdtest.so.13", "toolkit/libgdtest.so.13",
			"libgdtest.so.12", sp + "/nvidia/gdtest/lib/libgdtest.so.12", "toolkit/libgdtest.so.12"}},
	} {
		dir := ""
		if c.dir != "" {
			dir = filepath.Join(root, c.dir)
		}
		_, err := searchLibrary("gdtest", dir, 0, places)
		var le *LibraryError
		if !errors.As(err, &le) {
			t.Fatalf("dir %q: want a LibraryError, got %v", c.dir, err)
		}
		var got []string
		for _, tried := range le.Tried {
			p, _, _ := strings.Cut(strings.TrimPrefix(tried, "dlopen "), ": ")
			got = append(got, strings.TrimPrefix(p, root+"/"))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("dir %q: tried\n  %s\nwant\n  %s", c.dir, strings.Join(got, "\n  "), strings.Join(c.want, "\n  "))
		}
	}
	// The driver library is never in a wheel, and wheels come before the
	// toolkit folders.
	for _, p := range defaultPlaces("cuda", findSitePackages(env), env) {
		if strings.Contains(p.from, "wheel") || strings.Contains(p.from, "conda") {
			t.Errorf("the driver library is searched in %s", p.from)
		}
	}
	var froms []string
	for _, p := range defaultPlaces("nvrtc", []sitePackages{{filepath.Join(root, sp), "VIRTUAL_ENV"}}, env) {
		froms = append(froms, strings.Fields(p.from)[0])
	}
	if want := []string{"dynamic", "pip", "conda", "toolkit"}; !slices.Equal(froms, want) {
		t.Errorf("nvrtc places %q, want %q (nvidia/cu13/lib, not the absent nvidia/cuda_nvrtc/lib)", froms, want)
	}
}

// TestLoadsCompanionFirst: a cuBLAS-like library whose libcublasLt-like
// dependency sits beside it, with no RPATH, loads by path because its
// companion is loaded first (and does not load without that).
func TestLoadsCompanionFirst(t *testing.T) {
	if !cudaemu.Available() {
		cudaemu.SkipUnavailable(t, "no g++ to build the two test libraries")
	}
	withTestKind(t, nil)
	dir := t.TempDir()
	build := func(name, src string, args ...string) {
		t.Helper()
		c := filepath.Join(dir, name+".c")
		if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("g++", append([]string{"-x", "c", "-shared", "-fPIC", "-o", filepath.Join(dir, name), "-Wl,-soname," + name, c}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("g++ %s: %v\n%s", name, err, out)
		}
	}
	build("libgdtestLt.so.12", "int gdtest_lt(void) { return 7; }\n")
	build("libgdtest.so.12", "int gdtest_lt(void);\nint gdtest(void) { return gdtest_lt(); }\n", "-L"+dir, "-l:libgdtestLt.so.12")
	if l, err := dlopen(filepath.Join(dir, "libgdtest.so.12")); err == nil {
		l.close()
		t.Skip("the library loads without its companion here; the test would prove nothing")
	} else if !strings.Contains(err.Error(), "libgdtestLt.so.12") {
		t.Fatalf("want a failure naming the missing companion, got %v", err)
	}
	l, err := searchLibrary("gdtest", "", 0, func() []place { return []place{{dir, "test folder"}} })
	if err != nil {
		t.Fatalf("with the companion loaded first: %v", err)
	}
	if l.from != "test folder" || l.major != 12 || len(l.companions) != 1 || !strings.HasSuffix(l.companions[0].path, "libgdtestLt.so.12") {
		t.Errorf("loaded %s from %q, major %d, companions %d", l.path, l.from, l.major, len(l.companions))
	}
}

// TestWheelLayoutOnEmulator: the emulator's libraries laid out as CUDA 13
// pip wheels in a virtual environment (cuBLAS and NVRTC in nvidia/cu13/lib,
// NCCL in nvidia/nccl/lib) are found there, each saying so.
func TestWheelLayoutOnEmulator(t *testing.T) {
	testDevice(t)
	if devKind != "emulator" {
		t.Skip("needs the emulator's libraries")
	}
	root := t.TempDir()
	sp := filepath.Join(root, "venv", "lib", "python3.12", "site-packages")
	want := map[string]string{"cublas": "nvidia/cu13/lib/libcublas.so.13", "nvrtc": "nvidia/cu13/lib/libnvrtc.so.13",
		"nccl": "nvidia/nccl/lib/libnccl.so.2"}
	for _, rel := range want {
		p := filepath.Join(sp, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		// Links, as cudaemu.Build makes them: one emulator object serves all.
		if err := os.Symlink(filepath.Join(emuDir, "libcuda.so.1"), p); err != nil {
			t.Fatal(err)
		}
	}
	env := fakePyEnv(root, map[string]string{"VIRTUAL_ENV": "venv"}, "", nil, new(int))
	for kind, rel := range want {
		if l, err := dlopen(filepath.Base(rel)); err == nil {
			l.close()
			t.Logf("%s: the dynamic linker finds %s here first; not checked", kind, filepath.Base(rel))
			continue
		}
		l, err := searchLibrary(kind, "", 13, func() []place { return defaultPlaces(kind, findSitePackages(env), env) })
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if l.path != filepath.Join(sp, filepath.FromSlash(rel)) || l.from != "pip wheel in "+sp+" (VIRTUAL_ENV)" {
			t.Errorf("%s: loaded %s, from %q", kind, l.path, l.from)
		}
		l.close()
	}
}
