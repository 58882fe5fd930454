package broker

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/log"
)

// A partition's side of transactions: transactional batches open a
// producer's transaction (producerTable), a marker (a control batch the
// coordinator has written through WriteTxnMarkers) closes it, the last
// stable offset (LSO) stays below the first offset of the oldest open
// transaction, and aborted transactions are listed for read_committed
// fetches, as Kafka's .txnindex lists them.
//
// Markers are entries of the partition's Raft log like produced batches
// (kind 3 below), so every replica applies them at the same offset and
// reaches the same producer state, LSO and aborted list.
//
//	kind 3, marker:  int64 timestamp, int64 producer id, int16 epoch,
//	                 byte commit (1) or abort (0), int32 coordinator epoch
const entryMarker = 3

// markerEntryLen is the length of a marker entry's body.
const markerEntryLen = 8 + 2 + 1 + 4

func encodeMarker(ts, producerID int64, epoch int16, commit bool, coordinatorEpoch int32) []byte {
	e := make([]byte, entryHeaderLen, entryHeaderLen+markerEntryLen)
	e[0], e[1] = entryVersion, entryMarker
	binary.BigEndian.PutUint64(e[2:], uint64(ts))
	e = binary.BigEndian.AppendUint64(e, uint64(producerID))
	e = binary.BigEndian.AppendUint16(e, uint16(epoch))
	var c byte
	if commit {
		c = 1
	}
	e = append(e, c)
	return binary.BigEndian.AppendUint32(e, uint32(coordinatorEpoch))
}

// abortedTxn is one aborted transaction of a partition (Kafka's
// AbortedTxn): its producer, its first offset, its marker's offset, and
// the LSO when the marker was written, which bounds later entries' first
// offsets from below (every transaction open then began at or after it).
type abortedTxn struct {
	ProducerID, First, Last, LSO int64
}

// abortedTxns is a partition's aborted transactions by marker offset.
// The apply goroutine appends (under appendMu); fetches read a published
// slice without locking: appending in place never touches what an
// earlier reader's length covers, and anything else publishes a copy.
type abortedTxns struct {
	list atomic.Pointer[[]abortedTxn]
}

func (a *abortedTxns) load() []abortedTxn {
	if l := a.list.Load(); l != nil {
		return *l
	}
	return nil
}

// add appends t; p.appendMu is held.
func (a *abortedTxns) add(t abortedTxn) {
	l := append(a.load(), t)
	a.list.Store(&l)
}

// dropBefore forgets transactions whose marker is below offset (the log
// start moved past them); p.appendMu is held.
func (a *abortedTxns) dropBefore(offset int64) {
	l := a.load()
	i, _ := slices.BinarySearchFunc(l, offset, func(t abortedTxn, off int64) int { return cmp.Compare(t.Last, off) })
	if i > 0 {
		rest := slices.Clone(l[i:])
		a.list.Store(&rest)
	}
}

// dropFrom forgets transactions whose marker is at or past offset (the
// log was cut there); p.appendMu is held.
func (a *abortedTxns) dropFrom(offset int64) {
	l := a.load()
	i, _ := slices.BinarySearchFunc(l, offset, func(t abortedTxn, off int64) int { return cmp.Compare(t.Last, off) })
	if i < len(l) {
		kept := slices.Clone(l[:i])
		a.list.Store(&kept)
	}
}

// AbortedTxn is one entry of a read_committed fetch's
// AbortedTransactions.
type AbortedTxn struct {
	ProducerID, FirstOffset int64
}

// noAborted is the answer with no aborted transaction: empty, not nil
// (read_committed answers carry a list), and shared.
var noAborted = []AbortedTxn{}

// abortedBetween lists, as Kafka's collectAbortedTransactions does, the
// aborted transactions a read_committed consumer reading from offset up
// to upperBound must know: marker at or past offset, first offset below
// upperBound; the scan stops at the first transaction whose LSO is at or
// past upperBound, past which none can qualify.
func (p *Partition) abortedBetween(offset, upperBound int64) []AbortedTxn {
	l := p.aborted.load()
	i, _ := slices.BinarySearchFunc(l, offset, func(t abortedTxn, off int64) int { return cmp.Compare(t.Last, off) })
	out := noAborted
	for _, t := range l[i:] {
		if t.First < upperBound {
			out = append(out, AbortedTxn{ProducerID: t.ProducerID, FirstOffset: t.First})
		}
		if t.LSO >= upperBound {
			break
		}
	}
	return out
}

