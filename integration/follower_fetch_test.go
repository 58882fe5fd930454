package integration

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// servedBy is a broker's count of fetched partitions it answered with
// records as role ("leader" or "follower").
func servedBy(t *testing.T, b *Broker, role string) float64 {
	t.Helper()
	v, _ := scrapeMetrics(t, b).value(`weir_fetch_partition_reads_total{role="` + role + `"}`)
	return v
}

// seqConsumer reads one partition from the start and keeps the sequence
// numbers it receives, in order.
type seqConsumer struct {
	mu   sync.Mutex
	seqs []uint64
}

func (c *seqConsumer) run(ctx context.Context, cl *kgo.Client) {
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		c.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) { c.seqs = append(c.seqs, binary.BigEndian.Uint64(r.Value)) })
		c.mu.Unlock()
	}
}

func (c *seqConsumer) waitFor(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	pollUntil(t, timeout, fmt.Sprintf("consumer has %d records", n), func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, s := range c.seqs {
			if s != uint64(i) {
				return fmt.Errorf("record %d is %d: lost, duplicated or reordered", i, s)
			}
		}
		if len(c.seqs) != n {
			return fmt.Errorf("%d records", len(c.seqs))
		}
		return nil
	})
}

func produceSeq(t *testing.T, cl *kgo.Client, topic string, from, to int) {
	t.Helper()
	var recs []*kgo.Record
	for i := from; i < to; i++ {
		v := make([]byte, 100)
		binary.BigEndian.PutUint64(v, uint64(i))
		recs = append(recs, &kgo.Record{Topic: topic, Value: v})
	}
	produceAll(t, cl, recs, clusterTimeout)
}

// followerCatchUp is how long after a round of records a follower's
// progress report can take to show it reached the leader's end: it
// learns the commit index from the leader's next append, which an idle
// partition sends every CommitTimeout to 2×CommitTimeout (500 ms-1 s,
// broker/replication.go), and reports every second (broker/isr.go).
// The leader directs a consumer to it only once that report reaches the
// consumer's offset, so rounds closer together than this keep moving the
// offset past what the follower last reported.
const followerCatchUp = 2500 * time.Millisecond

// untilServedAsFollower produces rounds of records until b reports
// follower-served fetches (bounded): the leader directs a consumer only
// once it has heard b's progress and reported it in sync.
func untilServedAsFollower(t *testing.T, b *Broker, prod *kgo.Client, topic string, c *seqConsumer, from int) int {
	t.Helper()
	next := from
	for range 20 {
		produceSeq(t, prod, topic, next, next+50)
		next += 50
		c.waitFor(t, next, clusterTimeout)
		if servedBy(t, b, "follower") > 0 {
			return next
		}
		time.Sleep(followerCatchUp)
	}
	t.Fatalf("node %d served no fetch as a follower", b.NodeID)
	return next
}

