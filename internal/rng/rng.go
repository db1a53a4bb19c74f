// Package rng provides counter-based random numbers: every draw is a pure
// function of a key (seed, step, prompt UID, rollout index…) and a counter,
// never of call order or batch position, so a resumed or re-batched run
// draws exactly the same numbers (docs/architecture.md decision 3). The mixer is
// SplitMix64's finaliser (Steele, Lea & Flood 2014); strings are keyed by
// 64-bit FNV-1a.
package rng

import "math"

// Mix is the SplitMix64 finaliser: a bijection on 64 bits with full avalanche.
func Mix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Key folds a seed and key words into one 64-bit key.
func Key(seed uint64, words ...uint64) uint64 {
	h := Mix(seed ^ 0x6a09e667f3bcc908)
	for _, w := range words {
		h = Mix(h ^ w)
	}
	return h
}

// HashString is 64-bit FNV-1a, used to key draws by prompt UID.
func HashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// toUnit maps 64 random bits to [0, 1) with 53 bits of precision.
func toUnit(v uint64) float64 { return float64(v>>11) / (1 << 53) }

// Uniform returns the counter-th uniform draw in [0, 1) of stream key.
func Uniform(key, counter uint64) float64 { return toUnit(Mix(key ^ Mix(counter))) }

// UniformAt is a single keyed uniform draw on [0, 1).
func UniformAt(seed uint64, words ...uint64) float64 { return toUnit(Mix(Key(seed, words...))) }

// Stream is a counter-based stream: draw k (from 1) is Mix(key ^ Mix(k)).
type Stream struct {
	key, ctr uint64
}

// NewStream starts the stream keyed by seed and words.
func NewStream(seed uint64, words ...uint64) *Stream { return &Stream{key: Key(seed, words...)} }

// Uint64 is the next 64 random bits.
func (s *Stream) Uint64() uint64 {
	s.ctr++
	return Mix(s.key ^ Mix(s.ctr))
}

// Float64 is uniform on [0, 1).
func (s *Stream) Float64() float64 { return toUnit(s.Uint64()) }

// Normal is a standard normal draw (Box–Muller, one value per two uniforms).
func (s *Stream) Normal() float64 {
	u1, u2 := s.Float64(), s.Float64()
	return math.Sqrt(-2*math.Log(1-u1)) * math.Cos(2*math.Pi*u2)
}

// IntN is uniform on [0, n) (n > 0), by rejection to avoid modulo bias.
func (s *Stream) IntN(n int) int {
	bound := uint64(n)
	limit := math.MaxUint64 - math.MaxUint64%bound
	for {
		if v := s.Uint64(); v < limit {
			return int(v % bound)
		}
	}
}
