// Package kernelreport compiles every embedded kernel to CUBIN with the NVRTC
// the cuda package loads, reads each CUBIN back with cuobjdump, and reports
// per kernel and architecture what the compiler made of it: registers, stack
// frame, local, shared and constant memory (cuobjdump -res-usage), local
// loads and stores and tensor-core instructions (counted in cuobjdump -sass).
// No GPU is needed. `make kernel-report` prints the table;
// TestKernelsNoLocalMemory fails on a kernel that touches local memory.
//
// This file parses cuobjdump's text output (CUDA 12.x format); the samples
// it is tested on are under testdata/.
package kernelreport

import (
	"bufio"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Resources is one kernel's line of `cuobjdump -res-usage`. Sizes are bytes.
type Resources struct {
	Registers int // REG: registers per thread
	Stack     int // STACK: stack frame per thread (local arrays, spills, calls)
	Local     int // LOCAL: other local memory per thread
	Shared    int // SHARED: static shared memory per block
	Constant  int // CONSTANT[n]: summed over banks (bank 0 holds the parameters)
}

// ParseResUsage reads `cuobjdump -res-usage` of one CUBIN into Resources by
// function name.
func ParseResUsage(out string) (map[string]Resources, error) {
	res := map[string]Resources{}
	fn := ""
	sc := bufio.NewScanner(strings.NewReader(out))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "Function "):
			fn = strings.TrimSuffix(strings.TrimSpace(strings.TrimPrefix(line, "Function ")), ":")
		case fn != "" && strings.HasPrefix(line, "REG:"):
			var r Resources
			for _, f := range strings.Fields(line) {
				k, v, ok := strings.Cut(f, ":")
				if !ok {
					return nil, fmt.Errorf("res-usage line %d: %q is not KEY:VALUE", n, f)
				}
				x, err := strconv.Atoi(v)
				if err != nil {
					return nil, fmt.Errorf("res-usage line %d: %s: %v", n, k, err)
				}
				switch {
				case k == "REG":
					r.Registers = x
				case k == "STACK":
					r.Stack = x
				case k == "LOCAL":
					r.Local = x
				case k == "SHARED":
					r.Shared = x
				case strings.HasPrefix(k, "CONSTANT["):
					r.Constant += x
				}
			}
			res[fn] = r
			fn = ""
		}
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("no function in cuobjdump -res-usage output:\n%s", out)
	}
	return res, nil
}

// Code is what one kernel's SASS (`cuobjdump -sass`) holds.
type Code struct {
	Instructions int            // SASS instructions, NOPs included
	LocalStores  int            // STL instructions (spills and local arrays)
	LocalLoads   int            // LDL instructions
	StoreBytes   int            // bytes those STL store, per thread, static count (as ptxas -v counts spill bytes)
	LoadBytes    int            // bytes those LDL load
	TensorCore   int            // matrix instructions: HMMA, IMMA, DMMA, BMMA, HGMMA (wgmma)...
	TensorOps    map[string]int // TensorCore by opcode
	GlobalLoads  map[int]int    // LDG instructions by width in bytes (16: 128-bit vector loads)
	AsyncCopies  map[int]int    // LDGSTS (cp.async: global to shared without registers) by width in bytes
}

// A SASS line: /*0070*/  @!P0 HMMA.16816.F32.BF16 R8, R8, R12, RZ ;  /* 0x... */
var sassLine = regexp.MustCompile(`^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P[0-9T]+\s+)?([A-Z][A-Z0-9_]*)((?:\.[A-Z0-9_]+)*)`)

// ParseSASS reads `cuobjdump -sass` of one CUBIN into Code by function name.
func ParseSASS(out string) (map[string]Code, error) {
	res := map[string]Code{}
	fn := ""
	var c Code
	flush := func() {
		if fn != "" {
			res[fn] = c
		}
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "Function : "); ok {
			flush()
			fn, c = strings.TrimSpace(name), Code{TensorOps: map[string]int{}, GlobalLoads: map[int]int{}, AsyncCopies: map[int]int{}}
			continue
		}
		m := sassLine.FindStringSubmatch(line)
		if m == nil || fn == "" {
			continue
		}
		op, mods := m[1], strings.Split(strings.TrimPrefix(m[2], "."), ".")
		c.Instructions++
		switch {
		case op == "STL":
			c.LocalStores++
			c.StoreBytes += accessBytes(mods)
		case op == "LDL":
			c.LocalLoads++
			c.LoadBytes += accessBytes(mods)
		case op == "LDG":
			c.GlobalLoads[accessBytes(mods)]++
		case op == "LDGSTS":
			c.AsyncCopies[accessBytes(mods)]++
		case isTensorCore(op):
			c.TensorCore++
			c.TensorOps[op]++
		}
	}
	flush()
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("no function in cuobjdump -sass output:\n%.2000s", out)
	}
	return res, nil
}

// accessBytes is the width of a local load or store from its modifiers
// (STL.128, LDL.64, LDL.U8...); 32 bits without one.
func accessBytes(mods []string) int {
	for _, m := range mods {
		switch m {
		case "U8", "S8":
			return 1
		case "U16", "S16":
			return 2
		case "64":
			return 8
		case "128":
			return 16
		}
	}
	return 4
}

// isTensorCore reports whether a SASS opcode runs on the tensor cores: the
// matrix multiply-accumulates HMMA, IMMA, BMMA, DMMA (sm_70+), the warpgroup
// HGMMA, IGMMA, QGMMA, BGMMA (sm_90a) and the sm_100 UTC*MMA forms all end in
// MMA. HFMA2.MMA (a plain FMA issued on the MMA pipe) has opcode HFMA2 and
// is not one.
func isTensorCore(op string) bool { return strings.HasSuffix(op, "MMA") }
