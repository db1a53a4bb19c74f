// Package optim updates the policy's parameters: AdamW, gradient clipping,
// and how the gradients and the optimizer state are spread over the
// data-parallel ranks. Each way of spreading them — one process,
// replicated data parallel, ZeRO-1 (the moments, and the fp32 masters
// under bf16 products, sharded), ZeRO-2 (the gradients too) — is a
// Strategy, chosen once at setup (New); the trainer's update calls the
// same methods whichever it is. The package also owns the optimizer's
// checkpoint files (the moments in one file, or one file per rank) and,
// with sharded masters, the fp32 values of the policy's matrices.
//
// It needs no cgo: the collectives are interfaces (ShardComm, AllReducer)
// that the CUDA backend's NCCL communicator and the control plane
// (HostComm) implement, and the backend's optional capabilities
// (model.HalfPrecision, model.MultiTensorOptimizer) are read by type assertion.
package optim
