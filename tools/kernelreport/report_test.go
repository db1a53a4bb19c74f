package kernelreport

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/gdrotrain/gdrotrain/cuda"
)

// toolsOrSkip finds NVRTC and cuobjdump, or skips (fails where
// GDROTRAIN_REQUIRE_NVRTC is set, as in CI), as the cuda package's
// skipNoNVRTC does.
func toolsOrSkip(t *testing.T) Tools {
	t.Helper()
	tools, err := FindTools()
	if errors.Is(err, ErrNoCuobjdump) {
		if os.Getenv("GDROTRAIN_REQUIRE_NVRTC") != "" {
			t.Fatalf("GDROTRAIN_REQUIRE_NVRTC is set but %v", err)
		}
		t.Skipf("skipped: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return tools
}

// archs are the architectures the tests compile for: sm_80 and sm_90, or
// sm_90 alone under go test -short.
func archs() []Arch {
	if testing.Short() {
		return []Arch{{9, 0}}
	}
	return []Arch{{8, 0}, {9, 0}}
}

// collected is the kernels of every architecture, compiled and read back
// once for all the tests of this package (each took a whole NVRTC and
// cuobjdump pass before).
var collected struct {
	once    sync.Once
	version string
	ks      []Kernel
	err     error
}

// collectOrSkip compiles and reads back every kernel for archs (once).
func collectOrSkip(t *testing.T) (string, []Kernel) {
	t.Helper()
	tools := toolsOrSkip(t)
	collected.once.Do(func() {
		work, err := os.MkdirTemp("", "kernelreport-")
		if err != nil {
			collected.err = err
			return
		}
		defer os.RemoveAll(work)
		collected.version, collected.ks, collected.err = Collect(tools, archs(), work, t.Logf)
	})
	version, ks, err := collected.version, collected.ks, collected.err
	var le *cuda.LibraryError
	if errors.As(err, &le) {
		if os.Getenv("GDROTRAIN_REQUIRE_NVRTC") != "" {
			t.Fatalf("GDROTRAIN_REQUIRE_NVRTC is set but NVRTC cannot be loaded: %v", err)
		}
		t.Skipf("skipped: no NVRTC here (%v); scripts/install_cuda_tools.sh fetches NVRTC 12.5", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("NVRTC %s (%s), %s", version, tools.NVRTCDir, tools.Cuobjdump)
	return version, ks
}

// TestKernelsNoLocalMemory fails if any kernel has a stack frame, local
// memory or local loads/stores (spills, or an array indexed at run time) on
// sm_80 or sm_90 (archs). `make kernel-report` prints the whole table.
func TestKernelsNoLocalMemory(t *testing.T) {
	_, ks := collectOrSkip(t)
	if len(ks) == 0 {
		t.Fatal("no kernel reported")
	}
	for _, k := range ks {
		if k.UsesLocalMemory() {
			t.Errorf("%s %s (kernels/%s): %s: uses local memory (registers spilled, or an array indexed at run time); make kernel-report shows all kernels",
				k.Arch, k.Name, k.File, describe(k))
		}
	}
}

func describe(k Kernel) string {
	return fmt.Sprintf("stack %d B, local %d B, %d STL (%d B), %d LDL (%d B), %d registers",
		k.Stack, k.Local, k.LocalStores, k.StoreBytes, k.LocalLoads, k.LoadBytes, k.Registers)
}

// TestDecodeKernelsVectorLoads: the split-K decode kernels read keys and
// values with 16-byte loads (LDG.128), on sm_80 and sm_90 (archs), for an
// fp32, bf16 and fp8 cache and every head count (PER 1, 2, 4, 8).
func TestDecodeKernelsVectorLoads(t *testing.T) {
	_, ks := collectOrSkip(t)
	seen := 0
	decode := map[string]bool{}
	for _, cache := range []string{"", "_kvh", "_kv8"} {
		for _, per := range []int{1, 2, 4, 8} {
			decode[fmt.Sprintf("attn_decode_split%s_p%d", cache, per)] = true
		}
	}
	for _, k := range ks {
		if !decode[k.Name] {
			continue
		}
		seen++
		t.Logf("%s %s: global loads by width in bytes %v", k.Arch, k.Name, k.GlobalLoads)
		if k.GlobalLoads[16] < 2 {
			t.Errorf("%s %s: %d 16-byte global loads (want the key and value loads at least); loads by width %v",
				k.Arch, k.Name, k.GlobalLoads[16], k.GlobalLoads)
		}
	}
	if want := len(decode) * len(archs()); seen != want {
		t.Errorf("found %d of the %d decode kernels (%d per architecture)", seen, want, len(decode))
	}
}

// TestFlashHalfKernelsVectorLoads: the fused attention kernels for bf16
// activations stage keys and values (and, for dk/dv, queries) with 16-byte
// loads (LDG.128), on sm_80 and sm_90 (archs), and so does the forward over
// an fp8 KV cache; the fp32 ones cannot (each element is rounded as it is
// staged).
func TestFlashHalfKernelsVectorLoads(t *testing.T) {
	_, ks := collectOrSkip(t)
	want := map[string]bool{"attn_flash_fwd_h": true, "attn_flash_bwd_dq_h": true, "attn_flash_bwd_dkv_h": true,
		"attn_flash_fwd_kv8": true}
	seen := 0
	for _, k := range ks {
		if !want[k.Name] {
			continue
		}
		seen++
		t.Logf("%s %s: global loads by width in bytes %v", k.Arch, k.Name, k.GlobalLoads)
		if k.GlobalLoads[16] < 1 {
			t.Errorf("%s %s: no 16-byte global loads; loads by width %v", k.Arch, k.Name, k.GlobalLoads)
		}
	}
	if n := len(archs()) * len(want); seen != n {
		t.Errorf("found %d of the %d bf16 fused attention kernels (%d per architecture)", seen, n, len(want))
	}
}

// TestWGMMAKernels: the warpgroup-MMA attention kernels (attn_wg_*,
// compiled for sm_90a on compute capability 9.0) issue HGMMA — one per
// k-step of 16 of each product: the forward 8 (S = Q·Kᵀ over D = 128) + 4
// (O += P·V over 64 keys), dq 8 + 8 + 4, dk/dv 8 + 8 + 2 + 2 — and stage
// their tiles 16 bytes at a time: the forward and dq with cp.async (LDGSTS
// .128), dk/dv with 16-byte loads; built for sm_80 they have no
// tensor-core instruction (they trap there, and the backend never
// launches them).
func TestWGMMAKernels(t *testing.T) {
	_, ks := collectOrSkip(t)
	want := map[string]int{"attn_wg_fwd_h": 12, "attn_wg_bwd_dq_h": 20, "attn_wg_bwd_dkv_h": 20}
	seen := 0
	for _, k := range ks {
		n, ok := want[k.Name]
		if !ok {
			continue
		}
		seen++
		t.Logf("%s %s: tensor-core instructions %v, %d registers, global loads by width %v, cp.async by width %v", k.Arch, k.Name,
			k.TensorOps, k.Registers, k.GlobalLoads, k.AsyncCopies)
		if k.Arch != (Arch{9, 0}) {
			if k.TensorCore != 0 {
				t.Errorf("%s %s: %d tensor-core instructions, want none off sm_90a", k.Arch, k.Name, k.TensorCore)
			}
			continue
		}
		if k.TensorOps["HGMMA"] != n || k.TensorCore != n {
			t.Errorf("%s %s: tensor-core instructions %v, want %d HGMMA and nothing else", k.Arch, k.Name, k.TensorOps, n)
		}
		if k.Name == "attn_wg_bwd_dkv_h" {
			if k.GlobalLoads[16] < 1 {
				t.Errorf("%s %s: no 16-byte global loads; loads by width %v", k.Arch, k.Name, k.GlobalLoads)
			}
		} else if k.AsyncCopies[16] < 1 || len(k.AsyncCopies) != 1 {
			t.Errorf("%s %s: cp.async by width %v, want 16-byte copies only", k.Arch, k.Name, k.AsyncCopies)
		}
	}
	if n := len(archs()) * len(want); seen != n {
		t.Errorf("found %d of the %d warpgroup-MMA kernels (%d per architecture)", seen, n, len(want))
	}
}

// TestExactTCKernels: exact mode's tensor-core attention (attn_exact_tc*,
// every storage and both sizes) issues its products as HMMA, the 32 of a
// tile of 16 keys unrolled for D ≤ 128 (scores: 2 chains of 8 keys × 8
// steps of 16 along D; P·V: one per 8 output columns), on sm_80 and sm_90
// (archs); the CUDA-core exact kernels issue none.
func TestExactTCKernels(t *testing.T) {
	_, ks := collectOrSkip(t)
	seen := 0
	for _, k := range ks {
		if !strings.HasPrefix(k.Name, "attn_exact") || strings.HasPrefix(k.Name, "attn_exact_combine") {
			continue
		}
		if !strings.HasPrefix(k.Name, "attn_exact_tc") {
			if k.TensorCore != 0 {
				t.Errorf("%s %s: %d tensor-core instructions, want none (CUDA cores)", k.Arch, k.Name, k.TensorCore)
			}
			continue
		}
		seen++
		if k.TensorOps["HMMA"] != 32 || k.TensorCore != 32 {
			t.Errorf("%s %s: tensor-core instructions %v, want 32 HMMA and nothing else", k.Arch, k.Name, k.TensorOps)
		}
	}
	if n := len(archs()) * 12; seen != n {
		t.Errorf("found %d of the %d tensor-core exact attention kernels (12 per architecture)", seen, n)
	}
}
