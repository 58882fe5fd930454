package raft

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// Tests of the shared transport with real hashicorp/raft groups on several
// muxes on loopback: elections, replication, snapshots, faults.

// TestTransportManyGroups: 3 nodes × 200 groups elect, replicate, use a
// fixed number of connections whatever the number of groups, batch their
// heartbeats, and stay quiet (no elections) while idle.
func TestTransportManyGroups(t *testing.T) {
	groups := 200
	if testing.Short() {
		groups = 50
	}
	nodes := newTpNodes(t, 3)
	all := make([][]*tpMember, groups)
	// 2 s timers and lease, still shorter than a partition's: with 1 s
	// and a 500 ms lease, 600 groups under the race detector on a busy
	// 2-core machine stalled long enough for leaders to step down.
	timers := func(c *hraft.Config) {
		c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = 2*time.Second, 2*time.Second, 2*time.Second
	}
	for i := range all {
		all[i] = startTpGroup(t, nodes, fmt.Sprintf("p-%04d", i), timers)
	}
	start := time.Now()
	for _, ms := range all {
		waitTpLeader(t, ms, 60*time.Second)
	}
	t.Logf("%d groups elected in %v", groups, time.Since(start).Round(time.Millisecond))

	var wg sync.WaitGroup
	for _, ms := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for v := uint64(1); v <= 3; v++ {
				tpApply(t, ms, v)
			}
		}()
	}
	wg.Wait()
	for _, ms := range all {
		tpConverge(t, ms, 6, 3, 20*time.Second)
	}

	// Connections: per node, at most two lanes to each of its two peers
	// and two from each, whatever the number of groups.
	for _, n := range nodes {
		st := n.mux.transportStats()
		if st.OutboundConnections > 4 || st.InboundConnections > 4 {
			t.Errorf("%s: %d outbound, %d inbound connections for %d groups", n.id,
				st.OutboundConnections, st.InboundConnections, groups)
		}
		if st.Groups != groups {
			t.Errorf("%s: %d groups registered, want %d", n.id, st.Groups, groups)
		}
	}

	// Idle: no leader changes, and heartbeats travel many groups a frame.
	type lt struct {
		leader *tpMember
		term   uint64
	}
	before := make([]lt, groups)
	for i, ms := range all {
		l := waitTpLeader(t, ms, 10*time.Second)
		before[i] = lt{l, l.r.CurrentTerm()}
	}
	st0 := make([]TransportStats, len(nodes))
	for i, n := range nodes {
		st0[i] = n.mux.transportStats()
	}
	time.Sleep(3 * time.Second)
	changed := 0
	for i, ms := range all {
		if l := tpLeader(ms); l != before[i].leader || l.r.CurrentTerm() != before[i].term {
			changed++
		}
	}
	if changed > 0 {
		t.Errorf("%d of %d groups changed leader or term while idle", changed, groups)
	}
	var frames, hbs, fail uint64
	for i, n := range nodes {
		st := n.mux.transportStats()
		frames += st.HeartbeatFramesSent - st0[i].HeartbeatFramesSent
		hbs += st.HeartbeatsSent - st0[i].HeartbeatsSent
		fail += st.CallsFailed - st0[i].CallsFailed
		t.Logf("%s: %+v", n.id, st)
	}
	t.Logf("idle 3 s: %d heartbeats in %d frames (%.1f per frame), %d failed calls", hbs, frames, float64(hbs)/float64(max(frames, 1)), fail)
	// A peer gets at most one batch per delay, whatever the number of
	// groups, so groups per frame is the heartbeat rate to a peer times
	// the delay (here ~67 leaders per node, a heartbeat each 200–400 ms:
	// ~5 per frame; with 1,000s of groups, 1,000s per second per peer,
	// the frames stay at 100/s).
	links := uint64(len(nodes) * (len(nodes) - 1))
	if limit := links * uint64(1.5*3*float64(time.Second/tpDefaultDelay)); frames > limit {
		t.Errorf("%d heartbeat frames in 3 s on %d links: more than one per delay", frames, links)
	}
	if frames == 0 || hbs < 3*frames {
		t.Errorf("heartbeats not batched: %d heartbeats in %d frames", hbs, frames)
	}
	if fail != 0 {
		t.Errorf("%d calls failed while idle", fail)
	}
	// The collectors are registered and report the same.
	if n := gatherValue(t, nodes[0].reg, "weir_raft_transport_heartbeat_frames_total", "direction", "sent"); n == 0 {
		t.Error("weir_raft_transport_heartbeat_frames_total{direction=sent} is 0")
	}
}

