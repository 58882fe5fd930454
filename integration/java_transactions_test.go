package integration

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Transactions with Kafka's own Java client and tools on a three-broker
// cluster: the transactions scenario of integration/compat/java (see its
// TxnScenario.java), then kafka-transactions (TransactionsCommand) on the
// transactional ids it left behind.

const (
	txnToolClass = "org.apache.kafka.tools.TransactionsCommand"
	// javaOpenTxnTimeout is the transaction.timeout.ms of the transaction
	// the scenario leaves open: long enough for the tools to find it
	// Ongoing after the program exits, short enough not to wait long for
	// the coordinator to abort it.
	javaOpenTxnTimeout = 20 * time.Second
	// What the scenario writes to java-txn-out: committed, aborted, left
	// open.
	javaTxnCommitted = 90 + 30 + 15
	javaTxnAborted   = 45
	javaTxnOpen      = 12
)

// toolTable parses the table a Kafka tool printed (prettyPrintTable: a
// header line, then one line a row, columns separated by spaces) whose
// header is header, and returns its rows. A row whose last columns are
// empty has them as "".
func toolTable(t *testing.T, out string, header ...string) [][]string {
	t.Helper()
	lines := strings.Split(out, "\n")
	at := slices.IndexFunc(lines, func(l string) bool { return slices.Equal(strings.Fields(l), header) })
	if at < 0 {
		t.Fatalf("no table with columns %v in the tool's output:\n%s", header, out)
	}
	var rows [][]string
	for _, l := range lines[at+1:] {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if len(f) > len(header) {
			t.Fatalf("row %q has more columns than %v; output:\n%s", l, header, out)
		}
		rows = append(rows, append(f, make([]string, len(header)-len(f))...))
	}
	return rows
}

