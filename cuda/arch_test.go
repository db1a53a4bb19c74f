package cuda

import (
	"slices"
	"strings"
	"testing"
)

// TestParseArch: the last digit is the minor version, so sm_100 is 10.0
// (it was read as sm_10), and the architecture-specific and family
// suffixes name the same GPU.
func TestParseArch(t *testing.T) {
	for _, c := range []struct {
		in           string
		major, minor int
		bad          bool
	}{
		{in: "sm_80", major: 8}, {in: "sm_86", major: 8, minor: 6}, {in: "sm_89", major: 8, minor: 9},
		{in: "sm_90", major: 9}, {in: "sm_90a", major: 9}, {in: "sm_100", major: 10}, {in: "sm_100a", major: 10},
		{in: "sm_100f", major: 10}, {in: "sm_103", major: 10, minor: 3}, {in: "sm_120", major: 12},
		{in: "sm_121", major: 12, minor: 1}, {in: "sm_75", major: 7, minor: 5},
		{in: "hopper", bad: true}, {in: "sm_9", bad: true}, {in: "sm_", bad: true}, {in: "sm_1000", bad: true},
		{in: "sm_090", bad: true}, {in: "sm_90aa", bad: true}, {in: "sm_9x", bad: true}, {in: "compute_90", bad: true},
		{in: "90", bad: true}, {in: "sm_a", bad: true}, {in: "SM_90", bad: true}, {in: "sm_-90", bad: true},
	} {
		major, minor, err := ParseArch(c.in)
		if c.bad {
			if err == nil || !strings.Contains(err.Error(), c.in) || !strings.Contains(err.Error(), "sm_100") {
				t.Errorf("ParseArch(%q) = %d.%d, %v; want an error quoting it and giving examples", c.in, major, minor, err)
			}
			continue
		}
		if err != nil || major != c.major || minor != c.minor {
			t.Errorf("ParseArch(%q) = %d.%d, %v; want %d.%d", c.in, major, minor, err, c.major, c.minor)
		}
	}
}

// nvrtc125Archs is what NVRTC 12.5's nvrtcGetSupportedArchs lists (and the
// emulator models under GDROTRAIN_EMU_NVRTC_VERSION=12.5;
// TestNVRTC125Archs checks both where the real one is at hand).
var nvrtc125Archs = []int{50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90}

// TestChooseTarget: CUBIN for a GPU NVRTC knows (sm_90a on 9.0), PTX for
// the newest virtual architecture not newer than one it does not know,
// never architecture-specific; an error for a GPU older than all it knows.
func TestChooseTarget(t *testing.T) {
	nvrtc13 := []int{75, 80, 86, 87, 89, 90, 100, 103, 120}
	for _, c := range []struct {
		major, minor int
		known        []int
		want         target
		err          string
	}{
		{major: 9, known: nvrtc125Archs, want: target{arch: "sm_90a"}},
		{major: 8, known: nvrtc125Archs, want: target{arch: "sm_80"}},
		{major: 8, minor: 9, known: nvrtc125Archs, want: target{arch: "sm_89"}},
		{major: 10, known: nvrtc125Archs, want: target{arch: "compute_90", ptx: true}},
		{major: 12, known: nvrtc125Archs, want: target{arch: "compute_90", ptx: true}},
		{major: 10, known: nvrtc13, want: target{arch: "sm_100"}},
		{major: 12, known: nvrtc13, want: target{arch: "sm_120"}},
		{major: 12, minor: 1, known: nvrtc13, want: target{arch: "compute_120", ptx: true}},
		{major: 11, known: nvrtc13, want: target{arch: "compute_103", ptx: true}},
		{major: 9, known: []int{75, 80, 86, 89}, want: target{arch: "compute_89", ptx: true}},
		{major: 9, want: target{arch: "sm_90a"}}, // an NVRTC that cannot say
		{major: 10, want: target{arch: "sm_100"}},
		{major: 6, minor: 1, known: nvrtc13, err: "sm_61, older than every architecture this NVRTC knows (sm_75 … sm_120)"},
	} {
		got, err := chooseTarget(c.major, c.minor, c.known)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%d.%d: got %v, %v; want an error saying %q", c.major, c.minor, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%d.%d with %v: got %+v, %v; want %+v", c.major, c.minor, c.known, got, err, c.want)
		}
		if got.ptx && strings.HasSuffix(got.arch, "a") {
			t.Errorf("%d.%d: PTX for the architecture-specific %s", c.major, c.minor, got.arch)
		}
		if wantExt := map[bool]string{true: ".ptx", false: ".cubin"}[c.want.ptx]; got.ext() != wantExt {
			t.Errorf("%d.%d: suffix %s, want %s", c.major, c.minor, got.ext(), wantExt)
		}
	}
	if !slices.IsSorted(nvrtc125Archs) {
		t.Fatal("the list must be sorted as SupportedArchs returns it")
	}
}

// TestHasWGMMA: the warpgroup-MMA attention runs on compute capability 9.0
// only, and not when the kernels there are PTX (an NVRTC without sm_90a),
// which has no architecture-specific instructions.
func TestHasWGMMA(t *testing.T) {
	for _, c := range []struct {
		info Info
		want bool
	}{
		{Info{Major: 9}, true},
		{Info{Major: 9, KernelsPTX: true, KernelTarget: "compute_89 (PTX)"}, false},
		{Info{Major: 10, KernelsPTX: true}, false},
		{Info{Major: 10}, false},
		{Info{Major: 8, Minor: 9}, false},
		{Info{Major: 12}, false},
	} {
		if got := c.info.HasWGMMA(); got != c.want {
			t.Errorf("%d.%d PTX %v: HasWGMMA %v, want %v", c.info.Major, c.info.Minor, c.info.KernelsPTX, got, c.want)
		}
	}
}
