package controller_test

// The generator of the golden controller logs (-args -write-golden): it
// runs only to write a version that does not exist yet.

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker/controller"
	"github.com/weir-broker/weir/broker/scram"
	"github.com/weir-broker/weir/config"
	weirraft "github.com/weir-broker/weir/raft"
	"github.com/weir-broker/weir/raft/replaytest"
)

// ctrlGen builds a controller log the way a leader would write it,
// applying each entry to a state of its own to choose realistic values
// (replicas to report as leaders, epochs to heartbeat with).
type ctrlGen struct {
	t       *testing.T
	entries []replaytest.Entry
	index   uint64
	term    uint64
	now     int64
	fsm     *controller.Machine

	// beating are the brokers that heartbeat (node id: epoch), every 3 s
	// of the log's time as brokers do, before the next command.
	beating  map[int32]uint64
	lastBeat int64
}

func (g *ctrlGen) add(typ uint8, data []byte) any {
	g.index++
	g.entries = append(g.entries, replaytest.Entry{Index: g.index, Term: g.term, Type: typ, Data: data})
	switch typ {
	case replaytest.TypeCommand:
		return g.fsm.Apply(weirraft.Entry{Index: g.index, Term: g.term, Data: data})
	case replaytest.TypeConfiguration:
		g.fsm.MembershipApplied(g.index)
	}
	return nil
}

// cmd appends a command stamped with the generator's clock, then moves
// the clock on by a little.
func (g *ctrlGen) cmd(c controller.Command) controller.Result {
	g.t.Helper()
	if _, beat := c.(controller.Heartbeat); !beat && len(g.beating) > 0 && g.now-g.lastBeat >= 3000 {
		g.lastBeat = g.now
		for _, id := range slices.Sorted(maps.Keys(g.beating)) {
			g.ok(controller.Heartbeat{NodeID: id, Epoch: g.beating[id]})
		}
	}
	data, err := controller.Encode(controller.Entry{TimeMs: g.now, Cmd: c})
	if err != nil {
		g.t.Fatalf("encode %T: %v", c, err)
	}
	r := g.add(replaytest.TypeCommand, data).(controller.Result)
	g.now += 137
	return r
}

// ok and fail append a command expected to be accepted or refused (a
// check on the generator, not on the code: the replay records whatever
// happens).
func (g *ctrlGen) ok(c controller.Command) controller.Result {
	g.t.Helper()
	r := g.cmd(c)
	if r.Err != nil {
		g.t.Fatalf("generator: %T refused: %v", c, r.Err)
	}
	return r
}

func (g *ctrlGen) fail(c controller.Command, code *kerr.Error) {
	g.t.Helper()
	if r := g.cmd(c); !errors.Is(r.Err, code) {
		g.t.Fatalf("generator: %T answered %v, want %s", c, r.Err, code.Message)
	}
}

// raw appends command bytes as they are (malformed or old-version
// entries).
func (g *ctrlGen) raw(data []byte) controller.Result {
	return g.add(replaytest.TypeCommand, data).(controller.Result)
}

// header builds a command header by hand.
func header(typ controller.CommandType, version uint8, timeMs int64) []byte {
	h := []byte{0xC7, byte(typ), version}
	return binary.BigEndian.AppendUint64(h, uint64(timeMs))
}

// elect starts a new term as hashicorp/raft does: the new leader's no-op.
func (g *ctrlGen) elect() {
	g.term++
	g.add(replaytest.TypeNoop, nil)
}

func (g *ctrlGen) configuration(ids ...int) {
	var c raft.Configuration
	for _, id := range ids {
		c.Servers = append(c.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(strconv.Itoa(id)),
			Address: raft.ServerAddress(fmt.Sprintf("10.0.0.%d:33145", id))})
	}
	g.add(replaytest.TypeConfiguration, raft.EncodeConfiguration(c))
}

func inc(n byte) controller.IncarnationID {
	var id controller.IncarnationID
	copy(id[:], seed32(fmt.Sprintf("incarnation %d", n)))
	return id
}

func tid(name string) controller.TopicID {
	var id controller.TopicID
	copy(id[:], seed32("topic "+name))
	return id
}

