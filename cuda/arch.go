package cuda

// Architectures: naming them (sm_90, sm_100, sm_90a) and choosing what
// NVRTC compiles the kernels to for a GPU. NVRTC compiles CUBIN (machine
// code) only for the architectures it knows; a GPU newer than the NVRTC at
// hand (a B200, sm_100, with a CUDA 12.5 toolkit) gets PTX for the newest
// virtual architecture NVRTC knows instead, which the driver compiles for
// the GPU when it loads the module (PTX runs on every later GPU).

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseArch reads a GPU architecture as nvcc names it, sm_ then the compute
// capability's major and minor digits: sm_80, sm_89, sm_90, sm_100, sm_120.
// An architecture-specific suffix (sm_90a, sm_100a) or family suffix
// (sm_100f) names the same GPU, and is accepted. The last digit is the
// minor version, the ones before it the major.
func ParseArch(s string) (major, minor int, err error) {
	bad := fmt.Errorf("%q: want sm_ and the compute capability's digits, e.g. sm_80, sm_90, sm_90a, sm_100, sm_120", s)
	rest, ok := strings.CutPrefix(s, "sm_")
	digits := strings.TrimRight(rest, "af")
	if suffix := rest[len(digits):]; !ok || len(suffix) > 1 || len(digits) < 2 || len(digits) > 3 || digits[0] == '0' ||
		strings.Trim(digits, "0123456789") != "" {
		return 0, 0, bad
	}
	major, _ = strconv.Atoi(digits[:len(digits)-1])
	minor = int(digits[len(digits)-1] - '0')
	return major, minor, nil
}

// target is what NVRTC compiles the kernels to for one GPU.
type target struct {
	arch string // the --gpu-architecture value: sm_90a, sm_80, compute_90
	ptx  bool   // PTX for the driver to compile, not CUBIN
}

// ext is the cached image's file suffix.
func (t target) ext() string {
	if t.ptx {
		return ".ptx"
	}
	return ".cubin"
}

func (t target) String() string {
	if t.ptx {
		return t.arch + " (PTX)"
	}
	return t.arch
}

// chooseTarget picks the target for compute capability major.minor given
// the architectures NVRTC knows (10·major + minor; nil: NVRTC cannot say,
// trusted to know the GPU). A known GPU gets CUBIN for itself; compute
// capability 9.0 the architecture-specific sm_90a, whose warpgroup MMA
// (wgmma.cuh) runs on sm_90 devices only. An unknown one gets PTX for the
// newest virtual architecture NVRTC knows that is not newer than the GPU,
// without architecture-specific features: the kernels built on them
// (the wgmma attention) are then not used (Info.KernelsPTX).
func chooseTarget(major, minor int, known []int) (target, error) {
	cc := 10*major + minor
	if known == nil || containsInt(known, cc) {
		arch := fmt.Sprintf("sm_%d", cc)
		if cc == 90 {
			arch += "a"
		}
		return target{arch: arch}, nil
	}
	best := 0
	for _, k := range known {
		if k <= cc && k > best {
			best = k
		}
	}
	if best == 0 {
		return target{}, fmt.Errorf("the GPU is sm_%d, older than every architecture this NVRTC knows (sm_%d … sm_%d): use the NVRTC of an older CUDA toolkit", cc, known[0], known[len(known)-1])
	}
	return target{arch: fmt.Sprintf("compute_%d", best), ptx: true}, nil
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