// TestTransportSnapshotAndTransfer: a fresh node added after the log was
// compacted gets the state by InstallSnapshot over the transport;
// leadership transfer (TimeoutNow) works; pre-vote is on.
func TestTransportSnapshotAndTransfer(t *testing.T) {
	nodes := newTpNodes(t, 4)
	tune := func(c *hraft.Config) {
		c.TrailingLogs = 2
		c.SnapshotThreshold = 1 << 30 // only when asked
		c.SnapshotInterval = time.Hour
	}
	ms := startTpGroup(t, nodes[:3], "snap", tune)
	var sum uint64
	for v := uint64(1); v <= 20; v++ {
		tpApply(t, ms, v)
		sum += v
	}
	tpConverge(t, ms, sum, 20, 10*time.Second)
	l := waitTpLeader(t, ms, 10*time.Second)
	if err := l.r.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}

	fresh := startTpMember(t, nodes[3], "snap", tune)
	if err := l.r.AddVoter(hraft.ServerID(nodes[3].id), hraft.ServerAddress(nodes[3].member()), 0, 10*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	ms = append(ms, fresh)
	tpConverge(t, ms, sum, 20, 15*time.Second)
	fresh.fsm.mu.Lock()
	restores := fresh.fsm.restores
	fresh.fsm.mu.Unlock()
	if restores == 0 {
		t.Error("the new member caught up without InstallSnapshot")
	}
	tpApply(t, ms, 100)
	tpConverge(t, ms, sum+100, 21, 10*time.Second)

	// Leadership transfer.
	l = waitTpLeader(t, ms, 10*time.Second)
	if err := l.r.LeadershipTransfer().Error(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "another leader", func() bool {
		nl := tpLeader(ms)
		return nl != nil && nl != l
	})

	var _ hraft.WithPreVote = fresh.gt
	for _, n := range nodes {
		if n.logs.contains("pre-vote is disabled") {
			t.Errorf("%s: hashicorp/raft disabled pre-vote", n.id)
		}
	}
}

