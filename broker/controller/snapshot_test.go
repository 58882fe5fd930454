package controller

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// richLog builds a harness whose state uses every part of the state.
func richLog(t *testing.T) *harness {
	h := newHarness(t)
	h.ok(InitCluster{ClusterID: "weir-test"})
	epochs := h.register(5, 3)
	h.ok(CreateTopic{Name: "orders", ID: topicID(1), Partitions: 7, ReplicationFactor: 3, PlacementSeed: 11,
		Configs: map[string]string{"retention.ms": "60000", "segment.bytes": "1048576"}})
	h.ok(CreateTopic{Name: "__consumer_offsets", ID: topicID(2), Partitions: 4, ReplicationFactor: 3, Internal: true})
	h.ok(CreateTopic{Name: "gone", ID: topicID(3), Partitions: 1, ReplicationFactor: 1})
	h.ok(DeleteTopic{TopicRef{Name: "gone"}})
	h.ok(CreatePartitions{TopicRef: TopicRef{Name: "orders"}, Total: 9, PlacementSeed: 4})
	h.ok(AlterTopicConfig{TopicRef: TopicRef{Name: "orders"}, Ops: []ConfigOp{{Name: "cleanup.policy", Value: "delete"}}})
	h.ok(SetClusterProperties{ExpectedVersion: 0, Changes: []PropertyChange{{Name: "default_topic_partitions", Value: "3"}, {Name: "auto_create_topics_enabled", Value: "true"}}})
	h.ok(SetClusterProperties{ExpectedVersion: 1, Changes: []PropertyChange{{Name: "fetch_max_bytes", Value: "1048576"}}})
	h.ok(SetLicense{Blob: []byte("LIC:enterprise")})
	orders := h.s.View().Topic("orders")
	h.ok(ReportLeader{TopicID: topicID(1), Partition: 3, Leader: orders.Partitions[3].Replicas[2], LeaderEpoch: 2, Term: 2})
	h.ok(AllocateProducerIDs{NodeID: 2, Count: 1000})
	h.ok(CreateACLs{Bindings: []ACLBinding{aclTopicLiteral, aclTopicPrefixed, aclGroup, aclCluster}})
	h.ok(DeleteACLs{Filters: []ACLFilter{{ResourceType: kmsg.ACLResourceTypeGroup, PatternType: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}}})
	h.advance(3 * time.Second)
	h.heartbeatAll(epochs)
	h.fails(CreateTopic{Name: "orders", ID: topicID(9), Partitions: 1, ReplicationFactor: 1}, kerr.TopicAlreadyExists)
	return h
}

func TestSnapshotRoundTrip(t *testing.T) {
	h := richLog(t)
	snap, err := h.s.SnapshotBytes()
	if err != nil {
		t.Fatal(err)
	}
	restored := New(testOptions())
	var changes []Change
	restored.Subscribe(func(c Change) { changes = append(changes, c) })
	if err := restored.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	a, b := h.s.View(), restored.View()
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("restored state differs:\n%+v\n%+v", a, b)
	}
	if b.ConfigVersion() != 2 || b.License().Version != 1 || string(b.License().Blob) != "LIC:enterprise" ||
		b.ClusterID() != "weir-test" || b.Created().IsZero() || b.NextProducerID() != 1000 || b.Index() != h.index ||
		len(b.ACLs()) != 3 || b.ACLsIndex() != a.ACLsIndex() || b.ACLsIndex() == 0 {
		t.Fatalf("restored: version %d license %+v cluster %q pid %d index %d", b.ConfigVersion(), b.License(), b.ClusterID(), b.NextProducerID(), b.Index())
	}
	if p, _ := b.Property("fetch_max_bytes"); p.Version != 2 || p.Value != "1048576" {
		t.Fatalf("%+v", p)
	}
	again, _ := restored.SnapshotBytes()
	if !bytes.Equal(snap, again) {
		t.Fatal("snapshot of the restored state differs")
	}
	if len(changes) != 1 || changes[0].Type != 0 || changes[0].View != b {
		t.Fatalf("changes %+v", changes)
	}
	// The restored state goes on applying like the original.
	for _, st := range []*State{h.s, restored} {
		b, _ := Encode(Entry{TimeMs: h.now + 1, Cmd: CreatePartitions{TopicRef: TopicRef{Name: "orders"}, Total: 12, PlacementSeed: 1}})
		if r := st.Apply(h.index+1, b); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	x, _ := h.s.SnapshotBytes()
	y, _ := restored.SnapshotBytes()
	if !bytes.Equal(x, y) {
		t.Fatal("original and restored diverged")
	}
}