// publishStable sets the LSO from the open transactions; p.appendMu is
// held, and it runs before the high watermark moves, so a reader never
// sees a watermark past a batch of a transaction it does not yet see
// open.
func (p *Partition) publishStable() {
	p.firstOpen.Store(p.producers.firstOpen())
}

// LastStableOffset is the offset below which every transaction is
// decided: the first offset of the oldest open transaction, or the high
// watermark when none is open. It is never below the log start, which
// DeleteRecords or retention may have moved past an open transaction's
// first offset (Kafka's maybeIncrementFirstUnstableOffset does the same):
// ListOffsets would answer read_committed consumers an offset that no
// longer exists.
func (p *Partition) LastStableOffset() int64 {
	hw := p.hwm.Load()
	first := p.firstOpen.Load()
	if first < 0 || first >= hw {
		return hw
	}
	return min(max(first, p.log.LogStartOffset()), hw)
}

// applyMarker appends a transaction marker (entry kind 3).
func (p *Partition) applyMarker(epoch int32, ts int64, body []byte) applyResult {
	if len(body) != markerEntryLen {
		return applyResult{err: fmt.Errorf("%w: marker entry of %d bytes", kerr.CorruptMessage, len(body))}
	}
	pid := int64(binary.BigEndian.Uint64(body))
	producerEpoch := int16(binary.BigEndian.Uint16(body[8:]))
	commit := body[10] == 1
	coordinatorEpoch := int32(binary.BigEndian.Uint32(body[11:]))
	p.markerSettled(pid)
	if err := p.producers.checkMarker(pid, producerEpoch, coordinatorEpoch); err != nil {
		return applyResult{err: err}
	}
	lso := p.LastStableOffset()
	batch := log.BuildMarker(ts, pid, producerEpoch, commit, coordinatorEpoch)
	headers, err := log.ValidateBatches(batch)
	if err != nil {
		return applyResult{err: fmt.Errorf("%w: %v", kerr.CorruptMessage, err)}
	}
	res, err := p.log.AppendValidated(batch, headers, log.AppendOptions{LeaderEpoch: epoch})
	if err != nil {
		return applyResult{err: p.fail(fmt.Errorf("append marker: %w", err))}
	}
	first := p.producers.endTxn(pid, producerEpoch, coordinatorEpoch)
	if !commit && first >= 0 {
		p.aborted.add(abortedTxn{ProducerID: pid, First: first, Last: res.BaseOffset, LSO: lso})
	}
	p.epochs.observe(epoch, res.BaseOffset)
	p.publishStable()
	p.hwm.Store(p.log.EndOffset())
	p.wakeAppended()
	if p.onMarker != nil {
		p.onMarker(res.BaseOffset, pid, commit)
	}
	return applyResult{append: AppendResult{BaseOffset: res.BaseOffset, LogAppendTime: -1, LogStartOffset: res.LogStartOffset}}
}

// rebuildAborted lists the log's aborted transactions again, from its
// batch headers and its markers' types (a restart, a snapshot install):
// a producer's transaction begins at its first transactional batch after
// its previous marker. p.appendMu is held or the replica is not running.
func (p *Partition) rebuildAborted() error {
	var list []abortedTxn
	open := map[int64]int64{}
	firstOpen := func() int64 {
		first := int64(-1)
		for _, f := range open {
			if first < 0 || f < first {
				first = f
			}
		}
		return first
	}
	err := p.log.Batches(p.log.LogStartOffset(), func(h log.BatchHeader) bool {
		switch {
		case h.ProducerID < 0 || !h.IsTransactional():
			return true
		case !h.IsControl():
			if _, ok := open[h.ProducerID]; !ok {
				open[h.ProducerID] = h.BaseOffset
			}
			return true
		}
		{
			first, had := open[h.ProducerID]
			lso := firstOpen()
			if lso < 0 {
				lso = h.BaseOffset
			}
			delete(open, h.ProducerID)
			if had {
				list = append(list, abortedTxn{ProducerID: h.ProducerID, First: first, Last: h.BaseOffset, LSO: lso})
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	// Which of them aborted is in the markers' records.
	kept := list[:0]
	for _, t := range list {
		data, err := p.log.Read(t.Last, 1, log.Obligatory, t.Last+1)
		if err != nil {
			return err
		}
		if commit, ok := log.MarkerType(data); ok && !commit {
			kept = append(kept, t)
		}
	}
	p.aborted.list.Store(&kept)
	return nil
}
