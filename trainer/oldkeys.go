package trainer

// oldkeys.go: keys renamed or removed before the first release. They are
// not read: a config file, a --set or a checkpoint's recorded config that
// sets one is refused with an error naming what replaced it.

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// oldKeys are the old keys (a whole section where the key is a section)
// and what replaced each.
var oldKeys = []struct{ key, now string }{
	{"run.matmul_precision", "renamed precision.matmul"},
	{"run.reference_dtype", "renamed precision.reference"},
	{"run.kv_cache_dtype", "renamed precision.kv_cache"},
	{"rollout", "renamed sampling: rollout.KEY is sampling.KEY (gdro.rollout stays Rollout-GDRO's)"},
	{"gdro.prompt.enabled", "no longer a key: train.method decides which controllers run"},
	{"gdro.rollout.enabled", "no longer a key: train.method decides which controllers run"},
	{"gdro.prompt.kl_coef", "replaced by loss.kl_coef, one β_KL for the loss and the surrogate_kl signal"},
}

// oldKeyError names the first old key a YAML (or JSON) document sets, or
// returns nil (also when raw does not parse: the strict decoder names that).
func oldKeyError(raw []byte) error {
	var doc map[string]any
	if yaml.Unmarshal(raw, &doc) != nil {
		return nil
	}
	for _, o := range oldKeys {
		if hasKey(doc, strings.Split(o.key, ".")) {
			return fmt.Errorf("%s is %s", o.key, o.now)
		}
	}
	return nil
}

// hasKey reports whether the nested mapping m sets the key path.
func hasKey(m map[string]any, path []string) bool {
	v, ok := m[path[0]]
	if !ok || len(path) == 1 {
		return ok
	}
	sub, ok := v.(map[string]any)
	return ok && hasKey(sub, path[1:])
}
