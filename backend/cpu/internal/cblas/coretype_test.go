package cblas

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// TestChooseCore: the kernel choice against fake CPUs and the cores a
// library reports.
func TestChooseCore(t *testing.T) {
	intel := func(avx2, avx512, bf16 bool) CPU {
		return CPU{Vendor: "GenuineIntel", AVX2: avx2, AVX512: avx512, AVX512BF16: bf16}
	}
	amd := func(avx2, avx512, bf16 bool) CPU {
		return CPU{Vendor: "AuthenticAMD", AVX2: avx2, AVX512: avx512, AVX512BF16: bf16}
	}
	for _, c := range []struct {
		name    string
		cpu     CPU
		picked  string
		dynamic bool
		user    string
		set     string
		reason  string // a substring of the reason; "" wants none
	}{
		// Bookworm's OpenBLAS 0.3.21 on family 6 model 207 (Emerald Rapids).
		{"new Intel, BF16", intel(true, true, true), "Prescott", true, "", "Cooperlake",
			"set: the library picked Prescott on an AVX-512 BF16 CPU it does not know"},
		{"AVX-512 without BF16", intel(true, true, false), "Prescott", true, "", "SkylakeX", "an AVX-512 CPU"},
		{"AVX2 Intel", intel(true, false, false), "Nehalem", true, "", "Haswell", "picked Nehalem on an AVX2 CPU"},
		{"AVX2 AMD", amd(true, false, false), "Barcelona", true, "", "Zen", "an AMD Zen CPU"},
		{"Zen 4 (AVX-512 BF16)", amd(true, true, true), "Zen", true, "", "Cooperlake", "picked Zen"},
		{"Sandybridge is older than AVX2", intel(true, false, false), "Sandybridge", true, "", "Haswell", "picked Sandybridge"},
		{"SkylakeX older than BF16", intel(true, true, true), "SkylakeX", true, "", "Cooperlake", "picked SkylakeX"},
		{"core names match in any case", intel(true, true, false), "PRESCOTT", true, "", "SkylakeX", "PRESCOTT"},
		{"the library's Unknown", intel(true, true, false), "Unknown", true, "", "SkylakeX", "picked Unknown"},

		// The library's pick already matches or beats the class.
		{"right core", intel(true, true, true), "Cooperlake", true, "", "", ""},
		{"newer core than the class", intel(true, true, true), "SapphireRapids", true, "", "", ""},
		{"SkylakeX on an AVX2 CPU is left", intel(true, false, false), "SkylakeX", true, "", "", ""},
		{"Haswell on AMD is as wide as Zen", amd(true, false, false), "Haswell", true, "", "", ""},
		{"Zen on Intel AVX2 is as wide as Haswell", intel(true, false, false), "Zen", true, "", "", ""},
		{"unranked name is the library's business", intel(true, true, true), "Zen5", true, "", "", ""},

		// Nothing to decide.
		{"old CPU", intel(false, false, false), "Prescott", true, "", "", ""},
		{"not OpenBLAS (no core)", intel(true, true, true), "", true, "", "", ""},
		{"single-core build ignores the variable", intel(true, true, true), "Prescott", false, "", "", ""},

		// The user's setting wins, whatever the library would do.
		{"user's setting", intel(true, true, true), "Prescott", true, "Haswell", "", "OPENBLAS_CORETYPE=Haswell, the user's setting"},
		{"user's older setting", intel(true, true, true), "Cooperlake", true, "Prescott", "", "the user's setting"},
	} {
		set, reason := ChooseCore(c.cpu, c.picked, c.dynamic, c.user)
		if set != c.set || (c.reason == "") != (reason == "") || !strings.Contains(reason, c.reason) {
			t.Errorf("%s: ChooseCore(%+v, %q, %v, %q) = %q, %q; want %q, %q", c.name, c.cpu, c.picked, c.dynamic, c.user,
				set, reason, c.set, c.reason)
		}
	}
}

