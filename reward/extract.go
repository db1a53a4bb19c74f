package reward

// Final-answer extraction for the symbolic mode. Three kinds of marker are
// recognized anywhere in the response:
//
//   - an `Answer:` line (case-insensitive, as DAPO's prompt asks for; markdown
//     emphasis around it is ignored, and the answer may start on the next
//     line, as in math_dapo's `\s*`);
//   - a `\boxed{…}` or `\fbox{…}` (braces balanced; `\boxed 5` too);
//   - a "final answer is …" or "the answer is …" statement (the Minerva
//     "Final Answer: The final answer is $X$. I hope it is correct." form).
//
// The marker that starts last wins: the final answer is the one the response
// gives last, and a `\boxed{}` inside an `Answer:` line or a "final answer is"
// sentence starts after it and so is the one read. An empty or truncated
// (unbalanced) final marker yields no answer. Unlike the reference, the whole
// response is searched (not only the last 300 characters); every scan is
// linear, so a 1 MB response costs about a millisecond.
//
// An answer is never cut short: a box, an answer line or a statement is taken
// whole however long it is (each is one linear scan), so an answer of a
// million digits reaches the comparison intact, where it either equals the
// truth as a string or is reported as over the parse budget (symbolic.go),
// never as no answer.

import "strings"

// maxAnswerSpan bounds the multi-line extension of an answer line and the
// brace groups read inside an answer (unwrapTextCmds, the lexer), scans that
// are repeated and so must stay short.
const maxAnswerSpan = 8192

// Extracted is the outcome of ExtractAnswer.
type Extracted struct {
	Answer string // the cleaned final answer ("" when absent or empty)
	Kind   string // "answer-line", "boxed", "final-answer-is", or "" when none
	Found  bool   // a marker was found (Answer may still be empty)
}

// ExtractAnswer finds the final answer of a response.
func ExtractAnswer(resp string) Extracted {
	best, bestPos := Extracted{}, -1
	if pos, ans, ok := lastAnswerLine(resp); ok && pos > bestPos {
		best, bestPos = Extracted{Answer: ans, Kind: "answer-line", Found: true}, pos
	}
	if pos, ans, ok := lastBoxed(resp); ok && pos > bestPos {
		best, bestPos = Extracted{Answer: ans, Kind: "boxed", Found: true}, pos
	}
	if pos, ans, ok := lastAnswerIs(resp); ok && pos > bestPos {
		best = Extracted{Answer: ans, Kind: "final-answer-is", Found: true}
	}
	return best
}

// lastAnswerLine finds the last "answer:" and returns its position and the
// cleaned text after it.
func lastAnswerLine(s string) (int, string, bool) {
	for end := len(s); end > 0; {
		i := lastIndexFold(s[:end], "answer")
		if i < 0 {
			return 0, "", false
		}
		j := i + len("answer")
		for j < len(s) && (s[j] == '*' || s[j] == '_' || s[j] == ' ' || s[j] == '\t') {
			j++
		}
		if j < len(s) && s[j] == ':' {
			return i, cleanAnswer(answerSpan(s, j+1)), true
		}
		end = i
	}
	return 0, "", false
}

// answerSpan returns the text of an answer that starts at i: blank lines are
// skipped, then one line, extended (by up to 32 lines) while a `$$`, `\[`,
// `\(` or `\begin` opened on it is not closed yet.
func answerSpan(s string, i int) string {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r' || s[i] == '*') {
		i++
	}
	end := lineEnd(s, i)
	for lines := 0; lines < 32 && end < len(s) && end-i < maxAnswerSpan && unclosedMath(s[i:end]); lines++ {
		end = lineEnd(s, end+1)
	}
	return s[i:end]
}

// unclosedMath reports whether a math environment opened in t is still open.
func unclosedMath(t string) bool {
	return strings.Count(t, "$$")%2 == 1 ||
		strings.Count(t, `\[`) > strings.Count(t, `\]`) ||
		strings.Count(t, `\(`) > strings.Count(t, `\)`) ||
		strings.Count(t, `\begin{`) > strings.Count(t, `\end{`)
}

// lastBoxed finds the last \boxed or \fbox and returns its position and
// content. A box that never closes (a truncated response) is found but empty.
func lastBoxed(s string) (int, string, bool) {
	i := strings.LastIndex(s, `\boxed`)
	if j := strings.LastIndex(s, `\fbox`); j > i {
		i = j
	}
	if i < 0 {
		return 0, "", false
	}
	j := i + len(`\boxed`)
	if strings.HasPrefix(s[i:], `\fbox`) {
		j = i + len(`\fbox`)
	}
	for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
		j++
	}
	if j >= len(s) {
		return i, "", true
	}
	if s[j] != '{' {
		// `\boxed 5`: up to the next `$` or line end.
		end := lineEnd(s, j)
		if k := strings.IndexByte(s[j:end], '$'); k >= 0 {
			end = j + k
		}
		return i, cleanAnswer(s[j:end]), true
	}
	body, ok := braceGroupN(s, j, len(s))
	if !ok {
		return i, "", true
	}
	return i, cleanAnswer(body), true
}

// braceGroup returns the content of the brace group opening at s[i] == '{',
// honouring `\{` and `\}` escapes, when it closes within maxAnswerSpan bytes.
func braceGroup(s string, i int) (string, bool) {
	return braceGroupN(s, i, maxAnswerSpan)
}