// TestDeterminism: the same log applied twice gives byte-identical
// snapshots, and so does a log with many randomised commands.
func TestDeterminism(t *testing.T) {
	h := richLog(t)
	replay := func(log [][]byte) []byte {
		s := New(testOptions())
		for i, b := range log {
			s.Apply(uint64(i+1), b)
		}
		snap, err := s.SnapshotBytes()
		if err != nil {
			t.Fatal(err)
		}
		return snap
	}
	want, _ := h.s.SnapshotBytes()
	for i := 0; i < 3; i++ {
		if got := replay(h.log); !bytes.Equal(got, want) {
			t.Fatalf("replay %d differs", i)
		}
	}

	// A random log mixing valid and invalid commands.
	rng := rand.New(rand.NewSource(1))
	var log [][]byte
	now := t0
	gen := New(testOptions())
	for i := 0; i < 3000; i++ {
		now += int64(rng.Intn(3000))
		b, err := Encode(Entry{TimeMs: now, Cmd: randomCommand(rng, gen.View())})
		if err != nil {
			t.Fatal(err)
		}
		gen.Apply(uint64(i+1), b)
		log = append(log, b)
	}
	first := replay(log)
	// The log must exercise successes, not only refusals.
	changed := map[CommandType]int{}
	s0 := New(testOptions())
	for i, b := range log {
		if r := s0.Apply(uint64(i+1), b); r.Changed {
			e, _ := Decode(b)
			changed[e.Cmd.Type()]++
		}
	}
	for _, typ := range []CommandType{CmdRegisterBroker, CmdHeartbeat, CmdUnregisterBroker, CmdCreateTopic, CmdDeleteTopic, CmdCreatePartitions,
		CmdAlterTopicConfig, CmdSetClusterProperties, CmdSetLicense, CmdReportLeader, CmdAllocateProducerIDs, CmdCreateACLs, CmdDeleteACLs} {
		if changed[typ] == 0 {
			t.Errorf("random log: no %v changed the state", typ)
		}
	}
	t.Logf("changes by type: %v; topics at end: %v", changed, s0.View().TopicNames())
	for i := 0; i < 2; i++ {
		if !bytes.Equal(replay(log), first) {
			t.Fatal("random log replays differently")
		}
	}
	// And a snapshot taken midway, restored and replayed to the end.
	s := New(testOptions())
	for i, b := range log[:1000] {
		s.Apply(uint64(i+1), b)
	}
	mid, _ := s.SnapshotBytes()
	s2 := New(testOptions())
	if err := s2.Restore(bytes.NewReader(mid)); err != nil {
		t.Fatal(err)
	}
	for i, b := range log[1000:] {
		s2.Apply(uint64(1000+i+1), b)
	}
	if end, _ := s2.SnapshotBytes(); !bytes.Equal(end, first) {
		t.Fatal("snapshot+replay differs from full replay")
	}
}

