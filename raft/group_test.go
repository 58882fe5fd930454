package raft

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// TestManyGroups runs 50 groups over 3 nodes sharing one listener each:
// every group elects, takes entries, and every node's FSM converges.
func TestManyGroups(t *testing.T) {
	const groups, entries = 50, 5
	nodes := newNodes(t, 3)
	// hashicorp's 1 s timers: 150 Raft instances under -race on 2 cores
	// would miss 500 ms heartbeats.
	cfg := func(group string, n *node, sm StateMachine) Config {
		c := fastConfig(group, n, sm)
		c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
		c.CommitTimeout = 50 * time.Millisecond
		return c
	}
	all := make([][]*member, groups)
	for i := range all {
		all[i] = startGroup(t, nodes, fmt.Sprintf("g-%03d", i), cfg)
	}
	sums := make([]uint64, groups)
	t.Run("apply", func(t *testing.T) {
		for i, ms := range all {
			t.Run(ms[0].g.Name(), func(t *testing.T) {
				t.Parallel()
				sums[i] = applyN(t, ms, entries)
			})
		}
	})
	if t.Failed() {
		return
	}
	for i, ms := range all {
		converge(t, ms, fsmState{sums[i], entries}, 10*time.Second)
	}

	// Every group was registered on every mux, and node 0 exposes one
	// applied-index series per group.
	fams, err := nodes[0].reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	if got := len(byName["weir_raft_applied_index"].GetMetric()); got != groups {
		t.Errorf("weir_raft_applied_index has %d series, want %d", got, groups)
	}
	if got := len(byName["weir_raft_leader_changes_total"].GetMetric()); got != groups {
		t.Errorf("weir_raft_leader_changes_total has %d series, want %d", got, groups)
	}
	if h := byName["weir_raft_commit_latency_seconds"]; h == nil {
		t.Errorf("no commit latency histogram on node 0")
	}
}

// TestRestartRejoins stops one member, moves the group on without it, and
// starts it again from its directory: no second bootstrap, and it catches up.
func TestRestartRejoins(t *testing.T) {
	nodes := newNodes(t, 3)
	ms := startGroup(t, nodes, "restart", fastConfig)
	sum := applyN(t, ms, 10)
	converge(t, ms, fsmState{sum, 10}, 10*time.Second)

	l := leader(t, ms, 5*time.Second)
	var f *member
	for _, m := range ms {
		if m != l {
			f = m
			break
		}
	}
	idx := -1
	for i, m := range ms {
		if m == f {
			idx = i
		}
	}
	if err := f.g.Shutdown(); err != nil {
		t.Fatal(err)
	}
	ms[idx] = nil
	sum += applyN(t, ms, 10)
	if _, err := os.Stat(filepath.Join(f.node.dir, sharedLogDir)); err != nil {
		t.Fatal(err)
	}

	fsm := &countFSM{}
	g, err := f.node.mux.Start(fastConfig("restart", f.node, fsm))
	if err != nil {
		t.Fatal(err)
	}
	if !g.HasExistingState() {
		t.Fatal("restarted group found no state on disk")
	}
	if err := g.Bootstrap(servers(nodes)); !errors.Is(err, ErrExistingState) {
		t.Fatalf("Bootstrap on a restarted group: %v, want ErrExistingState", err)
	}
	ms[idx] = &member{node: f.node, g: g, fsm: fsm}
	converge(t, ms, fsmState{sum, 20}, 10*time.Second)
	conf, err := g.Configuration()
	if err != nil || len(conf) != 3 {
		t.Fatalf("configuration after restart: %v %v", conf, err)
	}
}

