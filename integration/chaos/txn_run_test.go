package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	txnInput      = "chaos-txn-in"
	txnOutput     = "chaos-txn-out"
	txnPartitions = 6
	txnGroup      = "chaos-txn-group"
	txnWorkers    = 3
	// txnTimeout is short so that a transaction a fault left open is
	// aborted by its coordinator within the run.
	txnTimeout = 10 * time.Second
	// txnGrace is how long past its timeout a transaction may stay open:
	// the coordinator checks timeouts every 10 s
	// (transaction_abort_timed_out_transaction_cleanup_interval_ms), and
	// slack for a loaded machine.
	txnGrace = 25 * time.Second
	// txnDrainTimeout bounds waiting for the workers to commit the end
	// of every input partition once the feeder stopped.
	txnDrainTimeout = 90 * time.Second
)

// txnRun is the transactional workload of a chaos run.
type txnRun struct {
	w   TxnWorkload
	h   *TxnHistory
	run *txnRunning
}

// startTxn creates the transactional workload's topics, picks
// transactional ids whose coordinators are spread over the brokers, and
// starts the feeder, the workers, the output consumer and the prober.
func startTxn(t *testing.T, c *Cluster) *txnRun {
	t.Helper()
	ctx := context.Background()
	for _, topic := range []string{txnInput, txnOutput} {
		if err := c.CreateTopic(ctx, topic, txnPartitions, 3); err != nil {
			t.Fatal(err)
		}
	}
	ids, err := txnIDsSpread(ctx, c, "chaos-txn", txnWorkers)
	if err != nil {
		t.Fatal(err)
	}
	var where []string
	for _, id := range ids {
		node, err := c.TxnCoordinator(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		where = append(where, fmt.Sprintf("%s on node %d", id, node))
	}
	t.Logf("transactional ids and their coordinators: %s", strings.Join(where, ", "))
	tr := &txnRun{
		w: TxnWorkload{
			Input: txnInput, Output: txnOutput, Partitions: txnPartitions, Group: txnGroup,
			TransactionalIDs: ids, TxnTimeout: txnTimeout, AbortEvery: 5,
			FeedPace: 20 * time.Millisecond, MaxRecordsPerTxn: 50, MaxWorkerIncarnations: 100,
			AbandonEvery: 10 * time.Second, AbandonPrefix: "chaos-txn-abandoned", AbandonTimeout: 3 * time.Second,
		},
		h: NewTxnHistory(),
	}
	tr.run, err = tr.w.Start(c, tr.h, t.Logf)
	if err != nil {
		t.Fatalf("starting the transactional workload: %v", err)
	}
	t.Cleanup(tr.run.Close)
	return tr
}

// waitStarted waits for the first committed and aborted transactions.
func (tr *txnRun) waitStarted(t *testing.T) {
	t.Helper()
	waitFor(t, 60*time.Second, "the first committed and aborted transactions", func() bool {
		o := tr.h.Outcomes()
		return o[TxnCommitted] > 0 && o[TxnAborted] > 0
	}, func() string { return fmt.Sprintf("outcomes %v", tr.h.Outcomes()) })
}

// targets are the transactional faults' targets.
func (tr *txnRun) targets() *TxnTargets {
	return &TxnTargets{
		TransactionalIDs: tr.w.TransactionalIDs, Output: txnOutput, Partitions: txnPartitions,
		Topics: []string{txnInput, txnOutput},
	}
}

// drain waits until the workers' group committed the end of every input
// partition (the feeder stopped), then stops the workers.
func (tr *txnRun) drain(t *testing.T, c *Cluster) {
	t.Helper()
	start := time.Now()
	defer func() {
		t.Logf("transactional workers drained and stopped in %v", time.Since(start).Round(100*time.Millisecond))
	}()
	cl, err := kgo.NewClient(c.ClientOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var last string
	waitFor(t, txnDrainTimeout, "the transactional workers committing the end of every input partition", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ends, err := adm.ListEndOffsets(ctx, txnInput)
		if err != nil {
			last = err.Error()
			return false
		}
		committed, err := adm.FetchOffsets(ctx, txnGroup)
		if err != nil {
			last = err.Error()
			return false
		}
		drained := true
		var desc []string
		ends.Each(func(o kadm.ListedOffset) {
			at, _ := committed.Lookup(txnInput, o.Partition)
			desc = append(desc, fmt.Sprintf("%d: %d/%d", o.Partition, at.At, o.Offset))
			if o.Err != nil || at.Err != nil || at.At < o.Offset {
				drained = false
			}
		})
		last = strings.Join(desc, ", ")
		return drained
	}, func() string { return "committed/end " + last + fmt.Sprintf("; outcomes %v", tr.h.Outcomes()) })
	tr.run.StopWorkers()
}

// openTxnState reports whether a transaction in state s has not ended.
func openTxnState(s string) bool {
	switch s {
	case "Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence":
		return true
	}
	return false
}

// startPollOpen runs pollOpen beside the rest of the run's checks (the
// last abandoned transaction may take its timeout and the coordinator's
// check interval to end); the function returned waits for its answer.
func (tr *txnRun) startPollOpen(t *testing.T, c *Cluster, healedAt time.Time) func() []openTxn {
	start := time.Now()
	var open []openTxn
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		open, err = tr.pollOpen(c, healedAt)
	}()
	return func() []openTxn {
		t.Helper()
		<-done // pollOpen's own deadline bounds it
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d open transaction observations in %v", len(open), time.Since(start).Round(100*time.Millisecond))
		return open
	}
}

