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

// compileOptions are NVRTC's options for compute capability major.minor.
// Compute capability 9.0 compiles for sm_90a, the architecture-specific
// target with Hopper's warpgroup MMA (wgmma.cuh): its code runs on sm_90
// devices only, which is what it is compiled for.
func compileOptions(major, minor int) []string {
	arch := fmt.Sprintf("sm_%d%d", major, minor)
	if major == 9 && minor == 0 {
		arch += "a"
	}
	return []string{"--gpu-architecture=" + arch, "--std=c++17", "--fmad=true"}
}

// compiler compiles kernel files through NVRTC with an on-disk cache.
type compiler struct {
	nv       *nvrtc
	version  string
	cacheDir string // "" disables the cache
	logf     func(format string, a ...any)
}

func newCompiler(nv *nvrtc, logf func(string, ...any)) (*compiler, error) {
	a, b, err := nv.Version()
	if err != nil {
		return nil, err
	}
	c := &compiler{nv: nv, version: fmt.Sprintf("%d.%d", a, b), logf: logf}
	if dir := os.Getenv(CacheDirEnv); dir != "" {
		c.cacheDir = dir
	} else if base, err := os.UserCacheDir(); err == nil {
		c.cacheDir = filepath.Join(base, "gdrotrain", "kernels")
	}
	return c, nil
}

// compile returns the CUBIN of one file for sm_major.minor.
func (c *compiler) compile(name, src string, major, minor int) ([]byte, error) {
	opts := compileOptions(major, minor)
	h := sha256.New()
	// The library's file is part of the key: two NVRTCs may report the same
	// version (the CPU emulator reports 13.0) and produce different images.
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%d.%d\x00", src, strings.Join(opts, " "), c.version, c.nv.lib.realPath(), major, minor)
	key := hex.EncodeToString(h.Sum(nil))[:32]
	path := ""
	if c.cacheDir != "" {
		path = filepath.Join(c.cacheDir, strings.TrimSuffix(name, ".cu")+"-"+key+".cubin")
		if img, err := os.ReadFile(path); err == nil && len(img) > 0 {
			return img, nil
		}
	}
	img, _, err := c.nv.Compile(src, name, opts, true)
	if err != nil {
		return nil, fmt.Errorf("compile kernels/%s for sm_%d%d with NVRTC %s: %w", name, major, minor, c.version, err)
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

// Precompile compiles every kernel for sm_major.minor into the kernel cache
// with the NVRTC found here (no GPU needed), so GPU nodes sharing the cache
// folder start without compiling. It returns the NVRTC version, the cache
// folder and the number of files compiled.
func Precompile(major, minor int, logf func(string, ...any)) (version, dir string, files int, err error) {
	lib, err := openLibrary("nvrtc", 0) // no GPU here: any version
	if err != nil {
		return "", "", 0, err
	}
	nv, err := loadNVRTC(lib)
	if err != nil {
		return "", "", 0, err
	}
	c, err := newCompiler(nv, logf)
	if err != nil {
		return "", "", 0, err
	}
	if c.cacheDir == "" {
		return "", "", 0, fmt.Errorf("no kernel cache folder (set %s)", CacheDirEnv)
	}
	srcs := Sources()
	for _, name := range sortedNames(srcs) {
		if _, err := c.compile(name, srcs[name], major, minor); err != nil {
			return "", "", 0, err
		}
	}
	return c.version, c.cacheDir, len(srcs), nil
}