// randomCommand makes a command, often valid against v, sometimes not.
func randomCommand(rng *rand.Rand, v *View) Command {
	node := int32(rng.Intn(6))
	var epoch uint64
	if b, ok := v.Broker(node); ok && rng.Intn(5) > 0 {
		epoch = b.Epoch
	} else {
		epoch = uint64(rng.Intn(40))
	}
	name := fmt.Sprintf("t%d", rng.Intn(8))
	id := topicID(byte(rng.Intn(12)))
	if names := v.TopicNames(); len(names) > 0 && rng.Intn(3) > 0 {
		name = names[rng.Intn(len(names))]
		id = v.Topic(name).ID
	}
	switch rng.Intn(15) {
	case 0:
		return RegisterBroker{NodeID: node, Incarnation: incarnation(byte(rng.Intn(3))), KafkaAddr: "k", RPCAddr: fmt.Sprintf("r%d", rng.Intn(2)), Rack: fmt.Sprintf("r%d", rng.Intn(3))}
	case 1, 2, 3:
		return Heartbeat{NodeID: node, Epoch: epoch}
	case 4:
		return CreateTopic{Name: fmt.Sprintf("t%d", rng.Intn(8)), ID: topicID(byte(rng.Intn(12))), Partitions: int32(rng.Intn(6)), ReplicationFactor: int16(rng.Intn(4)), PlacementSeed: rng.Uint32(),
			Configs: map[string]string{"retention.ms": fmt.Sprint(rng.Intn(5)), "segment.bytes": "100"}}
	case 5:
		return DeleteTopic{TopicRef{Name: name}}
	case 6:
		return CreatePartitions{TopicRef: TopicRef{ID: id}, Total: int32(rng.Intn(10)), PlacementSeed: rng.Uint32()}
	case 7:
		return AlterTopicConfig{TopicRef: TopicRef{Name: name}, Ops: []ConfigOp{{Name: "retention.ms", Value: fmt.Sprint(rng.Intn(9))}, {Name: "segment.bytes", Op: ConfigDelete}}}
	case 8:
		return SetClusterProperties{ExpectedVersion: int64(rng.Intn(5)) - 1, Changes: []PropertyChange{{Name: "default_topic_partitions", Value: fmt.Sprint(1 + rng.Intn(5))}, {Name: "fetch_max_bytes", Reset: rng.Intn(2) == 0, Value: "2048"}}}
	case 9:
		return SetLicense{Blob: []byte(fmt.Sprintf("LIC:%d", rng.Intn(3)))}
	case 10:
		part, leader := int32(rng.Intn(4)), node
		if t := v.TopicByID(id); t != nil && int(part) < len(t.Partitions) && rng.Intn(4) > 0 {
			reps := t.Partitions[part].Replicas
			leader = reps[rng.Intn(len(reps))]
		}
		term := uint64(rng.Intn(8))
		return ReportLeader{TopicID: id, Partition: part, Leader: leader, LeaderEpoch: int32(term), Term: term}
	case 11:
		return UnregisterBroker{NodeID: node, Epoch: epoch}
	case 12:
		// An invalid principal now and then refuses the batch.
		principals := []string{"User:alice", "User:bob", "User:*", "nobody"}
		return CreateACLs{Bindings: []ACLBinding{
			testACL(kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternType(3+rng.Intn(2)), name, principals[rng.Intn(len(principals))], kmsg.ACLOperation(2+rng.Intn(11)), kmsg.ACLPermissionType(2+rng.Intn(2))),
			testACL(kmsg.ACLResourceTypeGroup, kmsg.ACLResourcePatternTypeLiteral, fmt.Sprintf("g%d", rng.Intn(3)), principals[rng.Intn(3)], kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
		}}
	case 13:
		return DeleteACLs{Filters: []ACLFilter{{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: &name, PatternType: kmsg.ACLResourcePatternTypeMatch,
			Operation: kmsg.ACLOperation(1 + rng.Intn(12)), Permission: kmsg.ACLPermissionTypeAny}}}
	default:
		return AllocateProducerIDs{NodeID: node, Count: int32(rng.Intn(100))}
	}
}

func TestRestoreRefusesBadSnapshots(t *testing.T) {
	h := richLog(t)
	good, _ := h.s.SnapshotBytes()
	target := New(testOptions())
	tgt := newHarness(t)
	tgt.s = target
	tgt.register(1, 0)
	before, _ := target.SnapshotBytes()

	withBody := func(body string) []byte {
		var buf bytes.Buffer
		buf.WriteString(snapshotMagic)
		binary.Write(&buf, binary.BigEndian, uint16(1))
		buf.WriteString(body)
		binary.Write(&buf, binary.BigEndian, crc32.Checksum([]byte(body), castagnoli))
		return buf.Bytes()
	}
	flip := append([]byte(nil), good...)
	flip[len(flip)/2] ^= 1
	future := append([]byte(nil), good...)
	future[9] = 2
	for name, b := range map[string][]byte{
		"empty":      nil,
		"magic":      append([]byte("XEIRCTRL"), good[8:]...),
		"version":    future,
		"checksum":   flip,
		"truncated":  good[:len(good)-7],
		"not json":   withBody("nope"),
		"unknown":    withBody(`{"index":1,"surprise":true}`),
		"dup broker": withBody(`{"brokers":[{"node_id":1},{"node_id":1}]}`),
		"dup topic":  withBody(`{"topics":[{"name":"a","id":"BwAAAAAAAAAAAAAAAAAAQg","partitions":[]},{"name":"a","id":"BwEAAAAAAAAAAAAAAAAAQg","partitions":[]}]}`),
		"no id":      withBody(`{"topics":[{"name":"a","partitions":[]}]}`),
		"no replica": withBody(`{"topics":[{"name":"a","id":"BwAAAAAAAAAAAAAAAAAAQg","partitions":[{"replicas":[],"leader":1}]}]}`),
	} {
		if err := target.Restore(bytes.NewReader(b)); !errors.Is(err, ErrBadSnapshot) {
			t.Fatalf("%s: %v", name, err)
		}
		if after, _ := target.SnapshotBytes(); !bytes.Equal(after, before) {
			t.Fatalf("%s: a refused restore changed the state", name)
		}
	}
}