// TestCoreRankNames: every name the fallback chain and Class give is ranked,
// and no fallback is newer than the core it replaces (Zen falls back to
// Haswell, as wide).
func TestCoreRankNames(t *testing.T) {
	for _, c := range []CPU{{AVX2: true}, {Vendor: "AuthenticAMD", AVX2: true}, {AVX512: true}, {AVX512: true, AVX512BF16: true}} {
		class, _ := c.Class()
		for n := class; n != ""; n = coreFallback[n] {
			r, ok := coreRank[strings.ToLower(n)]
			if !ok {
				t.Fatalf("%s is not ranked", n)
			}
			if f := coreFallback[n]; f != "" && coreRank[strings.ToLower(f)] > r {
				t.Errorf("fallback %s of %s is newer", f, n)
			}
		}
	}
}

// userCore is OPENBLAS_CORETYPE as the test process started with it.
// OpenBLAS reads the variable once, when the process first loads the
// library (perhaps in an earlier test of this package), so where the user
// set it the library runs the user's core whatever a test sets afterwards.
var userCore = os.Getenv(CoreEnv)

// TestOpenCore loads the machine's OpenBLAS through Open and checks that the
// core it runs is never older than the CPU's class when the library could
// run it, that the user's OPENBLAS_CORETYPE wins, and that the variable is
// not left set for child processes. Where the user set the variable
// (make test run with OPENBLAS_CORETYPE=Haswell) it checks instead that the
// user's setting is the one honoured.
func TestOpenCore(t *testing.T) {
	if userCore != "" {
		testOpenUserCore(t, userCore)
		return
	}
	t.Setenv(Env, "")
	t.Setenv(CoreEnv, "")
	if err := os.Unsetenv(CoreEnv); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // a fresh probe, not the user's cache
	t.Setenv("HOME", t.TempDir())
	l, err := Open()
	if err != nil {
		t.Skip(err)
	}
	c := thisCPU()
	class, _ := c.Class()
	t.Logf("%s on %s (class %q)", l.Describe(), c.Signature, class)
	if _, set := os.LookupEnv(CoreEnv); set {
		t.Errorf("%s left set after Open", CoreEnv)
	}
	if l.Core != "" && class != "" && strings.Contains(l.Config, "DYNAMIC_ARCH") {
		if r, ok := coreRank[strings.ToLower(l.Core)]; ok && r < coreRank[strings.ToLower(class)] &&
			!strings.Contains(l.Note, "refuses") {
			t.Errorf("core %s on a %s CPU (note %q)", l.Core, class, l.Note)
		}
	}
	// The cached choice repeats without probing.
	if ch, ok := readCoreCache()[strings.Join(Names, ",")+"|"+os.Getenv("LD_LIBRARY_PATH")+"|"+c.Signature]; class != "" && l.Core != "" &&
		(!ok || ch.Path != l.Path || !ch.valid()) {
		t.Errorf("no valid cache entry for %s: %+v", l.Path, ch)
	}

	// The user's setting: a probe in a child (one process loads the
	// library once) with OPENBLAS_CORETYPE=Prescott reports Prescott.
	if l.Core == "" {
		return
	}
	r, err := probe(Names, "Prescott")
	if err != nil {
		t.Fatal(err)
	}
	if r.Core != "Prescott" {
		t.Errorf("probe with %s=Prescott: core %q", CoreEnv, r.Core)
	}
	t.Setenv(CoreEnv, "Prescott")
	if ch, note, err := chooseFor(Names); err != nil || ch.Set != "" || !strings.Contains(note, "the user's setting") {
		t.Errorf("user's %s: %+v, %q", CoreEnv, ch, note)
	}
}

