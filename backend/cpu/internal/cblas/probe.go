package cblas

// The probe: which core a library picks by itself, asked of a child process
// (this executable again, with probeEnv set) because the answer is only
// known after loading, and one process loads the library once
// (coretype.go). The child loads it with one thread, runs one small product
// on its kernels and prints one JSON line;
// the parent keeps the answer in the user's cache folder, keyed by the names
// searched, LD_LIBRARY_PATH and the CPU, and checked against the library
// file's size and time, so only the first start on a machine (or after an
// upgrade) pays for it (≈ 20–50 ms a probe, at most four: the library's own
// pick, then the cores tried).

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// probeEnv, set in a child, holds the JSON list of library names to try;
// the child prints a probeResult and exits.
const probeEnv = "GDROTRAIN_BLAS_PROBE"

// probeResult is what a child reports of the library it loaded.
type probeResult struct {
	Path   string `json:"path"`
	Config string `json:"config"`
	Core   string `json:"core"`
	Err    string `json:"err,omitempty"`
}

func init() {
	spec, ok := os.LookupEnv(probeEnv)
	if !ok {
		return
	}
	var names []string
	r := probeResult{}
	if err := json.Unmarshal([]byte(spec), &names); err != nil {
		r.Err = err.Error()
	}
	for _, n := range names {
		l, err := open(n)
		if err != nil {
			r.Err = err.Error()
			continue
		}
		r = probeResult{Path: l.Path, Config: l.Config, Core: l.Core}
		// Run the kernels once: a core the CPU cannot run (a hypervisor
		// that hides AVX-512 state) dies here, in the child.
		const n = 32
		a, c := make([]float32, n*n), make([]float32, n*n)
		for i := range a {
			a[i] = 1
		}
		l.Sgemm(false, true, n, n, n, 1, a, n, a, n, 0, c, n)
		if c[0] != n || c[n*n-1] != n {
			r.Err = fmt.Sprintf("%s, core %s: sgemm of ones gives %v, want %d", l.Path, l.Core, c[0], n)
		}
		break
	}
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
	os.Exit(0)
}

// probeCore is probe; tests replace it with a fake library.
var probeCore = probe

// probe loads the first of names that loads in a child process with
// OPENBLAS_CORETYPE set to core ("": unset) and reports what it says.
func probe(names []string, core string) (probeResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return probeResult{}, err
	}
	spec, err := json.Marshal(names)
	if err != nil {
		return probeResult{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe)
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != CoreEnv && k != "OPENBLAS_VERBOSE" && k != "OPENBLAS_NUM_THREADS" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, probeEnv+"="+string(spec), "OPENBLAS_NUM_THREADS=1")
	if core != "" {
		cmd.Env = append(cmd.Env, CoreEnv+"="+core)
	}
	out, err := cmd.Output()
	if err != nil {
		return probeResult{}, fmt.Errorf("probe %s: %w", exe, err)
	}
	var r probeResult
	if err := json.Unmarshal(out[strings.LastIndexByte(strings.TrimSpace(string(out)), '\n')+1:], &r); err != nil {
		return probeResult{}, fmt.Errorf("probe %s: %q: %w", exe, out, err)
	}
	if r.Err != "" {
		return r, fmt.Errorf("probe: %s", r.Err)
	}
	return r, nil
}

// coreChoice is what Open decided for one library on one CPU, as cached.
type coreChoice struct {
	Path    string `json:"path"` // the file the probe's linker mapped
	Size    int64  `json:"size"`
	ModTime int64  `json:"mod_time"` // Unix nanoseconds
	Picked  string `json:"picked"`   // the library's own core
	Set     string `json:"set"`      // the OPENBLAS_CORETYPE to set, or ""
	Reason  string `json:"reason"`
}

// valid reports whether the library file is the one probed.
func (c coreChoice) valid() bool {
	st, err := os.Stat(c.Path)
	return err == nil && st.Size() == c.Size && st.ModTime().UnixNano() == c.ModTime
}

// decideCore returns the choice for the library names resolve to on c,
// from the cache or from probes.
func decideCore(names []string, c CPU) (coreChoice, error) {
	key := strings.Join(names, ",") + "|" + os.Getenv("LD_LIBRARY_PATH") + "|" + c.Signature
	cache := readCoreCache()
	if ch, ok := cache[key]; ok && ch.valid() {
		return ch, nil
	}
	own, err := probeCore(names, "")
	if err != nil {
		return coreChoice{}, err
	}
	ch := coreChoice{Path: own.Path, Picked: own.Core}
	if st, err := os.Stat(own.Path); err == nil {
		ch.Size, ch.ModTime = st.Size(), st.ModTime().UnixNano()
	}
	set, reason := ChooseCore(c, own.Core, strings.Contains(own.Config, "DYNAMIC_ARCH"), "")
	// Try the core, then older ones while they still beat the library's own:
	// a library that does not know a name warns and falls back to Prescott.
	var refused []string
	for set != "" && coreRank[strings.ToLower(set)] > coreRank[strings.ToLower(own.Core)] {
		got, err := probeCore(names, set)
		if err == nil && strings.EqualFold(got.Core, set) {
			break
		}
		refused = append(refused, set)
		set = coreFallback[set]
	}
	switch {
	case len(refused) == 0:
	case set != "" && coreRank[strings.ToLower(set)] > coreRank[strings.ToLower(own.Core)]:
		reason += "; it refuses " + strings.Join(refused, ", ")
	default:
		set, reason = "", fmt.Sprintf("the library picked %s and refuses %s=%s", own.Core, CoreEnv, strings.Join(refused, ", "))
	}
	ch.Set, ch.Reason = set, reason
	if cache == nil {
		cache = map[string]coreChoice{}
	}
	cache[key] = ch
	writeCoreCache(cache)
	return ch, nil
}

// forgetCore drops the cached choices (the library loaded was not the one
// probed), so the next start probes again.
func forgetCore() { writeCoreCache(map[string]coreChoice{}) }

func coreCachePath() string {
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "gdrotrain", "openblas-core.json")
}

func readCoreCache() map[string]coreChoice {
	p := coreCachePath()
	if p == "" {
		return nil
	}
	raw, err := os.ReadFile(p)
	if err != nil {
		return nil
	}
	var m map[string]coreChoice
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}

// writeCoreCache replaces the cache file (a temporary file renamed, so
// concurrent starts read a whole one); a cache that cannot be written only
// means probing again next time.
func writeCoreCache(m map[string]coreChoice) {
	p := coreCachePath()
	if p == "" || os.MkdirAll(filepath.Dir(p), 0o755) != nil {
		return
	}
	raw, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".openblas-core-*")
	if err != nil {
		return
	}
	_, werr := f.Write(raw)
	if cerr := f.Close(); werr != nil || cerr != nil || os.Rename(f.Name(), p) != nil {
		_ = os.Remove(f.Name())
	}
}
