package gpukit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// readBench fills s.Bench from the measured bench (bench.json) and, when the
// baseline phase finished, PyTorch's rows (bench-baseline.json, written by
// `bench --torch-only`). A file that is there but half written (a phase cut
// by the deadline) is listed in s.Unreadable; the other is still used.
func (s *Summary) readBench(dir string) {
	read := func(name string) object {
		raw, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || len(bytes.TrimSpace(raw)) == 0 {
			return nil
		}
		o, err := parseObject(raw)
		if err != nil {
			s.Unreadable = append(s.Unreadable, fmt.Sprintf("%s: %v", name, err))
			return nil
		}
		return o
	}
	ours, torch := read("bench.json"), read("bench-baseline.json")
	var from []string
	switch {
	case ours != nil && torch != nil:
		var err error
		if ours, err = mergeBaseline(ours, torch); err != nil {
			s.Unreadable = append(s.Unreadable, fmt.Sprintf("bench-baseline.json: %v", err))
		}
		from = []string{"bench.json", "bench-baseline.json"}
	case ours != nil:
		from = []string{"bench.json"}
	case torch != nil:
		ours, from = torch, []string{"bench-baseline.json"}
	default:
		return
	}
	s.Bench, s.BenchFrom = ours.marshal(), strings.Join(from, " + ")
}

// object is a JSON object with its keys in the order written, so that the
// merged bench reads like bench's own output.
type object []member

type member struct {
	key string
	val json.RawMessage
}

// parseObject reads one JSON object, keeping its keys' order.
func parseObject(raw []byte) (object, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object (%v)", err)
	}
	var o object
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return nil, fmt.Errorf("key %v: %w", t, err)
		}
		o = append(o, member{t.(string), v})
	}
	if _, err := d.Token(); err != nil {
		return nil, err
	}
	return o, nil
}

func (o object) get(key string) json.RawMessage {
	for _, m := range o {
		if m.key == key {
			return m.val
		}
	}
	return nil
}

// set replaces key's value, or appends it.
func (o object) set(key string, val json.RawMessage) object {
	for i := range o {
		if o[i].key == key {
			o[i].val = val
			return o
		}
	}
	return append(o, member{key, val})
}

func (o object) marshal() json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(m.val)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// rows reads the array of objects at key.
func (o object) rows(key string) ([]object, error) {
	raw := o.get(key)
	if raw == nil || string(raw) == "null" {
		return nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	out := make([]object, len(items))
	for i, it := range items {
		r, err := parseObject(it)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", key, i, err)
		}
		out[i] = r
	}
	return out, nil
}

// mergeBaseline copies PyTorch's columns (torch_*) of each train and decode
// row of torch into the row of ours with the same name, with ours/PyTorch's
// tokens per second as its ratio, and torch's baseline line (the versions).
// Rows PyTorch has and ours lacks are appended as they are.
func mergeBaseline(ours, torch object) (object, error) {
	if b := torch.get("baseline"); b != nil {
		ours = ours.set("baseline", b)
	}
	for _, key := range []string{"train", "decode"} {
		mine, err := ours.rows(key)
		if err != nil {
			return ours, err
		}
		theirs, err := torch.rows(key)
		if err != nil {
			return ours, err
		}
		for _, trow := range theirs {
			i := slices.IndexFunc(mine, func(r object) bool { return bytes.Equal(r.get("name"), trow.get("name")) })
			if i < 0 {
				mine = append(mine, trow)
				continue
			}
			for _, m := range trow {
				if strings.HasPrefix(m.key, "torch_") {
					mine[i] = mine[i].set(m.key, m.val)
				}
			}
			var tok, ttok float64
			json.Unmarshal(mine[i].get("tok_s"), &tok)
			json.Unmarshal(mine[i].get("torch_tok_s"), &ttok)
			if tok > 0 && ttok > 0 {
				r, _ := json.Marshal(tok / ttok)
				mine[i] = mine[i].set("ratio", r)
			}
		}
		if mine == nil {
			continue
		}
		raws := make([]json.RawMessage, len(mine))
		for i, r := range mine {
			raws[i] = r.marshal()
		}
		all, _ := json.Marshal(raws)
		ours = ours.set(key, all)
	}
	return ours, nil
}
