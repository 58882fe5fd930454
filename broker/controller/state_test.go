package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

func mustSnap(v *View) []byte {
	var buf bytes.Buffer
	if err := v.EncodeSnapshot(&buf); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

func TestInitCluster(t *testing.T) {
	h := newHarness(t)
	h.fails(InitCluster{}, kerr.InvalidRequest)
	if !h.s.View().Created().IsZero() {
		t.Fatal("created before InitCluster")
	}
	created := h.now
	if !h.ok(InitCluster{ClusterID: "c1"}).Changed {
		t.Fatal("not changed")
	}
	h.advance(time.Hour)
	if r := h.ok(InitCluster{ClusterID: "c1"}); r.Changed {
		t.Fatal("repeat changed")
	}
	// The creation time (the built-in license trial's start) is the
	// first InitCluster's time, kept by snapshots.
	if got := h.s.View().Created().UnixMilli(); got != created {
		t.Fatalf("created %d, want %d", got, created)
	}
	h.fails(InitCluster{ClusterID: "c2"}, kerr.InconsistentClusterID)
	h.fails(RegisterBroker{NodeID: 1, Incarnation: incarnation(1), KafkaAddr: "a:1", RPCAddr: "a:2", ClusterID: "other"}, kerr.InconsistentClusterID)
	h.ok(RegisterBroker{NodeID: 1, Incarnation: incarnation(1), KafkaAddr: "a:1", RPCAddr: "a:2", ClusterID: "c1"})
	if h.s.View().ClusterID() != "c1" {
		t.Fatal(h.s.View().ClusterID())
	}
}

func TestBrokerLiveness(t *testing.T) {
	h := newHarness(t)
	epochs := h.register(3, 0)
	v := h.s.View()
	if n := len(v.LiveBrokers(time.UnixMilli(h.now))); n != 3 {
		t.Fatalf("%d live", n)
	}
	b, _ := v.Broker(2)
	if b.Epoch != epochs[2] || b.KafkaAddr != "10.0.0.2:9092" || b.LastHeartbeatMs != h.now {
		t.Fatalf("%+v", b)
	}
	// Liveness is judged against the command's time: 10s later, with
	// only broker 1 heartbeating, an RF 2 topic cannot be placed.
	h.advance(10 * time.Second)
	h.ok(Heartbeat{NodeID: 1, Epoch: epochs[1]})
	if got := h.s.View().LiveBrokers(time.UnixMilli(h.now)); len(got) != 1 || got[0].NodeID != 1 {
		t.Fatalf("live %v", got)
	}
	h.fails(CreateTopic{Name: "t", ID: topicID(1), Partitions: 1, ReplicationFactor: 2}, kerr.InvalidReplicationFactor)
	h.ok(Heartbeat{NodeID: 2, Epoch: epochs[2]})
	h.ok(CreateTopic{Name: "t", ID: topicID(1), Partitions: 1, ReplicationFactor: 2})

	// A readers' clock: broker 3 is dead now, alive at its last heartbeat.
	v = h.s.View()
	if v.Live(3, time.UnixMilli(h.now)) || !v.Live(3, time.UnixMilli(t0)) {
		t.Fatal("broker 3 liveness")
	}
	// Heartbeat errors.
	h.fails(Heartbeat{NodeID: 9, Epoch: 1}, kerr.BrokerIDNotRegistered)
	h.fails(Heartbeat{NodeID: 1, Epoch: epochs[1] + 100}, kerr.StaleBrokerEpoch)
	// The clock never goes back: a command stamped earlier (a new
	// controller leader with a slower clock) does not un-heartbeat.
	h.now -= 5000
	h.ok(Heartbeat{NodeID: 1, Epoch: epochs[1]})
	if b, _ := h.s.View().Broker(1); b.LastHeartbeatMs != h.s.View().ClockMs() || b.LastHeartbeatMs != h.now+5000 {
		t.Fatalf("heartbeat at %d, clock %d", b.LastHeartbeatMs, h.s.View().ClockMs())
	}
}

func TestUnregisterBroker(t *testing.T) {
	h := newHarness(t)
	epochs := h.register(2, 0)
	h.fails(UnregisterBroker{NodeID: 5}, kerr.BrokerIDNotRegistered)
	h.fails(UnregisterBroker{NodeID: 1, Epoch: epochs[1] + 1}, kerr.StaleBrokerEpoch)
	h.ok(UnregisterBroker{NodeID: 1, Epoch: epochs[1]})
	h.ok(UnregisterBroker{NodeID: 2})
	if n := len(h.s.View().Brokers()); n != 0 {
		t.Fatalf("%d brokers left", n)
	}
}

func TestRegisterValidation(t *testing.T) {
	h := newHarness(t)
	h.fails(RegisterBroker{NodeID: -1, Incarnation: incarnation(1), KafkaAddr: "a:1", RPCAddr: "a:2"}, kerr.InvalidRegistration)
	h.fails(RegisterBroker{NodeID: 1, KafkaAddr: "a:1", RPCAddr: "a:2"}, kerr.InvalidRegistration)
	h.fails(RegisterBroker{NodeID: 1, Incarnation: incarnation(1), RPCAddr: "a:2"}, kerr.InvalidRegistration)
	h.fails(RegisterBroker{NodeID: 1, Incarnation: incarnation(1), KafkaAddr: "a:1"}, kerr.InvalidRegistration)
}

func TestNodeIDCollision(t *testing.T) {
	h := newHarness(t)
	first := h.ok(RegisterBroker{NodeID: 1, Incarnation: incarnation(1), KafkaAddr: "h1:9092", RPCAddr: "h1:33145"})

	// Another process (new incarnation, other address) claims node 1
	// while the first is live.
	h.advance(2 * time.Second)
	r := h.fails(RegisterBroker{NodeID: 1, Incarnation: incarnation(2), KafkaAddr: "h2:9092", RPCAddr: "h2:33145"}, kerr.DuplicateBrokerRegistration)
	var conflict *NodeIDConflictError
	if !errors.As(r.Err, &conflict) {
		t.Fatalf("error %T", r.Err)
	}
	if conflict.NodeID != 1 || conflict.Existing.RPCAddr != "h1:33145" || conflict.ExpiresIn != 7001*time.Millisecond {
		t.Fatalf("%+v", conflict)
	}
	for _, want := range []string{"DUPLICATE_BROKER_REGISTRATION", "node id 1", "h1:33145", "another process uses this node_id"} {
		if !strings.Contains(r.Err.Error(), want) {
			t.Fatalf("message %q lacks %q", r.Err, want)
		}
	}
	// A restart (new incarnation, same address) before the session
	// expires is refused, with a message saying so.
	r = h.fails(RegisterBroker{NodeID: 1, Incarnation: incarnation(3), KafkaAddr: "h1:9092", RPCAddr: "h1:33145"}, kerr.DuplicateBrokerRegistration)
	if !strings.Contains(r.Err.Error(), "data directory was replaced") {
		t.Fatal(r.Err)
	}
	// The same incarnation (the same data directory) at another RPC
	// address is the same broker, moved: accepted, epoch kept.
	if r := h.ok(RegisterBroker{NodeID: 1, Incarnation: incarnation(1), KafkaAddr: "h1:9092", RPCAddr: "h1:4000"}); r.BrokerEpoch != first.BrokerEpoch {
		t.Fatalf("moved broker: epoch %d, want %d", r.BrokerEpoch, first.BrokerEpoch)
	}
	// A retried registration of the same incarnation keeps the epoch.
	if r := h.ok(RegisterBroker{NodeID: 1, Incarnation: incarnation(1), KafkaAddr: "h1:9093", RPCAddr: "h1:33145"}); r.BrokerEpoch != first.BrokerEpoch {
		t.Fatalf("epoch %d, want %d", r.BrokerEpoch, first.BrokerEpoch)
	}
	// Once the session expired the new process takes the id, with a new
	// epoch; the old incarnation's heartbeats are stale.
	h.advance(9*time.Second + time.Millisecond)
	second := h.ok(RegisterBroker{NodeID: 1, Incarnation: incarnation(2), KafkaAddr: "h2:9092", RPCAddr: "h2:33145"})
	if second.BrokerEpoch == first.BrokerEpoch || second.BrokerEpoch != h.index {
		t.Fatalf("epoch %d (first %d, index %d)", second.BrokerEpoch, first.BrokerEpoch, h.index)
	}
	h.fails(Heartbeat{NodeID: 1, Epoch: first.BrokerEpoch}, kerr.StaleBrokerEpoch)
	h.ok(Heartbeat{NodeID: 1, Epoch: second.BrokerEpoch})
}

func TestCreateTopic(t *testing.T) {
	h := newHarness(t)
	h.register(3, 3)
	r := h.ok(CreateTopic{Name: "orders", ID: topicID(1), Partitions: 6, ReplicationFactor: 3,
		Configs: map[string]string{"retention.ms": "1000"}, PlacementSeed: 7})
	if !r.Changed || r.Topic == nil || r.Topic.ID != topicID(1) || len(r.Topic.Partitions) != 6 {
		t.Fatalf("%+v", r)
	}
	v := h.s.View()
	topic := v.Topic("orders")
	if topic == nil || v.TopicByID(topicID(1)).Name != "orders" || topic.Configs["retention.ms"] != "1000" {
		t.Fatalf("%+v", topic)
	}
	leaders := map[int32]int{}
	for i, p := range topic.Partitions {
		checkDistinct(t, p.Replicas)
		if len(p.Replicas) != 3 || p.Leader != p.Replicas[0] || p.LeaderEpoch != 0 || p.LeaderTerm != 0 {
			t.Fatalf("partition %d: %+v", i, p)
		}
		leaders[p.Leader]++
	}
	if len(leaders) != 3 || leaders[1] != 2 || leaders[2] != 2 || leaders[3] != 2 {
		t.Fatalf("leaders %v", leaders)
	}
	// Explicit assignment.
	r = h.ok(CreateTopic{Name: "manual", ID: topicID(2), Assignment: [][]int32{{3, 1}, {2, 3}}})
	if got := r.Topic.Partitions[1]; !reflect.DeepEqual(got.Replicas, []int32{2, 3}) || got.Leader != 2 {
		t.Fatalf("%+v", got)
	}
	// Internal topics.
	h.ok(CreateTopic{Name: "__consumer_offsets", ID: topicID(3), Partitions: 3, ReplicationFactor: 3, Internal: true})
	if !h.s.View().Topic("__consumer_offsets").Internal {
		t.Fatal("not internal")
	}
}

func TestCreateTopicValidation(t *testing.T) {
	h := newHarness(t)
	h.register(3, 0)
	h.ok(CreateTopic{Name: "a.b", ID: topicID(1), Partitions: 1, ReplicationFactor: 1})
	long := strings.Repeat("x", 250)
	for _, tc := range []struct {
		cmd  CreateTopic
		code *kerr.Error
	}{
		{CreateTopic{Name: "", ID: topicID(9), Partitions: 1, ReplicationFactor: 1}, kerr.InvalidTopicException},
		{CreateTopic{Name: "..", ID: topicID(9), Partitions: 1, ReplicationFactor: 1}, kerr.InvalidTopicException},
		{CreateTopic{Name: long, ID: topicID(9), Partitions: 1, ReplicationFactor: 1}, kerr.InvalidTopicException},
		{CreateTopic{Name: "has space", ID: topicID(9), Partitions: 1, ReplicationFactor: 1}, kerr.InvalidTopicException},
		{CreateTopic{Name: "a.b", ID: topicID(9), Partitions: 1, ReplicationFactor: 1}, kerr.TopicAlreadyExists},
		{CreateTopic{Name: "a_b", ID: topicID(9), Partitions: 1, ReplicationFactor: 1}, kerr.InvalidTopicException},
		{CreateTopic{Name: "t", ID: TopicID{}, Partitions: 1, ReplicationFactor: 1}, kerr.InvalidRequest},
		{CreateTopic{Name: "t", ID: TopicID{15: 1}, Partitions: 1, ReplicationFactor: 1}, kerr.InvalidRequest},
		{CreateTopic{Name: "t", ID: topicID(1), Partitions: 1, ReplicationFactor: 1}, kerr.TopicAlreadyExists},
		{CreateTopic{Name: "t", ID: topicID(9), Partitions: 0, ReplicationFactor: 1}, kerr.InvalidPartitions},
		{CreateTopic{Name: "t", ID: topicID(9), Partitions: -3, ReplicationFactor: 1}, kerr.InvalidPartitions},
		{CreateTopic{Name: "t", ID: topicID(9), Partitions: MaxPartitionsPerTopic + 1, ReplicationFactor: 1}, kerr.InvalidPartitions},
		{CreateTopic{Name: "t", ID: topicID(9), Partitions: 1, ReplicationFactor: 0}, kerr.InvalidReplicationFactor},
		{CreateTopic{Name: "t", ID: topicID(9), Partitions: 1, ReplicationFactor: 4}, kerr.InvalidReplicationFactor},
		{CreateTopic{Name: "t", ID: topicID(9), Partitions: 1, ReplicationFactor: 1, Configs: map[string]string{"retention.ms": "soon"}}, kerr.InvalidConfig},
		{CreateTopic{Name: "t", ID: topicID(9), Partitions: 1, ReplicationFactor: 1, Configs: map[string]string{"no.such": "1"}}, kerr.InvalidConfig},
		{CreateTopic{Name: "t", ID: topicID(9), Partitions: 1, ReplicationFactor: 1, Configs: map[string]string{"cleanup.policy": "compact"}}, kerr.InvalidConfig},
		{CreateTopic{Name: "t", ID: topicID(9), Assignment: [][]int32{{1, 1}}}, kerr.InvalidReplicaAssignment},
		{CreateTopic{Name: "t", ID: topicID(9), Assignment: [][]int32{{1, 7}}}, kerr.InvalidReplicaAssignment},
		{CreateTopic{Name: "t", ID: topicID(9), Assignment: [][]int32{{1, 2}, {3}}}, kerr.InvalidReplicaAssignment},
		{CreateTopic{Name: "t", ID: topicID(9), Assignment: [][]int32{{}}}, kerr.InvalidReplicaAssignment},
		{CreateTopic{Name: "t", ID: topicID(9), Partitions: 2, Assignment: [][]int32{{1}}}, kerr.InvalidRequest},
		{CreateTopic{Name: "t", ID: topicID(9), ReplicationFactor: 2, Assignment: [][]int32{{1}}}, kerr.InvalidRequest},
	} {
		h.fails(tc.cmd, tc.code)
	}
	// Check answers the same without applying.
	before := h.s.View().Index()
	if r := h.s.Check(Entry{TimeMs: h.now, Cmd: CreateTopic{Name: "t", ID: topicID(9), Partitions: 1, ReplicationFactor: 4}}); !errors.Is(r.Err, kerr.InvalidReplicationFactor) {
		t.Fatal(r.Err)
	}
	if r := h.s.Check(Entry{TimeMs: h.now, Cmd: CreateTopic{Name: "t", ID: topicID(9), Partitions: 1, ReplicationFactor: 3}}); r.Err != nil || r.Topic == nil {
		t.Fatal(r.Err)
	}
	if h.s.View().Index() != before || h.s.View().Topic("t") != nil {
		t.Fatal("Check applied")
	}
}

func TestDeleteTopic(t *testing.T) {
	h := newHarness(t)
	h.register(1, 0)
	h.ok(CreateTopic{Name: "a", ID: topicID(1), Partitions: 1, ReplicationFactor: 1})
	h.ok(CreateTopic{Name: "b", ID: topicID(2), Partitions: 1, ReplicationFactor: 1})
	h.ok(CreateTopic{Name: "__consumer_offsets", ID: topicID(3), Partitions: 1, ReplicationFactor: 1, Internal: true})
	h.fails(DeleteTopic{TopicRef{Name: "zz"}}, kerr.UnknownTopicOrPartition)
	h.fails(DeleteTopic{TopicRef{ID: topicID(8)}}, kerr.UnknownTopicID)
	h.fails(DeleteTopic{TopicRef{Name: "a", ID: topicID(2)}}, kerr.UnknownTopicOrPartition)
	h.fails(DeleteTopic{TopicRef{Name: "__consumer_offsets"}}, kerr.InvalidTopicException)
	if r := h.ok(DeleteTopic{TopicRef{Name: "a"}}); r.Topic.ID != topicID(1) {
		t.Fatal(r.Topic)
	}
	h.ok(DeleteTopic{TopicRef{ID: topicID(2), Name: "b"}})
	v := h.s.View()
	if v.Topic("a") != nil || v.TopicByID(topicID(2)) != nil || !reflect.DeepEqual(v.TopicNames(), []string{"__consumer_offsets"}) {
		t.Fatal(v.TopicNames())
	}
	// The name is free again, under a new id.
	h.ok(CreateTopic{Name: "a", ID: topicID(4), Partitions: 1, ReplicationFactor: 1})
}

func TestCreatePartitions(t *testing.T) {
	h := newHarness(t)
	h.register(4, 2)
	h.ok(CreateTopic{Name: "a", ID: topicID(1), Partitions: 2, ReplicationFactor: 2})
	h.ok(CreateTopic{Name: "__consumer_offsets", ID: topicID(3), Partitions: 1, ReplicationFactor: 1, Internal: true})
	h.fails(CreatePartitions{TopicRef: TopicRef{Name: "zz"}, Total: 3}, kerr.UnknownTopicOrPartition)
	h.fails(CreatePartitions{TopicRef: TopicRef{Name: "a"}, Total: 1}, kerr.InvalidPartitions)
	h.fails(CreatePartitions{TopicRef: TopicRef{Name: "a"}, Total: 2}, kerr.InvalidPartitions)
	h.fails(CreatePartitions{TopicRef: TopicRef{Name: "a"}, Total: MaxPartitionsPerTopic + 1}, kerr.InvalidPartitions)
	h.fails(CreatePartitions{TopicRef: TopicRef{Name: "__consumer_offsets"}, Total: 5}, kerr.InvalidRequest)
	h.fails(CreatePartitions{TopicRef: TopicRef{Name: "a"}, Total: 4, Assignment: [][]int32{{1, 2}}}, kerr.InvalidReplicaAssignment)
	h.fails(CreatePartitions{TopicRef: TopicRef{Name: "a"}, Total: 3, Assignment: [][]int32{{1, 2, 3}}}, kerr.InvalidReplicaAssignment)
	h.fails(CreatePartitions{TopicRef: TopicRef{Name: "a"}, Total: 3, Assignment: [][]int32{{1, 9}}}, kerr.InvalidReplicaAssignment)
	r := h.ok(CreatePartitions{TopicRef: TopicRef{Name: "a", ID: topicID(1)}, Total: 8, PlacementSeed: 3})
	if len(r.Topic.Partitions) != 8 {
		t.Fatal(len(r.Topic.Partitions))
	}
	leaders, replicas := map[int32]int{}, map[int32]int{}
	for _, p := range r.Topic.Partitions {
		checkDistinct(t, p.Replicas)
		leaders[p.Leader]++
		for _, id := range p.Replicas {
			replicas[id]++
		}
	}
	if !reflect.DeepEqual(leaders, map[int32]int{1: 2, 2: 2, 3: 2, 4: 2}) || !reflect.DeepEqual(replicas, map[int32]int{1: 4, 2: 4, 3: 4, 4: 4}) {
		t.Fatalf("leaders %v replicas %v", leaders, replicas)
	}
	r = h.ok(CreatePartitions{TopicRef: TopicRef{ID: topicID(1)}, Total: 9, Assignment: [][]int32{{4, 1}}})
	if !reflect.DeepEqual(r.Topic.Partitions[8].Replicas, []int32{4, 1}) {
		t.Fatal(r.Topic.Partitions[8])
	}
	// With too few live brokers for the topic's replication factor.
	h.advance(time.Minute)
	h.fails(CreatePartitions{TopicRef: TopicRef{Name: "a"}, Total: 10}, kerr.InvalidReplicationFactor)
}

func TestAlterTopicConfig(t *testing.T) {
	h := newHarness(t)
	h.register(1, 0)
	h.ok(CreateTopic{Name: "a", ID: topicID(1), Partitions: 1, ReplicationFactor: 1, Configs: map[string]string{"retention.ms": "5"}})
	h.fails(AlterTopicConfig{TopicRef: TopicRef{Name: "zz"}}, kerr.UnknownTopicOrPartition)
	h.fails(AlterTopicConfig{TopicRef: TopicRef{Name: "a"}, Ops: []ConfigOp{{Name: "retention.ms", Value: "x"}}}, kerr.InvalidConfig)
	h.fails(AlterTopicConfig{TopicRef: TopicRef{Name: "a"}, Ops: []ConfigOp{{Name: "bogus", Value: "1"}}}, kerr.InvalidConfig)
	h.fails(AlterTopicConfig{TopicRef: TopicRef{Name: "a"}, Ops: []ConfigOp{{Name: "cleanup.policy", Op: 2, Value: "delete"}}}, kerr.InvalidConfig)
	h.fails(AlterTopicConfig{TopicRef: TopicRef{Name: "a"}, Ops: []ConfigOp{{Name: ""}}}, kerr.InvalidConfig)
	// A batch is all or nothing.
	h.fails(AlterTopicConfig{TopicRef: TopicRef{Name: "a"}, Ops: []ConfigOp{{Name: "segment.bytes", Value: "100"}, {Name: "retention.ms", Value: "x"}}}, kerr.InvalidConfig)

	h.ok(AlterTopicConfig{TopicRef: TopicRef{Name: "a"}, Ops: []ConfigOp{{Name: "segment.bytes", Value: "100"}, {Name: "retention.ms", Op: ConfigDelete}}})
	if got := h.s.View().Topic("a").Configs; !reflect.DeepEqual(got, map[string]string{"segment.bytes": "100"}) {
		t.Fatal(got)
	}
	if r := h.ok(AlterTopicConfig{TopicRef: TopicRef{Name: "a"}, Ops: []ConfigOp{{Name: "segment.bytes", Value: "100"}}}); r.Changed {
		t.Fatal("no-op changed")
	}
	h.ok(AlterTopicConfig{TopicRef: TopicRef{ID: topicID(1)}, Replace: true, Ops: []ConfigOp{{Name: "cleanup.policy", Value: "delete"}}})
	if got := h.s.View().Topic("a").Configs; !reflect.DeepEqual(got, map[string]string{"cleanup.policy": "delete"}) {
		t.Fatal(got)
	}
}

// TestCheckTopicReplication: the replication check sees what a command
// sets and the topic's replication factor (the assignment's, requested or
// existing), and only what the command sets.
func TestCheckTopicReplication(t *testing.T) {
	opts := testOptions()
	var seen []string
	opts.CheckTopicReplication = func(_ ConfigRules, set map[string]string, rf int) error {
		seen = append(seen, fmt.Sprintf("%v rf=%d", set, rf))
		if v, ok := set["segment.bytes"]; ok && v == strconv.Itoa(rf) {
			return fmt.Errorf("%w: segment.bytes equals the replication factor", kerr.InvalidConfig)
		}
		return nil
	}
	h := &harness{t: t, s: New(opts), now: t0}
	h.register(3, 0)
	h.fails(CreateTopic{Name: "a", ID: topicID(1), Partitions: 1, ReplicationFactor: 2, Configs: map[string]string{"segment.bytes": "2"}}, kerr.InvalidConfig)
	h.fails(CreateTopic{Name: "a", ID: topicID(1), Assignment: [][]int32{{1, 2, 3}}, Configs: map[string]string{"segment.bytes": "3"}}, kerr.InvalidConfig)
	h.ok(CreateTopic{Name: "a", ID: topicID(1), Partitions: 1, ReplicationFactor: 2, Configs: map[string]string{"segment.bytes": "3"}})
	h.fails(AlterTopicConfig{TopicRef: TopicRef{Name: "a"}, Ops: []ConfigOp{{Name: "segment.bytes", Value: "2"}}}, kerr.InvalidConfig)
	h.ok(AlterTopicConfig{TopicRef: TopicRef{Name: "a"}, Ops: []ConfigOp{{Name: "retention.ms", Value: "5"}, {Name: "segment.bytes", Op: ConfigDelete}}})
	want := []string{
		"map[segment.bytes:2] rf=2", "map[segment.bytes:3] rf=3", "map[segment.bytes:3] rf=2",
		"map[segment.bytes:2] rf=2", "map[retention.ms:5] rf=2",
	}
	if !reflect.DeepEqual(seen, want) {
		t.Fatalf("checked\n%q\nwant\n%q", seen, want)
	}
}

func TestClusterProperties(t *testing.T) {
	h := newHarness(t)
	r := h.ok(SetClusterProperties{ExpectedVersion: 0, Changes: []PropertyChange{
		{Name: "auto_create_topics_enabled", Value: "true"}, {Name: "default_topic_partitions", Value: "3"}}})
	if r.ConfigVersion != 1 || h.s.View().ConfigVersion() != 1 {
		t.Fatalf("version %d", r.ConfigVersion)
	}
	h.fails(SetClusterProperties{ExpectedVersion: 0, Changes: []PropertyChange{{Name: "default_topic_partitions", Value: "4"}}}, kerr.InvalidUpdateVersion)
	h.fails(SetClusterProperties{ExpectedVersion: -1, Changes: []PropertyChange{{Name: "no_such_property", Value: "4"}}}, kerr.InvalidConfig)
	h.fails(SetClusterProperties{ExpectedVersion: -1, Changes: []PropertyChange{{Name: "default_topic_partitions", Value: "0"}}}, kerr.InvalidConfig)
	h.fails(SetClusterProperties{ExpectedVersion: -1, Changes: []PropertyChange{{Name: "auto_create_topics_enabled", Value: "maybe"}}}, kerr.InvalidConfig)
	h.fails(SetClusterProperties{ExpectedVersion: -1, Changes: []PropertyChange{{Name: "default_topic_partitions", Value: "2"}, {Name: "default_topic_partitions", Value: "3"}}}, kerr.InvalidRequest)
	h.fails(SetClusterProperties{ExpectedVersion: -7}, kerr.InvalidRequest)
	// All or nothing: one bad value refuses the batch.
	h.fails(SetClusterProperties{ExpectedVersion: 1, Changes: []PropertyChange{{Name: "default_topic_partitions", Value: "8"}, {Name: "log_message_timestamp_type", Value: "Never"}}}, kerr.InvalidConfig)

	// Setting the same value changes nothing and keeps the version.
	if r := h.ok(SetClusterProperties{ExpectedVersion: 1, Changes: []PropertyChange{{Name: "default_topic_partitions", Value: "3"}}}); r.Changed || r.ConfigVersion != 1 {
		t.Fatalf("%+v", r)
	}
	r = h.ok(SetClusterProperties{ExpectedVersion: -1, Changes: []PropertyChange{{Name: "default_topic_partitions", Reset: true}, {Name: "log_message_timestamp_type", Value: "LogAppendTime"}}})
	if r.ConfigVersion != 2 {
		t.Fatal(r.ConfigVersion)
	}
	want := map[string]PropertyValue{
		"auto_create_topics_enabled": {Value: "true", Version: 1},
		"log_message_timestamp_type": {Value: "LogAppendTime", Version: 2},
	}
	if got := h.s.View().Properties(); !reflect.DeepEqual(got, want) {
		t.Fatalf("%v", got)
	}
}

func TestLicense(t *testing.T) {
	h := newHarness(t)
	h.fails(SetLicense{}, kerr.InvalidRequest)
	h.fails(SetLicense{Blob: []byte("forged")}, kerr.InvalidRequest)
	h.fails(SetLicense{Blob: append([]byte("LIC:"), make([]byte, MaxLicenseSize)...)}, kerr.InvalidRequest)
	if r := h.ok(SetLicense{Blob: []byte("LIC:one")}); r.LicenseVersion != 1 {
		t.Fatal(r.LicenseVersion)
	}
	h.ok(SetLicense{Blob: []byte("LIC:two")})
	l := h.s.View().License()
	if string(l.Blob) != "LIC:two" || l.Version != 2 {
		t.Fatalf("%+v", l)
	}
	l.Blob[0] = 'X'
	if string(h.s.View().License().Blob) != "LIC:two" {
		t.Fatal("License returned shared bytes")
	}
}

func TestReportLeader(t *testing.T) {
	h := newHarness(t)
	h.register(3, 0)
	r := h.ok(CreateTopic{Name: "a", ID: topicID(1), Partitions: 2, ReplicationFactor: 3})
	reps := r.Topic.Partitions[0].Replicas
	other := reps[1]

	h.fails(ReportLeader{TopicID: topicID(9), Partition: 0, Leader: other, LeaderEpoch: 1, Term: 1}, kerr.UnknownTopicID)
	h.fails(ReportLeader{TopicID: topicID(1), Partition: 2, Leader: other, LeaderEpoch: 1, Term: 1}, kerr.UnknownTopicOrPartition)
	h.fails(ReportLeader{TopicID: topicID(1), Partition: -1, Leader: other, LeaderEpoch: 1, Term: 1}, kerr.UnknownTopicOrPartition)
	h.fails(ReportLeader{TopicID: topicID(1), Partition: 0, Leader: 42, LeaderEpoch: 1, Term: 1}, kerr.NotLeaderForPartition)
	h.fails(ReportLeader{TopicID: topicID(1), Partition: 0, Leader: other, LeaderEpoch: 0, Term: 0}, kerr.InvalidRequest)

	if r := h.ok(ReportLeader{TopicID: topicID(1), Partition: 0, Leader: other, LeaderEpoch: 5, Term: 5}); !r.Changed {
		t.Fatal("not changed")
	}
	p, _ := h.s.View().Partition(topicID(1), 0)
	if p.Leader != other || p.LeaderEpoch != 5 || p.LeaderTerm != 5 {
		t.Fatalf("%+v", p)
	}
	// A report from an older term arrives late: ignored.
	h.fails(ReportLeader{TopicID: topicID(1), Partition: 0, Leader: reps[0], LeaderEpoch: 4, Term: 4}, kerr.FencedLeaderEpoch)
	// Another leader claiming the same term: ignored.
	h.fails(ReportLeader{TopicID: topicID(1), Partition: 0, Leader: reps[2], LeaderEpoch: 5, Term: 5}, kerr.FencedLeaderEpoch)
	// An epoch going backwards: ignored.
	h.fails(ReportLeader{TopicID: topicID(1), Partition: 0, Leader: reps[2], LeaderEpoch: 3, Term: 6}, kerr.FencedLeaderEpoch)
	// The same report again: accepted, nothing changes.
	if r := h.ok(ReportLeader{TopicID: topicID(1), Partition: 0, Leader: other, LeaderEpoch: 5, Term: 5}); r.Changed {
		t.Fatal("repeat changed")
	}
	h.ok(ReportLeader{TopicID: topicID(1), Partition: 0, Leader: reps[2], LeaderEpoch: 7, Term: 7})
	p, _ = h.s.View().Partition(topicID(1), 0)
	if p.Leader != reps[2] || p.LeaderTerm != 7 {
		t.Fatalf("%+v", p)
	}
	// Partition 1 untouched.
	if p1, _ := h.s.View().Partition(topicID(1), 1); p1.LeaderTerm != 0 {
		t.Fatalf("%+v", p1)
	}
}

func TestAllocateProducerIDs(t *testing.T) {
	h := newHarness(t)
	epochs := h.register(1, 0)
	h.fails(AllocateProducerIDs{NodeID: 2, Count: 10}, kerr.BrokerIDNotRegistered)
	h.fails(AllocateProducerIDs{NodeID: 1, Epoch: 99, Count: 10}, kerr.StaleBrokerEpoch)
	h.fails(AllocateProducerIDs{NodeID: 1, Count: 0}, kerr.InvalidRequest)
	if r := h.ok(AllocateProducerIDs{NodeID: 1, Epoch: epochs[1], Count: 1000}); r.FirstProducerID != 0 {
		t.Fatal(r.FirstProducerID)
	}
	if r := h.ok(AllocateProducerIDs{NodeID: 1, Count: 1000}); r.FirstProducerID != 1000 {
		t.Fatal(r.FirstProducerID)
	}
	if h.s.View().NextProducerID() != 2000 {
		t.Fatal(h.s.View().NextProducerID())
	}
}

func TestUndecodableEntry(t *testing.T) {
	h := newHarness(t)
	h.register(1, 0)
	before, _ := h.s.SnapshotBytes()
	for i, b := range [][]byte{
		nil,
		[]byte("garbage"),
		{commandMagic, byte(CmdHeartbeat), 9, 0, 0, 0, 0, 0, 0, 0, 1, '{', '}'},
		{commandMagic, 200, 1, 0, 0, 0, 0, 0, 0, 0, 1, '{', '}'},
	} {
		h.index++
		r := h.s.Apply(h.index, b)
		if r.Err == nil || r.Changed {
			t.Fatalf("%d: %+v", i, r)
		}
		if code := r.ErrorCode(); code != kerr.InvalidRequest.Code && code != kerr.UnsupportedVersion.Code {
			t.Fatalf("%d: code %d", i, code)
		}
		if h.s.View().Index() != h.index {
			t.Fatal("index not advanced")
		}
	}
	after, _ := h.s.SnapshotBytes()
	if !sameExceptIndex(before, after) {
		t.Fatal("undecodable entries changed the state")
	}
	// An index already applied is ignored.
	b, _ := Encode(Entry{TimeMs: h.now, Cmd: InitCluster{ClusterID: "x"}})
	if r := h.s.Apply(2, b); !errors.Is(r.Err, ErrStaleIndex) {
		t.Fatal(r.Err)
	}
	if h.s.View().ClusterID() != "" {
		t.Fatal("stale index applied")
	}
}

func TestViewsAreImmutable(t *testing.T) {
	h := newHarness(t)
	h.register(2, 0)
	h.ok(CreateTopic{Name: "a", ID: topicID(1), Partitions: 2, ReplicationFactor: 2, Configs: map[string]string{"retention.ms": "1"}})
	old := h.s.View()
	oldSnap := mustSnap(old)

	// Mutating what accessors return changes nothing.
	tp := old.Topic("a")
	tp.Configs["retention.ms"] = "999"
	tp.Partitions[0].Replicas[0] = 77
	for _, x := range old.Topics() {
		x.Partitions = nil
	}
	old.Properties()["x"] = PropertyValue{}
	// Later applies leave the old view as it was.
	h.ok(AlterTopicConfig{TopicRef: TopicRef{Name: "a"}, Ops: []ConfigOp{{Name: "retention.ms", Value: "2"}}})
	h.ok(ReportLeader{TopicID: topicID(1), Partition: 0, Leader: old.Topic("a").Partitions[0].Replicas[1], LeaderEpoch: 1, Term: 1})
	h.ok(CreatePartitions{TopicRef: TopicRef{Name: "a"}, Total: 3})
	h.ok(SetClusterProperties{ExpectedVersion: -1, Changes: []PropertyChange{{Name: "default_topic_partitions", Value: "2"}}})
	h.ok(Heartbeat{NodeID: 1, Epoch: 1})
	h.ok(DeleteTopic{TopicRef{Name: "a"}})
	if !bytes.Equal(mustSnap(old), oldSnap) {
		t.Fatal("an old view changed")
	}
}

func TestWaitIndexAndSubscribe(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	var seen []uint64
	var types []CommandType
	unsub := h.s.Subscribe(func(c Change) {
		mu.Lock()
		defer mu.Unlock()
		if c.View.Index() != c.Index || c.Prev.Index() >= c.Index && c.Type != 0 {
			t.Errorf("change %d: views %d→%d", c.Index, c.Prev.Index(), c.View.Index())
		}
		seen = append(seen, c.Index)
		types = append(types, c.Type)
	})
	done := make(chan *View)
	go func() {
		v, err := h.s.WaitIndex(context.Background(), 3)
		if err != nil {
			t.Error(err)
		}
		done <- v
	}()
	h.register(3, 0)
	if v := <-done; v.Index() < 3 {
		t.Fatal(v.Index())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := h.s.WaitIndex(ctx, 100); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	h.s.Advance(10) // a configuration entry
	if v, err := h.s.WaitIndex(context.Background(), 10); err != nil || v.Index() != 10 {
		t.Fatal(v, err)
	}
	unsub()
	h.index = 10
	h.ok(InitCluster{ClusterID: "c"})
	mu.Lock()
	defer mu.Unlock()
	if !reflect.DeepEqual(seen, []uint64{1, 2, 3, 10}) || types[0] != CmdRegisterBroker || types[3] != 0 {
		t.Fatalf("seen %v types %v", seen, types)
	}
}

// Check answers as Apply will: it sees the entry as the log carries it.
// An empty ISR is not carried (the log cannot tell it from none), so a
// report with one changes nothing in the log; a dry run that took the
// struct as it was would have answered that it does.
func TestCheckAnswersAsApply(t *testing.T) {
	h := newHarness(t)
	h.register(3, 1)
	h.ok(CreateTopic{Name: "t", ID: topicID(1), Partitions: 1, ReplicationFactor: 3})
	p := h.s.View().Topic("t").Partitions[0]
	report := func(isr []int32) ReportLeader {
		return ReportLeader{TopicID: topicID(1), Partition: 0, Leader: p.Replicas[0], LeaderEpoch: 1, Term: 1, ISR: isr}
	}
	h.ok(report(p.Replicas))
	for _, isr := range [][]int32{{}, nil, p.Replicas, p.Replicas[:2]} {
		e := Entry{TimeMs: h.now, Cmd: report(isr)}
		checked := h.s.Check(e)
		applied := h.apply(report(isr))
		if checked.Changed != applied.Changed || (checked.Err == nil) != (applied.Err == nil) {
			t.Fatalf("ISR %#v: Check answered changed=%v err=%v, Apply changed=%v err=%v", isr, checked.Changed, checked.Err, applied.Changed, applied.Err)
		}
	}
}

// TestTopicRevisions: a topic's revision stays the same across entries
// that do not change it (heartbeats, other topics' changes) and differs
// after one that does, so readers may skip copying unchanged records.
func TestTopicRevisions(t *testing.T) {
	h := newHarness(t)
	epochs := h.register(2, 0)
	h.ok(CreateTopic{Name: "a", ID: topicID(1), Partitions: 2, ReplicationFactor: 2})
	h.ok(CreateTopic{Name: "b", ID: topicID(2), Partitions: 1, ReplicationFactor: 1})
	revs := func() map[TopicID]TopicRev {
		out := map[TopicID]TopicRev{}
		for _, r := range h.s.View().TopicRevs() {
			out[r.ID()] = r
		}
		return out
	}
	before := revs()
	if len(before) != 2 || before[topicID(1)].Record().Name != "a" {
		t.Fatalf("revisions %v", before)
	}
	h.heartbeatAll(epochs)
	if after := revs(); after[topicID(1)] != before[topicID(1)] || after[topicID(2)] != before[topicID(2)] {
		t.Fatal("a heartbeat changed a topic's revision")
	}
	h.ok(AlterTopicConfig{TopicRef: TopicRef{Name: "b"}, Ops: []ConfigOp{{Name: "retention.ms", Value: "5"}}})
	after := revs()
	if after[topicID(1)] != before[topicID(1)] {
		t.Error("another topic's change changed a's revision")
	}
	if after[topicID(2)] == before[topicID(2)] {
		t.Error("b's config change kept its revision")
	}
	if got := after[topicID(2)].Record().Configs["retention.ms"]; got != "5" {
		t.Errorf("b's new revision has retention.ms %q", got)
	}
	if got := before[topicID(2)].Record().Configs["retention.ms"]; got != "" {
		t.Errorf("b's old revision changed in place: retention.ms %q", got)
	}
}
