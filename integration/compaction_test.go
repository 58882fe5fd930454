package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// replicaRecord is one record as a replica served it.
type replicaRecord struct {
	offset     int64
	key, value string
	tombstone  bool
}

// readReplica reads partition 0 of topic from b itself (with b's rack, so
// a follower serves it: KIP-392), from offset from to end.
func readReplica(t *testing.T, b *Broker, topic string, id [16]byte, epoch int32, rack string, from, end int64) []replicaRecord {
	t.Helper()
	var out []replicaRecord
	next := from
	for range 10_000 {
		if next >= end {
			return out
		}
		resp, err := ask(t, b, rawFetch(topic, id, next, epoch, rack))
		if err != nil {
			t.Fatalf("fetch from node %d at %d: %v", b.NodeID, next, err)
		}
		rp := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
		if rp.ErrorCode != 0 || rp.PreferredReadReplica >= 0 {
			t.Fatalf("fetch from node %d at %d: error %s, preferred replica %d", b.NodeID, next, errName(rp.ErrorCode), rp.PreferredReadReplica)
		}
		fp, after := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: next, Topic: topic}, &rp, kgo.DefaultDecompressor(), nil)
		if fp.Err != nil {
			t.Fatalf("fetch from node %d at %d: %v", b.NodeID, next, fp.Err)
		}
		for _, r := range fp.Records {
			out = append(out, replicaRecord{r.Offset, string(r.Key), string(r.Value), r.Value == nil})
			next = max(next, r.Offset+1)
		}
		if after <= next && len(fp.Records) == 0 {
			t.Fatalf("fetch from node %d at %d (end %d) made no progress", b.NodeID, next, end)
		}
		next = max(next, after)
	}
	t.Fatalf("reading node %d did not finish", b.NodeID)
	return nil
}

