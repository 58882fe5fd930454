package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// reassignTimeout bounds a reassignment of a small partition: the new
// replicas open, are caught up, vote, and the old ones leave.
const reassignTimeout = 90 * time.Second

// createAssignedTopic creates a one-partition topic on the given replicas.
func createAssignedTopic(t testing.TB, b *Broker, name string, replicas ...int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 15_000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, replicas
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	req.Topics = append(req.Topics, rt)
	resp, err := ask(t, b, req)
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.(*kmsg.CreateTopicsResponse).Topics[0]; r.ErrorCode != 0 {
		t.Fatalf("CreateTopics %s on %v: %s %s", name, replicas, errName(r.ErrorCode), derefStr(r.ErrorMessage))
	}
}

// reassign asks b to move partition 0 of topic to target (nil: cancel)
// and returns the partition's answer.
func reassign(t testing.TB, b *Broker, topic string, target []int32) error {
	t.Helper()
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.TimeoutMillis = 15_000
	rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
	rp.Partition, rp.Replicas = 0, target
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := ask(t, b, req)
	if err != nil {
		t.Fatal(err)
	}
	r := resp.(*kmsg.AlterPartitionAssignmentsResponse)
	if r.ErrorCode != 0 {
		t.Fatalf("AlterPartitionReassignments: %s", errName(r.ErrorCode))
	}
	p := r.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		return fmt.Errorf("%w: %s", kerr.ErrorForCode(p.ErrorCode), derefStr(p.ErrorMessage))
	}
	return nil
}

// reassignments lists every reassignment in progress, as b answers.
func reassignments(t testing.TB, b *Broker) []kmsg.ListPartitionReassignmentsResponseTopic {
	t.Helper()
	resp, err := ask(t, b, kmsg.NewPtrListPartitionReassignmentsRequest())
	if err != nil {
		t.Fatal(err)
	}
	r := resp.(*kmsg.ListPartitionReassignmentsResponse)
	if r.ErrorCode != 0 {
		t.Fatalf("ListPartitionReassignments: %s", errName(r.ErrorCode))
	}
	return r.Topics
}

// waitReplicas waits until no reassignment runs and every broker in bs
// describes partition 0 of topic with exactly these replicas (in order)
// all in sync and led by one of them.
func waitReplicas(t testing.TB, bs []*Broker, topic string, want ...int32) {
	t.Helper()
	pollUntil(t, reassignTimeout, fmt.Sprintf("%s/0 on replicas %v, all in sync", topic, want), func() error {
		if r := reassignments(t, bs[0]); len(r) != 0 {
			return fmt.Errorf("reassignments in progress: %+v", r)
		}
		for _, b := range bs {
			md, err := askMetadata(t, b, topic)
			if err != nil {
				return err
			}
			p := md.Topics[0].Partitions[0]
			isr := slices.Clone(p.ISR)
			slices.Sort(isr)
			sorted := slices.Clone(want)
			slices.Sort(sorted)
			if !slices.Equal(p.Replicas, want) || !slices.Equal(isr, sorted) || !slices.Contains(want, p.Leader) {
				return fmt.Errorf("node %d: replicas %v isr %v leader %d", b.NodeID, p.Replicas, p.ISR, p.Leader)
			}
		}
		return nil
	})
}

// waitNoReplicaFiles waits until b holds no files of partition 0 of topic.
func waitNoReplicaFiles(t testing.TB, b *Broker, topic string, id [16]byte) {
	t.Helper()
	dir := partitionDirOf(b, topic, id, 0)
	pollUntil(t, 30*time.Second, fmt.Sprintf("node %d removing %s", b.NodeID, dir), func() error {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s: %v", dir, err)
		}
		return nil
	})
}

