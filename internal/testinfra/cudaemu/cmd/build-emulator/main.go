// Command build-emulator builds the CPU emulator of libcuda, libcublas and
// libnvrtc (internal/testinfra/cudaemu) with the real kernels (cuda.Sources()) into a
// folder, so that the binary runs on a machine without a GPU:
//
//	go run ./internal/testinfra/cudaemu/cmd/build-emulator .cache/cuda-emu   # make emulator
//	GDROTRAIN_CUDA_LIB_DIR=.cache/cuda-emu GDROTRAIN_KERNEL_CACHE=.cache/cuda-emu/kernels bin/gdrotrain cuda-info
//
// Give the emulator a kernel cache of its own (GDROTRAIN_KERNEL_CACHE): its
// NVRTC reports version 13.0 and its "CUBINs" are source text, which must
// not land in the cache a GPU's NVRTC 13.0 would read. The emulator's
// switches (GDROTRAIN_EMU_FMA, GDROTRAIN_EMU_CXXFLAGS, GDROTRAIN_EMU_CACHE;
// see the package doc of internal/testinfra/cudaemu) apply to the build.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gdrotrain/gdrotrain/cuda"
	"github.com/gdrotrain/gdrotrain/internal/testinfra/cudaemu"
)

func main() {
	dir := ".cache/cuda-emu"
	switch len(os.Args) {
	case 1:
	case 2:
		dir = os.Args[1]
	default:
		fmt.Fprintln(os.Stderr, "usage: build-emulator [DIR]  (default .cache/cuda-emu)")
		os.Exit(2)
	}
	start := time.Now()
	if err := cudaemu.Build(dir, cuda.Sources()); err != nil {
		fmt.Fprintln(os.Stderr, "build-emulator:", err)
		os.Exit(1)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	fma, _ := cudaemu.FMA() // Build has checked it
	fmt.Printf("CUDA emulator (%d kernel files, FMA %v) built in %s in %.1fs; use it with\n"+
		"  GDROTRAIN_CUDA_LIB_DIR=%s GDROTRAIN_KERNEL_CACHE=%s\n",
		len(cuda.Sources()), fma, abs, time.Since(start).Seconds(), abs, filepath.Join(abs, "kernels"))
}