// TestCompactedTopicReplicated: a compacted RF=3 topic on three brokers
// (cleanup.policy=compact at creation, as Kafka Streams and Connect create
// theirs). Every replica's cleaner compacts its own log; each replica,
// read directly (a follower through KIP-392 follower fetching), serves
// every key's latest record at its original offset, tombstones included
// (delete.retention.ms has not passed), strictly increasing offsets, and
// fewer records than were written. A fetch at a removed offset starts at
// the next surviving record; ListOffsets and OffsetForLeaderEpoch are
// unchanged by cleaning.
func TestCompactedTopicReplicated(t *testing.T) {
	t.Parallel()
	racks := []string{"a", "b", "c"}
	// Raft logs trimmed early, for the wiped replica's rebuild below.
	bs := StartCluster(t, 3, WithRacks(racks...), WithSet("log_cleaner_backoff_ms", "100"),
		WithSet("raft_snapshot_entries", "64"), WithSet("raft_trailing_entries", "16"))
	const (
		topic   = "compacted-repl"
		keys    = 40
		records = 3000
	)
	createReplicatedTopic(t, bs[0], topic, 1, 3, map[string]string{
		"cleanup.policy": "compact", "segment.bytes": "16384", "min.cleanable.dirty.ratio": "0.01",
	})
	leaders := waitReplicatedLeaders(t, bs, bs, topic, 1, 3, leaderTimeout, nil)
	leader := bs[leaders[0].Leader]
	adm := kadmClient(t, bs)
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	cfgs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := cfgs.On(topic, nil); err != nil || !hasConfig(c.Configs, "cleanup.policy", "compact", kmsg.ConfigSourceDynamicTopicConfig) {
		t.Fatalf("DescribeConfigs: %+v %v", c, err)
	}

	// Keyed records, then tombstones for the first five keys.
	// Small batches: a batch may not exceed segment.bytes.
	prod := leader.Client(t, kgo.SeedBrokers(leader.KafkaAddr), kgo.ProducerBatchMaxBytes(2048))
	latest := map[string]replicaRecord{}
	var recs []*kgo.Record
	for i := range records {
		recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "key-%02d", i%keys), Value: fmt.Appendf(nil, "value-%d", i)})
	}
	for k := range 5 {
		recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "key-%02d", k)})
	}
	// Later records roll the segments holding the tombstones.
	for i := range 200 {
		recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "tail-%d", i%10), Value: []byte("tail")})
	}
	produceAll(t, prod, recs, clusterTimeout)
	for _, r := range recs {
		latest[string(r.Key)] = replicaRecord{r.Offset, string(r.Key), string(r.Value), r.Value == nil}
	}
	end := recs[len(recs)-1].Offset + 1

	for _, b := range bs {
		pollUntil(t, time.Minute, fmt.Sprintf("node %d's cleaner removing records", b.NodeID), func() error {
			if v, _ := scrapeMetrics(t, b).value("weir_log_cleaner_removed_records_total"); v == 0 {
				return fmt.Errorf("no record removed yet")
			}
			return nil
		})
	}
	var leaderRecs []replicaRecord
	for _, b := range bs {
		got := readReplica(t, b, topic, topicIDOf(t, leader, topic), leaders[0].Epoch, racks[b.NodeID], 0, end)
		checkCompactedReplica(t, b, got, latest, len(recs))
		if b == leader {
			leaderRecs = got
		}
	}

	// A fetch at an offset the cleaner removed starts at the next
	// surviving record.
	gap := int64(-1)
	for i, prev := 0, int64(-1); i < len(leaderRecs); prev, i = leaderRecs[i].offset, i+1 {
		if leaderRecs[i].offset > prev+1 {
			gap = prev + 1
			if got := readReplica(t, leader, topic, topicIDOf(t, leader, topic), leaders[0].Epoch, "", gap, gap+1); len(got) == 0 || got[0].offset != leaderRecs[i].offset {
				t.Fatalf("fetch at removed offset %d: first record %v, want offset %d", gap, got, leaderRecs[i].offset)
			}
			break
		}
	}
	if gap < 0 {
		t.Fatal("the leader's log has no hole")
	}

	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := starts.Lookup(topic, 0); s.Offset != 0 {
		t.Fatalf("log start offset %d after cleaning, want 0", s.Offset)
	}
	if e, _ := ends.Lookup(topic, 0); e.Offset != end {
		t.Fatalf("log end offset %d, want %d", e.Offset, end)
	}
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.CurrentLeaderEpoch, rp.LeaderEpoch = leaders[0].Epoch, leaders[0].Epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := ask(t, leader, req)
	if err != nil {
		t.Fatal(err)
	}
	if p := resp.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 || p.EndOffset != end {
		t.Fatalf("OffsetForLeaderEpoch: error %s, end offset %d, want %d", errName(p.ErrorCode), p.EndOffset, end)
	}

	rebuildWipedCompactedReplica(t, bs, racks, topic, leaders[0], latest, len(recs))
}

