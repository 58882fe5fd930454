package raft

import (
	"context"
	"encoding/binary"
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

// Helpers of the shared transport's tests: nodes (a mux each, on
// loopback, with a fault switch on their connections), real hashicorp/raft
// groups over them with in-memory stores, and a fake peer that speaks the
// transport's frames (transport_wire_test.go).

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

func (r *logRecorder) WithGroup(string) slog.Handler { return r }

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
			switch {
			case label == "" && m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount())
			case label == "" && m.Counter != nil && len(m.GetLabel()) == 0:
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}

// probeVote sends a RequestVote for the probe's group to n.
func probeVote(gt *groupTransport, n *tpNode) error {
	var resp hraft.RequestVoteResponse
	return gt.RequestVote(hraft.ServerID(n.id), hraft.ServerAddress(n.member()),
		&hraft.RequestVoteRequest{RPCHeader: testHeader(), Term: 1}, &resp)
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