// TestSnapshotRestore forces a snapshot with trailing logs trimmed, so a
// member added afterwards can only catch up by InstallSnapshot + Restore,
// and a restarted member restores from its own snapshot at start.
func TestSnapshotRestore(t *testing.T) {
	nodes := newNodes(t, 4)
	cfg := func(group string, n *node, sm StateMachine) Config {
		c := fastConfig(group, n, sm)
		c.TrailingLogs = 2
		c.SnapshotThreshold = 1 << 20 // only the forced snapshots
		return c
	}
	ms := startGroup(t, nodes[:3], "snap", cfg)
	sum := applyN(t, ms, 20)
	converge(t, ms, fsmState{sum, 20}, 10*time.Second)
	for _, m := range ms {
		if err := m.g.Snapshot(); err != nil {
			t.Fatalf("snapshot on %s: %v", m.node.id, err)
		}
		snaps, _ := os.ReadDir(filepath.Join(m.node.dir, "snap", "snapshots"))
		if len(snaps) == 0 {
			t.Fatalf("no snapshot on disk on %s", m.node.id)
		}
	}

	// A new member: the leader has trimmed the log, so it must install the
	// snapshot.
	fsm := &countFSM{}
	g, err := nodes[3].mux.Start(cfg("snap", nodes[3], fsm))
	if err != nil {
		t.Fatal(err)
	}
	if g.HasExistingState() {
		t.Fatal("new member has state")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := leader(t, ms, 5*time.Second).g.AddVoter(ctx, nodes[3].id, nodes[3].mux.Addr()); err != nil {
		t.Fatal(err)
	}
	ms = append(ms, &member{node: nodes[3], g: g, fsm: fsm})
	converge(t, ms, fsmState{sum, 20}, 10*time.Second)
	if n := fsm.restoreCount(); n != 1 {
		t.Errorf("new member restored %d snapshots, want 1 (InstallSnapshot)", n)
	}

	// A restarted member restores its own snapshot before any leader contact.
	r := ms[1]
	if err := r.g.Shutdown(); err != nil {
		t.Fatal(err)
	}
	fsm2 := &countFSM{}
	g2, err := r.node.mux.Start(cfg("snap", r.node, fsm2))
	if err != nil {
		t.Fatal(err)
	}
	if st := fsm2.state(); st != (fsmState{sum, 20}) || fsm2.restoreCount() != 1 {
		t.Errorf("restarted member at start: %+v after %d restores, want %+v after 1", st, fsm2.restoreCount(), fsmState{sum, 20})
	}
	ms[1] = &member{node: r.node, g: g2, fsm: fsm2}
	sum += applyN(t, ms, 5)
	converge(t, ms, fsmState{sum, 25}, 10*time.Second)
}

// TestLeaderFailover shuts the leader's node down; the others elect a new
// leader, which takes writes, and a follower's Apply names it.
func TestLeaderFailover(t *testing.T) {
	nodes := newNodes(t, 3)
	ms := startGroup(t, nodes, "failover", fastConfig)
	sum := applyN(t, ms, 5)
	converge(t, ms, fsmState{sum, 5}, 10*time.Second)

	old := leader(t, ms, 5*time.Second)
	select {
	case isLeader := <-old.g.LeaderChanges():
		if !isLeader {
			t.Errorf("leader's LeaderChanges said false")
		}
	case <-time.After(5 * time.Second):
		t.Errorf("no LeaderChanges value on the leader")
	}
	if err := old.node.mux.Close(); err != nil {
		t.Fatal(err)
	}
	rest := make([]*member, 0, 2)
	for _, m := range ms {
		if m != old {
			rest = append(rest, m)
		}
	}
	nl := leader(t, rest, 10*time.Second)
	select {
	case isLeader := <-nl.g.LeaderChanges():
		if !isLeader {
			t.Errorf("new leader's LeaderChanges said false")
		}
	case <-time.After(5 * time.Second):
		t.Errorf("no LeaderChanges value on the new leader")
	}
	sum += applyN(t, rest, 5)
	converge(t, rest, fsmState{sum, 10}, 10*time.Second)

	var follower *member
	for _, m := range rest {
		if m != nl {
			follower = m
		}
	}
	waitFor(t, 5*time.Second, "follower to know the leader", func() bool {
		id, _ := follower.g.Leader()
		return id == nl.node.id
	})
	_, _, err := follower.g.Apply(context.Background(), command(1))
	var nle *NotLeaderError
	if !errors.As(err, &nle) || !errors.Is(err, ErrNotLeader) {
		t.Fatalf("Apply on a follower: %v, want *NotLeaderError", err)
	}
	if nle.LeaderID != nl.node.id || nle.LeaderAddr != nl.node.mux.Addr() {
		t.Errorf("NotLeaderError names %s at %s, want %s at %s", nle.LeaderID, nle.LeaderAddr, nl.node.id, nl.node.mux.Addr())
	}
}

// TestLeaderConfigurationFollowsMembership: the leader keeps its answer
// to Configuration while nothing changes, and every membership change is
// in the next answer.
func TestLeaderConfigurationFollowsMembership(t *testing.T) {
	nodes := newNodes(t, 3)
	ms := startGroup(t, nodes[:2], "members", fastConfig)
	l := leader(t, ms, 5*time.Second)
	applyN(t, ms, 3)

	a, err := l.g.Configuration()
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.g.Configuration()
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 2 || len(b) != 2 || &a[0] != &b[0] {
		t.Fatalf("an idle leader's configuration was read again: %v then %v", a, b)
	}

	third := nodes[2]
	if _, err := third.mux.Start(fastConfig("members", third, &countFSM{})); err != nil {
		t.Fatal(err)
	}
	want := func(what string, servers []Server) {
		t.Helper()
		got, err := l.g.Configuration()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, servers) {
			t.Fatalf("after %s: configuration %v, want %v", what, got, servers)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := servers(nodes)
	if err := l.g.AddNonvoter(ctx, third.id, third.mux.Addr()); err != nil {
		t.Fatal(err)
	}
	want("adding a non-voter", []Server{s[0], s[1], {ID: third.id, Addr: third.mux.Addr()}})
	if err := l.g.AddVoter(ctx, third.id, third.mux.Addr()); err != nil {
		t.Fatal(err)
	}
	want("promoting it", s)
	if err := l.g.RemoveServer(ctx, third.id); err != nil {
		t.Fatal(err)
	}
	want("removing it", s[:2])
}
