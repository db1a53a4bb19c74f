package reward

import "testing"

// Expected values were checked against verl's math.py (docs/algorithm.md §3.3).
func TestBoxedScore(t *testing.T) {
	cases := []struct {
		resp, truth string
		want        float64
	}{
		{`\boxed{\frac{1}{2}}`, `\frac12`, 1},
		{`\boxed{0.5}`, `\frac{1}{2}`, 1},
		{`\boxed{.5}`, `0.5`, 1},
		{`\boxed{ .5}`, `0.5`, 1},
		{`\boxed{\dfrac{3}{4}}`, `\frac34`, 1},
		{`\boxed{x = 5}`, `5`, 1},
		{`\boxed{abc = 5}`, `5`, 0},
		{`\boxed{3/4}`, `\frac{3}{4}`, 1},
		{`\boxed{03/4}`, `\frac{3}{4}`, 0},
		{`\boxed{-3/4}`, `\frac{-3}{4}`, 1},
		{`\boxed{12}`, `12`, 1},
		{`\boxed{1}\boxed{2}`, `2`, 1},
		{`\boxed{2} then \boxed{1`, `2`, 0},
		{`\fbox{7}`, `7`, 0},
		{`\boxed 7$ and`, `7`, 1},
		{`\boxed 7`, `7`, 1},
		{`no box`, `x`, 0},
		{`\boxed{10\%}`, `10`, 1},
		{`\boxed{30^\circ}`, `30`, 1},
		{`\boxed{5 \text{ cm}}`, `5`, 1},
		{`\boxed{5 \text{ cm} \text{ m}}`, `5 \text{ cm} \text{ m}`, 1},
		{`\boxed{\sqrt2}`, `\sqrt{2}`, 1},
		{`\boxed{\left(1,2\right)}`, `(1,2)`, 1},
		{`\boxed{\$18.90}`, `18.90`, 1},
		{`\boxed{\sqrt}`, `\sqrt`, 1},
		{`\boxed{\frac}`, `x`, 0},
		{`\boxed{1,\!000}`, `1000`, 0},
		{`\boxed{\text{(C)}}`, `C`, 0},
		{`\boxed{13,535}`, `13535`, 0},
		{`\boxed{\frac1{72}}`, `\frac{1}{72}`, 1},
	}
	for _, c := range cases {
		r := Boxed{}.Score(c.resp, c.truth)
		if r.Score != c.want || r.Correct != (c.want == 1) {
			t.Errorf("Boxed.Score(%q, %q) = %v, want %v", c.resp, c.truth, r.Score, c.want)
		}
	}
}

func TestHendrycksStrip(t *testing.T) {
	cases := []struct {
		in, want string
		raises   bool
	}{
		{`\frac12`, `\frac{1}{2}`, false},
		{`\dfrac{1}{2}`, `\frac{1}{2}`, false},
		{`0.5`, `\frac{1}{2}`, false},
		{`1/2`, `\frac{1}{2}`, false},
		{`-0/2`, `-0/2`, false},
		{`k = 7`, `7`, false},
		{`\sqrt3`, `\sqrt{3}`, false},
		{`\text{ a}\text{ b}`, ``, true},
		{`2\sqrt`, ``, true},
		{`\frac`, ``, true},
		{`\frac1`, `\frac1`, false},
		{`\frac{1}{2}\frac3`, `\frac{1}{2}\frac3`, false},
		{"a\nb", `ab`, false},
		{`\left( 1, 2 \right)`, `(1,2)`, false},
		{``, ``, false},
	}
	for _, c := range cases {
		got, err := HendrycksStrip(c.in)
		if (err != nil) != c.raises || (err == nil && got != c.want) {
			t.Errorf("HendrycksStrip(%q) = %q, %v; want %q, raises=%v", c.in, got, err, c.want, c.raises)
		}
	}
}