// TestPartitionReassignment: a partition moves from brokers {0,1,2} to
// {1,2,3} of four while an idempotent producer (acks=all) writes to it
// and a consumer reads it. The new replica joins, catches up and votes,
// the old one leaves and its files go; every acknowledged record is then
// present once, in order, as consumed and in the segment files of the
// three new replicas, which are byte-identical, and the consumer that read
// through the move saw exactly those records, in order.
func TestPartitionReassignment(t *testing.T) {
	t.Parallel()
	bs := startReplCluster(t, 4)
	waitClusterView(t, bs, 30*time.Second)
	const topic = "reassigned"
	createAssignedTopic(t, bs[0], topic, 0, 1, 2)
	waitReplicas(t, bs, topic, 0, 1, 2)
	id := topicIDOf(t, bs[0], topic)

	p := newSeqProducer(t, bs, topic, 1)
	p.run(5, 5*time.Millisecond, 200_000)
	p.waitAcked(t, 500, 30*time.Second, "first records acknowledged")
	reader := readThrough(t, bs, topic)
	if err := reassign(t, bs[3], topic, []int32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	waitReplicas(t, bs, topic, 1, 2, 3)
	t.Logf("reassigned {0,1,2} → {1,2,3} in %v while producing; %s", time.Since(started).Round(10*time.Millisecond), p.summary())
	waitNoReplicaFiles(t, bs[0], topic, id)
	p.waitAcked(t, p.ackedCount()+500, 30*time.Second, "produce after the reassignment")
	if err := p.stopAndFlush(60 * time.Second); err != nil {
		t.Fatalf("flushing the producer: %v (%s)", err, p.summary())
	}
	holders := bs[1:]
	consumed := consumeAll(t, holders, topic, 1, 60*time.Second)
	st := checkSeqLog(t, "consumed after the reassignment", 0, consumed[0], p.acked[0])
	t.Logf("consumed: acknowledged %d, found %d, lost %d, duplicated %d", st.acked, st.found, st.lost, st.duplicated)
	seen := reader.stopAt(t, int64(len(consumed[0])), 60*time.Second)
	for i, r := range seen {
		if i >= len(consumed[0]) || r.Offset != consumed[0][i].Offset || !bytes.Equal(r.Value, consumed[0][i].Value) {
			t.Fatalf("the consumer reading through the move saw record %d at offset %d, the log has %+v there", i, r.Offset, consumed[0][min(i, len(consumed[0])-1)])
		}
	}
	t.Logf("a consumer reading through the move saw all %d records in order", len(seen))
	waitLogsConverge(t, holders, topic, id, 1, 1, 60*time.Second)
	stopAll(t, holders)
	compareReplicaSegments(t, holders, topic, id, 1)
}

// TestReassignmentReplicationFactorAndCancel: the replication factor
// changes 1 → 3 → 1 through reassignments (the sole replica's group
// restarting with a group's timers as others join), records surviving
// each; a reassignment that cannot proceed (its new replica paused) is
// listed with its adding and removing replicas and cancelled back.
func TestReassignmentReplicationFactorAndCancel(t *testing.T) {
	t.Parallel()
	bs := startReplCluster(t, 3)
	waitClusterView(t, bs, 30*time.Second)
	const topic = "refactored"
	createAssignedTopic(t, bs[0], topic, 0)
	waitReplicas(t, bs, topic, 0)
	id := topicIDOf(t, bs[0], topic)
	p := newSeqProducer(t, bs, topic, 1)
	p.produceSync(200)

	if err := reassign(t, bs[1], topic, []int32{0, 1, 2}); err != nil {
		t.Fatal(err)
	}
	waitReplicas(t, bs, topic, 0, 1, 2)
	p.produceSync(200)
	if err := reassign(t, bs[1], topic, []int32{2}); err != nil {
		t.Fatal(err)
	}
	waitReplicas(t, bs, topic, 2)
	waitNoReplicaFiles(t, bs[0], topic, id)
	waitNoReplicaFiles(t, bs[1], topic, id)
	p.produceSync(200)
	consumed := consumeAll(t, bs, topic, 1, 60*time.Second)
	if st := checkSeqLog(t, "consumed after RF 1 → 3 → 1", 0, consumed[0], p.acked[0]); st.found != 600 {
		t.Errorf("found %d of 600 records", st.found)
	}

	// A broker that neither leads the controller nor holds the partition
	// is paused, still registered live: the reassignment to {2, it} is
	// accepted and cannot complete.
	controllerID := waitClusterView(t, bs, 30*time.Second)
	paused := bs[0]
	if controllerID == 0 {
		paused = bs[1]
	}
	other := bs[1-paused.NodeID]
	pausedID := int32(paused.NodeID)
	paused.signal(syscall.SIGSTOP)
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			paused.signal(syscall.SIGCONT)
		}
	})
	if err := reassign(t, other, topic, []int32{2, pausedID}); err != nil {
		t.Fatal(err)
	}
	r := reassignments(t, other)
	if len(r) != 1 || r[0].Topic != topic || len(r[0].Partitions) != 1 ||
		!slices.Equal(r[0].Partitions[0].Replicas, []int32{2, pausedID}) || !slices.Equal(r[0].Partitions[0].AddingReplicas, []int32{pausedID}) ||
		len(r[0].Partitions[0].RemovingReplicas) != 0 {
		t.Fatalf("listed: %+v", r)
	}
	if err := reassign(t, other, topic, nil); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if err := reassign(t, other, topic, nil); !errors.Is(err, kerr.NoReassignmentInProgress) {
		t.Fatalf("second cancel: %v, want NO_REASSIGNMENT_IN_PROGRESS", err)
	}
	paused.signal(syscall.SIGCONT)
	resumed = true
	waitReplicas(t, bs, topic, 2)
	p.produceSync(100)
	consumed = consumeAll(t, bs, topic, 1, 60*time.Second)
	if st := checkSeqLog(t, "consumed after the cancel", 0, consumed[0], p.acked[0]); st.found != 700 {
		t.Errorf("found %d of 700 records", st.found)
	}

	// Refusals: an empty list, an unknown broker, an unknown partition.
	if err := reassign(t, bs[0], topic, []int32{}); !errors.Is(err, kerr.InvalidReplicaAssignment) {
		t.Errorf("empty replica list: %v", err)
	}
	if err := reassign(t, bs[0], topic, []int32{2, 9}); !errors.Is(err, kerr.InvalidReplicaAssignment) {
		t.Errorf("unknown broker: %v", err)
	}
	if err := reassign(t, bs[0], "no-such-topic", []int32{2}); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("unknown topic: %v", err)
	}
}

