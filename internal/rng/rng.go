// Package rng provides counter-based random numbers: every draw is a pure
// function of a key (seed, step, prompt UID, rollout index…) and a counter,
// never of call order or batch position, so a resumed or re-batched run
// draws exactly the same numbers. The mixer is SplitMix64's finaliser
// (Steele, Lea & Flood 2014), applied to the key words in sequence.
package rng

import "hash/fnv"

// Mix is the SplitMix64 finaliser: a bijective avalanche of 64 bits.
func Mix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Key folds words into one 64-bit key.
func Key(words ...uint64) uint64 {
	k := uint64(0x6a09e667f3bcc909)
	for _, w := range words {
		k = Mix(k ^ w)
	}
	return k
}

// HashString maps a string (a prompt UID) to a key word.
func HashString(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// Uniform returns the counter-th uniform draw in [0, 1) of stream key.
func Uniform(key, counter uint64) float64 {
	return float64(Mix(key^Mix(counter))>>11) / (1 << 53)
}
