package reward

// The "symbolic" mode: extract the final answer (extract.go), then decide
// equivalence with the ground truth: normalized strings first (cheap, and the
// only check for answers too long to parse: an answer or truth over
// Budget.MaxAnswerBytes that is not equal as a string is an explicit
// over-budget verdict, StatusBudget, never a silent miss), multiple-choice
// letters when the truth is one, plain words when the truth is a word or
// phrase ("an ellipse" for \text{ellipse}), then parsed structure and values
// (symbolic_equiv.go). See the package documentation for what this adds to
// the reference modes.

import (
	"errors"
	"fmt"
	"strings"
)

// Symbolic is the parsing verifier. Use NewSymbolic; it is safe for
// concurrent use.
type Symbolic struct {
	Budget Budget
	// CorrectScore and IncorrectScore are the rewards; NewSymbolic sets +1
	// and −1, the training reward's values.
	CorrectScore, IncorrectScore float64
}

// NewSymbolic returns a symbolic scorer with the given budget.
func NewSymbolic(b Budget) *Symbolic {
	return &Symbolic{Budget: b, CorrectScore: 1, IncorrectScore: -1}
}

// Mode reports ModeSymbolic.
func (s *Symbolic) Mode() Mode { return ModeSymbolic }

// Score extracts the final answer of response and compares it with truth.
func (s *Symbolic) Score(response, truth string) (res Result) {
	defer guard(&res, s.IncorrectScore)
	ex := ExtractAnswer(response)
	res = Result{Score: s.IncorrectScore, Pred: ex.Answer}
	if ex.Answer == "" {
		res.Status = StatusNoAnswer
		return res
	}
	eq, err := s.equivalent(ex.Answer, truth)
	if err != nil {
		res.Status, res.Err = StatusBudget, err
		return res
	}
	if eq {
		res.Score, res.Correct = s.CorrectScore, true
	}
	return res
}

// Equivalent reports whether an extracted answer equals the truth. The error
// is non-nil only when the budget ran out (or a panic was recovered).
func (s *Symbolic) Equivalent(pred, truth string) (eq bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			eq, err = false, fmt.Errorf("reward: recovered panic: %v", r)
		}
	}()
	return s.equivalent(pred, truth)
}

func (s *Symbolic) equivalent(pred, truth string) (bool, error) {
	m := newMeter(s.Budget)
	eq, err := s.compare(pred, truth, m)
	if m.err != nil {
		// The budget ran out somewhere, perhaps inside a parse that then
		// failed for want of input: report it as such.
		return false, m.err
	}
	if err == nil && !eq && m.overflows > 0 {
		// An exact value passed the size limit and left float64's range
		// (2^{9000}, 100000!): its comparison at that point is undecided,
		// so "unequal" would be a guess.
		return false, fmt.Errorf("%w: an exact value passed %d bits (Budget.MaxBits) and float64's range; equality is undecided",
			errBudget, s.Budget.MaxBits)
	}
	return eq, err
}

func (s *Symbolic) compare(pred, truth string, m *meter) (bool, error) {
	truth = cleanTruth(truth)
	pred = strings.TrimSpace(pred)
	if pred == "" {
		return false, nil
	}
	if len(pred) > s.Budget.MaxAnswerBytes || len(truth) > s.Budget.MaxAnswerBytes {
		// Too long to parse (and to canonicalize with canonString, whose
		// \text scans are not linear): equal as strings, or over budget.
		if canonLong(pred) == canonLong(truth) {
			return true, nil
		}
		return false, fmt.Errorf("%w: answer of %d bytes, truth of %d bytes: over the %d-byte parse limit and not equal as strings",
			errBudget, len(pred), len(truth), s.Budget.MaxAnswerBytes)
	}
	if canonString(pred) == canonString(truth) {
		return true, nil
	}
	if letter, ok := choiceLetter(truth); ok {
		got, ok := predChoice(pred)
		return ok && got == letter, nil
	}
	if tw := textWords(truth); tw != "" && textWords(pred) == tw {
		return true, nil
	}
	cp, ct := canonMath(pred), canonMath(truth)
	preds, err := readings(cp, m)
	if err == nil && len(preds) == 0 {
		// "The number of ways is 210": read what follows the last " is ".
		if k := strings.LastIndex(cp, " is "); k >= 0 {
			preds, err = readings(strings.TrimSpace(cp[k+len(" is "):]), m)
		}
	}
	if err != nil || len(preds) == 0 {
		return false, err
	}
	truths, err := readings(ct, m)
	if err != nil || len(truths) == 0 {
		return false, err
	}
	for _, t := range truths {
		for _, p := range preds {
			eq, err := compareTrees(p, t, m)
			if err != nil || eq {
				return eq, err
			}
		}
	}
	return false, nil
}

