package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"
)

// memSink is a raft.SnapshotSink in memory.
type memSink struct {
	bytes.Buffer
	closed, cancelled bool
}

func (s *memSink) ID() string     { return "mem" }
func (s *memSink) Close() error   { s.closed = true; return nil }
func (s *memSink) Cancel() error  { s.cancelled = true; return nil }
func (s *memSink) Bytes() []byte  { return s.Buffer.Bytes() }
func (s *memSink) String() string { return fmt.Sprintf("memSink(%d bytes)", s.Len()) }

func TestFSMAdapter(t *testing.T) {
	h := richLog(t)
	f := NewFSM(h.s)

	// Apply through raft.Log.
	b, _ := Encode(Entry{TimeMs: h.now, Cmd: CreateTopic{Name: "via-fsm", ID: topicID(20), Partitions: 1, ReplicationFactor: 1}})
	res := f.Apply(&raft.Log{Index: h.index + 1, Term: 1, Type: raft.LogCommand, Data: b})
	if r, ok := res.(Result); !ok || r.Err != nil || r.Topic == nil {
		t.Fatalf("%#v", res)
	}
	// Other entry types and configurations only advance the index.
	f.Apply(&raft.Log{Index: h.index + 2, Type: raft.LogNoop})
	f.StoreConfiguration(h.index+3, raft.Configuration{})
	if f.State().View().Index() != h.index+3 {
		t.Fatal(f.State().View().Index())
	}

	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// Applying after Snapshot does not change what Persist writes.
	want, _ := h.s.SnapshotBytes()
	b, _ = Encode(Entry{TimeMs: h.now, Cmd: DeleteTopic{TopicRef{Name: "via-fsm"}}})
	f.Apply(&raft.Log{Index: h.index + 4, Type: raft.LogCommand, Data: b})
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil || !sink.closed || sink.cancelled {
		t.Fatal(err, sink.closed, sink.cancelled)
	}
	snap.Release()
	if !bytes.Equal(sink.Bytes(), want) {
		t.Fatal("persisted snapshot is not the state at Snapshot()")
	}

	f2 := NewFSM(New(testOptions()))
	if err := f2.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if got, _ := f2.State().SnapshotBytes(); !bytes.Equal(got, want) {
		t.Fatal("restore through the FSM differs")
	}
	if f2.State().View().Topic("via-fsm") == nil {
		t.Fatal("restored state lacks the topic")
	}
}

// TestFSMRaftCluster runs three in-memory hashicorp/raft nodes: commands
// proposed on the leader come back as Results, every node's state is
// byte-identical, and a node restored from the leader's snapshot too.
func TestFSMRaftCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts raft nodes")
	}
	const n = 3
	type node struct {
		r     *raft.Raft
		fsm   *FSM
		snaps *raft.InmemSnapshotStore
	}
	var nodes []node
	var trans []*raft.InmemTransport
	var servers []raft.Server
	for i := 0; i < n; i++ {
		addr, tr := raft.NewInmemTransport(raft.ServerAddress(fmt.Sprintf("n%d", i)))
		trans = append(trans, tr)
		servers = append(servers, raft.Server{ID: raft.ServerID(addr), Address: addr, Suffrage: raft.Voter})
	}
	for i := range trans {
		for j := range trans {
			if i != j {
				trans[i].Connect(trans[j].LocalAddr(), trans[j])
			}
		}
	}
	for i := 0; i < n; i++ {
		conf := raft.DefaultConfig()
		conf.LocalID = servers[i].ID
		conf.HeartbeatTimeout = 50 * time.Millisecond
		conf.ElectionTimeout = 50 * time.Millisecond
		conf.LeaderLeaseTimeout = 50 * time.Millisecond
		conf.CommitTimeout = 5 * time.Millisecond
		conf.LogOutput = io.Discard
		logs, stable, snaps := raft.NewInmemStore(), raft.NewInmemStore(), raft.NewInmemSnapshotStore()
		if err := raft.BootstrapCluster(conf, logs, stable, snaps, trans[i], raft.Configuration{Servers: servers}); err != nil {
			t.Fatal(err)
		}
		fsm := NewFSM(New(testOptions()))
		r, err := raft.NewRaft(conf, fsm, logs, stable, snaps, trans[i])
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, node{r: r, fsm: fsm, snaps: snaps})
	}
	defer func() {
		for _, nd := range nodes {
			_ = nd.r.Shutdown().Error()
		}
	}()

	var leader *raft.Raft
	deadline := time.Now().Add(10 * time.Second)
	for leader == nil {
		for _, nd := range nodes {
			if nd.r.State() == raft.Leader {
				leader = nd.r
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no leader")
		}
		time.Sleep(10 * time.Millisecond)
	}

	now := time.Now().UnixMilli()
	propose := func(c Command) Result {
		t.Helper()
		b, err := Encode(Entry{TimeMs: now, Cmd: c})
		if err != nil {
			t.Fatal(err)
		}
		f := leader.Apply(b, 5*time.Second)
		if err := f.Error(); err != nil {
			t.Fatal(err)
		}
		r := f.Response().(Result)
		if r.Index != f.Index() {
			t.Fatalf("result index %d, log index %d", r.Index, f.Index())
		}
		return r
	}
	for i := int32(1); i <= 3; i++ {
		if r := propose(RegisterBroker{NodeID: i, Incarnation: incarnation(byte(i)), KafkaAddr: fmt.Sprintf("k%d:9092", i), RPCAddr: fmt.Sprintf("n%d", i), Rack: fmt.Sprintf("r%d", i)}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	r := propose(CreateTopic{Name: "t", ID: topicID(1), Partitions: 6, ReplicationFactor: 3, PlacementSeed: 17})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := propose(CreateTopic{Name: "t", ID: topicID(2), Partitions: 1, ReplicationFactor: 1}); !errors.Is(r.Err, kerr.TopicAlreadyExists) {
		t.Fatal(r.Err)
	}
	last := propose(SetClusterProperties{ExpectedVersion: 0, Changes: []PropertyChange{{Name: "default_topic_partitions", Value: "6"}}})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var want []byte
	for i, nd := range nodes {
		v, err := nd.fsm.State().WaitIndex(ctx, last.Index)
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		snap := mustSnap(v)
		if want == nil {
			want = snap
		} else if !bytes.Equal(snap, want) {
			t.Fatalf("node %d's state differs", i)
		}
	}

	// A raft snapshot of the leader restores into a fresh FSM.
	var leaderNode node
	for _, nd := range nodes {
		if nd.r == leader {
			leaderNode = nd
		}
	}
	if err := leader.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	metas, err := leaderNode.snaps.List()
	if err != nil || len(metas) == 0 {
		t.Fatal(metas, err)
	}
	_, rc, err := leaderNode.snaps.Open(metas[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	fresh := NewFSM(New(testOptions()))
	if err := fresh.Restore(rc); err != nil {
		t.Fatal(err)
	}
	if got := mustSnap(fresh.State().View()); !bytes.Equal(got, want) {
		t.Fatal("state restored from the raft snapshot differs")
	}
}
