package gdro

// classifier.go: the online difficulty classifier (docs/algorithm.md §4), as the reference
// computes it.
//
//   - Per UID: cumulative appearances and any-correct appearances, a FIFO
//     window of the last H any-correct indicators (H = 0: unbounded, use the
//     cumulative counts), and the remembered bin for hysteresis.
//   - acc(u) = mean(window) (or correct/seen), 0 for a never-seen UID.
//   - rawBin(acc) = min{ j : acc < e_j }, else B−1; bin 0 is the hardest.
//   - accbin_excl (ExcludeExtremes): acc ≤ 0 or acc ≥ 1, decided before
//     hysteresis, which it neither reads nor writes (docs/algorithm.md §4.4).
//   - Hysteresis with margin δ exactly as docs/algorithm.md §4.5 (multi-bin jumps are
//     all-or-nothing; upward needs acc ≥ e[prev] + δ, downward acc ≤ e[raw] − δ).
//     Without edges the uniform edges j/B go through the same rule (this fixes
//     the reference's uniform-mode bug, docs/algorithm.md §11 item 10).
//
// Timing (docs/algorithm.md §4.6): Bins at step t sees only indicators of steps < t;
// Observe appends step t's indicators at the very end of step t. Bins may be
// called again for the same UIDs within a step: the hysteresis update is
// idempotent for an unchanged history.
//
// Departures: the reference classifies every row; all rows of a prompt share
// one label, so this classifies prompts. A UID that appears several times in
// one step gets one indicator (any of all its rows), as the reference's
// per-UID grouping does. An empty UID is an error (the reference's
// accbin_unk, docs/algorithm.md §11 item 21: reject data without stable UIDs).

import (
	"fmt"
	"strconv"
	"strings"
)

// UIDHistory is one prompt's classifier state.
type UIDHistory struct {
	Seen    int `json:"seen"`    // appearances observed
	Correct int `json:"correct"` // appearances with at least one correct row
	// Window holds the last H indicators, oldest first, '1' = any correct.
	Window string `json:"window,omitempty"`
	// Last is the remembered bin for hysteresis, −1 if none.
	Last int `json:"last"`
}

// ClassifierState is the serializable state of a Classifier.
type ClassifierState struct {
	UIDs map[string]UIDHistory `json:"uids"`
}

// Classifier maps prompt UIDs to difficulty classes. Not safe for concurrent
// use.
type Classifier struct {
	cfg   ClassifierConfig
	edges []float64 // (B−1) ascending edges
	nBins int       // B
	hist  map[string]*UIDHistory
}

// NewClassifier returns an empty classifier.
func NewClassifier(cfg ClassifierConfig) (*Classifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Classifier{
		cfg:   cfg,
		edges: cfg.edgesResolved(),
		nBins: cfg.NumBinsResolved(),
		hist:  make(map[string]*UIDHistory),
	}, nil
}

// NumBins is B (accbin_excl not counted).
func (c *Classifier) NumBins() int { return c.nBins }

// NumClasses is the length of per-class arrays: B, plus accbin_excl (index B)
// when ExcludeExtremes is on.
func (c *Classifier) NumClasses() int { return c.cfg.NumClasses() }

// ExclClass is the index of accbin_excl, or −1 when ExcludeExtremes is off.
func (c *Classifier) ExclClass() int {
	if c.cfg.ExcludeExtremes {
		return c.nBins
	}
	return -1
}

// Labels returns the class labels in index order: accbin_0 … accbin_{B−1},
// then accbin_excl when enabled.
func (c *Classifier) Labels() []string { return classLabels(c.cfg) }

func classLabels(cfg ClassifierConfig) []string {
	l := make([]string, 0, cfg.NumClasses())
	for b := 0; b < cfg.NumBinsResolved(); b++ {
		l = append(l, "accbin_"+strconv.Itoa(b))
	}
	if cfg.ExcludeExtremes {
		l = append(l, "accbin_excl")
	}
	return l
}

// Acc is the accuracy estimate acc(u) from the history so far (docs/algorithm.md §4.3);
// it changes nothing (use it for evaluation-only lookups, docs/algorithm.md §11 item 23).
func (c *Classifier) Acc(uid string) float64 {
	h := c.hist[uid]
	if h == nil {
		return 0
	}
	return h.acc(c.cfg.HistoryLen)
}

func (h *UIDHistory) acc(historyLen int) float64 {
	if historyLen > 0 && len(h.Window) > 0 {
		return float64(strings.Count(h.Window, "1")) / float64(len(h.Window))
	}
	if h.Seen > 0 {
		return float64(h.Correct) / float64(h.Seen)
	}
	return 0
}