// rebuildWipedCompactedReplica: a follower of the compacted topic is
// stopped and its data directory removed; more is written (20 KiB records,
// one Raft entry each, so the leader's Raft log rotates and is trimmed
// behind a snapshot); started again, it must rebuild from a snapshot and a
// copy of the leader's compacted log, holes and all, then serve every
// key's latest record and follow live replication.
func rebuildWipedCompactedReplica(t *testing.T, bs []*Broker, racks []string, topic string, before replPartition, latest map[string]replicaRecord, written int) {
	t.Helper()
	const big = 500
	leader := bs[before.Leader]
	victim := bs[(before.Leader+1)%3]
	id := topicIDOf(t, leader, topic)
	adm := kadmClient(t, bs)
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "segment.bytes", Value: kadm.StringPtr("1048576")}}, topic); err != nil {
		t.Fatal(err)
	}
	snapshotted := map[int]uint64{}
	for _, b := range without(bs, int32(victim.NodeID)) {
		got, err := raftSnapshots(partitionGroupDir(b, id, 0))
		if err != nil {
			t.Fatal(err)
		}
		snapshotted[b.NodeID] = slices.Max(append(got, 0))
	}
	victim.Stop(t)
	if err := os.RemoveAll(victim.DataDir); err != nil {
		t.Fatal(err)
	}
	prod := leader.Client(t, kgo.SeedBrokers(kafkaAddrs(without(bs, int32(victim.NodeID)))...), kgo.ProducerBatchMaxBytes(24<<10), kgo.ProducerLinger(0))
	pad := bytes.Repeat([]byte{'p'}, 20<<10)
	var recs []*kgo.Record
	for i := range big {
		recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "key-%02d", i%40), Value: fmt.Appendf(append([]byte(nil), pad...), "big-%d", i)})
	}
	produceAll(t, prod, recs, 2*clusterTimeout)
	for _, r := range recs {
		latest[string(r.Key)] = replicaRecord{r.Offset, string(r.Key), string(r.Value), false}
	}
	written += big
	end := recs[len(recs)-1].Offset + 1
	// Snapshots past the new entries, taken at hashicorp/raft's
	// SnapshotInterval ticks (30-60 s).
	for _, b := range without(bs, int32(victim.NodeID)) {
		pollUntil(t, 90*time.Second, fmt.Sprintf("node %d snapshotting %s/0 past the new records", b.NodeID, topic), func() error {
			got, err := raftSnapshots(partitionGroupDir(b, id, 0))
			if err != nil {
				return err
			}
			if n := slices.Max(append(got, 0)); n < snapshotted[b.NodeID]+big-50 {
				return fmt.Errorf("snapshots at Raft indexes %v", got)
			}
			return nil
		})
	}
	startWiped(t, victim, 40*time.Second)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("node %d log:\n%s", victim.NodeID, victim.logTail(64<<10))
		}
	})
	waitClusterView(t, bs, rejoinTimeout)
	now := waitReplicatedLeaders(t, bs, bs, topic, 1, 3, leaderTimeout, nil)
	pollUntil(t, convergeTimeout, fmt.Sprintf("node %d serving the compacted log up to %d", victim.NodeID, end), func() error {
		resp, err := ask(t, victim, rawFetch(topic, id, end-1, now[0].Epoch, racks[victim.NodeID]))
		if err != nil {
			return err
		}
		if p := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 || p.PreferredReadReplica >= 0 || p.HighWatermark < end {
			return fmt.Errorf("error %s, preferred replica %d, high watermark %d", errName(p.ErrorCode), p.PreferredReadReplica, p.HighWatermark)
		}
		return nil
	})
	got := readReplica(t, victim, topic, id, now[0].Epoch, racks[victim.NodeID], 0, end)
	checkCompactedReplica(t, victim, got, latest, written)
	installed := strings.Count(victim.Log(), "Installed remote snapshot")
	if installed == 0 {
		t.Fatalf("node %d rebuilt without installing a snapshot", victim.NodeID)
	}
	t.Logf("node %d rebuilt through %d snapshot install(s)", victim.NodeID, installed)
}

// checkCompactedReplica: offsets strictly increase, every key's latest
// record is there as written, and fewer than written records are left.
func checkCompactedReplica(t *testing.T, b *Broker, got []replicaRecord, latest map[string]replicaRecord, written int) {
	t.Helper()
	found := 0
	for i, r := range got {
		if i > 0 && r.offset <= got[i-1].offset {
			t.Fatalf("node %d: offset %d after %d", b.NodeID, r.offset, got[i-1].offset)
		}
		if want := latest[r.key]; want.offset == r.offset {
			if r != want {
				t.Fatalf("node %d: latest record of %s is %+v, want %+v", b.NodeID, r.key, r, want)
			}
			found++
		} else if r.offset > want.offset {
			t.Fatalf("node %d: record %+v past its key's latest at %d", b.NodeID, r, want.offset)
		}
	}
	if found != len(latest) {
		t.Fatalf("node %d: %d of %d keys' latest records", b.NodeID, found, len(latest))
	}
	if len(got) >= written {
		t.Fatalf("node %d: %d records left of %d written", b.NodeID, len(got), written)
	}
	t.Logf("node %d serves %d of %d records, every key's latest", b.NodeID, len(got), written)
}

// hasConfig reports whether configs hold name=value from source.
func hasConfig(configs []kadm.Config, name, value string, source kmsg.ConfigSource) bool {
	for _, c := range configs {
		if c.Key == name && c.Value != nil && *c.Value == value && c.Source == source {
			return true
		}
	}
	return false
}
