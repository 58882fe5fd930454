package chaos

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// outRec is the output record of input (p, off, val) in attempt with n
// records, at output offset at.
func outRec(at int64, attempt string, n int, p int32, off int64, val string) logRecord {
	return logRecord{Offset: at, Value: outputValue(attempt, n, &kgo.Record{Partition: p, Offset: off, Value: []byte(val)})}
}

const (
	txnA = "w0.0-000000" // committed: inputs 0/0, 0/1
	txnB = "w0.0-000001" // aborted deliberately: inputs 0/2, 1/0
	txnC = "w1.0-000000" // committed: inputs 0/2, 1/0 again
)

// healedUnix is when the fixtures' faults healed.
const healedUnix = 1767268800 // 2026-01-01 12:00 UTC

// cleanTxnRun is a history and final reads that keep every property:
// transaction A committed, B aborted (its records in the log, not in the
// committed view), C committed the inputs B had.
func cleanTxnRun() (*TxnHistory, TxnFinal) {
	h := NewTxnHistory()
	for range 4 {
		h.inputAttempt()
		h.inputAck(nil)
	}
	h.begin(txnA, 0, 2, false)
	h.end(txnA, TxnCommitted, nil)
	h.begin(txnB, 0, 2, true)
	h.end(txnB, TxnAborted, nil)
	h.begin(txnC, 1, 2, false)
	h.end(txnC, TxnCommitted, nil)
	a0, a1 := outRec(0, txnA, 2, 0, 0, "in-0"), outRec(1, txnA, 2, 0, 1, "in-1")
	b0, b1 := outRec(0, txnB, 2, 0, 2, "in-2"), outRec(1, txnB, 2, 1, 0, "in-3")
	c0, c1 := outRec(3, txnC, 2, 0, 2, "in-2"), outRec(3, txnC, 2, 1, 0, "in-3")
	h.observe(seenRecord{Consumer: -1, Partition: 0, Offset: 0, Value: a0.Value})
	h.probe(lsoProbe{Node: 1, Partition: 0, FetchOffset: 0, LastStable: 2, HighWatermark: 3, LastDataOffset: 1})
	h.probe(lsoProbe{Node: 2, Partition: 1, FetchOffset: 0, LastStable: 0, HighWatermark: 2, LastDataOffset: -1})
	view := func() map[int32]committedView {
		return map[int32]committedView{
			0: {Records: []logRecord{a0, a1, c0}, LastStable: 5, HighWatermark: 5},
			1: {Records: []logRecord{c1}, LastStable: 5, HighWatermark: 5},
		}
	}
	f := TxnFinal{
		Input: map[int32][]logRecord{
			0: {{Offset: 0, Value: "in-0"}, {Offset: 1, Value: "in-1"}, {Offset: 2, Value: "in-2"}},
			1: {{Offset: 0, Value: "in-3"}},
		},
		Views:       map[int]map[int32]committedView{0: view(), 1: view(), 2: view()},
		Uncommitted: map[int32][]logRecord{0: {a0, a1, c0}, 1: {b0, b1, c1}},
		// A and B are producer 1's, C producer 2's.
		OutputBatches: map[int32][]txnBatch{
			0: {txnData(1, a0, a1), marker(2, 1, false), txnData(2, c0), marker(4, 2, false)},
			1: {txnData(1, b0, b1), marker(2, 1, true), txnData(2, c1), marker(4, 2, false)},
		},
		Open: []openTxn{
			// Open past its timeout, but within the grace after the heal.
			{ID: "t", State: "Ongoing", Start: time.Unix(healedUnix, 0).Add(-time.Minute), Timeout: 10 * time.Second, SeenAt: time.Unix(healedUnix, 0).Add(20 * time.Second)},
		},
		HealedAt: time.Unix(healedUnix, 0),
		Grace:    25 * time.Second,
	}
	return h, f
}

func txnData(producer int64, recs ...logRecord) txnBatch {
	return txnBatch{FirstOffset: recs[0].Offset, LastOffset: recs[len(recs)-1].Offset, ProducerID: producer, Transactional: true, Records: recs}
}

func marker(at, producer int64, abort bool) txnBatch {
	return txnBatch{FirstOffset: at, LastOffset: at, ProducerID: producer, Transactional: true, Control: true, Abort: abort}
}

// addUnknown adds attempt "w2.0-000000", ended with an error, of input
// 1/1 "in-4" at output 1/5, producer 3, with a marker at 6.
func addUnknown(h *TxnHistory, f *TxnFinal, abort, visible bool) {
	h.begin("w2.0-000000", 2, 1, false)
	h.end("w2.0-000000", TxnUnknown, errors.New("timed out"))
	f.Input[1] = append(f.Input[1], logRecord{Offset: 1, Value: "in-4"})
	d := outRec(5, "w2.0-000000", 1, 1, 1, "in-4")
	f.OutputBatches[1] = append(f.OutputBatches[1], txnData(3, d), marker(6, 3, abort))
	if visible {
		everyView(f, 1, func(v *committedView) { v.Records = append(v.Records, d) })
	}
}

