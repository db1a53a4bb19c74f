package kernelreport

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/gdrotrain/gdrotrain/cuda"
)

// knownLocalMemory: known offenders, remove when issue 14 lands. Kernels that
// use local memory today, each with the most stack + local bytes per thread it
// may use on any architecture (its size now), so it cannot get worse. Every
// other kernel must use none. attn_fwd_tiled and attn_fwd_tiled_kvh keep
// per-thread float arrays (qv, ov, s in kernels/attention_tiled.cu) on the
// stack, 256 B per thread; the tensor-core attention of issue 14 replaces
// them.
var knownLocalMemory = map[string]int{
	"attn_fwd_tiled":     256,
	"attn_fwd_tiled_kvh": 256,
}

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

// collectOrSkip compiles and reads back every kernel for sm_80 and sm_90.
func collectOrSkip(t *testing.T) (string, []Kernel) {
	t.Helper()
	tools := toolsOrSkip(t)
	version, ks, err := Collect(tools, []Arch{{8, 0}, {9, 0}}, t.TempDir(), t.Logf)
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

// TestKernelsNoLocalMemory fails if a kernel has a stack frame, local memory
// or local loads/stores (spills) on sm_80 or sm_90, except the known
// offenders above within their recorded size. `make kernel-report` prints
// the whole table.
func TestKernelsNoLocalMemory(t *testing.T) {
	_, ks := collectOrSkip(t)
	if len(ks) == 0 {
		t.Fatal("no kernel reported")
	}
	for _, k := range ks {
		if !k.UsesLocalMemory() {
			continue
		}
		detail := k.Arch.String() + " " + k.Name + " (kernels/" + k.File + "): " + describe(k)
		limit, known := knownLocalMemory[k.Name]
		switch {
		case !known:
			t.Errorf("%s: uses local memory and is not in knownLocalMemory (registers spilled, or an array indexed at run time); make kernel-report shows all kernels", detail)
		case k.Stack+k.Local > limit:
			t.Errorf("%s: more than the %d B recorded in knownLocalMemory", detail, limit)
		default:
			t.Logf("known offender (issue 14): %s", detail)
		}
	}
	for name := range knownLocalMemory {
		used := false
		for _, k := range ks {
			used = used || (k.Name == name && k.UsesLocalMemory())
		}
		if !used {
			t.Logf("%s no longer uses local memory (or is gone): remove it from knownLocalMemory", name)
		}
	}
}

func describe(k Kernel) string {
	return fmt.Sprintf("stack %d B, local %d B, %d STL (%d B), %d LDL (%d B), %d registers",
		k.Stack, k.Local, k.LocalStores, k.StoreBytes, k.LocalLoads, k.LoadBytes, k.Registers)
}
