// Package wheels finds CUDA libraries installed as NVIDIA's pip wheels,
// for the CUDA backend's library search (cuda/libs.go). Many GPU nodes
// have no CUDA toolkit, only PyTorch's dependencies in a Python environment:
// CUDA 12 wheels put each library in a folder of its own
// (site-packages/nvidia/cublas/lib/libcublas.so.12, nvidia/cuda_nvrtc/lib/
// libnvrtc.so.12 with its libnvrtc-builtins, nvidia/nccl/lib/libnccl.so.2);
// CUDA 13 wheels put the toolkit's libraries together in nvidia/cu13/lib
// and NCCL still in nvidia/nccl/lib. The dynamic linker searches none of
// these folders (PyTorch loads them through its own RPATH), so the search
// looks for them in the environments the user has active.
//
// The environments are found without starting Python where possible: the
// site-packages folders under $VIRTUAL_ENV, $CONDA_PREFIX, the prefix of
// python3 on PATH and the user's ~/.local are globbed. Only when none of
// them holds an nvidia/ folder (python3 is a shim, as pyenv's is, or lives
// in an unusual layout) is python3 itself asked, once per process and under
// a time limit, so a broken interpreter cannot hang the binary.
package wheels

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Subdirs are the folders of a site-packages that hold each library,
// newest CUDA layout first (the library search's tests add a kind of their
// own).
var Subdirs = map[string][]string{
	"cublas": {"nvidia/cu13/lib", "nvidia/cublas/lib"},
	"nvrtc":  {"nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib"},
	"nccl":   {"nvidia/nccl/lib", "nvidia/cu13/lib"},
}

// askPythonTimeout bounds the one python3 call of the last resort.
const askPythonTimeout = 5 * time.Second

// Env is what the search reads of the process's surroundings, replaced
// in tests.
type Env struct {
	Getenv   func(string) string
	LookPath func(string) (string, error)
	// AskPython returns the site-packages folders python reports.
	AskPython func(python string) []string
}

// RealEnv is this process's environment, PATH and python3.
var RealEnv = Env{Getenv: os.Getenv, LookPath: exec.LookPath, AskPython: askPython}

// askPython runs python to print its site-packages folders (nil on any
// failure or after askPythonTimeout).
func askPython(python string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), askPythonTimeout)
	defer cancel()
	// -I would hide the user's site folder; -S is not used because site
	// computes the folders. Nothing but site is imported.
	out, err := exec.CommandContext(ctx, python, "-c",
		"import site\nfor p in site.getsitepackages() + [site.getusersitepackages()]: print(p)").Output()
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// A pyPrefix is one Python installation or environment and how cuda-info
// names it.
type pyPrefix struct {
	dir, what string
}

// pythonPrefixes are the installations to look in, most specific first:
// the active virtual environment, the active conda environment, python3 on
// PATH (its folder's parent, as found and with links resolved: a venv's
// python3 links to the base interpreter, whose packages a venv may also
// see), and the user's ~/.local.
func pythonPrefixes(env Env) []pyPrefix {
	var ps []pyPrefix
	if v := env.Getenv("VIRTUAL_ENV"); v != "" {
		ps = append(ps, pyPrefix{v, "VIRTUAL_ENV"})
	}
	if v := env.Getenv("CONDA_PREFIX"); v != "" {
		ps = append(ps, pyPrefix{v, "CONDA_PREFIX"})
	}
	if py, err := env.LookPath("python3"); err == nil {
		ps = append(ps, pyPrefix{filepath.Dir(filepath.Dir(py)), "python3 on PATH"})
		if real, err := filepath.EvalSymlinks(py); err == nil {
			ps = append(ps, pyPrefix{filepath.Dir(filepath.Dir(real)), "python3 on PATH"})
		}
	}
	if h := env.Getenv("HOME"); h != "" {
		ps = append(ps, pyPrefix{filepath.Join(h, ".local"), "~/.local"})
	}
	return ps
}

// sitePackagesGlobs are where an installation under a prefix keeps its
// packages: venvs and conda (lib), Fedora's arch-specific folder (lib64),
// Debian's system and pip folders (dist-packages, local/).
var sitePackagesGlobs = []string{
	"lib/python3*/site-packages", "lib64/python3*/site-packages", "lib/python3/dist-packages",
	"lib/python3*/dist-packages", "local/lib/python3*/dist-packages", "local/lib/python3*/site-packages",
}

// A SitePackages is one site-packages folder and the installation it
// belongs to.
type SitePackages struct {
	Dir, What string
}

// Find lists the site-packages folders of env's Python
// installations, each once (by its resolved path), most specific first;
// python3 is asked only when none of the globbed folders holds nvidia/.
func Find(env Env) []SitePackages {
	var out []SitePackages
	seen := map[string]bool{}
	add := func(dir, what string) {
		real, err := filepath.EvalSymlinks(dir)
		if err != nil || seen[real] {
			return
		}
		if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
			return
		}
		seen[real] = true
		out = append(out, SitePackages{dir, what})
	}
	for _, p := range pythonPrefixes(env) {
		for _, g := range sitePackagesGlobs {
			matches, _ := filepath.Glob(filepath.Join(p.dir, g))
			for _, m := range matches {
				add(m, p.what)
			}
		}
	}
	for _, sp := range out {
		if _, err := os.Stat(filepath.Join(sp.Dir, "nvidia")); err == nil {
			return out
		}
	}
	if py, err := env.LookPath("python3"); err == nil && env.AskPython != nil {
		for _, d := range env.AskPython(py) {
			if filepath.IsAbs(d) {
				add(d, "python3 on PATH (asked)")
			}
		}
	}
	return out
}

// A Place is where the search looks for a library: a folder, or the
// dynamic linker's own search (Dir ""), and how cuda-info names it.
type Place struct {
	Dir, From string
}

// Places are the wheel folders holding kind's library under the
// site-packages folders sps, in their order, newest layout first within
// each; then the lib folder of an active conda environment, where conda's
// own CUDA packages put the libraries.
func Places(kind string, sps []SitePackages, env Env) []Place {
	var ps []Place
	for _, sp := range sps {
		for _, sub := range Subdirs[kind] {
			d := filepath.Join(sp.Dir, filepath.FromSlash(sub))
			if fi, err := os.Stat(d); err == nil && fi.IsDir() {
				ps = append(ps, Place{Dir: d, From: "pip wheel in " + sp.Dir + " (" + sp.What + ")"})
			}
		}
	}
	if c := env.Getenv("CONDA_PREFIX"); c != "" && len(Subdirs[kind]) > 0 {
		ps = append(ps, Place{Dir: filepath.Join(c, "lib"), From: "conda environment " + c})
	}
	return ps
}

var (
	sitePackagesOnce sync.Once
	sitePackagesList []SitePackages
)

// ForProcess is Find of this process's environment (RealEnv), computed
// once (it may start python3).
func ForProcess() []SitePackages {
	sitePackagesOnce.Do(func() { sitePackagesList = Find(RealEnv) })
	return sitePackagesList
}