func TestCheckTxnAcceptsACleanRun(t *testing.T) {
	h, f := cleanTxnRun()
	r := CheckTxn(h, f)
	if !r.OK() || len(r.Violations) != 0 {
		t.Fatalf("clean run reported violations: %q", r.Violations)
	}
	if r.Committed != 2 || r.Aborted != 1 || r.Deliberate != 1 || r.InputRecords != 4 || r.OutputCommitted != 4 || r.OutputUncommitted != 6 || r.AbortedInLog != 2 || r.Observed != 1 || r.Probes != 2 {
		t.Fatalf("counts: %+v", r)
	}

	h, f = cleanTxnRun()
	addUnknown(h, &f, false, true)
	if r := CheckTxn(h, f); !r.OK() || r.Unknown != 1 || r.UnknownCommitted != 1 {
		t.Fatalf("a committed transaction of unknown outcome: %q, %+v", r.Violations, r)
	}
}

// everyView applies fn to every node's view of partition p.
func everyView(f *TxnFinal, p int32, fn func(v *committedView)) {
	for _, node := range slices.Sorted(maps.Keys(f.Views)) {
		v := f.Views[node][p]
		fn(&v)
		f.Views[node][p] = v
	}
}

func TestCheckTxnFindsEachViolation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(h *TxnHistory, f *TxnFinal)
		count  func(r *TxnReport) int
		want   string
	}{
		{
			name: "(a) a record of an aborted transaction in the committed view",
			mutate: func(_ *TxnHistory, f *TxnFinal) {
				everyView(f, 1, func(v *committedView) {
					v.Records = append([]logRecord{outRec(0, txnB, 2, 0, 2, "in-2"), outRec(1, txnB, 2, 1, 0, "in-3")}, v.Records...)
				})
			},
			count: func(r *TxnReport) int { return r.AbortedVisible },
			want:  "ABORTED VISIBLE: node 0, output 1/0",
		},
		{
			name: "(a) a record of a transaction left for its timeout in the committed view",
			mutate: func(h *TxnHistory, f *TxnFinal) {
				h.begin("x0", -1, 1, false)
				h.end("x0", TxnAbandoned, nil)
				everyView(f, 1, func(v *committedView) { v.Records = append(v.Records, outRec(5, "x0", 1, 0, 0, "in-0")) })
			},
			count: func(r *TxnReport) int { return r.AbortedVisible },
			want:  "ABORTED VISIBLE: node 0, output 1/5: \"x0|1|0/0|in-0\" of abandoned transaction x0",
		},
		{
			name: "(a) the read_committed consumer was served an aborted record",
			mutate: func(h *TxnHistory, _ *TxnFinal) {
				h.observe(seenRecord{Consumer: -1, Partition: 1, Offset: 0, Value: outRec(0, txnB, 2, 0, 2, "in-2").Value})
			},
			count: func(r *TxnReport) int { return r.AbortedVisible },
			want:  "ABORTED VISIBLE: the read_committed consumer was served",
		},
		{
			name: "(a) the read_committed consumer was served a record not in the committed view",
			mutate: func(h *TxnHistory, _ *TxnFinal) {
				h.begin("w2.0-000000", 2, 1, false)
				h.end("w2.0-000000", TxnUnknown, errors.New("fenced"))
				h.observe(seenRecord{Consumer: -1, Partition: 1, Offset: 5, Value: outRec(5, "w2.0-000000", 1, 0, 0, "in-0").Value})
			},
			count: func(r *TxnReport) int { return r.AbortedVisible },
			want:  "UNCOMMITTED SERVED: the read_committed consumer was served",
		},
		{
			name:   "(b) one record of a committed transaction missing",
			mutate: func(_ *TxnHistory, f *TxnFinal) { everyView(f, 1, func(v *committedView) { v.Records = nil }) },
			count:  func(r *TxnReport) int { return r.Partial },
			want:   "PARTIAL TRANSACTION: node 0: 1 of the 2 records of " + txnC,
		},
		{
			name: "(b) a transaction of unknown outcome partly visible",
			mutate: func(h *TxnHistory, f *TxnFinal) {
				h.begin("w2.0-000000", 2, 2, false)
				h.end("w2.0-000000", TxnUnknown, errors.New("timed out"))
				f.Input[0] = append(f.Input[0], logRecord{Offset: 3, Value: "in-4"})
				everyView(f, 0, func(v *committedView) {
					v.Records = append(v.Records, outRec(4, "w2.0-000000", 2, 0, 3, "in-4"))
				})
			},
			count: func(r *TxnReport) int { return r.Partial },
			want:  "PARTIAL TRANSACTION: node 0: 1 of the 2 records of w2.0-000000",
		},
		{
			name: "(b) a transaction reported committed not visible at all",
			mutate: func(h *TxnHistory, _ *TxnFinal) {
				h.begin("w2.0-000000", 2, 3, false)
				h.end("w2.0-000000", TxnCommitted, nil)
			},
			count: func(r *TxnReport) int { return r.Partial },
			want:  "COMMITTED TRANSACTION MISSING: node 0: none of the 3 records of w2.0-000000",
		},
		{
			name: "(c) an input record reflected twice",
			mutate: func(h *TxnHistory, f *TxnFinal) {
				h.begin("w2.0-000000", 2, 1, false)
				h.end("w2.0-000000", TxnCommitted, nil)
				everyView(f, 1, func(v *committedView) {
					v.Records = append(v.Records, outRec(4, "w2.0-000000", 1, 0, 1, "in-1"))
				})
			},
			count: func(r *TxnReport) int { return r.Duplicated },
			want:  "INPUT REFLECTED TWICE: node 0: input 0/1 \"in-1\" at output 0/1 (" + txnA + "), 1/4 (w2.0-000000)",
		},
		{
			name:   "(c) an input record never reflected",
			mutate: func(_ *TxnHistory, f *TxnFinal) { f.Input[1] = append(f.Input[1], logRecord{Offset: 1, Value: "in-5"}) },
			count:  func(r *TxnReport) int { return r.Missing },
			want:   "INPUT NOT REFLECTED: node 0: input 1/1 \"in-5\"",
		},
		{
			name: "(c) an output record naming another input value",
			mutate: func(_ *TxnHistory, f *TxnFinal) {
				f.Input[0][1].Value = "in-9"
			},
			count: func(r *TxnReport) int { return r.Bogus },
			want:  "BOGUS OUTPUT: node 0, output 0/1 names input 0/1 \"in-1\"; the input has \"in-9\" there",
		},
		{
			name:   "(a) a transaction of unknown outcome visible though its ABORT marker follows it",
			mutate: func(h *TxnHistory, f *TxnFinal) { addUnknown(h, f, true, true) },
			count:  func(r *TxnReport) int { return r.ViewsDiffer },
			want:   "READ_COMMITTED VIEW NOT WHAT THE MARKERS SAY: output partition 1: the log's markers vs node 0's view: 1 records vs 2",
		},
		{
			name:   "a transaction committed by its marker missing from the committed view",
			mutate: func(h *TxnHistory, f *TxnFinal) { addUnknown(h, f, false, false) },
			count:  func(r *TxnReport) int { return r.ViewsDiffer },
			want:   "READ_COMMITTED VIEW NOT WHAT THE MARKERS SAY: output partition 1: the log's markers vs node 0's view: 2 records vs 1",
		},
		{
			name: "a broker's committed view differs",
			mutate: func(_ *TxnHistory, f *TxnFinal) {
				v := f.Views[2][0]
				v.Records = slices.Clone(v.Records)
				v.Records[2].Offset = 4
				f.Views[2][0] = v
			},
			count: func(r *TxnReport) int { return r.ViewsDiffer },
			want:  "READ_COMMITTED VIEWS DIFFER: output partition 0: node 0 vs node 2",
		},
		{
			name: "(d) a read_committed fetch returned data at the LSO",
			mutate: func(h *TxnHistory, _ *TxnFinal) {
				h.probe(lsoProbe{Node: 2, Partition: 0, FetchOffset: 3, LastStable: 3, HighWatermark: 5, LastDataOffset: 3})
			},
			count: func(r *TxnReport) int { return r.PastLSO },
			want:  "PAST LSO: node 2, read_committed fetch of output 0 at 3 returned data up to offset 3; last stable offset 3",
		},
		{
			name: "(d) an LSO past the high watermark",
			mutate: func(h *TxnHistory, _ *TxnFinal) {
				h.probe(lsoProbe{Node: 1, Partition: 1, FetchOffset: 0, LastStable: 6, HighWatermark: 5, LastDataOffset: -1})
			},
			count: func(r *TxnReport) int { return r.PastLSO },
			want:  "LSO PAST HIGH WATERMARK: node 1, output 1: last stable offset 6, high watermark 5",
		},
		{
			name: "(e) a transaction open past its timeout and the grace after the heal",
			mutate: func(_ *TxnHistory, f *TxnFinal) {
				f.Open = append(f.Open, openTxn{ID: "u", State: "PrepareAbort", Start: time.Unix(healedUnix, 0).Add(-time.Minute), Timeout: 10 * time.Second, SeenAt: time.Unix(healedUnix, 0).Add(26 * time.Second)})
			},
			count: func(r *TxnReport) int { return r.StaleOpen },
			want:  "STALE TRANSACTION: u in state PrepareAbort",
		},
		{
			name: "(e) a transaction begun after the heal open past its timeout and the grace",
			mutate: func(_ *TxnHistory, f *TxnFinal) {
				f.Open = append(f.Open, openTxn{ID: "v", State: "Ongoing", Start: time.Unix(healedUnix, 0).Add(time.Minute), Timeout: 10 * time.Second, SeenAt: time.Unix(healedUnix, 0).Add(time.Minute + 36*time.Second)})
			},
			count: func(r *TxnReport) int { return r.StaleOpen },
			want:  "STALE TRANSACTION: v in state Ongoing",
		},
		{
			name:   "(e) an LSO stuck below the high watermark",
			mutate: func(_ *TxnHistory, f *TxnFinal) { everyView(f, 1, func(v *committedView) { v.LastStable = 2 }) },
			count:  func(r *TxnReport) int { return r.StaleOpen },
			want:   "LSO STUCK: node 0, output 1: last stable offset 2 below the high watermark 5",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, f := cleanTxnRun()
			tc.mutate(h, &f)
			r := CheckTxn(h, f)
			if r.OK() || tc.count(r) == 0 {
				t.Fatalf("not detected: %+v", r)
			}
			if !strings.Contains(strings.Join(r.Violations, "\n"), tc.want) {
				t.Fatalf("violations %q do not mention %q", r.Violations, tc.want)
			}
		})
	}
}

