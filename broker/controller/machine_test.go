package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/raft"
)

func TestMachineAdapter(t *testing.T) {
	h := richLog(t)
	m := NewMachine(h.s)

	b, _ := Encode(Entry{TimeMs: h.now, Cmd: CreateTopic{Name: "via-machine", ID: topicID(20), Partitions: 1, ReplicationFactor: 1}})
	res := m.Apply(raft.Entry{Index: h.index + 1, Term: 1, Data: b})
	if r, ok := res.(Result); !ok || r.Err != nil || r.Topic == nil {
		t.Fatalf("%#v", res)
	}
	// A membership change only advances the index.
	m.MembershipApplied(h.index + 2)
	if m.State().View().Index() != h.index+2 {
		t.Fatal(m.State().View().Index())
	}

	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// Applying after Snapshot does not change what Persist writes.
	want, _ := h.s.SnapshotBytes()
	b, _ = Encode(Entry{TimeMs: h.now, Cmd: DeleteTopic{TopicRef{Name: "via-machine"}}})
	m.Apply(raft.Entry{Index: h.index + 3, Term: 1, Data: b})
	var persisted bytes.Buffer
	if err := snap.Persist(&persisted); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	if !bytes.Equal(persisted.Bytes(), want) {
		t.Fatal("persisted snapshot is not the state at Snapshot()")
	}

	m2 := NewMachine(New(testOptions()))
	if err := m2.Restore(bytes.NewReader(persisted.Bytes())); err != nil {
		t.Fatal(err)
	}
	if got, _ := m2.State().SnapshotBytes(); !bytes.Equal(got, want) {
		t.Fatal("restore through the machine differs")
	}
	if m2.State().View().Topic("via-machine") == nil {
		t.Fatal("restored state lacks the topic")
	}
}

// TestMachineRaftCluster runs the controller machine in a three-node Raft
// group on loopback: commands proposed on the leader come back as
// Results at their log index, every node's state is byte-identical, and a
// node restarted from its snapshot and log comes back to the same state.
func TestMachineRaftCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts raft nodes")
	}
	const n = 3
	type node struct {
		mux   *raft.Mux
		group *raft.Group
		m     *Machine
		dir   string
	}
	nodes := make([]*node, n)
	var servers []raft.Server
	for i := range nodes {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		mux, err := raft.NewMux(ln, raft.MuxConfig{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { mux.Close() })
		nodes[i] = &node{mux: mux, dir: t.TempDir()}
		servers = append(servers, raft.Server{ID: strconv.Itoa(i), Addr: mux.Addr(), Voter: true})
	}
	start := func(i int) {
		t.Helper()
		nd := nodes[i]
		nd.m = NewMachine(New(testOptions()))
		g, err := nd.mux.Start(raft.Config{
			Group: "controller", NodeID: strconv.Itoa(i), Dir: nd.dir, StateMachine: nd.m,
			HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond, LeaderLeaseTimeout: 100 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		nd.group = g
	}
	for i := range nodes {
		start(i)
		if err := nodes[i].group.Bootstrap(servers); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, nd := range nodes {
			_ = nd.group.Shutdown()
		}
	})

	leader := func() *raft.Group {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			for _, nd := range nodes {
				if nd.group.IsLeader() {
					return nd.group
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatal("no leader within 10 s")
		return nil
	}
	now := time.Now().UnixMilli()
	propose := func(c Command) Result {
		t.Helper()
		b, err := Encode(Entry{TimeMs: now, Cmd: c})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, index, err := leader().Apply(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		r := resp.(Result)
		if r.Index != index {
			t.Fatalf("result index %d, log index %d", r.Index, index)
		}
		return r
	}
	for i := int32(1); i <= 3; i++ {
		if r := propose(RegisterBroker{NodeID: i, Incarnation: incarnation(byte(i)), KafkaAddr: fmt.Sprintf("k%d:9092", i), RPCAddr: fmt.Sprintf("n%d", i), Rack: fmt.Sprintf("r%d", i)}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if r := propose(CreateTopic{Name: "t", ID: topicID(1), Partitions: 6, ReplicationFactor: 3, PlacementSeed: 17}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := propose(CreateTopic{Name: "t", ID: topicID(2), Partitions: 1, ReplicationFactor: 1}); !errors.Is(r.Err, kerr.TopicAlreadyExists) {
		t.Fatal(r.Err)
	}
	last := propose(SetClusterProperties{ExpectedVersion: 0, Changes: []PropertyChange{{Name: "default_topic_partitions", Value: "6"}}})

	sameEverywhere := func(index uint64) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var want []byte
		for i, nd := range nodes {
			v, err := nd.m.State().WaitIndex(ctx, index)
			if err != nil {
				t.Fatalf("node %d: %v", i, err)
			}
			if snap := mustSnap(v); want == nil {
				want = snap
			} else if !bytes.Equal(snap, want) {
				t.Fatalf("node %d's state differs", i)
			}
		}
		return want
	}
	want := sameEverywhere(last.Index)

	// A follower snapshots, stops and starts on a fresh State: the
	// snapshot and the log after it bring it back to the same state.
	var follower int
	for i, nd := range nodes {
		if !nd.group.IsLeader() {
			follower = i
		}
	}
	if err := nodes[follower].group.Snapshot(); err != nil {
		t.Fatal(err)
	}
	after := propose(DeleteTopic{TopicRef{Name: "t"}})
	want = sameEverywhere(after.Index)
	if err := nodes[follower].group.Shutdown(); err != nil {
		t.Fatal(err)
	}
	start(follower)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := nodes[follower].m.State().WaitIndex(ctx, after.Index)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustSnap(v); !bytes.Equal(got, want) {
		t.Fatal("the restarted node's state differs")
	}
}