// braceGroupN is braceGroup for a group of at most limit bytes. The final
// box of a response is read with no limit: it is scanned once.
func braceGroupN(s string, i, limit int) (string, bool) {
	depth := 0
	for k := i; k < len(s) && k-i <= limit; k++ {
		switch s[k] {
		case '\\':
			k++ // skip the escaped character
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return s[i+1 : k], true
			}
		}
	}
	return "", false
}

// answerIsWords are words that, right after "the answer is", show that a
// sentence about the answer follows rather than the answer itself.
var answerIsWords = map[string]bool{
	"correct": true, "incorrect": true, "wrong": true, "right": true, "not": true,
	"that": true, "the": true, "as": true, "below": true, "above": true,
	"given": true, "in": true, "to": true, "therefore": true, "thus": true,
	"clearly": true, "indeed": true, "simply": true, "just": true,
	"obtained": true, "found": true, "shown": true, "then": true, "still": true,
}

// lastAnswerIs finds the last "answer is" (as in "the final answer is") and
// returns its position and the answer it states.
func lastAnswerIs(s string) (int, string, bool) {
	for end := len(s); end > 0; {
		i := lastIndexFold(s[:end], "answer is")
		if i < 0 {
			return 0, "", false
		}
		end = i
		j := i + len("answer is")
		for j < len(s) && (s[j] == ' ' || s[j] == ':' || s[j] == '\t') {
			j++
		}
		rest := s[j:]
		w := leadingWord(rest)
		if answerIsWords[strings.ToLower(w)] {
			continue
		}
		return i, cleanAnswer(sentence(rest)), true
	}
	return 0, "", false
}

// sentence cuts the statement after "answer is" at its end: a closing math
// delimiter when it opens with one, else a period followed by a space or line
// end, or a line end.
func sentence(t string) string {
	for _, d := range [][2]string{{"$$", "$$"}, {"$", "$"}, {`\(`, `\)`}, {`\[`, `\]`}} {
		if strings.HasPrefix(t, d[0]) {
			if k := indexUnescaped(t[len(d[0]):], d[1]); k >= 0 {
				return t[:len(d[0])+k+len(d[1])]
			}
			break
		}
	}
	end := lineEnd(t, 0)
	for k := 0; k < end; k++ {
		if t[k] == '.' && (k+1 == end || t[k+1] == ' ') {
			return t[:k]
		}
	}
	return t[:end]
}

// indexUnescaped is strings.Index, except that a `$` preceded by a
// backslash is a dollar sign, not a delimiter: "$\$36$" closes at the last `$`.
func indexUnescaped(s, sub string) int {
	for off := 0; ; {
		k := strings.Index(s[off:], sub)
		if k < 0 {
			return -1
		}
		if sub == "$" && off+k > 0 && s[off+k-1] == '\\' {
			off += k + 1
			continue
		}
		return off + k
	}
}

func leadingWord(t string) string {
	k := 0
	for k < len(t) && (t[k] >= 'a' && t[k] <= 'z' || t[k] >= 'A' && t[k] <= 'Z') {
		k++
	}
	return t[:k]
}

// lastIndexFold is strings.LastIndex with ASCII case folding; word is lower case.
func lastIndexFold(s, word string) int {
	for i := len(s) - len(word); i >= 0; i-- {
		k := 0
		for k < len(word) && asciiLower(s[i+k]) == word[k] {
			k++
		}
		if k == len(word) {
			return i
		}
	}
	return -1
}

func asciiLower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// cleanAnswer trims an extracted answer: markdown emphasis, a leading colon,
// "I hope it is correct.", math delimiters around the whole answer, and a
// final period or comma.
func cleanAnswer(a string) string {
	a = strings.TrimSpace(strings.ReplaceAll(a, `\$`, "")) // a currency sign
	for range 3 {
		before := a
		a = strings.TrimSpace(strings.Trim(a, "*_"))
		a = strings.TrimSpace(strings.TrimPrefix(a, ":"))
		if k := strings.Index(a, "I hope it is correct"); k >= 0 {
			a = strings.TrimSpace(a[:k])
		}
		a = trimFinalPunct(a)
		a = unwrapDelims(strings.TrimSpace(a))
		if a == before {
			break
		}
	}
	return a
}

var mathDelims = strings.NewReplacer("$", "", `\(`, "", `\)`, "")

// unwrapDelims removes math delimiters that enclose the whole answer, or all
// of them when text and math alternate.
func unwrapDelims(a string) string {
	for _, d := range [][2]string{{"$$", "$$"}, {`\[`, `\]`}, {`\(`, `\)`}, {"$", "$"}} {
		if !strings.HasPrefix(a, d[0]) {
			continue
		}
		k := strings.Index(a[len(d[0]):], d[1])
		if k < 0 {
			return strings.TrimSpace(a[len(d[0]):])
		}
		inner := a[len(d[0]) : len(d[0])+k]
		rest := strings.TrimSpace(a[len(d[0])+k+len(d[1]):])
		if strings.Trim(rest, ".,;") == "" {
			return strings.TrimSpace(inner)
		}
		break
	}
	if strings.ContainsAny(a, "$") || strings.Contains(a, `\(`) {
		return strings.TrimSpace(mathDelims.Replace(a))
	}
	return a
}

// trimFinalPunct drops a sentence's final period, comma or semicolon, but
// not an escaped one (`\,` is a LaTeX space, `\;` too).
func trimFinalPunct(a string) string {
	for a != "" {
		c := a[len(a)-1]
		if c != '.' && c != ',' && c != ';' {
			break
		}
		if len(a) >= 2 && a[len(a)-2] == '\\' {
			a = strings.TrimSpace(a[:len(a)-2])
			continue
		}
		a = strings.TrimSpace(a[:len(a)-1])
	}
	return a
}
