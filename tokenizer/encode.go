package tokenizer

import "unicode/utf8"

// cacheMaxEntries bounds the piece → ids cache; it is cleared when full.
const cacheMaxEntries = 1 << 17

// cacheMaxPiece is the longest piece (bytes) that is cached.
const cacheMaxPiece = 64

// Encode returns the ids of text, as Hugging Face's
// tokenizer(text, add_special_tokens=False)["input_ids"] (Qwen3 adds no
// BOS/EOS either way). Added and special tokens written in the text are
// recognized.
func (t *Tokenizer) Encode(text string) []int {
	ids := t.encode32(text, nil)
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out
}

// Encode32 is Encode appending int32 ids to dst.
func (t *Tokenizer) Encode32(text string, dst []int32) []int32 { return t.encode32(text, dst) }

// Int32s converts ids to the int32 ids the model and the sampler take.
func Int32s(ids []int) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}

func (t *Tokenizer) encode32(text string, out []int32) []int32 {
	if !utf8.ValidString(text) {
		text = string(appendLossy(nil, []byte(text)))
	}
	t.addedM.split(text,
		func(section string) { out = t.encodeSection(section, out) },
		func(id int32) { out = append(out, id) })
	return out
}

// encodeSection normalizes, pre-tokenizes and BPE-encodes text that holds no
// added token.
func (t *Tokenizer) encodeSection(s string, out []int32) []int32 {
	s = nfc(s)
	pretokenize(s, func(piece string) {
		if len(piece) > cacheMaxPiece {
			out = t.bpe.encode(piece, out)
			return
		}
		t.cacheMu.RLock()
		ids, ok := t.cache[piece]
		t.cacheMu.RUnlock()
		if ok {
			out = append(out, ids...)
			return
		}
		n := len(out)
		out = t.bpe.encode(piece, out)
		ids = append([]int32(nil), out[n:]...)
		t.cacheMu.Lock()
		if len(t.cache) >= cacheMaxEntries {
			clear(t.cache)
		}
		t.cache[string([]byte(piece))] = ids // copy: piece points into the caller's text
		t.cacheMu.Unlock()
	})
	return out
}

// Pieces returns the pre-tokenizer's pieces of text (after added-token
// splitting and NFC, see nfc), for inspection and tests.
func (t *Tokenizer) Pieces(text string) []string {
	var out []string
	if !utf8.ValidString(text) {
		text = string(appendLossy(nil, []byte(text)))
	}
	t.addedM.split(text,
		func(section string) { pretokenize(nfc(section), func(p string) { out = append(out, p) }) },
		func(id int32) { out = append(out, t.idToken[id]) })
	return out
}
