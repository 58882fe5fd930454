package raft

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// Tests of the shared transport with real hashicorp/raft instances (in
// memory stores) on several muxes on loopback.

type tpNode struct {
	id       string
	identity string
	mux      *Mux
	hub      *transportHub
	reg      *prometheus.Registry
	faults   *tpFaults
	logs     *logRecorder
}

func (n *tpNode) member() string { return MemberAddr(n.mux.Addr(), n.identity) }

// tpFaults makes every connection of a node a black hole on demand: bytes
// written vanish and bytes read are dropped, in both directions, as a
// network partition would (no reset, no error: only silence).
type tpFaults struct{ blackhole atomic.Bool }

func (f *tpFaults) wrap(c net.Conn) net.Conn { return &faultConn{Conn: c, f: f} }

type faultConn struct {
	net.Conn
	f *tpFaults
}

func (c *faultConn) Read(p []byte) (int, error) {
	for {
		n, err := c.Conn.Read(p)
		if err != nil || !c.f.blackhole.Load() {
			return n, err
		}
	}
}

func (c *faultConn) Write(p []byte) (int, error) {
	if c.f.blackhole.Load() {
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// logRecorder keeps the messages logged through it.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.msgs = append(r.msgs, rec.Message)
	r.mu.Unlock()
	return nil
}
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *logRecorder) WithGroup(string) slog.Handler      { return r }
func (r *logRecorder) contains(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.msgs {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

func newTpNodes(t testing.TB, n int) []*tpNode {
	t.Helper()
	nodes := make([]*tpNode, n)
	for i := range nodes {
		nodes[i] = newTpNode(t, fmt.Sprintf("n%d", i))
	}
	return nodes
}

func newTpNode(t testing.TB, id string) *tpNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nd := &tpNode{id: id, identity: "inc-" + id, reg: prometheus.NewRegistry(), faults: &tpFaults{}, logs: &logRecorder{}}
	nd.mux, err = NewMux(ln, MuxConfig{Logger: testLogger(t), Registerer: nd.reg,
		HeaderTimeout: 300 * time.Millisecond, Identity: nd.identity})
	if err != nil {
		t.Fatal(err)
	}
	if nd.hub, err = nd.mux.transport(); err != nil {
		t.Fatal(err)
	}
	nd.hub.wrap = nd.faults.wrap
	t.Cleanup(func() {
		if err := nd.mux.Close(); err != nil {
			t.Errorf("closing mux %s: %v", nd.id, err)
		}
	})
	return nd
}

// tpFSM sums the uint64s it applies; snapshots carry the sum and count.
type tpFSM struct {
	mu         sync.Mutex
	sum, count uint64
	restores   int
	// seen drops a command committed twice: an Apply retried after an
	// error whose outcome was unknown (a leader change) may be in the
	// log twice, as a producer's retried batch may.
	seen map[uint64]bool
}

func (f *tpFSM) Apply(l *hraft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := binary.BigEndian.Uint64(l.Data[8:])
	if f.seen == nil {
		f.seen = make(map[uint64]bool)
	}
	if f.seen[id] {
		return nil
	}
	f.seen[id] = true
	f.sum += binary.BigEndian.Uint64(l.Data)
	f.count++
	return nil
}

func (f *tpFSM) state() (uint64, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sum, f.count
}

func (f *tpFSM) Snapshot() (hraft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := binary.BigEndian.AppendUint64(nil, f.sum)
	return countSnapshotTp(binary.BigEndian.AppendUint64(b, f.count)), nil
}

func (f *tpFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil || len(b) != 16 {
		return fmt.Errorf("bad snapshot (%d bytes): %v", len(b), err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sum, f.count = binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:])
	f.restores++
	return nil
}

type countSnapshotTp []byte

func (s countSnapshotTp) Persist(sink hraft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}
func (countSnapshotTp) Release() {}

// tpMember is one node's replica of a group.
type tpMember struct {
	node *tpNode
	r    *hraft.Raft
	gt   *groupTransport
	fsm  *tpFSM
	once sync.Once
}

func (m *tpMember) shutdown() {
	m.once.Do(func() { m.r.Shutdown().Error() })
}

// tpTimers: 1 s heartbeat and election timeouts keep hundreds of Raft
// instances under -race on two cores from missing heartbeats.
func tpTimers(c *hraft.Config) {
	c.HeartbeatTimeout, c.ElectionTimeout = time.Second, time.Second
	c.LeaderLeaseTimeout, c.CommitTimeout = 500*time.Millisecond, 100*time.Millisecond
}

func startTpMember(t testing.TB, n *tpNode, group string, tune func(*hraft.Config)) *tpMember {
	t.Helper()
	gt, err := n.mux.groupTransport(group, TransportOptions{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c := hraft.DefaultConfig()
	c.LocalID = hraft.ServerID(n.id)
	c.Logger = newHCLog(slog.New(n.logs), "raft")
	tpTimers(c)
	if tune != nil {
		tune(c)
	}
	store := hraft.NewInmemStore()
	fsm := &tpFSM{}
	r, err := hraft.NewRaft(c, fsm, store, store, hraft.NewInmemSnapshotStore(), gt)
	if err != nil {
		t.Fatal(err)
	}
	m := &tpMember{node: n, r: r, gt: gt, fsm: fsm}
	t.Cleanup(m.shutdown)
	return m
}

func startTpGroup(t testing.TB, nodes []*tpNode, group string, tune func(*hraft.Config)) []*tpMember {
	t.Helper()
	conf := hraft.Configuration{}
	for _, n := range nodes {
		conf.Servers = append(conf.Servers, hraft.Server{Suffrage: hraft.Voter, ID: hraft.ServerID(n.id), Address: hraft.ServerAddress(n.member())})
	}
	ms := make([]*tpMember, len(nodes))
	for i, n := range nodes {
		ms[i] = startTpMember(t, n, group, tune)
		if err := ms[i].r.BootstrapCluster(conf).Error(); err != nil {
			t.Fatal(err)
		}
	}
	return ms
}

// tpLeader is the one member that leads, or nil.
func tpLeader(ms []*tpMember) *tpMember {
	var l *tpMember
	for _, m := range ms {
		if m != nil && m.r.State() == hraft.Leader {
			if l != nil {
				return nil
			}
			l = m
		}
	}
	return l
}

func waitTpLeader(t testing.TB, ms []*tpMember, timeout time.Duration) *tpMember {
	t.Helper()
	var l *tpMember
	waitFor(t, timeout, "a leader", func() bool { l = tpLeader(ms); return l != nil })
	return l
}

// tpCmd adds v under a random id (tpFSM applies each id once).
func tpCmd(v uint64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, v), rand.Uint64())
}

// tpApply applies v through the current leader, retrying across
// elections until it succeeds.
func tpApply(t testing.TB, ms []*tpMember, v uint64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		l := waitTpLeader(t, ms, 15*time.Second)
		err := l.r.Apply(tpCmd(v), 5*time.Second).Error()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("apply on %s: %v", l.node.id, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func tpConverge(t testing.TB, ms []*tpMember, sum, count uint64, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, fmt.Sprintf("every FSM at sum %d count %d", sum, count), func() bool {
		for _, m := range ms {
			if m == nil {
				continue
			}
			if s, c := m.fsm.state(); s != sum || c != count {
				return false
			}
		}
		return true
	})
}

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
	for i := range all {
		all[i] = startTpGroup(t, nodes, fmt.Sprintf("p-%04d", i), nil)
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
	// A peer gets at most one batch per tick, whatever the number of
	// groups, so groups per frame is the heartbeat rate to a peer times
	// the tick (here ~67 leaders per node, a heartbeat each 100–200 ms:
	// ~5 per frame; with 1,000s of groups, 1,000s per second per peer,
	// the frames stay at 100/s).
	links := uint64(len(nodes) * (len(nodes) - 1))
	if limit := links * uint64(1.5*3*float64(time.Second/tpHeartbeatTick)); frames > limit {
		t.Errorf("%d heartbeat frames in 3 s on %d links: more than one per tick", frames, links)
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

// gatherValue reads one series' value from reg (-1 if absent).
func gatherValue(t testing.TB, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if label == "" || l.GetName() == label && l.GetValue() == value {
					switch {
					case m.Counter != nil:
						return m.GetCounter().GetValue()
					case m.Gauge != nil:
						return m.GetGauge().GetValue()
					case m.Histogram != nil:
						return float64(m.GetHistogram().GetSampleCount())
					}
				}
			}
			if label == "" && m.Histogram != nil {
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return -1
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
	for _, m := range a {
		m.shutdown() // closes its transport
	}
	for v := uint64(2); v <= 5; v++ {
		tpApply(t, b, v)
	}
	tpConverge(t, b, 15, 5, 10*time.Second)
	for i, n := range nodes {
		if d := n.mux.transportStats().Dials; d != dials[i] {
			t.Errorf("%s dialed %d more connections after a group closed", n.id, d-dials[i])
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

// probeVote sends a RequestVote for the probe's group to n.
func probeVote(gt *groupTransport, n *tpNode) error {
	var resp hraft.RequestVoteResponse
	return gt.RequestVote(hraft.ServerID(n.id), hraft.ServerAddress(n.member()),
		&hraft.RequestVoteRequest{RPCHeader: testHeader(), Term: 1}, &resp)
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

// TestTransportPipelineOrder: futures reach Consumer() in issue order
// although the peer answers in reverse, and Close fails those in flight.
func TestTransportPipelineOrder(t *testing.T) {
	nodes := newTpNodes(t, 1)
	gt, err := nodes[0].mux.groupTransport("pipe", TransportOptions{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer gt.Close()
	const n = tpPipelineDepth
	hold := make(chan struct{})
	addr := fakePeer(t, func(frames []tpHeader, reply func(tpHeader, *hraft.AppendEntriesResponse)) {
		if len(frames) != n {
			return
		}
		<-hold
		for i := len(frames) - 1; i >= 0; i-- { // newest first
			reply(frames[i], &hraft.AppendEntriesResponse{Term: 1, LastLog: uint64(i), Success: true})
		}
	})
	p, err := gt.AppendEntriesPipeline("peer", hraft.ServerAddress(addr))
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := p.AppendEntries(&hraft.AppendEntriesRequest{Term: 1, PrevLogEntry: uint64(i + 1), LeaderCommitIndex: 1},
			new(hraft.AppendEntriesResponse)); err != nil {
			t.Fatal(err)
		}
	}
	close(hold)
	for i := range n {
		select {
		case f := <-p.Consumer():
			if err := f.Error(); err != nil {
				t.Fatal(err)
			}
			if f.Request().PrevLogEntry != uint64(i+1) || f.Response().LastLog != uint64(i) {
				t.Fatalf("future %d: request %d response %d", i, f.Request().PrevLogEntry, f.Response().LastLog)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("future %d not delivered", i)
		}
	}

	// Close fails what is in flight (the fake peer no longer answers).
	f, err := p.AppendEntries(&hraft.AppendEntriesRequest{Term: 1, PrevLogEntry: 99, LeaderCommitIndex: 1}, new(hraft.AppendEntriesResponse))
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	errc := make(chan error, 1)
	go func() { errc <- f.Error() }()
	select {
	case err := <-errc:
		if !errors.Is(err, hraft.ErrPipelineShutdown) {
			t.Errorf("future after Close: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close left a future pending")
	}
}

// fakePeer accepts transport connections and calls serve with every
// AppendEntries frame received so far on a connection.
func fakePeer(t *testing.T, serve func([]tpHeader, func(tpHeader, *hraft.AppendEntriesResponse))) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				if _, _, err := readHeader(c, time.Second); err != nil {
					return
				}
				var wmu sync.Mutex
				reply := func(fh tpHeader, r *hraft.AppendEntriesResponse) {
					bufs, _ := responseFrame(tpAppend, fh.id, r)
					wmu.Lock()
					bufs.WriteTo(c)
					wmu.Unlock()
				}
				var seen []tpHeader
				for {
					fh, err := readTpHeader(c, false)
					if err != nil {
						return
					}
					if _, err := readTpBody(c, fh.n); err != nil {
						return
					}
					seen = append(seen, fh)
					serve(seen, reply)
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// TestTransportHeartbeatAnswers: a heartbeat is answered by the group's
// own Raft only: a group whose Raft is shut down (processHeartbeat does
// not answer) or not running gets an error, never a success.
func TestTransportHeartbeatAnswers(t *testing.T) {
	nodes := newTpNodes(t, 2)
	recv, err := nodes[1].mux.groupTransport("hb", TransportOptions{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer recv.Close()
	recv.SetHeartbeatHandler(func(hraft.RPC) {}) // never answers, like a shut-down Raft
	send, err := nodes[0].mux.groupTransport("hb", TransportOptions{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer send.Close()
	hb := &hraft.AppendEntriesRequest{RPCHeader: testHeader(), Term: 3, Leader: []byte(nodes[0].member())}
	var resp hraft.AppendEntriesResponse
	err = send.AppendEntries("n1", hraft.ServerAddress(nodes[1].member()), hb, &resp)
	if err == nil || !strings.Contains(err.Error(), "did not answer") {
		t.Errorf("heartbeat to a group that did not answer: %v", err)
	}
	recv.SetHeartbeatHandler(func(rpc hraft.RPC) {
		rpc.Respond(&hraft.AppendEntriesResponse{Term: 3, Success: true}, nil)
	})
	if err := send.AppendEntries("n1", hraft.ServerAddress(nodes[1].member()), hb, &resp); err != nil || !resp.Success {
		t.Errorf("heartbeat: %v %+v", err, resp)
	}
	recv.Close()
	err = send.AppendEntries("n1", hraft.ServerAddress(nodes[1].member()), hb, &resp)
	if err == nil || strings.Contains(err.Error(), "unexpected command") {
		t.Errorf("heartbeat to a closed group: %v", err)
	}
	// Without a heartbeat handler the heartbeat goes through Consumer().
	other, err := nodes[1].mux.groupTransport("hb2", TransportOptions{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	go func() {
		rpc := <-other.Consumer()
		rpc.Respond(&hraft.AppendEntriesResponse{Term: 4, Success: true}, nil)
	}()
	send2, err := nodes[0].mux.groupTransport("hb2", TransportOptions{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer send2.Close()
	if err := send2.AppendEntries("n1", hraft.ServerAddress(nodes[1].member()), hb, &resp); err != nil || resp.Term != 4 {
		t.Errorf("heartbeat via Consumer: %v %+v", err, resp)
	}
}

// An AppendEntries without entries is a lazy frame: it waits for the tick
// (an hour here) unless something urgent follows it on the connection,
// which takes it along, in order; its answer is lazy the same way.
func TestTransportLazyFrames(t *testing.T) {
	nodes := newTpNodes(t, 2)
	for _, n := range nodes {
		n.hub.tick = time.Hour
	}
	recv, err := nodes[1].mux.groupTransport("lazy", TransportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	defer close(done)
	go serveConsumer(recv.Consumer(), done)
	send, err := nodes[0].mux.groupTransport("lazy", TransportOptions{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer send.Close()
	p, err := send.AppendEntriesPipeline("n1", hraft.ServerAddress(nodes[1].member()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	keepAlive := &hraft.AppendEntriesRequest{RPCHeader: testHeader(), Term: 1, Leader: []byte("l"),
		PrevLogEntry: 1, PrevLogTerm: 1, LeaderCommitIndex: 1}
	if _, err := p.AppendEntries(keepAlive, new(hraft.AppendEntriesResponse)); err != nil {
		t.Fatal(err)
	}
	select {
	case f := <-p.Consumer():
		t.Fatalf("keep-alive answered before anything urgent (err %v)", f.Error())
	case <-time.After(200 * time.Millisecond):
	}
	if st := nodes[1].mux.transportStats(); st.FramesReceived != 0 {
		t.Fatalf("the lazy frame was sent: %+v", st)
	}
	withEntry := &hraft.AppendEntriesRequest{RPCHeader: testHeader(), Term: 1, Leader: []byte("l"),
		PrevLogEntry: 1, PrevLogTerm: 1, LeaderCommitIndex: 1,
		Entries: []*hraft.Log{{Index: 2, Term: 1, Type: hraft.LogCommand, Data: []byte("x")}}}
	if _, err := p.AppendEntries(withEntry, new(hraft.AppendEntriesResponse)); err != nil {
		t.Fatal(err)
	}
	for i, want := range []*hraft.AppendEntriesRequest{keepAlive, withEntry} {
		select {
		case f := <-p.Consumer():
			if err := f.Error(); err != nil {
				t.Fatalf("future %d: %v", i, err)
			}
			if f.Request() != want || !f.Response().Success {
				t.Fatalf("future %d out of order or failed: %+v", i, f.Response())
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("future %d not delivered after an urgent frame", i)
		}
	}
}

// A pipeline's futures time out in order on its one timer, each its
// timeout after it was issued.
func TestTransportPipelineTimeout(t *testing.T) {
	nodes := newTpNodes(t, 1)
	gt, err := nodes[0].mux.groupTransport("pipe", TransportOptions{Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer gt.Close()
	addr := fakePeer(t, func([]tpHeader, func(tpHeader, *hraft.AppendEntriesResponse)) {}) // never answers
	p, err := gt.AppendEntriesPipeline("peer", hraft.ServerAddress(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	start := time.Now()
	for i := range 2 {
		if _, err := p.AppendEntries(&hraft.AppendEntriesRequest{Term: 1, PrevLogEntry: uint64(i + 1), LeaderCommitIndex: 1,
			Entries: []*hraft.Log{{Index: uint64(i + 2), Term: 1}}}, new(hraft.AppendEntriesResponse)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i := range 2 {
		select {
		case f := <-p.Consumer():
			err := f.Error()
			if f.Request().PrevLogEntry != uint64(i+1) || err == nil {
				t.Fatalf("future %d: request %d, err %v", i, f.Request().PrevLogEntry, err)
			}
			if i == 0 && !errors.Is(err, errTpTimeout) {
				t.Fatalf("first future: %v, want a timeout", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("future %d never timed out", i)
		}
	}
	if el := time.Since(start); el < 300*time.Millisecond || el > 3*time.Second {
		t.Fatalf("timed out after %v with a 300ms timeout", el)
	}
}

// A batch's handlers share a goroutine, but one that blocks does not
// keep the others from running: they spill onto goroutines of their own.
func TestTransportHeartbeatSlowGroup(t *testing.T) {
	nodes := newTpNodes(t, 2)
	nodes[0].hub.tick = 100 * time.Millisecond // one batch for all
	release := make(chan struct{})
	ran := make(chan string, 4)
	var senders []*groupTransport
	for _, name := range []string{"slow", "a", "b"} {
		recv, err := nodes[1].mux.groupTransport(name, TransportOptions{})
		if err != nil {
			t.Fatal(err)
		}
		recv.SetHeartbeatHandler(func(rpc hraft.RPC) {
			if name == "slow" {
				<-release
			}
			ran <- name
			rpc.Respond(&hraft.AppendEntriesResponse{Term: 1, Success: true}, nil)
		})
		send, err := nodes[0].mux.groupTransport(name, TransportOptions{Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		senders = append(senders, send)
	}
	target := hraft.ServerAddress(nodes[1].member())
	errc := make(chan error, len(senders))
	for _, gt := range senders {
		go func() {
			var resp hraft.AppendEntriesResponse
			errc <- gt.AppendEntries("n1", target, &hraft.AppendEntriesRequest{RPCHeader: testHeader(), Term: 1,
				Leader: []byte(nodes[0].member())}, &resp)
		}()
		time.Sleep(10 * time.Millisecond) // "slow" first in the batch
	}
	for range 2 {
		select {
		case name := <-ran:
			if name == "slow" {
				t.Fatal("the slow handler ran before being released")
			}
		case <-time.After(3 * time.Second):
			t.Fatal("a blocked handler held up the rest of its batch")
		}
	}
	close(release)
	for range senders {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}