// readings parses an answer; when it contains a comma-grouped number such as
// "1,234" it is read both as one number and as a list.
func readings(s string, m *meter) ([]*node, error) {
	var out []*node
	n, err := parseAnswer(s, m, false)
	if errors.Is(err, errBudget) {
		return nil, err
	}
	if err == nil {
		out = append(out, n)
	}
	if hasThousands(s) {
		n, err := parseAnswer(s, m, true)
		if errors.Is(err, errBudget) {
			return nil, err
		}
		if err == nil {
			out = append([]*node{n}, out...)
		}
	}
	return out, nil
}

func hasThousands(s string) bool {
	for i := 1; i+3 < len(s); i++ {
		if s[i] == ',' && isDigit(s[i-1]) && isDigit(s[i+1]) && isDigit(s[i+2]) && isDigit(s[i+3]) {
			return true
		}
	}
	return false
}

// compareTrees compares two parsed answers; when exactly one side has a
// percent sign, 50% may mean 0.5 or 50.
func compareTrees(p, t *node, m *meter) (bool, error) {
	pp, tp := hasKind(p, nPercent), hasKind(t, nPercent)
	eq, err := newComparer(m, p, t, true).same(p, t)
	if err != nil || eq || pp == tp {
		return eq, err
	}
	return newComparer(m, p, t, false).same(p, t)
}

// cleanTruth unwraps a ground truth given as `\boxed{…}` or with math
// delimiters and a final period.
func cleanTruth(t string) string {
	if strings.Contains(t, `\boxed`) || strings.Contains(t, `\fbox`) {
		if _, body, ok := lastBoxed(t); ok && body != "" {
			return body
		}
	}
	return cleanAnswer(t)
}

// canonString is a light normalization for string equality: no spaces,
// delimiters, sizing or spacing commands, \text wrappers; \dfrac and \tfrac
// read as \frac; thousands separators as groupDigits reads them (so spacing
// inside a badly grouped number, `1\,00`, does not vanish into 100). Purely
// alphabetic answers compare case-insensitively.
func canonString(s string) string {
	s = groupDigits(unwrapTextCmds(s))
	s = stringCanon.Replace(s)
	alpha := s != ""
	for i := 0; i < len(s); i++ {
		if !isLetter(s[i]) {
			alpha = false
			break
		}
	}
	if alpha {
		s = strings.ToLower(s)
	}
	return strings.TrimRight(s, ".")
}

var stringCanon = strings.NewReplacer(
	" ", "", "\t", "", "\n", "", "$", "", `\left`, "", `\right`, "", `\!`, "", `\,`, "", `\;`, "",
	`\:`, "", `\ `, "", `\quad`, "", `\qquad`, "", `\dfrac`, `\frac`, `\tfrac`, `\frac`,
	`\displaystyle`, "", `^{\circ}`, "", `^\circ`, "", "°", "", `\%`, "%", "−", "-",
)

// canonLong is the normalization for answers too long to parse: canonString
// without \text unwrapping, whose brace matching is not linear in the length.
func canonLong(s string) string {
	return strings.TrimRight(stringCanon.Replace(groupDigits(s)), ".")
}

