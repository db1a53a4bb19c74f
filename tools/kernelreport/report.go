package kernelreport

// Compiling the kernels and reading the CUBINs back: cuda.Precompile fills a
// fresh kernel cache folder per architecture with <file>-<hash>.cubin (the
// exact images a GPU node would load), and cuobjdump reads each one.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gdrotrain/gdrotrain/cuda"
)

// NVRTCDirEnv names the folder of the NVRTC to compile with (as for the cuda
// package's kernel tests); ToolsBinEnv the folder holding cuobjdump. Both are
// printed by scripts/cuda_tools_env.sh after scripts/install_cuda_tools.sh.
const (
	NVRTCDirEnv = "GDROTRAIN_NVRTC_DIR"
	ToolsBinEnv = "CUDA_TOOLS_BIN"
)

// cudaTools is where scripts/install_cuda_tools.sh unpacks, relative to the
// repository root.
const cudaTools = ".cache/cuda-tools"

// Tools are the programs and libraries the report needs.
type Tools struct {
	NVRTCDir  string // folder of libnvrtc.so.*; "" for the cuda package's usual search
	Cuobjdump string // path of cuobjdump
}

// ErrNoCuobjdump says no cuobjdump was found.
var ErrNoCuobjdump = errors.New("no cuobjdump found (set " + ToolsBinEnv + ", or run scripts/install_cuda_tools.sh)")

// FindTools looks for NVRTC in $GDROTRAIN_NVRTC_DIR, then in the
// repository's .cache/cuda-tools (found from the working folder up to
// go.mod), and leaves the rest to the cuda package's search; and for
// cuobjdump in $CUDA_TOOLS_BIN, .cache/cuda-tools, $PATH and
// /usr/local/cuda/bin.
func FindTools() (Tools, error) {
	var t Tools
	cache := ""
	if root := repoRoot(); root != "" {
		cache = filepath.Join(root, cudaTools)
	}
	t.NVRTCDir = os.Getenv(NVRTCDirEnv)
	if t.NVRTCDir == "" && cache != "" {
		if d := filepath.Join(cache, "usr/lib/x86_64-linux-gnu"); exists(filepath.Join(d, "libnvrtc.so.12")) {
			t.NVRTCDir = d
		}
	}
	var bins []string
	if d := os.Getenv(ToolsBinEnv); d != "" {
		bins = append(bins, filepath.Join(d, "cuobjdump"))
	}
	if cache != "" {
		bins = append(bins, filepath.Join(cache, "usr/bin/cuobjdump"))
	}
	if p, err := exec.LookPath("cuobjdump"); err == nil {
		bins = append(bins, p)
	}
	bins = append(bins, "/usr/local/cuda/bin/cuobjdump")
	for _, b := range bins {
		if exists(b) {
			t.Cuobjdump = b
			return t, nil
		}
	}
	return t, ErrNoCuobjdump
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

// repoRoot is the nearest folder at or above the working folder holding
// go.mod, or "".
func repoRoot() string {
	d, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if exists(filepath.Join(d, "go.mod")) {
			return d
		}
		up := filepath.Dir(d)
		if up == d {
			return ""
		}
		d = up
	}
}

// Arch is a compute capability, e.g. {9, 0} for sm_90.
type Arch [2]int

func (a Arch) String() string { return fmt.Sprintf("sm_%d%d", a[0], a[1]) }

// Kernel is the report's line for one kernel on one architecture.
type Kernel struct {
	Name string
	File string // kernels/<File>
	Arch Arch
	Log  string // NVRTC's log of the kernel's file on Arch (ptxas's warnings), "" if none
	Resources
	Code
}

// UsesLocalMemory reports whether the kernel has a stack frame, local memory
// or local loads and stores: registers spilled, or an array the compiler
// could not keep in registers. Local memory is off-chip (cached in L1/L2):
// slow on any kernel and ruinous in an inner loop.
func (k Kernel) UsesLocalMemory() bool {
	return k.Stack > 0 || k.Local > 0 || k.LocalStores > 0 || k.LocalLoads > 0
}

