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

// Open loads the library Env names, or else the first of Names found, with
// the OpenBLAS kernels for this CPU (coretype.go: OPENBLAS_CORETYPE is set
// for the load when the library would pick an older core, unless the user
// set it). Its error says what was tried and how to install OpenBLAS.
func Open() (*Lib, error) {
	names := Names
	switch v := strings.TrimSpace(os.Getenv(Env)); v {
	case "off", "none", "0":
		return nil, ErrOff
	case "":
	default:
		names = []string{v}
	}
	ch, note, perr := chooseFor(names)
	if ch.Set != "" {
		// OpenBLAS reads the variable in its load-time constructor; it is
		// unset again after, so child processes (the benchmark's PyTorch)
		// see the user's environment.
		if err := os.Setenv(CoreEnv, ch.Set); err == nil {
			defer func() { _ = os.Unsetenv(CoreEnv) }()
		}
	}
	l, err := openFirst(names)
	if err != nil {
		return nil, err
	}
	l.Note = note
	if perr != nil {
		// The library loads here but not in the child (no exec allowed, a
		// crash on the CPU's kernels): its own pick stands, unchecked.
		l.Note = "the library's own pick, not checked against the CPU: " + perr.Error()
	}
	if ch.Path != "" && l.Path != ch.Path {
		// The linker found another file than the probe did (a library
		// installed meanwhile): this choice was made for the other one.
		forgetCore()
		if ch.Set != "" {
			l.Note = fmt.Sprintf("%s=%s was chosen for %s; the next start probes %s", CoreEnv, ch.Set, ch.Path, l.Path)
		}
	}
	return l, nil
}

// chooseFor returns the core choice for the library names resolve to and
// the note to show with it: the user's own setting, the core set and why,
// or ""; and why the library could not be probed.
func chooseFor(names []string) (coreChoice, string, error) {
	if v := os.Getenv(CoreEnv); v != "" {
		_, reason := ChooseCore(CPU{}, "", false, v)
		return coreChoice{}, reason, nil
	}
	c := thisCPU()
	if class, _ := c.Class(); class == "" {
		return coreChoice{}, "", nil
	}
	ch, err := decideCore(names, c)
	if err != nil {
		return coreChoice{}, "", err // the library loads as it likes, if it loads at all
	}
	return ch, ch.Reason, nil
}

// openFirst loads the first of names that loads. Its error says what was
// tried and how to install OpenBLAS.
func openFirst(names []string) (*Lib, error) {
	if len(names) == 1 && os.Getenv(Env) != "" {
		l, err := open(names[0])
		if err != nil {
			return nil, fmt.Errorf("%s=%s: %w", Env, names[0], err)
		}
		return l, nil
	}
	var errs []string
	for _, n := range names {
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

// Describe says what computes the products, for log lines: the library's
// config, its core and how that core was chosen ("OpenBLAS 0.3.21 …
// DYNAMIC_ARCH …, core SkylakeX (set: the library picked Prescott on an
// AVX-512 CPU it does not know)"), or its path.
func (l *Lib) Describe() string {
	s := l.Config
	if s == "" {
		s = "CBLAS " + l.Path
	}
	if l.Core != "" {
		s += ", core " + l.Core
	}
	if l.Note != "" {
		s += " (" + l.Note + ")"
	}
	return s
}