// TestReassignPartitionsTool: Kafka's kafka-reassign-partitions moves a
// partition with --execute, --verify reports it completed (clearing the
// replication throttles, as it always does), --generate proposes a plan
// and --cancel stops a move that cannot proceed.
func TestReassignPartitionsTool(t *testing.T) {
	t.Parallel()
	bs := startReplCluster(t, 4)
	waitClusterView(t, bs, 30*time.Second)
	const topic = "tool-moved"
	createAssignedTopic(t, bs[0], topic, 0, 1)
	waitReplicas(t, bs, topic, 0, 1)
	plan := filepath.Join(t.TempDir(), "move.json")
	if err := os.WriteFile(plan, []byte(`{"version":1,"partitions":[{"topic":"`+topic+`","partition":0,"replicas":[1,2]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	boot := strings.Join(kafkaAddrs(bs), ",")
	const tool = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
	out, err := kafkaTool(t, tool, "--bootstrap-server", boot, "--reassignment-json-file", plan, "--execute")
	if err != nil || !strings.Contains(out, "Successfully started partition reassignment") {
		t.Fatalf("kafka-reassign-partitions --execute: %v\n%s", err, out)
	}
	waitReplicas(t, bs, topic, 1, 2)
	out, err = kafkaTool(t, tool, "--bootstrap-server", boot, "--reassignment-json-file", plan, "--verify")
	if err != nil || !strings.Contains(out, "Reassignment of partition "+topic+"-0 is completed") {
		t.Fatalf("kafka-reassign-partitions --verify: %v\n%s", err, out)
	}
	t.Logf("kafka-reassign-partitions --verify:\n%s", out)

	// --generate proposes a plan from the live brokers.
	topics := filepath.Join(t.TempDir(), "topics.json")
	if err := os.WriteFile(topics, []byte(`{"version":1,"topics":[{"topic":"`+topic+`"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = kafkaTool(t, tool, "--bootstrap-server", boot, "--topics-to-move-json-file", topics, "--broker-list", "0,2", "--generate")
	if err != nil || !strings.Contains(out, "Current partition replica assignment") || !strings.Contains(out, "Proposed partition reassignment configuration") {
		t.Fatalf("kafka-reassign-partitions --generate: %v\n%s", err, out)
	}

	// --cancel stops a move that cannot proceed (its new replica's broker
	// paused, still registered live) and puts the replicas back. The
	// controller must answer meanwhile: the paused broker is one that
	// does not lead it.
	controllerID := waitClusterView(t, bs, 30*time.Second)
	paused := bs[0]
	if controllerID == 0 {
		paused = bs[3]
	}
	target := fmt.Sprintf("[1,2,%d]", paused.NodeID)
	stuck := filepath.Join(t.TempDir(), "stuck.json")
	if err := os.WriteFile(stuck, []byte(`{"version":1,"partitions":[{"topic":"`+topic+`","partition":0,"replicas":`+target+`}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	paused.signal(syscall.SIGSTOP)
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			paused.signal(syscall.SIGCONT)
		}
	})
	others := without(bs, int32(paused.NodeID))
	otherBoot := strings.Join(kafkaAddrs(others), ",")
	if out, err = kafkaTool(t, tool, "--bootstrap-server", otherBoot, "--reassignment-json-file", stuck, "--execute"); err != nil {
		t.Fatalf("kafka-reassign-partitions --execute (stuck): %v\n%s", err, out)
	}
	// --preserve-throttles: clearing them would wait on the paused broker.
	out, err = kafkaTool(t, tool, "--bootstrap-server", otherBoot, "--reassignment-json-file", stuck, "--cancel", "--preserve-throttles")
	if err != nil || !strings.Contains(out, "Successfully cancelled partition reassignment for: "+topic+"-0") {
		t.Fatalf("kafka-reassign-partitions --cancel: %v\n%s", err, out)
	}
	paused.signal(syscall.SIGCONT)
	resumed = true
	waitReplicas(t, bs, topic, 1, 2)
}

// TestWeirctlDecommissionAndBalance: weirctl moves every replica off a
// broker of four (internal topics included), following the moves to
// completion; balance then gives the emptied broker its share back and
// evens out leadership.
func TestWeirctlDecommissionAndBalance(t *testing.T) {
	t.Parallel()
	bs := startReplCluster(t, 4)
	waitClusterView(t, bs, 30*time.Second)
	createReplicatedTopic(t, bs[0], "spread", 8, 2, nil)
	waitReplicatedLeaders(t, bs, bs, "spread", 8, 2, 30*time.Second, nil)
	w := newWeirctl(t, bs[0])
	replicasPer := func() map[int32]int {
		t.Helper()
		md, err := askMetadata(t, bs[0], "spread", "__consumer_offsets")
		if err != nil {
			t.Fatal(err)
		}
		n := map[int32]int{}
		for _, mt := range md.Topics {
			for _, p := range mt.Partitions {
				for _, r := range p.Replicas {
					n[r]++
				}
			}
		}
		return n
	}
	if replicasPer()[3] == 0 {
		t.Fatal("broker 3 holds no replica to begin with")
	}

	dry := w.ok(t, "", "cluster", "partitions", "decommission", "3", "--dry-run")
	if !strings.Contains(dry.stdout, "would move") || replicasPer()[3] == 0 {
		t.Fatalf("dry run:\n%s", dry)
	}
	r := w.exec(t, 4*time.Minute, "", "cluster", "partitions", "decommission", "3", "--wait", "--wait-timeout", "3m")
	if r.exitCode != 0 || !strings.Contains(r.stdout, "partition(s) moved") || !strings.Contains(r.stderr, "partitions moved") {
		t.Fatalf("decommission:\n%s", r)
	}
	// weirctl saw the moves done through whichever broker it asked;
	// broker 0's copy of the controller's state may be a moment behind.
	pollUntil(t, 30*time.Second, "broker 3 holding no replica in broker 0's Metadata", func() error {
		if n := replicasPer(); n[3] != 0 {
			return fmt.Errorf("broker 3 still holds %d replicas after the decommission: %v", n[3], n)
		}
		return nil
	})
	id := topicIDOf(t, bs[0], "spread")
	for p := range int32(8) {
		dir := partitionDirOf(bs[3], "spread", id, p)
		pollUntil(t, 30*time.Second, "broker 3 removing "+dir, func() error {
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("broker 3 keeps spread/%d's files: %v", p, err)
			}
			return nil
		})
	}

	r = w.exec(t, 4*time.Minute, "", "cluster", "partitions", "balance", "--wait", "--wait-timeout", "3m")
	if r.exitCode != 0 {
		t.Fatalf("balance:\n%s", r)
	}
	var n map[int32]int
	pollUntil(t, 30*time.Second, "replicas balanced in broker 0's Metadata", func() error {
		n = replicasPer()
		lo, hi := n[0], n[0]
		for id := range int32(4) {
			lo, hi = min(lo, n[id]), max(hi, n[id])
		}
		if n[3] == 0 || hi-lo > 1 {
			return fmt.Errorf("replicas per broker after balancing: %v", n)
		}
		return nil
	})
	if st := w.ok(t, "", "cluster", "partitions", "status"); !strings.Contains(st.stdout, "no reassignments in progress") {
		t.Errorf("status:\n%s", st)
	}
	t.Logf("replicas per broker after decommissioning broker 3 and balancing: %v", n)
}

// TestReassignmentSurvivesLeaderKill: the partition's leader, one of the
// replicas being removed, is killed (SIGKILL) right after a reassignment
// starts; the new leader carries the move to completion, the killed
// broker deletes its copy when it comes back, and every record acknowledged
// to an idempotent acks=all producer is there once, in order.
func TestReassignmentSurvivesLeaderKill(t *testing.T) {
	t.Parallel()
	bs := startReplCluster(t, 4)
	waitClusterView(t, bs, 30*time.Second)
	const topic = "reassigned-killed"
	createAssignedTopic(t, bs[0], topic, 0, 1, 2)
	waitReplicas(t, bs, topic, 0, 1, 2)
	id := topicIDOf(t, bs[0], topic)
	p := newSeqProducer(t, bs, topic, 1)
	p.run(5, 5*time.Millisecond, 200_000)
	p.waitAcked(t, 500, 30*time.Second, "first records acknowledged")

	if err := reassign(t, bs[3], topic, []int32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	bs[0].Kill(t)
	live := bs[1:]
	waitReplicas(t, live, topic, 1, 2, 3)
	bs[0].Start(t)
	waitNoReplicaFiles(t, bs[0], topic, id)
	waitClusterView(t, bs, 60*time.Second)
	p.waitAcked(t, p.ackedCount()+500, 60*time.Second, "produce after the move")
	if err := p.stopAndFlush(60 * time.Second); err != nil {
		t.Fatalf("flushing the producer: %v (%s)", err, p.summary())
	}
	consumed := consumeAll(t, live, topic, 1, 60*time.Second)
	st := checkSeqLog(t, "consumed after the move", 0, consumed[0], p.acked[0])
	t.Logf("%s; consumed: acknowledged %d, found %d, lost %d, duplicated %d", p.summary(), st.acked, st.found, st.lost, st.duplicated)
}

// TestReassignPartitionsToolThrottled: kafka-reassign-partitions --throttle
// holds a new replica's catch-up (the records copied after a snapshot) to
// the rate: the copies wait (weir_replication_throttle_seconds_total grows),
// the move completes, and --verify clears the throttle.
func TestReassignPartitionsToolThrottled(t *testing.T) {
	t.Parallel()
	bs := startReplCluster(t, 3, WithSet("raft_snapshot_entries", "64"), WithSet("raft_trailing_entries", "16"))
	waitClusterView(t, bs, 30*time.Second)
	const topic = "tool-throttled"
	createAssignedTopic(t, bs[0], topic, 0, 1)
	waitReplicas(t, bs, topic, 0, 1)
	p := newSeqProducer(t, bs, topic, 1)
	p.padRecords(4 << 10)
	p.produceSync(400) // ~1.6 MiB in 400 entries
	// The new replica must be caught up by copying records, not by Raft
	// entries: wait until both replicas snapshotted past them (16 entries
	// kept behind), at hashicorp/raft's SnapshotInterval ticks (30-60 s).
	id := topicIDOf(t, bs[0], topic)
	for _, b := range bs[:2] {
		dir := partitionGroupDir(b, id, 0)
		pollUntil(t, 75*time.Second, fmt.Sprintf("node %d snapshotting %s/0", b.NodeID, topic), func() error {
			got, err := raftSnapshots(dir)
			if err != nil {
				return err
			}
			if len(got) == 0 || got[len(got)-1] < 300 {
				return fmt.Errorf("snapshots at Raft indexes %v", got)
			}
			return nil
		})
	}
	plan := filepath.Join(t.TempDir(), "move.json")
	if err := os.WriteFile(plan, []byte(`{"version":1,"partitions":[{"topic":"`+topic+`","partition":0,"replicas":[0,1,2]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	boot := strings.Join(kafkaAddrs(bs), ",")
	const tool = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
	out, err := kafkaTool(t, tool, "--bootstrap-server", boot, "--reassignment-json-file", plan, "--execute", "--throttle", "524288")
	if err != nil || !strings.Contains(out, "Successfully started partition reassignment") {
		t.Fatalf("kafka-reassign-partitions --execute --throttle: %v\n%s", err, out)
	}
	waitConfigEverywhere(t, bs, kmsg.ConfigResourceTypeBroker, "", "leader_replication_throttled_rate", "524288", kmsg.ConfigSourceDynamicDefaultBrokerConfig)
	waitReplicas(t, bs, topic, 0, 1, 2)
	waited := 0.0
	for _, side := range []string{"leader", "follower"} {
		waited += sumOver(t, bs, `weir_replication_throttle_seconds_total{side="`+side+`"}`)
	}
	if waited <= 0 {
		t.Errorf("no catch-up copy waited for the throttle")
	}
	out, err = kafkaTool(t, tool, "--bootstrap-server", boot, "--reassignment-json-file", plan, "--verify")
	if err != nil || !strings.Contains(out, "is completed") {
		t.Fatalf("kafka-reassign-partitions --verify: %v\n%s", err, out)
	}
	waitConfigEverywhere(t, bs, kmsg.ConfigResourceTypeBroker, "", "leader_replication_throttled_rate", "0", kmsg.ConfigSourceDefaultConfig)
	t.Logf("catch-up copies waited %.1f s for the throttle; --verify:\n%s", waited, out)
}

// throughReader consumes partition 0 of a topic from the start while the
// test goes on.
type throughReader struct {
	cl     *kgo.Client
	mu     sync.Mutex
	recs   []logRecord
	cancel context.CancelFunc
	done   chan struct{}
}

func readThrough(t testing.TB, bs []*Broker, topic string) *throughReader {
	t.Helper()
	cl, err := kgo.NewClient(append(replClientOpts(bs),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &throughReader{cl: cl, cancel: cancel, done: make(chan struct{})}
	t.Cleanup(func() { cancel(); <-r.done; cl.Close() })
	go func() {
		defer close(r.done)
		for ctx.Err() == nil {
			f := cl.PollFetches(ctx)
			f.EachRecord(func(rec *kgo.Record) {
				r.mu.Lock()
				r.recs = append(r.recs, logRecord{Offset: rec.Offset, Key: rec.Key, Value: rec.Value})
				r.mu.Unlock()
			})
		}
	}()
	return r
}

// stopAt waits (≤ timeout) until the reader has n records, stops it and
// returns what it read.
func (r *throughReader) stopAt(t testing.TB, n int64, timeout time.Duration) []logRecord {
	t.Helper()
	pollUntil(t, timeout, fmt.Sprintf("the consumer reading %d records", n), func() error {
		r.mu.Lock()
		defer r.mu.Unlock()
		if int64(len(r.recs)) < n {
			return fmt.Errorf("%d read", len(r.recs))
		}
		return nil
	})
	r.cancel()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.recs)
}
