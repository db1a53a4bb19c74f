package cuda

// Finding the CUDA libraries at run time. GDROTRAIN_CUDA_LIB_DIR is
// searched first, as given: it is the user's explicit choice. Then, for
// each file name newest CUDA major first, these places in turn:
//
//  1. the dynamic linker's own search (LD_LIBRARY_PATH, ld.so.cache): what
//     the node's administrator or the user configured (`module load cuda`
//     sets LD_LIBRARY_PATH), and what every other program there gets;
//  2. NVIDIA's pip wheels in the active Python environments (internal/wheels):
//     the libraries the node's PyTorch runs with, found with no setting, on
//     the many nodes that have CUDA only that way;
//  3. for the driver library only, where containers and distributions put
//     it without registering it with the linker (driverDirs: the NVIDIA
//     container toolkit's /usr/local/nvidia/lib64, WSL's /usr/lib/wsl/lib,
//     NixOS's /run/opengl-driver/lib, Debian's and Fedora's nvidia
//     subfolders); the driver is never in a wheel;
//  4. the usual toolkit folders, which nothing registered with the linker:
//     a guess, so last.
//
// Several major versions are accepted so one binary runs on CUDA 12 and
// CUDA 13 nodes, but never a major newer than the driver supports: CUDA
// 13's cuBLAS and NVRTC need a driver ≥ 580, and on a 535–570 node they
// load and then fail at the first call. The newest acceptable major wins
// wherever it is (an old NVRTC 11.2 in ld.so.cache, which knows no sm_90,
// does not shadow a wheel's NVRTC 12); for the same major the order above
// decides. Each found library records where it came from (library.from),
// which cuda-info prints.
//
// NVRTC opens its companion libnvrtc-builtins.so.X.Y by bare name at the
// first compilation. When NVRTC itself came from a folder the dynamic linker
// does not search (GDROTRAIN_CUDA_LIB_DIR, a wheel, a toolkit folder), that
// lookup fails; so the builtins are loaded first, by full path from NVRTC's
// folder, and NVRTC's later lookup finds the copy already mapped (glibc
// matches loaded objects by soname). cuBLAS needs libcublasLt of its major
// when it is loaded; a wheel's copy finds it beside itself through its
// RPATH, but a folder copied without one would not, so the libcublasLt
// beside a cuBLAS found by path is loaded just before it, for the same
// reason.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/gdrotrain/gdrotrain/cuda/internal/wheels"
)

// LibDirEnv names a folder searched before any other for the CUDA libraries.
const LibDirEnv = "GDROTRAIN_CUDA_LIB_DIR"

// How cuda-info names the places that are not folders of their own.
const (
	fromEnv    = LibDirEnv
	fromLinker = "dynamic linker (LD_LIBRARY_PATH, ld.so.cache)"
)

// libCandidate is one file name tried for a library and the CUDA major
// version it belongs to (0: unversioned, read from the file it resolves to).
type libCandidate struct {
	name  string
	major int
}

// libNames are the file names tried for each library, newest first.
var libNames = map[string][]libCandidate{
	"cuda":   {{"libcuda.so.1", 0}, {"libcuda.so", 0}},
	"nvrtc":  {{"libnvrtc.so.13", 13}, {"libnvrtc.so.12", 12}, {"libnvrtc.so.11.2", 11}, {"libnvrtc.so", 0}},
	"cublas": {{"libcublas.so.13", 13}, {"libcublas.so.12", 12}, {"libcublas.so", 0}},
	// NCCL 2 serves every CUDA major; its own major is not CUDA's, so it is
	// loaded with no CUDA major limit (openLibrary("nccl", 0)).
	"nccl": {{"libnccl.so.2", 0}, {"libnccl.so", 0}},
}

// driverDirs are searched for the driver library (libcuda.so.1) after the
// dynamic linker: folders where container runtimes and distributions
// install it, which a container's ld.so.cache may not list.
var driverDirs = []string{"/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib/wsl/lib",
	"/run/opengl-driver/lib", "/usr/lib/x86_64-linux-gnu/nvidia/current", "/usr/lib64/nvidia",
	"/usr/lib/nvidia", "/usr/lib/aarch64-linux-gnu/nvidia/current"}

