package grpo

import "math"

// PassAtK is the unbiased estimator 1 − C(n−c, k)/C(n, k) (Chen et al.
// 2021) for c correct of n samples.
func PassAtK(n, c, k int) float64 {
	if k > n || k < 1 {
		return math.NaN()
	}
	if n-c < k {
		return 1
	}
	// C(n−c, k)/C(n, k) = Π_{i=0}^{k−1} (n−c−i)/(n−i)
	p := 1.0
	for i := 0; i < k; i++ {
		p *= float64(n-c-i) / float64(n-i)
	}
	return 1 - p
}