func register(node int32, incarnation byte, rack string) controller.RegisterBroker {
	host := fmt.Sprintf("10.0.0.%d", node)
	return controller.RegisterBroker{
		NodeID: node, Incarnation: inc(incarnation), KafkaAddr: host + ":9092", RPCAddr: host + ":33145",
		Rack: rack, AdminAddr: host + ":9644", ClusterID: "weir-golden",
		Listeners: []controller.ListenerEndpoint{
			{Name: "INTERNAL", Addr: host + ":9092", SecurityProtocol: "PLAINTEXT"},
			{Name: "EXTERNAL", Addr: fmt.Sprintf("broker-%d.example.com:9094", node), SecurityProtocol: "SASL_SSL"},
		},
	}
}

// scramCredential derives a credential as a SCRAM client and the broker
// do (RFC 5802).
func scramCredential(t *testing.T, user, mechanism, password string, iterations int) controller.ScramCredential {
	h, n := sha256.New, 32
	if mechanism == config.MechanismSCRAMSHA512 {
		h, n = sha512.New, 64
	}
	salt := seed32("salt " + user + mechanism)[:16]
	salted, err := pbkdf2.Key(func() hash.Hash { return h() }, password, salt, iterations, n)
	if err != nil {
		t.Fatal(err)
	}
	mac := func(msg string) []byte {
		m := hmac.New(h, salted)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	ck := h()
	ck.Write(mac("Client Key"))
	return controller.ScramCredential{User: user, Credential: scram.Credential{Mechanism: mechanism, Iterations: int32(iterations),
		Salt: salt, StoredKey: ck.Sum(nil), ServerKey: mac("Server Key")}}
}

func acl(rt kmsg.ACLResourceType, pt kmsg.ACLResourcePatternType, name, principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) controller.ACLBinding {
	return controller.ACLBinding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: host, Operation: op, Permission: perm}
}

func strp(s string) *string { return &s }

