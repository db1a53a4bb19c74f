package cblas

// Which kernels OpenBLAS uses. A DYNAMIC_ARCH OpenBLAS (Debian's, Homebrew's)
// holds kernels for many x86 cores and picks one in its load-time
// constructor: the core named by OPENBLAS_CORETYPE, or else the one its
// CPUID table gives. An OpenBLAS older than the CPU does not know the CPU's
// model and falls back to Prescott's SSE3 kernels (Debian bookworm's 0.3.21
// on family 6 model 207 Intel: the 50M forward runs 3.5× slower than with
// its AVX-512 kernels). The choice cannot be corrected after loading (the
// constructor has already started threads and sized buffers for the core), so
// Open decides before the one real load, from
//
//   - the CPU's class, from its feature flags (what the OS lets user code
//     run, as golang.org/x/sys/cpu reports it) and its vendor: AVX-512 with
//     BF16 → Cooperlake, AVX-512 → SkylakeX, AVX2 on AMD → Zen, AVX2 →
//     Haswell; and
//   - the core the library picks by itself on this CPU, which a short child
//     process reports (probe.go): OpenBLAS's table differs by version, so
//     replaying it here would be wrong for some version; a second namespace
//     (dlmopen) would load a second libc and start the library's threads
//     inside this process.
//
// ChooseCore is that decision, kept pure so a table test covers it; a user's
// OPENBLAS_CORETYPE always wins, and a core the library picks that this
// table does not rank (a newer one, SapphireRapids, or another architecture)
// is left alone: the library knows the CPU better than we do.

import (
	"fmt"
	"os"
	"runtime"
	"strings"

	"golang.org/x/sys/cpu"
)

// CoreEnv is OpenBLAS's own variable naming the kernels to use.
const CoreEnv = "OPENBLAS_CORETYPE"

// CPU is what the kernel choice needs to know of the processor.
type CPU struct {
	Vendor                   string // CPUID vendor string: GenuineIntel, AuthenticAMD, HygonGenuine; "" if unknown
	AVX2, AVX512, AVX512BF16 bool   // usable by user code (the OS saves the registers)
	Signature                string // vendor, family, model, stepping and flags: the probe cache's key
}

// coreRank orders OpenBLAS's x86 core names (driver/others/dynamic.c's
// corename table, matched case-insensitively as OPENBLAS_CORETYPE is) by the
// widest vector instructions their kernels use: 0 SSE, 1 AVX, 2 AVX2 (with
// FMA), 3 AVX-512, 4 AVX-512 with BF16, 5 AMX. A core is "older than" a
// class when its rank is lower; cores of the same rank (Haswell, Zen) are
// not replaced by each other.
var coreRank = map[string]int{
	"unknown": -1,
	"katmai":  0, "coppermine": 0, "northwood": 0, "prescott": 0, "banias": 0, "atom": 0, "core2": 0,
	"penryn": 0, "dunnington": 0, "nehalem": 0, "athlon": 0, "opteron": 0, "opteron_sse3": 0,
	"barcelona": 0, "nano": 0, "bobcat": 0,
	"sandybridge": 1, "bulldozer": 1, "piledriver": 1, "steamroller": 1, "excavator": 1,
	"haswell": 2, "zen": 2,
	"skylakex":       3,
	"cooperlake":     4,
	"sapphirerapids": 5,
}

// coreFallback is the next older core to try when a library does not
// accept one (a Cooperlake kernel needs OpenBLAS ≥ 0.3.11).
var coreFallback = map[string]string{"Cooperlake": "SkylakeX", "SkylakeX": "Haswell", "Zen": "Haswell"}

// Class is the newest OpenBLAS core whose kernels the CPU runs, and the
// words for it in a log line; "" where no such core beats the SSE kernels
// every x86-64 OpenBLAS has.
func (c CPU) Class() (core, desc string) {
	amd := c.Vendor == "AuthenticAMD" || c.Vendor == "HygonGenuine"
	switch {
	case c.AVX512 && c.AVX512BF16:
		return "Cooperlake", "an AVX-512 BF16 CPU"
	case c.AVX512:
		return "SkylakeX", "an AVX-512 CPU"
	case c.AVX2 && amd:
		return "Zen", "an AMD Zen CPU"
	case c.AVX2:
		return "Haswell", "an AVX2 CPU"
	}
	return "", ""
}

// ChooseCore decides the OPENBLAS_CORETYPE to set before loading a library
// that, left alone, picks the core picked on this CPU; dynamic says the
// library is a DYNAMIC_ARCH build (its get_config says so: any other build
// has one core and ignores the variable), and user is the user's own
// OPENBLAS_CORETYPE. It returns the core to set ("" for none) and why, for
// the log line ("" when there is nothing to say).
func ChooseCore(c CPU, picked string, dynamic bool, user string) (set, reason string) {
	if user != "" {
		return "", CoreEnv + "=" + user + ", the user's setting"
	}
	class, desc := c.Class()
	if class == "" || picked == "" || !dynamic {
		return "", ""
	}
	r, ok := coreRank[strings.ToLower(picked)]
	if !ok || r >= coreRank[strings.ToLower(class)] {
		return "", ""
	}
	return class, fmt.Sprintf("set: the library picked %s on %s it does not know", picked, desc)
}

// thisCPU reads the running processor: feature flags from x/sys/cpu, vendor
// and signature from /proc/cpuinfo where there is one (the kernel's CPUID
// readout; x/sys/cpu has no vendor). Only x86-64 has OpenBLAS core types.
func thisCPU() CPU {
	if runtime.GOARCH != "amd64" {
		return CPU{}
	}
	c := CPU{AVX2: cpu.X86.HasAVX2 && cpu.X86.HasFMA,
		AVX512:     cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512DQ,
		AVX512BF16: cpu.X86.HasAVX512BF16}
	sig := map[string]string{}
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(raw), "\n") {
			if line == "" {
				break // the first processor is enough
			}
			k, v, _ := strings.Cut(line, ":")
			sig[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	c.Vendor = sig["vendor_id"]
	c.Signature = fmt.Sprintf("%s/%s/%s/%s avx2=%t avx512=%t bf16=%t", c.Vendor, sig["cpu family"], sig["model"],
		sig["stepping"], c.AVX2, c.AVX512, c.AVX512BF16)
	return c
}
