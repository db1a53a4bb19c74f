package cblas

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// Env names the CBLAS library to load instead of the default search (a file
// name or path), or "off" to use the Go kernels.
const Env = "GDROTRAIN_BLAS"

// Names are the files tried, in order: Debian/Ubuntu's libopenblas0-pthread
// (and -openmp, same soname), a plain libopenblas.so, Homebrew's openblas.
var Names = []string{"libopenblas.so.0", "libopenblas.so", "libopenblas.dylib",
	"/opt/homebrew/opt/openblas/lib/libopenblas.dylib", "/usr/local/opt/openblas/lib/libopenblas.dylib"}

// ErrOff is returned by Open when Env is "off".
var ErrOff = errors.New(Env + "=off")

// errNoCgo is every load's error in a build without cgo.
var errNoCgo = errors.New("built without cgo (CGO_ENABLED=0): no BLAS can be loaded")

// Open loads the library Env names, or else the first of Names found. Its
// error says what was tried and how to install OpenBLAS.
func Open() (*Lib, error) {
	switch v := strings.TrimSpace(os.Getenv(Env)); v {
	case "off", "none", "0":
		return nil, ErrOff
	case "":
	default:
		l, err := open(v)
		if err != nil {
			return nil, fmt.Errorf("%s=%s: %w", Env, v, err)
		}
		return l, nil
	}
	var errs []string
	for _, n := range Names {
		l, err := open(n)
		if err == nil {
			return l, nil
		}
		if errors.Is(err, errNoCgo) {
			return nil, err
		}
		errs = append(errs, err.Error())
	}
	return nil, fmt.Errorf("no OpenBLAS found (%s); install it with `apt-get install libopenblas0-pthread` "+
		"(Debian/Ubuntu) or `brew install openblas`, or set %s to a CBLAS library", errs[0], Env)
}