// testOpenUserCore: with the user's OPENBLAS_CORETYPE set, Open keeps it
// (no probe, no override), says so, leaves it set for child processes, and
// the library runs the core a fresh process given the same setting runs
// (OpenBLAS may map a name to another core, or refuse one the CPU lacks).
func testOpenUserCore(t *testing.T, user string) {
	t.Setenv(Env, "")
	t.Setenv(CoreEnv, user)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	l, err := Open()
	if err != nil {
		t.Skip(err)
	}
	t.Logf("%s with the user's %s=%s", l.Describe(), CoreEnv, user)
	if !strings.Contains(l.Note, "the user's setting") {
		t.Errorf("note %q does not name the user's setting %s=%s", l.Note, CoreEnv, user)
	}
	if v := os.Getenv(CoreEnv); v != user {
		t.Errorf("%s=%q after Open, want the user's %q", CoreEnv, v, user)
	}
	if l.Core == "" {
		return // not OpenBLAS, or one that does not say its core
	}
	r, err := probe(Names, user)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.EqualFold(r.Core, l.Core) {
		t.Errorf("core %s here, but a fresh process with %s=%s runs %s", l.Core, CoreEnv, user, r.Core)
	}
}

// TestDecideCore: the probes behind the choice, against a fake library that
// picks Prescott by itself and accepts only the cores in accepts; and the
// cache that spares the probes on the next start.
func TestDecideCore(t *testing.T) {
	lib := t.TempDir() + "/libfake.so"
	if err := os.WriteFile(lib, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer func(p func([]string, string) (probeResult, error)) { probeCore = p }(probeCore)
	bf16 := CPU{Vendor: "GenuineIntel", AVX2: true, AVX512: true, AVX512BF16: true, Signature: "fake"}
	for _, c := range []struct {
		name    string
		accepts []string
		set     string
		reason  string
		probes  int
	}{
		{"accepted", []string{"Cooperlake", "SkylakeX", "Haswell"}, "Cooperlake", "set: the library picked Prescott on an AVX-512 BF16 CPU it does not know", 2},
		{"an older OpenBLAS without Cooperlake", []string{"SkylakeX", "Haswell"}, "SkylakeX", "; it refuses Cooperlake", 3},
		{"none accepted", nil, "", "the library picked Prescott and refuses OPENBLAS_CORETYPE=Cooperlake, SkylakeX, Haswell", 4},
	} {
		t.Setenv("XDG_CACHE_HOME", t.TempDir())
		probes := 0
		probeCore = func(names []string, core string) (probeResult, error) {
			probes++
			r := probeResult{Path: lib, Config: "OpenBLAS 0.3.21 DYNAMIC_ARCH", Core: "Prescott"}
			for _, a := range c.accepts {
				if a == core {
					r.Core = core
				}
			}
			return r, nil
		}
		for start := 0; start < 2; start++ {
			ch, err := decideCore([]string{"libfake.so"}, bf16)
			if err != nil || ch.Set != c.set || !strings.Contains(ch.Reason, c.reason) || ch.Picked != "Prescott" || ch.Path != lib {
				t.Errorf("%s, start %d: %+v, %v; want set %q, reason %q", c.name, start, ch, err, c.set, c.reason)
			}
		}
		if probes != c.probes {
			t.Errorf("%s: %d probes over two starts, want %d (the second from the cache)", c.name, probes, c.probes)
		}
	}
}

// TestOpenProbeFails: a library that loads here but could not be probed
// keeps its own core, and the note says it was not checked.
func TestOpenProbeFails(t *testing.T) {
	if class, _ := thisCPU().Class(); class == "" {
		t.Skip("no core class on this CPU: nothing is probed")
	}
	t.Setenv(Env, "")
	t.Setenv(CoreEnv, "")
	if err := os.Unsetenv(CoreEnv); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	defer func(p func([]string, string) (probeResult, error)) { probeCore = p }(probeCore)
	probeCore = func([]string, string) (probeResult, error) { return probeResult{}, errors.New("exec refused") }
	l, err := Open()
	if err != nil {
		t.Skip(err)
	}
	if want := "the library's own pick, not checked against the CPU: exec refused"; l.Note != want {
		t.Errorf("note %q, want %q", l.Note, want)
	}
}
