package kernelreport

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// The samples under testdata/ are cuobjdump 12.5 output, captured as
// testdata/README.md says.

func readSample(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseResUsage(t *testing.T) {
	for _, tc := range []struct {
		file string
		want map[string]Resources
	}{
		{"sample_sm80.res-usage.txt", map[string]Resources{
			"local_array": {Registers: 30, Stack: 64, Constant: 372},
			"mma_tile":    {Registers: 16, Constant: 376},
		}},
		{"sample_sm90.res-usage.txt", map[string]Resources{
			"local_array": {Registers: 30, Stack: 64, Constant: 548},
			"mma_tile":    {Registers: 18, Constant: 552},
		}},
		// The project's own tiled attention, as compiled before issue 14.
		{"attention_tiled_sm90.res-usage.txt", map[string]Resources{
			"attn_bwd_dkv_tiled": {Registers: 251, Shared: 34048, Constant: 656},
			"attn_bwd_dq_tiled":  {Registers: 166, Shared: 33792, Constant: 632},
			"attn_fwd_tiled_kvh": {Registers: 170, Stack: 256, Shared: 33792, Constant: 616},
			"attn_fwd_tiled":     {Registers: 170, Stack: 256, Shared: 33792, Constant: 616},
		}},
	} {
		got, err := ParseResUsage(readSample(t, tc.file))
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.file, got, tc.want)
		}
	}
}

func TestParseResUsageBanksAndErrors(t *testing.T) {
	got, err := ParseResUsage(" Function f:\n  REG:8 STACK:16 SHARED:4 LOCAL:32 CONSTANT[0]:100 CONSTANT[3]:20 TEXTURE:0\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Resources{Registers: 8, Stack: 16, Shared: 4, Local: 32, Constant: 120}); got["f"] != want {
		t.Errorf("got %+v, want %+v", got["f"], want)
	}
	for _, bad := range []string{"", "Resource usage:\n Common:\n  GLOBAL:0\n", " Function f:\n  REG:x\n", " Function f:\n  REG:1 STACK\n"} {
		if _, err := ParseResUsage(bad); err == nil {
			t.Errorf("ParseResUsage(%q): no error", bad)
		}
	}
}

func TestParseSASS(t *testing.T) {
	for _, file := range []string{"sample_sm80.sass.txt", "sample_sm90.sass.txt"} {
		got, err := ParseSASS(readSample(t, file))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(got) != 2 {
			t.Fatalf("%s: functions %v, want local_array and mma_tile", file, got)
		}
		la, mma := got["local_array"], got["mma_tile"]
		// local_array: 4 STL.128 + 1 STL.64, 2 LDL.64; no MMA (HFMA2.MMA is an FMA).
		if la.LocalStores != 5 || la.StoreBytes != 72 || la.LocalLoads != 2 || la.LoadBytes != 16 || la.TensorCore != 0 {
			t.Errorf("%s: local_array %+v", file, la)
		}
		if mma.TensorCore != 1 || mma.TensorOps["HMMA"] != 1 || mma.LocalStores+mma.LocalLoads != 0 {
			t.Errorf("%s: mma_tile %+v", file, mma)
		}
		// Every /*addr*/ line of the sample is one instruction.
		if n := la.Instructions + mma.Instructions; n != 88 {
			t.Errorf("%s: %d instructions, want 88", file, n)
		}
	}
}

func TestParseSASSPredicatesAndWidths(t *testing.T) {
	const sass = `
	code for sm_90
		Function : k
	.headerflags	@"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;        /* 0x00000a00ff017b82 */
                                                                 /* 0x000e240000000800 */
        /*0010*/               @P0 STL.U8 [R1], R2 ;             /* 0x0000000201007387 */
        /*0020*/              @!PT LDL.S16 R3, [R1+0x2] ;        /* 0x0000020001037983 */
        /*0030*/              @UP0 LDL.LU.128 R4, [R1+0x10] ;    /* 0x0000100001047983 */
        /*0040*/                   STL [R1+0x4], R2 ;            /* 0x0000040201007387 */
        /*0050*/             @!P1 HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], RZ ; /* 0x... */
        /*0060*/                   IMMA.16832.S8.S8 R8, R12, R16, R8 ; /* 0x... */
        /*0070*/                   HFMA2.MMA R5, -RZ, RZ, 0, 0 ; /* 0x... */
        /*0080*/                   LDG.E.128.CONSTANT R8, desc[UR4][R2.64] ; /* 0x... */
        /*0090*/               @P2 LDG.E.U16 R9, desc[UR4][R2.64] ; /* 0x... */
        /*00a0*/                   LDG.E R10, desc[UR4][R2.64] ; /* 0x... */
        /*00b0*/               @P3 LDGSTS.E.BYPASS.LTC128B.128 [R5], desc[UR4][R2.64] ; /* 0x... */
        /*00c0*/                   EXIT ;                        /* 0x... */
		Function : empty
        /*0000*/                   EXIT ;                        /* 0x... */
`
	got, err := ParseSASS(sass)
	if err != nil {
		t.Fatal(err)
	}
	want := Code{Instructions: 13, LocalStores: 2, LocalLoads: 2, StoreBytes: 1 + 4, LoadBytes: 2 + 16,
		TensorCore: 2, TensorOps: map[string]int{"HGMMA": 1, "IMMA": 1}, GlobalLoads: map[int]int{16: 1, 2: 1, 4: 1},
		AsyncCopies: map[int]int{16: 1}}
	if !reflect.DeepEqual(got["k"], want) {
		t.Errorf("k:\n got %+v\nwant %+v", got["k"], want)
	}
	if e := got["empty"]; e.Instructions != 1 {
		t.Errorf("empty: %+v", e)
	}
	if _, err := ParseSASS("nothing here\n"); err == nil {
		t.Error("ParseSASS of no function: no error")
	}
}