// TestFollowerFetching (KIP-392): in a 3-broker cluster with racks a, b
// and c and an RF=3 partition, a kgo consumer in the rack of a follower
// receives every record while that follower serves its fetches (its
// follower-served counter grows, not assumed); with the follower killed
// it continues through the leader, and once the follower is back and in
// sync it reads there again — every record exactly once, in order. A
// consumer without a rack reads from the leader only. On the same
// cluster, a follower serves read_committed fetches as the leader would
// (checkFollowerReadCommitted).
func TestFollowerFetching(t *testing.T) {
	t.Parallel()
	racks := []string{"a", "b", "c"}
	bs := StartCluster(t, 3, WithRacks(racks...), WithSet("transaction_state_log_num_partitions", "2"))
	const topic = "follower-fetch"
	createReplicatedTopic(t, bs[0], topic, 1, 3, nil)
	leaders := waitReplicatedLeaders(t, bs, bs, topic, 1, 3, leaderTimeout, nil)
	leader := bs[leaders[0].Leader]
	follower := bs[(leaders[0].Leader+1)%3]
	rack := racks[follower.NodeID]
	t.Logf("leader node %d (rack %s); consumer in rack %s, served by node %d", leader.NodeID, racks[leader.NodeID], rack, follower.NodeID)

	prod := directClient(t, leader)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var racked seqConsumer
	cl := leader.Client(t, kgo.SeedBrokers(kafkaAddrs(bs)...), kgo.Rack(rack),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		// kgo leaves a preferred replica only when the partition's leader
		// or epoch changes, or after this interval; a dead follower
		// changes neither.
		kgo.RecheckPreferredReplicaInterval(time.Second))
	go racked.run(ctx, cl)
	next := untilServedAsFollower(t, follower, prod, topic, &racked, 0)
	t.Logf("node %d served %.0f partition reads as a follower", follower.NodeID, servedBy(t, follower, "follower"))
	checkRawFollowerFetches(t, leader, follower, topic, leaders[0].Epoch, rack, next)
	if n := servedBy(t, leader, "follower"); n != 0 {
		t.Fatalf("the leader counted %.0f follower-served reads", n)
	}

	// The follower dies: the leader stops directing the consumer there
	// once its progress reports stop, and the consumer (back at the leader
	// after kgo's recheck interval) goes on without loss or duplicates.
	follower.Kill(t)
	leaderServed := servedBy(t, leader, "leader")
	produceSeq(t, prod, topic, next, next+200)
	next += 200
	racked.waitFor(t, next, clusterTimeout)
	if servedBy(t, leader, "leader") == leaderServed {
		t.Fatal("the leader served nothing while the follower was down")
	}
	// Back and in sync: the consumer returns to its rack.
	follower.Start(t)
	waitReplicatedLeaders(t, bs, bs, topic, 1, 3, leaderTimeout, nil)
	next = untilServedAsFollower(t, follower, prod, topic, &racked, next)
	cancel()

	// Without a rack: every fetch is the leader's.
	before := 0.0
	for _, b := range bs {
		before += servedBy(t, b, "follower")
	}
	var plain seqConsumer
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	cl2 := leader.Client(t, kgo.SeedBrokers(kafkaAddrs(bs)...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	go plain.run(ctx2, cl2)
	plain.waitFor(t, next, clusterTimeout)
	after := 0.0
	for _, b := range bs {
		after += servedBy(t, b, "follower")
	}
	if after != before {
		t.Fatalf("a consumer without a rack was served by followers (%.0f → %.0f)", before, after)
	}
	cancel2()

	checkFollowerReadCommitted(t, bs, leader, racks)
}

// rawFetch is a Fetch of partition 0 of topic at offset (the client
// picks the version, so both name and id are set).
func rawFetch(topic string, id [16]byte, offset int64, epoch int32, rack string) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes, req.MaxWaitMillis, req.SessionEpoch, req.Rack = 1<<20, 0, -1, rack
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = offset, 1<<20, epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// checkRawFollowerFetches checks the wire answers: the leader directs a
// consumer of the follower's rack there at once without records; the
// follower serves records; a follower checks the client's leader epoch.
func checkRawFollowerFetches(t *testing.T, leader, follower *Broker, topic string, epoch int32, rack string, end int) {
	t.Helper()
	md, _, err := topicMetadata(t, leader, topic)
	if err != nil {
		t.Fatal(err)
	}
	id := md.Topics[0].TopicID
	part := func(b *Broker, req *kmsg.FetchRequest) kmsg.FetchResponseTopicPartition {
		t.Helper()
		resp, err := ask(t, b, req)
		if err != nil {
			t.Fatalf("fetch from node %d: %v", b.NodeID, err)
		}
		return resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	}
	p := part(leader, rawFetch(topic, id, 0, epoch, rack))
	if p.ErrorCode != 0 || p.PreferredReadReplica != int32(follower.NodeID) || len(p.RecordBatches) != 0 || p.HighWatermark != int64(end) {
		t.Fatalf("leader, rack %s: error %d preferred %d, %d record bytes, hwm %d; want node %d, none, %d",
			rack, p.ErrorCode, p.PreferredReadReplica, len(p.RecordBatches), p.HighWatermark, follower.NodeID, end)
	}
	if p := part(leader, rawFetch(topic, id, 0, epoch, "")); p.PreferredReadReplica != -1 || len(p.RecordBatches) == 0 {
		t.Fatalf("leader, no rack: preferred %d, %d record bytes", p.PreferredReadReplica, len(p.RecordBatches))
	}
	if p := part(follower, rawFetch(topic, id, 0, epoch, rack)); p.ErrorCode != 0 || p.PreferredReadReplica != -1 || len(p.RecordBatches) == 0 {
		t.Fatalf("follower: error %d preferred %d, %d record bytes", p.ErrorCode, p.PreferredReadReplica, len(p.RecordBatches))
	}
	// Past the leader's high watermark (as the follower last heard it)
	// nobody can serve the offset: OFFSET_NOT_AVAILABLE, retriable.
	pollUntil(t, clusterTimeout, "the follower answers OFFSET_NOT_AVAILABLE past the leader's high watermark", func() error {
		if p := part(follower, rawFetch(topic, id, int64(end)+1000, epoch, rack)); p.ErrorCode != kerr.OffsetNotAvailable.Code {
			return fmt.Errorf("error %d", p.ErrorCode)
		}
		return nil
	})
	for _, tc := range []struct {
		epoch int32
		want  int16
	}{{epoch + 1, kerr.UnknownLeaderEpoch.Code}, {epoch - 1, kerr.FencedLeaderEpoch.Code}} {
		if p := part(follower, rawFetch(topic, id, 0, tc.epoch, rack)); p.ErrorCode != tc.want {
			t.Fatalf("follower, leader epoch %d (current %d): error %d, want %d", tc.epoch, epoch, p.ErrorCode, tc.want)
		}
	}
}

// TestFollowerFetchingJava: the Java consumer with client.rack reads every
// record of an RF=3 partition from the follower in its rack.
func TestFollowerFetchingJava(t *testing.T) {
	t.Parallel()
	java, jar := javaTools(t)
	racks := []string{"a", "b", "c"}
	bs := StartCluster(t, 3, WithRacks(racks...))
	const topic = "follower-fetch-java"
	createReplicatedTopic(t, bs[0], topic, 1, 3, nil)
	leaders := waitReplicatedLeaders(t, bs, bs, topic, 1, 3, leaderTimeout, nil)
	leader := bs[leaders[0].Leader]
	follower := bs[(leaders[0].Leader+2)%3]
	prod := directClient(t, leader)
	// The leader offers the follower once it heard its progress and
	// reported it in sync; a kgo consumer in its rack shows when.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var probe seqConsumer
	cl := leader.Client(t, kgo.SeedBrokers(kafkaAddrs(bs)...), kgo.Rack(racks[follower.NodeID]),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(200*time.Millisecond))
	go probe.run(ctx, cl)
	next := untilServedAsFollower(t, follower, prod, topic, &probe, 0)
	cancel()
	produceSeq(t, prod, topic, next, next+500)
	next += 500

	before := servedBy(t, follower, "follower")
	runJavaScenario(t, java, jar, leader, "rack-consume",
		"weir.topic="+topic, "weir.rack="+racks[follower.NodeID], fmt.Sprintf("weir.records=%d", next))
	if after := servedBy(t, follower, "follower"); after <= before {
		t.Fatalf("node %d (rack %s) served the Java consumer no fetch as a follower (%.0f → %.0f)", follower.NodeID, racks[follower.NodeID], before, after)
	}
}
