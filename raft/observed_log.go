package raft

import (
	hraft "github.com/hashicorp/raft"

	"github.com/weir-broker/weir/raft/walstore"
)

// LogObserver sees a group's Raft log on this node as it is written
// (Config.LogObserver). Both methods run on the group's Raft goroutine,
// inside the log store call, so they must return quickly and must not
// call into the group.
type LogObserver interface {
	// Stored is called for each entry of a write, in index order, once
	// the write is fsynced: on the leader before the entry counts toward
	// its commit, on a follower before it answers the append. A leader's
	// command entry carries the very slice Propose was given, so an
	// owner can recognise its own proposals by their first byte's
	// address.
	Stored(e StoredEntry)
	// Truncated is called after entries min..max were removed, by a
	// follower's conflict truncation or by compaction after a snapshot;
	// whatever the observer derived from them no longer holds.
	Truncated(min, max uint64)
}

// StoredEntry is an entry as LogObserver.Stored sees it. Data is nil for
// entries that are not commands (Raft's no-ops, barriers and
// configurations, which the state machine never sees), and stays the
// log's: it must not be kept or changed.
type StoredEntry struct {
	Index   uint64
	Term    uint64
	Command bool
	Data    []byte
}

// observedLog is a group's view of the shared log that tells an observer
// what each write stored. A failed write tells nothing: Raft steps down,
// and the next entries an observer sees start past a gap.
type observedLog struct {
	*walstore.GroupStore
	obs LogObserver
}

func (o observedLog) StoreLog(l *hraft.Log) error {
	return o.StoreLogs([]*hraft.Log{l})
}

func (o observedLog) StoreLogs(logs []*hraft.Log) error {
	if err := o.GroupStore.StoreLogs(logs); err != nil {
		return err
	}
	for _, l := range logs {
		e := StoredEntry{Index: l.Index, Term: l.Term}
		if l.Type == hraft.LogCommand {
			e.Command, e.Data = true, l.Data
		}
		o.obs.Stored(e)
	}
	return nil
}

func (o observedLog) DeleteRange(min, max uint64) error {
	err := o.GroupStore.DeleteRange(min, max)
	// Told even after a failure: the range may be partly gone.
	if min <= max {
		o.obs.Truncated(min, max)
	}
	return err
}
