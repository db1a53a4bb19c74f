package data

import (
	"fmt"
	"strings"
)

// The prompt literals of docs/algorithm.md §2.2 and §2.5, verbatim: the model sees them.
const (
	// DAPOPrefix and DAPOSuffix wrap a training problem; together they are
	// the original DAPO user message that the dataset's prompt column holds.
	DAPOPrefix = "Solve the following math problem step by step. The last line of your response should be of the form Answer: $Answer (without quotes) where $Answer is the answer to the problem.\n\n"
	DAPOSuffix = "\n\nRemember to put your answer on its own line after \"Answer:\"."

	// BoxedInstruction is appended (after one space) to training prompts and
	// to math benchmark problems by the reference preprocessors.
	BoxedInstruction = "Let's think step by step and output the final answer within \\boxed{}."

	// GPQASuffix ends a GPQA prompt.
	GPQASuffix = "Please reason step by step, and put your final answer within \\boxed{}.\nPlease only provide the letter of the answer in the box."
)

// Template names how a simple {problem, answer} row becomes a user message.
type Template string

const (
	// TemplateAuto picks per row: GPQA when the row has choices, DAPO when its
	// source names DAPO, Math otherwise. verl rows are used as they are.
	TemplateAuto Template = "auto"
	// TemplateNone uses the problem text unchanged.
	TemplateNone Template = "none"
	// TemplateDAPO is the training prompt (docs/algorithm.md §2.1–2.2):
	// strip(strip(DAPOPrefix + problem + DAPOSuffix) + " " + BoxedInstruction).
	TemplateDAPO Template = "dapo"
	// TemplateMath is the math benchmark prompt (docs/algorithm.md §2.5):
	// problem + " " + BoxedInstruction.
	TemplateMath Template = "math"
	// TemplateGPQA is the multiple-choice prompt (docs/algorithm.md §2.5).
	TemplateGPQA Template = "gpqa"
)

// ParseTemplate accepts the Template names.
func ParseTemplate(s string) (Template, error) {
	switch t := Template(s); t {
	case TemplateAuto, TemplateNone, TemplateDAPO, TemplateMath, TemplateGPQA:
		return t, nil
	}
	return "", fmt.Errorf("prompt template %q: want auto, none, dapo, math or gpqa", s)
}

// DAPOPrompt is the training user message for a bare problem: the DAPO
// wrapper (which the training set's prompt column already holds, stripped),
// one space and the boxed instruction, the whole stripped (docs/algorithm.md §2.1).
func DAPOPrompt(problem string) string {
	return strings.TrimSpace(strings.TrimSpace(DAPOPrefix+problem+DAPOSuffix) + " " + BoxedInstruction)
}

// DAPOPromptFromWrapped is DAPOPrompt for a prompt column that already holds
// the DAPO wrapper, as open-r1/DAPO-Math-17k-Processed's does.
func DAPOPromptFromWrapped(wrapped string) string {
	return strings.TrimSpace(strings.TrimSpace(wrapped) + " " + BoxedInstruction)
}

// MathPrompt is a math benchmark's user message (docs/algorithm.md §2.5).
func MathPrompt(problem string) string { return problem + " " + BoxedInstruction }

// GPQAPrompt is the GPQA user message: the stripped question, the four
// choices unstripped, and GPQASuffix (docs/algorithm.md §2.5).
func GPQAPrompt(question string, choices []string) (string, error) {
	if len(choices) != 4 {
		return "", fmt.Errorf("GPQA prompt needs 4 choices, got %d", len(choices))
	}
	return strings.TrimSpace(question) + "\n\nA: " + choices[0] + "\nB: " + choices[1] + "\nC: " + choices[2] +
		"\nD: " + choices[3] + "\n\n" + GPQASuffix, nil
}
