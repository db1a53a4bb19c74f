package dist

// Slurm's compressed host lists: comma-separated entries, each a name with
// any number of bracketed range lists, expanded left to right as a
// Cartesian product: "node[01-03,7],gpu-a[1-2]b[1-2]" is node01 node02
// node03 node07 gpu-a1b1 gpu-a1b2 gpu-a2b1 gpu-a2b2. A range keeps the
// zero padding of its lower bound ("08-11" is 08 09 10 11), as
// scontrol show hostnames does.

import (
	"fmt"
	"strconv"
	"strings"
)

// maxHosts bounds an expansion, against a typo such as node[1-99999999].
const maxHosts = 1 << 20

// ExpandHostlist returns every host of a Slurm host list, in order.
func ExpandHostlist(list string) ([]string, error) {
	var hosts []string
	for _, entry := range splitTop(list) {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			return nil, fmt.Errorf("host list %q: empty entry", list)
		}
		names, err := expandEntry(entry, maxHosts-len(hosts))
		if err != nil {
			return nil, fmt.Errorf("host list %q: %w", list, err)
		}
		hosts = append(hosts, names...)
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("host list %q is empty", list)
	}
	return hosts, nil
}

// splitTop splits at the commas outside brackets.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// expandEntry expands one name with bracketed ranges, at most limit hosts.
func expandEntry(entry string, limit int) ([]string, error) {
	open := strings.IndexByte(entry, '[')
	if open < 0 {
		if strings.ContainsRune(entry, ']') {
			return nil, fmt.Errorf("%q: ']' without '['", entry)
		}
		return []string{entry}, nil
	}
	end := strings.IndexByte(entry[open:], ']')
	if end < 0 {
		return nil, fmt.Errorf("%q: '[' without ']'", entry)
	}
	end += open
	prefix, body := entry[:open], entry[open+1:end]
	if strings.ContainsRune(prefix, ']') || strings.ContainsRune(body, '[') {
		return nil, fmt.Errorf("%q: unbalanced brackets", entry)
	}
	ids, err := expandRanges(body, limit)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", entry, err)
	}
	rests, err := expandEntry(entry[end+1:], limit)
	if err != nil {
		return nil, err
	}
	if len(ids)*len(rests) > limit {
		return nil, fmt.Errorf("%q expands to more than %d hosts", entry, maxHosts)
	}
	out := make([]string, 0, len(ids)*len(rests))
	for _, id := range ids {
		for _, r := range rests {
			out = append(out, prefix+id+r)
		}
	}
	return out, nil
}

// expandRanges expands "01-03,7" into 01 02 03 7.
func expandRanges(body string, limit int) ([]string, error) {
	var out []string
	for _, part := range strings.Split(body, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		if !isDigits(lo) || (isRange && !isDigits(hi)) {
			return nil, fmt.Errorf("bad range %q", part)
		}
		if !isRange {
			out = append(out, lo)
			continue
		}
		a, err1 := strconv.ParseUint(lo, 10, 63)
		b, err2 := strconv.ParseUint(hi, 10, 63)
		if err1 != nil || err2 != nil || b < a {
			return nil, fmt.Errorf("bad range %q", part)
		}
		if b-a >= uint64(limit-len(out)) {
			return nil, fmt.Errorf("range %q expands to more than %d hosts", part, maxHosts)
		}
		width := 0
		if len(lo) > 1 && lo[0] == '0' {
			width = len(lo)
		}
		for v := a; v <= b; v++ {
			out = append(out, fmt.Sprintf("%0*d", width, v))
		}
	}
	return out, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
