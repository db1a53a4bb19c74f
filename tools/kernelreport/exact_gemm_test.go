package kernelreport

import (
	"strings"
	"testing"
)

// TestExactGEMMKernels: exact mode's mma kernels (cuda/kernels/gemm_exact.cu)
// issue 32 HMMA per K chunk with 128-row tiles and 16 with 64-row ones,
// and nothing else on the tensor cores; a kernel with a bf16 operand copies
// it global → shared with 16-byte cp.async (LDGSTS.128), the pipeline
// docs/gpu.md counts, while one with fp32 operands only has none (they are
// rounded in registers). No local memory: TestKernelsNoLocalMemory.
func TestExactGEMMKernels(t *testing.T) {
	_, ks := collectOrSkip(t)
	seen := 0
	for _, k := range ks {
		var hmma int
		switch {
		case strings.HasPrefix(k.Name, "gemm_exact_mma64_"):
			hmma = 16
		case strings.HasPrefix(k.Name, "gemm_exact_mma_") && k.Name != "gemm_exact_mma_ref":
			hmma = 32
		default:
			continue
		}
		seen++
		t.Logf("%s %s: %d registers, %d B shared, tensor-core instructions %v, cp.async by width %v", k.Arch, k.Name,
			k.Registers, k.Shared, k.TensorOps, k.AsyncCopies)
		if k.TensorOps["HMMA"] != hmma || k.TensorCore != hmma {
			t.Errorf("%s %s: tensor-core instructions %v, want %d HMMA and nothing else", k.Arch, k.Name, k.TensorOps, hmma)
		}
		storages := k.Name[strings.LastIndex(k.Name, "_")+1:] // a, b, c: f fp32, h bf16
		if half := storages[0] == 'h' || storages[1] == 'h'; half != (k.AsyncCopies[16] > 0) || len(k.AsyncCopies) > 1 {
			t.Errorf("%s %s: cp.async by width %v; want 16-byte copies exactly where an operand is bf16", k.Arch, k.Name,
				k.AsyncCopies)
		}
	}
	if n := len(archs()) * 16; seen != n {
		t.Errorf("found %d of the %d exact mma kernels (16 per architecture)", seen, n)
	}
}

// TestExactWGKernels: exact mode's warpgroup-MMA products
// (gemm_exact_wg_* and gemm_exact_wg64_*, every storage), compiled for
// sm_90a on compute capability 9.0, issue HGMMA — one per k-step of 16 of
// a K chunk of 32 and warpgroup (m64n128k16 or m64n64k16), 2 — and nothing
// else on the tensor cores; ptxas does not serialise them (its warning
// names the kernel in NVRTC's log); no stack, local memory or spills; and
// a bf16 operand is copied with 16-byte cp.async as in the mma kernels.
// Built for sm_80 they have no tensor-core instruction (they trap there,
// and the backend never launches them).
func TestExactWGKernels(t *testing.T) {
	_, ks := collectOrSkip(t)
	seen := 0
	for _, k := range ks {
		if !strings.HasPrefix(k.Name, "gemm_exact_wg") {
			continue
		}
		seen++
		t.Logf("%s %s: %d registers, %d B shared, tensor-core instructions %v, cp.async by width %v", k.Arch, k.Name,
			k.Registers, k.Shared, k.TensorOps, k.AsyncCopies)
		if k.Arch != (Arch{9, 0}) {
			if k.TensorCore != 0 {
				t.Errorf("%s %s: %d tensor-core instructions, want none off sm_90a", k.Arch, k.Name, k.TensorCore)
			}
			continue
		}
		if k.TensorOps["HGMMA"] != 2 || k.TensorCore != 2 {
			t.Errorf("%s %s: tensor-core instructions %v, want 2 HGMMA and nothing else", k.Arch, k.Name, k.TensorOps)
		}
		if k.UsesLocalMemory() || k.Registers == 0 || k.Registers > 255 {
			t.Errorf("%s %s: %d registers, stack %d B, local %d B, %d local stores, %d local loads; want 1–255 registers and no local memory",
				k.Arch, k.Name, k.Registers, k.Stack, k.Local, k.LocalStores, k.LocalLoads)
		}
		for _, line := range strings.Split(k.Log, "\n") {
			if strings.Contains(line, "serialized") && strings.Contains(line, k.Name) {
				t.Errorf("%s %s: ptxas serialises its wgmma: %s", k.Arch, k.Name, line)
			}
		}
		storages := k.Name[strings.LastIndex(k.Name, "_")+1:]
		if half := storages[0] == 'h' || storages[1] == 'h'; half != (k.AsyncCopies[16] > 0) || len(k.AsyncCopies) > 1 {
			t.Errorf("%s %s: cp.async by width %v; want 16-byte copies exactly where an operand is bf16", k.Arch, k.Name,
				k.AsyncCopies)
		}
	}
	if n := len(archs()) * 16; seen != n {
		t.Errorf("found %d of the %d exact warpgroup-MMA kernels (16 per architecture)", seen, n)
	}
}