// batchBytes encodes one uncompressed batch as a fetch returns it.
func batchBytes(first int64, producer int64, txn, control bool, recs ...kmsg.Record) []byte {
	b := kmsg.NewRecordBatch()
	b.FirstOffset = first
	b.ProducerID = producer
	b.Magic = 2
	if txn {
		b.Attributes |= 0x10
	}
	if control {
		b.Attributes |= 0x20
	}
	b.LastOffsetDelta = int32(len(recs) - 1)
	b.NumRecords = int32(len(recs))
	for i, r := range recs {
		r.OffsetDelta = int32(i)
		r.Length = 0
		r.Length = int32(len(r.AppendTo(nil)) - 1) // a zero length is one varint byte
		b.Records = r.AppendTo(b.Records)
	}
	raw := b.AppendTo(nil)
	// The length counts from after itself; the CRC covers from the
	// attributes on.
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], castagnoli))
	return raw
}

func dataRec(v string) kmsg.Record {
	r := kmsg.NewRecord()
	r.Value = []byte(v)
	return r
}

func markerRec(abort bool) kmsg.Record {
	r := kmsg.NewRecord()
	r.Key = []byte{0, 0, 0, 1}
	if abort {
		r.Key[3] = 0
	}
	r.Value = []byte{0, 0, 0, 0, 0, 0}
	return r
}

