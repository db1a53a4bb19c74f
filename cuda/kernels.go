package cuda

// The kernels: CUDA C sources embedded in the binary, compiled by NVRTC for
// the GPU in hand on first use and cached on disk, keyed by everything that
// changes the output (source, options, architecture, NVRTC version).

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

//go:embed kernels/*.cu kernels/*.cuh
var kernelFS embed.FS

// CacheDirEnv overrides the kernel cache folder.
const CacheDirEnv = "GDROTRAIN_KERNEL_CACHE"

// Sources returns each kernel file's full compilation unit (common helpers
// prepended), by file name.
func Sources() map[string]string {
	common, err := kernelFS.ReadFile("kernels/common.cuh")
	if err != nil {
		panic(err) // embedded at build time
	}
	out := map[string]string{}
	entries, _ := kernelFS.ReadDir("kernels")
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".cu") {
			continue
		}
		body, _ := kernelFS.ReadFile("kernels/" + e.Name())
		out[e.Name()] = string(common) + "\n" + usedHeaders(string(body)) + string(body)
	}
	return out
}

// usedHeaders returns the other .cuh files a kernel file names on a line
// "// uses NAME.cuh" (fp8.cuh), to prepend after common.cuh: only the files
// that need them, so the others' sources (and cached binaries) stay as
// they are.
func usedHeaders(body string) string {
	var b strings.Builder
	entries, _ := kernelFS.ReadDir("kernels")
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".cuh") || name == "common.cuh" || !strings.Contains(body, "// uses "+name) {
			continue
		}
		h, _ := kernelFS.ReadFile("kernels/" + name)
		b.Write(h)
		b.WriteString("\n")
	}
	return b.String()
}

var kernelDecl = regexp.MustCompile(`extern "C" __global__ void\s+(\w+)\s*\(`)

// KernelNames lists the kernels a source defines.
func KernelNames(src string) []string {
	var names []string
	for _, m := range kernelDecl.FindAllStringSubmatch(src, -1) {
		names = append(names, m[1])
	}
	return names
}

// compileOptions are NVRTC's options for target t (arch.go).
func compileOptions(t target) []string {
	return []string{"--gpu-architecture=" + t.arch, "--std=c++17", "--fmad=true"}
}

// compiler compiles kernel files through NVRTC with an on-disk cache.
type compiler struct {
	nv       *nvrtc
	version  string
	archs    []int  // the architectures NVRTC knows (nil: it cannot say)
	cacheDir string // "" disables the cache
	logf     func(format string, a ...any)
	logs     map[string]string // NVRTC's non-empty logs by file compiled (not read from the cache)
}

func newCompiler(nv *nvrtc, logf func(string, ...any)) (*compiler, error) {
	a, b, err := nv.Version()
	if err != nil {
		return nil, err
	}
	archs, err := nv.SupportedArchs()
	if err != nil {
		return nil, err
	}
	c := &compiler{nv: nv, version: fmt.Sprintf("%d.%d", a, b), archs: archs, logf: logf}
	if dir := os.Getenv(CacheDirEnv); dir != "" {
		c.cacheDir = dir
	} else if base, err := os.UserCacheDir(); err == nil {
		c.cacheDir = filepath.Join(base, "gdrotrain", "kernels")
	}
	return c, nil
}

// target is what this NVRTC compiles to for sm_major.minor (chooseTarget).
func (c *compiler) target(major, minor int) (target, error) {
	t, err := chooseTarget(major, minor, c.archs)
	if err != nil {
		return t, fmt.Errorf("compile kernels for sm_%d%d with NVRTC %s: %w", major, minor, c.version, err)
	}
	return t, nil
}

// plan is target, saying in one log line when the kernels go to PTX.
func (c *compiler) plan(major, minor int) (target, error) {
	t, err := c.target(major, minor)
	if err == nil && t.ptx {
		c.logf("cuda: NVRTC %s does not know sm_%d%d (newest it knows: sm_%d): kernels compiled to PTX for %s, which the driver compiles for the GPU when it loads them; the sm_90a warpgroup-MMA attention is off",
			c.version, major, minor, c.archs[len(c.archs)-1], t.arch)
	}
	return t, err
}

