package walstore

import (
	"sync"

	hraft "github.com/hashicorp/raft"
)

// Hand-off of a follower's entries to its apply.
//
// A follower's Raft applies each committed entry by reading it back from
// the log store (hashicorp/raft's processLogs calls GetLog), moments
// after it stored the same bytes from the leader's append: a pread, an
// allocation of the entry's size the kernel must zero, and a CRC pass
// per entry, for data that was in memory all along. With three replicas
// producing that read-back was 9% of the CPU of the whole machine.
//
// StoreLogsHandOff stores entries exactly as StoreLogs does and then
// keeps them, Data and Extensions as the caller gave them (not copied),
// for the first GetLog of each index, which takes its entry: the store
// never hands one out twice, so whoever takes it (the apply) owns its
// bytes, as with an entry read from disk, and every later GetLog of that
// index reads the log. The caller gives the slices up, which a follower's
// transport can: each frame it decodes is a fresh allocation.
//
// Held entries are exactly what the log holds at their indexes: they are
// kept only once their write is synced and published, a DeleteRange
// through the same GroupStore that touches them (a follower's conflict
// truncation, compaction) drops them, and GetLog consults them only for
// indexes the published log holds. Memory is bounded per group and per
// store, and ReleaseHandOff gives a stopped group's share back; an entry
// not kept is read from the log as before.
const (
	// maxHandOffEntries bounds a group's held entries: a few appends'
	// worth (hashicorp's MaxAppendEntries is 64), since a follower
	// applies what it stored within one more append or heartbeat.
	maxHandOffEntries = 1024
	// DefaultHandOffBytes bounds the bytes held by all groups of a store
	// (Options.HandOffBytes). A follower holds what it stored until its
	// leader's next append or heartbeat says it is committed: under
	// load, with many partitions, a second or more of everything it
	// follows, and what the bound leaves out is read back. 64 MiB left
	// half of a loaded follower's entries to the log.
	DefaultHandOffBytes = 256 << 20
)

// handOff is a group's held entries: consecutive indexes from first.
type handOff struct {
	mu    sync.Mutex
	first uint64
	logs  []hraft.Log
}

// StoreLogsHandOff is StoreLogs, after which the entries are kept for
// the first GetLog of each index (see above). The caller must not touch
// the entries' Data or Extensions again.
func (gs *GroupStore) StoreLogsHandOff(logs []*hraft.Log) error {
	if err := gs.StoreLogs(logs); err != nil {
		return err
	}
	gs.hand.keep(gs.s, logs)
	return nil
}

// ReleaseHandOff forgets the held entries and returns their bytes to the
// store's budget; later GetLogs read the log. The group's owner calls it
// when the group stops on this node, so that a replica moved away does
// not keep its share of the budget.
func (gs *GroupStore) ReleaseHandOff() {
	gs.hand.mu.Lock()
	defer gs.hand.mu.Unlock()
	gs.hand.releaseLocked(gs.s, len(gs.hand.logs))
}

func entryBytes(l *hraft.Log) int64 { return int64(len(l.Data) + len(l.Extensions)) }

func (h *handOff) keep(s *Store, logs []*hraft.Log) {
	if len(logs) == 0 {
		return
	}
	var n int64
	for _, l := range logs {
		n += entryBytes(l)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.logs) > 0 && h.first+uint64(len(h.logs)) != logs[0].Index {
		h.releaseLocked(s, len(h.logs))
	}
	if len(h.logs)+len(logs) > maxHandOffEntries {
		return
	}
	if s.handOffBytes.Add(n) > s.handOffMax {
		s.handOffBytes.Add(-n)
		return
	}
	if len(h.logs) == 0 {
		h.first = logs[0].Index
	}
	for _, l := range logs {
		h.logs = append(h.logs, *l)
	}
}

// take moves the entry at index into l if it is held, and drops every
// held entry before it: the apply goes in index order, so those were
// read some other way and will not be asked for by it again.
func (h *handOff) take(s *Store, index uint64, l *hraft.Log) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.logs) == 0 || index < h.first || index-h.first >= uint64(len(h.logs)) {
		return false
	}
	i := int(index - h.first)
	*l = h.logs[i]
	h.releaseLocked(s, i+1)
	s.handedOff.Add(1)
	if s.met != nil {
		s.met.handedOff.Inc()
	}
	return true
}

// drop forgets the held entries if any of them is in [min, max].
func (h *handOff) drop(s *Store, min, max uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.logs) > 0 && min < h.first+uint64(len(h.logs)) && max >= h.first {
		h.releaseLocked(s, len(h.logs))
	}
}

// releaseLocked forgets the first n held entries.
func (h *handOff) releaseLocked(s *Store, n int) {
	var freed int64
	for i := range h.logs[:n] {
		freed += entryBytes(&h.logs[i])
	}
	rest := copy(h.logs, h.logs[n:])
	clear(h.logs[rest:])
	h.logs = h.logs[:rest]
	h.first += uint64(n)
	s.handOffBytes.Add(-freed)
}