// TestAborterDropsAbortedTransactions: the client-side filtering of the
// read_committed view keeps a committed transaction and plain records
// and drops an aborted transaction up to its marker, not after.
func TestAborterDropsAbortedTransactions(t *testing.T) {
	var data []byte
	data = append(data, batchBytes(0, 7, true, false, dataRec("x1"), dataRec("x2"))...) // aborted below
	data = append(data, batchBytes(2, 8, true, false, dataRec("y1"))...)                // committed
	data = append(data, batchBytes(3, 7, true, true, markerRec(true))...)
	data = append(data, batchBytes(4, 8, true, true, markerRec(false))...)
	data = append(data, batchBytes(5, 7, true, false, dataRec("x3"))...) // producer 7's next, committed
	data = append(data, batchBytes(6, 7, true, true, markerRec(false))...)
	data = append(data, batchBytes(7, -1, false, false, dataRec("z"))...)
	batches, next, err := decodeTxnBatches(data, 0)
	if err != nil {
		t.Fatal(err)
	}
	if next != 8 || len(batches) != 7 || !batches[2].Abort || batches[3].Abort {
		t.Fatalf("decoded next %d, %+v", next, batches)
	}
	at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
	at.ProducerID, at.FirstOffset = 7, 0
	ab := newAborter([]kmsg.FetchResponseTopicPartitionAbortedTransaction{at})
	var kept []string
	for _, b := range batches {
		if ab.keep(b) {
			for _, r := range b.Records {
				kept = append(kept, r.Value)
			}
		}
	}
	if want := []string{"y1", "x3", "z"}; !slices.Equal(kept, want) {
		t.Fatalf("kept %v, want %v", kept, want)
	}
}
