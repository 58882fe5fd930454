package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// consumeValues reads every partition of topic from the start at the
// given isolation level until it holds want records or timeout passes,
// and returns the values.
func consumeValues(t *testing.T, b *Broker, seeds []string, topic string, isolation kgo.IsolationLevel, want int, timeout time.Duration) []string {
	t.Helper()
	cl := b.Client(t, kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(isolation),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out []string
	for len(out) < want && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	}
	// Anything past want would show within a few more polls.
	extra, cancelExtra := context.WithTimeout(context.Background(), time.Second)
	defer cancelExtra()
	for extra.Err() == nil {
		cl.PollFetches(extra).EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	}
	return out
}

// TestTransactionsCommitAndAbort: a kgo transactional producer commits,
// aborts and commits again across three partitions of an RF=3 topic on
// three brokers. A read_committed consumer sees exactly the committed
// records, a read_uncommitted one every record; kadm describes the
// transactional id.
func TestTransactionsCommitAndAbort(t *testing.T) {
	bs := StartCluster(t, 3, WithSet("transaction_state_log_num_partitions", "4"))
	const topic = "txn-out"
	createReplicatedTopic(t, bs[0], topic, 3, 3, nil)
	waitReplicatedLeaders(t, bs, bs, topic, 3, 3, leaderTimeout, nil)
	seeds := kafkaAddrs(bs)
	prod := bs[0].Client(t, kgo.SeedBrokers(seeds...), kgo.TransactionalID("txn-app"), kgo.DefaultProduceTopic(topic),
		kgo.TransactionTimeout(30*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 2*clusterTimeout)
	defer cancel()
	round := func(name string, n int, commit bool) {
		t.Helper()
		if err := prod.BeginTransaction(); err != nil {
			t.Fatalf("%s: begin: %v", name, err)
		}
		for i := range n {
			r := &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "%s-%d", name, i)}
			if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("%s: produce %d: %v", name, i, err)
			}
		}
		end := kgo.TryAbort
		if commit {
			end = kgo.TryCommit
		}
		if err := prod.EndTransaction(ctx, end); err != nil {
			t.Fatalf("%s: end (commit %v): %v", name, commit, err)
		}
	}
	round("first", 100, true)
	round("aborted", 50, false)

	// An open transaction, as weirctl shows it: Ongoing, and the start
	// offset of the partition it wrote to, at that partition's leader.
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("second-open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	w := newWeirctl(t, bs[0])
	type txnLine struct {
		TransactionalID string `json:"transactional_id"`
		State           string `json:"state"`
	}
	open := decodeJSON[[]txnLine](t, w.ok(t, "", "transaction", "list", "--format", "json"))
	if len(open) != 1 || open[0].TransactionalID != "txn-app" || open[0].State != "Ongoing" {
		t.Fatalf("weirctl transaction list: %+v", open)
	}
	type txnDetail struct {
		State      string             `json:"state"`
		Partitions map[string][]int32 `json:"partitions"`
	}
	detail := decodeJSON[[]txnDetail](t, w.ok(t, "", "transaction", "describe", "txn-app", "--format", "json"))
	if len(detail) != 1 || detail[0].State != "Ongoing" || len(detail[0].Partitions[topic]) == 0 {
		t.Fatalf("weirctl transaction describe: %+v", detail)
	}
	type producerLine struct {
		Partition      int32 `json:"partition"`
		TxnStartOffset int64 `json:"txn_start_offset"`
	}
	producers := decodeJSON[[]producerLine](t, w.ok(t, "", "producer", "describe", topic, "--format", "json"))
	openAt := int64(-1)
	for _, l := range producers {
		if l.TxnStartOffset >= 0 {
			openAt = l.TxnStartOffset
		}
	}
	if openAt < 0 {
		t.Fatalf("weirctl producer describe shows no open transaction on %s: %+v", topic, producers)
	}
	for i := range 29 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "second-%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}

	committed := consumeValues(t, bs[1], seeds, topic, kgo.ReadCommitted(), 130, clusterTimeout)
	if len(committed) != 130 {
		t.Fatalf("read_committed: %d records, want 130", len(committed))
	}
	for _, v := range committed {
		if strings.HasPrefix(v, "aborted-") {
			t.Fatalf("read_committed consumer saw %q of the aborted transaction", v)
		}
	}
	all := consumeValues(t, bs[2], seeds, topic, kgo.ReadUncommitted(), 180, clusterTimeout)
	if len(all) != 180 {
		t.Fatalf("read_uncommitted: %d records, want 180", len(all))
	}

	adm := kadmClient(t, bs)
	described, err := adm.DescribeTransactions(ctx, "txn-app")
	if err != nil {
		t.Fatal(err)
	}
	d, err := described.On("txn-app", nil)
	if err != nil || d.Err != nil || d.State != "CompleteCommit" || d.ProducerID < 0 {
		t.Fatalf("describe txn-app: %+v %v", d, err)
	}
	listed, err := adm.ListTransactions(ctx, nil, []string{"CompleteCommit"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := listed["txn-app"]; !ok {
		t.Fatalf("ListTransactions: %+v", listed.Sorted())
	}
}

// TestTransactionsConsumeTransformProduce: kgo's GroupTransactSession
// reads an input topic in a consumer group and writes each record,
// transformed, to an output topic, committing its offsets in the same
// transaction (TxnOffsetCommit). One round is aborted; its input is read
// again and written once. A read_committed reader of the output sees
// every input record exactly once, and the group's offsets end at the
// input's end.
func TestTransactionsConsumeTransformProduce(t *testing.T) {
	t.Parallel()
	bs := StartCluster(t, 3, WithSet("transaction_state_log_num_partitions", "4"), WithSet("group_initial_rebalance_delay_ms", "0"))
	const in, out, records = "eos-in", "eos-out", 400
	createReplicatedTopic(t, bs[0], in, 2, 3, nil)
	createReplicatedTopic(t, bs[0], out, 2, 3, nil)
	waitReplicatedLeaders(t, bs, bs, in, 2, 3, leaderTimeout, nil)
	waitReplicatedLeaders(t, bs, bs, out, 2, 3, leaderTimeout, nil)
	seeds := kafkaAddrs(bs)
	var recs []*kgo.Record
	for i := range records {
		recs = append(recs, &kgo.Record{Topic: in, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "%d", i)})
	}
	produceAll(t, directClient(t, bs[0]), recs, clusterTimeout)

	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(seeds...), kgo.TransactionalID("eos-app"),
		kgo.ConsumerGroup("eos-group"), kgo.ConsumeTopics(in), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(), kgo.DefaultProduceTopic(out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.TransactionTimeout(30*time.Second), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*clusterTimeout)
	defer cancel()
	done, aborted := 0, false
	for rounds := 0; done < records && rounds < 1000 && ctx.Err() == nil; rounds++ {
		fs := sess.PollFetches(ctx)
		if err := fs.Err0(); err != nil && ctx.Err() == nil {
			t.Logf("poll: %v", err)
		}
		if fs.NumRecords() == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			t.Fatalf("begin: %v", err)
		}
		// Abort the first round that has records; its input comes back.
		end := kgo.TryCommit
		if !aborted {
			end, aborted = kgo.TryAbort, true
		}
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Key: r.Key, Value: append([]byte("out-"), r.Value...)}, func(_ *kgo.Record, err error) {
				if err != nil && !(end == kgo.TryAbort && errors.Is(err, kgo.ErrAborting)) {
					t.Errorf("produce: %v", err)
				}
			})
			n++
		})
		committed, err := sess.End(ctx, end)
		if err != nil {
			t.Fatalf("end: %v", err)
		}
		if committed {
			done += n
		}
	}
	if done != records {
		t.Fatalf("%d records transformed and committed, want %d", done, records)
	}

	got := consumeValues(t, bs[1], seeds, out, kgo.ReadCommitted(), records, clusterTimeout)
	seen := map[string]int{}
	for _, v := range got {
		seen[v]++
	}
	for i := range records {
		if n := seen[fmt.Sprintf("out-%d", i)]; n != 1 {
			t.Fatalf("input %d is in the committed output %d times (output %d records)", i, n, len(got))
		}
	}
	if len(got) != records {
		t.Fatalf("committed output: %d records, want %d", len(got), records)
	}
	adm := kadmClient(t, bs)
	offsets, err := adm.FetchOffsets(ctx, "eos-group")
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	offsets.Each(func(o kadm.OffsetResponse) { total += o.At })
	if total != records {
		t.Fatalf("the group's committed offsets add up to %d, want %d", total, records)
	}
}

