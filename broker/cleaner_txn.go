package broker

import "slices"

// forgetEmptyAborted drops from the partition's aborted transactions
// those whose abort markers (offsets, sorted) a clean found with no data
// of their transaction left, as Kafka's cleaner leaves them out of the
// .txnindex it rebuilds. They must go before the cleaner removes their
// markers (a delete horizon later): a read_committed consumer told of an
// aborted transaction of a producer skips that producer's transactional
// batches until it meets the abort marker, so an entry without its
// marker would hide the producer's later committed data. Nothing is lost
// by dropping them earlier: no data is left for them to hide, and the
// list rebuilt at a restart leaves them out too (rebuildAborted lists a
// transaction only from its data).
func (p *Partition) forgetEmptyAborted(markers []int64) {
	if len(markers) == 0 {
		return
	}
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	l := p.aborted.load()
	kept := make([]abortedTxn, 0, len(l))
	for _, t := range l {
		if _, found := slices.BinarySearch(markers, t.Last); !found {
			kept = append(kept, t)
		}
	}
	if len(kept) < len(l) {
		p.aborted.list.Store(&kept)
	}
}
