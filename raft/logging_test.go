package raft

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A thousand groups failing to reach the same dead peer write one line
// per interval between them, the next one counting the rest; other
// peers, lines that name no peer and warnings are not held back.
func TestPeerErrorsLimitedAcrossGroups(t *testing.T) {
	var out bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&out, nil))
	limit := newPeerLogLimit(5 * time.Second)
	now := time.Unix(1000, 0)
	limit.now = func() time.Time { return now }
	groups := make([]*hclogAdapter, 1000)
	for i := range groups {
		groups[i] = newGroupHCLog(logger.With("group", i), "raft", limit).(*hclogAdapter)
	}
	lines := func() []string {
		s := strings.TrimSpace(out.String())
		out.Reset()
		if s == "" {
			return nil
		}
		return strings.Split(s, "\n")
	}

	for _, g := range groups {
		g.Error("failed to heartbeat to", "peer", "10.0.0.1:9093", "error", "dial refused")
		g.Error("failed to appendEntries to", "peer", "10.0.0.1:9093", "error", "dial refused")
	}
	if got := lines(); len(got) != 2 {
		t.Fatalf("2,000 failures to one peer in one instant: %d lines, want one per message:\n%s", len(got), strings.Join(got, "\n"))
	}

	groups[7].Error("failed to heartbeat to", "peer", "10.0.0.2:9093", "error", "dial refused")
	groups[7].Error("failed to contact quorum of nodes, stepping down")
	groups[7].Warn("appendEntries rejected, sending older logs", "peer", "10.0.0.1:9093")
	if got := lines(); len(got) != 3 {
		t.Fatalf("another peer, a line naming none and a warning: %d lines, want 3:\n%s", len(got), strings.Join(got, "\n"))
	}

	now = now.Add(5 * time.Second)
	groups[3].Error("failed to heartbeat to", "peer", "10.0.0.1:9093", "error", "dial refused")
	got := lines()
	if len(got) != 1 || !strings.Contains(got[0], "suppressed_since_last=999") || !strings.Contains(got[0], "group=3") {
		t.Fatalf("after the interval: %q, want group 3's line counting the 999 held back", got)
	}
}
