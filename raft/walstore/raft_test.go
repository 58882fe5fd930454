package walstore

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"
)

// countFSM counts applied commands; its snapshot is the count.
type countFSM struct {
	mu sync.Mutex
	n  uint64
}

func (f *countFSM) Apply(l *hraft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	return f.n
}

func (f *countFSM) count() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

func (f *countFSM) Snapshot() (hraft.FSMSnapshot, error) { return countSnap(f.count()), nil }

func (f *countFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var b [8]byte
	if _, err := io.ReadFull(rc, b[:]); err != nil {
		return err
	}
	f.mu.Lock()
	f.n = binary.BigEndian.Uint64(b[:])
	f.mu.Unlock()
	return nil
}

type countSnap uint64

func (c countSnap) Persist(sink hraft.SnapshotSink) error {
	if _, err := sink.Write(binary.BigEndian.AppendUint64(nil, uint64(c))); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (countSnap) Release() {}

type raftNode struct {
	id    hraft.ServerID
	dir   string
	store *Store
	snaps hraft.SnapshotStore
	trans *hraft.InmemTransport
	fsm   *countFSM
	r     *hraft.Raft
}

func startRaft(t *testing.T, n *raftNode) {
	t.Helper()
	conf := hraft.DefaultConfig()
	conf.LocalID = n.id
	conf.HeartbeatTimeout = 100 * time.Millisecond
	conf.ElectionTimeout = 100 * time.Millisecond
	conf.LeaderLeaseTimeout = 50 * time.Millisecond
	conf.CommitTimeout = 5 * time.Millisecond
	conf.SnapshotThreshold = 40
	conf.SnapshotInterval = 100 * time.Millisecond
	conf.TrailingLogs = 10
	conf.Logger = hclog.NewNullLogger()
	gs := n.store.Group("raft-" + string(n.id))
	n.fsm = &countFSM{}
	r, err := hraft.NewRaft(conf, n.fsm, gs, gs, n.snaps, n.trans)
	if err != nil {
		t.Fatalf("NewRaft %s: %v", n.id, err)
	}
	n.r = r
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRaftOnWalstore runs a three-node hashicorp/raft cluster whose log
// and stable stores are GroupStores, with snapshots compacting the logs,
// restarts one node from its reopened store and checks it rejoins with
// its log and term and catches up.
func TestRaftOnWalstore(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a Raft cluster")
	}
	nodes := make([]*raftNode, 3)
	var servers []hraft.Server
	for i := range nodes {
		n := &raftNode{id: hraft.ServerID(fmt.Sprintf("n%d", i)), dir: t.TempDir()}
		n.store = openT(t, n.dir, nil, 64<<10)
		snaps, err := hraft.NewFileSnapshotStore(n.dir, 2, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		n.snaps = snaps
		_, n.trans = hraft.NewInmemTransport(hraft.ServerAddress(n.id))
		nodes[i] = n
		servers = append(servers, hraft.Server{ID: n.id, Address: hraft.ServerAddress(n.id)})
	}
	for _, a := range nodes {
		for _, b := range nodes {
			if a != b {
				a.trans.Connect(b.trans.LocalAddr(), b.trans)
			}
		}
	}
	for _, n := range nodes {
		startRaft(t, n)
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			n.r.Shutdown().Error()
			n.store.Close()
		}
	})
	if err := nodes[0].r.BootstrapCluster(hraft.Configuration{Servers: servers}).Error(); err != nil {
		t.Fatal(err)
	}
	leader := func() *raftNode {
		var l *raftNode
		waitFor(t, "a leader", func() bool {
			for _, n := range nodes {
				if n.r.State() == hraft.Leader {
					l = n
					return true
				}
			}
			return false
		})
		return l
	}
	apply := func(count int) {
		for range count {
			var err error
			for try := 0; try < 50; try++ {
				if err = leader().r.Apply([]byte("x"), 5*time.Second).Error(); err == nil {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
		}
	}
	// An Apply retried after a leadership change may have committed twice,
	// so nodes are compared with each other, not with the number of calls.
	converged := func(atLeast uint64) func() bool {
		return func() bool {
			c := nodes[0].fsm.count()
			for _, n := range nodes {
				if n.fsm.count() != c {
					return false
				}
			}
			return c >= atLeast
		}
	}
	apply(100)
	waitFor(t, "all nodes to apply 100", converged(100))

	// Restart a follower from its store.
	var f *raftNode
	for _, n := range leaderless(nodes, leader()) {
		f = n
		break
	}
	// A snapshot compacts the follower's log (DeleteRange of the head).
	if err := f.r.Snapshot().Error(); err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	if err := f.r.Shutdown().Error(); err != nil {
		t.Fatal(err)
	}
	gs := f.store.Group("raft-" + string(f.id))
	lastBefore, _ := gs.LastIndex()
	firstBefore, _ := gs.FirstIndex()
	termBefore, err := gs.GetUint64([]byte("CurrentTerm"))
	if err != nil || lastBefore == 0 {
		t.Fatalf("before restart: last index %d, term %d, %v", lastBefore, termBefore, err)
	}
	if firstBefore <= 1 {
		t.Fatalf("first index %d: snapshots never compacted the log", firstBefore)
	}
	if err := f.store.Close(); err != nil {
		t.Fatal(err)
	}
	f.store = openT(t, f.dir, nil, 64<<10)
	gs = f.store.Group("raft-" + string(f.id))
	if last, _ := gs.LastIndex(); last != lastBefore {
		t.Fatalf("reopened log ends at %d, was %d", last, lastBefore)
	}
	if term, _ := gs.GetUint64([]byte("CurrentTerm")); term != termBefore {
		t.Fatalf("reopened term %d, was %d", term, termBefore)
	}
	for _, n := range nodes {
		if n != f {
			n.trans.Disconnect(f.trans.LocalAddr())
		}
	}
	_, f.trans = hraft.NewInmemTransport(hraft.ServerAddress(f.id))
	for _, n := range nodes {
		if n != f {
			n.trans.Connect(f.trans.LocalAddr(), f.trans)
			f.trans.Connect(n.trans.LocalAddr(), n.trans)
		}
	}
	startRaft(t, f)
	apply(100)
	waitFor(t, "the restarted node to catch up", converged(200))
	if last, _ := gs.LastIndex(); last <= lastBefore {
		t.Fatalf("restarted node's log did not grow: %d", last)
	}
	if st := f.store.Stats(); st.Fsyncs == 0 {
		t.Fatal("no fsyncs recorded")
	}
}

func leaderless(nodes []*raftNode, leader *raftNode) []*raftNode {
	var out []*raftNode
	for _, n := range nodes {
		if n != leader {
			out = append(out, n)
		}
	}
	return out
}
