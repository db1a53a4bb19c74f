package trainer

// legacy.go: the upgrade path of old config keys. A config file, each --set
// override and the config a checkpoint recorded are read through it, so old
// files still load and a run started by an older gdrotrain resumes on this
// one. Each old key gives one notice line naming it and its new form
// (Config.Notices); the behaviour is the old key's.
//
//	run.matmul_precision   → precision.matmul
//	run.reference_dtype    → precision.reference
//	run.kv_cache_dtype     → precision.kv_cache
//	rollout.KEY            → sampling.KEY (the training sampler; gdro.rollout is Rollout-GDRO)
//	gdro.prompt.enabled    } removed: train.method decides them (Config.Resolved);
//	gdro.rollout.enabled   } accepted when they agree with it, an error otherwise
//	gdro.prompt.kl_coef    → loss.kl_coef: accepted when equal to it, or when the
//	                         signal is not surrogate_kl (the only reader of the
//	                         old key); an error otherwise
//
// A renamed key and its new name both set, to different values, in the same
// document (a file, one --set) is an error naming both; a later document
// overrides an earlier one as usual.

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/gdrotrain/gdrotrain/gdro"
)

// renamedKeys are the old keys with a new name: section, key → section, key.
var renamedKeys = []struct{ oldSec, oldKey, newSec, newKey string }{
	{"run", "matmul_precision", "precision", "matmul"},
	{"run", "reference_dtype", "precision", "reference"},
	{"run", "kv_cache_dtype", "precision", "kv_cache"},
}

// renamedSections are the old top-level sections with a new name.
var renamedSections = []struct{ old, new, why string }{
	{"rollout", "sampling", "the training sampler; gdro.rollout stays Rollout-GDRO's"},
}

// OldKeys lists the old keys still read, each with what it became (the
// config reference, docs/config.md, prints them).
func OldKeys() [][2]string {
	var out [][2]string
	for _, r := range renamedKeys {
		out = append(out, [2]string{r.oldSec + "." + r.oldKey, "`" + r.newSec + "." + r.newKey + "`"})
	}
	for _, r := range renamedSections {
		out = append(out, [2]string{r.old + ".KEY", "`" + r.new + ".KEY` (" + r.why + ")"})
	}
	return append(out,
		[2]string{"gdro.prompt.enabled", "derived from `train.method`; accepted when it agrees"},
		[2]string{"gdro.rollout.enabled", "derived from `train.method`; accepted when it agrees"},
		[2]string{"gdro.prompt.kl_coef", "`loss.kl_coef`, one β_KL for the loss and the surrogate_kl signal; accepted when equal to it, or when the signal is not surrogate_kl (which alone read it)"})
}

// legacy collects what upgrading the documents of one config found: the
// notices, and the values of removed keys, checked against the resolved
// config (a later --set may change train.method or loss.kl_coef).
type legacy struct {
	notices  []string
	noted    map[string]bool // old keys already given a notice
	recorded bool            // a checkpoint's config: no "rename it" (nobody edits it)

	promptEnabled, rolloutEnabled *bool    // gdro.{prompt,rollout}.enabled, the last value read
	promptKLCoef                  *float64 // gdro.prompt.kl_coef, the last value read
}

// note adds the notice of an old key, once; fix is what to do about it in
// a config file.
func (l *legacy) note(oldKey, fix, format string, a ...any) {
	if l.noted[oldKey] {
		return
	}
	if l.noted == nil {
		l.noted = map[string]bool{}
	}
	l.noted[oldKey] = true
	msg := fmt.Sprintf(format, a...)
	if !l.recorded {
		msg += "; " + fix
	}
	l.notices = append(l.notices, "config: "+msg)
}

// decode decodes one YAML document over cfg (unknown keys are errors),
// upgrading its old keys first. A document without old keys is decoded as
// it is; one with old keys is re-encoded after the upgrade, so the line
// numbers of a decoding error are those of the upgraded text.
func (l *legacy) decode(raw []byte, cfg *Config) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return decodeStrict(raw, cfg) // nothing to upgrade: the strict decoder names any error
	}
	switch changed, err := l.upgrade(doc.Content[0]); {
	case err != nil:
		return err
	case !changed:
		return decodeStrict(raw, cfg)
	}
	up, err := yaml.Marshal(&doc)
	if err != nil {
		return err
	}
	if err := decodeStrict(up, cfg); err != nil {
		return fmt.Errorf("%w (line numbers of the config with its old keys renamed)", err)
	}
	return nil
}

