package broker

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/broker/controller"
	"github.com/weir-broker/weir/log"
)

// producerWindow is how many of a producer's latest batches are
// remembered: the clients' limit on in-flight requests per connection
// with idempotence, so any batch a producer may retry is still known.
const producerWindow = 5

type producerBatch struct {
	firstSeq, lastSeq int32
	baseOffset        int64
}

type producerEntry struct {
	epoch   int16
	batches [producerWindow]producerBatch // ring, oldest overwritten
	n       int                           // batches recorded, capped at producerWindow
	next    int                           // ring slot of the next batch
	// txnFirst is the offset of the first batch of the producer's open
	// transaction, -1 when none is open.
	txnFirst int64
	// coordinatorEpoch is the coordinator epoch of its last marker, -1
	// before any: a marker from an older coordinator is fenced.
	coordinatorEpoch int32
}

func newProducerEntry(epoch int16) *producerEntry {
	return &producerEntry{epoch: epoch, txnFirst: -1, coordinatorEpoch: -1}
}

func (e *producerEntry) last() producerBatch {
	return e.batches[(e.next+producerWindow-1)%producerWindow]
}

func (e *producerEntry) find(first, last int32) (producerBatch, bool) {
	for i := 0; i < e.n; i++ {
		b := e.batches[i]
		if b.firstSeq == first && b.lastSeq == last {
			return b, true
		}
	}
	return producerBatch{}, false
}

// producerTable is the idempotent-producer state of one partition,
// guarded by Partition.appendMu. Every replica's is the same: the
// partition's checkpoint and snapshots carry it (encode), and a restart
// or a snapshot install restores it rather than rebuilding it from what
// is left of the log; only a checkpoint of an earlier release, which
// has none, has it rebuilt from the log's batch headers.
type producerTable struct {
	m map[int64]*producerEntry
	// open counts the producers with an open transaction: with none the
	// last stable offset is the high watermark without a look.
	open int
	// encoded is encode's answer until the next record: a checkpoint of
	// an idle partition (every retention pass) encodes nothing.
	encoded string
}

func nextSeq(s int32) int32 {
	if s == math.MaxInt32 {
		return 0
	}
	return s + 1
}

func lastSeqOf(h log.BatchHeader) int32 {
	// Sequences wrap at MaxInt32 like the clients' counters do.
	return int32((int64(h.BaseSequence) + int64(h.LastOffsetDelta)) % (math.MaxInt32 + 1))
}

// check decides whether a batch may be appended. It returns the base
// offset of the original append when the batch is a retry of one already
// in the log.
func (t *producerTable) check(h log.BatchHeader) (dupOffset int64, dup bool, err error) {
	if h.ProducerID < 0 {
		return 0, false, nil
	}
	e := t.m[h.ProducerID]
	switch {
	case e == nil:
		// A producer this partition has no state for (new, or its
		// batches were removed by retention) may start anywhere, as in
		// Kafka.
		return 0, false, nil
	case e.txnFirst >= 0 && !h.IsTransactional() && h.ProducerEpoch <= e.epoch:
		return 0, false, fmt.Errorf("%w: producer %d has an open transaction; a batch outside it is refused", kerr.InvalidTxnState, h.ProducerID)
	case h.ProducerEpoch < e.epoch:
		return 0, false, fmt.Errorf("%w: producer %d epoch %d is older than %d", kerr.InvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.epoch)
	case h.BaseSequence < 0:
		// Written by a coordinator on the producer's behalf
		// (transactional offsets): no sequence to check.
		return 0, false, nil
	case h.ProducerEpoch > e.epoch:
		if h.BaseSequence != 0 {
			return 0, false, fmt.Errorf("%w: producer %d new epoch %d must start at sequence 0, not %d", kerr.OutOfOrderSequenceNumber, h.ProducerID, h.ProducerEpoch, h.BaseSequence)
		}
		return 0, false, nil
	}
	if b, ok := e.find(h.BaseSequence, lastSeqOf(h)); ok {
		return b.baseOffset, true, nil
	}
	if e.n == 0 {
		// Its epoch was moved on by a marker: the new epoch starts at 0.
		if h.BaseSequence != 0 {
			return 0, false, fmt.Errorf("%w: producer %d epoch %d must start at sequence 0, not %d", kerr.OutOfOrderSequenceNumber, h.ProducerID, h.ProducerEpoch, h.BaseSequence)
		}
		return 0, false, nil
	}
	if want := nextSeq(e.last().lastSeq); h.BaseSequence != want {
		return 0, false, fmt.Errorf("%w: producer %d sent sequence %d, expected %d", kerr.OutOfOrderSequenceNumber, h.ProducerID, h.BaseSequence, want)
	}
	return 0, false, nil
}

