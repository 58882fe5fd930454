package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
)

// fakeOperations answers elections from a table and records what it was
// asked.
type fakeOperations struct {
	operations
	asked   [][]broker.PartitionRef
	results map[broker.PartitionRef]error
}

func (f *fakeOperations) ElectPreferredLeaders(_ context.Context, refs []broker.PartitionRef) []broker.ElectionResult {
	f.asked = append(f.asked, refs)
	var out []broker.ElectionResult
	for _, r := range refs {
		out = append(out, broker.ElectionResult{PartitionRef: r, Err: f.results[r]})
	}
	return out
}

// ElectLeaders asks the broker for preferred elections only, answers each
// partition with its own outcome grouped by topic, refuses unclean and
// unknown election types without asking, and refuses everything to a
// principal without ALTER on the cluster (top level from v1, per
// partition in v0).
func TestElectLeadersAgainstFakes(t *testing.T) {
	ops := &fakeOperations{results: map[broker.PartitionRef]error{
		{Topic: "a", Partition: 1}: fmt.Errorf("%w: broker 2 already leads a/1", kerr.ElectionNotNeeded),
		{Topic: "b", Partition: 0}: fmt.Errorf("%w: not in sync", kerr.PreferredLeaderNotAvailable),
	}}
	sec := &fakeSecurity{allowed: []string{"User:admin"}}
	s := &Server{domain: domain{security: sec, operations: ops}, logger: slog.New(slog.DiscardHandler), opts: Options{ConnectionMaxInflightRequests: 6}}
	request := func(version int16, typ int8) *kmsg.ElectLeadersRequest {
		req := kmsg.NewPtrElectLeadersRequest()
		req.Version, req.ElectionType, req.TimeoutMillis = version, typ, 1000
		for _, tp := range []struct {
			topic string
			parts []int32
		}{{"a", []int32{0, 1}}, {"b", []int32{0}}} {
			rt := kmsg.NewElectLeadersRequestTopic()
			rt.Topic, rt.Partitions = tp.topic, tp.parts
			req.Topics = append(req.Topics, rt)
		}
		return req
	}
	codes := func(resp *kmsg.ElectLeadersResponse) map[string]int16 {
		out := map[string]int16{}
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				out[fmt.Sprintf("%s/%d", rt.Topic, p.Partition)] = p.ErrorCode
			}
		}
		return out
	}

	kresp, err := s.handleElectLeaders(fakeConn(t, s, "User:admin"), request(2, 0))
	if err != nil {
		t.Fatal(err)
	}
	got := codes(kresp.(*kmsg.ElectLeadersResponse))
	want := map[string]int16{"a/0": 0, "a/1": kerr.ElectionNotNeeded.Code, "b/0": kerr.PreferredLeaderNotAvailable.Code}
	if fmt.Sprint(got) != fmt.Sprint(want) || len(ops.asked) != 1 || len(ops.asked[0]) != 3 {
		t.Fatalf("preferred election: %v (asked %v), want %v", got, ops.asked, want)
	}
	if len(kresp.(*kmsg.ElectLeadersResponse).Topics) != 2 {
		t.Fatalf("results not grouped by topic: %+v", kresp)
	}

	for _, typ := range []int8{1, 7} {
		kresp, err = s.handleElectLeaders(fakeConn(t, s, "User:admin"), request(2, typ))
		if err != nil {
			t.Fatal(err)
		}
		for p, code := range codes(kresp.(*kmsg.ElectLeadersResponse)) {
			if code != kerr.InvalidRequest.Code {
				t.Errorf("election type %d: %s answered %d, want INVALID_REQUEST", typ, p, code)
			}
		}
	}
	if len(ops.asked) != 1 {
		t.Fatalf("refused election types reached the broker: %v", ops.asked)
	}

	kresp, err = s.handleElectLeaders(fakeConn(t, s, "User:mallory"), request(2, 0))
	if err != nil {
		t.Fatal(err)
	}
	if r := kresp.(*kmsg.ElectLeadersResponse); r.ErrorCode != kerr.ClusterAuthorizationFailed.Code || len(r.Topics) != 0 {
		t.Errorf("unauthorized v2: %+v", r)
	}
	kresp, err = s.handleElectLeaders(fakeConn(t, s, "User:mallory"), request(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	for p, code := range codes(kresp.(*kmsg.ElectLeadersResponse)) {
		if code != kerr.ClusterAuthorizationFailed.Code {
			t.Errorf("unauthorized v0: %s answered %d", p, code)
		}
	}
	if len(ops.asked) != 1 {
		t.Fatalf("unauthorized elections reached the broker: %v", ops.asked)
	}
}

func (f *fakeOperations) LogDirs(wanted func(string, int32) bool) []broker.LogDir {
	d := broker.LogDir{Path: "/data/topics", TotalBytes: 100, UsableBytes: 40}
	for _, r := range []broker.ReplicaLog{{Topic: "a", Partition: 0, Size: 10}, {Topic: "a", Partition: 1, Size: 11}, {Topic: "b", Partition: 0, Size: 12, OffsetLag: 3}} {
		if wanted == nil || wanted(r.Topic, r.Partition) {
			d.Replicas = append(d.Replicas, r)
		}
	}
	return []broker.LogDir{d}
}

// DescribeLogDirs lists the replicas the request names (all when it
// names none) grouped by topic, and nothing to a principal without
// DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED from v3).
func TestDescribeLogDirsAgainstFakes(t *testing.T) {
	sec := &fakeSecurity{allowed: []string{"User:admin"}}
	s := &Server{domain: domain{security: sec, operations: &fakeOperations{}}, logger: slog.New(slog.DiscardHandler), opts: Options{ConnectionMaxInflightRequests: 6}}
	req := kmsg.NewPtrDescribeLogDirsRequest()
	req.Version = 4
	kresp, err := s.handleDescribeLogDirs(fakeConn(t, s, "User:admin"), req)
	if err != nil {
		t.Fatal(err)
	}
	resp := kresp.(*kmsg.DescribeLogDirsResponse)
	if len(resp.Dirs) != 1 || resp.Dirs[0].Dir != "/data/topics" || resp.Dirs[0].TotalBytes != 100 || len(resp.Dirs[0].Topics) != 2 ||
		len(resp.Dirs[0].Topics[0].Partitions) != 2 || resp.Dirs[0].Topics[1].Partitions[0].OffsetLag != 3 {
		t.Fatalf("all replicas: %+v", resp.Dirs)
	}
	rt := kmsg.NewDescribeLogDirsRequestTopic()
	rt.Topic, rt.Partitions = "a", []int32{1}
	req.Topics = append(req.Topics, rt)
	kresp, err = s.handleDescribeLogDirs(fakeConn(t, s, "User:admin"), req)
	if err != nil {
		t.Fatal(err)
	}
	resp = kresp.(*kmsg.DescribeLogDirsResponse)
	if len(resp.Dirs[0].Topics) != 1 || len(resp.Dirs[0].Topics[0].Partitions) != 1 || resp.Dirs[0].Topics[0].Partitions[0].Size != 11 {
		t.Fatalf("named replica: %+v", resp.Dirs)
	}
	for _, v := range []int16{1, 3} {
		req.Version = v
		kresp, err = s.handleDescribeLogDirs(fakeConn(t, s, "User:mallory"), req)
		if err != nil {
			t.Fatal(err)
		}
		resp = kresp.(*kmsg.DescribeLogDirsResponse)
		want := int16(0)
		if v >= 3 {
			want = kerr.ClusterAuthorizationFailed.Code
		}
		if len(resp.Dirs) != 0 || resp.ErrorCode != want {
			t.Errorf("unauthorized v%d: error %d dirs %+v", v, resp.ErrorCode, resp.Dirs)
		}
	}
}

func (f *fakeOperations) ControllerQuorum(context.Context) (broker.QuorumInfo, error) {
	return broker.QuorumInfo{LeaderID: 1, LeaderEpoch: 7, HighWatermark: 42,
		Voters:    []broker.QuorumReplica{{NodeID: 1, Addr: "127.0.0.1:9001", LogEndOffset: 42, LastFetchMs: 5, LastCaughtUpMs: 5}, {NodeID: 2, Addr: "127.0.0.1:9002", LogEndOffset: 40, LastFetchMs: -1, LastCaughtUpMs: -1}},
		Observers: []broker.QuorumReplica{{NodeID: 3, Addr: "127.0.0.1:9003", LogEndOffset: 12, LastFetchMs: 4, LastCaughtUpMs: 3}},
	}, nil
}

// DescribeQuorum describes __cluster_metadata/0 from the controller
// group's leader, with each member's endpoint from v2, answers any other
// partition UNKNOWN_TOPIC_OR_PARTITION, and refuses a principal without
// DESCRIBE on the cluster.
func TestDescribeQuorumAgainstFakes(t *testing.T) {
	sec := &fakeSecurity{allowed: []string{"User:admin"}}
	s := &Server{domain: domain{security: sec, operations: &fakeOperations{}}, logger: slog.New(slog.DiscardHandler), opts: Options{ConnectionMaxInflightRequests: 6}}
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.Version = 2
	for _, name := range []string{"__cluster_metadata", "other"} {
		rt := kmsg.NewDescribeQuorumRequestTopic()
		rt.Topic = name
		for _, p := range []int32{0, 1} {
			rp := kmsg.NewDescribeQuorumRequestTopicPartition()
			rp.Partition = p
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	kresp, err := s.handleDescribeQuorum(fakeConn(t, s, "User:admin"), req)
	if err != nil {
		t.Fatal(err)
	}
	resp := kresp.(*kmsg.DescribeQuorumResponse)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.LeaderID != 1 || p.LeaderEpoch != 7 || p.HighWatermark != 42 || len(p.CurrentVoters) != 2 || len(p.Observers) != 1 ||
		p.CurrentVoters[1].LastFetchTimestamp != -1 || p.Observers[0].LogEndOffset != 12 {
		t.Fatalf("metadata partition: %+v", p)
	}
	for _, bad := range []kmsg.DescribeQuorumResponseTopicPartition{resp.Topics[0].Partitions[1], resp.Topics[1].Partitions[0], resp.Topics[1].Partitions[1]} {
		if bad.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("partition %d answered %d", bad.Partition, bad.ErrorCode)
		}
	}
	if len(resp.Nodes) != 3 || resp.Nodes[2].NodeID != 3 || resp.Nodes[2].Listeners[0].Port != 9003 || resp.Nodes[2].Listeners[0].Name != "CONTROLLER" {
		t.Errorf("nodes: %+v", resp.Nodes)
	}
	kresp, err = s.handleDescribeQuorum(fakeConn(t, s, "User:mallory"), req)
	if err != nil {
		t.Fatal(err)
	}
	if r := kresp.(*kmsg.DescribeQuorumResponse); r.ErrorCode != kerr.ClusterAuthorizationFailed.Code || len(r.Topics) != 0 {
		t.Errorf("unauthorized: %+v", r)
	}
}

// noTopics is a catalog without topics.
type noTopics struct{ topicCatalog }

func (noTopics) Topic(string) *broker.Topic { return nil }

// DescribeProducers refuses a topic to a principal without READ on it
// (TOPIC_AUTHORIZATION_FAILED for each partition) before looking it up,
// and answers an unknown one UNKNOWN_TOPIC_OR_PARTITION.
func TestDescribeProducersAuthorization(t *testing.T) {
	sec := &fakeSecurity{allowed: []string{"User:admin"}}
	s := &Server{domain: domain{security: sec, topics: noTopics{}}, logger: slog.New(slog.DiscardHandler), opts: Options{ConnectionMaxInflightRequests: 6}}
	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = "orders", []int32{0, 1}
	req.Topics = append(req.Topics, rt)
	for principal, want := range map[string]int16{"User:admin": kerr.UnknownTopicOrPartition.Code, "User:mallory": kerr.TopicAuthorizationFailed.Code} {
		kresp, err := s.handleDescribeProducers(fakeConn(t, s, principal), req)
		if err != nil {
			t.Fatal(err)
		}
		resp := kresp.(*kmsg.DescribeProducersResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
			t.Fatalf("%s: %+v", principal, resp.Topics)
		}
		for _, p := range resp.Topics[0].Partitions {
			if p.ErrorCode != want {
				t.Errorf("%s: partition %d answered %d, want %d", principal, p.Partition, p.ErrorCode, want)
			}
		}
	}
}

// fakeReassignments records what it is asked.
type fakeReassignments struct {
	asked []string
}

func (f *fakeReassignments) ReassignPartition(topic string, partition int32, target []int32) error {
	f.asked = append(f.asked, fmt.Sprintf("%s/%d→%v", topic, partition, target))
	return nil
}

func (f *fakeReassignments) Reassignments(func(string, int32) bool) []broker.Reassignment {
	return []broker.Reassignment{{Topic: "a", Partition: 0, Replicas: []int32{2, 3, 1}, Adding: []int32{3}, Removing: []int32{1}}}
}

// AlterPartitionReassignments needs ALTER on the cluster and
// ListPartitionReassignments DESCRIBE, refused at the top level before
// anything is asked of the broker; an empty replica list is refused per
// partition.
func TestReassignmentsAuthorization(t *testing.T) {
	sec := &fakeSecurity{allowed: []string{"User:admin"}}
	ra := &fakeReassignments{}
	s := &Server{domain: domain{security: sec, reassign: ra, topics: noTopics{}}, logger: slog.New(slog.DiscardHandler), opts: Options{ConnectionMaxInflightRequests: 6}}
	alter := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	rt.Topic = "a"
	for i, replicas := range [][]int32{{2, 3}, {}, nil} {
		rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		rp.Partition, rp.Replicas = int32(i), replicas
		rt.Partitions = append(rt.Partitions, rp)
	}
	alter.Topics = append(alter.Topics, rt)
	kresp, err := s.handleAlterPartitionReassignments(fakeConn(t, s, "User:mallory"), alter)
	if err != nil {
		t.Fatal(err)
	}
	if r := kresp.(*kmsg.AlterPartitionAssignmentsResponse); r.ErrorCode != kerr.ClusterAuthorizationFailed.Code || len(ra.asked) != 0 {
		t.Fatalf("unauthorized alter: %+v, asked %v", r, ra.asked)
	}
	kresp, err = s.handleAlterPartitionReassignments(fakeConn(t, s, "User:admin"), alter)
	if err != nil {
		t.Fatal(err)
	}
	parts := kresp.(*kmsg.AlterPartitionAssignmentsResponse).Topics[0].Partitions
	if parts[0].ErrorCode != 0 || parts[1].ErrorCode != kerr.InvalidReplicaAssignment.Code || parts[2].ErrorCode != 0 ||
		fmt.Sprint(ra.asked) != "[a/0→[2 3] a/2→[]]" {
		t.Fatalf("alter: %+v, asked %v", parts, ra.asked)
	}
	list := kmsg.NewPtrListPartitionReassignmentsRequest()
	kresp, err = s.handleListPartitionReassignments(fakeConn(t, s, "User:mallory"), list)
	if err != nil {
		t.Fatal(err)
	}
	if r := kresp.(*kmsg.ListPartitionReassignmentsResponse); r.ErrorCode != kerr.ClusterAuthorizationFailed.Code || len(r.Topics) != 0 {
		t.Fatalf("unauthorized list: %+v", r)
	}
	kresp, err = s.handleListPartitionReassignments(fakeConn(t, s, "User:admin"), list)
	if err != nil {
		t.Fatal(err)
	}
	if r := kresp.(*kmsg.ListPartitionReassignmentsResponse); len(r.Topics) != 1 || fmt.Sprint(r.Topics[0].Partitions[0].AddingReplicas) != "[3]" {
		t.Fatalf("list: %+v", r)
	}
}
