// Command kernel-report compiles every embedded kernel with NVRTC (no GPU
// needed) and prints, per kernel and architecture, registers, stack frame,
// local, shared and constant memory, local loads/stores and tensor-core
// instructions, as read back by cuobjdump. `make kernel-report` runs it with
// the tools of scripts/install_cuda_tools.sh.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/gdrotrain/gdrotrain/tools/kernelreport"
)

func main() {
	archs := flag.String("arch", "sm_80,sm_90", "comma-separated architectures")
	flag.Parse()
	if err := run(*archs); err != nil {
		fmt.Fprintln(os.Stderr, "kernel-report:", err)
		os.Exit(1)
	}
}

func run(archList string) error {
	var archs []kernelreport.Arch
	for _, s := range strings.Split(archList, ",") {
		n, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(s), "sm_"))
		if err != nil || n < 50 {
			return fmt.Errorf("-arch: %q is not sm_XY", s)
		}
		archs = append(archs, kernelreport.Arch{n / 10, n % 10})
	}
	tools, err := kernelreport.FindTools()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "kernel-report-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	version, ks, err := kernelreport.Collect(tools, archs, work, func(string, ...any) {})
	if err != nil {
		return err
	}
	nvrtc := tools.NVRTCDir
	if nvrtc == "" {
		nvrtc = "the cuda package's search path"
	}
	fmt.Printf("NVRTC %s (%s), %s\n", version, nvrtc, tools.Cuobjdump)
	fmt.Println("B: bytes. stack, local: per thread; STL/LDL: bytes of local stores/loads in the SASS (spills, local arrays);")
	fmt.Println("shared: static, per block (sm_90 adds the 1 KiB per block the system reserves); const: constant banks")
	fmt.Println("(parameters included); SASS: instructions; tensor-core: HMMA/IMMA/HGMMA... instructions.")
	fmt.Println()
	if err := kernelreport.WriteTable(os.Stdout, ks); err != nil {
		return err
	}
	var bad []string
	for _, k := range ks {
		if k.UsesLocalMemory() {
			bad = append(bad, k.Name+" ("+k.Arch.String()+")")
		}
	}
	if len(bad) > 0 {
		fmt.Printf("\nlocal memory used by: %s\n", strings.Join(bad, ", "))
	}
	return nil
}