// record remembers an appended batch (BaseOffset already assigned).
func (t *producerTable) record(h log.BatchHeader) {
	if h.ProducerID < 0 {
		return
	}
	if t.m == nil {
		t.m = map[int64]*producerEntry{}
	}
	t.encoded = ""
	e := t.m[h.ProducerID]
	if e == nil || h.ProducerEpoch != e.epoch {
		next := newProducerEntry(h.ProducerEpoch)
		if e != nil {
			next.txnFirst, next.coordinatorEpoch = e.txnFirst, e.coordinatorEpoch
		}
		e = next
		t.m[h.ProducerID] = e
	}
	if h.IsTransactional() && e.txnFirst < 0 {
		e.txnFirst = h.BaseOffset
		t.open++
	}
	if h.BaseSequence < 0 {
		return // a coordinator's batch: no sequence to remember
	}
	e.batches[e.next] = producerBatch{firstSeq: h.BaseSequence, lastSeq: lastSeqOf(h), baseOffset: h.BaseOffset}
	e.next = (e.next + 1) % producerWindow
	if e.n < producerWindow {
		e.n++
	}
}

// checkMarker decides whether a transaction marker of producer id at
// epoch from a coordinator at coordinatorEpoch may be appended.
func (t *producerTable) checkMarker(id int64, epoch int16, coordinatorEpoch int32) error {
	e := t.m[id]
	switch {
	case e == nil:
		return nil
	case epoch < e.epoch:
		return fmt.Errorf("%w: marker of producer %d at epoch %d, older than %d", kerr.InvalidProducerEpoch, id, epoch, e.epoch)
	case coordinatorEpoch < e.coordinatorEpoch:
		return fmt.Errorf("%w: marker of producer %d from coordinator epoch %d, older than %d", kerr.TransactionCoordinatorFenced, id, coordinatorEpoch, e.coordinatorEpoch)
	}
	return nil
}

// endTxn records a marker of producer id (offset assigned): its open
// transaction, if any, ends; it returns where that transaction began, -1
// for none. A marker at a newer epoch moves the producer to it, with no
// batch yet.
func (t *producerTable) endTxn(id int64, epoch int16, coordinatorEpoch int32) (first int64) {
	if t.m == nil {
		t.m = map[int64]*producerEntry{}
	}
	t.encoded = ""
	e := t.m[id]
	if e == nil || epoch > e.epoch {
		next := newProducerEntry(epoch)
		if e != nil {
			next.txnFirst = e.txnFirst
		}
		e = next
		t.m[id] = e
	}
	first = e.txnFirst
	if first >= 0 {
		t.open--
	}
	e.txnFirst, e.coordinatorEpoch = -1, coordinatorEpoch
	return first
}

// firstOpen is the first offset of the oldest open transaction, -1 when
// none is open.
func (t *producerTable) firstOpen() int64 {
	if t.open == 0 {
		return -1
	}
	first := int64(-1)
	for _, e := range t.m {
		if e.txnFirst >= 0 && (first < 0 || e.txnFirst < first) {
			first = e.txnFirst
		}
	}
	return first
}

// rebuild replays the headers of every batch in the log.
func (t *producerTable) rebuild(l *log.Log) error {
	return l.Batches(l.LogStartOffset(), func(h log.BatchHeader) bool {
		if h.IsControl() {
			if h.ProducerID >= 0 {
				t.endTxn(h.ProducerID, h.ProducerEpoch, -1)
			}
			return true
		}
		t.record(h)
		return true
	})
}