// TestTransportNodeClosed: with a node's mux closed, the others elect
// within a bound and calls to it fail fast instead of waiting out the
// timeout.
func TestTransportNodeClosed(t *testing.T) {
	nodes := newTpNodes(t, 3)
	const groups = 6
	all := make([][]*tpMember, groups)
	for i := range all {
		all[i] = startTpGroup(t, nodes, fmt.Sprintf("c-%d", i), nil)
		tpApply(t, all[i], 1)
	}
	// Close node 0 (its rafts first, as Mux.Close does for its groups).
	for _, ms := range all {
		ms[0].shutdown()
		ms[0] = nil
	}
	if err := nodes[0].mux.Close(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for _, ms := range all {
		waitTpLeader(t, ms, 15*time.Second)
		tpApply(t, ms, 2)
	}
	t.Logf("every group led and took an entry %v after the node closed", time.Since(start).Round(time.Millisecond))

	// Calls to the closed node fail fast: refused dials are remembered.
	gt := all[0][1].gt
	for i := range 20 {
		t0 := time.Now()
		var resp hraft.RequestVoteResponse
		err := gt.RequestVote("n0", hraft.ServerAddress(nodes[0].member()), &hraft.RequestVoteRequest{RPCHeader: testHeader(), Term: 1}, &resp)
		if err == nil {
			t.Fatal("RequestVote to a closed node succeeded")
		}
		if d := time.Since(t0); d > 500*time.Millisecond {
			t.Errorf("call %d to a closed node took %v: %v", i, d, err)
		}
	}
}

// TestTransportHeartbeatWaitsForPeer: a heartbeat to a member that
// refuses connections is held, not failed, and goes out as soon as the
// member listens again, so that hashicorp/raft's backoff of failed
// heartbeats does not keep a follower back from an outage waiting.
func TestTransportHeartbeatWaitsForPeer(t *testing.T) {
	n0 := newTpNode(t, "n0")
	gt, err := n0.mux.groupTransport("hb", TransportOptions{Timeout: 20 * time.Second, Delay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer gt.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	var resp hraft.AppendEntriesResponse
	done := make(chan error, 1)
	go func() {
		req := &hraft.AppendEntriesRequest{RPCHeader: testHeader(), Term: 1}
		done <- gt.AppendEntries("n1", hraft.ServerAddress(MemberAddr(addr, "inc-n1")), req, &resp)
	}()
	// Held again after each refused redial.
	waitFor(t, 10*time.Second, "the heartbeat held twice", func() bool { return n0.mux.transportStats().HeartbeatsHeld >= 2 })
	select {
	case err := <-done:
		t.Fatalf("the heartbeat to a refusing member returned: %v", err)
	default:
	}
	if !n0.mux.PeerRefused(addr) {
		t.Error("PeerRefused is false while the member refuses connections")
	}

	if ln, err = net.Listen("tcp", addr); err != nil {
		t.Skipf("the member's port was taken meanwhile: %v", err)
	}
	// Node n1 as newTpNode makes it, but on ln and without the fault
	// wrapper, which the hub's accept loop would read while it is set:
	// the held heartbeat dials at once.
	n1 := &tpNode{id: "n1", identity: "inc-n1", logs: &logRecorder{}}
	if n1.mux, err = NewMux(ln, MuxConfig{Logger: testLogger(t), Registerer: prometheus.NewRegistry(), Identity: n1.identity}); err != nil {
		t.Fatal(err)
	}
	defer n1.mux.Close()
	startTpMember(t, n1, "hb", nil)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("held heartbeat: %v", err)
		}
		if resp.Term != 1 || !resp.Success {
			t.Errorf("held heartbeat answered term %d success %v, want 1 true", resp.Term, resp.Success)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the held heartbeat did not go out within 5 s of the member listening")
	}
	if got := gatherValue(t, n0.reg, "weir_raft_transport_heartbeats_held_total", "", ""); got < 2 {
		t.Errorf("weir_raft_transport_heartbeats_held_total %v, want at least 2", got)
	}
}

// TestTransportPartition: a node whose traffic silently vanishes (no
// reset) loses the groups it led to the majority, and everything heals
// when the traffic flows again.
func TestTransportPartition(t *testing.T) {
	nodes := newTpNodes(t, 3)
	const groups = 6
	all := make([][]*tpMember, groups)
	for i := range all {
		all[i] = startTpGroup(t, nodes, fmt.Sprintf("x-%d", i), nil)
		tpApply(t, all[i], 1)
	}
	// Make node 0 lead as many groups as possible.
	for _, ms := range all {
		if l := waitTpLeader(t, ms, 10*time.Second); l != ms[0] {
			l.r.LeadershipTransferToServer(hraft.ServerID(nodes[0].id), hraft.ServerAddress(nodes[0].member())).Error()
		}
	}
	cut := nodes[0]
	cut.faults.blackhole.Store(true)
	start := time.Now()
	for i, ms := range all {
		waitFor(t, 15*time.Second, "the majority side to lead "+fmt.Sprint(i), func() bool {
			return ms[0].r.State() != hraft.Leader && tpLeader(ms[1:]) != nil
		})
		tpApply(t, ms[1:], 2)
	}
	t.Logf("minority leaders stepped down and the majority elected within %v", time.Since(start).Round(time.Millisecond))

	cut.faults.blackhole.Store(false)
	for _, ms := range all {
		tpApply(t, ms, 3)
		tpConverge(t, ms, 6, 3, 20*time.Second)
	}
}

// TestTransportGroupCloseIsolated: closing one group's transport fails
// only its calls; other groups keep using the same connections.
func TestTransportGroupCloseIsolated(t *testing.T) {
	nodes := newTpNodes(t, 3)
	a := startTpGroup(t, nodes, "a", nil)
	b := startTpGroup(t, nodes, "b", nil)
	tpApply(t, a, 1)
	tpApply(t, b, 1)
	dials := make([]uint64, len(nodes))
	for i, n := range nodes {
		dials[i] = n.mux.transportStats().Dials
	}
	termBefore := b[0].r.Stats()["term"]
	// A member of b that stands for election, even one that only
	// pre-votes (the term stays), dials lanes it never needed.
	var stood atomic.Bool
	for _, m := range b {
		obs := hraft.NewObserver(nil, false, func(o *hraft.Observation) bool {
			if st, ok := o.Data.(hraft.RaftState); ok && st == hraft.Candidate {
				stood.Store(true)
			}
			return false
		})
		m.r.RegisterObserver(obs)
		defer m.r.DeregisterObserver(obs)
	}
	for _, m := range a {
		m.shutdown() // closes its transport
	}
	for v := uint64(2); v <= 5; v++ {
		tpApply(t, b, v)
	}
	tpConverge(t, b, 15, 5, 10*time.Second)
	if termAfter := b[0].r.Stats()["term"]; termAfter != termBefore || stood.Load() {
		// An election in b (a loaded machine missing heartbeats) makes
		// its candidates dial lanes they never needed as followers: new
		// connections, but not because a's transport closed.
		t.Logf("a member of group b stood for election meanwhile (term %s -> %s); its new connections are not counted", termBefore, termAfter)
	} else {
		for i, n := range nodes {
			if d := n.mux.transportStats().Dials; d != dials[i] {
				t.Errorf("%s dialed %d more connections after a group closed", n.id, d-dials[i])
			}
		}
	}
	// The closed group's calls fail; a call to it from elsewhere gets an
	// error for it alone.
	var resp hraft.RequestVoteResponse
	if err := a[1].gt.RequestVote("n0", hraft.ServerAddress(nodes[0].member()), &hraft.RequestVoteRequest{Term: 1}, &resp); err == nil {
		t.Error("a call on a closed group's transport succeeded")
	}
	// A request for a group that does not start there is answered with
	// "not running" once the early wait is over.
	probe, err := nodes[1].mux.groupTransport("probe", TransportOptions{Timeout: 3 * tpEarlyWait})
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	var re *remoteError
	t0 := time.Now()
	if err := probeVote(probe, nodes[0]); !errors.As(err, &re) || !strings.Contains(err.Error(), "not running") {
		t.Errorf("call for a group not running there: %v", err)
	}
	if waited := time.Since(t0); waited < tpEarlyWait/2 {
		t.Errorf("a group not running was answered after %v, not held for the early wait", waited)
	}
}

// TestTransportEarlyRequest: a request that reaches a node before its
// group starts there is held and handed to the group once it starts, as
// a new group's campaign reaches replicas still opening.
func TestTransportEarlyRequest(t *testing.T) {
	nodes := newTpNodes(t, 2)
	probe, err := nodes[1].mux.groupTransport("early", TransportOptions{Timeout: 3 * tpEarlyWait})
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	answered := make(chan error, 1)
	var resp hraft.RequestVoteResponse
	go func() {
		answered <- probe.RequestVote(hraft.ServerID(nodes[0].id), hraft.ServerAddress(nodes[0].member()),
			&hraft.RequestVoteRequest{RPCHeader: testHeader(), Term: 7}, &resp)
	}()
	time.Sleep(tpEarlyWait / 4)
	late, err := nodes[0].mux.groupTransport("early", TransportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	select {
	case rpc := <-late.Consumer():
		req, ok := rpc.Command.(*hraft.RequestVoteRequest)
		if !ok || req.Term != 7 {
			t.Fatalf("the group got %#v", rpc.Command)
		}
		rpc.Respond(&hraft.RequestVoteResponse{Term: 7, Granted: true}, nil)
	case <-time.After(tpEarlyWait):
		t.Fatal("the early request never reached the group that started")
	}
	select {
	case err := <-answered:
		if err != nil || !resp.Granted || resp.Term != 7 {
			t.Fatalf("early request answered %+v, %v", resp, err)
		}
	case <-time.After(3 * tpEarlyWait):
		t.Fatal("the early request's caller got no answer")
	}
}

// TestTransportBadFrameAndIdentity: a malformed frame closes only its
// connection; a stream for another identity is refused by the mux and
// counted there, and calls to it fail fast.
func TestTransportBadFrameAndIdentity(t *testing.T) {
	nodes := newTpNodes(t, 3)
	ms := startTpGroup(t, nodes, "ok", nil)
	tpApply(t, ms, 1)
	target := nodes[0]
	before := target.mux.transportStats()

	for _, garbage := range [][]byte{
		{9, 1, 0, 0, 0, 1, 0, 0, 0, 0},                    // bad version
		{1, tpAppend, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0},    // bad group name
		{1, tpAppend, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff}, // too long
	} {
		c, err := net.Dial("tcp", target.mux.Addr())
		if err != nil {
			t.Fatal(err)
		}
		c.Write(append(encodeHeader(transportStream, target.identity), garbage...))
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := c.Read(make([]byte, 1)); err != io.EOF && !isReset(err) {
			t.Errorf("garbage %x: read %d, %v; want the connection closed", garbage, n, err)
		}
		c.Close()
	}
	if got := target.mux.transportStats().BadFrames - before.BadFrames; got != 3 {
		t.Errorf("%d bad frames counted, want 3", got)
	}
	// Other connections carried on.
	tpApply(t, ms, 2)
	tpConverge(t, ms, 3, 2, 10*time.Second)

	// Wrong identity: refused by the mux, the call fails, and the next
	// one fails at once without dialing.
	probe, err := nodes[1].mux.groupTransport("probe", TransportOptions{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	wrong := &tpNode{id: "n0", identity: "inc-other", mux: target.mux}
	if err := probeVote(probe, wrong); err == nil {
		t.Fatal("call to the wrong identity succeeded")
	}
	waitFor(t, 2*time.Second, "wrong_member counted", func() bool {
		return counterValue(target.mux.metrics.conns.WithLabelValues("rejected", rejectWrongMember)) >= 1
	})
	dials := nodes[1].mux.transportStats().Dials
	t0 := time.Now()
	if err := probeVote(probe, wrong); err == nil || time.Since(t0) > 200*time.Millisecond {
		t.Errorf("second call to the wrong identity: %v after %v", err, time.Since(t0))
	}
	if d := nodes[1].mux.transportStats().Dials; d != dials {
		t.Errorf("redialed a refused member within the backoff (%d dials)", d-dials)
	}
}
