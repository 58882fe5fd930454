package raft

import (
	"sync/atomic"

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

// groupLog is a group's view of the shared log. It tells an observer, if
// there is one, what each write stored; a failed write tells nothing:
// Raft steps down, and the next entries an observer sees start past a
// gap. While the group follows, it stores the leader's entries with
// walstore's hand-off, so that the apply takes them from memory instead
// of reading back what was just written (walstore/handoff.go): a
// follower's entries come from frames the transport decoded into fresh
// buffers, and Raft does not touch them once they are stored. A leader's
// are the proposers' buffers, which its own apply rewrites and the
// proposer recycles, so they are never held.
type groupLog struct {
	*walstore.GroupStore
	obs LogObserver // nil: none
	// raft is the group's Raft once it exists (nil before: nothing is
	// held). StoreLogs runs on Raft's own goroutine, which is also the
	// one that changes its state, so its state holds for the whole call.
	raft atomic.Pointer[hraft.Raft]
}

func (o *groupLog) StoreLog(l *hraft.Log) error {
	return o.StoreLogs([]*hraft.Log{l})
}

func (o *groupLog) StoreLogs(logs []*hraft.Log) error {
	var err error
	if r := o.raft.Load(); r != nil && r.State() == hraft.Follower {
		err = o.GroupStore.StoreLogsHandOff(logs)
	} else {
		err = o.GroupStore.StoreLogs(logs)
	}
	if err != nil || o.obs == nil {
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

func (o *groupLog) DeleteRange(min, max uint64) error {
	err := o.GroupStore.DeleteRange(min, max)
	// Told even after a failure: the range may be partly gone.
	if o.obs != nil && min <= max {
		o.obs.Truncated(min, max)
	}
	return err
}
