package gdro

// rng.go: a counter-based generator for the simulator. Every draw is a pure
// function of (seed, key words, counter) through the splitmix64 finalizer, so
// a draw keyed by (step, prompt UID, rollout index) does not depend on batch
// position or on how many draws came before it (DESIGN.md decision 3). The
// controllers themselves draw nothing: they are deterministic.

import "math"

// mix64 is the splitmix64 finalizer (Steele, Lea, Flood 2014), a bijection on
// uint64 with full avalanche.
func mix64(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// hashKey folds a seed and key words into one 64-bit key.
func hashKey(seed uint64, words ...uint64) uint64 {
	h := mix64(seed ^ 0x6a09e667f3bcc908)
	for _, w := range words {
		h = mix64(h ^ w)
	}
	return h
}

// hashString is 64-bit FNV-1a, used to key draws by prompt UID.
func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// stream is a counter-based stream: draw k is mix64(key ^ mix64(k)).
type stream struct {
	key uint64
	ctr uint64
}

func newStream(seed uint64, words ...uint64) *stream {
	return &stream{key: hashKey(seed, words...)}
}

func (s *stream) uint64() uint64 {
	s.ctr++
	return mix64(s.key ^ mix64(s.ctr))
}

// float64 is uniform on [0, 1) with 53 random bits.
func (s *stream) float64() float64 { return float64(s.uint64()>>11) / (1 << 53) }

// normal is a standard normal draw (Box–Muller, one value per two uniforms).
func (s *stream) normal() float64 {
	u1 := s.float64()
	u2 := s.float64()
	return math.Sqrt(-2*math.Log(1-u1)) * math.Cos(2*math.Pi*u2)
}

// intn is uniform on [0, n) (n > 0), by rejection to avoid modulo bias.
func (s *stream) intn(n int) int {
	bound := uint64(n)
	limit := math.MaxUint64 - math.MaxUint64%bound
	for {
		v := s.uint64()
		if v < limit {
			return int(v % bound)
		}
	}
}

// uniformAt is a single keyed uniform draw on [0, 1).
func uniformAt(seed uint64, words ...uint64) float64 {
	return float64(mix64(hashKey(seed, words...))>>11) / (1 << 53)
}
