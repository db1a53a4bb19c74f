package reward

import "testing"

// TestGroupDigits pins the reading of thousands separators: joined only in a
// well-formed grouping with at least one separator that is not a bare comma;
// otherwise `{,}` is a comma and spacing inside a number a NUL byte that no
// parse accepts.
func TestGroupDigits(t *testing.T) {
	cases := []struct{ in, want string }{
		{`1\,000`, "1000"},
		{`1\,000\,000`, "1000000"},
		{`10{,}080`, "10080"},
		{`12{,}345{,}678.5`, "12345678.5"},
		{`11,\! 111,\! 111,\! 100`, "11111111100"},
		{`1\!,\!000`, "1000"},
		{`1,\,000`, "1000"},
		{"1\u2009000", "1000"},
		{"1\u202f000\u202f000", "1000000"},
		{"1\u00a0000", "1000"},
		{`1~000`, "1000"},
		{`1\;000`, "1000"},
		{`1 000`, "1000"},
		{`-1\,000`, "-1000"},
		{`\$1{,}250.50`, `\$1250.50`},
		{`(1\,000, 2\,000)`, "(1000, 2000)"},
		{`1,000\,000`, "1000000"},
		// left alone: bare commas (readings tries both), comma and plain space
		{"1,000", "1,000"},
		{"2500,7500", "2500,7500"},
		{"1, 000", "1, 000"},
		{"(1,2)", "(1,2)"},
		// not thousands
		{`1{,}00`, "1,00"},
		{`3{,}14`, "3,14"},
		{`1{,}0000`, "1,0000"},
		{`1\,00`, "1\x0000"},
		{`12\,34`, "12\x0034"},
		{"12 34", "12\x0034"},
		{`1\,000\,00`, "1\x00000\x0000"},
		{`1234\,567`, "1234\x00567"},
		{`3.141\,592`, "3.141\x00592"},
		{`a{,}b`, "a,b"},
		// spacing after a subscript or an exponent stays
		{`\log_2 8`, `\log_2 8`},
		{`10^3 5`, `10^3 5`},
		{`x1 000`, `x1 000`},
		{`2\!\cdot\!3`, `2\!\cdot\!3`},
		{"", ""},
	}
	for _, c := range cases {
		if got := groupDigits(c.in); got != c.want {
			t.Errorf("groupDigits(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