// compile returns the image of one file for sm_major.minor: CUBIN, or PTX
// (NUL-terminated, as cuModuleLoadData reads it) for a GPU NVRTC does not
// know.
func (c *compiler) compile(name, src string, major, minor int) ([]byte, error) {
	t, err := c.target(major, minor)
	if err != nil {
		return nil, err
	}
	opts := compileOptions(t)
	h := sha256.New()
	// The library's file is part of the key: two NVRTCs may report the same
	// version (the CPU emulator reports 13.0) and produce different images.
	// The options name the target, so PTX and CUBIN never share a key.
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%d.%d\x00", src, strings.Join(opts, " "), c.version, c.nv.lib.realPath(), major, minor)
	key := hex.EncodeToString(h.Sum(nil))[:32]
	path := ""
	if c.cacheDir != "" {
		path = filepath.Join(c.cacheDir, strings.TrimSuffix(name, ".cu")+"-"+key+t.ext())
		if img, err := os.ReadFile(path); err == nil && len(img) > 0 {
			return img, nil
		}
	}
	img, log, err := c.nv.Compile(src, name, opts, !t.ptx)
	if err != nil {
		return nil, fmt.Errorf("compile kernels/%s for %s with NVRTC %s: %w", name, t, c.version, err)
	}
	if log = strings.TrimRight(log, "\x00\n "); log != "" {
		if c.logs == nil {
			c.logs = map[string]string{}
		}
		c.logs[name] = log
	}
	if t.ptx && img[len(img)-1] != 0 {
		img = append(img, 0)
	}
	if path != "" {
		// The cache is an optimisation: a read-only home must not stop a run.
		if err := os.MkdirAll(c.cacheDir, 0o755); err == nil {
			tmp := path + fmt.Sprintf(".tmp%d", os.Getpid())
			if os.WriteFile(tmp, img, 0o644) == nil && os.Rename(tmp, path) == nil {
				return img, nil
			}
			os.Remove(tmp)
		}
		c.logf("kernel cache %s not writable; kernels will be recompiled next time", c.cacheDir)
	}
	return img, nil
}

// sortedNames returns the keys of m in order.
func sortedNames(m map[string]string) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Precompiled says what Precompile did.
type Precompiled struct {
	NVRTCVersion string
	Dir          string // the kernel cache folder
	Files        int    // kernel files compiled (or found in the cache)
	Target       string // what they were compiled to: sm_90a, or compute_90 (PTX)
	// Logs are NVRTC's messages (ptxas's warnings among them, e.g. a
	// serialised wgmma) by file, for the files compiled rather than read
	// from the cache and whose log was not empty.
	Logs map[string]string
}

// Precompile compiles every kernel for sm_major.minor into the kernel cache
// with the NVRTC found here (no GPU needed), so GPU nodes sharing the cache
// folder start without compiling: CUBIN where NVRTC knows the architecture,
// else PTX for the driver to compile (arch.go), as Open would.
func Precompile(major, minor int, logf func(string, ...any)) (Precompiled, error) {
	lib, err := openLibrary("nvrtc", 0) // no GPU here: any version
	if err != nil {
		return Precompiled{}, err
	}
	nv, err := loadNVRTC(lib)
	if err != nil {
		return Precompiled{}, err
	}
	c, err := newCompiler(nv, logf)
	if err != nil {
		return Precompiled{}, err
	}
	if c.cacheDir == "" {
		return Precompiled{}, fmt.Errorf("no kernel cache folder (set %s)", CacheDirEnv)
	}
	t, err := c.plan(major, minor)
	if err != nil {
		return Precompiled{}, err
	}
	srcs := Sources()
	for _, name := range sortedNames(srcs) {
		if _, err := c.compile(name, srcs[name], major, minor); err != nil {
			return Precompiled{}, err
		}
	}
	return Precompiled{NVRTCVersion: c.version, Dir: c.cacheDir, Files: len(srcs), Target: t.String(), Logs: c.logs}, nil
}
