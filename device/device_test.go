package device

import "testing"

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		kind string
		gpu  int
		ok   bool
	}{
		{"cpu", CPU, 0, true}, {"auto", Auto, 0, true}, {"cuda", CUDA, 0, true}, {"cuda:3", CUDA, 3, true},
		{"cuda:-1", "", 0, false}, {"cuda:x", "", 0, false}, {"gpu", "", 0, false}, {"", "", 0, false}, {"CPU", "", 0, false},
	} {
		kind, gpu, err := Parse(c.in)
		if (err == nil) != c.ok || kind != c.kind || gpu != c.gpu {
			t.Errorf("Parse(%q) = %q, %d, %v; want %q, %d, ok %v", c.in, kind, gpu, err, c.kind, c.gpu, c.ok)
		}
	}
}

func TestParsePrecision(t *testing.T) {
	for _, s := range []string{"bf16", "tf32", "fp32"} {
		if p, err := ParsePrecision(s); err != nil || string(p) != s {
			t.Errorf("ParsePrecision(%q) = %q, %v", s, p, err)
		}
	}
	for _, s := range []string{"", "fp16", "BF16"} {
		if _, err := ParsePrecision(s); err == nil {
			t.Errorf("ParsePrecision(%q) accepted", s)
		}
	}
}
