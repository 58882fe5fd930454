package log

import (
	"cmp"
	"fmt"
	"slices"
)

// Transactions in a clean, as Kafka's cleaner handles them
// (LogCleaner's CleanedTransactionMetadata, KIP-98 and KIP-534):
//
//   - A transaction is a producer's transactional data batches from its
//     first one after its previous marker up to its next marker. A
//     pass learns which transactions aborted from the markers
//     themselves: those it meets while building its map, and for a
//     transaction still undecided where the map stops, the producer's
//     next marker further on. The log needs no index of aborted
//     transactions for it, and a log reopened or cleaned by another
//     replica gives the same answer.
//   - Keys of a transaction's records wait beside the map until its
//     marker: a commit puts them in (the later offset of a key wins, so
//     a committed record supersedes earlier ones like any other), an
//     abort drops them, so aborted data never shadows an earlier value.
//   - The rewrite drops every record of an aborted transaction, whatever
//     its key.
//   - A marker stays while any batch of its transaction is left before
//     it (the cleaner walks the log from its start, so it meets them all
//     first). Once none is, the first pass that keeps it sets its delete
//     horizon, as for tombstones, and a pass after the horizon removes
//     it. So a marker is never removed while data it decides remains:
//     readers that rebuild a partition's aborted transactions or a
//     group's committed offsets from the log stay right.
//   - A transaction still open (no marker up to the log end) bounds the
//     clean: the pass is redone with CleanOptions.UpTo lowered to its
//     first offset. Callers pass the last stable offset already; this
//     keeps the log right whatever bound it is given.
//   - A producer's last marker, when its epoch is newer than its last
//     data batch's, is kept whole after the horizon (as the producer's
//     last data batch is kept empty): it is what a rebuild of the
//     producer's state from the log learns the epoch from.

// txnSpan is a transaction of one producer: its first data offset and
// its marker's offset.
type txnSpan struct{ first, marker int64 }

// pendingKey is a key of a transaction waiting for its marker.
type pendingKey struct {
	h   keyHash
	off int64
}

// txnScan follows the transactions of the batches a pass reads in
// offset order.
type txnScan struct {
	open    map[int64]int64        // producer id -> first offset of its undecided transaction
	pending map[int64][]pendingKey // producer id -> its undecided transaction's keys
	npend   int                    // keys in pending
	aborted map[int64][]txnSpan    // producer id -> its aborted transactions, in order
}

func newTxnScan() *txnScan {
	return &txnScan{open: map[int64]int64{}, pending: map[int64][]pendingKey{}, aborted: map[int64][]txnSpan{}}
}

// data notes a transactional data batch.
func (t *txnScan) data(h BatchHeader) {
	if _, ok := t.open[h.ProducerID]; !ok {
		t.open[h.ProducerID] = h.BaseOffset
	}
}

// needsType reports whether the marker h decides a transaction (so its
// type must be read).
func (t *txnScan) needsType(h BatchHeader) bool {
	_, ok := t.open[h.ProducerID]
	return ok
}

// marker notes the marker h of producer h.ProducerID; commit is its type
// (ignored when it decides nothing). A commit moves the transaction's
// keys into m.
func (t *txnScan) marker(h BatchHeader, commit bool, m *offsetMap) {
	first, ok := t.open[h.ProducerID]
	if !ok {
		return
	}
	delete(t.open, h.ProducerID)
	keys := t.pending[h.ProducerID]
	t.pending[h.ProducerID] = keys[:0] // its next transaction's
	t.npend -= len(keys)
	if commit {
		for _, k := range keys {
			m.putMax(k.h, k.off)
		}
		return
	}
	t.aborted[h.ProducerID] = append(t.aborted[h.ProducerID], txnSpan{first, h.BaseOffset})
}

// key holds key at off of producer pid's undecided transaction.
func (t *txnScan) key(pid int64, h keyHash, off int64) {
	t.pending[pid] = append(t.pending[pid], pendingKey{h, off})
	t.npend++
}

// isAborted reports whether the transactional batch of pid at offset
// belongs to an aborted transaction.
func (t *txnScan) isAborted(pid, offset int64) bool {
	spans := t.aborted[pid]
	i, found := slices.BinarySearchFunc(spans, offset, func(s txnSpan, off int64) int { return cmp.Compare(s.first, off) })
	if found {
		return true
	}
	return i > 0 && offset < spans[i-1].marker
}

// resolve decides the transactions still undecided at the end of the
// map by the producers' next markers from offset from on; it returns
// the first offset of the oldest transaction that no marker decides yet
// (-1 when there is none): the log is not stable past it.
func (l *Log) resolveTxns(t *txnScan, from int64, m *offsetMap) (unstable int64, err error) {
	if len(t.open) == 0 {
		return -1, nil
	}
	waiting := len(t.open)
	var markers []BatchHeader
	seen := map[int64]bool{}
	err = l.Batches(from, func(h BatchHeader) bool {
		if h.IsControl() && h.BaseOffset >= from && !seen[h.ProducerID] && t.needsType(h) {
			seen[h.ProducerID] = true
			markers = append(markers, h)
			waiting--
		}
		return waiting > 0
	})
	if err != nil {
		return -1, fmt.Errorf("log: clean: %w", err)
	}
	for _, h := range markers {
		b, err := l.Read(h.BaseOffset, 1, Obligatory, h.BaseOffset+1)
		if err != nil {
			return -1, fmt.Errorf("log: clean: read marker %d: %w", h.BaseOffset, err)
		}
		commit, _ := MarkerType(b)
		t.marker(h, commit, m)
	}
	unstable = -1
	for _, first := range t.open {
		if unstable < 0 || first < unstable {
			unstable = first
		}
	}
	return unstable, nil
}

// producerLast is where a producer's state lies at the end of the log:
// its last data batch and its last marker (-1: none), with their epochs.
type producerLast struct {
	data, marker           int64 // last offsets
	dataEpoch, markerEpoch int16
}

// notePID updates the producers' last batches with h.
func notePID(pl map[int64]producerLast, h BatchHeader) {
	if h.ProducerID < 0 {
		return
	}
	p, ok := pl[h.ProducerID]
	if !ok {
		p = producerLast{data: -1, marker: -1}
	}
	if h.IsControl() {
		if h.LastOffset() > p.marker {
			p.marker, p.markerEpoch = h.LastOffset(), h.ProducerEpoch
		}
	} else if h.LastOffset() > p.data {
		p.data, p.dataEpoch = h.LastOffset(), h.ProducerEpoch
	}
	pl[h.ProducerID] = p
}

// keepsData reports whether h is its producer's last data batch, kept
// (empty if need be) for the producer's sequence state.
func (p producerLast) keepsData(h BatchHeader) bool { return p.data == h.LastOffset() }

// keepsMarker reports whether the marker h is its producer's last batch
// at an epoch newer than any of its data, kept for the epoch.
func (p producerLast) keepsMarker(h BatchHeader) bool {
	return p.marker == h.LastOffset() && (p.data < 0 || p.markerEpoch > p.dataEpoch)
}
