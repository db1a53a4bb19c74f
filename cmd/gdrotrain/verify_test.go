package main

import (
	"strings"
	"testing"
)

// TestVerifyFlags: the flags reach verify.Run (reward/verify's tests cover
// the command): a pair given by --response and --truth, an empty response
// counted as given, and one of the pair alone refused.
func TestVerifyFlags(t *testing.T) {
	out, err := runCmd(t, "", "verify", "--response", `\boxed{2}`, "--truth", "2", "--mode", "boxed")
	if err != nil || !strings.Contains(out, "verdict:   correct") {
		t.Errorf("a pair: %v\n%s", err, out)
	}
	if out, err := runCmd(t, "", "verify", "--response", "", "--truth", "2"); err != nil || !strings.Contains(out, "verdict:") {
		t.Errorf("an empty --response: %v\n%s", err, out)
	}
	if _, err := runCmd(t, "", "verify", "--truth", "2"); err == nil || !strings.Contains(err.Error(), "--response and --truth go together") {
		t.Errorf("--truth alone: %v", err)
	}
}