// TestTransactionsCoordinatorFailover: the broker coordinating an open
// transaction is killed (SIGKILL). The transaction's state is in
// __transaction_state, replicated by its partition's Raft group: the new
// leader of that partition takes the id over, the producer carries on
// writing to the same transaction and commits it, and a read_committed
// reader sees all of it exactly once.
func TestTransactionsCoordinatorFailover(t *testing.T) {
	t.Parallel()
	bs := StartCluster(t, 3, WithSet("transaction_state_log_num_partitions", "1"))
	const topic = "txn-failover"
	createReplicatedTopic(t, bs[0], topic, 2, 3, nil)
	waitReplicatedLeaders(t, bs, bs, topic, 2, 3, leaderTimeout, nil)
	seeds := kafkaAddrs(bs)
	ctx, cancel := context.WithTimeout(context.Background(), 3*clusterTimeout)
	defer cancel()
	prod := bs[0].Client(t, kgo.SeedBrokers(seeds...), kgo.TransactionalID("failover-app"), kgo.DefaultProduceTopic(topic),
		kgo.TransactionTimeout(60*time.Second), kgo.RetryTimeout(time.Minute))
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if err := prod.ProduceSync(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
		}
	}
	produce(0, 50)
	adm := kadmClient(t, bs)
	co := adm.FindTxnCoordinators(ctx, "failover-app")
	found, ok := co["failover-app"]
	if !ok || found.Err != nil {
		t.Fatalf("coordinator of failover-app: %+v", co)
	}
	victim := brokerByID(t, bs, found.NodeID)
	t.Logf("killing node %d, the coordinator of failover-app", victim.NodeID)
	victim.Kill(t)
	live := without(bs, int32(victim.NodeID))
	// franz-go finds a coordinator through any broker it knows, seeds
	// included, and gives a commit up (unconfirmed, never to be retried)
	// when two such lookups in a row dial the dead one. The broker side
	// is what this test is about: the producer carries on once the dead
	// broker left Metadata (its session expired) and its client's view,
	// and its seeds are the live brokers.
	if err := prod.UpdateSeedBrokers(kafkaAddrs(live)...); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, clusterTimeout, "the producer's client knowing only the live brokers", func() error {
		prod.ForceMetadataRefresh()
		if n := len(prod.DiscoveredBrokers()); n != len(live) {
			return fmt.Errorf("%d brokers known, %d live", n, len(live))
		}
		return nil
	})
	produce(50, 100)
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit after the coordinator's loss: %v", err)
	}
	got := consumeValues(t, live[0], kafkaAddrs(live), topic, kgo.ReadCommitted(), 100, 2*clusterTimeout)
	seen := map[string]int{}
	for _, v := range got {
		seen[v]++
	}
	for i := range 100 {
		if n := seen[fmt.Sprintf("v%d", i)]; n != 1 {
			t.Fatalf("v%d is in the committed output %d times (%d records)", i, n, len(got))
		}
	}
	victim.Start(t)
}