// textWords reads an answer made of plain words (\text{} and math
// delimiters allowed) as its lower-case words, without a leading article or a
// short statement such as "it is" or "the curve is": "It is an ellipse" and
// \text{ellipse} both read as "ellipse". It returns "" for anything else
// (digits, commands, symbols), and for words with fewer than three letters,
// which may be variables. Negations and hedges are kept ("not an ellipse",
// "an ellipse or a circle"), so they never equal the truth.
func textWords(s string) string {
	if len(s) > 200 || strings.ContainsAny(s, "0123456789") {
		return ""
	}
	s = textDelims.Replace(unwrapTextCmds(s))
	s = strings.TrimRight(strings.TrimSpace(s), ".")
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isLetter(c) && c != ' ' && c != '-' && c != '\'' {
			return ""
		}
	}
	words := strings.Fields(strings.ToLower(s))
	// A short statement: "it is …", "the curve is …", "they are …", "it's …".
	for i := min(len(words)-2, 3); i >= 0; i-- {
		if w := words[i]; w == "is" || w == "are" || w == "it's" || w == "that's" {
			words = words[i+1:]
			break
		}
	}
	if len(words) > 0 && (words[0] == "a" || words[0] == "an" || words[0] == "the") {
		words = words[1:]
	}
	long := false
	for _, w := range words {
		long = long || len(w) >= 3
	}
	if !long {
		return ""
	}
	return strings.Join(words, " ")
}

var textDelims = strings.NewReplacer("$", " ", `\ `, " ", "~", " ", `\(`, " ", `\)`, " ")

// unwrapTextCmds replaces \text{X}, \textbf{X}, \mathrm{X}, \mbox{X} by X.
func unwrapTextCmds(s string) string {
	if !strings.Contains(s, `\text`) && !strings.Contains(s, `\math`) && !strings.Contains(s, `\mbox`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] == '\\' {
			name, j := commandAt(s, i)
			if textCmds[name] || name == "mathbf" {
				k := j
				for k < len(s) && s[k] == ' ' {
					k++
				}
				if k < len(s) && s[k] == '{' {
					if body, ok := braceGroup(s, k); ok {
						b.WriteString(body)
						i = k + len(body) + 2
						continue
					}
				}
			}
			b.WriteString(s[i:j])
			i = j
			continue
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}

// choiceLetter recognizes a multiple-choice ground truth: one capital letter
// A–J, possibly as (C), \text{(C)}, \textbf{C}, C).
func choiceLetter(t string) (byte, bool) {
	s := strings.Trim(canonString(t), "()[]{}.:")
	if len(s) == 1 && s[0] >= 'A' && s[0] <= 'J' {
		return s[0], true
	}
	// canonString lower-cases a lone letter.
	raw := strings.Trim(strings.ReplaceAll(unwrapTextCmds(t), " ", ""), "$()[]{}.:")
	if len(raw) == 1 && raw[0] >= 'A' && raw[0] <= 'J' {
		return raw[0], true
	}
	return 0, false
}

var (
	choiceCanon = strings.NewReplacer("$", "", `\left`, "", `\right`, "", "**", "")
	hedgeCanon  = strings.NewReplacer(",", " , ", "/", " / ", "(", " ", ")", " ")
)

// predChoice reads the letter of a multiple-choice answer: "C", "(C)",
// "\text{(C)}", "C) 12", "Option C: …". An answer naming two letters ("B or
// C", "B, C") is a hedge and reads as none.
func predChoice(p string) (byte, bool) {
	s := strings.TrimSpace(unwrapTextCmds(choiceCanon.Replace(p)))
	for _, pre := range []string{"option", "Option", "choice", "Choice", "OPTION"} {
		s = strings.TrimSpace(strings.TrimPrefix(s, pre))
	}
	s = strings.TrimPrefix(s, "(")
	if s == "" {
		return 0, false
	}
	c := s[0]
	if c >= 'a' && c <= 'j' {
		c -= 'a' - 'A'
	}
	if c < 'A' || c > 'J' {
		return 0, false
	}
	rest := s[1:]
	if rest != "" && isLetter(rest[0]) {
		return 0, false // a word, not a letter
	}
	rest = strings.TrimLeft(rest, ").:] ")
	if hedge(rest) {
		return 0, false
	}
	return c, true
}

// hedge reports text after a letter that names another option.
func hedge(rest string) bool {
	f := strings.Fields(hedgeCanon.Replace(rest))
	for i, w := range f {
		lw := strings.ToLower(w)
		if (lw == "or" || lw == "and" || lw == "," || lw == "/") && i+1 < len(f) {
			n := strings.Trim(f[i+1], ".:")
			if len(n) == 1 && n[0] >= 'A' && n[0] <= 'J' {
				return true
			}
		}
	}
	return len(f) > 0 && (f[0] == "," || strings.EqualFold(f[0], "or"))
}
