// Package synth generates the synthetic arithmetic task of the CPU demo and
// the small-scale study: problems in groups of very different difficulty
// (operation × operand digits), written as {problem, answer, data_source}
// JSONL rows that the ordinary data loader reads, so the demo exercises the
// same code path as real datasets. The group is the row's data_source
// ("synth/<group>"), which validation reports per group — the worst group
// is the paper's worst-group accuracy.
package synth

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
)

// Group is one family of problems.
type Group struct {
	Name string
	// Gen draws operands and returns the problem text and answer.
	Gen func(r *rand.Rand) (problem string, answer int)
}

func digits(r *rand.Rand, n int) int {
	if n == 1 {
		return r.IntN(10)
	}
	lo := 1
	for i := 1; i < n; i++ {
		lo *= 10
	}
	return lo + r.IntN(9*lo)
}

func binary(op string, da, db int, f func(a, b int) int) func(r *rand.Rand) (string, int) {
	return func(r *rand.Rand) (string, int) {
		a, b := digits(r, da), digits(r, db)
		if op == "-" && b > a {
			a, b = b, a
		}
		return fmt.Sprintf("%d%s%d=", a, op, b), f(a, b)
	}
}

// Groups are ordered from easiest to hardest for a small transformer; each
// has at least 900 distinct problems, so train and held-out sets can be
// disjoint.
var Groups = []Group{
	{"mul-3x10", times10},
	{"add-3x1", binary("+", 3, 1, func(a, b int) int { return a + b })},
	{"sub-3x1", binary("-", 3, 1, func(a, b int) int { return a - b })},
	{"add-2x2", binary("+", 2, 2, func(a, b int) int { return a + b })},
	{"sub-2x2", binary("-", 2, 2, func(a, b int) int { return a - b })},
	{"mul-2x1", binary("*", 2, 1, func(a, b int) int { return a * b })},
}

// times10 is n·10 for a 3-digit n: the answer appends a zero.
func times10(r *rand.Rand) (string, int) {
	n := digits(r, 3)
	return fmt.Sprintf("%d*10=", n), n * 10
}

// Problem is one generated row.
type Problem struct {
	Problem    string `json:"problem"`
	Answer     string `json:"answer"`
	DataSource string `json:"data_source"`
	ID         string `json:"id"`
}

// Generate draws perGroup distinct problems from every group with seed;
// problems listed in exclude (by text) are skipped, so a held-out set never
// overlaps the training set.
func Generate(perGroup int, seed uint64, exclude map[string]bool) []Problem {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	var out []Problem
	for _, g := range Groups {
		seen := map[string]bool{}
		for tries := 0; len(seen) < perGroup && tries < perGroup*50; tries++ {
			p, a := g.Gen(r)
			if seen[p] || exclude[p] {
				continue
			}
			seen[p] = true
			out = append(out, Problem{Problem: p, Answer: strconv.Itoa(a), DataSource: "synth/" + g.Name,
				ID: fmt.Sprintf("synth-%d-%s-%d", seed, g.Name, len(seen)-1)})
		}
	}
	return out
}

// PerGroup keeps the problems ranked lo, …, hi−1 within their group, in
// order: PerGroup(ps, 0, a) and PerGroup(ps, a, b) are disjoint.
func PerGroup(ps []Problem, lo, hi int) []Problem {
	count := map[string]int{}
	var out []Problem
	for _, p := range ps {
		if k := count[p.DataSource]; k >= lo && k < hi {
			out = append(out, p)
		}
		count[p.DataSource]++
	}
	return out
}

// Texts returns the set of problem texts.
func Texts(ps []Problem) map[string]bool {
	m := make(map[string]bool, len(ps))
	for _, p := range ps {
		m[p.Problem] = true
	}
	return m
}

// Response is the target completion the supervised warm-up teaches: the
// answer line the dapo scorer reads.
func Response(p Problem) string { return "Answer: " + p.Answer }

// WriteJSONL writes problems as JSONL rows.
func WriteJSONL(path string, ps []Problem) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, p := range ps {
		if err := enc.Encode(p); err != nil {
			f.Close()
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}
