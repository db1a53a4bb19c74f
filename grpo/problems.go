package grpo

import (
	"errors"
	"fmt"
)

// problems collects a section's findings, so that one error names every
// bad key (as trainer.Config's sections report them).
type problems []error

func (p *problems) add(format string, a ...any) { *p = append(*p, fmt.Errorf(format, a...)) }
func (p problems) err() error                   { return errors.Join(p...) }