// producerIDs hands out producer ids from blocks the controller
// allocates, so no id is given twice in the cluster or across restarts.
type producerIDs struct {
	next, end int64
}

const producerIDBlock = 1000

// InitProducerID gives an idempotent producer a new id at epoch 0.
func (pp *ProducePath) InitProducerID() (id int64, epoch int16, err error) {
	pp.producerMu.Lock()
	defer pp.producerMu.Unlock()
	if pp.producer.next >= pp.producer.end {
		res, err := pp.propose(controller.AllocateProducerIDs{NodeID: pp.nodeID, Epoch: pp.brokerEpoch(), Count: producerIDBlock})
		if err != nil {
			return -1, -1, err
		}
		pp.producer.next, pp.producer.end = res.FirstProducerID, res.FirstProducerID+producerIDBlock
	}
	id = pp.producer.next
	pp.producer.next++
	return id, 0, nil
}

// producerRecord is one producer's state as checkpoints and snapshots
// carry it: its epoch and its latest batches, oldest first, each as
// [first sequence, last sequence, base offset].
type producerRecord struct {
	ID      int64      `json:"id"`
	Epoch   int16      `json:"epoch"`
	Batches [][3]int64 `json:"batches"`
	// TxnFirst is where its open transaction began, absent when none is
	// open; CoordinatorEpoch its last marker's, absent before any.
	TxnFirst         *int64 `json:"txn_first,omitempty"`
	CoordinatorEpoch *int32 `json:"coordinator_epoch,omitempty"`
}

// encode is the table as one line of JSON, producers by id, so that equal
// tables encode the same.
//
// The table is part of what a replica's checkpoint and snapshot restore,
// rather than rebuilt from the batches left in the log: a running replica
// still knows a producer whose batches DeleteRecords or retention (each
// replica's own, by its own clock) removed, and a replica that forgot it
// at a restart would append a retry the others answer as a duplicate,
// and from then on give every batch other offsets.
func (t *producerTable) encode() string {
	if t.encoded != "" {
		return t.encoded
	}
	ids := make([]int64, 0, len(t.m))
	for id := range t.m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	recs := make([]producerRecord, 0, len(ids))
	for _, id := range ids {
		e := t.m[id]
		r := producerRecord{ID: id, Epoch: e.epoch, Batches: make([][3]int64, 0, e.n)}
		if e.txnFirst >= 0 {
			r.TxnFirst = &e.txnFirst
		}
		if e.coordinatorEpoch >= 0 {
			r.CoordinatorEpoch = &e.coordinatorEpoch
		}
		for i := range e.n {
			b := e.batches[(e.next-e.n+i+producerWindow)%producerWindow]
			r.Batches = append(r.Batches, [3]int64{int64(b.firstSeq), int64(b.lastSeq), b.baseOffset})
		}
		recs = append(recs, r)
	}
	data, _ := json.Marshal(recs) // plain values: cannot fail
	t.encoded = string(data)
	return t.encoded
}

// decodeProducerTable reads what encode wrote.
func decodeProducerTable(s string) (producerTable, error) {
	var recs []producerRecord
	if err := json.Unmarshal([]byte(s), &recs); err != nil {
		return producerTable{}, fmt.Errorf("producer state: %w", err)
	}
	t := producerTable{m: make(map[int64]*producerEntry, len(recs))}
	for _, r := range recs {
		if len(r.Batches) > producerWindow {
			return producerTable{}, fmt.Errorf("producer state: producer %d has %d batches, at most %d", r.ID, len(r.Batches), producerWindow)
		}
		e := newProducerEntry(r.Epoch)
		if r.TxnFirst != nil {
			e.txnFirst = *r.TxnFirst
			t.open++
		}
		if r.CoordinatorEpoch != nil {
			e.coordinatorEpoch = *r.CoordinatorEpoch
		}
		for _, b := range r.Batches {
			e.batches[e.next] = producerBatch{firstSeq: int32(b[0]), lastSeq: int32(b[1]), baseOffset: b[2]}
			e.next = (e.next + 1) % producerWindow
			e.n++
		}
		t.m[r.ID] = e
	}
	return t, nil
}