// Collect compiles every embedded kernel file for each architecture with the
// NVRTC the cuda package finds (tools.NVRTCDir first), under work (a scratch
// folder), and reads every kernel back with cuobjdump. It returns the NVRTC
// version and one Kernel per extern "C" __global__ function and architecture,
// sorted by architecture, file and name. It sets GDROTRAIN_CUDA_LIB_DIR and
// GDROTRAIN_KERNEL_CACHE for the duration of the call.
func Collect(tools Tools, archs []Arch, work string, logf func(string, ...any)) (string, []Kernel, error) {
	defer setenv(cuda.LibDirEnv, tools.NVRTCDir)()
	srcs := cuda.Sources()
	version := ""
	var out []Kernel
	for _, a := range archs {
		dir := filepath.Join(work, a.String())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", nil, err
		}
		restore := setenv(cuda.CacheDirEnv, dir)
		p, err := cuda.Precompile(a[0], a[1], logf)
		restore()
		if err != nil {
			return "", nil, err
		}
		version = p.NVRTCVersion
		files := make([]string, 0, len(srcs))
		for f := range srcs {
			files = append(files, f)
		}
		sort.Strings(files)
		for _, f := range files {
			stem := strings.TrimSuffix(f, ".cu")
			cubins, _ := filepath.Glob(filepath.Join(dir, stem+"-*.cubin"))
			if len(cubins) != 1 {
				return "", nil, fmt.Errorf("%s: want one %s-*.cubin in %s, found %d", a, stem, dir, len(cubins))
			}
			res, code, err := Inspect(tools.Cuobjdump, cubins[0])
			if err != nil {
				return "", nil, fmt.Errorf("kernels/%s %s: %w", f, a, err)
			}
			for _, name := range cuda.KernelNames(srcs[f]) {
				r, ok1 := res[name]
				c, ok2 := code[name]
				if !ok1 || !ok2 {
					return "", nil, fmt.Errorf("kernels/%s %s: kernel %s missing from cuobjdump's output of %s", f, a, name, cubins[0])
				}
				out = append(out, Kernel{Name: name, File: f, Arch: a, Log: p.Logs[f], Resources: r, Code: c})
			}
		}
	}
	return version, out, nil
}

// setenv sets (or, for "", unsets) an environment variable and returns what
// restores it.
func setenv(key, val string) func() {
	old, had := os.LookupEnv(key)
	if val == "" {
		os.Unsetenv(key)
	} else {
		os.Setenv(key, val)
	}
	return func() {
		if had {
			os.Setenv(key, old)
		} else {
			os.Unsetenv(key)
		}
	}
}

// Inspect runs cuobjdump -res-usage and -sass on one CUBIN.
func Inspect(cuobjdump, cubin string) (map[string]Resources, map[string]Code, error) {
	run := func(flag string) (string, error) {
		out, err := exec.Command(cuobjdump, flag, cubin).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("%s %s %s: %v\n%s", cuobjdump, flag, cubin, err, out)
		}
		return string(out), nil
	}
	ru, err := run("-res-usage")
	if err != nil {
		return nil, nil, err
	}
	res, err := ParseResUsage(ru)
	if err != nil {
		return nil, nil, err
	}
	sass, err := run("-sass")
	if err != nil {
		return nil, nil, err
	}
	code, err := ParseSASS(sass)
	if err != nil {
		return nil, nil, err
	}
	return res, code, nil
}

// WriteTable prints the kernels as a table, one block per architecture.
func WriteTable(w io.Writer, ks []Kernel) error {
	head := []string{"file", "regs", "stack B", "local B", "STL B", "LDL B", "shared B", "const B", "SASS", "tensor-core"}
	nameW, fileW := len("sm_XY kernel"), len(head[0])
	for _, k := range ks {
		nameW = max(nameW, len(k.Name))
		fileW = max(fileW, len(strings.TrimSuffix(k.File, ".cu")))
	}
	var b strings.Builder
	var last Arch
	for i, k := range ks {
		if i == 0 || k.Arch != last {
			if i > 0 {
				b.WriteString("\n")
			}
			fmt.Fprintf(&b, "%-*s  %-*s", nameW, k.Arch.String()+" kernel", fileW, head[0])
			for _, h := range head[1:] {
				fmt.Fprintf(&b, "  %8s", h)
			}
			b.WriteString("\n")
			last = k.Arch
		}
		tc := "0"
		if k.TensorCore > 0 {
			var ops []string
			for op, n := range k.TensorOps {
				ops = append(ops, fmt.Sprintf("%s×%d", op, n))
			}
			sort.Strings(ops)
			tc = strings.Join(ops, " ")
		}
		fmt.Fprintf(&b, "%-*s  %-*s", nameW, k.Name, fileW, strings.TrimSuffix(k.File, ".cu"))
		for _, v := range []int{k.Registers, k.Stack, k.Local, k.StoreBytes, k.LoadBytes, k.Shared, k.Constant, k.Instructions} {
			fmt.Fprintf(&b, "  %8d", v)
		}
		fmt.Fprintf(&b, "  %11s\n", tc)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
