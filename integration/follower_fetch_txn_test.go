package integration

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// checkFollowerReadCommitted: a follower serves read_committed fetches as
// its leader would (KIP-392 with KIP-98). On an RF=3 partition holding a
// committed, an aborted, a committed and an open transaction, the
// follower in the consumer's rack answers a raw read_committed fetch
// with the last stable offset at the open transaction's first record, no
// batch at or past it, and the aborted transaction listed; a kgo
// read_committed consumer in that rack, served by the follower, gets
// exactly the committed records, and the open transaction's records once
// it commits. racks[i] is node i's rack; bs runs a cluster whose
// __transaction_state is small enough to create quickly; the topic is
// created through via (a broker the caller's kgo clients have not seen
// restarted: a request on a connection to a killed broker's old process
// fails with EOF).
func checkFollowerReadCommitted(t *testing.T, bs []*Broker, via *Broker, racks []string) {
	t.Helper()
	const topic = "follower-txn"
	createReplicatedTopic(t, via, topic, 1, 3, nil)
	leaders := waitReplicatedLeaders(t, bs, bs, topic, 1, 3, leaderTimeout, nil)
	leader := bs[leaders[0].Leader]
	follower := bs[(leaders[0].Leader+1)%3]
	rack := racks[follower.NodeID]
	seeds := kafkaAddrs(bs)

	prod := leader.Client(t, kgo.SeedBrokers(seeds...), kgo.TransactionalID("follower-txn-app"),
		kgo.DefaultProduceTopic(topic), kgo.TransactionTimeout(60*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 2*clusterTimeout)
	defer cancel()
	// Each record is its own batch (ProduceSync), and each marker takes
	// one offset: c1 at 0-9 (marker 10), a at 11-20 (marker 21), c2 at
	// 22-31 (marker 32), open at 33-37.
	const abortedFirst, openFirst, end = 11, 33, 38
	begin := func(name string, n int) {
		t.Helper()
		if err := prod.BeginTransaction(); err != nil {
			t.Fatalf("%s: begin: %v", name, err)
		}
		for i := range n {
			if err := prod.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%s-%d", name, i)}).FirstErr(); err != nil {
				t.Fatalf("%s: produce %d: %v", name, i, err)
			}
		}
	}
	finish := func(name string, commit bool) {
		t.Helper()
		if err := prod.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("%s: end (commit %v): %v", name, commit, err)
		}
	}
	begin("c1", 10)
	finish("c1", true)
	begin("a", 10)
	finish("a", false)
	begin("c2", 10)
	finish("c2", true)
	begin("open", 5)

	md, _, err := topicMetadata(t, leader, topic)
	if err != nil {
		t.Fatal(err)
	}
	req := rawFetch(topic, md.Topics[0].TopicID, 0, leaders[0].Epoch, rack)
	req.IsolationLevel = 1
	pollUntil(t, clusterTimeout, "the follower's read_committed answer", func() error {
		resp, err := ask(t, follower, req)
		if err != nil {
			return err
		}
		p := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
		switch {
		case p.ErrorCode != 0:
			return fmt.Errorf("error %d", p.ErrorCode)
		case p.HighWatermark != end || p.LastStableOffset != openFirst:
			return fmt.Errorf("high watermark %d, last stable offset %d; want %d, %d", p.HighWatermark, p.LastStableOffset, end, openFirst)
		case len(p.AbortedTransactions) != 1 || p.AbortedTransactions[0].FirstOffset != abortedFirst:
			return fmt.Errorf("aborted transactions %+v, want one from offset %d", p.AbortedTransactions, abortedFirst)
		}
		if last := lastBatchOffset(p.RecordBatches); last != openFirst-1 {
			return fmt.Errorf("records end at offset %d, want %d (below the last stable offset)", last, openFirst-1)
		}
		return nil
	})

	before := servedBy(t, follower, "follower")
	cl := leader.Client(t, kgo.SeedBrokers(seeds...), kgo.Rack(rack), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(200*time.Millisecond))
	var got []string
	poll := func(want int) {
		t.Helper()
		pctx, pcancel := context.WithTimeout(ctx, clusterTimeout)
		defer pcancel()
		for len(got) < want && pctx.Err() == nil {
			cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
		for _, v := range got {
			if !strings.HasPrefix(v, "c1-") && !strings.HasPrefix(v, "c2-") && !strings.HasPrefix(v, "open-") {
				t.Fatalf("read_committed consumer got %q", v)
			}
		}
		if len(got) != want {
			t.Fatalf("read_committed consumer has %d records, want %d: %v", len(got), want, got)
		}
	}
	poll(20)
	if slices.ContainsFunc(got, func(v string) bool { return strings.HasPrefix(v, "open-") }) {
		t.Fatalf("the open transaction's records were delivered before its commit: %v", got)
	}
	finish("open", true)
	poll(25)
	if servedBy(t, follower, "follower") == before {
		t.Fatalf("node %d (rack %s) served none of the read_committed consumer's fetches", follower.NodeID, rack)
	}
}

// lastBatchOffset is the last offset of the last batch in a fetch
// response's record bytes (-1 for none): base offset plus the batch
// header's last offset delta.
func lastBatchOffset(b []byte) int64 {
	last := int64(-1)
	for len(b) >= 27 {
		n := 12 + int(binary.BigEndian.Uint32(b[8:]))
		if n > len(b) {
			break // a partial batch at the end of a bounded response
		}
		last = int64(binary.BigEndian.Uint64(b)) + int64(int32(binary.BigEndian.Uint32(b[23:])))
		b = b[n:]
	}
	return last
}
