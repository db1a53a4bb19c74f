// Package model is Qwen3 written once against the Backend interface
// (backend.go) and its optional capabilities (capabilities.go):
// config.json and its checks, the weight names and shapes, the forward
// (prefill and KV-cached decode) and the hand-written backward,
// safetensors reading and writing (single files, sharded indexes, Hugging
// Face folders), and ReferenceCPU, the plain-loop CPU backend every other
// backend is tested against (model/backendtest). The backends users run
// are elsewhere: backend/cpu (the fast CPU backend) and cuda.
package model
