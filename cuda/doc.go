// Package cuda is the CUDA backend: the driver API, NVRTC, cuBLAS(Lt) and
// NCCL loaded at run time through a small cgo shim over dlopen with our own
// prototypes (capi.go, shim.h; the library search in libs.go), the kernels
// embedded as CUDA C and compiled by NVRTC for the present GPU and cached
// (kernels.go), the stream-ordered allocator, CUDA graphs for decode steps,
// NCCL collectives for data-parallel runs, and the counts of what the
// backend asks of the GPU (profile.go) that tools/profile reports. Where
// there is no GPU its tests run on the CPU emulator (internal/testinfra/cudaemu).
package cuda
