package reward

import "testing"

// TestParseTree pins the grammar: precedence, juxtaposition, mixed numbers,
// function arguments, brackets, units and relations.
func TestParseTree(t *testing.T) {
	cases := []struct{ in, want string }{
		{`1+2\cdot 3`, `(+ 1 (* 2 3))`},
		{`-x^2`, `(neg (^ x 2))`},
		{`2^3^2`, `(^ 2 (^ 3 2))`},
		{`2^10`, `(^ 2 10)`},
		{`x^23`, `(^ x 23)`},
		{`e^ab`, `(* (^ e a) b)`},
		{`2\sqrt{3}`, `(* 2 (sqrt 3))`},
		{`\sqrt[3]{x}`, `(root x 3)`},
		{`\frac12`, `(/ 1 2)`},
		{`\frac{270}7`, `(/ 270 7)`},
		{`1\frac{4}{5}`, `(+ 1 4/5)`},
		{`-1\frac{1}{2}`, `(neg (+ 1 1/2))`},
		{`2\frac{\pi}{3}`, `(* 2 (/ pi 3))`},
		{`\sin 2x + 1`, `(+ (sin (* 2 x)) 1)`},
		{`\sin x \cos x`, `(* (sin x) (cos x))`},
		{`\sin^2 x`, `(^ (sin x) 2)`},
		{`\sin^{-1} x`, `(arcsin x)`},
		{`\log_2 8`, `(logb 2 8)`},
		{`x_{0} + x_0`, `(+ x_0 x_0)`},
		{`1,234`, `(list 1 234)`},
		{`(1, 2]`, `(tuple(] 1 2)`},
		{`[a, b]`, `(tuple[] a b)`},
		{`\{1, 2\}`, `(set 1 2)`},
		{`(0,1) \cup [2,3]`, `(union (tuple() 0 1) (tuple[] 2 3))`},
		{`x = 3`, `(rel = x 3)`},
		{`a < x \le b`, `(rel < <= a x b)`},
		{`1 \pm \sqrt{2}`, `(± 1 (sqrt 2))`},
		{`50\%`, `(% 50)`},
		{`|x - 1|`, `(abs (- x 1))`},
		{`\lfloor n/2 \rfloor`, `(floor (/ n 2))`},
		{`5!`, `(fact 5)`},
		{`1.25e-3`, `1/800`},
		{`\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}`, `(matrix2x2 1 2 3 4)`},
		{`3 \text{ cm}`, `3`},
		{`\text{east}`, `east`},
		{`52_8`, `52_8`},
	}
	for _, c := range cases {
		n, err := parseAnswer(canonMath(c.in), newMeter(DefaultBudget()), false)
		if err != nil {
			t.Errorf("parse(%q): %v", c.in, err)
			continue
		}
		if got := n.String(); got != c.want {
			t.Errorf("parse(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}
