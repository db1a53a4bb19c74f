package model

import (
	"math"
	"slices"
	"testing"
)

// TestRandomParamsParallel: the values do not depend on the number of
// workers (each chunk of each tensor has its own generator), differ
// between tensors and seeds, and are drawn from the wanted distributions:
// normal(0, std) for matrices, N(1, jitter²) for norms.
func TestRandomParamsParallel(t *testing.T) {
	o := DefaultTiny()
	o.Vocab = 9000 // an embedding of 576,000 values, for the statistics
	cfg, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
	b := NewReferenceCPU()
	all := func(p *Params) [][]float32 {
		var out [][]float32
		for _, np := range p.Named(cfg) {
			v := make([]float32, numel(np.Shape))
			b.Download(*np.Ptr, v)
			out = append(out, v)
		}
		return out
	}
	const std, jitter = 0.02, 0.1
	one := all(RandomParamsParallel(b, cfg, 7, std, jitter, 1))
	for _, workers := range []int{2, 3, 8} {
		got := all(RandomParamsParallel(b, cfg, 7, std, jitter, workers))
		for i := range one {
			if !slices.Equal(one[i], got[i]) {
				t.Fatalf("tensor %d differs with %d workers", i, workers)
			}
		}
	}
	other := all(RandomParamsParallel(b, cfg, 8, std, jitter, 2))
	if slices.Equal(one[0], other[0]) {
		t.Error("seeds 7 and 8 drew the same embedding")
	}
	named := NewParams(b, cfg).Named(cfg)
	for i, v := range one {
		want, spread := 0.0, std
		if len(named[i].Shape) == 1 {
			want, spread = 1, jitter
		}
		mean, sq := 0.0, 0.0
		for _, x := range v {
			mean += float64(x)
		}
		mean /= float64(len(v))
		for _, x := range v {
			sq += (float64(x) - mean) * (float64(x) - mean)
		}
		sd := math.Sqrt(sq / float64(len(v)))
		// Sampling error of n normal draws: 5 standard errors of the mean
		// and of the standard deviation (sd/√(2n)).
		n := float64(len(v))
		if math.Abs(mean-want) > 5*spread/math.Sqrt(n) || math.Abs(sd-spread) > 5*spread/math.Sqrt(2*n) {
			t.Errorf("%s: mean %.5f sd %.5f over %d values, want %g and %g", named[i].Name, mean, sd, len(v), want, spread)
		}
		if i > 0 && len(one[i]) == len(one[i-1]) && slices.Equal(v, one[i-1]) {
			t.Errorf("%s repeats the tensor before it", named[i].Name)
		}
	}
}

// TestRandomParamsChunks: a tensor of several chunks draws each from its own
// generator (no chunk repeats another) and the same whatever the workers.
func TestRandomParamsChunks(t *testing.T) {
	o := DefaultTiny()
	o.Vocab = 2*randomChunk/o.Hidden + 100 // the embedding spans three chunks, the last of 6400 values
	cfg, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
	b := NewReferenceCPU()
	emb := func(workers int) []float32 {
		p := RandomParamsParallel(b, cfg, 1, 0.02, 0, workers)
		v := make([]float32, o.Vocab*o.Hidden)
		b.Download(p.Embed, v)
		return v
	}
	a, c := emb(1), emb(3)
	if !slices.Equal(a, c) {
		t.Fatal("the embedding differs between 1 and 3 workers")
	}
	if slices.Equal(a[:1000], a[randomChunk:randomChunk+1000]) || slices.Equal(a[:1000], a[2*randomChunk:2*randomChunk+1000]) {
		t.Error("chunks repeat the first one's values")
	}
}
