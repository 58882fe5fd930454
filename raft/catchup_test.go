package raft

import (
	"slices"
	"testing"
	"time"
)

func TestBehindNeedsAnUpStalledFollower(t *testing.T) {
	now := time.Now()
	const term, last = 7, 100
	cases := []struct {
		name string
		fm   followerMatch
		want bool
	}{
		{"up, behind, no append acknowledged for a while", followerMatch{term: term, index: 90, heard: now, lastAck: now.Add(-5 * time.Second)}, true},
		{"up, behind, never acknowledged an append this term", followerMatch{term: term, heard: now}, true},
		{"up, behind, acknowledging appends", followerMatch{term: term, index: 90, heard: now, lastAck: now.Add(-time.Second)}, false},
		{"up, caught up", followerMatch{term: term, index: last, heard: now, lastAck: now.Add(-time.Minute)}, false},
		{"not answering heartbeats", followerMatch{term: term, index: 90, heard: now.Add(-5 * time.Second), lastAck: now.Add(-time.Minute)}, false},
		{"learned in another term", followerMatch{term: term - 1, index: 90, heard: now, lastAck: now.Add(-time.Minute)}, false},
	}
	for _, c := range cases {
		fm := c.fm
		ct := &commitTracker{byPeer: map[string]*followerMatch{"f": &fm}}
		if got := ct.behind(term, last, now); got != c.want {
			t.Errorf("%s: behind = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestRestartedFollowerCatchesUpWhileIdle restarts a follower that missed
// entries into a group whose commit keep-alive never runs in the test's
// time, and that writes nothing more: the leader's catch-up barrier
// (catchup.go) must wake the replication its failed appends left waiting.
func TestRestartedFollowerCatchesUpWhileIdle(t *testing.T) {
	noKeepAlive := func(group string, n *node, sm StateMachine) Config {
		c := fastConfig(group, n, sm)
		c.CommitTimeout = time.Hour
		return c
	}
	nodes := newNodes(t, 3)
	ms := startGroup(t, nodes, "catchup", noKeepAlive)
	sum := applyN(t, ms, 5)
	converge(t, ms, fsmState{sum, 5}, 10*time.Second)

	l := leader(t, ms, 5*time.Second)
	idx := slices.IndexFunc(ms, func(m *member) bool { return m != l })
	f := ms[idx]
	if err := f.g.Shutdown(); err != nil {
		t.Fatal(err)
	}
	ms[idx] = nil
	sum += applyN(t, ms, 5)
	// The appends to the stopped group wait there for it to start
	// (transport_early.go); past that they fail, and the leader's
	// replication to it waits for a reason to retry.
	time.Sleep(tpEarlyWait + time.Second)

	fsm := &countFSM{}
	g, err := f.node.mux.Start(noKeepAlive("catchup", f.node, fsm))
	if err != nil {
		t.Fatal(err)
	}
	ms[idx] = &member{node: f.node, g: g, fsm: fsm}
	converge(t, ms, fsmState{sum, 10}, 15*time.Second)
	if n := l.node.mux.transportStats().CatchUps; n == 0 {
		t.Fatal("the follower caught up without a catch-up barrier; the test no longer covers it")
	}
}
