package reward

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync/atomic"
)

// Mode names a scorer.
type Mode string

// The scorer modes. ModeDAPO, ModeBoxed and ModeGPQA reproduce the reference
// scorers of docs/algorithm.md §3.2–3.4; ModeSymbolic is the parsing verifier.
const (
	ModeDAPO     Mode = "dapo"
	ModeBoxed    Mode = "boxed"
	ModeGPQA     Mode = "gpqa"
	ModeSymbolic Mode = "symbolic"
)

// Modes lists every mode in the order the CLI documents them.
var Modes = []Mode{ModeSymbolic, ModeDAPO, ModeBoxed, ModeGPQA}

// Status says how a verdict was reached.
type Status uint8

const (
	// StatusOK: an answer was extracted and compared.
	StatusOK Status = iota
	// StatusNoAnswer: no final answer could be extracted (or it was empty).
	StatusNoAnswer
	// StatusBudget: the per-call budget ran out; the response scores as incorrect.
	StatusBudget
	// StatusPanic: a panic was recovered inside the scorer; scores as incorrect.
	StatusPanic
)

func (s Status) String() string {
	switch s {
	case StatusOK:
		return "ok"
	case StatusNoAnswer:
		return "no-answer"
	case StatusBudget:
		return "budget"
	case StatusPanic:
		return "panic"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// Result is the verdict on one response.
type Result struct {
	Score   float64 // the reward: ±1 (dapo, symbolic) or 1/0 (boxed, gpqa)
	Correct bool    // the reference's acc; pass@k and the classifier use this
	Pred    string  // the extracted (for dapo: normalized) prediction, for majority vote
	Status  Status
	Err     error // set for StatusBudget and StatusPanic: what happened
}

// Scorer scores responses against ground truths. Implementations are safe
// for concurrent use and never panic: a recovered panic is a Result with
// StatusPanic.
type Scorer interface {
	Mode() Mode
	Score(response, truth string) Result
}

// ErrUnsupportedSource is returned by ForDataSource for data sources whose
// reference scorer is not one of ours (gsm8k, prime_math, code, search).
var ErrUnsupportedSource = errors.New("reward: no scorer for data source")

// New returns the scorer for a mode with the default budget.
func New(mode Mode) (Scorer, error) {
	switch mode {
	case ModeDAPO:
		return DAPO{}, nil
	case ModeBoxed:
		return Boxed{}, nil
	case ModeGPQA:
		return GPQA{}, nil
	case ModeSymbolic:
		return NewSymbolic(DefaultBudget()), nil
	}
	names := make([]string, len(Modes))
	for i, m := range Modes {
		names[i] = string(m)
	}
	return nil, fmt.Errorf("reward: unknown mode %q (want one of %s)", mode, strings.Join(names, ", "))
}

// ReferenceMode returns the reference scorer's mode for a data_source, in
// verl's default_compute_score order (docs/algorithm.md §3.1, first match wins).
func ReferenceMode(dataSource string) (Mode, error) {
	switch dataSource {
	case "openai/gsm8k":
		return "", fmt.Errorf("%w %q: the reference uses its GSM8K scorer, which gdrotrain does not implement", ErrUnsupportedSource, dataSource)
	case "Idavidrein/gpqa":
		return ModeGPQA, nil
	case "lighteval/MATH", "DigitalLearningGmbH/MATH-lighteval", "HuggingFaceH4/MATH-500":
		return ModeBoxed, nil
	case "math_dapo", "open-r1/DAPO-Math-17k-Processed",
		"HuggingFaceH4/aime_2024", "MathArena/aime_2025", "math-ai/amc23",
		"math-ai/minervamath", "math-ai/olympiadbench", "math-ai/gpqa":
		return ModeDAPO, nil
	}
	if strings.HasPrefix(dataSource, "aime") {
		return ModeDAPO, nil
	}
	lower := strings.ToLower(dataSource)
	for _, k := range []string{"dapo", "aime", "amc", "minerva", "olympiad", "gpqa"} {
		if strings.Contains(lower, k) {
			return ModeDAPO, nil
		}
	}
	return "", fmt.Errorf("%w %q", ErrUnsupportedSource, dataSource)
}

// ForDataSource returns the reference scorer for a data_source (docs/algorithm.md §3.1).
func ForDataSource(dataSource string) (Scorer, error) {
	m, err := ReferenceMode(dataSource)
	if err != nil {
		return nil, err
	}
	return New(m)
}

// guard turns a panic in a scorer into a StatusPanic result scored as
// incorrect. Use as: defer guard(&res, incorrectScore).
func guard(res *Result, incorrect float64) {
	if r := recover(); r != nil {
		*res = Result{
			Score:  incorrect,
			Status: StatusPanic,
			Err:    fmt.Errorf("reward: recovered panic: %v\n%s", r, debug.Stack()),
		}
	}
}

// Metrics counts verdicts; it is safe for concurrent use. The trainer logs a
// Snapshot per step so budget exhaustion and recovered panics are visible.
type Metrics struct {
	calls, correct, noAnswer, budget, panics atomic.Int64
}

// MetricsSnapshot is a point-in-time copy of Metrics.
type MetricsSnapshot struct {
	Calls, Correct, NoAnswer, Budget, Panics int64
}

// Observe records one result.
func (m *Metrics) Observe(r Result) {
	m.calls.Add(1)
	if r.Correct {
		m.correct.Add(1)
	}
	switch r.Status {
	case StatusNoAnswer:
		m.noAnswer.Add(1)
	case StatusBudget:
		m.budget.Add(1)
	case StatusPanic:
		m.panics.Add(1)
	}
}

// Snapshot returns the counts so far.
func (m *Metrics) Snapshot() MetricsSnapshot {
	return MetricsSnapshot{
		Calls:    m.calls.Load(),
		Correct:  m.correct.Load(),
		NoAnswer: m.noAnswer.Load(),
		Budget:   m.budget.Load(),
		Panics:   m.panics.Load(),
	}
}

// Restore sets the counts (resuming a run from a checkpoint).
func (m *Metrics) Restore(s MetricsSnapshot) {
	m.calls.Store(s.Calls)
	m.correct.Store(s.Correct)
	m.noAnswer.Store(s.NoAnswer)
	m.budget.Store(s.Budget)
	m.panics.Store(s.Panics)
}

// Counted wraps a scorer so that every result is recorded in M.
type Counted struct {
	Scorer
	M *Metrics
}

// Score scores and records.
func (c Counted) Score(response, truth string) Result {
	r := c.Scorer.Score(response, truth)
	c.M.Observe(r)
	return r
}
