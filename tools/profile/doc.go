// Package profile is the CUDA backend's profiling and benchmark tooling
// (`gdrotrain bench --device cuda [--profile]`, `make profile`):
//
//   - the step profile (step.go, decode.go): one optimizer step, or one
//     decode step of generation, of a model shape run on a cuda.Backend,
//     with the counts the backend keeps (cuda.Profile: launches, host
//     synchronisations, allocations, arithmetic and traffic by engine)
//     taken around it, extrapolated from one and two decoder layers to the
//     shape's depth, and a roofline estimate of its time (cuda.Roofline);
//   - the GPU benchmark (bench.go): measured tokens/s, step time and MFU
//     beside PyTorch + transformers on the same GPU.
//
// The counting itself is the backend's (cuda/profile.go); this package only
// drives a model through it and reports.
package profile
