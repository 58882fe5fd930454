package raft

import (
	"io"

	hraft "github.com/hashicorp/raft"
)

// StateMachine is a group's replicated state in weir's own terms, so that
// packages outside raft/ never see hashicorp/raft's types.
type StateMachine interface {
	// Apply applies one committed command. It runs on the group's apply
	// goroutine, in index order; its result is what Group.Apply returns
	// on the leader that proposed the entry. Entries at or below an index
	// the machine already holds (replayed after a restart) must be
	// skipped. e.Data is this Apply's to rewrite in place but not to keep:
	// on the leader that proposed it, it is the proposer's buffer, which
	// Raft does not read again once the log store has it (followers are
	// sent the store's copies); elsewhere it is a copy the store made for
	// this Apply (TestApplyMayRewriteData).
	Apply(e Entry) any
	// Snapshot captures what a snapshot needs, quickly: Apply waits.
	Snapshot() (Snapshot, error)
	// Restore replaces the state with a snapshot's contents (a follower
	// installing one sent by its leader).
	Restore(r io.Reader) error
}

// Entry is one committed command.
type Entry struct {
	Index uint64
	Term  uint64
	Data  []byte
}

// Snapshot is a captured state being written out. Persist runs off the
// apply goroutine; Release follows it, whatever its outcome.
type Snapshot interface {
	Persist(w io.Writer) error
	Release()
}

// MembershipObserver is implemented by a StateMachine whose applied index
// must also move over committed membership changes: Raft hands those to
// no Apply, so a machine that waits for an index (the controller's
// WaitIndex after adding a voter) would otherwise wait for the next
// command.
type MembershipObserver interface {
	// MembershipApplied runs on the apply goroutine, in index order with
	// Apply, for the configuration entry at index.
	MembershipApplied(index uint64)
}

// smAdapter runs a StateMachine as hashicorp's FSM, and as its
// ConfigurationStore so that membership entries reach a
// MembershipObserver.
type smAdapter struct{ sm StateMachine }

var (
	_ hraft.FSM                = smAdapter{}
	_ hraft.ConfigurationStore = smAdapter{}
)

func (a smAdapter) StoreConfiguration(index uint64, _ hraft.Configuration) {
	if o, ok := a.sm.(MembershipObserver); ok {
		o.MembershipApplied(index)
	}
}

func (a smAdapter) Apply(l *hraft.Log) any {
	if l.Type != hraft.LogCommand {
		return nil
	}
	return a.sm.Apply(Entry{Index: l.Index, Term: l.Term, Data: l.Data})
}

func (a smAdapter) Snapshot() (hraft.FSMSnapshot, error) {
	s, err := a.sm.Snapshot()
	if err != nil {
		return nil, err
	}
	return snapshotAdapter{s}, nil
}

func (a smAdapter) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	return a.sm.Restore(rc)
}

type snapshotAdapter struct{ s Snapshot }

func (s snapshotAdapter) Persist(sink hraft.SnapshotSink) error {
	if err := s.s.Persist(sink); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s snapshotAdapter) Release() { s.s.Release() }