// rawBin is min{ j : acc < e_j }, or B−1 when acc is at or above every edge.
func (c *Classifier) rawBin(acc float64) int {
	for j, e := range c.edges {
		if acc < e {
			return j
		}
	}
	return len(c.edges)
}

// Bins classifies each prompt (docs/algorithm.md §4.3–4.5) and updates the hysteresis
// memory. The result (N) holds class indices: 0 … B−1 (0 = hardest), or B for
// accbin_excl.
func (c *Classifier) Bins(uids []string) ([]int, error) {
	out := make([]int, len(uids))
	for i, u := range uids {
		if u == "" {
			return nil, fmt.Errorf("gdro classifier: prompt %d has an empty UID (every prompt needs a stable UID)", i)
		}
		out[i] = c.classify(u)
	}
	return out, nil
}

func (c *Classifier) classify(uid string) int {
	h := c.hist[uid]
	acc := 0.0
	if h != nil {
		acc = h.acc(c.cfg.HistoryLen)
	}
	if c.cfg.ExcludeExtremes && (acc <= 0 || acc >= 1) {
		return c.nBins
	}
	raw := c.rawBin(acc)
	delta := c.cfg.Hysteresis
	if delta <= 0 {
		return raw
	}
	if h == nil {
		h = &UIDHistory{Last: -1}
		c.hist[uid] = h
	}
	prev := raw
	if h.Last >= 0 {
		prev = h.Last
	}
	switch {
	case raw > prev: // moving to an easier bin: cross the old bin's upper edge by δ
		if acc < c.edges[prev]+delta {
			raw = prev
		}
	case raw < prev: // moving to a harder bin: clear the new bin's upper edge by δ
		if acc > c.edges[raw]-delta {
			raw = prev
		}
	}
	h.Last = raw
	return raw
}

// Observe appends this step's any-correct indicators (docs/algorithm.md §4.2). uids and
// anyCorrect are parallel (N); a UID listed several times gets one indicator,
// the OR of its entries.
func (c *Classifier) Observe(uids []string, anyCorrect []bool) error {
	if len(uids) != len(anyCorrect) {
		return fmt.Errorf("gdro classifier: %d UIDs but %d indicators", len(uids), len(anyCorrect))
	}
	merged := make(map[string]bool, len(uids))
	order := make([]string, 0, len(uids))
	for i, u := range uids {
		if u == "" {
			return fmt.Errorf("gdro classifier: prompt %d has an empty UID", i)
		}
		if _, ok := merged[u]; !ok {
			order = append(order, u)
		}
		merged[u] = merged[u] || anyCorrect[i]
	}
	for _, u := range order {
		h := c.hist[u]
		if h == nil {
			h = &UIDHistory{Last: -1}
			c.hist[u] = h
		}
		h.Seen++
		bit := "0"
		if merged[u] {
			h.Correct++
			bit = "1"
		}
		if c.cfg.HistoryLen > 0 {
			w := h.Window + bit
			if len(w) > c.cfg.HistoryLen {
				w = w[len(w)-c.cfg.HistoryLen:]
			}
			h.Window = w
		}
	}
	return nil
}

// State returns a deep copy of the classifier state.
func (c *Classifier) State() ClassifierState {
	s := ClassifierState{UIDs: make(map[string]UIDHistory, len(c.hist))}
	for u, h := range c.hist {
		s.UIDs[u] = *h
	}
	return s
}

// Restore replaces the state, checking it against the configuration.
func (c *Classifier) Restore(s ClassifierState) error {
	hist := make(map[string]*UIDHistory, len(s.UIDs))
	for u, h := range s.UIDs {
		switch {
		case u == "":
			return fmt.Errorf("gdro classifier state: empty UID")
		case h.Seen < 0 || h.Correct < 0 || h.Correct > h.Seen:
			return fmt.Errorf("gdro classifier state: UID %q has seen = %d, correct = %d", u, h.Seen, h.Correct)
		case h.Last < -1 || h.Last >= c.nBins:
			return fmt.Errorf("gdro classifier state: UID %q remembers bin %d, outside [−1, %d)", u, h.Last, c.nBins)
		case c.cfg.HistoryLen > 0 && len(h.Window) > c.cfg.HistoryLen:
			return fmt.Errorf("gdro classifier state: UID %q window has %d entries, history_len is %d", u, len(h.Window), c.cfg.HistoryLen)
		case strings.Trim(h.Window, "01") != "":
			return fmt.Errorf("gdro classifier state: UID %q window %q has characters other than 0 and 1", u, h.Window)
		}
		hh := h
		hist[u] = &hh
	}
	c.hist = hist
	return nil
}