// pollOpen describes the workload's transactions until none is open, one
// open is past its due time (the checker reports it), or a bound passes;
// it returns every open transaction seen. It runs beside the test's
// goroutine, so it reports through its answer, not t.
func (tr *txnRun) pollOpen(c *Cluster, healedAt time.Time) ([]openTxn, error) {
	cl, err := kgo.NewClient(c.ClientOpts()...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var seen []openTxn
	var lastErr error
	deadline := time.Now().Add(2*(txnTimeout+txnGrace) + 30*time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		described, err := adm.DescribeTransactions(ctx, append(slices.Clone(tr.w.TransactionalIDs), tr.h.AbandonedIDs()...)...)
		cancel()
		if err != nil {
			lastErr = err
			time.Sleep(time.Second)
			continue
		}
		lastErr = nil
		now := time.Now()
		open, overdue := 0, false
		for _, d := range described.Sorted() {
			if d.Err != nil {
				// Not described (a coordinator loading): ask again.
				lastErr = fmt.Errorf("%s: %w", d.TxnID, d.Err)
				continue
			}
			if !openTxnState(d.State) {
				continue
			}
			o := openTxn{ID: d.TxnID, State: d.State, Start: time.UnixMilli(d.StartTimestamp), Timeout: time.Duration(d.TimeoutMillis) * time.Millisecond, SeenAt: now}
			seen = append(seen, o)
			open++
			due := o.Start.Add(o.Timeout)
			if healedAt.After(due) {
				due = healedAt
			}
			if now.After(due.Add(txnGrace)) {
				overdue = true
			}
		}
		if open == 0 && lastErr == nil || overdue {
			return seen, nil
		}
		time.Sleep(time.Second)
	}
	if lastErr != nil {
		return seen, fmt.Errorf("describing the transactions until %v after the heal: %w", time.Since(healedAt).Round(time.Second), lastErr)
	}
	return seen, nil
}

// check reads the input and the output back and checks the history.
func (tr *txnRun) check(t *testing.T, c *Cluster, healedAt time.Time, faults map[string]int, open []openTxn) *TxnReport {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	f := TxnFinal{Open: open, HealedAt: healedAt, Grace: txnGrace, Views: map[int]map[int32]committedView{}}
	for _, topic := range []string{txnInput, txnOutput} {
		id, err := c.TopicID(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		ends, err := c.WaitLogsConverge(ctx, topic, id, txnPartitions, convergeTimeout)
		if err != nil {
			t.Fatal(err)
		}
		logs := map[int32][]logRecord{}
		batches := map[int32][]txnBatch{}
		for p := range int32(txnPartitions) {
			bs, err := c.ReadReplicaBatches(ctx, 0, topic, id, p, ends[p])
			if err != nil {
				t.Fatalf("reading node 0's copy of %s/%d: %v", topic, p, err)
			}
			batches[p] = bs
			for _, b := range bs {
				logs[p] = append(logs[p], b.Records...)
			}
		}
		if topic == txnInput {
			f.Input = logs
			continue
		}
		f.Uncommitted, f.OutputBatches = logs, batches
		for _, n := range c.Nodes {
			f.Views[n.ID] = map[int32]committedView{}
			for p := range int32(txnPartitions) {
				v, err := c.ReadCommittedView(ctx, n.ID, topic, id, p)
				if err != nil {
					t.Fatalf("reading node %d's read_committed view of %s/%d: %v", n.ID, topic, p, err)
				}
				f.Views[n.ID][p] = v
			}
		}
	}
	t.Logf("transactional topics read back in %v", time.Since(start).Round(100*time.Millisecond))
	r := CheckTxn(tr.h, f)
	t.Logf("transactional summary:\n%s", r.Table(faults))
	if r.Committed == 0 || r.Aborted == 0 || r.Abandoned == 0 || r.InputRecords == 0 || r.OutputCommitted == 0 || r.AbortedInLog == 0 {
		t.Errorf("the transactional workload did not run: %d committed, %d aborted, %d abandoned, %d input records, %d output records, %d aborted records in the log", r.Committed, r.Aborted, r.Abandoned, r.InputRecords, r.OutputCommitted, r.AbortedInLog)
	}
	if !r.OK() {
		t.Errorf("transactional invariants violated:\n  %s", strings.Join(r.Violations, "\n  "))
	}
	return r
}
