package tokenizer

import (
	"testing"
)

// Benchmarks over the golden corpus (3,236 strings, 1.3 MB). `make bench`
// runs them beside the JS reference on the same corpus
// (scripts/bench_tokenizer.sh) and prints the ratio.

// shortMax excludes the 100 KB strings (single 100 KB pieces such as a run
// of spaces dominate the full corpus) for the "Short" benchmarks.
const shortMax = 20000

func corpusTexts(b *testing.B, short bool) ([]string, int) {
	var texts []string
	n := 0
	for _, c := range loadGolden(b) {
		if c.Kind == "encode" && (!short || len(c.Text) < shortMax) {
			texts = append(texts, c.Text)
			n += len(c.Text)
		}
	}
	return texts, n
}

func benchEncode(b *testing.B, cold, short bool) {
	tok := loadQwen3(b)
	texts, nBytes := corpusTexts(b, short)
	b.SetBytes(int64(nBytes))
	b.ResetTimer()
	tokens := 0
	for range b.N {
		if cold {
			tok.cacheMu.Lock()
			clear(tok.cache)
			tok.cacheMu.Unlock()
		}
		for _, s := range texts {
			tokens += len(tok.Encode32(s, nil))
		}
	}
	b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
}

// BenchmarkEncodeCorpus: warm piece cache (steady state of a training run).
func BenchmarkEncodeCorpus(b *testing.B) { benchEncode(b, false, false) }

// BenchmarkEncodeCorpusCold: the piece cache is emptied before each pass.
func BenchmarkEncodeCorpusCold(b *testing.B) { benchEncode(b, true, false) }

// BenchmarkEncodeCorpusShort: the strings under 20 KB (prompt-like text).
func BenchmarkEncodeCorpusShort(b *testing.B) { benchEncode(b, false, true) }

func BenchmarkDecodeCorpus(b *testing.B) {
	tok := loadQwen3(b)
	var ids [][]int
	n := 0
	for _, c := range loadGolden(b) {
		if c.Kind == "encode" {
			ids = append(ids, c.IDs)
			n += len(c.Text)
		}
	}
	b.SetBytes(int64(n))
	b.ResetTimer()
	for range b.N {
		for _, x := range ids {
			_ = tok.Decode(x, false)
		}
	}
}