// upgrade rewrites the old keys of a top-level mapping in place.
func (l *legacy) upgrade(top *yaml.Node) (changed bool, err error) {
	for _, r := range renamedKeys {
		sec := mapValue(top, r.oldSec)
		if sec == nil || sec.Kind != yaml.MappingNode {
			continue
		}
		v := mapDelete(sec, r.oldKey)
		if v == nil {
			continue
		}
		changed = true
		old, now := r.oldSec+"."+r.oldKey, r.newSec+"."+r.newKey
		if err := moveKey(top, r.newSec, r.newKey, v, old, now); err != nil {
			return changed, err
		}
		l.note(old, "rename it", "%s is now %s (read as %s: %s)", old, now, now, scalarText(v))
	}
	for _, r := range renamedSections {
		v := mapDelete(top, r.old)
		if v == nil {
			continue
		}
		changed = true
		switch {
		case isNull(v):
		case resolve(v).Kind != yaml.MappingNode:
			return changed, fmt.Errorf("%s (now %s): want a mapping of keys", r.old, r.new)
		default:
			pairs := resolve(v).Content
			for i := 0; i+1 < len(pairs); i += 2 {
				k := pairs[i].Value
				if err := moveKey(top, r.new, k, pairs[i+1], r.old+"."+k, r.new+"."+k); err != nil {
					return changed, err
				}
			}
		}
		l.note(r.old, "rename it", "the %s section is now %s (%s): %s.KEY is read as %s.KEY", r.old, r.new, r.why, r.old, r.new)
	}
	if g := mapValue(top, "gdro"); g != nil && g.Kind == yaml.MappingNode {
		for _, c := range []struct {
			sec string
			dst **bool
		}{{"prompt", &l.promptEnabled}, {"rollout", &l.rolloutEnabled}} {
			sec := mapValue(g, c.sec)
			if sec == nil || sec.Kind != yaml.MappingNode {
				continue
			}
			if v := mapDelete(sec, "enabled"); v != nil {
				changed = true
				if isNull(v) {
					continue
				}
				var b bool
				if err := v.Decode(&b); err != nil {
					return changed, fmt.Errorf("gdro.%s.enabled: want true or false (and it is no longer a key: train.method decides it)", c.sec)
				}
				*c.dst = &b
			}
		}
		if sec := mapValue(g, "prompt"); sec != nil && sec.Kind == yaml.MappingNode {
			if v := mapDelete(sec, "kl_coef"); v != nil {
				changed = true
				if !isNull(v) {
					var f float64
					if err := v.Decode(&f); err != nil {
						return changed, fmt.Errorf("gdro.prompt.kl_coef: want a number (and it is no longer a key: the surrogate_kl signal uses loss.kl_coef)")
					}
					l.promptKLCoef = &f
				}
			}
		}
	}
	return changed, nil
}

// moveKey sets section.key = v in top, unless the document already sets it
// to another value (an error naming both keys).
func moveKey(top *yaml.Node, section, key string, v *yaml.Node, oldName, newName string) error {
	sec := mapValue(top, section)
	switch {
	case sec == nil || isNull(sec):
		sec = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		mapDelete(top, section)
		mapSet(top, section, sec)
	case sec.Kind != yaml.MappingNode:
		return fmt.Errorf("%s: want a mapping of keys", section)
	}
	if cur := mapValue(sec, key); cur != nil {
		if !sameValue(cur, v) {
			return fmt.Errorf("%s = %s and %s = %s are both set: %s is the old name of %s; keep one", oldName, scalarText(v), newName, scalarText(cur), oldName, newName)
		}
		return nil
	}
	mapSet(sec, key, v)
	return nil
}