// driverKinds are the library kinds searched in driverDirs.
var driverKinds = map[string]bool{"cuda": true}

// toolkitDirs are searched after the dynamic linker and the wheels.
var toolkitDirs = []string{"/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib",
	"/usr/local/cuda/targets/sbsa-linux/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib64"}

// openLibrary finds and loads one of the libraries above, of a CUDA major
// version ≤ maxMajor (0: any).
func openLibrary(kind string, maxMajor int) (*library, error) {
	return findLibraryFor(kind, os.Getenv(LibDirEnv), maxMajor)
}

// findLibrary searches dir (if not empty), then the default places, for any
// major version.
func findLibrary(kind, dir string) (*library, error) { return findLibraryFor(kind, dir, 0) }

// findLibraryFor searches dir (if not empty), then the default places, and
// returns the first library whose major version is ≤ maxMajor (0: any).
func findLibraryFor(kind, dir string, maxMajor int) (*library, error) {
	return searchLibrary(kind, dir, maxMajor, func() []wheels.Place { return defaultPlaces(kind, wheels.ForProcess(), wheels.RealEnv) })
}

// defaultPlaces are the places after GDROTRAIN_CUDA_LIB_DIR, in order. The
// driver library is never in a wheel (it comes with the driver).
func defaultPlaces(kind string, sps []wheels.SitePackages, env wheels.Env) []wheels.Place {
	ps := []wheels.Place{{From: fromLinker}}
	if driverKinds[kind] {
		for _, d := range driverDirs {
			ps = append(ps, wheels.Place{Dir: d, From: "driver folder " + d})
		}
	} else {
		ps = append(ps, wheels.Places(kind, sps, env)...)
	}
	for _, d := range toolkitDirs {
		ps = append(ps, wheels.Place{Dir: d, From: "toolkit folder " + d})
	}
	return ps
}

// searchLibrary searches dir (if not empty) for every name of kind, then,
// name by name newest major first, the places that places returns (called
// only when dir has no acceptable library: it may start python3).
func searchLibrary(kind, dir string, maxMajor int, places func() []wheels.Place) (*library, error) {
	e := &LibraryError{Kind: kind, MaxMajor: maxMajor}
	for _, c := range libNames[kind] {
		e.Names = append(e.Names, c.name)
	}
	seen := map[string]bool{} // files already rejected
	try := func(path string, c libCandidate, from string) *library {
		before := preloadBefore(kind, path, c.major)
		l, err := dlopen(path)
		if err != nil {
			e.Tried = append(e.Tried, err.Error())
			closeAll(before)
			return nil
		}
		major := c.major
		if major == 0 {
			major = sonameMajor(l.realPath())
		}
		if maxMajor > 0 && major > maxMajor {
			shown := path // the name searched for, or the file it resolved to
			if !strings.Contains(path, "/") {
				shown = l.realPath()
			}
			if !seen[shown] {
				seen[shown] = true
				e.Rejected = append(e.Rejected, fmt.Sprintf("%s (CUDA %d)", shown, major))
			}
			l.close()
			closeAll(before)
			return nil
		}
		l.major, l.from, l.companions = major, from, before
		return l
	}
	found := func(l *library) *library {
		if kind == "nvrtc" {
			l.companions = append(l.companions, preloadNVRTCBuiltins(l)...)
		}
		return l
	}
	if dir != "" {
		for _, c := range libNames[kind] {
			if l := try(filepath.Join(dir, c.name), c, fromEnv); l != nil {
				return found(l), nil
			}
		}
	}
	ps := places()
	for _, c := range libNames[kind] {
		for _, p := range ps {
			path := c.name // the dynamic linker's search
			if p.Dir != "" {
				path = filepath.Join(p.Dir, c.name)
				if _, err := os.Stat(path); err != nil {
					continue // not there: not worth an entry in the error
				}
			}
			if l := try(path, c, p.From); l != nil {
				return found(l), nil
			}
		}
	}
	return nil, e
}

// loadsBefore names, by kind, the library of the same major (file name
// without the major) that is loaded from the same folder first.
var loadsBefore = map[string]string{"cublas": "libcublasLt.so."}

