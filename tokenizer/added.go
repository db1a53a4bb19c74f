package tokenizer

// addedMatcher finds added tokens in raw text, leftmost-longest, as Hugging
// Face's Aho-Corasick (MatchKind::LeftmostLongest) and transformers.js's
// DictionarySplitter do. A byte trie is enough for a few dozen tokens.
type addedMatcher struct {
	nodes []trieNode
	first [256]bool // bytes that start some token
}

type trieNode struct {
	next map[byte]int32
	id   int32 // token id ending here, or -1
	n    int32 // its length in bytes
}

func newAddedMatcher(contents []string, ids []int) *addedMatcher {
	m := &addedMatcher{nodes: []trieNode{{id: -1}}}
	for k, s := range contents {
		cur := int32(0)
		for i := 0; i < len(s); i++ {
			nx, ok := m.nodes[cur].next[s[i]]
			if !ok {
				m.nodes = append(m.nodes, trieNode{id: -1})
				nx = int32(len(m.nodes) - 1)
				if m.nodes[cur].next == nil {
					m.nodes[cur].next = map[byte]int32{}
				}
				m.nodes[cur].next[s[i]] = nx
			}
			cur = nx
		}
		m.nodes[cur].id, m.nodes[cur].n = int32(ids[k]), int32(len(s))
		m.first[s[0]] = true
	}
	return m
}

// matchAt returns the id and byte length of the longest added token that
// starts at s[i:], or (-1, 0).
func (m *addedMatcher) matchAt(s string, i int) (int32, int) {
	cur := int32(0)
	bestID, bestN := int32(-1), 0
	for j := i; j < len(s); j++ {
		nx, ok := m.nodes[cur].next[s[j]]
		if !ok {
			break
		}
		cur = nx
		if m.nodes[cur].id >= 0 {
			bestID, bestN = m.nodes[cur].id, int(m.nodes[cur].n)
		}
	}
	return bestID, bestN
}

// split calls text(s) for each stretch without added tokens and token(id)
// for each added token, in order.
func (m *addedMatcher) split(s string, text func(string), token func(int32)) {
	start := 0
	for i := 0; i < len(s); i++ {
		if !m.first[s[i]] {
			continue
		}
		if id, n := m.matchAt(s, i); id >= 0 {
			if i > start {
				text(s[start:i])
			}
			token(id)
			i += n - 1
			start = i + 1
		}
	}
	if start < len(s) {
		text(s[start:])
	}
}
