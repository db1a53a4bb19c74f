package cuda

// Finding the CUDA libraries at run time: GDROTRAIN_CUDA_LIB_DIR first, then
// the dynamic linker's own search (LD_LIBRARY_PATH, ld.so.cache), then the
// usual toolkit folders. Several major versions are accepted so one binary
// runs on CUDA 12 and CUDA 13 nodes.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// LibDirEnv names a folder searched before any other for the CUDA libraries.
const LibDirEnv = "GDROTRAIN_CUDA_LIB_DIR"

// libNames are the file names tried for each library, newest first.
var libNames = map[string][]string{
	"cuda":   {"libcuda.so.1", "libcuda.so"},
	"nvrtc":  {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"},
	"cublas": {"libcublas.so.13", "libcublas.so.12", "libcublas.so"},
}

// toolkitDirs are searched after the dynamic linker's paths.
var toolkitDirs = []string{"/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib",
	"/usr/local/cuda/targets/sbsa-linux/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib64"}

// openLibrary finds and loads one of the libraries above.
func openLibrary(kind string) (*library, error) { return findLibrary(kind, os.Getenv(LibDirEnv)) }

// findLibrary searches dir (if not empty), then the default places.
func findLibrary(kind, dir string) (*library, error) {
	names := libNames[kind]
	var tried []string
	try := func(path string) *library {
		l, err := dlopen(path)
		if err != nil {
			tried = append(tried, err.Error())
			return nil
		}
		return l
	}
	if dir != "" {
		for _, n := range names {
			if l := try(filepath.Join(dir, n)); l != nil {
				return l, nil
			}
		}
	}
	for _, n := range names {
		if l := try(n); l != nil {
			return l, nil
		}
	}
	for _, d := range toolkitDirs {
		for _, n := range names {
			if _, err := os.Stat(filepath.Join(d, n)); err == nil {
				if l := try(filepath.Join(d, n)); l != nil {
					return l, nil
				}
			}
		}
	}
	return nil, &LibraryError{Kind: kind, Names: names, Tried: tried}
}

// LibraryError says a CUDA library could not be loaded.
type LibraryError struct {
	Kind  string
	Names []string
	Tried []string
}

func (e *LibraryError) Error() string {
	what := map[string]string{"cuda": "NVIDIA driver library", "nvrtc": "NVRTC library", "cublas": "cuBLAS library"}[e.Kind]
	hint := "set " + LibDirEnv + " to the folder holding it"
	if e.Kind == "cuda" {
		hint = "this machine has no NVIDIA GPU driver; run on a GPU node, or " + hint
	}
	return fmt.Sprintf("no %s found (tried %s): %s", what, strings.Join(e.Names, ", "), hint)
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
