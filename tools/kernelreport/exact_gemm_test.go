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
