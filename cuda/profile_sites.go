package cuda

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
)

// siteCosts (GDROTRAIN_PROFILE_SITES=1, read at start-up): the step
// profile's estimate by engine, backend op and the model's call site (the
// first caller outside this package), for finding where a step's time
// goes; `bench --profile` prints the steady-state step's to stderr.
var siteCosts = struct {
	sync.Mutex
	on    bool
	m     map[string]*[3]float64 // seconds, bytes, flops
	calls map[string]int
}{on: os.Getenv("GDROTRAIN_PROFILE_SITES") != "", m: map[string]*[3]float64{}, calls: map[string]int{}}

// SitesOn reports whether GDROTRAIN_PROFILE_SITES is set.
func SitesOn() bool { return siteCosts.on }

// recordSite adds one op's estimate to its site.
func recordSite(e Engine, t, bytes, flops float64) {
	pc := make([]uintptr, 24)
	n := runtime.Callers(3, pc)
	frames := runtime.CallersFrames(pc[:n])
	op, site := "", ""
	for {
		f, more := frames.Next()
		if strings.Contains(f.Function, "gdrotrain/cuda.") {
			op = f.Function[strings.LastIndex(f.Function, ".")+1:]
		} else if op != "" {
			site = fmt.Sprintf("%s:%d", filepath.Base(f.File), f.Line)
			break
		}
		if !more {
			break
		}
	}
	k := fmt.Sprintf("%-12s %-22s %s", e, op, site)
	siteCosts.Lock()
	c := siteCosts.m[k]
	if c == nil {
		c = &[3]float64{}
		siteCosts.m[k] = c
	}
	c[0] += t
	c[1] += bytes
	c[2] += flops
	siteCosts.calls[k]++
	siteCosts.Unlock()
}

// PrintSitesTo writes the recorded sites, largest first, to w (nil: nowhere), and clears them.
func PrintSitesTo(w io.Writer) {
	siteCosts.Lock()
	defer siteCosts.Unlock()
	keys := make([]string, 0, len(siteCosts.m))
	for k := range siteCosts.m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return siteCosts.m[keys[i]][0] > siteCosts.m[keys[j]][0] })
	for _, k := range keys {
		c := siteCosts.m[k]
		if w == nil {
			break
		}
		fmt.Fprintf(w, "%9.3f ms %8.2f GB %9.2f TF %5d  %s\n", 1e3*c[0], c[1]/1e9, c[2]/1e12, siteCosts.calls[k], k)
	}
	siteCosts.m, siteCosts.calls = map[string]*[3]float64{}, map[string]int{}
}
