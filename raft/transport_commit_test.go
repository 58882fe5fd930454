package raft

import (
	"errors"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
)

// TestCommitNoticesTellIdleFollowers: with the keep-alive append out of
// the way (CommitTimeout of an hour), a follower learns that the last
// entries written are committed from the commit notices its leader's
// heartbeats carry, and applies them.
func TestCommitNoticesTellIdleFollowers(t *testing.T) {
	nodes := newNodes(t, 3)
	ms := startGroup(t, nodes, "notices", func(group string, n *node, sm StateMachine) Config {
		c := fastConfig(group, n, sm)
		c.CommitTimeout = time.Hour
		return c
	})
	want := applyN(t, ms, 5)
	l := leader(t, ms, 10*time.Second)
	converge(t, ms, fsmState{Sum: want, Count: 5}, 10*time.Second)
	applied := l.g.AppliedIndex()
	for _, m := range ms {
		if got := m.g.AppliedIndex(); got != applied {
			t.Errorf("%s applied %d, leader %d", m.node.id, got, applied)
		}
	}
	var sent, delivered uint64
	for _, n := range nodes {
		st := n.mux.transportStats()
		sent += st.CommitNoticesSent
		delivered += st.CommitNoticesDelivered
	}
	if sent == 0 || delivered == 0 {
		t.Errorf("commit notices sent %d, delivered %d", sent, delivered)
	}
	// Once every follower knows, the heartbeats stop carrying notices.
	time.Sleep(300 * time.Millisecond)
	before := l.node.mux.transportStats().CommitNoticesSent
	time.Sleep(500 * time.Millisecond) // several heartbeat rounds
	if after := l.node.mux.transportStats().CommitNoticesSent; after != before {
		t.Errorf("notices kept going to followers that know: %d → %d", before, after)
	}
}

// TestCommitTrackerRules: a notice never reaches above the point up to
// which the follower is known to match, never repeats what the follower
// was told, and never uses what was learned in another term.
func TestCommitTrackerRules(t *testing.T) {
	var ct commitTracker
	applied := uint64(50)
	f := func() uint64 { return applied }
	if n := ct.notice("p", 3); n.commit != 0 {
		t.Fatalf("notice before anything was replicated: %+v", n)
	}
	ct.applied.Store(&f)

	// The follower acknowledged entries up to 40 (term 3), told commit 30.
	ct.replicated("p", &hraft.AppendEntriesRequest{Term: 3, PrevLogEntry: 38, PrevLogTerm: 3, LeaderCommitIndex: 30,
		Entries: []*hraft.Log{{Index: 39, Term: 3}, {Index: 40, Term: 3}}})
	if n := ct.notice("p", 3); n != (commitNotice{commit: 40, prevIndex: 40, prevTerm: 3}) {
		t.Errorf("notice capped at the match point: %+v", n)
	}
	if n := ct.notice("q", 3); n.commit != 0 {
		t.Errorf("notice to a follower nothing is known of: %+v", n)
	}
	// A later empty append (a keep-alive) does not lower the match point.
	ct.replicated("p", &hraft.AppendEntriesRequest{Term: 3, PrevLogEntry: 35, PrevLogTerm: 3, LeaderCommitIndex: 32})
	if n := ct.notice("p", 3); n.prevIndex != 40 {
		t.Errorf("match point went back: %+v", n)
	}
	ct.told("p", 3, commitNotice{commit: 40, prevIndex: 40, prevTerm: 3})
	if n := ct.notice("p", 3); n.commit != 0 {
		t.Errorf("notice repeated after the follower answered it: %+v", n)
	}
	// A heartbeat of another term: what was learned no longer applies.
	if n := ct.notice("p", 4); n.commit != 0 {
		t.Errorf("notice from another term's progress: %+v", n)
	}
	ct.replicated("p", &hraft.AppendEntriesRequest{Term: 4, PrevLogEntry: 45, PrevLogTerm: 4})
	if n := ct.notice("p", 4); n != (commitNotice{commit: 45, prevIndex: 45, prevTerm: 4}) {
		t.Errorf("new term's notice: %+v", n)
	}
	applied = 44
	if n := ct.notice("p", 4); n.commit != 44 {
		t.Errorf("notice above the leader's applied index: %+v", n)
	}
}

// TestQuorumDescribesMembers: the leader describes every member with how
// far its log matches and when it last acknowledged an append; anywhere
// else Quorum is ErrNotLeader.
func TestQuorumDescribesMembers(t *testing.T) {
	nodes := newNodes(t, 3)
	ms := startGroup(t, nodes, "quorum", fastConfig)
	want := applyN(t, ms, 3)
	converge(t, ms, fsmState{Sum: want, Count: 3}, 10*time.Second)
	l := leader(t, ms, 10*time.Second)
	start := time.Now()
	var q QuorumState
	waitFor(t, 10*time.Second, "every member described at the leader's last index", func() bool {
		var err error
		if q, err = l.g.Quorum(); err != nil {
			t.Fatal(err)
		}
		for _, r := range q.Replicas {
			if r.LogEnd != l.g.raft.LastIndex() || r.LastContact.Before(start) || r.CaughtUp.IsZero() {
				return false
			}
		}
		return len(q.Replicas) == 3
	})
	if q.LeaderID != l.node.id || q.Term != l.g.Term() || q.CommitIndex < l.g.AppliedIndex() {
		t.Errorf("quorum %+v: leader %s term %d applied %d", q, l.node.id, l.g.Term(), l.g.AppliedIndex())
	}
	for _, m := range ms {
		if m == l {
			continue
		}
		if _, err := m.g.Quorum(); !errors.Is(err, ErrNotLeader) {
			t.Errorf("Quorum on follower %s: %v", m.node.id, err)
		}
	}
}
