package cuda

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/cuda/internal/wheels"
	"github.com/gdrotrain/gdrotrain/internal/testinfra/cudaemu"
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
func fakePyEnv(root string, vars map[string]string, python string, asked []string, calls *int) wheels.Env {
	return wheels.Env{
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

// withTestKind registers a library kind whose files exist nowhere but in
// the test's folders, so the search order can be observed on any machine,
// a GPU node with real CUDA libraries included.
func withTestKind(t *testing.T, toolkit []string) {
	t.Helper()
	oldNames, oldSub, oldBefore, oldTK := libNames["gdtest"], wheels.Subdirs["gdtest"], loadsBefore["gdtest"], toolkitDirs
	libNames["gdtest"] = []libCandidate{{"libgdtest.so.13", 13}, {"libgdtest.so.12", 12}}
	wheels.Subdirs["gdtest"] = []string{"nvidia/cu13/lib", "nvidia/gdtest/lib"}
	loadsBefore["gdtest"] = "libgdtestLt.so."
	toolkitDirs = toolkit
	t.Cleanup(func() {
		libNames["gdtest"], wheels.Subdirs["gdtest"], loadsBefore["gdtest"], toolkitDirs = oldNames, oldSub, oldBefore, oldTK
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
	places := func() []wheels.Place { return defaultPlaces("gdtest", wheels.Find(env), env) }
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
	for _, p := range defaultPlaces("cuda", wheels.Find(env), env) {
		if strings.Contains(p.From, "wheel") || strings.Contains(p.From, "conda") {
			t.Errorf("the driver library is searched in %s", p.From)
		}
	}
	var froms []string
	for _, p := range defaultPlaces("nvrtc", []wheels.SitePackages{{Dir: filepath.Join(root, sp), What: "VIRTUAL_ENV"}}, env) {
		froms = append(froms, strings.Fields(p.From)[0])
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
	l, err := searchLibrary("gdtest", "", 0, func() []wheels.Place { return []wheels.Place{{Dir: dir, From: "test folder"}} })
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
		l, err := searchLibrary(kind, "", 13, func() []wheels.Place { return defaultPlaces(kind, wheels.Find(env), env) })
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if l.path != filepath.Join(sp, filepath.FromSlash(rel)) || l.from != "pip wheel in "+sp+" (VIRTUAL_ENV)" {
			t.Errorf("%s: loaded %s, from %q", kind, l.path, l.from)
		}
		l.close()
	}
}

// TestDriverFolders: the driver library is searched, after the dynamic
// linker and before the toolkit folders, in the folders where container
// runtimes and distributions install it (driverDirs), and in no wheel.
// The list is a test folder's here; the files are empty, so every dlopen
// fails and the error lists the attempts in order.
func TestDriverFolders(t *testing.T) {
	root := t.TempDir()
	mkfiles(t, root, "lib64/", "wsl/libgddrv.so.1", "opengl/libgddrv.so.1", "toolkit/libgddrv.so.1",
		"venv/lib/python3.12/site-packages/nvidia/cu13/lib/libgddrv.so.1")
	oldDirs, oldTK := driverDirs, toolkitDirs
	libNames["gddrv"] = []libCandidate{{"libgddrv.so.1", 0}}
	driverKinds["gddrv"] = true
	driverDirs = []string{filepath.Join(root, "lib64"), filepath.Join(root, "wsl"), filepath.Join(root, "opengl")}
	toolkitDirs = []string{filepath.Join(root, "toolkit")}
	t.Cleanup(func() {
		driverDirs, toolkitDirs = oldDirs, oldTK
		delete(libNames, "gddrv")
		delete(driverKinds, "gddrv")
	})
	env := fakePyEnv(root, map[string]string{"VIRTUAL_ENV": "venv"}, "", nil, new(int))
	_, err := searchLibrary("gddrv", "", 0, func() []wheels.Place { return defaultPlaces("gddrv", wheels.Find(env), env) })
	var le *LibraryError
	if !errors.As(err, &le) {
		t.Fatalf("want a LibraryError, got %v", err)
	}
	var got []string
	for _, tried := range le.Tried {
		p, _, _ := strings.Cut(strings.TrimPrefix(tried, "dlopen "), ": ")
		got = append(got, strings.TrimPrefix(p, root+"/"))
	}
	if want := []string{"libgddrv.so.1", "wsl/libgddrv.so.1", "opengl/libgddrv.so.1", "toolkit/libgddrv.so.1"}; !slices.Equal(got, want) {
		t.Errorf("tried\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	// The driver's real list: after the linker, before the toolkit folders.
	driverDirs, toolkitDirs = oldDirs, oldTK
	var froms []string
	for _, p := range defaultPlaces("cuda", wheels.Find(env), env) {
		froms = append(froms, p.Dir)
	}
	want := append(append([]string{""}, oldDirs...), oldTK...)
	if !slices.Equal(froms, want) {
		t.Errorf("the driver library's places %q, want %q", froms, want)
	}
	if !slices.Contains(oldDirs, "/usr/local/nvidia/lib64") || !slices.Contains(oldDirs, "/usr/lib/wsl/lib") {
		t.Errorf("driverDirs %q lacks the container toolkit's or WSL's folder", oldDirs)
	}
}
