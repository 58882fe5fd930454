package broker

import (
	"slices"
	"sort"
	"sync"

	"github.com/weir-broker/weir/log"
)

// epochEntry records that leader epoch epoch wrote its first batch at
// startOffset.
type epochEntry struct {
	epoch       int32
	startOffset int64
}

// epochCache is a partition's leader epoch history: the start offset of
// every leader epoch still in the log, in increasing epoch (and offset)
// order. It is Kafka's LeaderEpochFileCache without the checkpoint file:
// the batches carry their partitionLeaderEpoch, so the cache is rebuilt
// from the log when the partition opens. It answers OffsetForLeaderEpoch,
// with which consumers detect log truncation after a leader change
// (KIP-101, KIP-320).
//
// The cache locks itself; callers need no other lock. It must be told of
// every batch appended (observe) and every truncation of either end of
// the log (truncateFrom, truncateBefore).
type epochCache struct {
	mu      sync.Mutex
	entries []epochEntry
}

// observe records a batch appended at startOffset with leader epoch
// epoch. Batches are observed in offset order; only a batch whose epoch is
// greater than the latest one starts a new entry, as Kafka's log recovery
// does (LogSegment.recover). A negative epoch (a batch written without
// one) is ignored.
//
// A new leader should also call observe(its epoch, log end offset) when
// it is elected, before it writes anything, as Kafka's
// Partition.makeLeader does: a consumer still on the previous epoch then
// learns that it ended at the log end, and an emptied log (retention)
// still knows the current epoch.
func (c *epochCache) observe(epoch int32, startOffset int64) {
	if epoch < 0 || startOffset < 0 {
		return
	}
	c.mu.Lock()
	c.entries = appendEpoch(c.entries, epoch, startOffset)
	c.mu.Unlock()
}

func appendEpoch(entries []epochEntry, epoch int32, startOffset int64) []epochEntry {
	if n := len(entries); n > 0 && epoch <= entries[n-1].epoch {
		return entries
	}
	// Offsets only grow along the log; an entry at or past startOffset
	// can only be left over from a truncation nobody reported. Kafka's
	// assign drops such entries too, keeping start offsets increasing.
	for len(entries) > 0 && entries[len(entries)-1].startOffset >= startOffset {
		entries = entries[:len(entries)-1]
	}
	return append(entries, epochEntry{epoch, startOffset})
}

// truncateFrom forgets the epochs that started at or after offset: the
// log was truncated to end at offset (Kafka's truncateFromEnd). A
// negative offset changes nothing, as in Kafka.
func (c *epochCache) truncateFrom(offset int64) {
	if offset < 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	i := sort.Search(len(c.entries), func(i int) bool { return c.entries[i].startOffset >= offset })
	c.entries = c.entries[:i]
}

// truncateBefore follows the log start moving up to offset (retention,
// DeleteRecords): of the entries starting at or before offset only the
// latest stays, with its start moved up to offset; entries after offset
// are untouched. This is Kafka's truncateFromStart.
func (c *epochCache) truncateBefore(offset int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = clampStart(c.entries, offset)
}

func clampStart(entries []epochEntry, offset int64) []epochEntry {
	// i is the number of entries starting at or before offset.
	i := sort.Search(len(entries), func(i int) bool { return entries[i].startOffset > offset })
	if i == 0 {
		return entries
	}
	entries = slices.Delete(entries, 0, i-1)
	entries[0].startOffset = offset
	return entries
}

// rebuild replaces the cache with the epochs of the batches in l, from
// its log start offset to its end. The log is read without holding the
// cache's lock, so rebuild must not run while batches are being appended
// and observed: the partition calls it when it opens, or with appends
// stopped after it truncated the log.
func (c *epochCache) rebuild(l *log.Log) error {
	start := l.LogStartOffset()
	var entries []epochEntry
	err := l.Batches(start, func(h log.BatchHeader) bool {
		if h.PartitionLeaderEpoch >= 0 {
			entries = appendEpoch(entries, h.PartitionLeaderEpoch, h.BaseOffset)
		}
		return true
	})
	if err != nil {
		return err
	}
	// The log may start inside its first batch (DeleteRecords), whose
	// base offset is then below the log start.
	entries = clampStart(entries, start)
	c.mu.Lock()
	c.entries = entries
	c.mu.Unlock()
	return nil
}

// latest is the newest leader epoch in the log, -1 when there is none.
func (c *epochCache) latest() int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) == 0 {
		return -1
	}
	return c.entries[len(c.entries)-1].epoch
}

// epochAt is the leader epoch that wrote offset: the latest epoch
// starting at or before it, -1 if offset precedes every epoch. Offsets at
// or past the log end get the latest epoch. This is Kafka's
// LeaderEpochFileCache.epochForOffset.
func (c *epochCache) epochAt(offset int64) int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := sort.Search(len(c.entries), func(i int) bool { return c.entries[i].startOffset > offset })
	if i == 0 {
		return -1
	}
	return c.entries[i-1].epoch
}

// endOffsetFor answers OffsetForLeaderEpoch for requested with Kafka's
// LeaderEpochFileCache.endOffsetFor rules; logEnd is the log end offset:
//   - requested -1 (undefined): (-1, -1);
//   - requested is the latest epoch: (requested, logEnd);
//   - requested is newer than every epoch, or the cache is empty:
//     (-1, -1);
//   - requested is older than every epoch: (requested, start of the first
//     epoch), since the log holds nothing before it;
//   - otherwise the largest epoch <= requested and, as its end, the start
//     of the next epoch.
func (c *epochCache) endOffsetFor(requested int32, logEnd int64) (epoch int32, endOffset int64) {
	if requested == -1 {
		return -1, -1
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.entries)
	if n > 0 && c.entries[n-1].epoch == requested {
		return requested, logEnd
	}
	// higher is the first entry with an epoch above requested.
	higher := sort.Search(n, func(i int) bool { return c.entries[i].epoch > requested })
	switch {
	case higher == n:
		return -1, -1
	case higher == 0:
		return requested, c.entries[0].startOffset
	default:
		return c.entries[higher-1].epoch, c.entries[higher].startOffset
	}
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch for this partition: the
// largest leader epoch at or below leaderEpoch that wrote to the log and
// the offset where it ended, the log end offset for the current epoch.
// (-1, -1) means the epoch is unknown (undefined, newer than any in the
// log, or the log has no epochs).
func (p *Partition) EndOffsetForEpoch(leaderEpoch int32) (epoch int32, endOffset int64) {
	return p.epochs.endOffsetFor(leaderEpoch, p.log.EndOffset())
}