// check compares the removed keys' values with the resolved config's and
// notes each one that agrees.
func (l *legacy) check(c Config) error {
	m := c.Train.Method
	known := m == MethodGRPO || m == MethodPromptGDRO || m == MethodRolloutGDRO || m == MethodPromptRolloutGDRO // else Validate names the method
	for _, e := range []struct {
		name string
		got  *bool
		want bool
		rule string
	}{
		{"gdro.prompt.enabled", l.promptEnabled, c.GDRO.Prompt.Enabled, methodControllers(m)},
		{"gdro.rollout.enabled", l.rolloutEnabled, c.GDRO.Rollout.Enabled, methodControllers(m)},
	} {
		switch {
		case e.got == nil || !known:
		case *e.got != e.want:
			return fmt.Errorf("%s: %v disagrees with train.method %s, which decides it: %s. Remove %s (and choose the method)", e.name, *e.got, m, e.rule, e.name)
		default:
			l.note(e.name, "remove it", "%s is no longer a key: train.method %s decides it (%v, as set)", e.name, m, e.want)
		}
	}
	if k := l.promptKLCoef; k != nil {
		switch {
		case *k == c.Loss.KLCoef:
			l.note("gdro.prompt.kl_coef", "remove it", "gdro.prompt.kl_coef is now loss.kl_coef (the same value, %v): one β_KL for the loss and the surrogate_kl signal", *k)
		case c.GDRO.Prompt.Signal != gdro.SignalSurrogateKL:
			l.note("gdro.prompt.kl_coef", "remove it", "gdro.prompt.kl_coef = %v is ignored: only the surrogate_kl signal read it (this run's is %s), and its β_KL is now loss.kl_coef (%v)", *k, c.GDRO.Prompt.Signal, c.Loss.KLCoef)
		default:
			return fmt.Errorf("gdro.prompt.kl_coef = %v differs from loss.kl_coef = %v: the surrogate_kl signal's β_KL is now loss.kl_coef (one β_KL for the loss and the signal). Remove gdro.prompt.kl_coef, or set loss.kl_coef: %v for both", *k, c.Loss.KLCoef, *k)
		}
	}
	return nil
}

// methodControllers says which controllers a method runs.
func methodControllers(m string) string {
	switch m {
	case MethodGRPO:
		return "grpo runs neither controller"
	case MethodPromptGDRO:
		return "prompt_gdro runs Prompt-GDRO and not Rollout-GDRO"
	case MethodPromptRolloutGDRO:
		return "prompt_rollout_gdro runs both"
	default:
		return "rollout_gdro runs Rollout-GDRO, and Prompt-GDRO beside it only with gdro.prompt.apply: false (its weights computed and logged, not applied, as in the reference's Rollout-GDRO runs); prompt_rollout_gdro runs both, weights applied"
	}
}

// upgradeRecorded reads the config a checkpoint recorded (JSON, possibly
// written by an older gdrotrain) over Default(), as the older build would
// have, with its old keys upgraded. Unknown keys are ignored (a key an older
// build had and this one dropped). It returns the config, the upgraded JSON
// (its keys are the ones the checkpoint set) and the notices.
func upgradeRecorded(raw json.RawMessage) (Config, json.RawMessage, []string, error) {
	cfg := Default()
	var doc yaml.Node
	l := legacy{recorded: true}
	if err := yaml.Unmarshal(raw, &doc); err == nil && len(doc.Content) > 0 && doc.Content[0].Kind == yaml.MappingNode {
		changed, err := l.upgrade(doc.Content[0])
		if err != nil {
			return cfg, raw, nil, err
		}
		if changed {
			var v any
			if err := doc.Content[0].Decode(&v); err != nil {
				return cfg, raw, nil, err
			}
			if raw, err = json.Marshal(v); err != nil {
				return cfg, raw, nil, err
			}
		}
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return cfg, raw, nil, err
	}
	cfg = cfg.Resolved()
	if err := l.check(cfg); err != nil {
		return cfg, raw, nil, err
	}
	return cfg, raw, l.notices, nil
}

// mapValue returns the value of key in a mapping node (aliases resolved), or nil.
func mapValue(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return resolve(m.Content[i+1])
		}
	}
	return nil
}

// mapDelete removes key from a mapping node and returns its value, or nil.
func mapDelete(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			v := m.Content[i+1]
			m.Content = append(m.Content[:i:i], m.Content[i+2:]...)
			return v
		}
	}
	return nil
}

func mapSet(m *yaml.Node, key string, v *yaml.Node) {
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, v)
}

func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	n = resolve(n)
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// sameValue compares two YAML values as a reader would: numbers by value
// (1 = 1.0), everything else as decoded.
func sameValue(a, b *yaml.Node) bool {
	var x, y any
	if a.Decode(&x) != nil || b.Decode(&y) != nil {
		return false
	}
	if fx, ok := number(x); ok {
		fy, ok := number(y)
		return ok && fx == fy
	}
	return reflect.DeepEqual(x, y)
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint64:
		return float64(n), true
	case float64:
		return n, !math.IsNaN(n)
	}
	return 0, false
}

// scalarText renders a value for a message: a scalar as written, anything
// else as flow YAML.
func scalarText(n *yaml.Node) string {
	n = resolve(n)
	if n.Kind == yaml.ScalarNode {
		return n.Value
	}
	b, err := yaml.Marshal(n)
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}
