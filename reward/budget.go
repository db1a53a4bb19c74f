package reward

import (
	"errors"
	"fmt"
	"time"
)

// Budget bounds the work of one symbolic Score call. The step counter is the
// deterministic limit (the same input always takes the same number of steps,
// so rewards do not depend on machine load); the deadline is only a backstop
// against a cost model that is wrong somewhere.
type Budget struct {
	// Timeout is the wall-clock backstop per call.
	Timeout time.Duration
	// MaxSteps bounds lexing, parsing and evaluation work. Big-number
	// operations cost extra steps in proportion to their size.
	MaxSteps int64
	// MaxAnswerBytes: a longer extracted answer (or ground truth) is not
	// parsed; it can still match by normalized string equality, and
	// otherwise the verdict is StatusBudget (incorrect, with the sizes in
	// Result.Err), so a long answer is never a silent miss.
	MaxAnswerBytes int
	// MaxBits bounds the size (numerator + denominator bits) of an exact
	// number; a bigger result is demoted to floating point.
	MaxBits int
	// MaxDepth bounds the nesting of groups and operators.
	MaxDepth int
	// MaxItems bounds the elements of a list, set, tuple or matrix, and the
	// number of ± expansions.
	MaxItems int
}

// DefaultBudget is tuned so that the worst adversarial input takes about
// 20 ms on one core (BenchmarkScoreAdversarial); the steps decide, and the
// one-second deadline only matters if the cost model is wrong somewhere, so
// rewards do not depend on machine load.
func DefaultBudget() Budget {
	return Budget{
		Timeout:        time.Second,
		MaxSteps:       200_000,
		MaxAnswerBytes: 4096,
		MaxBits:        8192,
		MaxDepth:       64,
		MaxItems:       256,
	}
}

// errBudget is wrapped by every budget-exhaustion error.
var errBudget = errors.New("budget exhausted")

// meter tracks one call's consumption of its Budget.
type meter struct {
	b        Budget
	steps    int64
	deadline time.Time
	err      error // sticky: once exhausted, every later charge fails
	// overflows counts the exact values that passed MaxBits and fell
	// outside float64's range (demote): a comparison they leave
	// undecided is reported as over budget, not as unequal.
	overflows int
}

func newMeter(b Budget) *meter {
	return &meter{b: b, deadline: time.Now().Add(b.Timeout)}
}

// charge consumes n steps; it reports a (sticky) error once the budget is spent.
func (m *meter) charge(n int64) error {
	if m.err != nil {
		return m.err
	}
	before := m.steps
	m.steps += n
	if m.steps > m.b.MaxSteps {
		m.err = fmt.Errorf("%w: more than %d steps", errBudget, m.b.MaxSteps)
		return m.err
	}
	// Look at the clock about every 1024 steps.
	if before>>10 != m.steps>>10 && time.Now().After(m.deadline) {
		m.err = fmt.Errorf("%w: deadline of %v passed after %d steps", errBudget, m.b.Timeout, m.steps)
		return m.err
	}
	return nil
}

// depth reports an error when d exceeds the nesting limit.
func (m *meter) depth(d int) error {
	if d > m.b.MaxDepth {
		if m.err == nil {
			m.err = fmt.Errorf("%w: nesting deeper than %d", errBudget, m.b.MaxDepth)
		}
		return m.err
	}
	return nil
}