// TestJavaTransactions runs the Java client's transactions scenario on
// three brokers: commits, an abort, a fenced producer, consume-transform-
// produce with sendOffsetsToTransaction, a transaction left open. Then
// kafka-transactions lists the three transactional ids with their states
// and describes the open one (Ongoing, its partitions) and the fenced one;
// the coordinator aborts the open transaction when its timeout passes,
// after which the last stable offsets reach the high watermarks and a
// read_committed consumer still sees only the committed records.
func TestJavaTransactions(t *testing.T) {
	t.Parallel()
	java, jar := javaTools(t) // skips without java or mvn
	kafkaLibs(t)              // the tools' jars, before the cluster starts
	bs := startReplCluster(t, 3,
		WithSet("cluster.group_initial_rebalance_delay_ms", "0"),
		WithSet("transaction_state_log_num_partitions", "4"),
		WithSet("transaction_abort_timed_out_transaction_cleanup_interval_ms", "500"))
	boot := strings.Join(kafkaAddrs(bs), ",")
	adm := kadmClient(t, bs)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	began := time.Now()
	out := runJavaScenario(t, java, jar, bs[0], "transactions",
		fmt.Sprintf("weir.open.timeout.ms=%d", javaOpenTxnTimeout.Milliseconds()))
	exited := time.Now()
	// OPEN topic partition offset: where the open transaction starts.
	openAt := map[int32]int64{}
	for _, l := range strings.Split(out, "\n") {
		var topic string
		var p int32
		var o int64
		if n, _ := fmt.Sscanf(l, "OPEN %s %d %d", &topic, &p, &o); n == 3 && topic == "java-txn-out" {
			openAt[p] = o
		}
	}
	if len(openAt) != 3 {
		t.Fatalf("the scenario printed the open transaction's first offsets of %d partitions, want 3:\n%s", len(openAt), out)
	}

	// The coordinators, as kadm sees them.
	want := map[string]string{"java-txn": "CompleteCommit", "java-eos": "CompleteCommit", "java-txn-open": "Ongoing"}
	described, err := adm.DescribeTransactions(ctx, "java-txn", "java-eos", "java-txn-open")
	if err != nil {
		t.Fatalf("DescribeTransactions: %v", err)
	}
	for id, state := range want {
		d, ok := described[id]
		if !ok || d.Err != nil || d.State != state {
			t.Fatalf("kadm DescribeTransactions %s: %+v, want state %s", id, d, state)
		}
	}

	// kafka-transactions list: every id once, with its coordinator,
	// producer id and state.
	start := time.Now()
	out, err = kafkaTool(t, txnToolClass, "--bootstrap-server", boot, "list")
	if err != nil {
		t.Fatalf("kafka-transactions list: %v\n%s", err, out)
	}
	rows := toolTable(t, out, "TransactionalId", "Coordinator", "ProducerId", "TransactionState")
	if len(rows) != len(want) {
		t.Errorf("kafka-transactions list: %d rows, want %d (%v):\n%s", len(rows), len(want), slices.Sorted(maps.Keys(want)), out)
	}
	for _, r := range rows {
		d := described[r[0]]
		if state, ok := want[r[0]]; !ok || r[1] != strconv.Itoa(int(d.Coordinator)) || r[2] != strconv.FormatInt(d.ProducerID, 10) || r[3] != state {
			t.Errorf("kafka-transactions list: row %q, want [%s %d %d %s]", r, r[0], d.Coordinator, d.ProducerID, state)
		}
	}
	t.Logf("kafka-transactions list (%v):\n%s", time.Since(start).Round(time.Millisecond), out)

	// kafka-transactions describe: the open transaction and its partitions,
	// and the fenced id (its second producer bumped the epoch).
	describe := func(id string) []string {
		t.Helper()
		start := time.Now()
		out, err := kafkaTool(t, txnToolClass, "--bootstrap-server", boot, "describe", "--transactional-id", id)
		if err != nil {
			t.Fatalf("kafka-transactions describe --transactional-id %s: %v\n%s", id, err, out)
		}
		rows := toolTable(t, out, "CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
			"TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions")
		if len(rows) != 1 {
			t.Fatalf("kafka-transactions describe --transactional-id %s: %d rows, want 1:\n%s", id, len(rows), out)
		}
		t.Logf("kafka-transactions describe --transactional-id %s (%v):\n%s", id, time.Since(start).Round(time.Millisecond), out)
		return rows[0]
	}
	open := described["java-txn-open"]
	r := describe("java-txn-open")
	startMs, _ := strconv.ParseInt(r[6], 10, 64)
	parts := strings.Split(r[8], ",")
	slices.Sort(parts)
	if r[0] != strconv.Itoa(int(open.Coordinator)) || r[1] != "java-txn-open" || r[2] != strconv.FormatInt(open.ProducerID, 10) ||
		r[3] != "0" || r[4] != "Ongoing" || r[5] != strconv.FormatInt(javaOpenTxnTimeout.Milliseconds(), 10) ||
		startMs < began.UnixMilli() || startMs > exited.UnixMilli() ||
		!slices.Equal(parts, []string{"java-txn-out-0", "java-txn-out-1", "java-txn-out-2"}) {
		t.Errorf("kafka-transactions describe java-txn-open: %q; want coordinator %d, producer %d epoch 0, Ongoing, timeout %d, started between %d and %d, partitions java-txn-out-0..2",
			r, open.Coordinator, open.ProducerID, javaOpenTxnTimeout.Milliseconds(), began.UnixMilli(), exited.UnixMilli())
	}
	// A completed transaction keeps its start (the second producer's
	// transaction, before the open one's), as in Kafka.
	fenced := described["java-txn"]
	r = describe("java-txn")
	lastStartMs, _ := strconv.ParseInt(r[6], 10, 64)
	if r[0] != strconv.Itoa(int(fenced.Coordinator)) || r[1] != "java-txn" || r[2] != strconv.FormatInt(fenced.ProducerID, 10) ||
		r[3] != "1" || r[4] != "CompleteCommit" || r[5] != "60000" || lastStartMs < began.UnixMilli() || lastStartMs > startMs || r[8] != "" {
		t.Errorf("kafka-transactions describe java-txn: %q; want coordinator %d, producer %d epoch 1, CompleteCommit, timeout 60000, started between %d and %d, no partitions",
			r, fenced.Coordinator, fenced.ProducerID, began.UnixMilli(), startMs)
	}
	if eos := described["java-eos"]; eos.ProducerEpoch != 0 || len(eos.Topics) != 0 {
		t.Errorf("kadm DescribeTransactions java-eos: %+v, want epoch 0 and no partitions", eos)
	}

	// The open transaction holds every partition's last stable offset
	// back until the coordinator aborts it at its timeout (with the epoch
	// bumped, fencing its producer).
	lso, err := adm.ListCommittedOffsets(ctx, "java-txn-out")
	if err != nil {
		t.Fatal(err)
	}
	lso.Each(func(o kadm.ListedOffset) {
		if o.Err != nil || o.Offset != openAt[o.Partition] {
			t.Errorf("java-txn-out/%d: last stable offset %d (%v), want %d, where the open transaction starts", o.Partition, o.Offset, o.Err, openAt[o.Partition])
		}
	})
	pollUntil(t, javaOpenTxnTimeout+30*time.Second, "the coordinator aborting java-txn-open at its timeout", func() error {
		d, err := adm.DescribeTransactions(ctx, "java-txn-open")
		if err != nil {
			return err
		}
		if o := d["java-txn-open"]; o.Err != nil || o.State != "CompleteAbort" {
			return fmt.Errorf("%+v", o)
		}
		return nil
	})
	aborted := time.Now()
	d, err := adm.DescribeTransactions(ctx, "java-txn-open")
	if err != nil {
		t.Fatal(err)
	}
	if o := d["java-txn-open"]; o.ProducerID != open.ProducerID || o.ProducerEpoch != 1 || len(o.Topics) != 0 {
		t.Errorf("java-txn-open after its timeout: %+v, want producer %d epoch 1 and no partitions", o, open.ProducerID)
	}
	t.Logf("java-txn-open aborted %v after the scenario exited (timeout %v)", aborted.Sub(exited).Round(time.Millisecond), javaOpenTxnTimeout)
	pollUntil(t, 15*time.Second, "the last stable offsets of java-txn-out reaching the high watermarks", func() error {
		ends, err := adm.ListEndOffsets(ctx, "java-txn-out")
		if err != nil {
			return err
		}
		lso, err := adm.ListCommittedOffsets(ctx, "java-txn-out")
		if err != nil {
			return err
		}
		for p := range int32(3) {
			e, _ := ends.Lookup("java-txn-out", p)
			l, _ := lso.Lookup("java-txn-out", p)
			if e.Err != nil || l.Err != nil || l.Offset != e.Offset || e.Offset <= openAt[p] {
				return fmt.Errorf("partition %d: high watermark %d (%v), last stable offset %d (%v), open transaction at %d", p, e.Offset, e.Err, l.Offset, l.Err, openAt[p])
			}
		}
		return nil
	})
	seeds := kafkaAddrs(bs)
	committed := consumeValues(t, bs[1], seeds, "java-txn-out", kgo.ReadCommitted(), javaTxnCommitted, clusterTimeout)
	if len(committed) != javaTxnCommitted || slices.ContainsFunc(committed, func(v string) bool {
		return strings.HasPrefix(v, "open-") || strings.HasPrefix(v, "aborted-") || strings.HasPrefix(v, "zombie")
	}) {
		t.Errorf("read_committed java-txn-out after the abort: %d records, want %d, none aborted", len(committed), javaTxnCommitted)
	}
	all := consumeValues(t, bs[2], seeds, "java-txn-out", kgo.ReadUncommitted(), javaTxnCommitted+javaTxnAborted+javaTxnOpen, clusterTimeout)
	if len(all) != javaTxnCommitted+javaTxnAborted+javaTxnOpen {
		t.Errorf("read_uncommitted java-txn-out: %d records, want %d", len(all), javaTxnCommitted+javaTxnAborted+javaTxnOpen)
	}
}