// preloadBefore loads what kind's library at path needs and may not find
// by itself: libcublasLt of the same major, from the same folder, for a
// cuBLAS found by path (see the top of this file).
func preloadBefore(kind, path string, major int) []*library {
	prefix := loadsBefore[kind]
	if prefix == "" || major == 0 || !strings.Contains(path, "/") {
		return nil
	}
	lt := filepath.Join(filepath.Dir(path), prefix+strconv.Itoa(major))
	if _, err := os.Stat(lt); err != nil {
		return nil
	}
	l, err := dlopen(lt)
	if err != nil {
		return nil // cuBLAS's own load then says what is missing
	}
	return []*library{l}
}

func closeAll(ls []*library) {
	for _, l := range ls {
		l.close()
	}
}

var sonameVersion = regexp.MustCompile(`\.so\.(\d+)`)

// sonameMajor reads the major version from a library file name such as
// libcublas.so.12.5.3.2 (0 when the name carries none).
func sonameMajor(path string) int {
	m := sonameVersion.FindStringSubmatch(filepath.Base(path))
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// preloadNVRTCBuiltins loads libnvrtc-builtins.so.X.Y from the folder NVRTC
// was loaded from, newest first, and returns what it loaded.
func preloadNVRTCBuiltins(nv *library) []*library {
	dir := filepath.Dir(nv.realPath())
	matches, _ := filepath.Glob(filepath.Join(dir, "libnvrtc-builtins.so.*"))
	var best string
	bestVer := [2]int{-1, -1}
	for _, m := range matches {
		parts := strings.Split(strings.TrimPrefix(filepath.Base(m), "libnvrtc-builtins.so."), ".")
		if len(parts) < 2 {
			continue
		}
		a, err1 := strconv.Atoi(parts[0])
		b, err2 := strconv.Atoi(parts[1])
		if err1 != nil || err2 != nil || (nv.major > 0 && a != nv.major) {
			continue
		}
		if a > bestVer[0] || (a == bestVer[0] && b > bestVer[1]) {
			best, bestVer = m, [2]int{a, b}
		}
	}
	if best == "" {
		return nil
	}
	l, err := dlopen(best)
	if err != nil {
		return nil // NVRTC's own lookup may still find one; its error says which
	}
	return []*library{l}
}

// maxCudaMajor is the newest CUDA major version a driver supports, from
// cuDriverGetVersion's 1000·major + 10·minor.
func maxCudaMajor(driverVersion int) int { return driverVersion / 1000 }

// LibraryError says a CUDA library could not be loaded.
type LibraryError struct {
	Kind     string
	Names    []string
	Tried    []string // dlopen errors
	Rejected []string // loaded but too new for the driver
	MaxMajor int
}

func (e *LibraryError) Error() string {
	what := map[string]string{"cuda": "NVIDIA driver library", "nvrtc": "NVRTC library", "cublas": "cuBLAS library",
		"nccl": "NCCL library"}[e.Kind]
	hint := "set " + LibDirEnv + " to the folder holding it"
	if e.Kind == "nccl" {
		hint = "training on several GPUs needs NCCL 2 (the nvidia-nccl-cu12/cu13 wheel or the libnccl2 package); " + hint
	}
	if e.Kind == "cuda" {
		hint = "this machine has no NVIDIA GPU driver; run on a GPU node, or " + hint
	}
	msg := fmt.Sprintf("no %s found (tried %s)", what, strings.Join(e.Names, ", "))
	if len(e.Rejected) > 0 {
		msg = fmt.Sprintf("no usable %s: found %s, but the driver supports CUDA ≤ %d; install the CUDA %d %s (or update the driver: CUDA 13 needs ≥ 580) and %s",
			what, strings.Join(e.Rejected, ", "), e.MaxMajor, e.MaxMajor, what, strings.ToLower(hint[:1])+hint[1:])
		return msg
	}
	return msg + ": " + hint
}

// IsNoGPU reports whether err means "no usable GPU here" (no driver library
// or no device), as opposed to a broken installation.
func IsNoGPU(err error) bool {
	var le *LibraryError
	if errors.As(err, &le) && le.Kind == "cuda" {
		return true
	}
	var ce *Error
	return errors.As(err, &ce) && ce.Code == errNoDevice
}
