package integration

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCompactedTopicTransactions: a kgo transactional producer writes a
// compacted topic in committed and aborted transactions. Once the
// cleaner has run, a read_uncommitted reader no longer sees any aborted
// record, a read_committed consumer sees the latest committed value of
// every key (an aborted value never hid an earlier committed one), and
// fewer records are left than were written. Further cleans remove the
// markers of the emptied aborted transactions after delete.retention.ms,
// and the consumers still see the same.
func TestCompactedTopicTransactions(t *testing.T) {
	t.Parallel()
	bs := StartCluster(t, 1, WithSet("log_cleaner_backoff_ms", "100"), WithSet("transaction_state_log_num_partitions", "1"))
	b := bs[0]
	const topic = "compacted-txn"
	createReplicatedTopic(t, b, topic, 1, 1, map[string]string{
		"cleanup.policy": "compact", "segment.bytes": "8192", "min.cleanable.dirty.ratio": "0.01",
		"delete.retention.ms": "100", "segment.ms": "1000",
	})
	leaders := waitReplicatedLeaders(t, bs, bs, topic, 1, 1, leaderTimeout, nil)
	prod := b.Client(t, kgo.TransactionalID("compact-txn-app"), kgo.DefaultProduceTopic(topic),
		kgo.TransactionTimeout(30*time.Second), kgo.ProducerBatchMaxBytes(2048))
	ctx, cancel := context.WithTimeout(context.Background(), 4*clusterTimeout)
	defer cancel()
	want := map[string]string{}
	written := 0
	end := int64(0)
	round := func(name string, keys []string, commit bool) {
		t.Helper()
		if err := prod.BeginTransaction(); err != nil {
			t.Fatalf("%s: begin: %v", name, err)
		}
		for _, k := range keys {
			r := &kgo.Record{Key: []byte(k), Value: fmt.Appendf(nil, "%s-%s", name, k)}
			if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("%s: produce %s: %v", name, k, err)
			}
			end = max(end, r.Offset+2) // and its marker
		}
		written += len(keys)
		how := kgo.TryAbort
		if commit {
			how = kgo.TryCommit
			for _, k := range keys {
				want[k] = fmt.Sprintf("%s-%s", name, k)
			}
		}
		if err := prod.EndTransaction(ctx, how); err != nil {
			t.Fatalf("%s: end (commit %v): %v", name, commit, err)
		}
	}
	keys := func(prefix string, from, to int) []string {
		var out []string
		for i := from; i < to; i++ {
			out = append(out, fmt.Sprintf("%s%02d", prefix, i))
		}
		return out
	}
	round("A", keys("k", 0, 20), true)
	round("B", keys("k", 0, 20), false) // must not hide A
	round("C", keys("k", 0, 10), true)
	round("D", keys("k", 10, 20), false) // must not hide A either
	tail := 0
	moreTail := func() {
		t.Helper()
		round(fmt.Sprintf("tail%d", tail), keys("t", 0, 30), true)
		tail++
	}
	for range 6 { // closes the segments holding the rounds above
		moreTail()
	}
	aborted := func(v string) bool { return strings.HasPrefix(v, "B-") || strings.HasPrefix(v, "D-") }

	metric := func(name string) float64 {
		v, _ := scrapeMetrics(t, b).value(name)
		return v
	}
	pollUntil(t, 2*time.Minute, "the cleaner removing the aborted records", func() error {
		if v := metric("weir_log_cleaner_removed_aborted_records_total"); v < 30 {
			moreTail()
			return fmt.Errorf("%v aborted records removed", v)
		}
		return nil
	})

	id := topicIDOf(t, b, topic)
	check := func(when string) {
		t.Helper()
		got := readReplica(t, b, topic, id, leaders[0].Epoch, "", 0, end)
		latest := map[string]string{}
		for _, r := range got {
			if aborted(r.value) {
				t.Fatalf("%s: read_uncommitted sees aborted record %+v", when, r)
			}
			latest[r.key] = r.value
		}
		if len(got) >= written {
			t.Fatalf("%s: %d records left of %d written", when, len(got), written)
		}
		for k, v := range want {
			if latest[k] != v {
				t.Fatalf("%s: read_uncommitted: key %s is %q, want %q", when, k, latest[k], v)
			}
		}
		committed := readCommittedAll(t, b, topic, end)
		if !maps.Equal(committed, want) {
			t.Fatalf("%s: read_committed:\n%v\nwant\n%v", when, committed, want)
		}
		t.Logf("%s: %d records served of %d written", when, len(got), written)
	}
	check("after cleaning")

	pollUntil(t, 2*time.Minute, "the cleaner removing the markers of the emptied aborted transactions", func() error {
		if v := metric("weir_log_cleaner_removed_txn_markers_total"); v < 2 {
			time.Sleep(150 * time.Millisecond) // past delete.retention.ms
			moreTail()
			return fmt.Errorf("%v markers removed", v)
		}
		return nil
	})
	check("after the markers went")
}

// readCommittedAll consumes partition 0 of topic read_committed from the
// start until it has read past offset end, and returns every key's
// latest value.
func readCommittedAll(t *testing.T, b *Broker, topic string, end int64) map[string]string {
	t.Helper()
	cl := b.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	out := map[string]string{}
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		for _, e := range fs.Errors() {
			if e.Err != context.DeadlineExceeded {
				t.Fatalf("read_committed fetch: %v", e.Err)
			}
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			out[string(r.Key)] = string(r.Value)
			done = done || r.Offset >= end-2
		})
		if done {
			return out
		}
	}
	t.Fatalf("read_committed did not reach offset %d", end-2)
	return nil
}