// generateControllerV1 is the log of v1.log: a cluster's life through
// every command type of the first golden release, with refusals of each
// kind and entries that do not decode.
func generateControllerV1(t *testing.T) []replaytest.Entry {
	g := &ctrlGen{t: t, term: 1, now: 1_767_225_600_000, fsm: controller.NewMachine(controller.New(replayOptions()))}
	sec := int64(1000)

	// Bootstrap: the configuration entry, the first leader's no-op.
	g.configuration(1, 2, 3)
	g.add(replaytest.TypeNoop, nil)
	g.ok(controller.InitCluster{ClusterID: "weir-golden"})
	g.ok(controller.InitCluster{ClusterID: "weir-golden"}) // repeated: a no-op
	g.fail(controller.InitCluster{ClusterID: "other-cluster"}, kerr.InconsistentClusterID)
	g.fail(controller.InitCluster{}, kerr.InvalidRequest)

	// Brokers: 1-3 at the current version, 4 written as RegisterBroker
	// version 1 (before listeners), as an older release proposed it.
	epochs := map[int32]uint64{}
	for i, rack := range []string{"rack-a", "rack-b", "rack-c"} {
		epochs[int32(i+1)] = g.ok(register(int32(i+1), byte(i+1), rack)).BrokerEpoch
	}
	v1 := header(controller.CmdRegisterBroker, 1, g.now)
	v1 = append(v1, mustJSON(map[string]any{
		"node_id": 4, "incarnation": inc(4), "kafka_addr": "10.0.0.4:9092", "rpc_addr": "10.0.0.4:33145", "rack": "rack-a",
	})...)
	r := g.raw(v1)
	if r.Err != nil {
		t.Fatalf("generator: RegisterBroker v1: %v", r.Err)
	}
	epochs[4] = r.BrokerEpoch
	g.now += 211
	// The same incarnation registering again keeps its epoch.
	g.ok(register(1, 1, "rack-a"))
	// Another process claiming a live node id; another cluster's broker;
	// bad registrations.
	g.fail(register(2, 99, "rack-b"), kerr.DuplicateBrokerRegistration)
	other := register(5, 5, "rack-b")
	other.ClusterID = "other-cluster"
	g.fail(other, kerr.InconsistentClusterID)
	dupListener := register(5, 5, "rack-b")
	dupListener.Listeners[1].Name = "internal"
	g.fail(dupListener, kerr.InvalidRegistration)
	g.fail(controller.RegisterBroker{NodeID: -1, Incarnation: inc(6), KafkaAddr: "x:1", RPCAddr: "x:2"}, kerr.InvalidRegistration)
	g.fail(controller.RegisterBroker{NodeID: 6, KafkaAddr: "x:1", RPCAddr: "x:2"}, kerr.InvalidRegistration)
	g.fail(controller.RegisterBroker{NodeID: 6, Incarnation: inc(6), KafkaAddr: "x:1"}, kerr.InvalidRegistration)

	// Heartbeats, good and refused.
	g.now += 2 * sec
	for id := int32(1); id <= 4; id++ {
		g.ok(controller.Heartbeat{NodeID: id, Epoch: epochs[id]})
	}
	g.fail(controller.Heartbeat{NodeID: 2, Epoch: epochs[2] + 100}, kerr.StaleBrokerEpoch)
	g.fail(controller.Heartbeat{NodeID: 7, Epoch: 1}, kerr.BrokerIDNotRegistered)
	g.beating, g.lastBeat = maps.Clone(epochs), g.now

	// Topics: placed, internal, explicitly assigned, with configs.
	g.ok(controller.CreateTopic{Name: "orders", ID: tid("orders"), Partitions: 6, ReplicationFactor: 3, PlacementSeed: 17,
		Configs: map[string]string{"retention.ms": "86400000", "cleanup.policy": "delete", "max.message.bytes": "2097152"}})
	g.ok(controller.CreateTopic{Name: "__consumer_offsets", ID: tid("__consumer_offsets"), Partitions: 4, ReplicationFactor: 3,
		PlacementSeed: 5, Internal: true, Configs: map[string]string{"segment.bytes": "104857600"}})
	g.ok(controller.CreateTopic{Name: "payments", ID: tid("payments"), ReplicationFactor: 2,
		Assignment: [][]int32{{1, 2}, {2, 3}, {3, 4}}, Configs: map[string]string{"message.timestamp.type": "LogAppendTime"}})
	g.ok(controller.CreateTopic{Name: "metrics.raw", ID: tid("metrics.raw"), Partitions: 2, ReplicationFactor: 1, PlacementSeed: 3})
	g.ok(controller.CreateTopic{Name: "audit-log", ID: tid("audit-log"), Partitions: 1, ReplicationFactor: 3, PlacementSeed: 99})
	// Refused creations, one per reason.
	g.fail(controller.CreateTopic{Name: "orders", ID: tid("orders-2"), Partitions: 1, ReplicationFactor: 1}, kerr.TopicAlreadyExists)
	g.fail(controller.CreateTopic{Name: "metrics_raw", ID: tid("metrics_raw"), Partitions: 1, ReplicationFactor: 1}, kerr.InvalidTopicException)
	g.fail(controller.CreateTopic{Name: "bad/name", ID: tid("bad/name"), Partitions: 1, ReplicationFactor: 1}, kerr.InvalidTopicException)
	g.fail(controller.CreateTopic{Name: "..", ID: tid(".."), Partitions: 1, ReplicationFactor: 1}, kerr.InvalidTopicException)
	g.fail(controller.CreateTopic{Name: "reused-id", ID: tid("orders"), Partitions: 1, ReplicationFactor: 1}, kerr.TopicAlreadyExists)
	g.fail(controller.CreateTopic{Name: "reserved-id", ID: controller.TopicID{15: 1}, Partitions: 1, ReplicationFactor: 1}, kerr.InvalidRequest)
	g.fail(controller.CreateTopic{Name: "bad-retention", ID: tid("bad-retention"), Partitions: 1, ReplicationFactor: 1,
		Configs: map[string]string{"retention.ms": "one day"}}, kerr.InvalidConfig)
	g.fail(controller.CreateTopic{Name: "unknown-config", ID: tid("unknown-config"), Partitions: 1, ReplicationFactor: 1,
		Configs: map[string]string{"no.such.config": "1"}}, kerr.InvalidConfig)
	g.fail(controller.CreateTopic{Name: "bad-policy", ID: tid("bad-policy"), Partitions: 1, ReplicationFactor: 1,
		Configs: map[string]string{"cleanup.policy": "compact"}}, kerr.InvalidConfig)
	g.fail(controller.CreateTopic{Name: "too-replicated", ID: tid("too-replicated"), Partitions: 1, ReplicationFactor: 5}, kerr.InvalidReplicationFactor)
	g.fail(controller.CreateTopic{Name: "no-partitions", ID: tid("no-partitions"), Partitions: 0, ReplicationFactor: 1}, kerr.InvalidPartitions)
	g.fail(controller.CreateTopic{Name: "too-many", ID: tid("too-many"), Partitions: 10001, ReplicationFactor: 1}, kerr.InvalidPartitions)
	g.fail(controller.CreateTopic{Name: "no-rf", ID: tid("no-rf"), Partitions: 1, ReplicationFactor: 0}, kerr.InvalidReplicationFactor)
	g.fail(controller.CreateTopic{Name: "dead-broker", ID: tid("dead-broker"), Assignment: [][]int32{{1, 9}}}, kerr.InvalidReplicaAssignment)
	g.fail(controller.CreateTopic{Name: "twice", ID: tid("twice"), Assignment: [][]int32{{1, 1}}}, kerr.InvalidReplicaAssignment)
	g.fail(controller.CreateTopic{Name: "ragged", ID: tid("ragged"), Assignment: [][]int32{{1, 2}, {3}}}, kerr.InvalidReplicaAssignment)
	g.fail(controller.CreateTopic{Name: "mismatch", ID: tid("mismatch"), Partitions: 3, Assignment: [][]int32{{1}}}, kerr.InvalidRequest)

	// Deletions.
	g.ok(controller.DeleteTopic{TopicRef: controller.TopicRef{Name: "metrics.raw", ID: tid("metrics.raw")}})
	g.ok(controller.CreateTopic{Name: "metrics_raw", ID: tid("metrics_raw"), Partitions: 2, ReplicationFactor: 2, PlacementSeed: 8})
	g.fail(controller.DeleteTopic{TopicRef: controller.TopicRef{Name: "__consumer_offsets"}}, kerr.InvalidTopicException)
	g.fail(controller.DeleteTopic{TopicRef: controller.TopicRef{ID: tid("metrics.raw")}}, kerr.UnknownTopicID)
	g.fail(controller.DeleteTopic{TopicRef: controller.TopicRef{Name: "orders", ID: tid("payments")}}, kerr.UnknownTopicOrPartition)
	g.fail(controller.DeleteTopic{TopicRef: controller.TopicRef{Name: "never-created"}}, kerr.UnknownTopicOrPartition)

	// More partitions.
	g.ok(controller.CreatePartitions{TopicRef: controller.TopicRef{Name: "orders", ID: tid("orders")}, Total: 8, PlacementSeed: 4})
	g.ok(controller.CreatePartitions{TopicRef: controller.TopicRef{Name: "payments"}, Total: 4, Assignment: [][]int32{{4, 1}}})
	g.fail(controller.CreatePartitions{TopicRef: controller.TopicRef{Name: "orders"}, Total: 8}, kerr.InvalidPartitions)
	g.fail(controller.CreatePartitions{TopicRef: controller.TopicRef{Name: "orders"}, Total: 2}, kerr.InvalidPartitions)
	g.fail(controller.CreatePartitions{TopicRef: controller.TopicRef{Name: "__consumer_offsets"}, Total: 8}, kerr.InvalidRequest)
	g.fail(controller.CreatePartitions{TopicRef: controller.TopicRef{Name: "payments"}, Total: 6, Assignment: [][]int32{{1, 2}}}, kerr.InvalidReplicaAssignment)
	g.fail(controller.CreatePartitions{TopicRef: controller.TopicRef{Name: "payments"}, Total: 5, Assignment: [][]int32{{1, 2, 3}}}, kerr.InvalidReplicaAssignment)
	g.fail(controller.CreatePartitions{TopicRef: controller.TopicRef{ID: tid("gone")}, Total: 5}, kerr.UnknownTopicID)

	// Topic configs.
	orders := controller.TopicRef{Name: "orders", ID: tid("orders")}
	g.ok(controller.AlterTopicConfig{TopicRef: orders, Ops: []controller.ConfigOp{
		{Name: "segment.bytes", Op: controller.ConfigSet, Value: "536870912"},
		{Name: "retention.ms", Op: controller.ConfigDelete},
	}})
	g.ok(controller.AlterTopicConfig{TopicRef: orders, Ops: []controller.ConfigOp{{Name: "segment.bytes", Op: controller.ConfigSet, Value: "536870912"}}}) // unchanged
	g.ok(controller.AlterTopicConfig{TopicRef: controller.TopicRef{Name: "payments"}, Replace: true, Ops: []controller.ConfigOp{
		{Name: "retention.bytes", Op: controller.ConfigSet, Value: "1073741824"},
		{Name: "segment.ms", Op: controller.ConfigSet, Value: "3600000"},
	}})
	g.fail(controller.AlterTopicConfig{TopicRef: orders, Ops: []controller.ConfigOp{{Name: "segment.bytes", Op: controller.ConfigSet, Value: "-5"}}}, kerr.InvalidConfig)
	g.fail(controller.AlterTopicConfig{TopicRef: orders, Ops: []controller.ConfigOp{{Name: "cleanup.policy", Op: 2, Value: "compact"}}}, kerr.InvalidConfig)
	g.fail(controller.AlterTopicConfig{TopicRef: orders, Ops: []controller.ConfigOp{{Name: "", Op: controller.ConfigSet, Value: "1"}}}, kerr.InvalidConfig)
	g.fail(controller.AlterTopicConfig{TopicRef: controller.TopicRef{Name: "missing"}, Ops: []controller.ConfigOp{{Name: "retention.ms", Value: "1"}}}, kerr.UnknownTopicOrPartition)

	// Cluster properties, with optimistic concurrency.
	g.ok(controller.SetClusterProperties{ExpectedVersion: 0, Changes: []controller.PropertyChange{
		{Name: "default_topic_partitions", Value: "3"}, {Name: "auto_create_topics_enabled", Value: "true"},
		{Name: "log_message_timestamp_type", Value: "LogAppendTime"},
	}})
	g.fail(controller.SetClusterProperties{ExpectedVersion: 0, Changes: []controller.PropertyChange{{Name: "default_topic_partitions", Value: "4"}}}, kerr.InvalidUpdateVersion)
	g.ok(controller.SetClusterProperties{ExpectedVersion: 1, Changes: []controller.PropertyChange{
		{Name: "auto_create_topics_enabled", Reset: true}, {Name: "superusers", Value: "User:ops,User:admin"},
	}})
	g.ok(controller.SetClusterProperties{ExpectedVersion: -1, Changes: []controller.PropertyChange{{Name: "superusers", Value: "User:ops,User:admin"}}}) // unchanged
	// An empty batch.
	g.ok(controller.SetClusterProperties{ExpectedVersion: -1})
	g.fail(controller.SetClusterProperties{ExpectedVersion: -1, Changes: []controller.PropertyChange{{Name: "no_such_property", Value: "1"}}}, kerr.InvalidConfig)
	g.fail(controller.SetClusterProperties{ExpectedVersion: -1, Changes: []controller.PropertyChange{{Name: "default_topic_replications", Value: "9"}}}, kerr.InvalidConfig)
	g.fail(controller.SetClusterProperties{ExpectedVersion: -1, Changes: []controller.PropertyChange{{Name: "log_message_timestamp_type", Value: "WallClock"}}}, kerr.InvalidConfig)
	g.fail(controller.SetClusterProperties{ExpectedVersion: -1, Changes: []controller.PropertyChange{
		{Name: "fetch_max_bytes", Value: "1048576"}, {Name: "fetch_max_bytes", Value: "2097152"},
	}}, kerr.InvalidRequest)
	g.fail(controller.SetClusterProperties{ExpectedVersion: -2}, kerr.InvalidRequest)
	g.ok(controller.SetClusterProperties{ExpectedVersion: 2, Changes: []controller.PropertyChange{
		{Name: "kafka_enable_authorization", Value: "true"}, {Name: "log_retention_ms", Value: "604800000"},
	}})

	// The license: verified, refused ones leave it as it was.
	lic, err := config.SignLicense(goldenLicenseKey, config.License{Version: 1, Org: "Golden Replay Ltd",
		Type: config.LicenseTypeEnterprise, Expiry: time.Unix(1_893_456_000, 0).UTC()})
	if err != nil {
		t.Fatal(err)
	}
	g.ok(controller.SetLicense{Blob: []byte(lic)})
	forged, err := config.SignLicense(ed25519.NewKeyFromSeed(seed32("someone else")), config.License{Version: 1, Org: "Forged",
		Type: config.LicenseTypeEnterprise, Expiry: time.Unix(1_893_456_000, 0).UTC()})
	if err != nil {
		t.Fatal(err)
	}
	g.fail(controller.SetLicense{Blob: []byte(forged)}, kerr.InvalidRequest)
	g.fail(controller.SetLicense{Blob: []byte("not a license")}, kerr.InvalidRequest)
	g.fail(controller.SetLicense{}, kerr.InvalidRequest)

	// Leader reports from the partitions' groups.
	view := g.fsm.State().View()
	op := view.Topic("orders").Partitions
	o0, o1 := op[0].Replicas, op[1].Replicas
	g.ok(controller.ReportLeader{TopicID: tid("orders"), Partition: 0, Leader: o0[0], LeaderEpoch: 1, Term: 1, ISR: o0})
	g.ok(controller.ReportLeader{TopicID: tid("orders"), Partition: 0, Leader: o0[0], LeaderEpoch: 1, Term: 1, ISR: o0}) // repeated
	g.ok(controller.ReportLeader{TopicID: tid("orders"), Partition: 0, Leader: o0[0], LeaderEpoch: 1, Term: 1, ISR: o0[:2]})
	g.ok(controller.ReportLeader{TopicID: tid("orders"), Partition: 0, Leader: o0[1], LeaderEpoch: 2, Term: 2})
	g.fail(controller.ReportLeader{TopicID: tid("orders"), Partition: 0, Leader: o0[0], LeaderEpoch: 3, Term: 1}, kerr.FencedLeaderEpoch)
	g.fail(controller.ReportLeader{TopicID: tid("orders"), Partition: 0, Leader: o0[2], LeaderEpoch: 2, Term: 2}, kerr.FencedLeaderEpoch)
	g.fail(controller.ReportLeader{TopicID: tid("orders"), Partition: 0, Leader: o0[1], LeaderEpoch: 1, Term: 3}, kerr.FencedLeaderEpoch)
	g.ok(controller.ReportLeader{TopicID: tid("orders"), Partition: 1, Leader: o1[2], LeaderEpoch: 4, Term: 4, ISR: []int32{o1[2], o1[0]}})
	nonReplica := int32(1)
	for contains(o1, nonReplica) {
		nonReplica++
	}
	g.fail(controller.ReportLeader{TopicID: tid("orders"), Partition: 1, Leader: nonReplica, LeaderEpoch: 5, Term: 5}, kerr.NotLeaderForPartition)
	g.fail(controller.ReportLeader{TopicID: tid("orders"), Partition: 1, Leader: o1[0], LeaderEpoch: 5, Term: 5, ISR: []int32{nonReplica}}, kerr.InvalidRequest)
	g.fail(controller.ReportLeader{TopicID: tid("orders"), Partition: 2, Leader: op[2].Replicas[0], LeaderEpoch: 0, Term: 0}, kerr.InvalidRequest)
	g.fail(controller.ReportLeader{TopicID: tid("orders"), Partition: 8, Leader: 1, LeaderEpoch: 1, Term: 1}, kerr.UnknownTopicOrPartition)
	g.fail(controller.ReportLeader{TopicID: tid("metrics.raw"), Partition: 0, Leader: 1, LeaderEpoch: 1, Term: 1}, kerr.UnknownTopicID)

	// Producer id blocks.
	g.ok(controller.AllocateProducerIDs{NodeID: 1, Epoch: epochs[1], Count: 1000})
	g.ok(controller.AllocateProducerIDs{NodeID: 3, Count: 1000})
	g.fail(controller.AllocateProducerIDs{NodeID: 2, Epoch: epochs[2] + 1, Count: 1000}, kerr.StaleBrokerEpoch)
	g.fail(controller.AllocateProducerIDs{NodeID: 2, Count: 0}, kerr.InvalidRequest)
	g.fail(controller.AllocateProducerIDs{NodeID: 2, Count: 1<<20 + 1}, kerr.InvalidRequest)
	g.fail(controller.AllocateProducerIDs{NodeID: 8, Count: 1000}, kerr.BrokerIDNotRegistered)

	// SCRAM credentials.
	alice256 := scramCredential(t, "alice", config.MechanismSCRAMSHA256, "alice-secret", 4096)
	alice512 := scramCredential(t, "alice", config.MechanismSCRAMSHA512, "alice-secret", 8192)
	bob256 := scramCredential(t, "bob", config.MechanismSCRAMSHA256, "bob-secret", 4096)
	g.ok(controller.AlterScramCredentials{Upsertions: []controller.ScramCredential{alice256, alice512, bob256}})
	lowIter := scramCredential(t, "carol", config.MechanismSCRAMSHA256, "carol-secret", 4096)
	lowIter.Iterations = 1024
	g.fail(controller.AlterScramCredentials{Upsertions: []controller.ScramCredential{lowIter}}, kerr.UnacceptableCredential)
	sha1 := scramCredential(t, "carol", config.MechanismSCRAMSHA256, "carol-secret", 4096)
	sha1.Mechanism = "SCRAM-SHA-1"
	g.fail(controller.AlterScramCredentials{Upsertions: []controller.ScramCredential{sha1}}, kerr.UnsupportedSaslMechanism)
	g.fail(controller.AlterScramCredentials{Deletions: []controller.ScramCredentialKey{{User: "carol", Mechanism: config.MechanismSCRAMSHA256}}}, kerr.ResourceNotFound)
	alice256b := scramCredential(t, "alice", config.MechanismSCRAMSHA256, "alice-new-secret", 16384)
	g.ok(controller.AlterScramCredentials{Deletions: []controller.ScramCredentialKey{{User: "bob", Mechanism: config.MechanismSCRAMSHA256}},
		Upsertions: []controller.ScramCredential{alice256b}})
	g.ok(controller.AlterScramCredentials{}) // nothing to do

	// ACLs.
	allowRead := acl(kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeLiteral, "orders", "User:alice", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow)
	prefixWrite := acl(kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypePrefixed, "ord", "User:bob", "10.0.0.7", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeAllow)
	wildcard := acl(kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeLiteral, "*", "User:*", "*", kmsg.ACLOperationDescribe, kmsg.ACLPermissionTypeAllow)
	groupRead := acl(kmsg.ACLResourceTypeGroup, kmsg.ACLResourcePatternTypeLiteral, "billing", "User:alice", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow)
	clusterAlter := acl(kmsg.ACLResourceTypeCluster, kmsg.ACLResourcePatternTypeLiteral, controller.ClusterResourceName, "User:ops", "*", kmsg.ACLOperationAlter, kmsg.ACLPermissionTypeAllow)
	txnDeny := acl(kmsg.ACLResourceTypeTransactionalId, kmsg.ACLResourcePatternTypePrefixed, "tx-", "User:mallory", "*", kmsg.ACLOperationAll, kmsg.ACLPermissionTypeDeny)
	g.ok(controller.CreateACLs{Bindings: []controller.ACLBinding{allowRead, prefixWrite, wildcard, groupRead, clusterAlter, txnDeny}})
	g.ok(controller.CreateACLs{Bindings: []controller.ACLBinding{allowRead}}) // exists: unchanged
	badCluster := clusterAlter
	badCluster.ResourceName = "my-cluster"
	g.fail(controller.CreateACLs{Bindings: []controller.ACLBinding{groupRead, badCluster}}, kerr.InvalidRequest)
	badPrincipal := allowRead
	badPrincipal.Principal = "alice"
	g.fail(controller.CreateACLs{Bindings: []controller.ACLBinding{badPrincipal}}, kerr.InvalidRequest)
	g.ok(controller.DeleteACLs{Filters: []controller.ACLFilter{
		{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: strp("orders"), PatternType: kmsg.ACLResourcePatternTypeMatch,
			Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny},
		{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny, Principal: strp("User:alice"),
			Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeAllow},
	}})
	g.ok(controller.DeleteACLs{Filters: []controller.ACLFilter{{ResourceType: kmsg.ACLResourceTypeGroup, PatternType: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}}}) // matches nothing left
	g.fail(controller.DeleteACLs{Filters: []controller.ACLFilter{{ResourceType: kmsg.ACLResourceTypeUnknown, PatternType: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}}}, kerr.InvalidRequest)

	// A leader change: a barrier of the old leader, then the new leader's
	// no-op and its configuration change (broker 4 joins the voters).
	g.add(replaytest.TypeBarrier, nil)
	g.elect()
	g.configuration(1, 2, 3, 4)

	// Broker 4 stops heartbeating; the log's clock, not the wall clock,
	// decides it is gone.
	delete(g.beating, 4)
	g.now += 10 * sec
	g.fail(controller.CreateTopic{Name: "wide", ID: tid("wide"), Partitions: 2, ReplicationFactor: 4, PlacementSeed: 1}, kerr.InvalidReplicationFactor)
	g.fail(controller.CreateTopic{Name: "on-dead", ID: tid("on-dead"), Assignment: [][]int32{{4, 1}}}, kerr.InvalidReplicaAssignment)
	g.ok(controller.CreateTopic{Name: "placed-on-live", ID: tid("placed-on-live"), Partitions: 3, ReplicationFactor: 3, PlacementSeed: 2})
	// A proposer whose clock is behind does not move the log's clock back.
	skewed := g.now
	g.now -= 30 * sec
	g.ok(controller.Heartbeat{NodeID: 2, Epoch: epochs[2]})
	g.now = skewed + 500

	// Broker 2 stops and restarts with a new data directory; it is
	// refused while its old session lasts, accepted once it expired, and
	// its old epoch is stale from then on.
	delete(g.beating, 2)
	g.fail(register(2, 22, "rack-b"), kerr.DuplicateBrokerRegistration)
	g.now += 10 * sec
	newEpoch := g.ok(register(2, 22, "rack-b")).BrokerEpoch
	g.fail(controller.Heartbeat{NodeID: 2, Epoch: epochs[2]}, kerr.StaleBrokerEpoch)
	g.ok(controller.Heartbeat{NodeID: 2, Epoch: newEpoch})
	g.beating[2] = newEpoch
	g.ok(controller.AllocateProducerIDs{NodeID: 2, Epoch: newEpoch, Count: 500})

	// Broker 4 is removed.
	g.fail(controller.UnregisterBroker{NodeID: 4, Epoch: epochs[4] + 1}, kerr.StaleBrokerEpoch)
	g.ok(controller.UnregisterBroker{NodeID: 4, Epoch: epochs[4]})
	g.fail(controller.UnregisterBroker{NodeID: 4}, kerr.BrokerIDNotRegistered)
	g.ok(controller.CreatePartitions{TopicRef: controller.TopicRef{Name: "audit-log"}, Total: 3, PlacementSeed: 12})

	// Entries that do not decode: each answers an error and changes
	// nothing but the index.
	g.raw([]byte{})                                                                              // empty
	g.raw([]byte{0xC7, 5, 1})                                                                    // shorter than the header
	g.raw(append([]byte{0x7B}, `"name":"orders"}`...))                                           // no magic
	g.raw(append(header(99, 1, g.now), `{}`...))                                                 // unknown command type
	g.raw(append(header(controller.CmdCreateTopic, 9, g.now), `{}`...))                          // version from the future
	g.raw(append(header(controller.CmdCreateTopic, 0, g.now), `{}`...))                          // version 0
	g.raw(append(header(controller.CmdHeartbeat, 1, 0), `{"node_id":1,"epoch":1}`...))           // time 0
	g.raw(append(header(controller.CmdHeartbeat, 1, g.now), `{"node_id":1,"epoch":1,"x":1}`...)) // unknown field
	g.raw(append(header(controller.CmdHeartbeat, 1, g.now), `{"node_id":1,"epoch":1} {}`...))    // trailing data
	g.raw(append(header(controller.CmdDeleteTopic, 1, g.now), `["orders"]`...))                  // not an object
	g.raw(append(header(controller.CmdCreateTopic, 1, g.now), `{"name":"x","id":"short","partitions":1,"replication_factor":1,"placement_seed":0}`...))
	// RegisterBroker version 1 does not know listeners.
	g.raw(append(header(controller.CmdRegisterBroker, 1, g.now), mustJSON(register(5, 5, "rack-c"))...))

	// Life goes on after them.
	g.now += 1 * sec
	g.ok(controller.CreateTopic{Name: "after-junk", ID: tid("after-junk"), Partitions: 2, ReplicationFactor: 2, PlacementSeed: 6,
		Configs: map[string]string{"segment.ms": "600000", "retention.bytes": "-1"}})
	g.ok(controller.DeleteTopic{TopicRef: controller.TopicRef{ID: tid("payments")}})
	g.ok(controller.SetLicense{Blob: []byte(lic)})
	return g.entries
}

func contains(s []int32, v int32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
