package data

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
)

// uidOf gives a row its stable UID, first rule that applies:
//
//  1. an explicit string column "uid";
//  2. data_source + ":" + split + ":" + extra_info.index, the form the
//     reference's reward manager gives every row (docs/algorithm.md §2.4);
//  3. the row's own "id" (the shared JSONL files: "math500-17");
//  4. "sha256:" + the first 16 hex digits of SHA-256 over the data source and
//     the prompt messages. Identical prompts then share a UID and the
//     dataset is refused as a collision, which is what should happen to
//     duplicates that would merge GRPO groups.
//
// Never a row or batch position: UIDs must survive reshuffles and resumes.
func uidOf(row map[string]any, p *Prompt, id string) string {
	if u, ok := row["uid"].(string); ok && u != "" {
		return u
	}
	if p.Index >= 0 {
		return p.DataSource + ":" + p.Split + ":" + strconv.FormatInt(p.Index, 10)
	}
	if id != "" {
		return id
	}
	return ContentUID(p.DataSource, p)
}

// ContentUID is the content-hash UID of rule 4.
func ContentUID(dataSource string, p *Prompt) string {
	h := sha256.New()
	h.Write([]byte(dataSource))
	h.Write([]byte{0})
	msgs, _ := json.Marshal(p.Messages) // plain strings: cannot fail
	h.Write(msgs)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))[:16]
}

// checkUIDs refuses empty or colliding UIDs, naming both rows.
func checkUIDs(ps []Prompt) error {
	seen := make(map[string]int, len(ps))
	for i := range ps {
		p := &ps[i]
		if p.UID == "" {
			return fmt.Errorf("%s: row %d has an empty UID", p.File, p.Row)
		}
		if j, dup := seen[p.UID]; dup {
			q := &ps[j]
			return fmt.Errorf("%w: %q is the UID of %s row %d and of %s row %d (give rows a unique id or extra_info.index)",
				ErrUIDCollision, p.UID, q.File, q.Row, p.File, p.Row)
		}
		seen[p.UID] = i
	}
	return nil
}
